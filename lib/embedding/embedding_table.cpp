// EmbeddingTable and EmbeddingTables: the region layout, the lookup path (de-duplication, version
// exchange, cache, one gather of the misses) and the update path (one scatter-reduce, then the
// version bumps). Both are a TableSet: EmbeddingTable is a set of one table.
//
// Region layout: rank p registers its rows of every table (table 0's block [offsets_0[p],
// offsets_0[p+1]), then table 1's, ...) followed by hidden rows: one header row (bucket_rows, a
// magic word, the number of tables and a hash of their shapes: checked against every peer at
// construction; the region's registration already agrees on the row size and the blocks) and
// version_rows(p) rows of bucket versions. A region row is the widest table's row (row_stride
// floats); narrower rows are padded. The tables' rows are numbered by one "combined" id: p's
// stacked rows occupy [combined[p], combined[p+1]), and row `id` of table t owned by p is
// combined id id + base(t, p), so the cache, the de-duplication, the buckets and the gathers
// work on combined ids and the lookups of every table share one gather. Combined local row r of
// p is in bucket r / bucket_rows, whose version is the uint32 word b % W of p's version row
// b / W, where W is the largest power of two of words a row holds (row_bytes / 4). The region
// is the context's only one (the engine allows one at a time), so the versions travel with the
// same verbs as the rows.
//
// Why a version exchange per lookup, before the gather: a cached row labelled with version V
// must hold every update counted in V. A bucket's version is bumped only after the update's
// scatter-reduce has completed (every packet applied), and the versions are read before the
// rows are fetched, so a row fetched after reading V holds at least the updates counted in V: a
// label is never newer than the row. Reading the versions inside the row gather instead could
// pair a row read before an update with a version read after it (the owner answers the reads of
// one gather in any order of packets). The exchange is one small gather of the version rows of
// the buckets the batch's remote ids fall in (each such row once), posted only when the cache
// is on and the batch has remote ids.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "embedding/row_cache.hpp"
#include "netsparse/embedding.hpp"
#include "support/visibility.hpp"

namespace netsparse {

namespace {

constexpr std::uint32_t kHeaderMagic = 0x33424D45;  // "EMB3"

[[noreturn]] void refuse(ns_status_t status, const std::string& what) {
  throw Error(status, what);
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// FNV-1a over the tables' dims and offsets: equal on every rank that was given the same shapes.
std::uint32_t shape_hash(std::span<const EmbeddingTableShape> tables) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const EmbeddingTableShape& t : tables) {
    mix(t.dim);
    mix(t.row_offsets.size());
    for (const std::uint64_t o : t.row_offsets) mix(o);
  }
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

}  // namespace

namespace embedding {

// Where the rows of one call's segment (one table) go in the output: `count` rows of `bytes`.
struct Segment {
  std::size_t count;
  std::byte* out;
  std::size_t bytes;
};

struct NETSPARSE_LOCAL TableSet {
  TableSet(Context& c, std::span<const EmbeddingTableShape> shapes, const EmbeddingOptions& o,
           std::string who_)
      : ctx(&c), rank(c.rank()), size(c.size()), who(std::move(who_)), options(o) {
    if (shapes.empty()) refuse(NS_ERR_INVALID, who + ": at least one table is needed");
    if (shapes.size() > UINT32_MAX) refuse(NS_ERR_INVALID, who + ": too many tables");
    if (o.bucket_rows == 0 || !std::has_single_bit(o.bucket_rows)) {
      refuse(NS_ERR_INVALID,
             who + ": bucket_rows must be a power of two, not " + std::to_string(o.bucket_rows));
    }
    for (std::size_t t = 0; t < shapes.size(); ++t) {
      const EmbeddingTableShape& s = shapes[t];
      const std::string name = shapes.size() == 1 ? who : who + ": table " + std::to_string(t);
      if (s.dim == 0) refuse(NS_ERR_INVALID, name + ": dim must be at least 1");
      if (s.row_offsets.size() != static_cast<std::size_t>(size) + 1 ||
          s.row_offsets.front() != 0 ||
          !std::is_sorted(s.row_offsets.begin(), s.row_offsets.end())) {
        refuse(NS_ERR_INVALID,
               name + ": row_offsets needs size() + 1 non-decreasing entries from 0");
      }
      dims.push_back(s.dim);
      offsets.push_back(s.row_offsets);
      stride = std::max(stride, s.dim);
    }
    row_bytes = std::size_t{stride} * sizeof(float);
    cache = RowCache(o.cache_rows, row_bytes);
    hash = shape_hash(shapes);
    bucket_shift = std::countr_zero(o.bucket_rows);
    word_shift = std::countr_zero(std::bit_floor(stride));
    // Combined offsets and each table's base per owner.
    const std::size_t n_tables = shapes.size();
    row_offsets.assign(1, 0);
    base.resize(n_tables * static_cast<std::size_t>(size));
    for (int p = 0; p < size; ++p) {
      std::uint64_t at = row_offsets.back();
      for (std::size_t t = 0; t < n_tables; ++t) {
        base[t * static_cast<std::size_t>(size) + static_cast<std::size_t>(p)] =
            at - offsets[t][static_cast<std::size_t>(p)];
        at += table_rows_of(t, p);
      }
      row_offsets.push_back(at);
    }
    for (std::size_t t = 0; t < n_tables; ++t) {
      local_first.push_back(
          base[t * static_cast<std::size_t>(size) + static_cast<std::size_t>(rank)] +
          offsets[t][static_cast<std::size_t>(rank)] - row_offsets[static_cast<std::size_t>(rank)]);
    }
    region_offsets.push_back(0);
    version_base.push_back(0);
    for (int p = 0; p < size; ++p) {
      const std::uint64_t v = version_rows(p);
      region_offsets.push_back(region_offsets.back() + rows_of(p) + 1 + v);
      version_base.push_back(version_base.back() + v);
    }
    const std::uint64_t mine = rows_of(rank);
    // Rows, the header row, the version rows (all versions 0).
    storage.assign((mine + 1 + version_rows(rank)) * stride, 0.0f);
    const std::uint32_t header[4] = {o.bucket_rows, kHeaderMagic,
                                     static_cast<std::uint32_t>(n_tables), hash};
    std::memcpy(storage.data() + mine * stride, header, std::min(sizeof header, row_bytes));
    mr = PropertyRegion(c, storage.data(), mine + 1 + version_rows(rank),
                        static_cast<std::uint32_t>(row_bytes), region_offsets);
    cq = Cq(c, 4);
    qp = Qp(c, cq, 4);
    version_stamp.assign(version_base.back(), 0);
    version_pos.assign(version_base.back(), 0);
    check_headers();
  }

  std::size_t tables() const { return dims.size(); }
  std::uint64_t table_rows_of(std::size_t t, int p) const {
    return offsets[t][static_cast<std::size_t>(p) + 1] - offsets[t][static_cast<std::size_t>(p)];
  }
  std::uint64_t rows_of(int p) const {
    return row_offsets[static_cast<std::size_t>(p) + 1] - row_offsets[static_cast<std::size_t>(p)];
  }
  std::uint64_t buckets_of(int p) const {
    return (rows_of(p) + options.bucket_rows - 1) >> bucket_shift;
  }
  std::uint64_t version_rows(int p) const {
    const std::uint64_t words = std::uint64_t{1} << word_shift;
    return (buckets_of(p) + words - 1) >> word_shift;
  }
  static int owner_in(const std::vector<std::uint64_t>& o, std::uint64_t id) {
    return static_cast<int>(std::upper_bound(o.begin(), o.end(), id) - o.begin()) - 1;
  }
  int owner(std::uint64_t combined) const { return owner_in(row_offsets, combined); }
  // Row `id` of table t as a combined id (id below the table's total).
  std::uint64_t combined_id(std::size_t t, std::uint64_t id) const {
    const int p = owner_in(offsets[t], id);
    return id + base[t * static_cast<std::size_t>(size) + static_cast<std::size_t>(p)];
  }
  std::uint64_t header_row(int p) const {
    return region_offsets[static_cast<std::size_t>(p)] + rows_of(p);
  }
  std::uint64_t region_row(std::uint64_t id, int p) const {
    return region_offsets[static_cast<std::size_t>(p)] +
           (id - row_offsets[static_cast<std::size_t>(p)]);
  }
  std::span<float> local_rows(std::size_t t) {
    return {storage.data() + local_first[t] * stride, table_rows_of(t, rank) * stride};
  }

  // Every rank reads every owner's header (one gather of P rows); each sees a difference if any
  // rank differs, so every rank refuses. Quiesced before (every peer registered) and after
  // (every peer's reads served before anyone leaves the constructor).
  void check_headers() {
    ctx->quiesce();
    std::vector<std::uint64_t> rows;
    for (int p = 0; p < size; ++p) rows.push_back(header_row(p));
    std::vector<std::byte> got(rows.size() * row_bytes);
    std::string problem;
    try {
      gather(rows, got.data(), "constructor");
    } catch (const Error& e) {
      problem = e.what();
    }
    ctx->quiesce();
    stats = EmbeddingStats{};
    if (!problem.empty()) throw Error(NS_ERR_TRANSPORT, problem);
    const std::size_t words = std::min<std::size_t>(4, row_bytes / 4);  // dim 1: bucket_rows only
    for (int p = 0; p < size; ++p) {
      const std::uint32_t mine[4] = {options.bucket_rows, kHeaderMagic,
                                     static_cast<std::uint32_t>(tables()), hash};
      std::uint32_t h[4] = {mine[0], mine[1], mine[2], mine[3]};
      std::memcpy(h, got.data() + static_cast<std::size_t>(p) * row_bytes, words * 4);
      if (h[0] != mine[0] || h[1] != mine[1]) {
        refuse(NS_ERR_INVALID, who + ": ranks disagree on bucket_rows: rank " +
                                   std::to_string(rank) + " has " +
                                   std::to_string(options.bucket_rows) + ", rank " +
                                   std::to_string(p) + " has " + std::to_string(h[0]));
      }
      if (h[2] != mine[2] || h[3] != mine[3]) {
        refuse(NS_ERR_INVALID, who + ": ranks disagree on the tables: rank " +
                                   std::to_string(rank) + " has " + std::to_string(tables()) +
                                   " table(s), rank " + std::to_string(p) + " has " +
                                   std::to_string(h[2]) + " (or their dims or row offsets differ)");
      }
    }
  }

  // Refuses (before anything moves) values of the wrong size and ids beyond table t's rows.
  void check_ids(std::size_t t, std::span<const std::uint64_t> ids, std::size_t values,
                 const char* call) const {
    const std::string where =
        who + "::" + call + (tables() == 1 ? "" : ": table " + std::to_string(t));
    if (values != ids.size() * dims[t]) {
      refuse(NS_ERR_INVALID, where + ": " + std::to_string(values) + " floats given for " +
                                 std::to_string(ids.size()) + " ids of dim " +
                                 std::to_string(dims[t]));
    }
    const std::uint64_t n = offsets[t].back();
    for (std::size_t j = 0; j < ids.size(); ++j) {
      if (ids[j] >= n) {
        refuse(NS_ERR_INVALID, where + ": id " + std::to_string(ids[j]) + " at position " +
                                   std::to_string(j) + " is not below total_rows " +
                                   std::to_string(n));
      }
    }
  }

  // Posts one work request and waits for its completion; a failed one throws. The wait has no
  // timeout of its own: the context's watchdog and the transports' dead-peer detection complete
  // every request (docs/api.md).
  void run(ns_send_wr wr, const char* call) {
    qp.post(wr);
    ns_wc wc{};
    while (cq.wait(std::span<ns_wc>(&wc, 1)) == 0) {
    }
    if (wc.status != NS_WC_SUCCESS) {
      refuse(NS_ERR_TRANSPORT, who + "::" + call + ": " +
                                   (wr.opcode == NS_WR_RIS ? "scatter-reduce" : "gather") +
                                   " failed: " + ns_wc_status_str(wc.status));
    }
  }

  // distinct: the caller's rows are distinct (de-duplicated ids, version rows listed once), and
  // the gather says so (NS_SEND_UNIQUE): the engine walks it without a de-duplication bit per
  // row that could never find a repeat.
  void gather(std::span<const std::uint64_t> region_rows, void* out, const char* call,
              bool distinct = false) {
    ++stats.gathers;
    ns_send_wr wr =
        rig_wr(0, mr, region_rows, out, region_rows.size() * row_bytes, Layout::kPositional);
    if (distinct) wr.send_flags |= NS_SEND_UNIQUE;
    run(wr, call);
  }

  // The rows of combined ids into the segments (their counts sum to ids.size()).
  void lookup(std::span<const std::uint64_t> ids, std::span<const Segment> segments);
  // Copies source[slot_of[j]] (or row j of `rows`) into the segments.
  void emit(std::span<const Segment> segments, std::size_t n, const std::byte* rows);
  void read_versions(const std::vector<std::uint64_t>& distinct);
  // A call's list of version rows (read_versions: the rows to read, push: the rows to bump):
  // start_version_list empties it, version_word lists the version row of id (owned by p) the
  // first time the call needs it (its engine row appended to `rows`) and returns the place of
  // id's bucket word among the listed rows' words (words_per_row() a row).
  void start_version_list();
  std::size_t version_word(std::uint64_t id, int p, std::vector<std::uint64_t>& rows);
  std::size_t words_per_row() const { return row_bytes / sizeof(std::uint32_t); }
  // Row ids[j] += row j of `values` (row_bytes each), then the bumps of the buckets written.
  // distinct: the ids are distinct (de-duplicated), and the scatter-reduce says so
  // (NS_SEND_UNIQUE): the engine buckets them per owner without a table to combine repeats.
  void push(std::span<const std::uint64_t> ids, const float* values, bool distinct);
  // One NS_WR_RIS (int32 sum) of the rows in bump_idx with the words in bump_ones.
  void send_bumps();
  void local_rows_changed();
  void set_options(const EmbeddingOptions& o) {
    if (o.bucket_rows != options.bucket_rows) {
      refuse(NS_ERR_INVALID, who + "::set_options: bucket_rows is fixed at construction (" +
                                 std::to_string(options.bucket_rows) + "), not " +
                                 std::to_string(o.bucket_rows));
    }
    options = o;
    cache = RowCache(o.cache_rows, row_bytes);
  }

  Context* ctx;
  int rank, size;
  std::string who;  // "EmbeddingTable" or "EmbeddingTables", for messages
  std::vector<std::uint32_t> dims;
  std::vector<std::vector<std::uint64_t>> offsets;  // per table: its row_offsets
  std::uint32_t stride = 0;                         // floats a region row
  std::size_t row_bytes = 0;
  std::uint32_t hash = 0;
  EmbeddingOptions options;
  int bucket_shift = 0, word_shift = 0;
  // Combined ids: row_offsets[p] is p's first; base[t * size + p] turns table t's ids owned by
  // p into combined ids; local_first[t]: this rank's first row of table t in its storage.
  std::vector<std::uint64_t> row_offsets, base, local_first, region_offsets;
  std::vector<std::uint64_t> version_base;  // per owner: index of its first version row, all owners
  std::vector<float> storage;               // never resized after registration
  PropertyRegion mr;
  Cq cq;
  Qp qp;
  RowCache cache{0, 4};
  IdDedup dedup;
  IdSet upcoming;  // combined ids of the announced lookups (CacheAdmission::kUpcoming)
  EmbeddingStats stats;
  // Per-call scratch, kept to avoid allocations per batch.
  std::vector<std::uint32_t> slot_of;
  // The ids of the last de-duplication (dedup and slot_of describe them): a push of the batch
  // just looked up -- a training step's -- takes its distinct ids and slots instead of
  // de-duplicating the same ids again (a copy and a compare instead of a hash probe per id).
  std::vector<std::uint64_t> dedup_ids;
  std::vector<const std::byte*> source;  // per distinct id: where its row is
  std::vector<std::uint64_t> fetch_rows, fetch_ids, version_idx, bump_idx, combined;
  std::vector<std::uint32_t> fetch_of;  // per distinct id: its place in the fetch, or UINT32_MAX
  std::vector<std::uint32_t> word_of;   // per distinct remote id: its version word in versions
  std::vector<std::byte> staging;
  std::vector<float> push_values;       // the deltas of a push, row_bytes a row
  std::vector<std::uint32_t> versions;  // the version rows read, row after row
  std::vector<std::int32_t> bump_ones;
  std::vector<int> owners;  // per distinct id
  // Per version row of every owner: the call that last used it and where it went.
  std::vector<std::uint32_t> version_stamp, version_pos;
  std::uint32_t stamp = 0;
};

// The versions of the buckets of every remote id in `distinct` (owners filled): their version
// rows, each once, in one gather; word_of[u] is then where id u's version is in `versions`.
void TableSet::start_version_list() {
  if (++stamp == 0) {
    std::fill(version_stamp.begin(), version_stamp.end(), 0);
    stamp = 1;
  }
}

std::size_t TableSet::version_word(std::uint64_t id, int p, std::vector<std::uint64_t>& rows) {
  const std::uint64_t bucket = (id - row_offsets[static_cast<std::size_t>(p)]) >> bucket_shift;
  const std::uint64_t v = bucket >> word_shift;
  const std::uint64_t g = version_base[static_cast<std::size_t>(p)] + v;
  if (version_stamp[g] != stamp) {
    version_stamp[g] = stamp;
    version_pos[g] = static_cast<std::uint32_t>(rows.size());
    rows.push_back(header_row(p) + 1 + v);
  }
  const std::uint64_t word_mask = (std::uint64_t{1} << word_shift) - 1;
  return version_pos[g] * words_per_row() + (bucket & word_mask);
}

void TableSet::read_versions(const std::vector<std::uint64_t>& distinct) {
  start_version_list();
  version_idx.clear();
  word_of.resize(distinct.size());
  for (std::size_t u = 0; u < distinct.size(); ++u) {
    const int p = owners[u];
    if (p == rank) continue;
    word_of[u] = static_cast<std::uint32_t>(version_word(distinct[u], p, version_idx));
  }
  versions.resize(version_idx.size() * words_per_row());
  gather(version_idx, versions.data(), "lookup", true);
  ++stats.version_reads;
  stats.version_rows += version_idx.size();
  stats.version_words += version_idx.size() * (std::uint64_t{1} << word_shift);
}

void TableSet::emit(std::span<const Segment> segments, std::size_t n, const std::byte* rows) {
  std::size_t j = 0;
  for (const Segment& s : segments) {
    for (std::size_t k = 0; k < s.count && j < n; ++k, ++j) {
      const std::byte* from = rows != nullptr ? rows + j * row_bytes : source[slot_of[j]];
      std::memcpy(s.out + k * s.bytes, from, s.bytes);
    }
  }
}

void TableSet::lookup(std::span<const std::uint64_t> ids, std::span<const Segment> segments) {
  stats.lookups += ids.size();
  if (ids.empty()) return;
  // One table as wide as the region: rows land in the caller's output directly.
  const bool direct = segments.size() == 1 && segments[0].bytes == row_bytes;
  if (!options.dedup) {
    const std::uint64_t t0 = now_ns();
    fetch_rows.resize(ids.size());
    for (std::size_t j = 0; j < ids.size(); ++j) fetch_rows[j] = region_row(ids[j], owner(ids[j]));
    stats.distinct += ids.size();
    stats.fetched_rows += ids.size();
    const std::uint64_t t1 = now_ns();
    if (direct) {
      gather(fetch_rows, segments[0].out, "lookup");
    } else {
      staging.resize(ids.size() * row_bytes);
      gather(fetch_rows, staging.data(), "lookup");
    }
    const std::uint64_t t2 = now_ns();
    if (!direct) emit(segments, ids.size(), staging.data());
    stats.dedup_ns += t1 - t0;
    stats.gather_ns += t2 - t1;
    stats.output_ns += now_ns() - t2;
    return;
  }
  const std::uint64_t t0 = now_ns();
  slot_of.resize(ids.size());
  const std::vector<std::uint64_t>& distinct = dedup.run(ids.data(), ids.size(), slot_of.data());
  dedup_ids.assign(ids.begin(), ids.end());
  stats.distinct += distinct.size();
  const bool cached = cache.capacity() > 0;
  owners.resize(distinct.size());
  bool any_remote = false;
  for (std::size_t u = 0; u < distinct.size(); ++u) {
    owners[u] = owner(distinct[u]);
    any_remote = any_remote || owners[u] != rank;
  }
  const std::uint64_t t1 = now_ns();
  stats.dedup_ns += t1 - t0;
  // Only the owners this batch reads from: a peer that is gone fails the lookups that need it,
  // not every lookup.
  if (cached && any_remote) read_versions(distinct);
  const std::uint64_t t2 = now_ns();
  stats.version_ns += t2 - t1;
  // Hits first (their pointers stay valid until the inserts below), the rest into one gather.
  source.assign(distinct.size(), nullptr);
  fetch_of.assign(distinct.size(), UINT32_MAX);
  fetch_rows.clear();
  fetch_ids.clear();
  constexpr std::size_t kAhead = 16;  // prefetch distance in ids (the one value measured)
  for (std::size_t u = 0; u < distinct.size(); ++u) {
    if (cached && u + kAhead < distinct.size()) cache.prefetch(distinct[u + kAhead]);
    const int p = owners[u];
    if (p == rank) {
      ++stats.local_rows;
    } else if (cached) {
      const std::uint64_t stale_before = cache.stale_dropped();
      source[u] = cache.find(distinct[u], versions[word_of[u]]);
      stats.cache_stale += cache.stale_dropped() - stale_before;
      if (source[u] != nullptr) {
        ++stats.cache_hits;
        continue;
      }
    }
    fetch_of[u] = static_cast<std::uint32_t>(fetch_rows.size());
    fetch_rows.push_back(region_row(distinct[u], p));
    fetch_ids.push_back(u);
  }
  const std::uint64_t t3 = now_ns();
  stats.cache_ns += t3 - t2;
  if (!fetch_rows.empty()) {
    staging.resize(fetch_rows.size() * row_bytes);
    gather(fetch_rows, staging.data(), "lookup", true);
    stats.fetched_rows += fetch_rows.size();
    for (std::size_t u = 0; u < distinct.size(); ++u) {
      if (fetch_of[u] != UINT32_MAX) source[u] = staging.data() + fetch_of[u] * row_bytes;
    }
  }
  const std::uint64_t t4 = now_ns();
  stats.gather_ns += t4 - t3;
  emit(segments, ids.size(), nullptr);
  if (cached) {
    // Reuse-aware admission only decides which fetched rows are kept (once the cache is full):
    // a kept row carries the version read before the gather, as with every admission, so
    // results never change.
    const bool upcoming_only = options.admission == CacheAdmission::kUpcoming;
    for (std::size_t f = 0; f < fetch_ids.size(); ++f) {
      if (f + kAhead < fetch_ids.size()) {
        const std::uint64_t ahead = distinct[fetch_ids[f + kAhead]];
        if (upcoming_only) upcoming.prefetch(ahead);
        cache.prefetch(ahead);
      }
      const std::size_t u = fetch_ids[f];
      if (owners[u] == rank) continue;
      // A full cache would evict a row for it: only a row announced as coming is worth that.
      if (upcoming_only && cache.size() == cache.capacity() && !upcoming.contains(distinct[u])) {
        ++stats.cache_declined;
        continue;
      }
      ++stats.cache_admitted;
      cache.insert(distinct[u], versions[word_of[u]], staging.data() + f * row_bytes);
    }
  }
  stats.output_ns += now_ns() - t4;
}

void TableSet::push(std::span<const std::uint64_t> ids, const float* values, bool distinct) {
  ++stats.pushes;
  if (ids.empty()) return;
  fetch_rows.resize(ids.size());
  for (std::size_t j = 0; j < ids.size(); ++j) fetch_rows[j] = region_row(ids[j], owner(ids[j]));
  // The rows first: their completion means every owner applied them; only then the versions.
  ns_send_wr rows_wr = ris_wr<float>(
      0, mr, fetch_rows, std::span<const float>(values, ids.size() * stride), RisOp::kSum);
  if (distinct) rows_wr.send_flags |= NS_SEND_UNIQUE;
  run(rows_wr, "push_gradients");
  // One bump row per version row written: word = 1 for every bucket written (once however
  // many of its rows were).
  start_version_list();
  bump_idx.clear();
  bump_ones.clear();
  for (const std::uint64_t id : ids) {
    const std::size_t at = version_word(id, owner(id), bump_idx);
    bump_ones.resize(bump_idx.size() * words_per_row(), 0);  // a new row's words start at 0
    std::int32_t& word = bump_ones[at];
    stats.bumped_buckets += word == 0 ? 1 : 0;
    word = 1;
  }
  send_bumps();
}

void TableSet::send_bumps() {
  if (bump_idx.empty()) return;
  stats.bump_rows += bump_idx.size();
  // Each version row is listed once (version_word stamps it): distinct.
  ns_send_wr wr = ris_wr<std::int32_t>(0, mr, bump_idx, bump_ones, RisOp::kSum);
  wr.send_flags |= NS_SEND_UNIQUE;
  run(wr, "push_gradients");
}

void TableSet::local_rows_changed() {
  const std::uint64_t n = version_rows(rank);
  bump_idx.clear();
  bump_ones.assign(n * words_per_row(), 0);
  for (std::uint64_t v = 0; v < n; ++v) {
    bump_idx.push_back(header_row(rank) + 1 + v);
    for (std::size_t w = 0; w < (std::size_t{1} << word_shift); ++w)
      bump_ones[v * words_per_row() + w] = 1;
  }
  stats.bumped_buckets += buckets_of(rank);
  send_bumps();
}

// Both classes' lookup and push over per-table spans: checks every table first (nothing moves
// when one is refused), then one lookup / push of the combined ids.
namespace {

void set_lookup(TableSet& s, std::span<const std::span<const std::uint64_t>> ids,
                std::span<const std::span<float>> out) {
  if (ids.size() != s.tables() || out.size() != s.tables()) {
    refuse(NS_ERR_INVALID, s.who + "::lookup: " + std::to_string(ids.size()) + " id lists and " +
                               std::to_string(out.size()) + " outputs for " +
                               std::to_string(s.tables()) + " tables");
  }
  std::size_t n = 0;
  for (std::size_t t = 0; t < s.tables(); ++t) {
    s.check_ids(t, ids[t], out[t].size(), "lookup");
    n += ids[t].size();
  }
  std::vector<Segment> segments;  // a few per call, one per table
  segments.reserve(s.tables());
  std::span<const std::uint64_t> all;
  if (s.tables() == 1) {
    all = ids[0];  // one table: its ids are the combined ids
  } else {
    s.combined.resize(n);
    std::size_t j = 0;
    for (std::size_t t = 0; t < s.tables(); ++t) {
      for (const std::uint64_t id : ids[t]) s.combined[j++] = s.combined_id(t, id);
    }
    all = s.combined;
  }
  for (std::size_t t = 0; t < s.tables(); ++t) {
    segments.push_back({ids[t].size(), reinterpret_cast<std::byte*>(out[t].data()),
                        std::size_t{s.dims[t]} * sizeof(float)});
  }
  s.lookup(all, segments);
}

void set_push(TableSet& s, std::span<const std::span<const std::uint64_t>> ids,
              std::span<const std::span<const float>> deltas) {
  if (ids.size() != s.tables() || deltas.size() != s.tables()) {
    refuse(NS_ERR_INVALID, s.who + "::push_gradients: " + std::to_string(ids.size()) +
                               " id lists and " + std::to_string(deltas.size()) +
                               " delta lists for " + std::to_string(s.tables()) + " tables");
  }
  std::size_t n = 0;
  for (std::size_t t = 0; t < s.tables(); ++t) {
    s.check_ids(t, ids[t], deltas[t].size(), "push_gradients");
    n += ids[t].size();
  }
  s.combined.resize(n);
  {
    std::size_t j = 0;
    for (std::size_t t = 0; t < s.tables(); ++t) {
      for (const std::uint64_t id : ids[t])
        s.combined[j++] = s.tables() == 1 ? id : s.combined_id(t, id);
    }
  }
  const std::size_t stride = s.stride;
  if (s.options.dedup) {
    // Repeated rows summed here: each distinct row's delta travels once.
    const bool looked_up = s.dedup_ids.size() == n && s.slot_of.size() == n &&
                           std::equal(s.combined.begin(), s.combined.end(), s.dedup_ids.begin());
    if (!looked_up) {
      s.slot_of.resize(n);
      (void)s.dedup.run(s.combined.data(), n, s.slot_of.data());
      s.dedup_ids.assign(s.combined.begin(), s.combined.end());
    }
    const std::vector<std::uint64_t>& distinct = s.dedup.distinct();
    s.push_values.assign(distinct.size() * stride, 0.0f);
    std::size_t j = 0;
    for (std::size_t t = 0; t < s.tables(); ++t) {
      const std::size_t d = s.dims[t];
      for (std::size_t k = 0; k < ids[t].size(); ++k, ++j) {
        float* to = s.push_values.data() + std::size_t{s.slot_of[j]} * stride;
        const float* from = deltas[t].data() + k * d;
        for (std::size_t e = 0; e < d; ++e) to[e] += from[e];
      }
    }
    s.combined.assign(distinct.begin(), distinct.end());
    s.push(s.combined, s.push_values.data(), true);
    return;
  }
  if (s.tables() == 1 && s.dims[0] == stride) {
    s.push(s.combined, deltas[0].data(), false);
    return;
  }
  s.push_values.assign(n * stride, 0.0f);  // padding adds zeros
  std::size_t j = 0;
  for (std::size_t t = 0; t < s.tables(); ++t) {
    const std::size_t d = s.dims[t];
    for (std::size_t k = 0; k < ids[t].size(); ++k, ++j)
      std::memcpy(s.push_values.data() + j * stride, deltas[t].data() + k * d, d * sizeof(float));
  }
  s.push(s.combined, s.push_values.data(), false);
}

void set_announce(TableSet& s, std::span<const std::span<const std::uint64_t>> ids) {
  if (ids.size() != s.tables()) {
    refuse(NS_ERR_INVALID, s.who + "::announce_upcoming: " + std::to_string(ids.size()) +
                               " id lists for " + std::to_string(s.tables()) + " tables");
  }
  std::size_t n = 0;
  for (std::size_t t = 0; t < s.tables(); ++t) {
    s.check_ids(t, ids[t], ids[t].size() * s.dims[t], "announce_upcoming");
    n += ids[t].size();
  }
  std::vector<std::uint64_t> all;
  all.reserve(n);
  for (std::size_t t = 0; t < s.tables(); ++t) {
    for (const std::uint64_t id : ids[t])
      all.push_back(s.tables() == 1 ? id : s.combined_id(t, id));
  }
  s.upcoming.assign(all.data(), all.size());
}

std::vector<EmbeddingTableShape> one_table(std::uint32_t dim,
                                           std::span<const std::uint64_t> row_offsets) {
  return {EmbeddingTableShape{dim, {row_offsets.begin(), row_offsets.end()}}};
}

}  // namespace
}  // namespace embedding

// ---- EmbeddingTable: a set of one ----------------------------------------------------------

struct NETSPARSE_LOCAL EmbeddingTable::Impl {
  Impl(Context& c, std::uint32_t d, std::span<const std::uint64_t> offsets,
       const EmbeddingOptions& o)
      : set(c, embedding::one_table(d, offsets), o, "EmbeddingTable") {}
  embedding::TableSet set;
};

EmbeddingTable::EmbeddingTable(Context& ctx, std::uint32_t dim,
                               std::span<const std::uint64_t> row_offsets,
                               const EmbeddingOptions& options)
    : impl_(std::make_unique<Impl>(ctx, dim, row_offsets, options)) {}
EmbeddingTable::~EmbeddingTable() = default;
EmbeddingTable::EmbeddingTable(EmbeddingTable&&) noexcept = default;
EmbeddingTable& EmbeddingTable::operator=(EmbeddingTable&&) noexcept = default;

std::uint32_t EmbeddingTable::dim() const noexcept {
  return impl_->set.dims[0];
}
std::uint64_t EmbeddingTable::total_rows() const noexcept {
  return impl_->set.offsets[0].back();
}
std::span<float> EmbeddingTable::local_rows() noexcept {
  return impl_->set.local_rows(0);
}
void EmbeddingTable::local_rows_changed() {
  impl_->set.local_rows_changed();
}
void EmbeddingTable::lookup(std::span<const std::uint64_t> ids, std::span<float> out) {
  embedding::set_lookup(impl_->set, std::span(&ids, 1), std::span(&out, 1));
}
void EmbeddingTable::push_gradients(std::span<const std::uint64_t> ids,
                                    std::span<const float> deltas) {
  embedding::set_push(impl_->set, std::span(&ids, 1), std::span(&deltas, 1));
}
void EmbeddingTable::announce_upcoming(std::span<const std::uint64_t> ids) {
  embedding::set_announce(impl_->set, std::span(&ids, 1));
}
void EmbeddingTable::set_options(const EmbeddingOptions& options) {
  impl_->set.set_options(options);
}
const EmbeddingOptions& EmbeddingTable::options() const noexcept {
  return impl_->set.options;
}
EmbeddingStats EmbeddingTable::stats() const noexcept {
  return impl_->set.stats;
}
void EmbeddingTable::reset_stats() noexcept {
  impl_->set.stats = EmbeddingStats{};
}

// ---- EmbeddingTables -------------------------------------------------------------------------

struct NETSPARSE_LOCAL EmbeddingTables::Impl {
  Impl(Context& c, std::span<const EmbeddingTableShape> tables, const EmbeddingOptions& o)
      : set(c, tables, o, "EmbeddingTables") {}
  embedding::TableSet set;
  void check_table(std::size_t t, const char* call) const {
    if (t >= set.tables()) {
      refuse(NS_ERR_INVALID, "EmbeddingTables::" + std::string(call) + ": table " +
                                 std::to_string(t) + " of " + std::to_string(set.tables()));
    }
  }
};

EmbeddingTables::EmbeddingTables(Context& ctx, std::span<const EmbeddingTableShape> tables,
                                 const EmbeddingOptions& options)
    : impl_(std::make_unique<Impl>(ctx, tables, options)) {}
EmbeddingTables::~EmbeddingTables() = default;
EmbeddingTables::EmbeddingTables(EmbeddingTables&&) noexcept = default;
EmbeddingTables& EmbeddingTables::operator=(EmbeddingTables&&) noexcept = default;

std::size_t EmbeddingTables::count() const noexcept {
  return impl_->set.tables();
}
std::uint32_t EmbeddingTables::dim(std::size_t table) const {
  impl_->check_table(table, "dim");
  return impl_->set.dims[table];
}
std::uint64_t EmbeddingTables::total_rows(std::size_t table) const {
  impl_->check_table(table, "total_rows");
  return impl_->set.offsets[table].back();
}
std::uint32_t EmbeddingTables::row_stride() const noexcept {
  return impl_->set.stride;
}
std::span<float> EmbeddingTables::local_rows(std::size_t table) {
  impl_->check_table(table, "local_rows");
  return impl_->set.local_rows(table);
}
void EmbeddingTables::local_rows_changed() {
  impl_->set.local_rows_changed();
}
void EmbeddingTables::lookup(std::span<const std::span<const std::uint64_t>> ids,
                             std::span<const std::span<float>> out) {
  embedding::set_lookup(impl_->set, ids, out);
}
void EmbeddingTables::push_gradients(std::span<const std::span<const std::uint64_t>> ids,
                                     std::span<const std::span<const float>> deltas) {
  embedding::set_push(impl_->set, ids, deltas);
}
void EmbeddingTables::announce_upcoming(std::span<const std::span<const std::uint64_t>> ids) {
  embedding::set_announce(impl_->set, ids);
}
void EmbeddingTables::set_options(const EmbeddingOptions& options) {
  impl_->set.set_options(options);
}
const EmbeddingOptions& EmbeddingTables::options() const noexcept {
  return impl_->set.options;
}
EmbeddingStats EmbeddingTables::stats() const noexcept {
  return impl_->set.stats;
}
void EmbeddingTables::reset_stats() noexcept {
  impl_->set.stats = EmbeddingStats{};
}

}  // namespace netsparse
