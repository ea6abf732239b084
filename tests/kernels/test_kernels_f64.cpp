// Double precision end to end in the local kernels: SpMM, SDDMM and SpMV (whole matrix and per
// column panel, tiled and CSR kernels, every instruction-set variant the CPU runs, every K class)
// on an f64 TiledMatrix against a long double reference. The matrix values and operands carry
// digits beyond float's precision, so the tolerance (1e-12 relative) fails for any kernel that
// rounds through float anywhere -- checked by running the same problem in f32, whose error must
// be far above it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/local_kernels.hpp"
#include "random_csr.hpp"

namespace netsparse {
namespace {

using test::random_csr;
using test::RandomCsrSpec;

constexpr int kKs[] = {1, 3, 8, 16, 17, 32, 64, 128, 256};
constexpr double kF64Tolerance = 1e-12;

// A random pattern whose values need double precision: v * (1 + u * 2^-30), u in [0, 1).
CsrMatrix double_csr(std::uint64_t seed) {
  RandomCsrSpec s;
  s.n_rows = 900;
  s.n_cols = 1300;
  s.row_begin = 100;
  s.n_rows_global = 1200;
  s.max_row_nnz = 24;
  s.empty_rows = {300, 420};
  s.seed = seed;
  CsrMatrix m = random_csr(s);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (double& v : m.values) v *= 1.0 + u(rng) * 0x1p-30;
  return m;
}

std::vector<double> double_dense(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng) * (1.0 + u(rng) * 0x1p-28);
  return v;
}

// max |got - want| / max |want|
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<long double>& want) {
  long double scale = 0, err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(static_cast<long double>(got[i]) - want[i]));
  }
  return static_cast<double>(scale > 0 ? err / scale : err);
}

std::vector<long double> ref_spmm(const CsrMatrix& a, const std::vector<double>& b, int k) {
  std::vector<long double> c(static_cast<std::size_t>(a.n_rows) * k, 0.0L);
  for (gidx_t r = 0; r < a.n_rows; ++r)
    for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j)
      for (int kk = 0; kk < k; ++kk)
        c[r * k + kk] += static_cast<long double>(a.values[j]) * b[a.col_idx[j] * k + kk];
  return c;
}

std::vector<long double> ref_sddmm(const CsrMatrix& a, const std::vector<double>& x,
                                   const std::vector<double>& y, int k) {
  std::vector<long double> out(static_cast<std::size_t>(a.nnz()));
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
      long double dot = 0;
      for (int kk = 0; kk < k; ++kk)
        dot += static_cast<long double>(x[r * k + kk]) * y[a.col_idx[j] * k + kk];
      out[j] = a.values[j] * dot;
    }
  }
  return out;
}

class KernelsF64 : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { set_kernel_isa(GetParam()); }
  void TearDown() override { set_kernel_isa(supported_kernel_isas().front()); }
};

TEST_P(KernelsF64, SpmmWholeAndPerPanelMatchTheReference) {
  const CsrMatrix csr = double_csr(5);
  for (const TileConfig cfg : {TileConfig{256, 0, false, 1}, TileConfig{64, 300, true, 2}}) {
    const TiledMatrix a(csr, cfg, ScalarType::f64);
    ASSERT_EQ(a.scalar_type(), ScalarType::f64);
    ASSERT_EQ(std::ssize(a.values_f64()), csr.nnz());
    for (const int k : kKs) {
      const std::vector<double> b = double_dense(static_cast<std::size_t>(csr.n_cols) * k, 6);
      const std::vector<long double> want = ref_spmm(csr, b, k);
      const DenseConstViewF64 view{b.data(), 0, k, csr.n_cols};
      std::vector<double> c(static_cast<std::size_t>(csr.n_rows) * k, 99.0);
      spmm(a, view, c.data(), k, k, /*accumulate=*/false);
      EXPECT_LE(relative_error(c, want), kF64Tolerance) << to_string(cfg) << " K=" << k;
      std::vector<double> by_panel(c.size(), 0.0);
      for (int p = 0; p < a.n_col_panels(); ++p) spmm_col_panel(a, p, view, by_panel.data(), k, k);
      EXPECT_LE(relative_error(by_panel, want), kF64Tolerance) << to_string(cfg) << " K=" << k;
    }
  }
}

TEST_P(KernelsF64, StreamedSpmmOutputMatchesTheReference) {
  const CsrMatrix csr = double_csr(7);
  const TiledMatrix a(csr, TileConfig{}, ScalarType::f64);
  const std::int64_t saved = spmm_streaming_threshold_bytes();
  set_spmm_streaming_threshold_bytes(0);  // stream whenever alignment allows
  for (const int k : {16, 32, 128}) {
    const std::vector<double> b = double_dense(static_cast<std::size_t>(csr.n_cols) * k, 8);
    std::vector<double> c(static_cast<std::size_t>(csr.n_rows) * k + 8);
    // Align C's first row to 64 bytes (every row then is: K * 8 is a multiple of 64).
    double* c0 = c.data();
    while (reinterpret_cast<std::uintptr_t>(c0) % 64 != 0) ++c0;
    spmm(a, DenseConstViewF64{b.data(), 0, k, csr.n_cols}, c0, k, k, false);
    const std::vector<double> got(c0, c0 + csr.n_rows * k);
    EXPECT_LE(relative_error(got, ref_spmm(csr, b, k)), kF64Tolerance) << "K=" << k;
  }
  set_spmm_streaming_threshold_bytes(saved);
}

TEST_P(KernelsF64, SddmmMatchesTheReference) {
  const CsrMatrix csr = double_csr(9);
  const TiledMatrix a(csr, TileConfig{64, 300, false, 1}, ScalarType::f64);
  for (const int k : kKs) {
    const std::vector<double> x = double_dense(static_cast<std::size_t>(csr.n_rows) * k, 10);
    const std::vector<double> y = double_dense(static_cast<std::size_t>(csr.n_cols) * k, 11);
    const std::vector<long double> want = ref_sddmm(csr, x, y, k);
    std::vector<double> out(static_cast<std::size_t>(csr.nnz()), 99.0);
    sddmm(a, x.data(), k, DenseConstViewF64{y.data(), 0, k, csr.n_cols}, k, out.data());
    EXPECT_LE(relative_error(out, want), kF64Tolerance) << "K=" << k;
  }
}

TEST_P(KernelsF64, SpmvContiguousAndStridedMatchTheReference) {
  const CsrMatrix csr = double_csr(12);
  const TiledMatrix a(csr, TileConfig{128, 200, false, 1}, ScalarType::f64);
  for (const int stride : {1, 3}) {
    const std::vector<double> x = double_dense(static_cast<std::size_t>(csr.n_cols) * stride, 13);
    std::vector<double> xs(static_cast<std::size_t>(csr.n_cols));
    for (gidx_t c = 0; c < csr.n_cols; ++c) xs[c] = x[c * stride];
    const std::vector<long double> want = ref_spmm(csr, xs, 1);
    std::vector<double> y(static_cast<std::size_t>(csr.n_rows), 99.0);
    spmv(a, DenseConstViewF64{x.data(), 0, stride, csr.n_cols}, y.data(), false);
    EXPECT_LE(relative_error(y, want), kF64Tolerance) << "stride " << stride;
  }
}

TEST_P(KernelsF64, CsrKernelsMatchTheReference) {
  const CsrMatrix csr = double_csr(14);
  const gidx_t lo = 400, hi = 800;
  for (const int k : kKs) {
    const std::vector<double> b = double_dense(static_cast<std::size_t>(csr.n_cols) * k, 15);
    const DenseConstViewF64 view{b.data(), 0, k, csr.n_cols};
    std::vector<double> c(static_cast<std::size_t>(csr.n_rows) * k, 99.0);
    spmm_csr_columns(csr, lo, hi, true, view, c.data(), k, k, false);
    spmm_csr_columns(csr, lo, hi, false, view, c.data(), k, k, true);
    EXPECT_LE(relative_error(c, ref_spmm(csr, b, k)), kF64Tolerance) << "SpMM K=" << k;
    const std::vector<double> x = double_dense(static_cast<std::size_t>(csr.n_rows) * k, 16);
    std::vector<double> out(static_cast<std::size_t>(csr.nnz()), 99.0);
    sddmm_csr_columns(csr, lo, hi, true, x.data(), k, view, k, out.data());
    sddmm_csr_columns(csr, lo, hi, false, x.data(), k, view, k, out.data());
    EXPECT_LE(relative_error(out, ref_sddmm(csr, x, b, k)), kF64Tolerance) << "SDDMM K=" << k;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, KernelsF64, ::testing::ValuesIn(supported_kernel_isas()),
                         [](const auto& info) { return info.param; });

// The tolerance above discriminates: the same problem computed in fp32 misses it by orders of
// magnitude (so a kernel that silently rounded through float could not pass).
TEST(KernelsF64Tolerance, Fp32MissesTheF64Tolerance) {
  const CsrMatrix csr = double_csr(5);
  const int k = 16;
  const std::vector<double> b = double_dense(static_cast<std::size_t>(csr.n_cols) * k, 6);
  const std::vector<float> b32(b.begin(), b.end());
  const TiledMatrix a(csr, TileConfig{}, ScalarType::f32);
  std::vector<float> c(static_cast<std::size_t>(csr.n_rows) * k);
  spmm(a, DenseConstView{b32.data(), 0, k, csr.n_cols}, c.data(), k, k, false);
  const double err = relative_error(c, ref_spmm(csr, b, k));
  EXPECT_GT(err, 1e3 * kF64Tolerance);
  EXPECT_LT(err, 1e-5);  // and is still an fp32-accurate answer
}

TEST(KernelsF64Validation, PrecisionMismatchIsRefused) {
  const CsrMatrix csr = double_csr(3);
  const TiledMatrix a32(csr, TileConfig{}, ScalarType::f32);
  const TiledMatrix a64(csr, TileConfig{}, ScalarType::f64);
  EXPECT_EQ(a32.values_f64().size(), 0u);
  EXPECT_EQ(a64.values().size(), 0u);
  std::vector<double> b(static_cast<std::size_t>(csr.n_cols), 1.0), c(csr.n_rows);
  std::vector<float> b32(b.begin(), b.end()), c32(c.begin(), c.end());
  try {
    spmv(a32, DenseConstViewF64{b.data(), 0, 1, csr.n_cols}, c.data());
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the matrix holds f32 values but the operands are f64"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(spmm(a64, DenseConstView{b32.data(), 0, 1, csr.n_cols}, c32.data(), 1, 1),
               std::invalid_argument);
}

TEST(KernelsF64Validation, ValueBeyondFloatRangeIsRefusedForF32Only) {
  CsrMatrix m;
  m.n_rows_global = m.n_rows = 2;
  m.n_cols = 3;
  m.row_begin = 0;
  m.row_ptr = {0, 1, 3};
  m.col_idx = {0, 1, 2};
  m.values = {1.0, -3.5e38, 2.0};
  try {
    (void)TiledMatrix(m, TileConfig{}, ScalarType::f32);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("value -3.5e+38 at global row 1, column 1 does not fit fp32"),
              std::string::npos)
        << what;
  }
  const TiledMatrix a(m, TileConfig{}, ScalarType::f64);
  const std::vector<double> x = {1.0, 1.0, 1.0};
  std::vector<double> y(2);
  spmv(a, DenseConstViewF64{x.data(), 0, 1, 3}, y.data(), false);
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], -3.5e38 + 2.0);
}

}  // namespace
}  // namespace netsparse
