// Pending PR Table: new / coalesced / full, stable entry ids, waiter order, drain, and a random
// comparison against a std::map model (exercises probing and backward-shift deletion).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "filter/model/pending_table.hpp"

namespace netsparse::filter {
namespace {

TEST(PendingTable, DefaultsToThePapersSize) {
  PendingTable t;
  EXPECT_EQ(t.capacity(), 256u);
  EXPECT_EQ(t.waiters_free(), 4u * 256);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.full());
}

TEST(PendingTable, RejectsBadSizes) {
  EXPECT_THROW(PendingTable(0), std::invalid_argument);
  EXPECT_THROW(PendingTable(8, 4), std::invalid_argument);  // fewer waiters than entries
}

TEST(PendingTable, NewThenCoalescedThenComplete) {
  PendingTable t(8);
  const PendingResult a = t.insert(1000, 1);
  EXPECT_EQ(a.kind, PendingInsert::kNew);
  const PendingResult b = t.insert(2000, 2);
  EXPECT_EQ(b.kind, PendingInsert::kNew);
  EXPECT_NE(a.entry, b.entry);
  const PendingResult c = t.insert(1000, 3);
  EXPECT_EQ(c.kind, PendingInsert::kCoalesced);
  EXPECT_EQ(c.entry, a.entry);
  EXPECT_EQ(t.insert(1000, 4).entry, a.entry);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.waiter_count(a.entry), 3u);
  EXPECT_EQ(t.idx_of(a.entry), 1000u);
  EXPECT_EQ(t.find(2000), b.entry);
  EXPECT_EQ(t.find(3000), PendingTable::kNotFound);

  std::vector<std::uint64_t> woken;
  t.complete(a.entry, [&](std::uint64_t w) { woken.push_back(w); });
  EXPECT_EQ(woken, (std::vector<std::uint64_t>{1, 3, 4}));  // first waiter first
  EXPECT_EQ(t.size(), 1u);
  EXPECT_FALSE(t.matches(a.entry, 1000));
  EXPECT_EQ(t.find(1000), PendingTable::kNotFound);
  EXPECT_TRUE(t.matches(b.entry, 2000));
  EXPECT_EQ(t.waiters_free(), 4u * 8 - 1);
}

TEST(PendingTable, MatchesRejectsStaleAndForgedResponses) {
  PendingTable t(4);
  const auto r = t.insert(77, 0);
  EXPECT_TRUE(t.matches(r.entry, 77));
  EXPECT_FALSE(t.matches(r.entry, 78));            // wrong idx
  EXPECT_FALSE(t.matches((r.entry + 1) % 4, 77));  // not pending
  EXPECT_FALSE(t.matches(4, 77));                  // out of range
  EXPECT_FALSE(t.matches(0xFFFFFFFFu, 77));
  t.complete(r.entry, [](std::uint64_t) {});
  EXPECT_FALSE(t.matches(r.entry, 77));  // stale: already completed
  EXPECT_THROW(t.complete(r.entry, [](std::uint64_t) {}), std::invalid_argument);
  EXPECT_THROW(t.complete(99, [](std::uint64_t) {}), std::invalid_argument);
}

TEST(PendingTable, FullIsBackpressureAndRecordsNothing) {
  PendingTable t(4);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_EQ(t.insert(i * 10, i).kind, PendingInsert::kNew);
  EXPECT_TRUE(t.full());
  EXPECT_EQ(t.insert(999, 9).kind, PendingInsert::kFull);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.find(999), PendingTable::kNotFound);
  // Coalescing onto a pending idx still works while no new entry fits.
  EXPECT_EQ(t.insert(20, 5).kind, PendingInsert::kCoalesced);
  t.complete(t.find(10), [](std::uint64_t) {});
  EXPECT_FALSE(t.full());
  EXPECT_EQ(t.insert(999, 9).kind, PendingInsert::kNew);
}

TEST(PendingTable, RunningOutOfWaiterSlotsIsFullToo) {
  PendingTable t(2, 3);
  const auto a = t.insert(5, 1);
  EXPECT_EQ(t.insert(5, 2).kind, PendingInsert::kCoalesced);
  EXPECT_EQ(t.insert(6, 3).kind, PendingInsert::kNew);
  EXPECT_EQ(t.waiters_free(), 0u);
  EXPECT_EQ(t.insert(5, 4).kind, PendingInsert::kFull);
  EXPECT_EQ(t.waiter_count(a.entry), 2u);
  std::vector<std::uint64_t> woken;
  t.complete(a.entry, [&](std::uint64_t w) { woken.push_back(w); });
  EXPECT_EQ(woken, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(t.waiters_free(), 2u);
}

TEST(PendingTable, EntryIdsAreStableWhileOthersComeAndGo) {
  PendingTable t(64);
  std::map<std::uint64_t, std::uint32_t> id;
  for (std::uint64_t i = 0; i < 64; ++i) id[i * 4096] = t.insert(i * 4096, i).entry;
  for (std::uint64_t i = 0; i < 64; i += 2) t.complete(id[i * 4096], [](std::uint64_t) {});
  for (std::uint64_t i = 1; i < 64; i += 2) {
    EXPECT_TRUE(t.matches(id[i * 4096], i * 4096)) << i;
    EXPECT_EQ(t.find(i * 4096), id[i * 4096]);
  }
}

TEST(PendingTable, CompleteMayInsertFromTheCallback) {
  PendingTable t(1, 1);
  const auto a = t.insert(3, 30);
  std::vector<PendingResult> reinserted;
  t.complete(a.entry, [&](std::uint64_t w) { reinserted.push_back(t.insert(4, w + 1)); });
  ASSERT_EQ(reinserted.size(), 1u);
  EXPECT_EQ(reinserted[0].kind, PendingInsert::kNew);  // entry and waiter were freed first
  EXPECT_TRUE(t.matches(reinserted[0].entry, 4));
}

TEST(PendingTable, DrainReleasesEverything) {
  PendingTable t(16);
  std::multimap<std::uint64_t, std::uint64_t> expected;
  for (std::uint64_t i = 0; i < 10; ++i) {
    t.insert(i % 4, i);
    expected.emplace(i % 4, i);
  }
  std::multimap<std::uint64_t, std::uint64_t> got;
  t.drain([&](std::uint64_t idx, std::uint64_t w) { got.emplace(idx, w); });
  EXPECT_EQ(got, expected);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.waiters_free(), 64u);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_EQ(t.find(i), PendingTable::kNotFound);
}

// Random inserts and completions against a model; idxs drawn from a small set of multiples of a
// large power of two so that many collide in the hash index and deletions shift runs.
TEST(PendingTable, RandomOperationsMatchAModel) {
  for (std::uint32_t capacity : {1u, 7u, 256u}) {
    PendingTable t(capacity, capacity * 2);
    std::map<std::uint64_t, std::pair<std::uint32_t, std::vector<std::uint64_t>>> model;
    std::uint32_t waiters_used = 0;
    std::mt19937_64 rng(capacity);
    for (int step = 0; step < 200000; ++step) {
      const std::uint64_t idx = (rng() % (3 * capacity + 5)) << (rng() % 2 ? 20 : 0);
      if (rng() % 3 != 0) {
        const std::uint64_t who = static_cast<std::uint64_t>(step);
        const PendingResult r = t.insert(idx, who);
        auto it = model.find(idx);
        if (waiters_used == capacity * 2 || (it == model.end() && model.size() == capacity)) {
          ASSERT_EQ(r.kind, PendingInsert::kFull);
        } else if (it != model.end()) {
          ASSERT_EQ(r.kind, PendingInsert::kCoalesced);
          ASSERT_EQ(r.entry, it->second.first);
          it->second.second.push_back(who);
          ++waiters_used;
        } else {
          ASSERT_EQ(r.kind, PendingInsert::kNew);
          model[idx] = {r.entry, {who}};
          ++waiters_used;
        }
      } else if (!model.empty()) {
        auto it = model.begin();
        std::advance(it, static_cast<long>(rng() % model.size()));
        std::vector<std::uint64_t> woken;
        t.complete(it->second.first, [&](std::uint64_t w) { woken.push_back(w); });
        ASSERT_EQ(woken, it->second.second);
        waiters_used -= static_cast<std::uint32_t>(woken.size());
        model.erase(it);
      }
      ASSERT_EQ(t.size(), model.size());
      if (step % 97 == 0) {
        for (const auto& [k, v] : model) ASSERT_EQ(t.find(k), v.first);
        ASSERT_EQ(t.find(0xDEADBEEFull << 8), PendingTable::kNotFound);
      }
    }
  }
}

}  // namespace
}  // namespace netsparse::filter
