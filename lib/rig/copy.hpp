// Copying one property. The size is fixed for a whole kernel, so dispatching once on the common
// sizes lets the compiler emit fixed-size (vectorized) moves instead of a libc memcpy call per PR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace netsparse::rig {

inline void copy_prop(void* dst, const void* src, std::uint32_t bytes) noexcept {
  switch (bytes) {
    case 4:
      std::memcpy(dst, src, 4);
      return;
    case 8:
      std::memcpy(dst, src, 8);
      return;
    case 16:
      std::memcpy(dst, src, 16);
      return;
    case 32:
      std::memcpy(dst, src, 32);
      return;
    case 64:
      std::memcpy(dst, src, 64);
      return;
    case 128:
      std::memcpy(dst, src, 128);
      return;
    default:
      std::memcpy(dst, src, bytes);
  }
}

}  // namespace netsparse::rig
