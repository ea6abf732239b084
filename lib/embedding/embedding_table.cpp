// EmbeddingTable: the region layout, the lookup path (de-duplication, version exchange, cache,
// one gather of the misses) and the update path (one scatter-reduce, then the version bumps).
//
// Region layout: rank p registers its rows [offsets[p], offsets[p+1]) followed by hidden rows:
// one header row (bucket_rows and a magic word: checked against every peer at construction;
// the region's registration already agrees on the row size) and
// version_rows(p) rows of bucket versions. Local row r of p is in bucket r / bucket_rows; the
// version of bucket b is the uint32 word b % W of p's version row b / W, where W is the largest
// power of two of words a row holds (row_bytes / 4). The region is the context's only one (the
// engine allows one at a time), so the versions travel with the same verbs as the rows.
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

constexpr std::uint32_t kHeaderMagic = 0x32424D45;  // "EMB2"

[[noreturn]] void refuse(ns_status_t status, const std::string& what) {
  throw Error(status, "EmbeddingTable::" + what);
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void check_bucket_rows(std::uint32_t b) {
  if (b == 0 || !std::has_single_bit(b)) {
    refuse(NS_ERR_INVALID,
           "EmbeddingTable: bucket_rows must be a power of two, not " + std::to_string(b));
  }
}

}  // namespace

struct NETSPARSE_LOCAL EmbeddingTable::Impl {
  Impl(Context& c, std::uint32_t d, std::span<const std::uint64_t> offsets,
       const EmbeddingOptions& o)
      : ctx(&c),
        rank(c.rank()),
        size(c.size()),
        dim(d),
        row_bytes(std::size_t{d} * sizeof(float)),
        options(o),
        cache(o.cache_rows, row_bytes) {
    if (d == 0) refuse(NS_ERR_INVALID, "EmbeddingTable: dim must be at least 1");
    check_bucket_rows(o.bucket_rows);
    if (offsets.size() != static_cast<std::size_t>(size) + 1 || offsets.front() != 0 ||
        !std::is_sorted(offsets.begin(), offsets.end())) {
      refuse(NS_ERR_INVALID,
             "EmbeddingTable: row_offsets needs size() + 1 non-decreasing entries from 0");
    }
    bucket_shift = std::countr_zero(o.bucket_rows);
    word_shift = std::countr_zero(std::bit_floor(d));
    row_offsets.assign(offsets.begin(), offsets.end());
    region_offsets.push_back(0);
    version_base.push_back(0);
    for (int p = 0; p < size; ++p) {
      const std::uint64_t v = version_rows(p);
      region_offsets.push_back(region_offsets.back() + rows_of(p) + 1 + v);
      version_base.push_back(version_base.back() + v);
    }
    const std::uint64_t mine = rows_of(rank);
    // Rows, the header row, the version rows (all versions 0).
    storage.assign((mine + 1 + version_rows(rank)) * dim, 0.0f);
    const std::uint32_t header[2] = {o.bucket_rows, kHeaderMagic};
    std::memcpy(storage.data() + mine * dim, header, std::min(sizeof header, row_bytes));
    mr = PropertyRegion(c, storage.data(), mine + 1 + version_rows(rank),
                        static_cast<std::uint32_t>(row_bytes), region_offsets);
    cq = Cq(c, 4);
    qp = Qp(c, cq, 4);
    version_stamp.assign(version_base.back(), 0);
    version_pos.assign(version_base.back(), 0);
    check_headers();
  }

  std::uint64_t total() const { return row_offsets.back(); }
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
  int owner(std::uint64_t id) const {
    return static_cast<int>(std::upper_bound(row_offsets.begin(), row_offsets.end(), id) -
                            row_offsets.begin()) -
           1;
  }
  std::uint64_t header_row(int p) const {
    return region_offsets[static_cast<std::size_t>(p)] + rows_of(p);
  }
  std::uint64_t region_row(std::uint64_t id, int p) const {
    return region_offsets[static_cast<std::size_t>(p)] +
           (id - row_offsets[static_cast<std::size_t>(p)]);
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
      gather(rows, got.data(), "EmbeddingTable");
    } catch (const Error& e) {
      problem = e.what();
    }
    ctx->quiesce();
    stats = EmbeddingStats{};
    if (!problem.empty()) throw Error(NS_ERR_TRANSPORT, problem);
    const std::size_t words = std::min<std::size_t>(2, row_bytes / 4);  // dim 1: no magic
    for (int p = 0; p < size; ++p) {
      std::uint32_t h[2] = {options.bucket_rows, kHeaderMagic};
      std::memcpy(h, got.data() + static_cast<std::size_t>(p) * row_bytes, words * 4);
      if (h[0] != options.bucket_rows || h[1] != kHeaderMagic) {
        refuse(NS_ERR_INVALID, "EmbeddingTable: ranks disagree on bucket_rows: rank " +
                                   std::to_string(rank) + " has " +
                                   std::to_string(options.bucket_rows) + ", rank " +
                                   std::to_string(p) + " has " + std::to_string(h[0]));
      }
    }
  }

  void check_ids(std::span<const std::uint64_t> ids, std::size_t values, const char* call) const {
    if (values != ids.size() * dim) {
      refuse(NS_ERR_INVALID, std::string(call) + ": " + std::to_string(values) +
                                 " floats given for " + std::to_string(ids.size()) +
                                 " ids of dim " + std::to_string(dim));
    }
    const std::uint64_t n = total();
    for (std::size_t j = 0; j < ids.size(); ++j) {
      if (ids[j] >= n) {
        refuse(NS_ERR_INVALID, std::string(call) + ": id " + std::to_string(ids[j]) +
                                   " at position " + std::to_string(j) +
                                   " is not below total_rows " + std::to_string(n));
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
      refuse(NS_ERR_TRANSPORT, std::string(call) + ": " +
                                   (wr.opcode == NS_WR_RIS ? "scatter-reduce" : "gather") +
                                   " failed: " + ns_wc_status_str(wc.status));
    }
  }

  void gather(std::span<const std::uint64_t> region_rows, void* out, const char* call) {
    ++stats.gathers;
    run(rig_wr(0, mr, region_rows, out, region_rows.size() * row_bytes, Layout::kPositional), call);
  }

  void lookup(std::span<const std::uint64_t> ids, std::span<float> out);
  void read_versions(const std::vector<std::uint64_t>& distinct);
  // A call's list of version rows (read_versions: the rows to read, push: the rows to bump):
  // start_version_list empties it, version_word lists the version row of id (owned by p) the
  // first time the call needs it (its engine row appended to `rows`) and returns the place of
  // id's bucket word among the listed rows' words (words_per_row() a row).
  void start_version_list();
  std::size_t version_word(std::uint64_t id, int p, std::vector<std::uint64_t>& rows);
  std::size_t words_per_row() const { return row_bytes / sizeof(std::uint32_t); }
  void push(std::span<const std::uint64_t> ids, std::span<const float> deltas);
  // One NS_WR_RIS (int32 sum) of the rows in bump_idx with the words in bump_ones.
  void send_bumps();

  Context* ctx;
  int rank, size;
  std::uint32_t dim;
  std::size_t row_bytes;
  EmbeddingOptions options;
  int bucket_shift = 0, word_shift = 0;
  std::vector<std::uint64_t> row_offsets, region_offsets;
  std::vector<std::uint64_t> version_base;  // per owner: index of its first version row, all owners
  std::vector<float> storage;               // never resized after registration
  PropertyRegion mr;
  Cq cq;
  Qp qp;
  embedding::RowCache cache;
  embedding::IdDedup dedup;
  EmbeddingStats stats;
  // Per-call scratch, kept to avoid allocations per batch.
  std::vector<std::uint32_t> slot_of;
  std::vector<const std::byte*> source;  // per distinct id: where its row is
  std::vector<std::uint64_t> fetch_rows, fetch_ids, version_idx, bump_idx;
  std::vector<std::uint32_t> fetch_of;  // per distinct id: its place in the fetch, or UINT32_MAX
  std::vector<std::uint32_t> word_of;   // per distinct remote id: its version word in versions
  std::vector<std::byte> staging;
  std::vector<std::uint32_t> versions;  // the version rows read, row after row
  std::vector<std::int32_t> bump_ones;
  std::vector<int> owners;  // per distinct id
  // Per version row of every owner: the call that last used it and where it went.
  std::vector<std::uint32_t> version_stamp, version_pos;
  std::uint32_t stamp = 0;
};

// The versions of the buckets of every remote id in `distinct` (owners filled): their version
// rows, each once, in one gather; word_of[u] is then where id u's version is in `versions`.
void EmbeddingTable::Impl::start_version_list() {
  if (++stamp == 0) {
    std::fill(version_stamp.begin(), version_stamp.end(), 0);
    stamp = 1;
  }
}

std::size_t EmbeddingTable::Impl::version_word(std::uint64_t id, int p,
                                               std::vector<std::uint64_t>& rows) {
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

void EmbeddingTable::Impl::read_versions(const std::vector<std::uint64_t>& distinct) {
  start_version_list();
  version_idx.clear();
  word_of.resize(distinct.size());
  for (std::size_t u = 0; u < distinct.size(); ++u) {
    const int p = owners[u];
    if (p == rank) continue;
    word_of[u] = static_cast<std::uint32_t>(version_word(distinct[u], p, version_idx));
  }
  versions.resize(version_idx.size() * words_per_row());
  gather(version_idx, versions.data(), "lookup");
  ++stats.version_reads;
  stats.version_rows += version_idx.size();
  stats.version_words += version_idx.size() * (std::uint64_t{1} << word_shift);
}

void EmbeddingTable::Impl::lookup(std::span<const std::uint64_t> ids, std::span<float> out) {
  check_ids(ids, out.size(), "lookup");
  stats.lookups += ids.size();
  if (ids.empty()) return;
  if (!options.dedup) {
    const std::uint64_t t0 = now_ns();
    fetch_rows.resize(ids.size());
    for (std::size_t j = 0; j < ids.size(); ++j) fetch_rows[j] = region_row(ids[j], owner(ids[j]));
    stats.distinct += ids.size();
    stats.fetched_rows += ids.size();
    const std::uint64_t t1 = now_ns();
    gather(fetch_rows, out.data(), "lookup");
    stats.dedup_ns += t1 - t0;
    stats.gather_ns += now_ns() - t1;
    return;
  }
  const std::uint64_t t0 = now_ns();
  slot_of.resize(ids.size());
  const std::vector<std::uint64_t>& distinct = dedup.run(ids.data(), ids.size(), slot_of.data());
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
    gather(fetch_rows, staging.data(), "lookup");
    stats.fetched_rows += fetch_rows.size();
    for (std::size_t u = 0; u < distinct.size(); ++u) {
      if (fetch_of[u] != UINT32_MAX) source[u] = staging.data() + fetch_of[u] * row_bytes;
    }
  }
  const std::uint64_t t4 = now_ns();
  stats.gather_ns += t4 - t3;
  auto* dst = reinterpret_cast<std::byte*>(out.data());
  for (std::size_t j = 0; j < ids.size(); ++j) {
    std::memcpy(dst + j * row_bytes, source[slot_of[j]], row_bytes);
  }
  if (cached) {
    for (std::size_t f = 0; f < fetch_ids.size(); ++f) {
      if (f + kAhead < fetch_ids.size()) cache.prefetch(distinct[fetch_ids[f + kAhead]]);
      const std::size_t u = fetch_ids[f];
      if (owners[u] != rank)
        cache.insert(distinct[u], versions[word_of[u]], staging.data() + f * row_bytes);
    }
  }
  stats.output_ns += now_ns() - t4;
}

void EmbeddingTable::Impl::push(std::span<const std::uint64_t> ids, std::span<const float> deltas) {
  check_ids(ids, deltas.size(), "push_gradients");
  ++stats.pushes;
  if (ids.empty()) return;
  fetch_rows.resize(ids.size());
  for (std::size_t j = 0; j < ids.size(); ++j) fetch_rows[j] = region_row(ids[j], owner(ids[j]));
  // The rows first: their completion means every owner applied them; only then the versions.
  run(ris_wr<float>(0, mr, fetch_rows, deltas, RisOp::kSum), "push_gradients");
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

void EmbeddingTable::Impl::send_bumps() {
  if (bump_idx.empty()) return;
  stats.bump_rows += bump_idx.size();
  run(ris_wr<std::int32_t>(0, mr, bump_idx, bump_ones, RisOp::kSum), "push_gradients");
}

EmbeddingTable::EmbeddingTable(Context& ctx, std::uint32_t dim,
                               std::span<const std::uint64_t> row_offsets,
                               const EmbeddingOptions& options)
    : impl_(std::make_unique<Impl>(ctx, dim, row_offsets, options)) {}
EmbeddingTable::~EmbeddingTable() = default;
EmbeddingTable::EmbeddingTable(EmbeddingTable&&) noexcept = default;
EmbeddingTable& EmbeddingTable::operator=(EmbeddingTable&&) noexcept = default;

std::uint32_t EmbeddingTable::dim() const noexcept {
  return impl_->dim;
}
std::uint64_t EmbeddingTable::total_rows() const noexcept {
  return impl_->total();
}
std::span<float> EmbeddingTable::local_rows() noexcept {
  return {impl_->storage.data(), impl_->rows_of(impl_->rank) * impl_->dim};
}
void EmbeddingTable::local_rows_changed() {
  Impl& t = *impl_;
  const std::uint64_t n = t.version_rows(t.rank);
  const std::size_t words_per_row = t.row_bytes / sizeof(std::int32_t);
  t.bump_idx.clear();
  t.bump_ones.assign(n * words_per_row, 0);
  for (std::uint64_t v = 0; v < n; ++v) {
    t.bump_idx.push_back(t.header_row(t.rank) + 1 + v);
    for (std::size_t w = 0; w < (std::size_t{1} << t.word_shift); ++w)
      t.bump_ones[v * words_per_row + w] = 1;
  }
  t.stats.bumped_buckets += t.buckets_of(t.rank);
  t.send_bumps();
}
void EmbeddingTable::lookup(std::span<const std::uint64_t> ids, std::span<float> out) {
  impl_->lookup(ids, out);
}
void EmbeddingTable::push_gradients(std::span<const std::uint64_t> ids,
                                    std::span<const float> deltas) {
  impl_->push(ids, deltas);
}
void EmbeddingTable::set_options(const EmbeddingOptions& options) {
  if (options.bucket_rows != impl_->options.bucket_rows) {
    refuse(NS_ERR_INVALID, "set_options: bucket_rows is fixed at construction (" +
                               std::to_string(impl_->options.bucket_rows) + "), not " +
                               std::to_string(options.bucket_rows));
  }
  impl_->options = options;
  impl_->cache = embedding::RowCache(options.cache_rows, impl_->row_bytes);
}
const EmbeddingOptions& EmbeddingTable::options() const noexcept {
  return impl_->options;
}
EmbeddingStats EmbeddingTable::stats() const noexcept {
  return impl_->stats;
}
void EmbeddingTable::reset_stats() noexcept {
  impl_->stats = EmbeddingStats{};
}

}  // namespace netsparse
