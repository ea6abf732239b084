#include "filter/model/pending_table.hpp"

#include <bit>
#include <string>

namespace netsparse::filter {

PendingTable::PendingTable(std::uint32_t capacity, std::uint32_t max_waiters)
    : capacity_(capacity) {
  if (capacity == 0 || capacity > (1u << 30)) {
    throw std::invalid_argument("PendingTable: capacity must be in [1, 2^30], got " +
                                std::to_string(capacity));
  }
  const std::uint64_t n_waiters = max_waiters == 0 ? 4ull * capacity : max_waiters;
  if (n_waiters < capacity || n_waiters >= kNil) {
    throw std::invalid_argument("PendingTable: max_waiters " + std::to_string(n_waiters) +
                                " must be in [capacity, 2^32 - 1)");
  }
  entries_.resize(capacity);
  for (std::uint32_t e = 0; e < capacity; ++e)
    entries_[e].next_free = e + 1 < capacity ? e + 1 : kNil;
  free_entry_ = 0;
  waiters_.resize(n_waiters);
  for (std::uint32_t w = 0; w < n_waiters; ++w) {
    waiters_[w].next = w + 1 < n_waiters ? w + 1 : kNil;
  }
  free_waiter_ = 0;
  waiters_free_ = static_cast<std::uint32_t>(n_waiters);
  // Load factor <= 1/2 keeps linear-probe chains short even when every entry is pending.
  const std::uint64_t slots = std::bit_ceil(2ull * capacity);
  index_.assign(slots, kNil);
  index_mask_ = static_cast<std::uint32_t>(slots - 1);
  hash_shift_ = 64 - std::countr_zero(slots);
}

std::uint32_t PendingTable::index_slot_of(std::uint64_t idx) const noexcept {
  for (std::uint32_t s = home_slot(idx) & index_mask_;; s = (s + 1) & index_mask_) {
    const std::uint32_t e = index_[s];
    if (e == kNil) return kNil;
    if (entries_[e].idx == idx) return s;
  }
}

std::uint32_t PendingTable::find(std::uint64_t idx) const noexcept {
  const std::uint32_t s = index_slot_of(idx);
  return s == kNil ? kNotFound : index_[s];
}

std::uint32_t PendingTable::alloc_waiter(std::uint64_t waiter) noexcept {
  const std::uint32_t w = free_waiter_;
  free_waiter_ = waiters_[w].next;
  --waiters_free_;
  waiters_[w] = Waiter{waiter, kNil};
  return w;
}

PendingResult PendingTable::insert(std::uint64_t idx, std::uint64_t waiter) noexcept {
  std::uint32_t s = home_slot(idx) & index_mask_;
  for (;; s = (s + 1) & index_mask_) {
    const std::uint32_t e = index_[s];
    if (e == kNil) break;
    if (entries_[e].idx == idx) {  // pending already: coalesce
      if (free_waiter_ == kNil) return {PendingInsert::kFull, kNil};
      const std::uint32_t w = alloc_waiter(waiter);
      Entry& entry = entries_[e];
      waiters_[entry.last_waiter].next = w;
      entry.last_waiter = w;
      ++entry.n_waiters;
      return {PendingInsert::kCoalesced, e};
    }
  }
  if (free_entry_ == kNil || free_waiter_ == kNil) return {PendingInsert::kFull, kNil};
  // `s` is the empty slot that ended the probe: the new key's place.
  const std::uint32_t e = free_entry_;
  Entry& entry = entries_[e];
  free_entry_ = entry.next_free;
  const std::uint32_t w = alloc_waiter(waiter);
  entry.idx = idx;
  entry.first_waiter = entry.last_waiter = w;
  entry.n_waiters = 1;
  entry.next_free = kNil;
  entry.pending = true;
  index_[s] = e;
  ++size_;
  return {PendingInsert::kNew, e};
}

void PendingTable::index_erase(std::uint32_t hole) noexcept {
  // Backward-shift deletion: pull later members of the probe run into the hole whenever the
  // hole lies on their path from their home slot, so lookups never need tombstones.
  std::uint32_t s = hole;
  for (;;) {
    s = (s + 1) & index_mask_;
    const std::uint32_t e = index_[s];
    if (e == kNil) break;
    const std::uint32_t home = home_slot(entries_[e].idx) & index_mask_;
    // Distance home->s versus home->hole, both cyclic: move iff the hole is not farther.
    if (((s - home) & index_mask_) >= ((s - hole) & index_mask_)) {
      index_[hole] = e;
      hole = s;
    }
  }
  index_[hole] = kNil;
}

void PendingTable::release_entry(std::uint32_t entry) noexcept {
  index_erase(index_slot_of(entries_[entry].idx));
  Entry& e = entries_[entry];
  e.pending = false;
  e.first_waiter = e.last_waiter = kNil;
  e.n_waiters = 0;
  e.next_free = free_entry_;
  free_entry_ = entry;
  --size_;
}

void PendingTable::not_pending(std::uint32_t entry) const {
  throw std::invalid_argument("PendingTable::complete: entry " + std::to_string(entry) +
                              " is not pending");
}

}  // namespace netsparse::filter
