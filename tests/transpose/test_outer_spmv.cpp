// Outer-product SpMV (merge of scaled columns by row index) against the row-wise CSR SpMV of
// lib/kernels and a long-double reference, float and double, every leaf count, 1 and 2
// threads, a row block; bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/random_csr.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/transpose.hpp"

namespace netsparse {
namespace {

using test::random_csr;

std::vector<long double> reference(const CsrMatrix& a, const std::vector<double>& x) {
  std::vector<long double> y(static_cast<std::size_t>(a.n_rows), 0.0L);
  for (gidx_t r = 0; r < a.n_rows; ++r)
    for (std::int64_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p)
      y[r] += static_cast<long double>(a.values[p]) * x[a.col_idx[p]];
  return y;
}

// |got - ref| <= tol * sum |a_ij x_j| per row (the condition of the row's sum).
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<long double>& ref,
                  const CsrMatrix& a, const std::vector<double>& x, double tol,
                  const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.size(), ref.size());
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    long double mag = 0;
    for (std::int64_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p)
      mag += std::fabs(static_cast<long double>(a.values[p]) * x[a.col_idx[p]]);
    const long double err = std::fabs(static_cast<long double>(got[r]) - ref[r]);
    ASSERT_LE(static_cast<double>(err), tol * static_cast<double>(mag) + 1e-300)
        << "row " << r << ": " << static_cast<double>(got[r]) << " vs "
        << static_cast<double>(ref[r]);
  }
}

std::vector<double> make_x(gidx_t n, unsigned seed) {
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<double>((i * 2654435761u + seed) % 2048) / 1024.0 - 1.0;
  return x;
}

struct NamedCase {
  std::string name;
  CsrMatrix m;
};

std::vector<NamedCase> cases() {
  std::vector<NamedCase> c;
  c.push_back(
      {"random", random_csr({.n_rows = 300, .n_cols = 200, .max_row_nnz = 15, .seed = 31})});
  c.push_back({"holes", random_csr({.n_rows = 200,
                                    .n_cols = 400,
                                    .empty_row_fraction = 0.4,
                                    .empty_rows = {50, 120},
                                    .empty_cols = {10, 300},
                                    .seed = 37})});
  c.push_back({"wide", random_csr({.n_rows = 5,
                                   .n_cols = 2000,
                                   .max_row_nnz = 900,
                                   .empty_row_fraction = 0.0,
                                   .seed = 41})});
  c.push_back(
      {"single_row",
       random_csr(
           {.n_rows = 1, .n_cols = 30, .max_row_nnz = 30, .empty_row_fraction = 0.0, .seed = 43})});
  c.push_back(
      {"single_col", random_csr({.n_rows = 90, .n_cols = 1, .max_row_nnz = 1, .seed = 47})});
  KroneckerParams p;
  p.scale = 11;
  p.edge_factor = 8;
  c.push_back({"kron11", generate_kronecker(p, 0, 2048)});
  CsrMatrix e;
  e.n_rows = e.n_rows_global = 4;
  e.n_cols = 6;
  e.row_ptr.assign(5, 0);
  c.push_back({"no_nonzeros", e});
  return c;
}

TEST(OuterSpmv, MatchesRowWiseAndLongDouble) {
  for (const NamedCase& c : cases()) {
    const CsrMatrix at = transpose(c.m, {.threads = 2});
    const std::vector<double> x = make_x(c.m.n_cols, 7);
    const std::vector<long double> ref = reference(c.m, x);
    std::vector<float> xf(x.begin(), x.end());
    // The row-wise SpMV of lib/kernels (CSR, fp32 and fp64).
    std::vector<double> row_d(static_cast<std::size_t>(c.m.n_rows), -1.0);
    std::vector<float> row_f(static_cast<std::size_t>(c.m.n_rows), -1.0f);
    spmm_csr_columns(c.m, 0, c.m.n_cols, true, DenseConstViewF64{x.data(), 0, 1, c.m.n_cols},
                     row_d.data(), 1, 1, false);
    spmm_csr_columns(c.m, 0, c.m.n_cols, true, DenseConstView{xf.data(), 0, 1, c.m.n_cols},
                     row_f.data(), 1, 1, false);
    expect_close(row_d, ref, c.m, x, 1e-14, c.name + " row-wise f64");
    std::vector<int> leaves;
    for (int l = 2; l <= 16; ++l) leaves.push_back(l);
    for (const int l : {31, 64, 257}) leaves.push_back(l);
    for (const int threads : {1, 2}) {
      for (const int l : leaves) {
        const std::string what =
            c.name + " leaves " + std::to_string(l) + " threads " + std::to_string(threads);
        OuterSpmv plan(at, {.leaves = l, .threads = threads});
        std::vector<double> yd(static_cast<std::size_t>(c.m.n_rows),
                               std::numeric_limits<double>::quiet_NaN());
        std::vector<float> yf(yd.size(), std::numeric_limits<float>::quiet_NaN());
        plan.run(std::span<const double>(x), std::span<double>(yd));
        plan.run(std::span<const float>(xf), std::span<float>(yf));
        expect_close(yd, ref, c.m, x, 1e-14, what + " f64");
        expect_close(yf, ref, c.m, x, 1e-5, what + " f32");
        for (std::size_t i = 0; i < yd.size(); ++i) {
          ASSERT_NEAR(yd[i], row_d[i], 1e-12 * (1 + std::fabs(row_d[i]))) << what << " row " << i;
          ASSERT_NEAR(yf[i], row_f[i], 1e-4f * (1 + std::fabs(row_f[i]))) << what << " row " << i;
        }
        // Repeated runs on one plan give the same bits.
        std::vector<double> again(yd.size());
        plan.run(std::span<const double>(x), std::span<double>(again));
        ASSERT_EQ(again, yd) << what;
      }
    }
  }
}

TEST(OuterSpmv, RowBlockWritesItsRows) {
  const CsrMatrix block = random_csr(
      {.n_rows = 120, .n_cols = 70, .row_begin = 500, .n_rows_global = 1000, .seed = 53});
  const CsrMatrix at = transpose(block);
  const std::vector<double> x = make_x(70, 3);
  const std::vector<long double> ref = reference(block, x);
  std::vector<double> y(120, std::numeric_limits<double>::quiet_NaN());
  spmv_outer(at, std::span<const double>(x), std::span<double>(y), 500,
             {.leaves = 3, .threads = 2});
  expect_close(y, ref, block, x, 1e-14, "block");
}

TEST(OuterSpmv, BadInput) {
  const CsrMatrix a =
      random_csr({.n_rows = 20, .n_cols = 10, .empty_row_fraction = 0.0, .seed = 59});
  const CsrMatrix at = transpose(a);
  std::vector<double> x(10, 1.0), y(20);
  EXPECT_THROW(OuterSpmv(at, {.leaves = 1}), std::invalid_argument);
  EXPECT_THROW(OuterSpmv(at, {.threads = -2}), std::invalid_argument);
  OuterSpmv plan(at);
  try {
    plan.run(std::span<const double>(x.data(), 9), std::span<double>(y));
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("x has 9 entries, A has 10 columns"));
  }
  try {
    plan.run(std::span<const double>(x), std::span<double>(y.data(), 19));
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("y covers indices [0, 19)"));
  }
  CsrMatrix bad = at;
  std::swap(bad.col_idx[0], bad.col_idx[1]);
  EXPECT_THROW(OuterSpmv(bad, {}), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse
