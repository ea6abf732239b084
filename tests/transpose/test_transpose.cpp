// The local transposes (MeNDA merge, scanTrans, mergeTrans) against a plain reference, on
// random, skewed (Kronecker), holed, rectangular, degenerate and row-block matrices, every leaf
// count 2..16 and some odd ones, 1 and 2 threads; Eigen's transpose as the benchmark's baseline;
// bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/SparseCore>
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "csr_checks.hpp"
#include "kernels/random_csr.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/transpose.hpp"

namespace netsparse {
namespace {

using test::random_csr;
using test::RandomCsrSpec;

// The obvious transpose: triplets sorted by (column, row).
CsrMatrix reference_transpose(const CsrMatrix& a) {
  struct T {
    gidx_t c, r;
    double v;
  };
  std::vector<T> t;
  for (gidx_t r = 0; r < a.n_rows; ++r)
    for (std::int64_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p)
      t.push_back({a.col_idx[p], a.row_begin + r, a.values[p]});
  std::stable_sort(t.begin(), t.end(), [](const T& x, const T& y) { return x.c < y.c; });
  CsrMatrix o;
  o.n_rows = o.n_rows_global = a.n_cols;
  o.n_cols = a.n_rows_global;
  o.row_ptr.assign(static_cast<std::size_t>(a.n_cols) + 1, 0);
  for (const T& x : t) {
    ++o.row_ptr[x.c + 1];
    o.col_idx.push_back(x.r);
    o.values.push_back(x.v);
  }
  for (gidx_t c = 0; c < a.n_cols; ++c) o.row_ptr[c + 1] += o.row_ptr[c];
  return o;
}

CsrMatrix empty_matrix(gidx_t rows, gidx_t cols) {
  CsrMatrix m;
  m.n_rows = m.n_rows_global = rows;
  m.n_cols = cols;
  m.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  return m;
}

CsrMatrix kron(int scale, gidx_t rb = 0, gidx_t re = -1) {
  KroneckerParams p;
  p.scale = scale;
  p.edge_factor = 8;
  CsrMatrix m = generate_kronecker(p, rb, re < 0 ? (gidx_t{1} << scale) : re);
  // Distinct values, so a misplaced value is seen.
  for (std::size_t i = 0; i < m.values.size(); ++i) m.values[i] = 1.0 + 0.001 * double(i);
  return m;
}

struct NamedCase {
  std::string name;
  CsrMatrix m;
};

std::vector<NamedCase> cases() {
  std::vector<NamedCase> c;
  c.push_back({"random_100x80", random_csr({.n_rows = 100, .n_cols = 80, .seed = 3})});
  c.push_back({"holes", random_csr({.n_rows = 300,
                                    .n_cols = 500,
                                    .max_row_nnz = 20,
                                    .empty_row_fraction = 0.3,
                                    .empty_rows = {100, 180},
                                    .empty_cols = {50, 400},
                                    .seed = 5})});
  c.push_back({"wide_10x1000", random_csr({.n_rows = 10,
                                           .n_cols = 1000,
                                           .max_row_nnz = 300,
                                           .empty_row_fraction = 0.0,
                                           .seed = 7})});
  c.push_back(
      {"tall_2000x7", random_csr({.n_rows = 2000, .n_cols = 7, .max_row_nnz = 7, .seed = 9})});
  c.push_back(
      {"single_row",
       random_csr(
           {.n_rows = 1, .n_cols = 64, .max_row_nnz = 40, .empty_row_fraction = 0.0, .seed = 11})});
  c.push_back(
      {"single_col",
       random_csr(
           {.n_rows = 77, .n_cols = 1, .max_row_nnz = 1, .empty_row_fraction = 0.2, .seed = 13})});
  c.push_back({"dense_40x40", random_csr({.n_rows = 40,
                                          .n_cols = 40,
                                          .max_row_nnz = 40,
                                          .empty_row_fraction = 0.0,
                                          .seed = 17})});
  c.push_back({"kron10", kron(10)});
  c.push_back({"kron12", kron(12)});
  c.push_back(
      {"block_rows_37_to_237_of_400",
       random_csr(
           {.n_rows = 200, .n_cols = 150, .row_begin = 37, .n_rows_global = 400, .seed = 19})});
  c.push_back({"kron11_block", kron(11, 700, 1500)});
  c.push_back({"empty_0x0", empty_matrix(0, 0)});
  c.push_back({"empty_5x0", empty_matrix(5, 0)});
  c.push_back({"empty_0x5", empty_matrix(0, 5)});
  c.push_back({"no_nonzeros_7x9", empty_matrix(7, 9)});
  return c;
}

std::string method_name(TransposeMethod m) {
  switch (m) {
    case TransposeMethod::merge:
      return "merge";
    case TransposeMethod::scan:
      return "scan";
    case TransposeMethod::merge_trans_cpu:
      return "merge_trans_cpu";
  }
  return "?";
}

TEST(Transpose, EveryMethodMatchesTheReference) {
  for (const NamedCase& c : cases()) {
    const CsrMatrix want = reference_transpose(c.m);
    for (const int threads : {1, 2, 3}) {
      for (const auto method :
           {TransposeMethod::scan, TransposeMethod::merge_trans_cpu, TransposeMethod::merge}) {
        TransposeOptions o;
        o.method = method;
        o.threads = threads;
        test::expect_same_csr(
            transpose(c.m, o), want,
            c.name + " " + method_name(method) + " threads " + std::to_string(threads));
      }
    }
  }
}

TEST(Transpose, MergeEveryLeafCount) {
  std::vector<int> leaves;
  for (int l = 2; l <= 16; ++l) leaves.push_back(l);
  for (const int l : {17, 31, 33, 63, 64, 100, 255, 1024}) leaves.push_back(l);
  for (const NamedCase& c : cases()) {
    const CsrMatrix want = reference_transpose(c.m);
    for (const int threads : {1, 2}) {
      for (const int l : leaves) {
        TransposeOptions o;
        o.leaves = l;
        o.threads = threads;
        test::expect_same_csr(
            transpose(c.m, o), want,
            c.name + " leaves " + std::to_string(l) + " threads " + std::to_string(threads));
      }
    }
  }
}

TEST(Transpose, TwiceIsIdentity) {
  for (const NamedCase& c : cases()) {
    for (const auto method :
         {TransposeMethod::scan, TransposeMethod::merge_trans_cpu, TransposeMethod::merge}) {
      TransposeOptions o;
      o.method = method;
      o.threads = 2;
      o.leaves = 5;
      const CsrMatrix back = transpose(transpose(c.m, o), o);
      // A row block comes back as the whole matrix with only the block's rows filled.
      CsrMatrix want = c.m;
      want.row_begin = 0;
      want.n_rows = c.m.n_rows_global;
      want.row_ptr.assign(static_cast<std::size_t>(c.m.row_begin), 0);
      for (const std::int64_t p : c.m.row_ptr) want.row_ptr.push_back(p);
      want.row_ptr.resize(static_cast<std::size_t>(want.n_rows) + 1, c.m.nnz());
      test::expect_same_csr(back, want, c.name + " " + method_name(method));
    }
  }
}

TEST(Transpose, RowBlockKeepsGlobalIndices) {
  const CsrMatrix block =
      random_csr({.n_rows = 50, .n_cols = 30, .row_begin = 100, .n_rows_global = 180, .seed = 23});
  const CsrMatrix t = transpose(block, {.threads = 2});
  EXPECT_EQ(t.n_rows, 30);
  EXPECT_EQ(t.n_cols, 180);
  EXPECT_EQ(t.row_begin, 0);
  EXPECT_EQ(t.nnz(), block.nnz());
  for (const gidx_t r : t.col_idx) {
    EXPECT_GE(r, 100);
    EXPECT_LT(r, 150);
  }
}

TEST(Transpose, IntoReusesTheOutput) {
  const CsrMatrix a = kron(10);
  CsrMatrix out;
  transpose_into(a, out, {.threads = 2});
  const gidx_t* before = out.col_idx.data();
  transpose_into(a, out, {.method = TransposeMethod::scan, .threads = 2});
  EXPECT_EQ(out.col_idx.data(), before);
  test::expect_same_csr(out, reference_transpose(a), "reused");
  EXPECT_THROW(transpose_into(a, const_cast<CsrMatrix&>(a)), std::invalid_argument);
}

// The benchmark's Eigen baseline computes the same matrix.
TEST(Transpose, EigenBaselineAgrees) {
  using E = Eigen::SparseMatrix<double, Eigen::RowMajor, std::int64_t>;
  for (const NamedCase& c : cases()) {
    if (c.m.row_begin != 0) continue;
    E e(c.m.n_rows, c.m.n_cols);
    e.resizeNonZeros(c.m.nnz());
    std::copy(c.m.row_ptr.begin(), c.m.row_ptr.end(), e.outerIndexPtr());
    std::copy(c.m.col_idx.begin(), c.m.col_idx.end(), e.innerIndexPtr());
    std::copy(c.m.values.begin(), c.m.values.end(), e.valuePtr());
    const E t = e.transpose();
    const CsrMatrix want = reference_transpose(c.m);
    SCOPED_TRACE(c.name);
    ASSERT_EQ(t.rows(), want.n_rows);
    ASSERT_EQ(t.nonZeros(), want.nnz());
    EXPECT_TRUE(std::equal(want.row_ptr.begin(), want.row_ptr.end(), t.outerIndexPtr()));
    EXPECT_TRUE(std::equal(want.col_idx.begin(), want.col_idx.end(), t.innerIndexPtr()));
    EXPECT_TRUE(std::equal(want.values.begin(), want.values.end(), t.valuePtr()));
  }
}

// ---- bad input ---------------------------------------------------------------------------
void expect_invalid(const CsrMatrix& a, const TransposeOptions& o, const std::string& needle) {
  try {
    (void)transpose(a, o);
    ADD_FAILURE() << "no exception, expected one mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("netsparse::transpose: "));
    EXPECT_THAT(e.what(), ::testing::HasSubstr(needle));
  }
}

CsrMatrix small() {
  return random_csr(
      {.n_rows = 6, .n_cols = 8, .max_row_nnz = 4, .empty_row_fraction = 0.0, .seed = 29});
}

TEST(TransposeBadInput, Leaves) {
  expect_invalid(small(), {.method = TransposeMethod::merge, .leaves = 1},
                 "at least 2 leaves, got 1");
  expect_invalid(small(), {.method = TransposeMethod::merge, .leaves = -4},
                 "at least 2 leaves, got -4");
  EXPECT_NO_THROW((void)transpose(small(), {.method = TransposeMethod::scan, .leaves = 1}));
}

TEST(TransposeBadInput, Threads) {
  expect_invalid(small(), {.threads = -1}, "threads must be >= 0");
}

TEST(TransposeBadInput, UnsortedOrRepeatedColumns) {
  CsrMatrix a = small();
  std::swap(a.col_idx[a.row_ptr[2]], a.col_idx[a.row_ptr[2] + 1]);
  for (const auto method :
       {TransposeMethod::merge, TransposeMethod::scan, TransposeMethod::merge_trans_cpu})
    expect_invalid(a, {.method = method}, "row 2 (global 2): columns not sorted or repeated");
  CsrMatrix b = small();
  b.col_idx[b.row_ptr[3] + 1] = b.col_idx[b.row_ptr[3]];
  expect_invalid(b, {}, "row 3 (global 3): columns not sorted or repeated");
}

TEST(TransposeBadInput, ColumnOutOfRange) {
  CsrMatrix a = small();
  a.col_idx[a.row_ptr[5 + 1] - 1] = 8;
  expect_invalid(a, {}, "row 5 (global 5): column 8");
  a.col_idx[a.row_ptr[5 + 1] - 1] = -1;
  expect_invalid(a, {}, "outside [0, n_cols = 8)");
}

TEST(TransposeBadInput, RowPtr) {
  CsrMatrix a = small();
  a.row_ptr.pop_back();
  expect_invalid(a, {}, "row_ptr has 6 entries, expected n_rows + 1 = 7");
  CsrMatrix b = small();
  b.row_ptr[0] = 1;
  expect_invalid(b, {}, "row_ptr[0] = 1");
  CsrMatrix c = small();
  c.row_ptr[3] = c.row_ptr[2] - 1;
  expect_invalid(c, {}, "row_ptr decreases at row 2");
  CsrMatrix d = small();
  d.row_ptr.back() += 1;
  expect_invalid(d, {}, "but col_idx has");
  CsrMatrix e = small();
  e.values.pop_back();
  expect_invalid(e, {}, "values has");
}

TEST(TransposeBadInput, Shape) {
  CsrMatrix a = small();
  a.row_begin = 3;  // rows [3, 9) of a 6-row matrix
  expect_invalid(a, {}, "row block [3, 9) lies outside the matrix's 6 rows");
  CsrMatrix b = small();
  b.n_cols = -1;
  expect_invalid(b, {}, "negative size");
}

TEST(TransposeBadInput, UncheckedInputIsTheCallersPromise) {
  // check_input = false skips the pass; a well-formed matrix still transposes.
  test::expect_same_csr(transpose(small(), {.check_input = false}), reference_transpose(small()),
                        "unchecked");
}

}  // namespace
}  // namespace netsparse
