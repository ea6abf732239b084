// TiledMatrix::split_columns (the one-pass layout of a pattern used once): its two parts equal
// the constructor's layout of the same nonzeros (TileConfig{256, 0}), the compact outside part
// is the outside columns renumbered onto their sorted distinct list, the tiled kernels on the
// split give the reference product (f32 / f64, K = 1..256, SpMM / SpMV / SDDMM), arrays reused
// from pattern to pattern, and malformed input is refused with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "netsparse/local_kernels.hpp"
#include "netsparse/tiled.hpp"
#include "random_csr.hpp"

namespace netsparse {
namespace {

using test::random_csr;
using test::RandomCsrSpec;

// The nonzeros of `a` whose columns are inside [lo, hi) (or outside), columns mapped by `map`.
template <class Map>
CsrMatrix part_of(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, gidx_t n_cols, Map map) {
  CsrMatrix m = a;
  m.n_cols = n_cols;
  m.col_idx.clear();
  m.values.clear();
  m.row_ptr.assign(1, 0);
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
      const gidx_t c = a.col_idx[j];
      if ((c >= lo && c < hi) != inside) continue;
      m.col_idx.push_back(map(c));
      m.values.push_back(a.values[j]);
    }
    m.row_ptr.push_back(std::ssize(m.col_idx));
  }
  return m;
}

template <class T>
void expect_same_layout(const TiledMatrix& got, const TiledMatrix& want, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.n_rows(), want.n_rows());
  ASSERT_EQ(got.n_cols(), want.n_cols());
  ASSERT_EQ(got.n_row_panels(), want.n_row_panels());
  ASSERT_EQ(got.n_col_panels(), 1);
  ASSERT_EQ(got.nnz(), want.nnz());
  ASSERT_EQ(got.tiles().size(), want.tiles().size());
  for (std::size_t t = 0; t < got.tiles().size(); ++t) {
    const Tile& a = got.tiles()[t];
    const Tile& b = want.tiles()[t];
    EXPECT_EQ(a.row_panel, b.row_panel);
    EXPECT_EQ(a.col_panel, b.col_panel);
    EXPECT_EQ(a.nnz_offset, b.nnz_offset);
    EXPECT_EQ(a.nnz_count, b.nnz_count);
    EXPECT_EQ(a.run_offset, b.run_offset);
    EXPECT_EQ(a.run_count, b.run_count);
  }
  const auto eq = [](auto x, auto y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  EXPECT_TRUE(eq(got.col_offsets(), want.col_offsets()));
  EXPECT_TRUE(eq(got.values_as<T>(), want.values_as<T>()));
  EXPECT_TRUE(eq(got.run_rows(), want.run_rows()));
  EXPECT_TRUE(eq(got.run_ends(), want.run_ends()));
  EXPECT_TRUE(eq(got.run_csr_begins(), want.run_csr_begins()));
  EXPECT_TRUE(eq(got.row_panel_tile_ptr(), want.row_panel_tile_ptr()));
  EXPECT_TRUE(eq(got.col_panel_tile_ids(0), want.col_panel_tile_ids(0)));
  EXPECT_TRUE(eq(got.panel_columns(0), want.panel_columns(0)));
  EXPECT_EQ(got.touched_columns(), want.touched_columns());
}

struct Case {
  RandomCsrSpec spec;
  gidx_t lo, hi;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  // Several row panels, empty rows and a whole empty row panel, ranges in the middle and at
  // both edges, an empty range (every column remote) and the whole range (none remote).
  for (const auto& [lo, hi] :
       {std::pair<gidx_t, gidx_t>{300, 700}, {0, 250}, {900, 1000}, {500, 500}, {0, 1000}}) {
    RandomCsrSpec s;
    s.n_rows = 700;
    s.n_cols = 1000;
    s.row_begin = 40;
    s.n_rows_global = 2000;
    s.max_row_nnz = 30;
    s.empty_row_fraction = 0.2;
    s.empty_rows = {256, 512};
    s.seed = static_cast<std::uint64_t>(lo * 7 + hi);
    out.push_back({s, lo, hi});
  }
  RandomCsrSpec tiny;  // one row, one column
  tiny.n_rows = 1;
  tiny.n_cols = 1;
  tiny.empty_row_fraction = 0;
  out.push_back({tiny, 0, 1});
  out.push_back({tiny, 0, 0});
  RandomCsrSpec none;  // rows without a single nonzero
  none.n_rows = 300;
  none.n_cols = 50;
  none.empty_row_fraction = 1.0;
  out.push_back({none, 10, 20});
  RandomCsrSpec wide;  // few nonzeros over 2^22 columns, straddling bitmap words
  wide.n_rows = 40;
  wide.n_cols = gidx_t{1} << 22;
  wide.max_row_nnz = 5;
  out.push_back({wide, 1'000'003, 3'000'001});
  RandomCsrSpec zero_rows;
  zero_rows.n_rows = 0;
  zero_rows.n_cols = 10;
  out.push_back({zero_rows, 2, 5});
  return out;
}

// Both parts equal the constructor's tiling of the same nonzeros, in both precisions and both
// outside numberings, with the split object reused across every case (arrays grown and shrunk).
TEST(SplitColumns, EqualsTheConstructorsLayoutOfEachPart) {
  ColumnSplit split;
  for (const Case& c : cases()) {
    const CsrMatrix a = random_csr(c.spec);
    for (ScalarType scalar : {ScalarType::f32, ScalarType::f64}) {
      for (bool compact : {false, true}) {
        const std::string what =
            "rows " + std::to_string(a.n_rows) + " cols " + std::to_string(a.n_cols) + " [" +
            std::to_string(c.lo) + ", " + std::to_string(c.hi) + ") " +
            (scalar == ScalarType::f32 ? "f32" : "f64") + (compact ? " compact" : " global");
        TiledMatrix::split_columns(a, c.lo, c.hi, compact, scalar, split);
        std::set<gidx_t> outside_cols;
        for (const gidx_t col : a.col_idx)
          if (col < c.lo || col >= c.hi) outside_cols.insert(col);
        const std::vector<gidx_t> want_cols(outside_cols.begin(), outside_cols.end());
        EXPECT_EQ(split.outside_columns, want_cols) << what;
        const TileConfig config{256, 0, false, 1};
        const CsrMatrix in = part_of(a, c.lo, c.hi, true, a.n_cols, [](gidx_t x) { return x; });
        const auto slot = [&](gidx_t x) {
          return static_cast<gidx_t>(std::lower_bound(want_cols.begin(), want_cols.end(), x) -
                                     want_cols.begin());
        };
        const CsrMatrix out =
            compact ? part_of(a, c.lo, c.hi, false, std::ssize(want_cols), slot)
                    : part_of(a, c.lo, c.hi, false, a.n_cols, [](gidx_t x) { return x; });
        const TiledMatrix want_in(in, config, scalar), want_out(out, config, scalar);
        if (scalar == ScalarType::f32) {
          expect_same_layout<float>(split.inside, want_in, what + " inside");
          expect_same_layout<float>(split.outside, want_out, what + " outside");
        } else {
          expect_same_layout<double>(split.inside, want_in, what + " inside");
          expect_same_layout<double>(split.outside, want_out, what + " outside");
        }
        EXPECT_EQ(split.inside_row_ptr, in.row_ptr) << what;
        EXPECT_EQ(split.outside_row_ptr, out.row_ptr) << what;
        for (gidx_t r = 0; r < a.n_rows; ++r) {
          std::int64_t left = 0;
          for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j)
            left += a.col_idx[j] < c.lo;
          ASSERT_EQ(split.outside_left[static_cast<std::size_t>(r)], left) << what << " row " << r;
        }
      }
    }
  }
}

// C = A B through the split (inside part on B's rows [lo, hi), outside part on the compact
// buffer of the outside columns' rows), against a double-precision loop over A's nonzeros; SpMV
// (K = 1) and SDDMM (scattered back to CSR order) alike. Random sampled patterns of a
// power-law-ish matrix, every K class, both precisions, every ISA variant the CPU runs.
template <class T>
void check_products(const CsrMatrix& a, gidx_t lo, gidx_t hi, int k, ColumnSplit& split,
                    const std::string& what) {
  TiledMatrix::split_columns(a, lo, hi, true, scalar_type_of<T>, split);
  std::mt19937_64 rng(static_cast<std::uint64_t>(k) * 31 + static_cast<std::uint64_t>(a.nnz()));
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<T> b(static_cast<std::size_t>(a.n_cols) * k);
  for (T& x : b) x = static_cast<T>(d(rng));
  std::vector<T> ghosts;
  for (const gidx_t c : split.outside_columns)
    ghosts.insert(ghosts.end(), b.begin() + c * k, b.begin() + (c + 1) * k);
  const auto n_ghosts = std::ssize(split.outside_columns);
  const BasicDenseConstView<T> local{b.data() + lo * k, lo, k, hi - lo};
  const BasicDenseConstView<T> ghost_view{ghosts.data(), 0, k, n_ghosts};
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  // SpMM / SpMV: the output starts with garbage (accumulate = false overwrites every row).
  std::vector<T> c(static_cast<std::size_t>(a.n_rows) * k, T{-9});
  if (k == 1) {
    spmv(split.inside, local, c.data(), false);
    if (split.outside.nnz() > 0) spmv(split.outside, ghost_view, c.data(), true);
  } else {
    spmm(split.inside, local, c.data(), k, k, false);
    if (split.outside.nnz() > 0) spmm(split.outside, ghost_view, c.data(), k, k, true);
  }
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    for (int kk = 0; kk < k; ++kk) {
      double want = 0, scale = 1;
      for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
        want += a.values[j] * static_cast<double>(b[a.col_idx[j] * k + kk]);
        scale += std::abs(a.values[j]);
      }
      ASSERT_NEAR(c[r * k + kk], want, tol * scale) << what << " row " << r << " k " << kk;
    }
  }
  // SDDMM: out_j = a_j <X_r, B_c>, each part in its own order, scattered back by the row ptrs.
  std::vector<T> x(static_cast<std::size_t>(a.n_rows) * k);
  for (T& v : x) v = static_cast<T>(d(rng));
  std::vector<T> in_out(static_cast<std::size_t>(split.inside.nnz()));
  std::vector<T> out_out(static_cast<std::size_t>(split.outside.nnz()));
  if (split.inside.nnz() > 0) sddmm(split.inside, x.data(), k, local, k, in_out.data());
  if (split.outside.nnz() > 0) sddmm(split.outside, x.data(), k, ghost_view, k, out_out.data());
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    const std::int64_t left = split.outside_left[static_cast<std::size_t>(r)];
    const std::int64_t ib = split.inside_row_ptr[r], ie = split.inside_row_ptr[r + 1];
    const std::int64_t ob = split.outside_row_ptr[r];
    for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
      const std::int64_t i = j - a.row_ptr[r];
      const T got = i < left               ? out_out[ob + i]
                    : i < left + (ie - ib) ? in_out[ib + i - left]
                                           : out_out[ob + i - (ie - ib)];
      double want = 0, scale = 1;
      for (int kk = 0; kk < k; ++kk) {
        want += static_cast<double>(x[r * k + kk]) * static_cast<double>(b[a.col_idx[j] * k + kk]);
        scale += std::abs(static_cast<double>(x[r * k + kk]) * b[a.col_idx[j] * k + kk]);
      }
      want *= a.values[j];
      ASSERT_NEAR(got, want, tol * scale * std::abs(a.values[j]) + tol)
          << what << " SDDMM row " << r << " nonzero " << i;
    }
  }
}

TEST(SplitColumns, TiledKernelsOnTheSplitGiveTheReference) {
  ColumnSplit split32, split64;
  for (const std::string& isa : supported_kernel_isas()) {
    set_kernel_isa(isa);
    std::mt19937_64 rng(5);
    for (int k : {1, 2, 3, 8, 16, 17, 32, 64, 128, 256}) {
      for (int trial = 0; trial < 2; ++trial) {
        RandomCsrSpec s;
        s.n_rows = 600;
        s.n_cols = 900;
        s.max_row_nnz = 1 + static_cast<int>(rng() % 40);
        s.empty_row_fraction = 0.15;
        s.seed = rng();
        const CsrMatrix a = random_csr(s);
        const gidx_t lo = static_cast<gidx_t>(rng() % 900);
        const gidx_t hi = lo + static_cast<gidx_t>(rng() % (901 - lo));
        const std::string what = isa + " K=" + std::to_string(k) + " [" + std::to_string(lo) +
                                 ", " + std::to_string(hi) + ")";
        check_products<float>(a, lo, hi, k, split32, what + " f32");
        check_products<double>(a, lo, hi, k, split64, what + " f64");
      }
    }
    // Every column remote, and no column remote.
    RandomCsrSpec s;
    s.n_rows = 300;
    s.n_cols = 400;
    const CsrMatrix a = random_csr(s);
    check_products<float>(a, 200, 200, 16, split32, isa + " all remote");
    check_products<double>(a, 0, 400, 16, split64, isa + " none remote");
  }
  set_kernel_isa(supported_kernel_isas().back());
}

TEST(SplitColumns, RefusesMalformedInput) {
  RandomCsrSpec s;
  s.n_rows = 20;
  s.n_cols = 30;
  s.empty_row_fraction = 0;
  const CsrMatrix good = random_csr(s);
  ColumnSplit split;
  const auto refused = [&](const CsrMatrix& a, gidx_t lo, gidx_t hi, ScalarType scalar,
                           const std::string& needle) {
    try {
      TiledMatrix::split_columns(a, lo, hi, true, scalar, split);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted; expected a refusal mentioning '" << needle << "'";
  };
  CsrMatrix bad_col = good;
  bad_col.col_idx[7] = 30;
  refused(bad_col, 0, 10, ScalarType::f32, "column 30 of local row");
  bad_col.col_idx[7] = -1;
  refused(bad_col, 0, 10, ScalarType::f64, "column -1 of local row");
  CsrMatrix short_ptr = good;
  short_ptr.row_ptr.pop_back();
  refused(short_ptr, 0, 10, ScalarType::f32, "row_ptr has");
  CsrMatrix short_vals = good;
  short_vals.values.pop_back();
  refused(short_vals, 0, 10, ScalarType::f32, "nonzeros but col_idx");
  refused(good, 20, 10, ScalarType::f32, "column range [20, 10)");
  refused(good, 0, 31, ScalarType::f32, "column range [0, 31)");
  CsrMatrix huge = good;
  huge.values[3] = 1e39;
  refused(huge, 0, 10, ScalarType::f32, "does not fit fp32");
  EXPECT_NO_THROW(TiledMatrix::split_columns(huge, 0, 10, true, ScalarType::f64, split));
}

}  // namespace
}  // namespace netsparse
