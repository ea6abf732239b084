// The autotuner's grid follows SPADE's rule, and a search times candidates, keeps the fastest
// and honours its time budget. No timing is asserted: only which candidates were timed and
// that the choice is the minimum of what was measured.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>

#include "netsparse/autotune.hpp"
#include "random_csr.hpp"

namespace netsparse {
namespace {

bool contains(const std::vector<TileConfig>& grid, const TileConfig& c) {
  return std::find(grid.begin(), grid.end(), c) != grid.end();
}

TEST(AutotuneGrid, SpadePanelWidthsFromBytes) {
  const gidx_t huge = gidx_t{1} << 40;
  // K = 32: 1 MiB / 128 B = 8192 columns, 64 MiB / 128 B = 524288 (SPADE's Table 3).
  const std::vector<TileConfig> g32 = autotune_grid(huge, 32);
  EXPECT_EQ(g32.front(), base_config());
  EXPECT_EQ(g32.size(), 15u);  // 3 RP x (all + 2 widths x barriers on/off)
  for (const int rp : {64, 256, 1024}) {
    EXPECT_TRUE(contains(g32, {rp, 0, false, 1}));
    for (const gidx_t cp : {gidx_t{8192}, gidx_t{524288}})
      for (const bool bar : {false, true}) EXPECT_TRUE(contains(g32, {rp, cp, bar, 1})) << rp;
  }
  const std::vector<TileConfig> g128 = autotune_grid(huge, 128, 2);
  EXPECT_TRUE(contains(g128, {256, 2048, true, 2}));
  EXPECT_TRUE(contains(g128, {1024, 131072, false, 1}));
  const std::vector<TileConfig> g1 = autotune_grid(huge, 1);
  EXPECT_TRUE(contains(g1, {64, 262144, false, 1}));
  EXPECT_TRUE(contains(g1, {64, 16777216, true, 1}));
}

TEST(AutotuneGrid, ClampedAndDeduplicated) {
  // 10000 columns at K = 128: 2048 stays, 131072 clamps to "all": one width besides all.
  const std::vector<TileConfig> g = autotune_grid(10000, 128);
  EXPECT_EQ(g.size(), 9u);
  for (std::size_t i = 0; i < g.size(); ++i)
    for (std::size_t j = i + 1; j < g.size(); ++j) EXPECT_FALSE(g[i] == g[j]);
  for (const TileConfig& c : g) {
    EXPECT_TRUE(c.col_panel == 0 || c.col_panel == 2048) << to_string(c);
    EXPECT_FALSE(c.barriers && c.col_panel == 0) << to_string(c);
  }
  EXPECT_EQ(autotune_grid(500, 16).size(), 3u);  // every width clamps to all
  EXPECT_THROW((void)autotune_grid(500, 0), std::invalid_argument);
}

CsrMatrix tuning_matrix() {
  test::RandomCsrSpec s;
  s.n_rows = 3000;
  s.n_cols = 1 << 15;  // K = 128: sixteen 1 MiB (2048-column) panels
  s.max_row_nnz = 16;
  s.seed = 5;
  return test::random_csr(s);
}

TEST(Autotune, TimesEveryCandidateAndPicksTheFastest) {
  omp_set_num_threads(2);
  const CsrMatrix a = tuning_matrix();
  for (const KernelKind kind : {KernelKind::spmm, KernelKind::sddmm, KernelKind::spmv}) {
    const int k = kind == KernelKind::spmv ? 1 : 128;
    AutotuneOptions opt;
    opt.time_budget_seconds = 1e9;
    const AutotuneResult r = autotune(a, kind, k, opt);
    SCOPED_TRACE(std::string(to_string(kind)) + ": " + summary(r));
    EXPECT_FALSE(r.budget_exhausted);
    ASSERT_EQ(r.candidates.size(), autotune_grid(a.n_cols, k).size());
    if (k == 128) {
      EXPECT_GT(r.candidates.size(), 3u);  // several column panel widths
    }
    double fastest = r.candidates[0].kernel_seconds;
    for (const AutotuneCandidate& c : r.candidates) {
      EXPECT_TRUE(c.timed);
      EXPECT_GT(c.kernel_seconds, 0.0);
      fastest = std::min(fastest, c.kernel_seconds);
    }
    EXPECT_EQ(r.best_seconds, fastest);
    EXPECT_EQ(r.base_seconds, r.candidates[0].kernel_seconds);
    const auto chosen =
        std::find_if(r.candidates.begin(), r.candidates.end(),
                     [&](const AutotuneCandidate& c) { return c.config == r.best; });
    ASSERT_NE(chosen, r.candidates.end());
    EXPECT_EQ(chosen->kernel_seconds, r.best_seconds);
    EXPECT_GE(r.seconds_spent, r.best_seconds);
  }
}

TEST(Autotune, ZeroBudgetTimesOnlyTheBase) {
  const CsrMatrix a = tuning_matrix();
  AutotuneOptions opt;
  opt.time_budget_seconds = 0;
  const AutotuneResult r = autotune(a, KernelKind::spmm, 16, opt);
  EXPECT_TRUE(r.budget_exhausted);
  EXPECT_TRUE(r.candidates[0].timed);
  for (std::size_t i = 1; i < r.candidates.size(); ++i) EXPECT_FALSE(r.candidates[i].timed);
  EXPECT_EQ(r.best, base_config());
  EXPECT_NE(summary(r).find("time budget reached"), std::string::npos);
}

TEST(Autotune, RejectsBadInput) {
  CsrMatrix bad = tuning_matrix();
  bad.col_idx[0] = bad.n_cols;  // out of range
  EXPECT_THROW((void)autotune(bad, KernelKind::spmm, 16), std::invalid_argument);
  AutotuneOptions opt;
  opt.timed_runs = 0;
  EXPECT_THROW((void)autotune(tuning_matrix(), KernelKind::spmm, 16, opt), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse
