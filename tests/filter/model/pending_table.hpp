// Test and benchmark model, not in the library (tests/filter/model/CMakeLists.txt says why).
// The Pending PR Table of one RIG client unit (MICRO '25 §5.2): the PRs it has in flight, so a
// repeated idx is coalesced onto the pending request instead of being sent again. The hardware
// table is a 256-entry CAM; here the CAM is an open-addressing hash index over idx.
//
// Entries live in fixed slots 0..capacity-1, and a slot's id is stable while it is pending (the
// engine sends it as the PR's req_id and finds the entry again from the response). The hash
// index only stores slot ids; it uses linear probing with backward-shift deletion, so deleting
// never moves an entry and never leaves tombstones. Waiters (who asked for the idx) are kept in
// a fixed pool of list nodes, first waiter first.
//
// Single-threaded (one table per unit); nothing allocates after construction.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace netsparse::filter {

enum class PendingInsert : int { kNew, kCoalesced, kFull };
struct PendingResult {
  PendingInsert kind;
  std::uint32_t entry;  // the entry's id for kNew/kCoalesced; undefined for kFull
};

class PendingTable {
 public:
  // capacity >= 1 entries; max_waiters waiter slots in total (0 = 4 * capacity; must be
  // >= capacity). std::invalid_argument otherwise.
  explicit PendingTable(std::uint32_t capacity = 256, std::uint32_t max_waiters = 0);

  // kNew: entry allocated for idx, `waiter` recorded as its first waiter.
  // kCoalesced: idx already pending; `waiter` appended to that entry's waiters.
  // kFull: no entry (or no waiter slot) free -> backpressure, nothing recorded.
  PendingResult insert(std::uint64_t idx, std::uint64_t waiter) noexcept;
  // True iff `entry` is pending for exactly this idx (false for a stale or forged response).
  bool matches(std::uint32_t entry, std::uint64_t idx) const noexcept {
    return entry < capacity_ && entries_[entry].pending && entries_[entry].idx == idx;
  }
  // Entry id pending for idx, or kNotFound.
  std::uint32_t find(std::uint64_t idx) const noexcept;
  static constexpr std::uint32_t kNotFound = 0xFFFFFFFFu;

  // Releases the entry and calls fn(waiter) for every waiter, first waiter first. The entry and
  // each waiter slot are released before fn sees the waiter, so fn may insert again.
  // std::invalid_argument if `entry` is not pending. fn must not throw.
  template <class Fn>
  void complete(std::uint32_t entry, Fn&& fn);
  // Releases everything (watchdog failure), calling fn(idx, waiter) for each waiter.
  template <class Fn>
  void drain(Fn&& fn);

  std::uint32_t size() const noexcept { return size_; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  bool full() const noexcept { return size_ == capacity_ || free_waiter_ == kNil; }
  std::uint32_t waiters_free() const noexcept { return waiters_free_; }
  std::uint64_t idx_of(std::uint32_t entry) const noexcept { return entries_[entry].idx; }
  std::uint32_t waiter_count(std::uint32_t entry) const noexcept {
    return entries_[entry].n_waiters;
  }

 private:
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  struct Entry {
    std::uint64_t idx = 0;
    std::uint32_t first_waiter = kNil;
    std::uint32_t last_waiter = kNil;
    std::uint32_t n_waiters = 0;
    std::uint32_t next_free = kNil;  // free-entry stack link while not pending
    bool pending = false;
  };
  struct Waiter {
    std::uint64_t waiter = 0;
    std::uint32_t next = kNil;
  };

  std::uint32_t home_slot(std::uint64_t idx) const noexcept {
    // Fibonacci hashing: idxs of one destination are often strided; the multiply spreads them.
    return static_cast<std::uint32_t>((idx * 0x9E3779B97F4A7C15ull) >> hash_shift_);
  }
  std::uint32_t index_slot_of(std::uint64_t idx) const noexcept;  // slot holding idx, or kNil
  void index_erase(std::uint32_t slot) noexcept;
  std::uint32_t alloc_waiter(std::uint64_t waiter) noexcept;
  void release_entry(std::uint32_t entry) noexcept;  // index + entry slot, not the waiters
  [[noreturn]] void not_pending(std::uint32_t entry) const;

  std::uint32_t capacity_;
  std::uint32_t size_ = 0;
  std::vector<Entry> entries_;
  std::uint32_t free_entry_ = kNil;
  std::vector<Waiter> waiters_;
  std::uint32_t free_waiter_ = kNil;
  std::uint32_t waiters_free_ = 0;
  std::vector<std::uint32_t> index_;  // entry id or kNil; power-of-two size >= 2 * capacity
  std::uint32_t index_mask_ = 0;
  int hash_shift_ = 64;
};

template <class Fn>
void PendingTable::complete(std::uint32_t entry, Fn&& fn) {
  if (entry >= capacity_ || !entries_[entry].pending) not_pending(entry);
  std::uint32_t w = entries_[entry].first_waiter;
  release_entry(entry);
  while (w != kNil) {
    const std::uint32_t next = waiters_[w].next;
    const std::uint64_t who = waiters_[w].waiter;
    waiters_[w].next = free_waiter_;
    free_waiter_ = w;
    ++waiters_free_;
    fn(who);
    w = next;
  }
}

template <class Fn>
void PendingTable::drain(Fn&& fn) {
  for (std::uint32_t e = 0; e < capacity_; ++e) {
    if (!entries_[e].pending) continue;
    const std::uint64_t idx = entries_[e].idx;
    complete(e, [&](std::uint64_t who) { fn(idx, who); });
  }
}

}  // namespace netsparse::filter
