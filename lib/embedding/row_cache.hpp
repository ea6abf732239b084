// The embedding layer's cache of remote rows: plain LRU over a fixed number of row slots, each
// row labelled with the version its bucket had before it was fetched. A row is served only under
// the version the caller says is current; one under another version is dropped when found (never
// served).
//
// Why plain LRU and not set-associative (FBGEMM / TorchRec): in software the associativity buys
// nothing (no fixed ways to search in parallel), and a full LRU never evicts a hot row because
// its set is crowded. The index is an open-addressing table with linear probing (load <= 1/2)
// and backward-shift deletion, so a lookup is one hash and a short probe, and an eviction leaves
// no tombstones to slow later probes. A cell holds the id, its slot and its version, so a probe
// and the version check read consecutive bytes (no hop through a per-slot array). The recency
// order is an intrusive doubly linked list over the slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace netsparse::embedding {

class RowCache {
 public:
  // capacity_rows = 0: a cache that holds nothing (find never hits, insert keeps nothing).
  RowCache(std::uint64_t capacity_rows, std::size_t row_bytes);

  // The cached row of `id` if it is held under `version` (it becomes the most recently used);
  // nullptr otherwise. A row held under another version is removed and counted as stale. The
  // pointer stays valid until the next insert() or clear() (find never moves rows).
  const std::byte* find(std::uint64_t id, std::uint32_t version);
  // Holds a copy of `row` for `id` under `version` (replacing what `id` had), evicting the least
  // recently used row when full. Pointers from find() may be invalidated.
  void insert(std::uint64_t id, std::uint32_t version, const std::byte* row);
  // Starts loading the index cell of `id` (a batch's finds and inserts are independent: issued
  // a few ids ahead, the probe's first memory access overlaps the work on the ids before).
  void prefetch(std::uint64_t id) const noexcept {
    if (capacity_ != 0) __builtin_prefetch(&cells_[cell_of(id)]);
  }
  void clear();

  std::uint64_t size() const noexcept { return used_; }
  std::uint64_t capacity() const noexcept { return capacity_; }
  std::size_t row_bytes() const noexcept { return row_bytes_; }
  std::uint64_t stale_dropped() const noexcept { return stale_; }
  std::uint64_t evictions() const noexcept { return evictions_; }
  // The id of the least / most recently used row (the cache must not be empty).
  std::uint64_t lru_id() const { return ids_[tail_]; }
  std::uint64_t mru_id() const { return ids_[head_]; }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  std::size_t cell_of(std::uint64_t id) const noexcept;
  // The index cell holding `id`, or the empty cell where it would go.
  std::size_t probe(std::uint64_t id) const noexcept;
  void erase_cell(std::size_t cell);
  void unlink(std::uint32_t slot) noexcept;
  void push_front(std::uint32_t slot) noexcept;
  // Takes the row of `cell` out; its slot goes to the free list.
  void remove(std::size_t cell);

  std::uint64_t capacity_;
  std::size_t row_bytes_;
  std::uint64_t used_ = 0;        // rows held
  std::uint32_t next_fresh_ = 0;  // slots [0, next_fresh_) have been handed out
  std::vector<std::uint32_t> free_;
  std::uint64_t stale_ = 0, evictions_ = 0;
  struct Cell {
    std::uint64_t id;
    std::uint32_t slot;  // kNone: empty
    std::uint32_t version;
  };
  struct Links {
    std::uint32_t prev, next;
  };
  // Index: a power of two of cells.
  std::vector<Cell> cells_;
  int hash_shift_ = 64;
  // Per slot: its id (to find its cell when evicted), the LRU links; its row at
  // rows_[slot * row_bytes_].
  std::vector<std::uint64_t> ids_;
  std::vector<Links> links_;
  std::vector<std::byte> rows_;
  std::uint32_t head_ = kNone, tail_ = kNone;  // most / least recently used
};

// A batch's distinct ids in first-appearance order: position j of the batch -> index of its id
// in distinct(). Reused across batches; its open-addressing table is sized to the batch and
// cleared by a generation stamp, not a pass over the table.
class IdDedup {
 public:
  // Fills slot_of[j] for every j; returns the distinct ids.
  const std::vector<std::uint64_t>& run(const std::uint64_t* ids, std::size_t n,
                                        std::uint32_t* slot_of);
  const std::vector<std::uint64_t>& distinct() const noexcept { return distinct_; }
  // Whether the last run() saw `id` (false before any run).
  bool contains(std::uint64_t id) const noexcept;
  void prefetch(std::uint64_t id) const noexcept;

 private:
  std::size_t cell_of(std::uint64_t id) const noexcept;
  struct Entry {  // one probe reads one entry
    std::uint64_t key;
    std::uint32_t value, stamp;
  };
  std::vector<Entry> table_;
  std::uint32_t stamp_ = 0;
  std::vector<std::uint64_t> distinct_;
};

// A set of ids for membership tests (the ids announced for reuse-aware admission): the batch
// de-duplication's table (IdDedup) kept after the run, asked by contains().
class IdSet {
 public:
  void assign(const std::uint64_t* ids, std::size_t n) {
    slots_.resize(n);
    table_.run(ids, n, slots_.data());
  }
  bool contains(std::uint64_t id) const noexcept { return table_.contains(id); }
  void prefetch(std::uint64_t id) const noexcept { table_.prefetch(id); }
  std::size_t size() const noexcept { return table_.distinct().size(); }

 private:
  IdDedup table_;
  std::vector<std::uint32_t> slots_;
};

}  // namespace netsparse::embedding
