// Copying one property. The size is fixed for a whole kernel, so dispatching once on the common
// sizes lets the compiler emit fixed-size (vectorized) moves instead of a libc memcpy call per PR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace netsparse::rig {

// One fixed-size memcpy per listed size (the compiler turns each into vector moves), else a
// plain memcpy.
template <std::uint32_t... Sizes>
inline void copy_fixed_or(void* dst, const void* src, std::uint32_t bytes) noexcept {
  const bool fixed = ((bytes == Sizes ? (std::memcpy(dst, src, Sizes), true) : false) || ...);
  if (!fixed) std::memcpy(dst, src, bytes);
}

inline void copy_prop(void* dst, const void* src, std::uint32_t bytes) noexcept {
  copy_fixed_or<4, 8, 16, 32, 64, 128>(dst, src, bytes);
}

}  // namespace netsparse::rig
