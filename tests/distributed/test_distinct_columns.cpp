// DistinctColumns (the changing-pattern path's renumbering) against a model: a std::set of the
// marked columns, numbered in ascending order. Random streams with heavy repeats, word edges,
// column counts that are not a multiple of 64, reuse after clear().
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "distributed/distinct_columns.hpp"

namespace netsparse::dist {
namespace {

void check_stream(DistinctColumns& set, const std::vector<gidx_t>& stream) {
  std::set<gidx_t> model(stream.begin(), stream.end());
  for (gidx_t c : stream) set.mark(c);
  std::vector<std::uint64_t> list{7};  // number() appends: what was there stays
  ASSERT_EQ(set.number(list), model.size());
  ASSERT_EQ(list.size(), model.size() + 1);
  EXPECT_EQ(list.front(), 7u);
  std::uint32_t expect = 0;
  for (gidx_t c : model) {
    EXPECT_EQ(list[expect + 1], static_cast<std::uint64_t>(c));
    EXPECT_EQ(set.slot(c), expect) << "column " << c;
    ++expect;
  }
  set.clear();
}

TEST(DistinctColumns, RandomStreamsAgainstASortedSet) {
  std::mt19937_64 rng(12345);
  DistinctColumns set;
  for (gidx_t n_cols : {1, 63, 64, 65, 1000, 4097, 65536}) {
    set.reset(n_cols);
    ASSERT_EQ(set.n_cols(), n_cols);
    for (int trial = 0; trial < 5; ++trial) {
      // Few distinct columns repeated often, then many: both ends of the hit rate.
      const gidx_t range = trial % 2 == 0 ? std::min<gidx_t>(n_cols, 17) : n_cols;
      std::uniform_int_distribution<gidx_t> pick(0, range - 1);
      std::vector<gidx_t> stream(static_cast<std::size_t>(3 * n_cols / 2 + 1));
      for (gidx_t& c : stream) c = (pick(rng) * 7919) % n_cols;
      check_stream(set, stream);
    }
  }
}

TEST(DistinctColumns, WordEdgesAndAnEmptyStream) {
  DistinctColumns set;
  set.reset(200);
  check_stream(set, {0, 63, 64, 127, 128, 199, 63, 0, 199});
  check_stream(set, {});
  std::vector<std::uint64_t> list;
  EXPECT_EQ(set.number(list), 0u);  // clear() forgot the marks of the streams above
  EXPECT_TRUE(list.empty());
}

// mark_if (the split's branch-free mark): a column passed with `false` is never marked, one passed
// with `true` is, whichever came first.
TEST(DistinctColumns, MarkIfMarksOnlyTheKeptColumns) {
  std::mt19937_64 rng(777);
  DistinctColumns set;
  set.reset(1000);
  std::uniform_int_distribution<gidx_t> pick(0, 999);
  std::set<gidx_t> model;
  for (int i = 0; i < 3000; ++i) {
    const gidx_t c = pick(rng);
    const bool keep = c % 3 != 0;  // a column is kept every time or never
    set.mark_if(c, keep);
    if (keep) model.insert(c);
  }
  std::vector<std::uint64_t> list;
  ASSERT_EQ(set.number(list), model.size());
  std::uint32_t expect = 0;
  for (gidx_t c : model) {
    EXPECT_EQ(list[expect], static_cast<std::uint64_t>(c));
    EXPECT_EQ(set.slot(c), expect);
    ++expect;
  }
}

TEST(DistinctColumns, RefusesANegativeColumnCount) {
  DistinctColumns set;
  EXPECT_THROW(set.reset(-1), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse::dist
