// DistOptions::autotune_tiles (issue 38 item 2: SPADE's exhaustive tile search used by the
// distributed kernels, cached per pattern): every kernel and mode that tiles a fixed pattern
// gives the reference's results with the tuned tiling; the first kernel on a pattern searches,
// the next one on the same pattern, kernel and K takes the cached choice (no search), another K
// searches again; without the option nothing is tuned; a budget <= 0 is refused on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse {
namespace {

using namespace test;

DistOptions tuned(CommMode mode) {
  DistOptions o;
  o.mode = mode;
  o.autotune_tiles = true;
  o.autotune_budget_seconds = 0.2;  // a few candidates: enough to exercise a non-base choice
  return o;
}

TEST(TileAutotune, TunedKernelsMatchTheReferenceInEveryKernelAndMode) {
  for (const std::string spec : {"gen:kron:9", "gen:stencil:8:7:6:2"}) {
    const Fixture f = make_fixture(spec);
    for (const CommMode mode :
         {CommMode::netsparse, CommMode::inspector_executor, CommMode::su, CommMode::ideal}) {
      for (const KernelKind kind : {KernelKind::spmm, KernelKind::spmv, KernelKind::sddmm}) {
        const int k = kind == KernelKind::spmv ? 1 : 8;
        DistKernel kern(f.dm, kind, k, tuned(mode));
        if (mode == CommMode::ideal) {
          const int r = world_rank();
          kern.replicate(operand_block(0, f.dm.cols().begin(r), f.dm.cols().end(r), k));
        }
        const std::vector<float> got = run_kernel_once(kern, f.dm, f.dm.local(), 0);
        EXPECT_LE(max_relative_error(got, kernel_reference(kern, f.dm.local(), 0)), kTolerance)
            << spec << " " << to_string(mode) << " " << to_string(kind);
        // A rank with no local nonzeros has nothing to tune; every other rank tuned.
        EXPECT_EQ(kern.tile_tuning().tuned, f.dm.local().nnz() > 0) << spec;
      }
    }
  }
}

TEST(TileAutotune, TheSamePatternTakesTheCachedChoiceAnotherKSearchesAgain) {
  const Fixture f = make_fixture("gen:kron:10");
  ASSERT_GT(f.dm.local().nnz(), 0);
  // K 5 appears in no other test of this program: the first kernel searches.
  DistKernel first(f.dm, KernelKind::spmm, 5, tuned(CommMode::inspector_executor));
  const TileTuning a = first.tile_tuning();
  EXPECT_TRUE(a.tuned);
  EXPECT_FALSE(a.from_cache);
  EXPECT_GT(a.search_seconds, 0.0);
  EXPECT_GE(a.candidates_timed, 1);
  EXPECT_GT(a.base_seconds, 0.0);
  EXPECT_LE(a.best_seconds, a.base_seconds) << "the base configuration is always a candidate";
  // The same pattern, kernel and K in another mode: the cached choice, no search.
  DistKernel second(f.dm, KernelKind::spmm, 5, tuned(CommMode::netsparse));
  const TileTuning b = second.tile_tuning();
  EXPECT_TRUE(b.tuned);
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(b.search_seconds, 0.0);
  EXPECT_EQ(b.local.row_panel, a.local.row_panel);
  EXPECT_EQ(b.local.col_panel, a.local.col_panel);
  EXPECT_EQ(b.local.barriers, a.local.barriers);
  // Another K: a search of its own.
  DistKernel third(f.dm, KernelKind::spmm, 7, tuned(CommMode::netsparse));
  EXPECT_FALSE(third.tile_tuning().from_cache);
  EXPECT_GT(third.tile_tuning().search_seconds, 0.0);
  // Without the option nothing is tuned.
  DistKernel plain(f.dm, KernelKind::spmm, 5, DistOptions{});
  EXPECT_FALSE(plain.tile_tuning().tuned);
  for (DistKernel* kern : {&first, &second, &third}) {
    const std::vector<float> got = run_kernel_once(*kern, f.dm, f.dm.local(), 1);
    EXPECT_LE(max_relative_error(got, kernel_reference(*kern, f.dm.local(), 1)), kTolerance);
  }
}

TEST(TileAutotune, ABudgetOfZeroIsRefusedOnEveryRank) {
  const Fixture f = make_fixture("gen:kron:8");
  DistOptions o = tuned(CommMode::netsparse);
  o.autotune_budget_seconds = 0;
  const std::string msg =
      invalid_argument_message([&] { DistKernel k(f.dm, KernelKind::spmm, 4, o); });
  EXPECT_NE(msg.find("autotune_budget_seconds must be > 0"), std::string::npos) << msg;
  // One rank asking for the search and the other not: refused on every rank, naming it.
  DistOptions mixed = tuned(CommMode::netsparse);
  mixed.autotune_tiles = world_rank() == 0;
  const std::string why =
      invalid_argument_message([&] { DistKernel k(f.dm, KernelKind::spmm, 4, mixed); });
  EXPECT_NE(why.find("autotune_tiles"), std::string::npos) << why;
}

}  // namespace
}  // namespace netsparse
