// The tiled layout: every nonzero lands exactly once in the right tile, runs map back to the
// original CSR positions, column-panel queries match brute force, bad input is refused.
#include <gtest/gtest.h>
#include <omp.h>

#include <set>
#include <stdexcept>
#include <tuple>

#include "netsparse/tiled.hpp"
#include "random_csr.hpp"

namespace netsparse {
namespace {

using test::random_csr;
using test::RandomCsrSpec;

// Rebuilds (row, col, value, csr position) of every nonzero from the tiled layout and checks
// the structural invariants on the way.
void expect_layout_matches(const CsrMatrix& csr, const TiledMatrix& t) {
  ASSERT_EQ(t.nnz(), csr.nnz());
  ASSERT_EQ(t.n_rows(), csr.n_rows);
  ASSERT_EQ(t.n_cols(), csr.n_cols);
  ASSERT_EQ(t.row_begin(), csr.row_begin);
  std::vector<int> seen(csr.nnz(), 0);
  const auto tiles = t.tiles();
  const auto off = t.col_offsets();
  const auto val = t.values();
  const auto run_row = t.run_rows();
  const auto run_end = t.run_ends();
  const auto run_csr = t.run_csr_begins();
  std::int64_t expected_nnz_offset = 0;
  std::int64_t expected_run_offset = 0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const Tile& tile = tiles[i];
    SCOPED_TRACE("tile " + std::to_string(i));
    ASSERT_GT(tile.nnz_count, 0) << "empty tiles must not be stored";
    ASSERT_EQ(tile.nnz_offset, expected_nnz_offset) << "tiles must be contiguous";
    ASSERT_EQ(tile.run_offset, expected_run_offset);
    expected_nnz_offset += tile.nnz_count;
    expected_run_offset += tile.run_count;
    if (i > 0) {
      const Tile& prev = tiles[i - 1];
      ASSERT_TRUE(std::tie(prev.row_panel, prev.col_panel) <
                  std::tie(tile.row_panel, tile.col_panel))
          << "tiles must be ordered by (row panel, column panel)";
    }
    const IndexRange rows = t.row_panel_rows(tile.row_panel);
    const IndexRange cols = t.col_panel_range(tile.col_panel);
    std::uint32_t begin = 0;
    gidx_t prev_row = -1;
    for (std::int64_t r = tile.run_offset; r < tile.run_offset + tile.run_count; ++r) {
      const gidx_t row = run_row[r];
      ASSERT_GT(row, prev_row) << "runs inside a tile are in increasing row order";
      prev_row = row;
      ASSERT_GE(row, rows.begin);
      ASSERT_LT(row, rows.end);
      ASSERT_GT(run_end[r], begin) << "runs are non-empty";
      for (std::uint32_t j = begin; j < run_end[r]; ++j) {
        const std::int64_t nz = tile.nnz_offset + j;
        const std::int64_t pos = run_csr[r] + (j - begin);
        const gidx_t col = cols.begin + gidx_t{off[nz]};
        ASSERT_LT(col, cols.end);
        ASSERT_GE(pos, csr.row_ptr[row]);
        ASSERT_LT(pos, csr.row_ptr[row + 1]);
        ASSERT_EQ(csr.col_idx[pos], col);
        ASSERT_EQ(csr.values[pos], val[nz]);
        ++seen[pos];
      }
      begin = run_end[r];
    }
    ASSERT_EQ(begin, tile.nnz_count);
  }
  ASSERT_EQ(expected_nnz_offset, csr.nnz());
  for (std::int64_t p = 0; p < csr.nnz(); ++p) ASSERT_EQ(seen[p], 1) << "CSR nonzero " << p;

  // Per-panel queries against brute force.
  for (int rp = 0; rp < t.n_row_panels(); ++rp)
    for (const Tile& tile : t.row_panel_tiles(rp)) ASSERT_EQ(tile.row_panel, rp);
  std::vector<std::set<gidx_t>> cols_of_panel(t.n_col_panels());
  for (gidx_t r = 0; r < csr.n_rows; ++r)
    for (std::int64_t j = csr.row_ptr[r]; j < csr.row_ptr[r + 1]; ++j)
      cols_of_panel[csr.col_idx[j] / t.col_panel_width()].insert(csr.col_idx[j]);
  gidx_t covered = 0;
  for (int cp = 0; cp < t.n_col_panels(); ++cp) {
    const IndexRange range = t.col_panel_range(cp);
    EXPECT_EQ(range.begin, covered);
    covered = range.end;
    const auto pc = t.panel_columns(cp);
    ASSERT_EQ(std::vector<gidx_t>(pc.begin(), pc.end()),
              std::vector<gidx_t>(cols_of_panel[cp].begin(), cols_of_panel[cp].end()))
        << "column panel " << cp;
    int prev_rp = -1;
    for (const std::int64_t id : t.col_panel_tile_ids(cp)) {
      ASSERT_EQ(tiles[id].col_panel, cp);
      ASSERT_GT(tiles[id].row_panel, prev_rp);
      prev_rp = tiles[id].row_panel;
    }
  }
  EXPECT_EQ(covered, csr.n_cols);

  // Barrier schedule: every tile once; a segment is one row panel's tiles of one group, in
  // column order; a group's segments are distinct row panels in increasing order.
  if (t.n_barrier_groups() > 1) {
    const auto group_seg = t.barrier_group_segment_ptr();
    const auto seg = t.barrier_segment_ptr();
    const auto ids = t.barrier_tile_ids();
    ASSERT_EQ(std::ssize(group_seg), t.n_barrier_groups() + 1);
    ASSERT_EQ(ids.size(), tiles.size());
    std::vector<int> scheduled(tiles.size(), 0);
    for (int g = 0; g < t.n_barrier_groups(); ++g) {
      int prev_rp = -1;
      for (std::int64_t s = group_seg[g]; s < group_seg[g + 1]; ++s) {
        ASSERT_LT(seg[s], seg[s + 1]) << "empty segment";
        const int rp = tiles[ids[seg[s]]].row_panel;
        ASSERT_GT(rp, prev_rp);
        prev_rp = rp;
        int prev_cp = -1;
        for (std::int64_t i = seg[s]; i < seg[s + 1]; ++i) {
          const Tile& tile = tiles[ids[i]];
          ASSERT_EQ(tile.row_panel, rp);
          ASSERT_EQ(tile.col_panel / t.barrier_group_size(), g);
          ASSERT_GT(tile.col_panel, prev_cp);
          prev_cp = tile.col_panel;
          ++scheduled[ids[i]];
        }
      }
    }
    for (std::size_t i = 0; i < tiles.size(); ++i) ASSERT_EQ(scheduled[i], 1) << "tile " << i;
  } else {
    EXPECT_TRUE(t.barrier_tile_ids().empty());
  }
}

class TiledLayout : public ::testing::TestWithParam<std::tuple<int, gidx_t>> {};

TEST_P(TiledLayout, EveryNonzeroOnceInItsTile) {
  const auto [rp, cp] = GetParam();
  RandomCsrSpec spec;
  spec.n_rows = 700;
  spec.n_cols = 450;
  spec.row_begin = 1234;
  spec.n_rows_global = 5000;
  spec.empty_rows = {100, 260};
  spec.empty_cols = {200, 330};
  spec.seed = 7;
  const CsrMatrix csr = random_csr(spec);
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const TiledMatrix t(csr, TileConfig{rp, cp, false, 1});
    SCOPED_TRACE(to_string(t.config()) + ", " + std::to_string(threads) + " threads");
    expect_layout_matches(csr, t);
    for (const int group : {1, 3})
      expect_layout_matches(csr, TiledMatrix(csr, {rp, cp, true, group}));
    const gidx_t width = cp == 0 ? spec.n_cols : std::min(cp, spec.n_cols);
    EXPECT_EQ(t.col_panel_width(), width);
    EXPECT_EQ(t.n_col_panels(), (spec.n_cols + width - 1) / width);
    EXPECT_EQ(t.n_row_panels(), (spec.n_rows + rp - 1) / rp);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, TiledLayout,
                         ::testing::Combine(::testing::Values(1, 7, 64, 256, 1024),
                                            ::testing::Values(gidx_t{0}, gidx_t{1}, gidx_t{13},
                                                              gidx_t{64}, gidx_t{449}, gidx_t{450},
                                                              gidx_t{5000})));

TEST(TiledLayoutEdges, EmptyColumnBandLeavesPanelsWithoutTiles) {
  RandomCsrSpec spec;
  spec.n_rows = 300;
  spec.n_cols = 400;
  spec.empty_cols = {100, 300};
  const CsrMatrix csr = random_csr(spec);
  const TiledMatrix t(csr, TileConfig{64, 50, false, 1});
  expect_layout_matches(csr, t);
  for (int cp = 2; cp < 6; ++cp) {
    EXPECT_TRUE(t.col_panel_tile_ids(cp).empty()) << cp;
    EXPECT_TRUE(t.panel_columns(cp).empty()) << cp;
  }
  EXPECT_FALSE(t.col_panel_tile_ids(0).empty());
  EXPECT_FALSE(t.col_panel_tile_ids(7).empty());
}

TEST(TiledLayoutEdges, SingleRowNoNonzerosNoRows) {
  RandomCsrSpec one;
  one.n_rows = 1;
  one.n_cols = 90;
  one.empty_row_fraction = 0;
  one.max_row_nnz = 40;
  const CsrMatrix single = random_csr(one);
  ASSERT_GT(single.nnz(), 0);
  expect_layout_matches(single, TiledMatrix(single, TileConfig{256, 16, true, 2}));

  RandomCsrSpec none = one;
  none.n_rows = 50;
  none.empty_row_fraction = 1.0;
  const CsrMatrix empty = random_csr(none);
  const TiledMatrix te(empty, TileConfig{16, 8, false, 1});
  expect_layout_matches(empty, te);
  EXPECT_TRUE(te.tiles().empty());
  EXPECT_EQ(te.touched_columns().size(), 0);

  CsrMatrix zero_rows;
  zero_rows.n_cols = 10;
  zero_rows.n_rows_global = 5;
  zero_rows.row_begin = 5;
  zero_rows.row_ptr = {0};
  const TiledMatrix tz(zero_rows, TileConfig{});
  EXPECT_EQ(tz.n_row_panels(), 0);
  EXPECT_EQ(tz.n_col_panels(), 1);

  CsrMatrix zero_cols;
  zero_cols.n_rows = zero_cols.n_rows_global = 3;
  zero_cols.row_ptr = {0, 0, 0, 0};
  const TiledMatrix tc(zero_cols, TileConfig{2, 4, false, 1});
  EXPECT_EQ(tc.n_col_panels(), 1);
  EXPECT_EQ(tc.col_panel_range(0), (IndexRange{0, 0}));
}

TEST(TiledLayoutEdges, BarrierGroups) {
  RandomCsrSpec spec;
  spec.n_cols = 100;
  const CsrMatrix csr = random_csr(spec);
  const TiledMatrix with(csr, TileConfig{32, 10, true, 3});
  EXPECT_EQ(with.n_col_panels(), 10);
  EXPECT_EQ(with.barrier_group_size(), 3);
  EXPECT_EQ(with.n_barrier_groups(), 4);
  const TiledMatrix without(csr, TileConfig{32, 10, false, 3});
  EXPECT_EQ(without.n_barrier_groups(), 1);
  const TiledMatrix wide_group(csr, TileConfig{32, 10, true, 50});
  EXPECT_EQ(wide_group.n_barrier_groups(), 1);
}

TEST(TiledLayoutEdges, ColumnsBeyond32BitsUseSeveralPanels) {
  // n_cols > 2^32: "all columns" is clamped to 2^32-wide panels, offsets stay 32-bit.
  CsrMatrix m;
  m.n_rows = m.n_rows_global = 3;
  m.n_cols = (gidx_t{1} << 33) + 5;
  m.row_ptr = {0, 3, 3, 5};
  m.col_idx = {0, (gidx_t{1} << 32) - 1, gidx_t{1} << 32, 7, (gidx_t{1} << 33) + 4};
  m.values = {1, 2, 3, 4, 5};
  const TiledMatrix t(m, TileConfig{});
  EXPECT_EQ(t.col_panel_width(), TiledMatrix::kMaxColPanelWidth);
  EXPECT_EQ(t.n_col_panels(), 3);
  expect_layout_matches(m, t);
  EXPECT_EQ(t.touched_columns(), (IndexRange{0, (gidx_t{1} << 33) + 5}));
  ASSERT_EQ(t.panel_columns(2).size(), 1u);
  EXPECT_EQ(t.panel_columns(2)[0], (gidx_t{1} << 33) + 4);
}

CsrMatrix small_valid() {
  CsrMatrix m;
  m.n_rows = m.n_rows_global = 3;
  m.n_cols = 5;
  m.row_ptr = {0, 2, 2, 4};
  m.col_idx = {1, 3, 0, 4};
  m.values = {1, 2, 3, 4};
  return m;
}

void expect_rejected(const CsrMatrix& m, const TileConfig& c, const std::string& fragment) {
  try {
    const TiledMatrix t(m, c);
    ADD_FAILURE() << "accepted; expected an error mentioning '" << fragment << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TiledLayoutValidation, RejectsBadInput) {
  EXPECT_NO_THROW(TiledMatrix(small_valid(), TileConfig{}));
  expect_rejected(small_valid(), TileConfig{0, 0, false, 1}, "row_panel");
  expect_rejected(small_valid(), TileConfig{4, -1, false, 1}, "col_panel");
  expect_rejected(small_valid(), TileConfig{4, 2, true, 0}, "barrier_group");

  CsrMatrix m = small_valid();
  m.col_idx[1] = 5;
  expect_rejected(m, TileConfig{}, "outside [0, 5)");
  m = small_valid();
  m.col_idx = {3, 1, 0, 4};
  expect_rejected(m, TileConfig{}, "not sorted and unique");
  m = small_valid();
  m.col_idx = {1, 1, 0, 4};
  expect_rejected(m, TileConfig{}, "not sorted and unique");
  m = small_valid();
  m.row_ptr = {0, 2, 1, 4};
  expect_rejected(m, TileConfig{}, "non-decreasing");
  m = small_valid();
  m.row_ptr = {0, 2, 4};
  expect_rejected(m, TileConfig{}, "row_ptr has 3 entries");
  m = small_valid();
  m.values.pop_back();
  expect_rejected(m, TileConfig{}, "values 3");
  m = small_valid();
  m.row_begin = 1;
  expect_rejected(m, TileConfig{}, "exceeds n_rows_global");
  m = small_valid();
  m.row_ptr[0] = 1;
  expect_rejected(m, TileConfig{}, "row_ptr[0]");
}

TEST(TiledLayoutValidation, QueriesCheckPanelIndices) {
  const TiledMatrix t(small_valid(), TileConfig{2, 2, false, 1});
  EXPECT_THROW((void)t.panel_columns(3), std::out_of_range);
  EXPECT_THROW((void)t.panel_columns(-1), std::out_of_range);
  EXPECT_THROW((void)t.col_panel_range(3), std::out_of_range);
  EXPECT_THROW((void)t.row_panel_rows(2), std::out_of_range);
  EXPECT_THROW((void)t.row_panel_tiles(-1), std::out_of_range);
  EXPECT_NO_THROW((void)t.panel_columns(2));
}

TEST(TileConfigText, Readable) {
  EXPECT_EQ(to_string(TileConfig{}), "RP 256 x CP all");
  EXPECT_EQ(to_string(TileConfig{64, 2048, true, 2}), "RP 64 x CP 2048 +barriers(group 2)");
}

}  // namespace
}  // namespace netsparse
