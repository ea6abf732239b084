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

// For a loop over many properties of one size: f.template operator()<kP>() with the size as a
// constant where it is a common one (f32 rows of K = 1, 2, 4, 16, 128), kP = 0 otherwise (the
// loop then reads the size at run time). Chosen once per loop, not per property.
template <class F>
decltype(auto) with_prop_size(std::uint32_t bytes, F&& f) {
  switch (bytes) {
    case 4:
      return f.template operator()<4>();
    case 8:
      return f.template operator()<8>();
    case 16:
      return f.template operator()<16>();
    case 64:
      return f.template operator()<64>();
    case 512:
      return f.template operator()<512>();
    default:
      return f.template operator()<0>();
  }
}

}  // namespace netsparse::rig
