// An embedding table partitioned by rows over the ranks of a context, looked up in batches
// (DLRM-style) through the RIG engine with a cache of remote rows, and updated with the
// scatter-reduce verb (NS_WR_RIS). docs/embedding.md has the design and the measurements.
//
// Per lookup batch: the ids are de-duplicated (each distinct id is fetched once), remote ids
// found in the local LRU cache with the owner's current epoch are served from it, and every
// other distinct id goes out in one RIG gather. push_gradients() adds deltas into the owners'
// rows with one NS_WR_RIS (sum) and then bumps the epoch of every owner it changed, so a row
// cached before the update is never served after it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "netsparse/netsparse.hpp"

namespace netsparse {

struct EmbeddingOptions {
  // Remote rows the LRU cache holds (0: no cache).
  std::uint64_t cache_rows = 0;
  // false: every id of a batch goes into the gather as it comes (a plain gather; the cache is
  // then not used either). Kept for comparisons.
  bool dedup = true;
};

// Counters since construction or reset_stats(); local to this rank.
struct EmbeddingStats {
  std::uint64_t lookups = 0;       // ids looked up
  std::uint64_t distinct = 0;      // distinct ids of the batches (summed over batches)
  std::uint64_t local_rows = 0;    // distinct ids this rank owns (fetched by its own engine)
  std::uint64_t cache_hits = 0;    // distinct remote ids served from the cache
  std::uint64_t cache_stale = 0;   // cached rows refused because their owner's epoch moved on
  std::uint64_t fetched_rows = 0;  // ids put into gathers (remote and local)
  std::uint64_t gathers = 0;       // RIG work requests of rows
  std::uint64_t epoch_reads = 0;   // epoch exchanges (one small gather each)
  std::uint64_t pushes = 0;        // push_gradients calls
};

// Owns its rows: every rank's block [row_offsets[r], row_offsets[r + 1]) of `dim` floats, plus
// one hidden row that holds the owner's epoch. Registers them as the context's property region,
// so a context holds one table at a time. Construction and destruction are collective.
//
// Thread safety: one thread at a time per table. Errors throw netsparse::Error: an id at or
// beyond total_rows() (NS_ERR_INVALID, before anything is fetched or written), a failed gather
// or scatter (NS_ERR_TRANSPORT: a dead peer, the context's watchdog; the output is then invalid
// and the cache is left as it was before the call).
class EmbeddingTable {
 public:
  EmbeddingTable(Context& ctx, std::uint32_t dim, std::span<const std::uint64_t> row_offsets,
                 const EmbeddingOptions& options = {});
  ~EmbeddingTable();
  EmbeddingTable(EmbeddingTable&&) noexcept;
  EmbeddingTable& operator=(EmbeddingTable&&) noexcept;
  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;

  std::uint32_t dim() const noexcept;
  std::uint64_t total_rows() const noexcept;
  // This rank's rows (row_offsets[rank] onwards), dim floats each. Peers read them at any time:
  // write them only while no peer looks up or pushes (separate the phases, e.g. a barrier), and
  // call local_rows_changed() afterwards.
  std::span<float> local_rows() noexcept;
  // Bumps this rank's epoch (through its engine, ordered with the peers' reads): the rows
  // written through local_rows() are never served from a peer's cache as they were before.
  void local_rows_changed();

  // out[j * dim .. ) = row ids[j]; out.size() must be ids.size() * dim.
  void lookup(std::span<const std::uint64_t> ids, std::span<float> out);
  // Row ids[j] += deltas[j * dim .. ) on its owner (repeats summed); returns when every owner
  // has applied them and its epoch has been bumped. deltas.size() must be ids.size() * dim.
  void push_gradients(std::span<const std::uint64_t> ids, std::span<const float> deltas);

  // Changes the lookup policy of this rank (local); the cache is emptied.
  void set_options(const EmbeddingOptions& options);
  const EmbeddingOptions& options() const noexcept;
  EmbeddingStats stats() const noexcept;
  void reset_stats() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace netsparse
