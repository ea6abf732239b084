// SimilarityBatcher (reuse-aware batching): every epoch is a permutation of the samples whatever
// the refresh period, batch size and seed; the same seed gives the same batches; on samples
// drawn from disjoint clusters, similarity batches hold far fewer distinct keys than random
// ones; bad arguments are refused. And IdSet, the announced ids of reuse-aware admission.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "embedding/row_cache.hpp"
#include "netsparse/embedding.hpp"

using netsparse::SimilarityBatcher;
using netsparse::SimilarityBatchingOptions;

namespace {

// n samples of `per` keys each; sample s belongs to cluster s * 7 % clusters and draws its keys
// from that cluster's own 3 * per keys (clusters are disjoint), with some keys repeated.
struct Samples {
  std::vector<std::uint64_t> offsets{0}, keys;
};
Samples clustered(std::size_t n, std::size_t per, std::size_t clusters, std::uint64_t seed) {
  Samples s;
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t cluster = i * 7 % clusters;
    for (std::size_t k = 0; k < per; ++k) s.keys.push_back(cluster * 1000 + rng() % (3 * per));
    s.offsets.push_back(s.keys.size());
  }
  return s;
}

std::size_t distinct_keys(const Samples& s, std::span<const std::uint32_t> batch) {
  std::set<std::uint64_t> keys;
  for (const std::uint32_t i : batch)
    keys.insert(s.keys.begin() + static_cast<std::ptrdiff_t>(s.offsets[i]),
                s.keys.begin() + static_cast<std::ptrdiff_t>(s.offsets[i + 1]));
  return keys.size();
}

}  // namespace

TEST(SimilarityBatcher, EveryEpochIsAPermutation) {
  const Samples s = clustered(103, 5, 6, 1);
  for (const bool similarity : {true, false}) {
    for (const std::uint32_t refresh : {0u, 1u, 3u}) {
      for (const std::size_t batch : {1u, 10u, 17u, 103u, 500u}) {
        SimilarityBatchingOptions o;
        o.batch_samples = batch;
        o.refresh_batches = refresh;
        o.similarity = similarity;
        o.signature_hashes = 3;
        SimilarityBatcher b(s.offsets, s.keys, o);
        ASSERT_EQ(b.samples(), 103u);
        for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
          std::vector<std::uint32_t> seen;
          while (seen.size() < 103) {
            const std::span<const std::uint32_t> got = b.next_batch();
            ASSERT_EQ(b.epoch(), epoch);
            ASSERT_FALSE(got.empty());
            ASSERT_LE(got.size(), batch);
            seen.insert(seen.end(), got.begin(), got.end());
          }
          std::sort(seen.begin(), seen.end());
          std::vector<std::uint32_t> all(103);
          for (std::uint32_t i = 0; i < 103; ++i) all[i] = i;
          EXPECT_EQ(seen, all) << "similarity " << similarity << " refresh " << refresh << " batch "
                               << batch << " epoch " << epoch;
        }
        // Re-bucketed at each epoch start and every `refresh` batches within an epoch.
        const std::uint64_t batches = (103 + batch - 1) / batch;
        const std::uint64_t per_epoch = refresh == 0 ? 1 : (batches + refresh - 1) / refresh;
        EXPECT_EQ(b.refreshes(), 3 * per_epoch);
      }
    }
  }
}

TEST(SimilarityBatcher, TheSameSeedGivesTheSameBatches) {
  const Samples s = clustered(64, 4, 4, 2);
  SimilarityBatchingOptions o;
  o.batch_samples = 10;
  o.refresh_batches = 2;
  SimilarityBatcher a(s.offsets, s.keys, o), b(s.offsets, s.keys, o);
  o.seed = 99;
  SimilarityBatcher c(s.offsets, s.keys, o);
  bool differs = false;
  for (int k = 0; k < 20; ++k) {
    const std::span<const std::uint32_t> x = a.next_batch(), y = b.next_batch();
    const std::span<const std::uint32_t> z = c.next_batch();
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << "batch " << k;
    differs = differs || !std::equal(x.begin(), x.end(), z.begin(), z.end());
  }
  EXPECT_TRUE(differs);  // another seed, other batches (fresh hash functions)
}

// 8 disjoint clusters of 40 samples, batches of 40: a similarity batch is (nearly) one cluster,
// a random batch spans them all.
TEST(SimilarityBatcher, SimilarBatchesShareKeys) {
  const Samples s = clustered(320, 6, 8, 3);
  for (const std::uint32_t refresh : {0u, 2u}) {
    std::size_t total[2] = {0, 0};
    for (const bool similarity : {false, true}) {
      SimilarityBatchingOptions o;
      o.batch_samples = 40;
      o.refresh_batches = refresh;
      o.similarity = similarity;
      SimilarityBatcher b(s.offsets, s.keys, o);
      for (int k = 0; k < 16; ++k) total[similarity] += distinct_keys(s, b.next_batch());
    }
    // A cluster has at most 18 keys: one-cluster batches hold about 18, mixed ones about 8 x 13.
    EXPECT_LT(total[1] * 3, total[0])
        << "refresh " << refresh << ": similar " << total[1] << " random " << total[0];
  }
}

TEST(SimilarityBatcher, BadArgumentsAreRefused) {
  const Samples s = clustered(10, 2, 2, 4);
  SimilarityBatchingOptions o;
  o.batch_samples = 4;
  EXPECT_NO_THROW(SimilarityBatcher(s.offsets, s.keys, o));
  const auto refused = [&](std::vector<std::uint64_t> offsets, std::vector<std::uint64_t> keys,
                           SimilarityBatchingOptions opt, const char* what) {
    try {
      SimilarityBatcher b(offsets, keys, opt);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const netsparse::Error& e) {
      EXPECT_EQ(e.status(), NS_ERR_INVALID) << what;
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  SimilarityBatchingOptions bad = o;
  bad.batch_samples = 0;
  refused(s.offsets, s.keys, bad, "batch_samples");
  bad = o;
  bad.signature_hashes = 17;
  refused(s.offsets, s.keys, bad, "signature_hashes");
  refused({0}, {}, o, "at least one sample");
  refused({0, 3, 2, 4}, {1, 2, 3, 4}, o, "non-decreasing");
  refused({0, 2, 5}, {1, 2, 3, 4}, o, "keys.size()");
}

TEST(IdSet, HoldsExactlyTheAssignedIds) {
  netsparse::embedding::IdSet set;
  EXPECT_FALSE(set.contains(5));  // never assigned: empty
  std::vector<std::uint64_t> ids;
  for (std::uint64_t k = 0; k < 300; ++k) ids.push_back(k * k * 31 % 10007);
  ids.push_back(ids[3]);  // a repeat counts once
  set.assign(ids.data(), ids.size());
  const std::set<std::uint64_t> model(ids.begin(), ids.end());
  EXPECT_EQ(set.size(), model.size());
  for (std::uint64_t id = 0; id < 10007; ++id) EXPECT_EQ(set.contains(id), model.count(id) == 1);
  set.assign(ids.data(), 1);  // re-assigned: only the new ids
  EXPECT_TRUE(set.contains(ids[0]));
  EXPECT_FALSE(set.contains(ids[5]));
}
