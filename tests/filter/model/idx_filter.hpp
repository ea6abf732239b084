// Test and benchmark model, not in the library (tests/filter/model/CMakeLists.txt says why).
// The Idx Filter (MICRO '25 §5.2): one bit per idx of the current column window, set when the
// property of that idx has arrived; a PR whose bit is set is redundant and dropped. Shared by all
// client units of a process, so every operation is a lock-free atomic.
//
// Reset between iterations must not cost O(columns) each time. Each 64-bit word holds 32 filter
// bits (low half) and the 32-bit epoch in which they were written (high half). A word whose tag
// differs from the current epoch reads as all-zero; the first writer of the epoch claims it by
// CAS. new_epoch() is an increment; only when the 32-bit tag wraps is the array really cleared
// (once every 2^32 - 1 epochs). Cost: 2 bits of memory per filter bit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace netsparse::filter {

class IdxFilter {
 public:
  explicit IdxFilter(std::uint64_t n_bits = 0);
  IdxFilter(const IdxFilter&) = delete;
  IdxFilter& operator=(const IdxFilter&) = delete;

  // Window of n_bits idxs, all clear. Reuses the storage when it is large enough (O(1) then).
  // Not concurrent with other calls.
  void resize(std::uint64_t n_bits);
  std::uint64_t size() const noexcept { return n_bits_; }

  // Precondition for the three below: i < size() (checked; a violation aborts with a message,
  // since silently touching another word would corrupt the filter).
  bool test(std::uint64_t i) const noexcept;    // acquire
  bool test_and_set(std::uint64_t i) noexcept;  // returns the previous value; acq_rel
  void set(std::uint64_t i) noexcept { (void)test_and_set(i); }

  // Logically clears every bit: O(1), except a real clear once per 2^32 - 1 epochs.
  // Not concurrent with set/test (callers separate iterations with a barrier).
  void new_epoch() noexcept;
  // Same effect on the bits as n calls of new_epoch(), in O(1) unless the tag wraps.
  void advance_epochs(std::uint64_t n) noexcept;

  std::uint32_t epoch() const noexcept { return epoch_.load(std::memory_order_relaxed); }
  // Number of set bits in the current epoch. O(words); for tests and statistics.
  std::uint64_t count() const noexcept;
  std::size_t memory_bytes() const noexcept { return capacity_words_ * sizeof(std::uint64_t); }

 private:
  static constexpr std::uint64_t kBitsPerWord = 32;
  [[noreturn]] static void out_of_range(std::uint64_t i, std::uint64_t n) noexcept;
  void clear_words() noexcept;

  std::unique_ptr<std::atomic<std::uint64_t>[]> words_;
  std::uint64_t capacity_words_ = 0;
  std::uint64_t n_bits_ = 0;
  // Current tag; never 0, so zero-initialized words read as stale (clear).
  std::atomic<std::uint32_t> epoch_{1};
};

}  // namespace netsparse::filter
