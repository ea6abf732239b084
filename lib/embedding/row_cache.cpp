#include "embedding/row_cache.hpp"
#include "support/hash.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace netsparse::embedding {

RowCache::RowCache(std::uint64_t capacity_rows, std::size_t row_bytes)
    : capacity_(capacity_rows), row_bytes_(row_bytes) {
  if (capacity_rows >= kNone) throw std::length_error("RowCache: at most 2^32 - 2 rows");
  if (capacity_rows == 0) return;
  const std::uint64_t cells = std::bit_ceil(std::max<std::uint64_t>(16, 2 * capacity_rows));
  cells_.assign(cells, Cell{0, kNone, 0});
  hash_shift_ = 64 - std::countr_zero(cells);
  ids_.resize(capacity_rows);
  links_.resize(capacity_rows);
  rows_.resize(capacity_rows * row_bytes);
}

std::size_t RowCache::cell_of(std::uint64_t id) const noexcept {
  return support::fibonacci_slot(id, hash_shift_);
}

std::size_t RowCache::probe(std::uint64_t id) const noexcept {
  const std::size_t mask = cells_.size() - 1;
  std::size_t c = cell_of(id);
  while (cells_[c].slot != kNone && cells_[c].id != id) c = (c + 1) & mask;
  return c;
}

void RowCache::unlink(std::uint32_t slot) noexcept {
  const Links l = links_[slot];
  (l.prev == kNone ? head_ : links_[l.prev].next) = l.next;
  (l.next == kNone ? tail_ : links_[l.next].prev) = l.prev;
}

void RowCache::push_front(std::uint32_t slot) noexcept {
  links_[slot] = Links{kNone, head_};
  (head_ == kNone ? tail_ : links_[head_].prev) = slot;
  head_ = slot;
}

// Backward-shift deletion: later cells of the probe run move up so every id stays reachable
// from its home cell without tombstones.
void RowCache::erase_cell(std::size_t cell) {
  const std::size_t mask = cells_.size() - 1;
  std::size_t hole = cell;
  for (std::size_t c = (cell + 1) & mask; cells_[c].slot != kNone; c = (c + 1) & mask) {
    const std::size_t home = cell_of(cells_[c].id);
    // Move c into the hole unless its home lies cyclically in (hole, c].
    const bool home_after_hole =
        hole <= c ? (home > hole && home <= c) : (home > hole || home <= c);
    if (!home_after_hole) {
      cells_[hole] = cells_[c];
      hole = c;
    }
  }
  cells_[hole].slot = kNone;
}

void RowCache::remove(std::size_t cell) {
  const std::uint32_t slot = cells_[cell].slot;
  unlink(slot);
  erase_cell(cell);
  free_.push_back(slot);
  --used_;
}

const std::byte* RowCache::find(std::uint64_t id, std::uint32_t version) {
  if (capacity_ == 0) return nullptr;
  const std::size_t cell = probe(id);
  const Cell& c = cells_[cell];
  if (c.slot == kNone) return nullptr;
  const std::uint32_t slot = c.slot;
  if (c.version != version) {
    ++stale_;
    remove(cell);
    return nullptr;
  }
  if (head_ != slot) {
    unlink(slot);
    push_front(slot);
  }
  return rows_.data() + std::size_t{slot} * row_bytes_;
}

void RowCache::insert(std::uint64_t id, std::uint32_t version, const std::byte* row) {
  if (capacity_ == 0) return;
  std::size_t cell = probe(id);
  std::uint32_t slot = cells_[cell].slot;
  if (slot != kNone) {
    unlink(slot);
  } else {
    if (used_ == capacity_) {
      // Evict the least recently used row: its slot is reused for `id`.
      const std::uint32_t victim = tail_;
      unlink(victim);
      erase_cell(probe(ids_[victim]));
      slot = victim;
      ++evictions_;
    } else if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      ++used_;
    } else {
      slot = next_fresh_++;
      ++used_;
    }
    cell = probe(id);  // the erase may have moved the empty cell
    cells_[cell].id = id;
    cells_[cell].slot = slot;
    ids_[slot] = id;
  }
  cells_[cell].version = version;
  push_front(slot);
  std::memcpy(rows_.data() + std::size_t{slot} * row_bytes_, row, row_bytes_);
}

void RowCache::clear() {
  std::fill(cells_.begin(), cells_.end(), Cell{0, kNone, 0});
  used_ = 0;
  next_fresh_ = 0;
  free_.clear();
  head_ = tail_ = kNone;
}

const std::vector<std::uint64_t>& IdDedup::run(const std::uint64_t* ids, std::size_t n,
                                               std::uint32_t* slot_of) {
  const std::size_t want = std::bit_ceil(std::max<std::size_t>(1024, 2 * n));
  if (table_.size() < want || ++stamp_ == 0) {
    table_.assign(std::max(want, table_.size()), Entry{0, 0, 0});
    stamp_ = 1;
  }
  const std::size_t mask = table_.size() - 1;
  const int shift = 64 - std::countr_zero(table_.size());
  distinct_.clear();
  constexpr std::size_t kAhead = 16;  // ids: independent probes, the next ones' loads start early
  for (std::size_t j = 0; j < n; ++j) {
    if (j + kAhead < n)
      __builtin_prefetch(&table_[support::fibonacci_slot(ids[j + kAhead], shift)]);
    const std::uint64_t id = ids[j];
    std::size_t c = support::fibonacci_slot(id, shift);
    while (table_[c].stamp == stamp_ && table_[c].key != id) c = (c + 1) & mask;
    Entry& e = table_[c];
    if (e.stamp != stamp_) {
      e = Entry{id, static_cast<std::uint32_t>(distinct_.size()), stamp_};
      distinct_.push_back(id);
    }
    slot_of[j] = e.value;
  }
  return distinct_;
}

std::size_t IdDedup::cell_of(std::uint64_t id) const noexcept {
  return support::fibonacci_slot(id, 64 - std::countr_zero(table_.size()));
}

void IdDedup::prefetch(std::uint64_t id) const noexcept {
  if (stamp_ != 0) __builtin_prefetch(&table_[cell_of(id)]);
}

bool IdDedup::contains(std::uint64_t id) const noexcept {
  if (stamp_ == 0) return false;
  const std::size_t mask = table_.size() - 1;
  for (std::size_t c = cell_of(id);; c = (c + 1) & mask) {
    if (table_[c].stamp != stamp_) return false;
    if (table_[c].key == id) return true;
  }
}

}  // namespace netsparse::embedding
