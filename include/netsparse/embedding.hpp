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
#include <vector>

#include "netsparse/netsparse.hpp"

namespace netsparse {

// Which fetched remote rows enter the cache (docs/embedding.md, "Reuse-aware admission").
enum class CacheAdmission : std::uint8_t {
  kAll,       // every fetched remote row (plain LRU)
  kUpcoming,  // once the cache is full, only rows whose id is among the ids last passed to
              // announce_upcoming() (the batches the caller has already formed): a row used
              // once does not evict a row that will be used again. Until it is full every row
              // is kept (evicting nothing). Nothing else changes: a cached row is still served
              // only under its bucket's current version.
};

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
  // Local to this rank, may differ between ranks.
  CacheAdmission admission = CacheAdmission::kAll;
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
  // Fetched remote rows put into the cache / left out by CacheAdmission::kUpcoming.
  std::uint64_t cache_admitted = 0, cache_declined = 0;
};

// Owns its rows: every rank's block [row_offsets[r], row_offsets[r + 1]) of `dim` floats, plus
// hidden rows that hold the owner's layout header and its bucket versions. Registers them as the
// context's property region, so a context holds one table (or one EmbeddingTables set) at a
// time; many tables in one context: EmbeddingTables below. Construction and
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
  // Row ids[j] += deltas[j * dim .. ) on its owner (repeats summed: with options.dedup here,
  // before sending, so each distinct row travels once; otherwise by the owner); returns when every
  // owner has applied them and the versions of the buckets written have been bumped.
  // deltas.size() must be ids.size() * dim.
  void push_gradients(std::span<const std::uint64_t> ids, std::span<const float> deltas);
  // The ids of the lookups to come (e.g. the next batch or two, already formed): with
  // CacheAdmission::kUpcoming a fetched remote row evicts a cached one only if its id is among
  // them. Kept (copied) until the next call; local, no communication. An id at or beyond
  // total_rows() throws NS_ERR_INVALID (the announcement is then left as it was).
  void announce_upcoming(std::span<const std::uint64_t> ids);

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

// One table of an EmbeddingTables set: its row width and its own partition of rows over the
// ranks (rank r owns [row_offsets[r], row_offsets[r + 1]), size() + 1 entries from 0).
struct EmbeddingTableShape {
  std::uint32_t dim = 0;
  std::vector<std::uint64_t> row_offsets;
};

// Many embedding tables (DLRM: one per categorical feature) sharing one engine, one registered
// region, one cache and one batch of lookups: lookup() takes an id list per table and fetches
// the misses of every table in ONE gather (one exchange, the same frames), push_gradients()
// sends the deltas of every table in one scatter-reduce. Each table has its own dim and row
// partition. The set stacks its tables in its one region (the engine serves one region per
// context): rank p's block holds p's rows of table 0, then of table 1, ..., then the hidden
// header and version rows; a region row is row_stride() = max dim floats wide, so a narrower
// table's rows are padded to it (on the wire as in memory). Everything else as EmbeddingTable
// (the same options, versions, cache and phases); the stats are the set's, over every table.
//
// With options.dedup, push_gradients first sums the deltas of repeated (table, id) pairs of the
// call locally, so each distinct row travels once (the owner's sum is the same up to the order of
// float additions).
//
// Errors as EmbeddingTable's; an id at or beyond table t's total_rows names the table, the id and
// its position, and is found before anything is fetched or written (NS_ERR_INVALID).
class EmbeddingTables {
 public:
  // Collective; every rank passes the same shapes and bucket_rows (checked: NS_ERR_INVALID on
  // every rank otherwise). At least one table; every dim at least 1.
  EmbeddingTables(Context& ctx, std::span<const EmbeddingTableShape> tables,
                  const EmbeddingOptions& options = {});
  ~EmbeddingTables();
  EmbeddingTables(EmbeddingTables&&) noexcept;
  EmbeddingTables& operator=(EmbeddingTables&&) noexcept;
  EmbeddingTables(const EmbeddingTables&) = delete;
  EmbeddingTables& operator=(const EmbeddingTables&) = delete;

  std::size_t count() const noexcept;
  // A table index at or beyond count() throws NS_ERR_INVALID (dim, total_rows, local_rows).
  std::uint32_t dim(std::size_t table) const;
  std::uint64_t total_rows(std::size_t table) const;
  // Floats between consecutive rows of local_rows(): the largest dim of the set.
  std::uint32_t row_stride() const noexcept;
  // This rank's rows of `table`: its row count times row_stride() floats; row k's values are
  // the first dim(table) floats at k * row_stride() (the rest is padding, never read by a
  // lookup). The same phases as EmbeddingTable::local_rows.
  std::span<float> local_rows(std::size_t table);
  // Bumps every bucket version of this rank (every table): see EmbeddingTable.
  void local_rows_changed();

  // For every table t: out[t][j * dim(t) .. ) = row ids[t][j] of table t. ids and out have
  // count() entries; out[t].size() must be ids[t].size() * dim(t). One gather for all tables.
  void lookup(std::span<const std::span<const std::uint64_t>> ids,
              std::span<const std::span<float>> out);
  // Row ids[t][j] of table t += deltas[t][j * dim(t) .. ) on its owner; one scatter-reduce for
  // all tables, then the version bumps. deltas[t].size() must be ids[t].size() * dim(t).
  void push_gradients(std::span<const std::span<const std::uint64_t>> ids,
                      std::span<const std::span<const float>> deltas);
  // EmbeddingTable::announce_upcoming per table (ids has count() entries).
  void announce_upcoming(std::span<const std::span<const std::uint64_t>> ids);

  void set_options(const EmbeddingOptions& options);
  const EmbeddingOptions& options() const noexcept;
  EmbeddingStats stats() const noexcept;
  void reset_stats() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reuse-aware batching (the SmartNIC dissertation, section 5.4): forms training batches whose
// samples share ids, so a batch has fewer distinct rows to fetch. Each sample is a set of keys
// (its ids; for many tables mix (table, id) with table_key). At the start of every epoch and
// then every refresh_batches batches, the samples not yet served in the epoch are re-bucketed:
// each gets a min-hash signature (signature_hashes hash functions, fresh seeds at every
// refresh) over its *shared* keys (those in 2 to max(16, batch_samples / 16) remaining samples:
// the keys batching can save fetches of), the samples are sorted by signature (an LSH bucket --
// equal first min-hash -- holds samples sharing that key), and batches are grown from that
// order: a batch starts at the first sample not yet taken and then takes the sample sharing the
// most keys with the batch so far (an inverted index of the shared keys), or the next in
// signature order when none shares any. Every epoch's batches are a permutation of all samples
// (each exactly once; the last batch of an epoch may be smaller). Local and deterministic (the
// same seed gives the same batches); no MPI. docs/embedding.md has the measurements.
struct SimilarityBatchingOptions {
  std::size_t batch_samples = 0;       // samples per batch, at least 1
  std::uint32_t signature_hashes = 2;  // min-hash functions per signature, 1-16
  // Re-bucket the epoch's remaining samples every this many batches (0: once per epoch).
  std::uint32_t refresh_batches = 0;
  std::uint64_t seed = 1;
  // false: a uniformly random order of the remaining samples at each refresh (the baseline).
  bool similarity = true;
};

class SimilarityBatcher {
 public:
  // Sample s has keys[sample_offsets[s] .. sample_offsets[s + 1]) (copied). sample_offsets: the
  // number of samples + 1 non-decreasing entries from 0, the last equal to keys.size(), fewer
  // than 2^32 samples and 2^31 keys; bad options or offsets throw netsparse::Error (NS_ERR_INVALID,
  // naming the argument).
  SimilarityBatcher(std::span<const std::uint64_t> sample_offsets,
                    std::span<const std::uint64_t> keys, const SimilarityBatchingOptions& options);
  ~SimilarityBatcher();
  SimilarityBatcher(SimilarityBatcher&&) noexcept;
  SimilarityBatcher& operator=(SimilarityBatcher&&) noexcept;
  SimilarityBatcher(const SimilarityBatcher&) = delete;
  SimilarityBatcher& operator=(const SimilarityBatcher&) = delete;

  // The next batch's sample indices, valid until the next call; after an epoch's last batch
  // the next call starts the next epoch.
  std::span<const std::uint32_t> next_batch();
  std::size_t samples() const noexcept;
  std::uint64_t epoch() const noexcept;      // the epoch of the last batch returned (0 first)
  std::uint64_t refreshes() const noexcept;  // re-bucketings so far (epoch starts included)
  // A key for (table, id) of a many-table sample.
  static std::uint64_t table_key(std::size_t table, std::uint64_t id) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace netsparse
