// Counter-based randomness for the generators (internal to the sparse component): every random
// word is a pure function of (key, counter), so a row's draws do not depend on which rank or
// thread generates it, or on what was generated before.
#pragma once

#include <cmath>
#include <cstdint>

#include "support/hash.hpp"

namespace netsparse::sparse_detail {

using support::mix64;

// A stream of random words keyed by (seed, stream id): word(k) = mix(key + (k+1) * gamma), the
// splitmix64 sequence started at a key that is itself a hash of seed and stream id.
class CounterRng {
 public:
  constexpr CounterRng(std::uint64_t seed, std::uint64_t stream) noexcept
      : key_(mix64(seed ^ mix64(stream + 0x632be59bd9b4e019ULL))) {}

  [[nodiscard]] constexpr std::uint64_t word(std::uint64_t counter) const noexcept {
    return mix64(key_ + (counter + 1) * support::kGoldenGamma);
  }
  // Uniform in [0, 1) with 53 random bits.
  [[nodiscard]] double uniform(std::uint64_t counter) const noexcept {
    return static_cast<double>(word(counter) >> 11) * 0x1.0p-53;
  }

 private:
  std::uint64_t key_;
};

// A keyed pseudo-random permutation of [0, n): a balanced Feistel network on the smallest even
// number of bits covering n, with cycle walking to stay inside [0, n) (the network's domain is
// < 4n, so a walk takes fewer than 4 steps on average). Both directions are O(1) expected.
class KeyedPermutation {
 public:
  KeyedPermutation(std::uint64_t n, std::uint64_t seed) noexcept : n_(n) {
    int bits = 0;
    while (bits < 64 && (std::uint64_t{1} << bits) < n) ++bits;
    bits += bits & 1;
    half_bits_ = bits / 2;
    half_mask_ = (std::uint64_t{1} << half_bits_) - 1;
    for (int r = 0; r < kRounds; ++r)
      round_keys_[r] = mix64(seed + 0x5851f42d4c957f2dULL * (r + 1));
  }

  [[nodiscard]] std::uint64_t forward(std::uint64_t x) const noexcept {
    if (n_ <= 1) return x;
    do x = encrypt(x);
    while (x >= n_);
    return x;
  }
  [[nodiscard]] std::uint64_t inverse(std::uint64_t y) const noexcept {
    if (n_ <= 1) return y;
    do y = decrypt(y);
    while (y >= n_);
    return y;
  }

 private:
  // Four rounds: Luby and Rackoff's bound for a strong pseudo-random permutation.
  static constexpr int kRounds = 4;

  [[nodiscard]] std::uint64_t round_function(int r, std::uint64_t half) const noexcept {
    return mix64(round_keys_[r] ^ half) & half_mask_;
  }
  [[nodiscard]] std::uint64_t encrypt(std::uint64_t x) const noexcept {
    std::uint64_t left = x >> half_bits_;
    std::uint64_t right = x & half_mask_;
    for (int r = 0; r < kRounds; ++r) {
      const std::uint64_t next_right = left ^ round_function(r, right);
      left = right;
      right = next_right;
    }
    return (left << half_bits_) | right;
  }
  [[nodiscard]] std::uint64_t decrypt(std::uint64_t y) const noexcept {
    std::uint64_t left = y >> half_bits_;
    std::uint64_t right = y & half_mask_;
    for (int r = kRounds - 1; r >= 0; --r) {
      const std::uint64_t prev_left = right ^ round_function(r, left);
      right = left;
      left = prev_left;
    }
    return (left << half_bits_) | right;
  }

  std::uint64_t n_;
  int half_bits_ = 0;
  std::uint64_t half_mask_ = 0;
  std::uint64_t round_keys_[kRounds] = {};
};

}  // namespace netsparse::sparse_detail
