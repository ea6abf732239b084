// The floating-point precision a kernel computes in.
//
// Sparse matrices hold their values in double (csr.hpp); the precision of the dense operands,
// of the matrix values a kernel reads and of the properties the RIG engine moves is chosen per
// compute object: TiledMatrix (local kernels) and DistOptions::scalar (distributed kernels).
// fp32 moves half the bytes of fp64 per property, which is why it stays the default of the
// benchmarks; solvers (PETSc, Trilinos) compute in fp64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace netsparse {

enum class ScalarType : std::uint8_t { f32, f64 };

template <class T>
inline constexpr bool is_kernel_scalar_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The ScalarType of float / double.
template <class T>
requires is_kernel_scalar_v<T>
inline constexpr ScalarType scalar_type_of =
    std::is_same_v<T, float> ? ScalarType::f32 : ScalarType::f64;

[[nodiscard]] constexpr std::size_t scalar_bytes(ScalarType t) noexcept {
  return t == ScalarType::f32 ? 4 : 8;
}

// "f32" / "f64".
[[nodiscard]] constexpr std::string_view to_string(ScalarType t) noexcept {
  return t == ScalarType::f32 ? "f32" : "f64";
}

// Accepts "f32", "float", "fp32", "single" and "f64", "double", "fp64"; false otherwise.
[[nodiscard]] constexpr bool parse_scalar_type(std::string_view name, ScalarType& out) noexcept {
  if (name == "f32" || name == "float" || name == "fp32" || name == "single") {
    out = ScalarType::f32;
    return true;
  }
  if (name == "f64" || name == "double" || name == "fp64") {
    out = ScalarType::f64;
    return true;
  }
  return false;
}

}  // namespace netsparse
