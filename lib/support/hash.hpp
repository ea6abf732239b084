// The two hashes every layer uses, in one place: splitmix64 (a portable, fixed 64-bit mix, never
// std::hash, whose values the standard library may change) and Fibonacci hashing (multiply by
// 2^64 / golden ratio, keep the top bits) for the slot of a key in a power-of-two open-addressing
// table. Header-only; constexpr so that generators can be evaluated at compile time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace netsparse::support {

// 2^64 / golden ratio, odd: splitmix64's increment and Fibonacci hashing's multiplier.
inline constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// The splitmix64 finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mixer with full
// avalanche.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One splitmix64 step from state x: the increment, then the finalizer.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  return mix64(x + kGoldenGamma);
}

// The home slot of key in a table of 2^(64 - shift) slots (shift = 64 - log2(slots)): the top
// bits of key * kGoldenGamma, which spread consecutive keys over the whole table.
constexpr std::size_t fibonacci_slot(std::uint64_t key, int shift) noexcept {
  return static_cast<std::size_t>((key * kGoldenGamma) >> shift);
}

}  // namespace netsparse::support
