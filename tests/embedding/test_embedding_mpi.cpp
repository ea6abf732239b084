// The embedding table over real processes (mpirun -np 2-4): every byte of every lookup against a
// sequential reference of the whole table, with heavy duplication, for the plain gather, the
// de-duplicated gather and the cache (small and large); updates between iterations are always
// seen, for bucket sizes 1-64 (a cached row of an older bucket version is never served); a row
// another rank updated is refetched while a row of a bucket nobody wrote stays a hit (exact
// counts); ranks that disagree on bucket_rows all refuse; an out-of-range id fails the call on
// the caller and changes no byte anywhere. Ranks wait for each other with ns_quiesce (an
// MPI_Barrier would stop an INLINE engine from serving its peers). Similarity batches and
// reuse-aware admission never change a lookup, and an admitted row is never served stale.
// NETSPARSE_TEST_PROGRESS=thread|inline picks the engine's progress mode.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "netsparse/embedding.hpp"
#include "netsparse/netsparse_mpi.h"

using netsparse::EmbeddingOptions;
using netsparse::EmbeddingTable;

namespace {

int world(int* size) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return rank;
}

netsparse::Context open_context() {
  const char* p = std::getenv("NETSPARSE_TEST_PROGRESS");
  const bool inline_progress = p != nullptr && std::string(p) == "inline";
  return netsparse::open_mpi(
      MPI_COMM_WORLD,
      netsparse::ContextAttr().progress(inline_progress ? NS_PROGRESS_INLINE : NS_PROGRESS_THREAD));
}

// Uneven blocks: rank p owns 37 + 11 p rows.
std::vector<std::uint64_t> offsets_for(int size) {
  std::vector<std::uint64_t> o{0};
  for (int p = 0; p < size; ++p) o.push_back(o.back() + 37 + 11 * static_cast<std::uint64_t>(p));
  return o;
}

// Exact in fp32 (quarters of small integers), different per (id, element).
float initial(std::uint64_t id, std::uint32_t e) {
  return static_cast<float>(static_cast<int>((id * 31 + e * 7) % 64) - 32) * 0.25f;
}
float delta(std::uint64_t id, std::uint32_t e, int iteration) {
  return static_cast<float>(static_cast<int>((id * 5 + e * 3 + iteration * 11) % 9) - 4) * 0.25f;
}

// The whole table, as every rank holds it for checking.
struct Reference {
  Reference(std::uint64_t total, std::uint32_t dim) : dim(dim), rows(total * dim) {
    for (std::uint64_t id = 0; id < total; ++id)
      for (std::uint32_t e = 0; e < dim; ++e) rows[id * dim + e] = initial(id, e);
  }
  std::uint32_t dim;
  std::vector<float> rows;
};

void fill_local(EmbeddingTable& t, const std::vector<std::uint64_t>& offsets, int rank) {
  const std::span<float> mine = t.local_rows();
  const std::uint64_t first = offsets[static_cast<std::size_t>(rank)];
  for (std::size_t k = 0; k < mine.size(); ++k)
    mine[k] = initial(first + k / t.dim(), static_cast<std::uint32_t>(k % t.dim()));
}

// A batch with heavy duplication: 80 % of the lookups into 12 hot ids spread over every rank.
std::vector<std::uint64_t> batch(int rank, int iteration, std::uint64_t total, std::size_t n) {
  std::mt19937_64 rng(1000003ull * static_cast<std::uint64_t>(rank) + 7919ull * iteration + 1);
  std::vector<std::uint64_t> ids(n);
  for (auto& id : ids) id = rng() % 10 < 8 ? (rng() % 12) * (total / 12) : rng() % total;
  return ids;
}

// Every byte of out against the reference rows of ids; returns the first bad position or -1.
long first_mismatch(const std::vector<std::uint64_t>& ids, const std::vector<float>& out,
                    const Reference& ref) {
  for (std::size_t j = 0; j < ids.size(); ++j) {
    if (std::memcmp(out.data() + j * ref.dim, ref.rows.data() + ids[j] * ref.dim,
                    ref.dim * sizeof(float)) != 0)
      return static_cast<long>(j);
  }
  return -1;
}

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// Every test's start: this rank and the world's size, a context in the progress mode asked for,
// and the table's rows (offsets_for, `total` in all).
class EmbeddingMpi : public ::testing::Test {
 protected:
  int size = 0;
  int rank = world(&size);  // sets size (declared first)
  netsparse::Context ctx = open_context();
  std::vector<std::uint64_t> offsets = offsets_for(size);
  std::uint64_t total = offsets.back();
};

}  // namespace

TEST_F(EmbeddingMpi, EveryPolicyMatchesTheReference) {
  for (const std::uint32_t dim : {16u, 5u}) {
    EmbeddingTable table(ctx, dim, offsets);
    fill_local(table, offsets, rank);
    ctx.quiesce();
    const Reference ref(offsets.back(), dim);
    struct Policy {
      const char* name;
      EmbeddingOptions options;
    };
    const Policy policies[] = {{"plain", {0, false}},
                               {"dedup", {0, true}},
                               {"cache-8", {8, true}},
                               {"cache-all", {offsets.back(), true}}};
    for (const Policy& policy : policies) {
      table.set_options(policy.options);
      table.reset_stats();
      for (int it = 0; it < 4; ++it) {
        const std::vector<std::uint64_t> ids = batch(rank, it, offsets.back(), 3000);
        std::vector<float> out(ids.size() * dim, -1000.0f);
        table.lookup(ids, out);
        EXPECT_EQ(first_mismatch(ids, out, ref), -1)
            << policy.name << " dim " << dim << " iteration " << it;
      }
      const netsparse::EmbeddingStats s = table.stats();
      EXPECT_EQ(s.lookups, 4u * 3000u);
      if (policy.options.dedup) {
        EXPECT_LT(s.distinct, s.lookups / 4) << policy.name;  // heavy duplication was folded
      }
      if (policy.options.cache_rows >= offsets.back()) {
        // After the first batch every remote row seen before comes from the cache.
        EXPECT_GT(s.cache_hits, 0u);
        EXPECT_LT(s.fetched_rows, s.distinct);
        EXPECT_EQ(s.cache_stale, 0u);  // nothing changed
      }
    }
    ctx.quiesce();  // nobody reads this table any more
  }
}

// Lookups, then every rank pushes gradients, then lookups again: each must see every update.
// A row served from a cache filled before an update would differ from the reference.
class EmbeddingBuckets : public EmbeddingMpi,
                         public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(EmbeddingBuckets, UpdatesBetweenIterationsAreAlwaysSeen) {
  constexpr std::uint32_t kDim = 8;
  EmbeddingTable table(ctx, kDim, offsets, EmbeddingOptions{total, true, GetParam()});
  fill_local(table, offsets, rank);
  ctx.quiesce();
  Reference ref(total, kDim);
  for (int it = 0; it < 5; ++it) {
    const std::vector<std::uint64_t> ids = batch(rank, it, total, 2000);
    std::vector<float> out(ids.size() * kDim);
    table.lookup(ids, out);
    EXPECT_EQ(first_mismatch(ids, out, ref), -1) << "iteration " << it;
    table.lookup(ids, out);  // the same batch again: now all from the cache, still right
    EXPECT_EQ(first_mismatch(ids, out, ref), -1) << "iteration " << it << " (repeat)";
    if (it % 2 == 1) continue;  // two iterations in a row without an update: cache hits stay
    // Gradients of this batch, one per lookup (repeats are summed by the owners).
    std::vector<float> g(ids.size() * kDim);
    for (std::size_t j = 0; j < ids.size(); ++j)
      for (std::uint32_t e = 0; e < kDim; ++e) g[j * kDim + e] = delta(ids[j], e, it);
    ctx.quiesce();  // every rank's lookups are done before anyone's rows change
    table.push_gradients(ids, g);
    ctx.quiesce();  // every rank's update is done before anyone looks up again
    for (int p = 0; p < size; ++p) {
      for (const std::uint64_t id : batch(p, it, total, 2000))
        for (std::uint32_t e = 0; e < kDim; ++e) ref.rows[id * kDim + e] += delta(id, e, it);
    }
  }
  const netsparse::EmbeddingStats s = table.stats();
  EXPECT_GT(s.cache_stale, 0u);  // cached rows were refused after updates (the path ran)
  EXPECT_GT(s.cache_hits, 0u);
  EXPECT_EQ(s.pushes, 3u);

  // The owner writes its rows directly (between barriers) and says so: peers see the new rows.
  ctx.quiesce();
  if (rank == 0) {
    const std::span<float> mine = table.local_rows();
    for (std::size_t k = 0; k < mine.size(); ++k) {
      mine[k] += 1.0f;
      ref.rows[k] += 1.0f;
    }
    table.local_rows_changed();
  } else {
    for (std::size_t k = 0; k < offsets[1] * kDim; ++k) ref.rows[k] += 1.0f;
  }
  ctx.quiesce();
  std::vector<std::uint64_t> all(total);
  for (std::uint64_t id = 0; id < total; ++id) all[id] = id;
  std::vector<float> out(total * kDim);
  table.lookup(all, out);
  EXPECT_EQ(first_mismatch(all, out, ref), -1);
  ctx.quiesce();
}

INSTANTIATE_TEST_SUITE_P(BucketRows, EmbeddingBuckets, ::testing::Values(1u, 4u, 16u, 64u));

// Every rank caches every remote row; then one rank adds into one row x of another rank. On the
// next full lookup a rank other than x's owner refetches exactly x's bucket (its rows are
// refused as stale, x comes back updated) and serves every other remote row from its cache: an
// update invalidates only the bucket it wrote. x's owner caches nothing of its own rows, so it
// refetches nothing remote.
TEST_F(EmbeddingMpi, AnUpdateInvalidatesOnlyTheBucketItWrote) {
  constexpr std::uint32_t kDim = 4;
  for (const std::uint32_t bucket : {1u, 8u}) {
    EmbeddingTable table(ctx, kDim, offsets, EmbeddingOptions{total, true, bucket});
    fill_local(table, offsets, rank);
    ctx.quiesce();
    Reference ref(total, kDim);
    std::vector<std::uint64_t> all(total);
    for (std::uint64_t id = 0; id < total; ++id) all[id] = id;
    std::vector<float> out(total * kDim);
    table.lookup(all, out);  // fills the cache with every remote row
    ASSERT_EQ(first_mismatch(all, out, ref), -1);
    ctx.quiesce();
    // x: the 19th row of the last rank (its bucket holds full neighbours for bucket 8: 16-23).
    const int owner = size - 1;
    const std::uint64_t first = offsets[static_cast<std::size_t>(owner)];
    const std::uint64_t x = first + 19;
    if (rank == 0) {
      const std::vector<std::uint64_t> ids = {x, x};  // a repeat: summed, one bucket bumped
      const std::vector<float> g(2 * kDim, 0.5f);
      table.push_gradients(ids, g);
      EXPECT_EQ(table.stats().bumped_buckets, 1u);
      EXPECT_EQ(table.stats().bump_rows, 1u);
    }
    for (std::uint32_t e = 0; e < kDim; ++e) ref.rows[x * kDim + e] += 1.0f;
    ctx.quiesce();
    table.reset_stats();
    table.lookup(all, out);
    EXPECT_EQ(first_mismatch(all, out, ref), -1) << "bucket " << bucket;
    const netsparse::EmbeddingStats s = table.stats();
    const std::uint64_t mine =
        offsets[static_cast<std::size_t>(rank) + 1] - offsets[static_cast<std::size_t>(rank)];
    const std::uint64_t remote = total - mine;
    const std::uint64_t refetched = rank == owner ? 0 : bucket;  // x's whole bucket
    EXPECT_EQ(s.cache_stale, refetched) << "bucket " << bucket;
    EXPECT_EQ(s.cache_hits, remote - refetched) << "bucket " << bucket;
    EXPECT_EQ(s.fetched_rows, mine + refetched) << "bucket " << bucket;
    EXPECT_EQ(s.version_reads, 1u);
    ctx.quiesce();  // nobody reads this table any more
  }
}

// bucket_rows decides where versions live, so every rank must use the same: a rank that differs
// makes every rank refuse (here the layouts coincide, so only the table's own check sees it).
// A bucket size that is not a power of two, or a change through set_options, is refused too.
TEST_F(EmbeddingMpi, RanksThatDisagreeOnBucketRowsAllRefuse) {
  // 37 + 11 p rows of 16 floats: 8 or 16 rows per bucket both need one version row per owner.
  bool refused = false;
  try {
    EmbeddingTable table(ctx, 16, offsets, EmbeddingOptions{64, true, rank == 0 ? 8u : 16u});
  } catch (const netsparse::Error& e) {
    refused = e.status() == NS_ERR_INVALID &&
              std::string(e.what()).find("disagree on bucket_rows") != std::string::npos;
  }
  EXPECT_TRUE(refused);
  EXPECT_TRUE(all_ranks(refused));
  bool odd_refused = false;
  try {
    EmbeddingTable table(ctx, 16, offsets, EmbeddingOptions{64, true, 12});
  } catch (const netsparse::Error& e) {
    odd_refused = e.status() == NS_ERR_INVALID;
  }
  EXPECT_TRUE(odd_refused);
  // The context is still usable: an agreed table works, and keeps its bucket size.
  EmbeddingTable table(ctx, 16, offsets, EmbeddingOptions{64, true, 4});
  EXPECT_EQ(table.options().bucket_rows, 4u);
  EXPECT_THROW(table.set_options(EmbeddingOptions{64, true, 8}), netsparse::Error);
  table.set_options(EmbeddingOptions{0, true, 4});
  EXPECT_EQ(table.options().cache_rows, 0u);
  ctx.quiesce();
}

TEST_F(EmbeddingMpi, OutOfRangeIdIsRefusedAndWritesNothing) {
  constexpr std::uint32_t kDim = 4;
  EmbeddingTable table(ctx, kDim, offsets, EmbeddingOptions{64, true});
  fill_local(table, offsets, rank);
  ctx.quiesce();
  const Reference ref(total, kDim);
  // Only the last rank sends bad ids; it alone gets the error.
  bool refused = false;
  if (rank == size - 1) {
    std::vector<std::uint64_t> ids = {0, total - 1, total, 3};
    std::vector<float> out(ids.size() * kDim, 99.0f);
    try {
      table.lookup(ids, out);
    } catch (const netsparse::Error& e) {
      refused = e.status() == NS_ERR_INVALID &&
                std::string(e.what()).find("position 2") != std::string::npos;
    }
    EXPECT_TRUE(refused);
    for (const float v : out) EXPECT_EQ(v, 99.0f);  // nothing written
    std::vector<float> g(ids.size() * kDim, 1.0f);
    bool push_refused = false;
    try {
      table.push_gradients(ids, g);
    } catch (const netsparse::Error& e) {
      push_refused = e.status() == NS_ERR_INVALID;
    }
    EXPECT_TRUE(push_refused);
    std::vector<std::uint64_t> far = {UINT64_MAX};
    std::vector<float> one(kDim);
    EXPECT_THROW(table.lookup(far, one), netsparse::Error);
    std::vector<float> short_out(kDim);
    EXPECT_THROW(table.lookup(ids, short_out), netsparse::Error);  // wrong output size
  }
  ctx.quiesce();
  // No rank's rows changed: the whole table still equals the initial values.
  std::vector<std::uint64_t> all(total);
  for (std::uint64_t id = 0; id < total; ++id) all[id] = id;
  std::vector<float> out(total * kDim);
  table.lookup(all, out);
  const bool right = first_mismatch(all, out, ref) == -1;
  ctx.quiesce();  // every peer's lookups served before the MPI reduction
  EXPECT_TRUE(all_ranks(right));
  ctx.quiesce();
}

// Reuse-aware batching end to end: every rank forms its batches with a SimilarityBatcher over
// its own samples (re-bucketed every 2 batches, two epochs) and looks them up with each cache
// policy -- LRU, and reuse-aware admission of the next batch's ids into caches of 16 and 8
// rows -- pushing gradients every third iteration. Every byte of every lookup equals the
// reference (each rank rebuilds every peer's batcher to apply their pushes: the same seeds give
// the same batches), whatever the batches, refreshes and admissions.
TEST_F(EmbeddingMpi, SimilarityBatchesAndAdmissionMatchTheReference) {
  constexpr std::uint32_t kDim = 6;
  constexpr std::size_t kSamples = 60, kPerSample = 8;
  const auto batcher_of = [&](int p, std::vector<std::uint64_t>& keys) {
    keys = batch(p, 100, total, kSamples * kPerSample);  // heavy duplication: shared ids
    std::vector<std::uint64_t> sample_offsets;
    for (std::size_t s = 0; s <= kSamples; ++s) sample_offsets.push_back(s * kPerSample);
    netsparse::SimilarityBatchingOptions o;
    o.batch_samples = 10;
    o.refresh_batches = 2;
    o.seed = 17 + static_cast<std::uint64_t>(p);
    return netsparse::SimilarityBatcher(sample_offsets, keys, o);
  };
  // The ids of each of the 13 batches (12 iterations and one ahead) of rank p.
  const auto batches_of = [&](int p) {
    std::vector<std::uint64_t> keys;
    netsparse::SimilarityBatcher b = batcher_of(p, keys);
    std::vector<std::vector<std::uint64_t>> out;
    for (int it = 0; it < 13; ++it) {
      std::vector<std::uint64_t> ids;
      for (const std::uint32_t s : b.next_batch())
        ids.insert(ids.end(), keys.begin() + static_cast<std::ptrdiff_t>(s * kPerSample),
                   keys.begin() + static_cast<std::ptrdiff_t>((s + 1) * kPerSample));
      out.push_back(std::move(ids));
    }
    return out;
  };
  std::vector<std::vector<std::vector<std::uint64_t>>> every(static_cast<std::size_t>(size));
  for (int p = 0; p < size; ++p) every[static_cast<std::size_t>(p)] = batches_of(p);
  const auto& mine = every[static_cast<std::size_t>(rank)];
  struct Policy {
    const char* name;
    std::uint64_t cache_rows;
    netsparse::CacheAdmission admission;
  };
  const Policy policies[] = {{"lru", total, netsparse::CacheAdmission::kAll},
                             {"admit-next-16", 16, netsparse::CacheAdmission::kUpcoming},
                             {"admit-next-8", 8, netsparse::CacheAdmission::kUpcoming}};
  for (const Policy& policy : policies) {
    EmbeddingOptions options{policy.cache_rows, true};
    options.admission = policy.admission;
    EmbeddingTable table(ctx, kDim, offsets, options);
    fill_local(table, offsets, rank);
    ctx.quiesce();
    Reference ref(total, kDim);
    for (int it = 0; it < 12; ++it) {
      const std::vector<std::uint64_t>& ids = mine[static_cast<std::size_t>(it)];
      table.announce_upcoming(mine[static_cast<std::size_t>(it) + 1]);
      std::vector<float> out(ids.size() * kDim, -1000.0f);
      table.lookup(ids, out);
      EXPECT_EQ(first_mismatch(ids, out, ref), -1) << policy.name << " iteration " << it;
      if (it % 3 != 2) continue;
      std::vector<float> g(ids.size() * kDim);
      for (std::size_t j = 0; j < ids.size(); ++j)
        for (std::uint32_t e = 0; e < kDim; ++e) g[j * kDim + e] = delta(ids[j], e, it);
      ctx.quiesce();  // every rank's lookups done before rows change
      table.push_gradients(ids, g);
      ctx.quiesce();  // every update in before the next lookups
      for (int p = 0; p < size; ++p) {
        for (const std::uint64_t id :
             every[static_cast<std::size_t>(p)][static_cast<std::size_t>(it)])
          for (std::uint32_t e = 0; e < kDim; ++e) ref.rows[id * kDim + e] += delta(id, e, it);
      }
    }
    const netsparse::EmbeddingStats s = table.stats();
    EXPECT_GT(s.cache_hits, 0u) << policy.name;
    EXPECT_GT(s.cache_stale, 0u) << policy.name;  // pushes invalidated cached rows
    // Every fetched remote row was either admitted or declined.
    EXPECT_EQ(s.cache_admitted + s.cache_declined, s.fetched_rows - s.local_rows) << policy.name;
    if (policy.admission == netsparse::CacheAdmission::kAll) {
      EXPECT_EQ(s.cache_declined, 0u);
    } else {
      EXPECT_GT(s.cache_declined, 0u) << policy.name;  // unannounced rows evicted none
      EXPECT_GT(s.cache_admitted, 0u) << policy.name;
    }
    ctx.quiesce();  // nobody reads this table any more
  }
}

// Reuse-aware admission keeps what is announced: with a cache of 8 rows, a lookup of every row
// where 8 remote rows in the middle are announced leaves exactly those 8 cached (plain LRU keeps
// the last 8 fetched). And an admitted row is still served only under its bucket's current
// version: with every remote row cached (a cache just large enough), rank 0 adds into every
// row; the next lookup refuses every cached row as stale and returns the updated rows, and the
// one after serves them all from the cache again.
TEST_F(EmbeddingMpi, AdmissionKeepsTheAnnouncedRowsAndNeverServesThemStale) {
  constexpr std::uint32_t kDim = 4;
  std::vector<std::uint64_t> all(total), remote_ids;
  for (std::uint64_t id = 0; id < total; ++id) all[id] = id;
  for (std::uint64_t id = 0; id < total; ++id) {
    if (id < offsets[static_cast<std::size_t>(rank)] ||
        id >= offsets[static_cast<std::size_t>(rank) + 1])
      remote_ids.push_back(id);
  }
  const std::uint64_t remote = remote_ids.size();
  const std::vector<std::uint64_t> announced(remote_ids.begin() + 20, remote_ids.begin() + 28);
  std::vector<float> out(total * kDim), few(announced.size() * kDim);
  for (const auto admission :
       {netsparse::CacheAdmission::kAll, netsparse::CacheAdmission::kUpcoming}) {
    EmbeddingOptions options{8, true};
    options.admission = admission;
    EmbeddingTable table(ctx, kDim, offsets, options);
    fill_local(table, offsets, rank);
    ctx.quiesce();
    const Reference ref(total, kDim);
    table.announce_upcoming(announced);
    table.lookup(all, out);
    EXPECT_EQ(first_mismatch(all, out, ref), -1);
    const bool upcoming = admission == netsparse::CacheAdmission::kUpcoming;
    // Admitted: 8 to fill, then (kUpcoming) the 8 announced, evicting the first 8.
    EXPECT_EQ(table.stats().cache_admitted, upcoming ? 16u : remote);
    table.reset_stats();
    table.lookup(announced, few);
    EXPECT_EQ(first_mismatch(announced, few, ref), -1);
    EXPECT_EQ(table.stats().cache_hits, upcoming ? 8u : 0u);
    ctx.quiesce();
  }
  EmbeddingOptions options{remote, true};
  options.admission = netsparse::CacheAdmission::kUpcoming;
  EmbeddingTable table(ctx, kDim, offsets, options);
  fill_local(table, offsets, rank);
  ctx.quiesce();
  Reference ref(total, kDim);
  table.announce_upcoming(all);
  table.lookup(all, out);  // caches every remote row
  ASSERT_EQ(first_mismatch(all, out, ref), -1);
  ctx.quiesce();
  if (rank == 0) {
    const std::vector<float> g(total * kDim, 0.25f);
    table.push_gradients(all, g);
  }
  for (float& v : ref.rows) v += 0.25f;
  ctx.quiesce();
  table.reset_stats();
  table.lookup(all, out);
  EXPECT_EQ(first_mismatch(all, out, ref), -1);
  EXPECT_EQ(table.stats().cache_stale, remote);
  EXPECT_EQ(table.stats().cache_hits, 0u);
  table.lookup(all, out);  // refetched rows were admitted under the new versions
  EXPECT_EQ(first_mismatch(all, out, ref), -1);
  EXPECT_EQ(table.stats().cache_hits, remote);
  std::vector<std::uint64_t> bad = {0, total};
  EXPECT_THROW(table.announce_upcoming(bad), netsparse::Error);
  ctx.quiesce();
}
