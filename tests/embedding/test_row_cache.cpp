// The embedding layer's LRU row cache and per-batch id de-duplication, against simple models.
#include <gtest/gtest.h>

#include <cstring>
#include <list>
#include <map>
#include <random>
#include <vector>

#include "embedding/row_cache.hpp"

using netsparse::embedding::IdDedup;
using netsparse::embedding::RowCache;

namespace {

constexpr std::size_t kRowBytes = 24;

std::vector<std::byte> row_of(std::uint64_t id, std::uint32_t version) {
  std::vector<std::byte> r(kRowBytes);
  for (std::size_t b = 0; b < kRowBytes; ++b)
    r[b] = static_cast<std::byte>((id * 131 + version * 17 + b) & 0xFF);
  return r;
}

bool holds(RowCache& c, std::uint64_t id, std::uint32_t version) {
  const std::byte* p = c.find(id, version);
  return p != nullptr && std::memcmp(p, row_of(id, version).data(), kRowBytes) == 0;
}

}  // namespace

TEST(RowCache, ZeroCapacityHoldsNothing) {
  RowCache c(0, kRowBytes);
  c.insert(5, 0, row_of(5, 0).data());
  EXPECT_EQ(c.find(5, 0), nullptr);
  EXPECT_EQ(c.size(), 0u);
}

TEST(RowCache, EvictsTheLeastRecentlyUsed) {
  RowCache c(2, kRowBytes);
  c.insert(1, 0, row_of(1, 0).data());
  c.insert(2, 0, row_of(2, 0).data());
  EXPECT_TRUE(holds(c, 1, 0));  // 1 is now the most recently used
  EXPECT_EQ(c.lru_id(), 2u);
  c.insert(3, 0, row_of(3, 0).data());  // evicts 2
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.evictions(), 1u);
  EXPECT_EQ(c.find(2, 0), nullptr);
  EXPECT_TRUE(holds(c, 1, 0));
  EXPECT_TRUE(holds(c, 3, 0));
  EXPECT_EQ(c.mru_id(), 3u);
}

TEST(RowCache, AnotherVersionIsNeverServedAndIsDropped) {
  RowCache c(4, kRowBytes);
  c.insert(7, 1, row_of(7, 1).data());
  EXPECT_EQ(c.find(7, 2), nullptr);
  EXPECT_EQ(c.stale_dropped(), 1u);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.find(7, 1), nullptr);  // gone, not kept for the old version either
  c.insert(7, 2, row_of(7, 2).data());
  EXPECT_TRUE(holds(c, 7, 2));
}

TEST(RowCache, ReinsertReplacesTheRowAndItsVersion) {
  RowCache c(2, kRowBytes);
  c.insert(9, 0, row_of(9, 0).data());
  c.insert(9, 3, row_of(9, 3).data());
  EXPECT_EQ(c.size(), 1u);
  EXPECT_TRUE(holds(c, 9, 3));
}

TEST(RowCache, HitPointersSurviveStaleRemovals) {
  RowCache c(8, kRowBytes);
  for (std::uint64_t id = 0; id < 8; ++id) c.insert(id, 0, row_of(id, 0).data());
  const std::byte* kept = c.find(3, 0);
  ASSERT_NE(kept, nullptr);
  for (std::uint64_t id = 4; id < 8; ++id) EXPECT_EQ(c.find(id, 1), nullptr);  // stale: removed
  EXPECT_EQ(std::memcmp(kept, row_of(3, 0).data(), kRowBytes), 0);
}

// Random inserts, finds and version changes over ids that collide in the index, against a model
// (list in recency order): membership, contents and the LRU victim must agree at every step.
TEST(RowCache, MatchesAnLruModel) {
  for (const std::uint64_t capacity : {1u, 3u, 17u, 64u}) {
    RowCache c(capacity, kRowBytes);
    std::list<std::uint64_t> order;  // front = most recently used
    std::map<std::uint64_t, std::uint32_t> version_of;
    std::mt19937_64 rng(capacity);
    const std::uint64_t span = 3 * capacity + 5;
    for (int step = 0; step < 20000; ++step) {
      const std::uint64_t id = (rng() % span) << (rng() % 2 ? 20 : 0);  // spread and clustered
      const auto version = static_cast<std::uint32_t>(rng() % 3);
      const auto it = version_of.find(id);
      if (rng() % 2 == 0) {
        const bool model_hit = it != version_of.end() && it->second == version;
        ASSERT_EQ(holds(c, id, version), model_hit) << "capacity " << capacity << " step " << step;
        if (it != version_of.end()) {
          order.remove(id);
          if (model_hit) {
            order.push_front(id);
          } else {
            version_of.erase(it);
          }
        }
      } else {
        c.insert(id, version, row_of(id, version).data());
        if (it != version_of.end()) {
          order.remove(id);
        } else if (version_of.size() == capacity) {
          version_of.erase(order.back());
          order.pop_back();
        }
        order.push_front(id);
        version_of[id] = version;
      }
      ASSERT_EQ(c.size(), version_of.size());
      if (!order.empty()) {
        ASSERT_EQ(c.lru_id(), order.back());
        ASSERT_EQ(c.mru_id(), order.front());
      }
    }
    c.clear();
    EXPECT_EQ(c.size(), 0u);
    for (const auto& [id, version] : version_of) EXPECT_EQ(c.find(id, version), nullptr);
  }
}

TEST(IdDedup, FirstAppearanceOrderAcrossReusedBatches) {
  IdDedup d;
  const std::vector<std::uint64_t> a = {5, 9, 5, 5, 1, 9, 1ull << 40};
  std::vector<std::uint32_t> slot(a.size());
  EXPECT_EQ(d.run(a.data(), a.size(), slot.data()),
            (std::vector<std::uint64_t>{5, 9, 1, 1ull << 40}));
  EXPECT_EQ(slot, (std::vector<std::uint32_t>{0, 1, 0, 0, 2, 1, 3}));
  // The next batch must not see the previous batch's ids.
  const std::vector<std::uint64_t> b = {1, 7, 7};
  slot.resize(b.size());
  EXPECT_EQ(d.run(b.data(), b.size(), slot.data()), (std::vector<std::uint64_t>{1, 7}));
  EXPECT_EQ(slot, (std::vector<std::uint32_t>{0, 1, 1}));
  // A large batch grows the table; every position maps back to its id.
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> big(50000);
  for (auto& x : big) x = rng() % 3000;
  slot.resize(big.size());
  const std::vector<std::uint64_t>& distinct = d.run(big.data(), big.size(), slot.data());
  EXPECT_LE(distinct.size(), 3000u);
  for (std::size_t j = 0; j < big.size(); ++j) ASSERT_EQ(distinct[slot[j]], big[j]);
}
