// Per-tile dense/sparse SpMM and the pipelined A (X W) (include/netsparse/dense_tiles.hpp)
// against the sparse tile kernel: random matrices whose tiles have mixed densities (some dense
// enough for GEMM, some not, some empty), edge tiles smaller than the tile size, f32 and f64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/dense_tiles.hpp"
#include "netsparse/local_kernels.hpp"

namespace netsparse {
namespace {

// n_rows x n_cols block starting at global row row_begin; the tile (i, j) of `tile` x `tile`
// gets density densities[(i + 2 j) % size] (a mix of dense, sparse and empty tiles); columns
// outside [first_col, end_col) stay empty (end_col < 0: n_cols).
CsrMatrix mixed_csr(gidx_t n_rows, gidx_t n_cols, gidx_t tile, const std::vector<double>& densities,
                    std::uint64_t seed, gidx_t first_col = 0, gidx_t end_col = -1) {
  if (end_col < 0) end_col = n_cols;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CsrMatrix m;
  m.n_rows = n_rows;
  m.n_cols = n_cols;
  m.row_begin = 7;
  m.n_rows_global = m.row_begin + n_rows + 3;
  m.row_ptr.assign(1, 0);
  for (gidx_t r = 0; r < n_rows; ++r) {
    for (gidx_t c = first_col; c < end_col; ++c) {
      const double d =
          densities[static_cast<std::size_t>((r / tile + 2 * (c / tile)) % std::ssize(densities))];
      if (unit(rng) < d) {
        m.col_idx.push_back(c);
        m.values.push_back(unit(rng) - 0.5);
      }
    }
    m.row_ptr.push_back(std::ssize(m.col_idx));
  }
  return m;
}

template <class T>
std::vector<T> random_dense(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(unit(rng));
  return v;
}

template <class T>
constexpr ScalarType scalar_of() {
  return std::is_same_v<T, float> ? ScalarType::f32 : ScalarType::f64;
}
template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

template <class T>
void expect_hybrid_equals_sparse(const CsrMatrix& csr, const DenseTileOptions& options, int k,
                                 bool expect_dense) {
  const HybridMatrix hybrid(csr, options, scalar_of<T>());
  const TiledMatrix sparse(csr, options.sparse_tiling, scalar_of<T>());
  EXPECT_EQ(hybrid.nnz(), csr.nnz());
  if (expect_dense) {
    EXPECT_GT(hybrid.dense_tiles().size(), 0u);
  } else {
    EXPECT_EQ(hybrid.dense_tiles().size(), 0u);
  }
  // B with a leading dimension wider than K, holding only the columns the nonzeros touch (as a
  // distributed driver passes a rank's own rows).
  const gidx_t first = *std::min_element(csr.col_idx.begin(), csr.col_idx.end());
  const gidx_t end = *std::max_element(csr.col_idx.begin(), csr.col_idx.end()) + 1;
  const std::int64_t ldb = k + 3, ldc = k + 1;
  const std::vector<T> b = random_dense<T>(static_cast<std::size_t>((end - first) * ldb), 99);
  const BasicDenseConstView<T> view{b.data(), first, ldb, end - first};
  for (const bool accumulate : {false, true}) {
    std::vector<T> want = random_dense<T>(static_cast<std::size_t>(csr.n_rows * ldc), 5);
    std::vector<T> got = want;
    spmm(sparse, view, want.data(), ldc, k, accumulate);
    spmm(hybrid, view, got.data(), ldc, k, accumulate);
    for (gidx_t r = 0; r < csr.n_rows; ++r) {
      for (int x = 0; x < k; ++x) {
        const auto i = static_cast<std::size_t>(r * ldc + x);
        ASSERT_NEAR(got[i], want[i], tolerance<T>() * (1 + std::abs(want[i])))
            << "row " << r << " column " << x << (accumulate ? " (accumulate)" : "");
      }
    }
  }
}

template <class T>
void hybrid_cases() {
  // 150 x 170: tiles of 64 x 48 leave edge tiles of 22 rows and 26 columns.
  const CsrMatrix csr = mixed_csr(150, 170, 40, {0.95, 0.03, 0.0, 0.6, 0.2}, 3);
  for (const int k : {1, 16, 7}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    DenseTileOptions o;
    o.tile_rows = 64;
    o.tile_cols = 48;
    o.min_density = 0.5;
    expect_hybrid_equals_sparse<T>(csr, o, k, true);
    o.min_density = 0.1;  // most tiles dense, the empty ones not
    o.sparse_tiling.col_panel = 64;
    expect_hybrid_equals_sparse<T>(csr, o, k, true);
    o.min_density = 1.01;  // dense tiles off: the sparse part is everything
    expect_hybrid_equals_sparse<T>(csr, o, k, false);
    o.tile_rows = 1;  // one-row tiles, one-column tiles: the smallest edge cases
    o.tile_cols = 1;
    o.min_density = 1.0;
    expect_hybrid_equals_sparse<T>(csr, o, k, true);
  }
  // Nonzeros only in columns [5, 150) of 170: the dense tiles at both ends must not read B
  // beyond the touched columns.
  DenseTileOptions edges;
  edges.tile_rows = 32;
  edges.tile_cols = 32;
  edges.min_density = 0.3;
  expect_hybrid_equals_sparse<T>(mixed_csr(100, 170, 32, {0.9, 0.5}, 12, 5, 150), edges, 16, true);
  // Uniformly sparse (a sampled graph's block): no tile reaches 0.25.
  DenseTileOptions o;
  o.min_density = 0.25;
  expect_hybrid_equals_sparse<T>(mixed_csr(200, 300, 50, {0.02}, 8), o, 16, false);
}

TEST(DenseTiles, HybridSpmmEqualsTheSparseTileKernelF32) {
  hybrid_cases<float>();
}
TEST(DenseTiles, HybridSpmmEqualsTheSparseTileKernelF64) {
  hybrid_cases<double>();
}

TEST(DenseTiles, DenseTilesHoldExactlyTheirNonzeros) {
  const CsrMatrix csr = mixed_csr(100, 100, 32, {1.0, 0.0}, 4);
  DenseTileOptions o;
  o.tile_rows = 32;
  o.tile_cols = 32;
  const HybridMatrix h(csr, o, ScalarType::f64);
  std::int64_t dense_nnz = 0;
  for (const HybridMatrix::DenseTile& t : h.dense_tiles()) {
    EXPECT_LE(t.row + t.rows, csr.n_rows);
    EXPECT_LE(t.col + t.cols, csr.n_cols);
    for (int i = 0; i < t.rows * t.cols; ++i) {
      dense_nnz += h.dense_values<double>()[static_cast<std::size_t>(t.offset + i)] != 0 ? 1 : 0;
    }
  }
  EXPECT_EQ(dense_nnz, h.dense_nnz());
  EXPECT_EQ(h.dense_nnz() + h.sparse_part().nnz(), csr.nnz());
  EXPECT_EQ(h.sparse_part().nnz(), 0) << "every non-empty tile is full";
}

template <class T>
void xw_cases() {
  const CsrMatrix csr = mixed_csr(130, 260, 30, {0.3, 0.0, 0.05}, 6);
  const int f = 9;
  for (const int k : {16, 5}) {
    for (const gidx_t panel : {gidx_t{0}, gidx_t{64}, gidx_t{37}}) {
      SCOPED_TRACE("K = " + std::to_string(k) + ", col_panel " + std::to_string(panel));
      TileConfig cfg;
      cfg.row_panel = 32;
      cfg.col_panel = panel;
      const TiledMatrix a(csr, cfg, scalar_of<T>());
      const std::int64_t ldx = f + 2, ldc = k + 2;
      const std::vector<T> x = random_dense<T>(static_cast<std::size_t>(csr.n_cols * ldx), 1);
      const std::vector<T> w = random_dense<T>(static_cast<std::size_t>(f * k), 2);
      // Reference: X W by loops, then the tile kernel.
      std::vector<T> xw(static_cast<std::size_t>(csr.n_cols * k), T{0});
      for (gidx_t c = 0; c < csr.n_cols; ++c) {
        for (int y = 0; y < f; ++y) {
          for (int z = 0; z < k; ++z) {
            xw[static_cast<std::size_t>(c * k + z)] +=
                x[static_cast<std::size_t>(c * ldx + y)] * w[static_cast<std::size_t>(y * k + z)];
          }
        }
      }
      std::vector<T> want(static_cast<std::size_t>(csr.n_rows * ldc), T{0});
      spmm(a, BasicDenseConstView<T>{xw.data(), 0, k, csr.n_cols}, want.data(), ldc, k, false);
      std::vector<T> scratch;
      for (const bool pipelined : {false, true}) {
        std::vector<T> got(want.size(), T{42});
        spmm_xw(a, BasicDenseConstView<T>{x.data(), 0, ldx, csr.n_cols}, f, w.data(), k, got.data(),
                ldc, pipelined, scratch);
        for (gidx_t r = 0; r < csr.n_rows; ++r) {
          for (int z = 0; z < k; ++z) {
            const auto i = static_cast<std::size_t>(r * ldc + z);
            ASSERT_NEAR(got[i], want[i], 10 * tolerance<T>() * (1 + std::abs(want[i])))
                << "row " << r << " column " << z << (pipelined ? " pipelined" : "");
          }
        }
      }
    }
  }
}

TEST(DenseTiles, PipelinedXwEqualsTheUnpipelinedProductF32) {
  xw_cases<float>();
}
TEST(DenseTiles, PipelinedXwEqualsTheUnpipelinedProductF64) {
  xw_cases<double>();
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

TEST(DenseTiles, BadArgumentsAreRefusedByName) {
  const CsrMatrix csr = mixed_csr(20, 20, 5, {0.5}, 1);
  DenseTileOptions o;
  o.tile_rows = 0;
  EXPECT_NE(message_of([&] { HybridMatrix h(csr, o); }).find("tile_rows"), std::string::npos);
  o.tile_rows = 8;
  o.min_density = 0;
  EXPECT_NE(message_of([&] { HybridMatrix h(csr, o); }).find("min_density"), std::string::npos);
  o.min_density = 0.5;
  CsrMatrix bad = csr;
  bad.col_idx[3] = 20;
  EXPECT_NE(message_of([&] { HybridMatrix h(bad, o); }).find("column 20 outside [0, 20)"),
            std::string::npos);
  const HybridMatrix h(csr, o, ScalarType::f32);
  std::vector<float> b(20 * 4), c(20 * 4);
  // A view short of the touched columns.
  const std::string short_view = message_of([&] {
    spmm(h, DenseConstView{b.data(), 0, 4, 10}, c.data(), 4, 4, false);
  });
  EXPECT_NE(short_view.find("B holds rows [0, 10)"), std::string::npos) << short_view;
  std::vector<double> bd(b.size()), cd(c.size());
  EXPECT_NE(message_of([&] {
              spmm(h, DenseConstViewF64{bd.data(), 0, 4, 20}, cd.data(), 4, 4, false);
            }).find("precision"),
            std::string::npos);
  const TiledMatrix a(csr, {}, ScalarType::f32);
  std::vector<float> scratch;
  EXPECT_NE(
      message_of([&] {
        spmm_xw(a, DenseConstView{b.data(), 0, 4, 20}, 5, b.data(), 4, c.data(), 4, true, scratch);
      }).find("X.ld = 4 is less than 5"),
      std::string::npos);
}

}  // namespace
}  // namespace netsparse
