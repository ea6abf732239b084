// The engine's row-state filter (filter/row_state.hpp) against a plain model: claim/set/state
// over random operations, O(1) epochs, storage reuse on resize.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "filter/row_state.hpp"

namespace netsparse::filter {
namespace {

TEST(RowState, MatchesAModelOverRandomOperations) {
  constexpr std::uint64_t kRows = 1000;  // not a multiple of 16: the last word is partial
  RowStateFilter f;
  f.resize(kRows);
  std::vector<RowState> model(kRows, kRowNone);
  std::mt19937_64 rng(7);
  for (int op = 0; op < 200000; ++op) {
    const std::uint64_t i = rng() % kRows;
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const RowState old = f.claim(i);
        ASSERT_EQ(old, model[i]) << "op " << op;
        if (old == kRowNone) model[i] = kRowRequested;
        break;
      }
      case 4:
      case 5:
        f.set(i, kRowPresent);
        model[i] = kRowPresent;
        break;
      case 6:
        f.set(i, kRowNone);
        model[i] = kRowNone;
        break;
      case 7:
      case 8:
        ASSERT_EQ(f.state(i), model[i]) << "op " << op;
        break;
      default:
        if (rng() % 100 == 0) {
          f.new_epoch();
          std::fill(model.begin(), model.end(), kRowNone);
        }
    }
  }
  for (std::uint64_t i = 0; i < kRows; ++i) ASSERT_EQ(f.state(i), model[i]) << i;
  std::uint64_t present = 0;
  for (RowState s : model) present += s == kRowPresent ? 1 : 0;
  EXPECT_EQ(f.count(kRowPresent), present);
}

TEST(RowState, NewEpochForgetsEverythingAndNeighboursAreIndependent) {
  RowStateFilter f;
  f.resize(64);
  for (std::uint64_t i = 0; i < 64; i += 3) f.set(i, kRowPresent);
  for (std::uint64_t i = 1; i < 64; i += 3) EXPECT_EQ(f.claim(i), kRowNone);
  for (std::uint64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(f.state(i), i % 3 == 0 ? kRowPresent : (i % 3 == 1 ? kRowRequested : kRowNone)) << i;
  }
  const std::uint32_t e = f.epoch();
  f.new_epoch();
  EXPECT_NE(f.epoch(), e);
  for (std::uint64_t i = 0; i < 64; ++i) EXPECT_EQ(f.state(i), kRowNone) << i;
  EXPECT_EQ(f.count(kRowPresent) + f.count(kRowRequested), 0u);
}

TEST(RowState, ResizeReusesStorageAndStartsClear) {
  RowStateFilter f;
  f.resize(1 << 12);
  const std::uint64_t bytes = f.memory_bytes();
  EXPECT_EQ(bytes, RowStateFilter::bytes_for(1 << 12));
  f.set(5, kRowPresent);
  f.resize(100);  // smaller: same storage, every row clear
  EXPECT_EQ(f.memory_bytes(), bytes);
  EXPECT_EQ(f.size(), 100u);
  EXPECT_EQ(f.state(5), kRowNone);
  f.resize(1 << 13);  // larger: new storage, clear
  EXPECT_EQ(f.state(5), kRowNone);
  EXPECT_EQ(RowStateFilter::bytes_for(17), 16u);  // 2 words of 16 rows
}

}  // namespace
}  // namespace netsparse::filter
