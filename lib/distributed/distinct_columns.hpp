// DistinctColumns: the distinct columns of a column stream, numbered 0, 1, ... in ascending
// column order, for the changing-pattern (direct) path of exchange_rig.cpp.
//
// Why a bitmap with per-word prefix counts, and not a tag per column: the path renumbers every
// remote nonzero of every run onto the run's distinct remote columns. A tag per column (8 B,
// epoch | slot) made that a random read-modify-write into n_cols x 8 B per nonzero: 512 KiB on
// kron:16, which missed L1 and L2 on every nonzero (`perf annotate` of the split pass: 35 % of
// its samples on the instruction after the tag load, ~16 ns per remote nonzero). A bitmap is
// n_cols / 8 bytes (8 KiB on kron:16, L1-resident) and the slot of a column is a rank query: the
// count of marked columns in the words before it (a 4 B prefix per 64 columns) plus a popcount.
// Two streaming passes instead of one pass of cache misses; the distinct list comes out sorted,
// so each owner's rows are asked for in ascending order.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/csr.hpp"

namespace netsparse::dist {

class DistinctColumns {
 public:
  // Sizes the sets for columns [0, n_cols) and forgets every mark.
  void reset(gidx_t n_cols) {
    if (n_cols < 0) throw std::invalid_argument("DistinctColumns: negative column count");
    const auto n_words = static_cast<std::size_t>((n_cols + 63) / 64);
    words_.assign(n_words, 0);
    prefix_.assign(n_words + 1, 0);
    n_cols_ = n_cols;
  }
  [[nodiscard]] gidx_t n_cols() const noexcept { return n_cols_; }

  // Marks column c (0 <= c < n_cols: the caller's columns are validated CSR columns).
  void mark(gidx_t c) noexcept {
    words_[static_cast<std::size_t>(c) >> 6] |= std::uint64_t{1} << (c & 63);
  }

  // Marks column c when `yes` (0 <= c < n_cols either way), without a branch.
  void mark_if(gidx_t c, bool yes) noexcept {
    words_[static_cast<std::size_t>(c) >> 6] |= std::uint64_t{yes} << (c & 63);
  }

  // Ends the marking: numbers the marked columns in ascending order and appends them to `out`.
  // Returns how many there are.
  std::size_t number(std::vector<std::uint64_t>& out) {
    std::uint32_t count = 0;
    const std::size_t n_words = words_.size();
    for (std::size_t w = 0; w < n_words; ++w) {
      prefix_[w] = count;
      std::uint64_t bits = words_[w];
      count += static_cast<std::uint32_t>(std::popcount(bits));
      while (bits != 0) {
        out.push_back((static_cast<std::uint64_t>(w) << 6) |
                      static_cast<std::uint64_t>(std::countr_zero(bits)));
        bits &= bits - 1;
      }
    }
    prefix_[n_words] = count;
    return count;
  }

  // The number of marked column c (after number()): the marked columns before it.
  [[nodiscard]] std::uint32_t slot(gidx_t c) const noexcept {
    const auto w = static_cast<std::size_t>(c) >> 6;
    const std::uint64_t below = (std::uint64_t{1} << (c & 63)) - 1;
    return prefix_[w] + static_cast<std::uint32_t>(std::popcount(words_[w] & below));
  }

  // Forgets every mark (n_cols / 8 bytes cleared: 8 KiB on kron:16), keeping the sizes.
  void clear() noexcept {
    if (!words_.empty()) std::memset(words_.data(), 0, words_.size() * sizeof(std::uint64_t));
  }

 private:
  std::vector<std::uint64_t> words_;   // bit c % 64 of word c / 64: column c is marked
  std::vector<std::uint32_t> prefix_;  // per word: marked columns in the words before it
  gidx_t n_cols_ = 0;
};

}  // namespace netsparse::dist
