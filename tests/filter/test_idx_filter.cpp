// Idx Filter: bit semantics, epochs (including the tag wrap), windows, and concurrent
// test_and_set with exactly one winner per idx.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "filter/model/idx_filter.hpp"

namespace netsparse::filter {
namespace {

TEST(IdxFilter, StartsClearAndSetsIndividualBits) {
  IdxFilter f(100);
  EXPECT_EQ(f.size(), 100u);
  for (std::uint64_t i = 0; i < 100; ++i) EXPECT_FALSE(f.test(i));
  EXPECT_FALSE(f.test_and_set(33));  // bit 1 of the second word
  EXPECT_TRUE(f.test(33));
  EXPECT_TRUE(f.test_and_set(33));
  for (std::uint64_t i : {0u, 31u, 32u, 34u, 63u, 64u, 99u}) EXPECT_FALSE(f.test(i)) << i;
  f.set(99);
  f.set(0);
  EXPECT_TRUE(f.test(99));
  EXPECT_TRUE(f.test(0));
  EXPECT_EQ(f.count(), 3u);
}

TEST(IdxFilter, NewEpochClearsEverything) {
  IdxFilter f(1000);
  for (std::uint64_t i = 0; i < 1000; i += 3) f.set(i);
  EXPECT_EQ(f.count(), 334u);
  const std::uint32_t before = f.epoch();
  f.new_epoch();
  EXPECT_EQ(f.epoch(), before + 1);
  EXPECT_EQ(f.count(), 0u);
  for (std::uint64_t i = 0; i < 1000; ++i) EXPECT_FALSE(f.test(i)) << i;
  // A stale word is claimed by the first set of the new epoch, without its old bits.
  EXPECT_FALSE(f.test_and_set(1));
  EXPECT_FALSE(f.test(0));
  EXPECT_FALSE(f.test(3));
  EXPECT_TRUE(f.test(1));
  EXPECT_EQ(f.count(), 1u);
}

TEST(IdxFilter, TagWrapReallyClears) {
  IdxFilter f(64);
  ASSERT_EQ(f.epoch(), 1u);
  f.set(5);  // word 0 tagged with epoch 1
  f.advance_epochs(0xFFFFFFFEull);
  EXPECT_EQ(f.epoch(), 0xFFFFFFFFu);
  EXPECT_FALSE(f.test(5));
  f.set(40);      // word 1 tagged with the last epoch before the wrap
  f.new_epoch();  // wraps: the tag would become 1 again, which word 0 still carries
  EXPECT_EQ(f.epoch(), 1u);
  EXPECT_FALSE(f.test(5)) << "a word from 2^32 - 1 epochs ago came back to life";
  EXPECT_FALSE(f.test(40));
  EXPECT_EQ(f.count(), 0u);
  f.advance_epochs(0x1'0000'0005ull);  // any jump across the wrap clears too
  EXPECT_EQ(f.count(), 0u);
  EXPECT_NE(f.epoch(), 0u);
}

TEST(IdxFilter, ResizeToAWindowClears) {
  IdxFilter f(4096);
  for (std::uint64_t i = 0; i < 4096; i += 7) f.set(i);
  const std::size_t mem = f.memory_bytes();
  f.resize(100);  // smaller window: storage reused
  EXPECT_EQ(f.size(), 100u);
  EXPECT_EQ(f.memory_bytes(), mem);
  EXPECT_EQ(f.count(), 0u);
  f.set(99);
  f.resize(10000);  // larger window: new storage
  EXPECT_EQ(f.size(), 10000u);
  EXPECT_GE(f.memory_bytes(), 10000u / 32 * 8);
  EXPECT_EQ(f.count(), 0u);
  EXPECT_FALSE(f.test_and_set(9999));
  EXPECT_TRUE(f.test(9999));
  f.resize(0);
  EXPECT_EQ(f.size(), 0u);
}

TEST(IdxFilterDeathTest, OutOfWindowAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  IdxFilter f(10);
  EXPECT_DEATH((void)f.test(10), "outside the window");
  EXPECT_DEATH((void)f.test_and_set(1ull << 40), "outside the window");
}

// Several threads race test_and_set over the same idxs, each in its own order; for each idx
// exactly one call may return false (the winner), in every epoch.
TEST(IdxFilter, ConcurrentTestAndSetHasExactlyOneWinnerPerIdx) {
  constexpr std::uint64_t kBits = 50'000;
  constexpr int kThreads = 4;
  constexpr int kEpochs = 3;
  IdxFilter f(kBits);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    std::vector<std::vector<std::uint64_t>> won(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&f, &won, t, epoch] {
        std::vector<std::uint64_t> order(kBits);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937_64(t * 1000 + epoch));
        for (std::uint64_t i : order) {
          if (!f.test_and_set(i)) won[t].push_back(i);
          if (!f.test(i)) won[t].push_back(~0ull);  // a set bit must stay visible
        }
      });
    }
    for (auto& th : threads) th.join();
    std::vector<int> winners(kBits, 0);
    for (const auto& w : won) {
      for (std::uint64_t i : w) {
        ASSERT_LT(i, kBits) << "a thread saw its own set bit as clear";
        ++winners[i];
      }
    }
    EXPECT_TRUE(std::all_of(winners.begin(), winners.end(), [](int n) { return n == 1; }))
        << "epoch " << epoch;
    EXPECT_EQ(f.count(), kBits);
    f.new_epoch();  // between iterations, after the threads joined
    EXPECT_EQ(f.count(), 0u);
  }
}

// Neighbouring idxs share a word: concurrent claims of a stale word must not lose bits.
TEST(IdxFilter, ConcurrentClaimsOfOneStaleWordKeepAllBits) {
  IdxFilter f(32);
  for (int round = 0; round < 200; ++round) {
    f.new_epoch();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&f, t] {
        for (std::uint64_t i = t; i < 32; i += 4) EXPECT_FALSE(f.test_and_set(i));
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_EQ(f.count(), 32u) << "round " << round;
  }
}

}  // namespace
}  // namespace netsparse::filter
