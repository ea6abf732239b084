#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "netsparse/coo.hpp"
#include "sparse_test_util.hpp"

namespace netsparse {
namespace {

using test::entries_of;
using test::EntryMap;
using test::expect_same_csr;
using test::expect_valid_csr;

TEST(CooToCsr, SortsColumnsAndSumsDuplicates) {
  const std::vector<Triplet> t = {
      {2, 3, 1.0f}, {0, 4, 2.0f}, {2, 0, 3.0f}, {0, 1, 4.0f}, {2, 3, 0.5f}, {0, 4, -2.0f},
  };
  const CsrMatrix m = coo_to_csr(t, 3, 5);
  expect_valid_csr(m);
  EXPECT_EQ(m.n_rows, 3);
  EXPECT_EQ(m.n_cols, 5);
  // (0,4) sums to an explicit zero, which is kept; row 1 is empty.
  const EntryMap expected = {{{0, 1}, 4.0f}, {{0, 4}, 0.0f}, {{2, 0}, 3.0f}, {{2, 3}, 1.5f}};
  EXPECT_EQ(entries_of(m), expected);
  EXPECT_EQ(m.row_ptr, (std::vector<std::int64_t>{0, 2, 2, 4}));
}

TEST(CooToCsr, BuildsARowBlockWithGlobalColumns) {
  const std::vector<Triplet> t = {{4, 9, 1.0f}, {2, 0, 2.0f}, {4, 1, 3.0f}};
  const CsrMatrix m = coo_to_csr(t, 10, 10, 2, 5);
  expect_valid_csr(m);
  EXPECT_EQ(m.row_begin, 2);
  EXPECT_EQ(m.n_rows, 3);
  EXPECT_EQ(m.n_rows_global, 10);
  const EntryMap expected = {{{2, 0}, 2.0f}, {{4, 1}, 3.0f}, {{4, 9}, 1.0f}};
  EXPECT_EQ(entries_of(m), expected);
}

TEST(CooToCsr, EmptyInputAndEmptyBlock) {
  const CsrMatrix m = coo_to_csr(std::span<const Triplet>(), 4, 4);
  expect_valid_csr(m);
  EXPECT_EQ(m.nnz(), 0);
  EXPECT_EQ(m.row_ptr.size(), 5u);
  const CsrMatrix none = coo_to_csr(std::span<const Triplet>(), 4, 4, 2, 2);
  expect_valid_csr(none);
  EXPECT_EQ(none.n_rows, 0);
}

TEST(CooToCsr, RejectsTripletsOutsideTheBlock) {
  const std::vector<Triplet> row_before = {{1, 0, 1.0f}};
  EXPECT_THROW(coo_to_csr(row_before, 10, 10, 2, 5), std::invalid_argument);
  const std::vector<Triplet> row_after = {{5, 0, 1.0f}};
  EXPECT_THROW(coo_to_csr(row_after, 10, 10, 2, 5), std::invalid_argument);
  const std::vector<Triplet> col_negative = {{3, -1, 1.0f}};
  EXPECT_THROW(coo_to_csr(col_negative, 10, 10, 2, 5), std::invalid_argument);
  const std::vector<Triplet> col_too_large = {{3, 10, 1.0f}};
  EXPECT_THROW(coo_to_csr(col_too_large, 10, 10, 2, 5), std::invalid_argument);
}

TEST(CooToCsr, RejectsABlockOutsideTheMatrix) {
  const std::vector<Triplet> none;
  EXPECT_THROW(coo_to_csr(none, 10, 10, -1, 5), std::invalid_argument);
  EXPECT_THROW(coo_to_csr(none, 10, 10, 6, 5), std::invalid_argument);
  EXPECT_THROW(coo_to_csr(none, 10, 10, 0, 11), std::invalid_argument);
}

std::vector<Triplet> random_triplets(std::int64_t count, gidx_t n_rows, gidx_t n_cols,
                                     bool exact_values, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<gidx_t> row(0, n_rows - 1);
  // Few columns per row, so duplicates are common.
  std::uniform_int_distribution<gidx_t> col(0, n_cols - 1);
  std::uniform_int_distribution<int> small(-8, 8);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::vector<Triplet> t(static_cast<size_t>(count));
  for (auto& e : t) {
    e = {row(rng), col(rng), exact_values ? 0.25f * static_cast<float>(small(rng)) : real(rng)};
  }
  return t;
}

// Large enough for the parallel path; quarter-integer values make every summation order exact,
// so a std::map accumulation is an exact reference.
TEST(CooToCsr, MatchesAMapReferenceOnRandomInput) {
  const gidx_t n_rows = 3000;
  const gidx_t n_cols = 40;
  const auto t = random_triplets(200000, n_rows, n_cols, true, 7);
  EntryMap reference;
  for (const auto& e : t) reference[{e.row, e.col}] += e.value;
  const CsrMatrix m = coo_to_csr(t, n_rows, n_cols);
  expect_valid_csr(m);
  EXPECT_EQ(entries_of(m), reference);
}

// Rounding-sensitive values: the result must not depend on the input order, the split into
// parts or the thread count.
TEST(CooToCsr, ResultIsIndependentOfOrderPartsAndThreads) {
  const gidx_t n_rows = 2000;
  const gidx_t n_cols = 30;
  auto t = random_triplets(150000, n_rows, n_cols, false, 11);
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const CsrMatrix serial = coo_to_csr(t, n_rows, n_cols);
  omp_set_num_threads(4);
  const CsrMatrix threaded = coo_to_csr(t, n_rows, n_cols);
  std::shuffle(t.begin(), t.end(), std::mt19937_64(3));
  const CsrMatrix shuffled = coo_to_csr(t, n_rows, n_cols);
  const std::span<const Triplet> all(t);
  const std::span<const Triplet> parts[3] = {all.first(1000), all.subspan(1000, 70000),
                                             all.subspan(71000)};
  const CsrMatrix split =
      coo_to_csr(std::span<const std::span<const Triplet>>(parts), n_rows, n_cols, 0, n_rows);
  omp_set_num_threads(saved_threads);
  expect_valid_csr(serial);
  expect_same_csr(serial, threaded);
  expect_same_csr(serial, shuffled);
  expect_same_csr(serial, split);
}

// Columns beyond 2^32 take a different internal path; both must give the same matrix.
TEST(CooToCsr, HugeColumnCountGivesTheSameStructure) {
  const gidx_t n_rows = 500;
  auto t = random_triplets(60000, n_rows, 25, false, 5);
  const CsrMatrix narrow = coo_to_csr(t, n_rows, 25);
  const gidx_t stride = gidx_t{1} << 35;  // spread the columns far beyond 2^32
  for (auto& e : t) e.col *= stride;
  const CsrMatrix wide = coo_to_csr(t, n_rows, 25 * stride);
  expect_valid_csr(wide);
  EXPECT_EQ(wide.row_ptr, narrow.row_ptr);
  EXPECT_EQ(wide.values, narrow.values);
  ASSERT_EQ(wide.col_idx.size(), narrow.col_idx.size());
  for (size_t k = 0; k < wide.col_idx.size(); ++k) {
    ASSERT_EQ(wide.col_idx[k], narrow.col_idx[k] * stride);
  }
}

// Very sparse blocks with many threads take the atomic placement path.
TEST(CooToCsr, ManyThreadsOnAVerySparseBlock) {
  const gidx_t n_rows = 2000000;  // 8 threads x 2M counters > entries: atomics
  const auto t = random_triplets(40000, n_rows, 50, true, 23);
  EntryMap reference;
  for (const auto& e : t) reference[{e.row, e.col}] += e.value;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(8);
  const CsrMatrix m = coo_to_csr(t, n_rows, 50);
  omp_set_num_threads(saved_threads);
  expect_valid_csr(m);
  EXPECT_EQ(entries_of(m), reference);
}

}  // namespace
}  // namespace netsparse
