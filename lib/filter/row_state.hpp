// The software-native Idx Filter of the RIG engine: two bits of state per global row, so that
// one lookup answers both questions the paper's NIC asks per PR (MICRO '25 §5.2-5.3):
//   kPresent    the property has arrived at its place  -> the Idx Filter drops the PR (filtered)
//   kRequested  a PR for it is in flight                -> the Pending PR Table's CAM would
//                                                          coalesce it (coalesced)
//   kNone       neither                                 -> a read PR is sent
// In hardware the second question is a CAM search of the unit's Pending PR Table; in software
// a hash probe per PR was the engine's largest per-PR cost, whereas the answer is one more bit
// next to the filter bit (same cache line, same load). The Pending PR Table proper (the record
// of what each in-flight PR must do when answered) stays in the client unit, indexed directly
// by the PR's request id.
//
// Epochs (the Idx Filter's reset trick): each 64-bit word holds 16 rows x 2 bits (low half) and the
// 32-bit epoch that wrote them (high half); a word of another epoch reads as all kNone, so
// new_epoch() is O(1) and the array is really cleared only when the tag wraps. 4 bits of memory
// per row. Single writer: only the thread that drives the engine touches it (no atomics).
#pragma once

#include <cstdint>
#include <memory>

namespace netsparse::filter {

enum RowState : std::uint32_t { kRowNone = 0, kRowRequested = 1, kRowPresent = 2 };

class RowStateFilter {
 public:
  RowStateFilter() = default;
  RowStateFilter(const RowStateFilter&) = delete;
  RowStateFilter& operator=(const RowStateFilter&) = delete;

  // n rows, all kNone. Reuses the storage when it is large enough. Throws std::bad_alloc.
  void resize(std::uint64_t rows);
  std::uint64_t size() const noexcept { return rows_; }
  // Bytes resize(rows) allocates (for memory budgets, before allocating).
  static std::uint64_t bytes_for(std::uint64_t rows) noexcept {
    return (rows + kRowsPerWord - 1) / kRowsPerWord * sizeof(std::uint64_t);
  }

  // Preconditions below: i < size() (the caller checks the window; not re-checked here).
  RowState state(std::uint64_t i) const noexcept {
    const std::uint64_t w = words_[i / kRowsPerWord];
    if ((w >> 32) != epoch_) return kRowNone;
    return static_cast<RowState>((w >> shift(i)) & 3u);
  }
  // A cache hint for row i's word (any i: out-of-range rows are ignored). Rows are claimed at
  // random, and a filter larger than the cache would otherwise stall every claim on a miss.
  void prefetch(std::uint64_t i) const noexcept {
    if (i < rows_) __builtin_prefetch(&words_[i / kRowsPerWord], 1);
  }
  // Returns the previous state; a kNone row becomes kRequested.
  RowState claim(std::uint64_t i) noexcept {
    std::uint64_t& w = words_[i / kRowsPerWord];
    if ((w >> 32) != epoch_) w = std::uint64_t{epoch_} << 32;
    const auto old = static_cast<RowState>((w >> shift(i)) & 3u);
    if (old == kRowNone) w |= std::uint64_t{kRowRequested} << shift(i);
    return old;
  }
  void set(std::uint64_t i, RowState s) noexcept {
    std::uint64_t& w = words_[i / kRowsPerWord];
    if ((w >> 32) != epoch_) w = std::uint64_t{epoch_} << 32;
    w = (w & ~(std::uint64_t{3} << shift(i))) | (std::uint64_t{s} << shift(i));
  }

  // Every row back to kNone: O(1), except a real clear once per 2^32 - 1 epochs.
  void new_epoch() noexcept;
  std::uint32_t epoch() const noexcept { return epoch_; }
  // Rows in state s in the current epoch. O(rows); tests and statistics.
  std::uint64_t count(RowState s) const noexcept;
  std::uint64_t memory_bytes() const noexcept { return capacity_words_ * sizeof(std::uint64_t); }

 private:
  static constexpr std::uint64_t kRowsPerWord = 16;
  static constexpr unsigned shift(std::uint64_t i) noexcept {
    return static_cast<unsigned>(i % kRowsPerWord) * 2;
  }
  std::unique_ptr<std::uint64_t[]> words_;
  std::uint64_t capacity_words_ = 0;
  std::uint64_t rows_ = 0;
  std::uint32_t epoch_ = 1;  // never 0: zeroed words read as stale
};

}  // namespace netsparse::filter
