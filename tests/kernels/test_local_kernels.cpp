// Local SpMM / SDDMM / SpMV against straightforward references (Eigen sparse x dense in double
// for SpMM and SpMV, a naive double loop for SDDMM), over every K class, tiling configurations
// with several column panels, barriers on and off, 1 and 2 threads, and matrices with holes.
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>
#include <type_traits>

#include "netsparse/autotune.hpp"
#include "netsparse/local_kernels.hpp"
#include "random_csr.hpp"

namespace netsparse::test {
long allocation_count() noexcept;  // alloc_counter.cpp
}

namespace netsparse {
namespace {

using test::random_csr;
using test::random_dense;
using test::RandomCsrSpec;
using RowMajorD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using SparseD = Eigen::SparseMatrix<double, Eigen::RowMajor, std::int64_t>;

constexpr int kKs[] = {1, 2, 3, 16, 17, 32, 64, 128, 256};

struct Problem {
  std::string name;
  CsrMatrix csr;
};

// Matrices with the edge cases the kernels must survive: empty rows and whole empty row
// panels, empty column bands (column panels without tiles), rectangular shapes, a row block
// that does not start at row 0, a single row, no nonzeros at all.
const std::vector<Problem>& problems() {
  // Members in RandomCsrSpec's order: n_rows, n_cols, row_begin, n_rows_global, max_row_nnz,
  // empty_row_fraction, empty_rows, empty_cols, seed; the others keep their defaults.
  static const std::vector<Problem> all = [] {
    const std::pair<const char*, RandomCsrSpec> specs[] = {
        {"square_with_holes",
         {.n_rows = 1500,
          .n_cols = 1500,
          .empty_rows = {300, 700},
          .empty_cols = {600, 900},
          .seed = 11}},
        {"wide_row_block_at_5000",
         {.n_rows = 700,
          .n_cols = 2300,
          .row_begin = 5000,
          .n_rows_global = 9000,
          .max_row_nnz = 20,
          .seed = 12}},
        {"tall", {.n_rows = 1100, .n_cols = 300, .seed = 13}},
        {"single_row",
         {.n_rows = 1,
          .n_cols = 500,
          .row_begin = 42,
          .n_rows_global = 100,
          .max_row_nnz = 60,
          .empty_row_fraction = 0,
          .seed = 14}},
        {"no_nonzeros", {.n_rows = 40, .n_cols = 70, .empty_row_fraction = 1.0}},
    };
    std::vector<Problem> p;
    for (const auto& [name, spec] : specs) p.push_back({name, random_csr(spec)});
    return p;
  }();
  return all;
}

// SPADE's grid shapes with panel widths scaled down to the test matrices, so several column
// panels and barrier groups exist, plus the autotuner's own grid for this K.
std::vector<TileConfig> configs_for(const CsrMatrix& csr, int k) {
  std::vector<TileConfig> out;
  for (const int rp : {64, 256, 1024}) {
    out.push_back({rp, 0, false, 1});
    for (const gidx_t cp : {gidx_t{37}, gidx_t{256}}) {
      out.push_back({rp, cp, false, 1});
      out.push_back({rp, cp, true, 1});
      out.push_back({rp, cp, true, 2});
    }
  }
  out.push_back({1, 16, true, 3});
  for (const TileConfig& c : autotune_grid(csr.n_cols, k))
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

SparseD to_eigen(const CsrMatrix& csr) {
  std::vector<Eigen::Triplet<double, std::int64_t>> trips;
  for (gidx_t r = 0; r < csr.n_rows; ++r)
    for (std::int64_t j = csr.row_ptr[r]; j < csr.row_ptr[r + 1]; ++j)
      trips.emplace_back(r, csr.col_idx[j], csr.values[j]);
  SparseD m(csr.n_rows, csr.n_cols);
  m.setFromTriplets(trips.begin(), trips.end());
  return m;
}

// Row-major rows x k with leading dimension ld, as double (only the first k columns).
RowMajorD to_eigen_dense(const std::vector<float>& v, gidx_t rows, int k, std::int64_t ld) {
  RowMajorD m(rows, k);
  for (gidx_t r = 0; r < rows; ++r)
    for (int c = 0; c < k; ++c) m(r, c) = v[r * ld + c];
  return m;
}

// |got - want| <= rel * magnitude + tiny, element by element; reports the first few misses.
void expect_close(const float* got, std::int64_t ld_got, const RowMajorD& want,
                  const RowMajorD& magnitude, double rel, const std::string& what) {
  int misses = 0;
  for (Eigen::Index r = 0; r < want.rows(); ++r)
    for (Eigen::Index c = 0; c < want.cols(); ++c) {
      const double g = got[r * ld_got + c];
      const double tol = rel * magnitude(r, c) + 1e-6;
      if (!(std::abs(g - want(r, c)) <= tol) && ++misses <= 3)
        ADD_FAILURE() << what << ": at (" << r << ", " << c << ") got " << g << ", want "
                      << want(r, c) << " (tolerance " << tol << ")";
    }
  EXPECT_EQ(misses, 0) << what;
}

class KernelsVsReference : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override { omp_set_num_threads(std::get<1>(GetParam())); }
  int k() const { return std::get<0>(GetParam()); }
};

TEST_P(KernelsVsReference, Spmm) {
  const int k = this->k();
  for (const Problem& p : problems()) {
    const CsrMatrix& csr = p.csr;
    const std::int64_t ldb = k + 3;
    const std::int64_t ldc = k + 5;
    const std::vector<float> b = random_dense(csr.n_cols * ldb, 21);
    const std::vector<float> c0 = random_dense(csr.n_rows * ldc, 22);
    const SparseD a = to_eigen(csr);
    const RowMajorD bd = to_eigen_dense(b, csr.n_cols, k, ldb);
    const RowMajorD ref = a * bd;
    const RowMajorD mag = a.cwiseAbs() * bd.cwiseAbs();
    const RowMajorD c0d = to_eigen_dense(c0, csr.n_rows, k, ldc);
    const RowMajorD ref_acc = ref + c0d;
    const RowMajorD mag_acc = mag + c0d.cwiseAbs();
    int variant = 0;
    for (const TileConfig& config : configs_for(csr, k)) {
      const TiledMatrix t(csr, config);
      const std::string what = p.name + " " + to_string(config) + " K=" + std::to_string(k);
      // Alternate between a view of all of B and one of only the touched rows.
      const IndexRange touched = t.touched_columns();
      const DenseConstView full{b.data(), 0, ldb, csr.n_cols};
      const DenseConstView tight{b.data() + touched.begin * ldb, touched.begin, ldb,
                                 touched.size()};
      const DenseConstView view = (variant++ % 2 == 0) ? full : tight;

      std::vector<float> c = c0;
      spmm(t, view, c.data(), ldc, k, /*accumulate=*/true);
      expect_close(c.data(), ldc, ref_acc, mag_acc, 1e-5, what + " accumulate");
      for (gidx_t r = 0; r < csr.n_rows; ++r)
        for (std::int64_t j = k; j < ldc; ++j)
          ASSERT_EQ(c[r * ldc + j], c0[r * ldc + j]) << what << ": padding of C was written";

      c = c0;
      spmm(t, view, c.data(), ldc, k, /*accumulate=*/false);
      expect_close(c.data(), ldc, ref, mag, 1e-5, what + " overwrite");
    }
  }
}

TEST_P(KernelsVsReference, SpmmColumnPanelsSumToFull) {
  const int k = this->k();
  for (const Problem& p : problems()) {
    const CsrMatrix& csr = p.csr;
    const std::vector<float> b = random_dense(csr.n_cols * k, 31);
    const SparseD a = to_eigen(csr);
    const RowMajorD bd = to_eigen_dense(b, csr.n_cols, k, k);
    const RowMajorD ref = a * bd;
    const RowMajorD mag = a.cwiseAbs() * bd.cwiseAbs();
    for (const TileConfig& config : configs_for(csr, k)) {
      const TiledMatrix t(csr, config);
      const std::string what = p.name + " " + to_string(config) + " K=" + std::to_string(k);
      std::vector<float> c(csr.n_rows * k, 0.0f);
      // Panels in reverse order, each from a buffer holding only that panel's touched rows,
      // as a distributed driver would pass them.
      for (int cp = t.n_col_panels() - 1; cp >= 0; --cp) {
        const auto cols = t.panel_columns(cp);
        if (cols.empty()) {
          spmm_col_panel(t, cp, DenseConstView{}, c.data(), k, k);  // reads nothing
          continue;
        }
        const gidx_t lo = cols.front();
        const gidx_t n = cols.back() + 1 - lo;
        const std::vector<float> panel_b(b.begin() + lo * k, b.begin() + (lo + n) * k);
        spmm_col_panel(t, cp, DenseConstView{panel_b.data(), lo, k, n}, c.data(), k, k);
      }
      expect_close(c.data(), k, ref, mag, 1e-5, what);
    }
  }
}

TEST_P(KernelsVsReference, Sddmm) {
  const int k = this->k();
  for (const Problem& p : problems()) {
    const CsrMatrix& csr = p.csr;
    const std::int64_t ldx = k + 1;
    const std::int64_t ldy = k + 2;
    const std::vector<float> x = random_dense(csr.n_rows * ldx, 41);
    const std::vector<float> y = random_dense(csr.n_cols * ldy, 42);
    const std::int64_t nnz = csr.nnz();
    RowMajorD ref(1, nnz);
    RowMajorD mag(1, nnz);
    for (gidx_t r = 0; r < csr.n_rows; ++r)
      for (std::int64_t j = csr.row_ptr[r]; j < csr.row_ptr[r + 1]; ++j) {
        double dot = 0;
        double abs_dot = 0;
        for (int kk = 0; kk < k; ++kk) {
          const double term = double{x[r * ldx + kk]} * y[csr.col_idx[j] * ldy + kk];
          dot += term;
          abs_dot += std::abs(term);
        }
        ref(0, j) = csr.values[j] * dot;
        mag(0, j) = std::abs(csr.values[j]) * abs_dot;
      }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const TileConfig& config : configs_for(csr, k)) {
      const TiledMatrix t(csr, config);
      const std::string what = p.name + " " + to_string(config) + " K=" + std::to_string(k);
      const DenseConstView yv{y.data(), 0, ldy, csr.n_cols};

      std::vector<float> out(nnz, nan);
      sddmm(t, x.data(), ldx, yv, k, out.data());
      expect_close(out.data(), nnz, ref, mag, 1e-4, what);

      // Column panel by column panel: each call fills exactly its panel's nonzeros.
      std::vector<float> part(nnz, nan);
      std::vector<int> panel_of(nnz, -1);
      for (gidx_t r = 0; r < csr.n_rows; ++r)
        for (std::int64_t j = csr.row_ptr[r]; j < csr.row_ptr[r + 1]; ++j)
          panel_of[j] = static_cast<int>(csr.col_idx[j] / t.col_panel_width());
      for (int cp = 0; cp < t.n_col_panels(); ++cp) {
        const auto cols = t.panel_columns(cp);
        const gidx_t lo = cols.empty() ? 0 : cols.front();
        const gidx_t n = cols.empty() ? 0 : cols.back() + 1 - lo;
        sddmm_col_panel(t, cp, x.data(), ldx, DenseConstView{y.data() + lo * ldy, lo, ldy, n}, k,
                        part.data());
        for (std::int64_t j = 0; j < nnz; ++j)
          ASSERT_EQ(std::isnan(part[j]), panel_of[j] > cp)
              << what << ": after panel " << cp << ", nonzero " << j << " of panel " << panel_of[j];
      }
      expect_close(part.data(), nnz, ref, mag, 1e-4, what + " by panel");
    }
  }
}

class SpmvVsReference : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { omp_set_num_threads(GetParam()); }
};

TEST_P(SpmvVsReference, ContiguousAndStridedX) {
  for (const Problem& p : problems()) {
    const CsrMatrix& csr = p.csr;
    const SparseD a = to_eigen(csr);
    for (const std::int64_t stride : {std::int64_t{1}, std::int64_t{3}}) {
      const std::vector<float> x = random_dense(csr.n_cols * stride, 51);
      const std::vector<float> y0 = random_dense(csr.n_rows, 52);
      RowMajorD xd(csr.n_cols, 1);
      for (gidx_t c = 0; c < csr.n_cols; ++c) xd(c, 0) = x[c * stride];
      const RowMajorD ref = a * xd;
      const RowMajorD mag = a.cwiseAbs() * xd.cwiseAbs();
      RowMajorD y0d(csr.n_rows, 1);
      for (gidx_t r = 0; r < csr.n_rows; ++r) y0d(r, 0) = y0[r];
      for (const TileConfig& config : configs_for(csr, 1)) {
        const TiledMatrix t(csr, config);
        const std::string what =
            p.name + " " + to_string(config) + " stride " + std::to_string(stride);
        // A view starting past column 0 exercises the base arithmetic.
        const IndexRange touched = t.touched_columns();
        const DenseConstView xv{x.data() + touched.begin * stride, touched.begin, stride,
                                touched.size()};
        std::vector<float> y = y0;
        spmv(t, xv, y.data(), true);
        expect_close(y.data(), 1, ref + y0d, mag + y0d.cwiseAbs(), 1e-5, what + " accumulate");
        y = y0;
        spmv(t, xv, y.data(), false);
        expect_close(y.data(), 1, ref, mag, 1e-5, what + " overwrite");
        std::vector<float> by_panel(csr.n_rows, 0.0f);
        for (int cp = 0; cp < t.n_col_panels(); ++cp) {
          const auto cols = t.panel_columns(cp);
          const gidx_t lo = cols.empty() ? 0 : cols.front();
          const gidx_t n = cols.empty() ? 0 : cols.back() + 1 - lo;
          spmv_col_panel(t, cp, DenseConstView{x.data() + lo * stride, lo, stride, n},
                         by_panel.data());
        }
        expect_close(by_panel.data(), 1, ref, mag, 1e-5, what + " by panel");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KAndThreads, KernelsVsReference,
                         ::testing::Combine(::testing::ValuesIn(kKs), ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return "K" + std::to_string(std::get<0>(info.param)) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Threads, SpmvVsReference, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "threads" + std::to_string(info.param);
                         });

// C = A * B with streaming stores (forced by a zero threshold): rows aligned to 64 bytes
// stream, others fall back to plain stores; both must give the reference result.
TEST(KernelsStreaming, StreamedOutputMatchesReference) {
  const std::int64_t default_threshold = spmm_streaming_threshold_bytes();
  EXPECT_GT(default_threshold, 0);
  set_spmm_streaming_threshold_bytes(0);
  ASSERT_EQ(spmm_streaming_threshold_bytes(), 0);
  omp_set_num_threads(2);
  const CsrMatrix& csr = problems()[0].csr;
  const SparseD a = to_eigen(csr);
  for (const std::string& isa : supported_kernel_isas()) {
    set_kernel_isa(isa);
    for (const int k : {1, 16, 17, 32, 64, 128, 256}) {
      const std::vector<float> b = random_dense(csr.n_cols * k, 81);
      const RowMajorD bd = to_eigen_dense(b, csr.n_cols, k, k);
      const RowMajorD ref = a * bd;
      const RowMajorD mag = a.cwiseAbs() * bd.cwiseAbs();
      // ldc a multiple of 16 floats on a 64-byte-aligned buffer: every row is aligned.
      const std::int64_t ldc = (k + 15) / 16 * 16;
      const std::size_t bytes = static_cast<std::size_t>(csr.n_rows * ldc) * sizeof(float);
      std::unique_ptr<float, decltype(&std::free)> c(
          static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free);
      ASSERT_NE(c, nullptr);
      for (const TileConfig& config : {TileConfig{}, TileConfig{64, 0, false, 1}}) {
        const TiledMatrix t(csr, config);
        std::fill_n(c.get(), csr.n_rows * ldc, 7.0f);
        spmm(t, DenseConstView{b.data(), 0, k, csr.n_cols}, c.get(), ldc, k, false);
        expect_close(c.get(), ldc, ref, mag, 1e-5,
                     isa + " aligned " + to_string(config) + " K=" + std::to_string(k));
        // The same call into a misaligned C (offset by one float) stores normally.
        std::vector<float> c2(csr.n_rows * ldc + 1, 7.0f);
        spmm(t, DenseConstView{b.data(), 0, k, csr.n_cols}, c2.data() + 1, ldc, k, false);
        expect_close(c2.data() + 1, ldc, ref, mag, 1e-5,
                     isa + " misaligned " + to_string(config) + " K=" + std::to_string(k));
      }
    }
  }
  set_kernel_isa(supported_kernel_isas().front());
  set_spmm_streaming_threshold_bytes(-1);
  EXPECT_EQ(spmm_streaming_threshold_bytes(), default_threshold);
}

// SpMV's y = A*x clears a row panel's rows without a run inside the tile walk when the panel has
// a single tile (no separate scan of the run rows): rows without a run at a panel's start, in
// its middle, at its end, a whole empty panel and a short last panel, in f32 and f64, on every
// instruction-set variant, with one and with several tiles per panel. The values are small
// integers, so every sum is exact and the result must equal the reference bit for bit; y starts
// as NaN, so a row left unwritten fails.
template <class T>
void expect_spmv_store_clears_rows_without_a_run() {
  // 23 rows in panels of 4: [0, 4) rows 1-2, [4, 8) empty, [8, 12) rows 8 and 11, [12, 16) all,
  // [16, 20) row 19, [20, 23) row 20.
  const std::vector<gidx_t> rows_with_entries = {1, 2, 8, 11, 12, 13, 14, 15, 19, 20};
  CsrMatrix csr;
  csr.n_rows = csr.n_rows_global = 23;
  csr.n_cols = 11;
  csr.row_ptr.assign(1, 0);
  for (gidx_t r = 0; r < csr.n_rows; ++r) {
    if (std::find(rows_with_entries.begin(), rows_with_entries.end(), r) !=
        rows_with_entries.end()) {
      for (gidx_t c = r % 3; c < csr.n_cols; c += 1 + r % 4) {
        csr.col_idx.push_back(c);
        csr.values.push_back(static_cast<double>((r + 2 * c) % 7) - 3.0);
      }
    }
    csr.row_ptr.push_back(static_cast<std::int64_t>(csr.col_idx.size()));
  }
  std::vector<T> x(static_cast<std::size_t>(csr.n_cols));
  for (gidx_t c = 0; c < csr.n_cols; ++c) x[c] = static_cast<T>(c % 5) - T(2);
  std::vector<T> want(static_cast<std::size_t>(csr.n_rows), T(0));
  for (gidx_t r = 0; r < csr.n_rows; ++r)
    for (std::int64_t j = csr.row_ptr[r]; j < csr.row_ptr[r + 1]; ++j)
      want[r] += static_cast<T>(csr.values[j]) * x[csr.col_idx[j]];
  const ScalarType scalar = std::is_same_v<T, float> ? ScalarType::f32 : ScalarType::f64;
  const std::string original = active_kernel_isa();
  for (const std::string& isa : supported_kernel_isas()) {
    set_kernel_isa(isa);
    for (const gidx_t col_panel : {gidx_t{0}, gidx_t{4}}) {  // one tile per panel, several
      const TiledMatrix a(csr, TileConfig{4, col_panel, false, 1}, scalar);
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<T> y(want.size(), std::numeric_limits<T>::quiet_NaN());
        spmv(a, BasicDenseConstView<T>{x.data(), 0, 1, csr.n_cols}, y.data(), false);
        for (gidx_t r = 0; r < csr.n_rows; ++r) {
          EXPECT_EQ(y[r], want[r])
              << isa << " CP " << col_panel << " threads " << threads << " row " << r;
        }
      }
    }
  }
  set_kernel_isa(original);
}

TEST(SpmvStore, ClearsTheRowsWithoutARunF32) {
  expect_spmv_store_clears_rows_without_a_run<float>();
}
TEST(SpmvStore, ClearsTheRowsWithoutARunF64) {
  expect_spmv_store_clears_rows_without_a_run<double>();
}

// Every instruction-set variant this CPU runs gives the reference result for every K class.
TEST(KernelIsaVariants, AllSupportedVariantsAgree) {
  const std::vector<std::string> isas = supported_kernel_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.back(), "baseline");
  const std::string original = active_kernel_isa();
  omp_set_num_threads(2);
  const CsrMatrix& csr = problems()[0].csr;
  const SparseD a = to_eigen(csr);
  for (const std::string& isa : isas) {
    set_kernel_isa(isa);
    ASSERT_EQ(active_kernel_isa(), isa);
    for (const int k : kKs) {
      const std::vector<float> b = random_dense(csr.n_cols * k, 61);
      const RowMajorD bd = to_eigen_dense(b, csr.n_cols, k, k);
      const RowMajorD ref = a * bd;
      const RowMajorD mag = a.cwiseAbs() * bd.cwiseAbs();
      for (const TileConfig& config : {TileConfig{}, TileConfig{64, 100, true, 1}}) {
        const TiledMatrix t(csr, config);
        const std::string what = isa + " " + to_string(config) + " K=" + std::to_string(k);
        std::vector<float> c(csr.n_rows * k);
        spmm(t, DenseConstView{b.data(), 0, k, csr.n_cols}, c.data(), k, k, false);
        expect_close(c.data(), k, ref, mag, 1e-5, what + " spmm");
        // SDDMM with X = B's first rows: compare against the same naive formula.
        std::vector<float> out(csr.nnz());
        sddmm(t, b.data(), k, DenseConstView{b.data(), 0, k, csr.n_cols}, k, out.data());
        for (gidx_t r = 0; r < csr.n_rows; ++r)
          for (std::int64_t j = csr.row_ptr[r]; j < csr.row_ptr[r + 1]; ++j) {
            double dot = 0;
            double abs_dot = 0;
            for (int kk = 0; kk < k; ++kk) {
              const double term = double{b[r * k + kk]} * b[csr.col_idx[j] * k + kk];
              dot += term;
              abs_dot += std::abs(term);
            }
            ASSERT_NEAR(out[j], csr.values[j] * dot, 1e-4 * abs_dot + 1e-6) << what << " sddmm";
          }
        if (k == 1) {
          std::vector<float> y(csr.n_rows);
          spmv(t, DenseConstView{b.data(), 0, 1, csr.n_cols}, y.data(), false);
          expect_close(y.data(), 1, ref, mag, 1e-5, what + " spmv");
        }
      }
    }
  }
  set_kernel_isa(original);
  EXPECT_THROW(set_kernel_isa("no-such-isa"), std::invalid_argument);
}

// After a warm-up (OpenMP team creation), kernel calls allocate nothing.
TEST(KernelsHotPath, NoAllocationInKernels) {
  omp_set_num_threads(2);
  const CsrMatrix& csr = problems()[0].csr;
  for (const TileConfig& config : {TileConfig{}, TileConfig{64, 37, true, 2}}) {
    const TiledMatrix t(csr, config);
    for (const int k : {1, 17, 128}) {
      const std::vector<float> b = random_dense(csr.n_cols * k, 71);
      std::vector<float> c(csr.n_rows * k);
      std::vector<float> out(csr.nnz());
      const DenseConstView bv{b.data(), 0, k, csr.n_cols};
      spmm(t, bv, c.data(), k, k, false);  // warm-up
      const long before = test::allocation_count();
      spmm(t, bv, c.data(), k, k, false);
      spmm(t, bv, c.data(), k, k, true);
      spmm_col_panel(t, 0, bv, c.data(), k, k);
      sddmm(t, c.data(), k, bv, k, out.data());
      sddmm_col_panel(t, 0, c.data(), k, bv, k, out.data());
      spmv(t, bv, c.data(), false);
      spmv_col_panel(t, 0, bv, c.data());
      EXPECT_EQ(test::allocation_count(), before) << to_string(config) << " K=" << k;
    }
  }
}

template <class F>
void expect_invalid(F&& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(KernelsValidation, BadArgumentsThrowClearly) {
  const CsrMatrix& csr = problems()[2].csr;  // 1100 x 300
  const TiledMatrix t(csr, TileConfig{64, 100, false, 1});
  const int k = 16;
  std::vector<float> b(csr.n_cols * k, 1.0f);
  std::vector<float> c(csr.n_rows * k);
  std::vector<float> out(csr.nnz());
  const DenseConstView bv{b.data(), 0, k, csr.n_cols};
  expect_invalid([&] { spmm(t, bv, c.data(), k, 0); }, "K must be >= 1");
  expect_invalid(
      [&] {
        spmm(t, DenseConstView{b.data(), 0, k}, c.data(), k, k);
      },
      "set DenseConstView::n_rows");
  expect_invalid(
      [&] {
        spmm(t, DenseConstView{b.data(), 5, k, csr.n_cols}, c.data(), k, k);
      },
      "reads columns");
  expect_invalid(
      [&] {
        spmm(t, DenseConstView{nullptr, 0, k, csr.n_cols}, c.data(), k, k);
      },
      "B is null");
  expect_invalid(
      [&] {
        spmm(t, DenseConstView{b.data(), 0, k - 1, csr.n_cols}, c.data(), k, k);
      },
      "B.ld");
  expect_invalid([&] { spmm(t, bv, nullptr, k, k); }, "C is null");
  expect_invalid([&] { spmm(t, bv, c.data(), k - 1, k); }, "leading dimension of C");
  expect_invalid([&] { spmm_col_panel(t, 3, bv, c.data(), k, k); }, "column panel 3");
  expect_invalid([&] { spmm_col_panel(t, -1, bv, c.data(), k, k); }, "negative");
  // A panel view holding only panel 1's columns is too small for panel 2.
  const auto p1 = t.panel_columns(1);
  const DenseConstView panel1{b.data() + p1.front() * k, p1.front(), k, p1.back() + 1 - p1.front()};
  EXPECT_NO_THROW(spmm_col_panel(t, 1, panel1, c.data(), k, k));
  expect_invalid([&] { spmm_col_panel(t, 2, panel1, c.data(), k, k); }, "reads columns");
  expect_invalid([&] { sddmm(t, nullptr, k, bv, k, out.data()); }, "X is null");
  expect_invalid([&] { sddmm(t, c.data(), k, bv, k, nullptr); }, "out is null");
  expect_invalid([&] { sddmm(t, c.data(), 2, bv, k, out.data()); }, "leading dimension of X");
  expect_invalid([&] { sddmm_col_panel(t, 9, c.data(), k, bv, k, out.data()); }, "column panel 9");
  expect_invalid([&] { spmv(t, DenseConstView{b.data(), 0, 0, csr.n_cols}, c.data()); }, "x.ld");
  expect_invalid([&] { spmv(t, bv, nullptr); }, "y is null");
}

}  // namespace
}  // namespace netsparse
