// An embedding table partitioned by rows over the ranks of a context, looked up in batches
// (DLRM-style) through the RIG engine with a cache of remote rows, and updated with the
// scatter-reduce verb (NS_WR_RIS). docs/embedding.md has the design and the measurements.
//
// Every owner keeps one version word per bucket of `bucket_rows` consecutive rows. Per lookup
// batch: the ids are de-duplicated (each distinct id is fetched once), the versions of the
// buckets the batch's remote ids fall in are read (one small gather), remote ids found in the
// local LRU cache under their bucket's current version are served from it, and every other
// distinct id goes out in one RIG gather. push_gradients() adds deltas into the owners' rows
// with one NS_WR_RIS (sum) and then bumps the version of every bucket it wrote (a second,
// small NS_WR_RIS), so a row cached before an update is never served after it, and a row in a
// bucket nobody wrote stays valid.
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
  // Rows per version bucket (a power of two): an update invalidates the cached rows of the
  // buckets it wrote. Fixed at construction and equal on every rank (checked: NS_ERR_INVALID
  // on every rank otherwise); set_options() refuses another value. 1 = a version per row.
  // The default, 16, by measurement over 1-256 (docs/embedding.md).
  std::uint32_t bucket_rows = kDefaultBucketRows;
  static constexpr std::uint32_t kDefaultBucketRows = 16;
};

// Counters since construction or reset_stats(); local to this rank.
struct EmbeddingStats {
  std::uint64_t lookups = 0;         // ids looked up
  std::uint64_t distinct = 0;        // distinct ids of the batches (summed over batches)
  std::uint64_t local_rows = 0;      // distinct ids this rank owns (fetched by its own engine)
  std::uint64_t cache_hits = 0;      // distinct remote ids served from the cache
  std::uint64_t cache_stale = 0;     // cached rows refused because their bucket's version moved on
  std::uint64_t fetched_rows = 0;    // ids put into gathers (remote and local)
  std::uint64_t gathers = 0;         // RIG work requests of rows (version reads included)
  std::uint64_t version_reads = 0;   // version exchanges (one small gather each)
  std::uint64_t version_rows = 0;    // hidden rows of version words gathered (row bytes each)
  std::uint64_t version_words = 0;   // version words those rows carried
  std::uint64_t pushes = 0;          // push_gradients calls
  std::uint64_t bumped_buckets = 0;  // bucket versions this rank's pushes bumped
  std::uint64_t bump_rows = 0;       // hidden rows those bumps sent (row bytes each)
  // Wall time of the lookups' phases on this rank, nanoseconds (a few clock reads per batch):
  // de-duplication and owners; the version gather; cache finds; the gather of the misses;
  // filling the output and inserting the fetched rows into the cache.
  std::uint64_t dedup_ns = 0, version_ns = 0, cache_ns = 0, gather_ns = 0, output_ns = 0;
};

// Owns its rows: every rank's block [row_offsets[r], row_offsets[r + 1]) of `dim` floats, plus
// hidden rows that hold the owner's layout header and its bucket versions. Registers them as the
// context's property region, so a context holds one table at a time. Construction and
// destruction are collective; construction ends with ctx.quiesce().
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
  // Bumps the version of every bucket of this rank (through its engine, ordered with the peers'
  // reads): the rows written through local_rows() are never served from a peer's cache as they
  // were before.
  void local_rows_changed();

  // out[j * dim .. ) = row ids[j]; out.size() must be ids.size() * dim.
  void lookup(std::span<const std::uint64_t> ids, std::span<float> out);
  // Row ids[j] += deltas[j * dim .. ) on its owner (repeats summed); returns when every owner
  // has applied them and the versions of the buckets written have been bumped. deltas.size() must
  // be ids.size() * dim.
  void push_gradients(std::span<const std::uint64_t> ids, std::span<const float> deltas);

  // Changes the lookup policy of this rank (local); the cache is emptied. bucket_rows must stay
  // as constructed (NS_ERR_INVALID otherwise).
  void set_options(const EmbeddingOptions& options);
  const EmbeddingOptions& options() const noexcept;
  EmbeddingStats stats() const noexcept;
  void reset_stats() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace netsparse
