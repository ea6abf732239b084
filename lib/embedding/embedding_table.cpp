// EmbeddingTable: the region layout, the lookup path (de-duplication, epoch exchange, cache,
// one gather of the misses) and the update path (one scatter-reduce, then the epoch bumps).
//
// Region layout: rank p registers its rows [offsets[p], offsets[p+1]) followed by one hidden
// row whose first 4 bytes are p's epoch (uint32). Global id g of owner p is region row g + p;
// p's epoch is region row offsets[p + 1] + p. The region is the context's only one (the engine
// allows one at a time), so the epochs travel with the same verbs as the rows.
//
// Why an epoch exchange per lookup, before the gather: a cached row labelled with epoch E must
// hold every update counted in E. The owner's epoch is bumped only after the update's
// scatter-reduce has completed (every packet applied), and the epochs are read before the rows
// are fetched, so a row fetched after reading E holds at least the updates counted in E: a
// label is never newer than the row. Reading the epochs inside the row gather instead could
// pair a row read before an update with an epoch read after it (the owner answers the reads of
// one gather in any order of packets). The exchange is one small gather of one hidden row per
// owner the batch reads from, posted only when the cache is on and the batch has remote ids.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "embedding/row_cache.hpp"
#include "netsparse/embedding.hpp"

namespace netsparse {

namespace {

[[noreturn]] void refuse(ns_status_t status, const std::string& what) {
  throw Error(status, "EmbeddingTable::" + what);
}

}  // namespace

struct EmbeddingTable::Impl {
  Impl(Context& c, std::uint32_t d, std::span<const std::uint64_t> offsets,
       const EmbeddingOptions& o)
      : rank(c.rank()),
        size(c.size()),
        dim(d),
        row_bytes(std::size_t{d} * sizeof(float)),
        options(o),
        cache(o.cache_rows, row_bytes) {
    if (d == 0) refuse(NS_ERR_INVALID, "EmbeddingTable: dim must be at least 1");
    if (offsets.size() != static_cast<std::size_t>(size) + 1 || offsets.front() != 0 ||
        !std::is_sorted(offsets.begin(), offsets.end())) {
      refuse(NS_ERR_INVALID,
             "EmbeddingTable: row_offsets needs size() + 1 non-decreasing entries from 0");
    }
    row_offsets.assign(offsets.begin(), offsets.end());
    for (int p = 0; p <= size; ++p) {
      region_offsets.push_back(row_offsets[static_cast<std::size_t>(p)] +
                               static_cast<std::uint64_t>(p));
    }
    const std::uint64_t mine = row_offsets[static_cast<std::size_t>(rank) + 1] -
                               row_offsets[static_cast<std::size_t>(rank)];
    storage.assign((mine + 1) * dim, 0.0f);  // + the hidden epoch row (epoch 0)
    mr = PropertyRegion(c, storage.data(), mine + 1, static_cast<std::uint32_t>(row_bytes),
                        region_offsets);
    cq = Cq(c, 4);
    qp = Qp(c, cq, 4);
  }

  std::uint64_t total() const { return row_offsets.back(); }
  int owner(std::uint64_t id) const {
    return static_cast<int>(std::upper_bound(row_offsets.begin(), row_offsets.end(), id) -
                            row_offsets.begin()) -
           1;
  }
  std::uint64_t epoch_row(int p) const {
    return region_offsets[static_cast<std::size_t>(p) + 1] - 1;
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

  // The current epoch of every owner marked in `needed` (one gather of their hidden rows; the
  // others' entries are left as they were and not used).
  void read_epochs(const std::vector<char>& needed) {
    epoch_idx.clear();
    epoch_owners.clear();
    for (int p = 0; p < size; ++p) {
      if (needed[static_cast<std::size_t>(p)] == 0) continue;
      epoch_idx.push_back(epoch_row(p));
      epoch_owners.push_back(p);
    }
    epoch_rows.resize(epoch_idx.size() * row_bytes);
    gather(epoch_idx, epoch_rows.data(), "lookup");
    epochs.resize(static_cast<std::size_t>(size));
    for (std::size_t k = 0; k < epoch_owners.size(); ++k) {
      std::memcpy(&epochs[static_cast<std::size_t>(epoch_owners[k])],
                  epoch_rows.data() + k * row_bytes, sizeof(std::uint32_t));
    }
    ++stats.epoch_reads;
  }

  void lookup(std::span<const std::uint64_t> ids, std::span<float> out);
  void push(std::span<const std::uint64_t> ids, std::span<const float> deltas);
  void bump_epochs(const std::vector<int>& owners);

  int rank, size;
  std::uint32_t dim;
  std::size_t row_bytes;
  EmbeddingOptions options;
  std::vector<std::uint64_t> row_offsets, region_offsets;
  std::vector<float> storage;  // never resized after registration
  PropertyRegion mr;
  Cq cq;
  Qp qp;
  embedding::RowCache cache;
  embedding::IdDedup dedup;
  EmbeddingStats stats;
  // Per-call scratch, kept to avoid allocations per batch.
  std::vector<std::uint32_t> slot_of;
  std::vector<const std::byte*> source;  // per distinct id: where its row is
  std::vector<std::uint64_t> fetch_rows, fetch_ids, epoch_idx;
  std::vector<std::uint32_t> fetch_of;  // per distinct id: its place in the fetch, or UINT32_MAX
  std::vector<std::byte> staging, epoch_rows;
  std::vector<std::uint32_t> epochs;
  std::vector<int> owners;         // per distinct id
  std::vector<char> remote_owner;  // per rank: the batch has ids it owns (not this rank)
  std::vector<int> epoch_owners;   // the owners of the last epoch read, in gather order
};

void EmbeddingTable::Impl::lookup(std::span<const std::uint64_t> ids, std::span<float> out) {
  check_ids(ids, out.size(), "lookup");
  stats.lookups += ids.size();
  if (ids.empty()) return;
  if (!options.dedup) {
    fetch_rows.resize(ids.size());
    for (std::size_t j = 0; j < ids.size(); ++j) fetch_rows[j] = ids[j] + owner(ids[j]);
    stats.distinct += ids.size();
    stats.fetched_rows += ids.size();
    gather(fetch_rows, out.data(), "lookup");
    return;
  }
  slot_of.resize(ids.size());
  const std::vector<std::uint64_t>& distinct = dedup.run(ids.data(), ids.size(), slot_of.data());
  stats.distinct += distinct.size();
  const bool cached = cache.capacity() > 0;
  owners.resize(distinct.size());
  // Only the owners this batch reads from: a peer that is gone fails the lookups that need it,
  // not every lookup.
  remote_owner.assign(static_cast<std::size_t>(size), 0);
  bool any_remote = false;
  for (std::size_t u = 0; u < distinct.size(); ++u) {
    owners[u] = owner(distinct[u]);
    if (owners[u] != rank) {
      remote_owner[static_cast<std::size_t>(owners[u])] = 1;
      any_remote = true;
    }
  }
  if (cached && any_remote) read_epochs(remote_owner);
  // Hits first (their pointers stay valid until the inserts below), the rest into one gather.
  source.assign(distinct.size(), nullptr);
  fetch_of.assign(distinct.size(), UINT32_MAX);
  fetch_rows.clear();
  fetch_ids.clear();
  for (std::size_t u = 0; u < distinct.size(); ++u) {
    const int p = owners[u];
    if (p == rank) {
      ++stats.local_rows;
    } else if (cached) {
      const std::uint64_t stale_before = cache.stale_dropped();
      source[u] = cache.find(distinct[u], epochs[static_cast<std::size_t>(p)]);
      stats.cache_stale += cache.stale_dropped() - stale_before;
      if (source[u] != nullptr) {
        ++stats.cache_hits;
        continue;
      }
    }
    fetch_of[u] = static_cast<std::uint32_t>(fetch_rows.size());
    fetch_rows.push_back(distinct[u] + static_cast<std::uint64_t>(p));
    fetch_ids.push_back(u);
  }
  if (!fetch_rows.empty()) {
    staging.resize(fetch_rows.size() * row_bytes);
    gather(fetch_rows, staging.data(), "lookup");
    stats.fetched_rows += fetch_rows.size();
    for (std::size_t u = 0; u < distinct.size(); ++u) {
      if (fetch_of[u] != UINT32_MAX) source[u] = staging.data() + fetch_of[u] * row_bytes;
    }
  }
  auto* dst = reinterpret_cast<std::byte*>(out.data());
  for (std::size_t j = 0; j < ids.size(); ++j) {
    std::memcpy(dst + j * row_bytes, source[slot_of[j]], row_bytes);
  }
  if (cached) {
    for (std::size_t f = 0; f < fetch_ids.size(); ++f) {
      const std::size_t u = fetch_ids[f];
      const int p = owners[u];
      if (p != rank) {
        cache.insert(distinct[u], epochs[static_cast<std::size_t>(p)],
                     staging.data() + f * row_bytes);
      }
    }
  }
}

void EmbeddingTable::Impl::push(std::span<const std::uint64_t> ids, std::span<const float> deltas) {
  check_ids(ids, deltas.size(), "push_gradients");
  ++stats.pushes;
  if (ids.empty()) return;
  fetch_rows.resize(ids.size());
  std::vector<char> touched(static_cast<std::size_t>(size), 0);
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const int p = owner(ids[j]);
    touched[static_cast<std::size_t>(p)] = 1;
    fetch_rows[j] = ids[j] + static_cast<std::uint64_t>(p);
  }
  // The rows first: their completion means every owner applied them; only then the epochs.
  run(ris_wr<float>(0, mr, fetch_rows, deltas, RisOp::kSum), "push_gradients");
  std::vector<int> owners;
  for (int p = 0; p < size; ++p) {
    if (touched[static_cast<std::size_t>(p)] != 0) owners.push_back(p);
  }
  bump_epochs(owners);
}

// +1 on the epoch word of each owner (int32 sum over the hidden row: element 0 gets 1, the rest
// of the row 0), applied by the owners' engines.
void EmbeddingTable::Impl::bump_epochs(const std::vector<int>& owners) {
  if (owners.empty()) return;
  const std::size_t words = row_bytes / sizeof(std::int32_t);
  std::vector<std::int32_t> ones(owners.size() * words, 0);
  epoch_idx.clear();
  for (std::size_t k = 0; k < owners.size(); ++k) {
    ones[k * words] = 1;
    epoch_idx.push_back(epoch_row(owners[k]));
  }
  run(ris_wr<std::int32_t>(0, mr, epoch_idx, ones, RisOp::kSum), "push_gradients");
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
  return {impl_->storage.data(), impl_->storage.size() - impl_->dim};
}
void EmbeddingTable::local_rows_changed() {
  impl_->bump_epochs({impl_->rank});
}
void EmbeddingTable::lookup(std::span<const std::uint64_t> ids, std::span<float> out) {
  impl_->lookup(ids, out);
}
void EmbeddingTable::push_gradients(std::span<const std::uint64_t> ids,
                                    std::span<const float> deltas) {
  impl_->push(ids, deltas);
}
void EmbeddingTable::set_options(const EmbeddingOptions& options) {
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
