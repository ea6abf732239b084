#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "netsparse/generators.hpp"
#include "netsparse/partition.hpp"

namespace netsparse {
namespace {

// The part owning row, by definition: the non-empty part whose range holds it.
int owner_by_scan(const RowPartition& part, gidx_t row) {
  for (int p = 0; p < part.nparts(); ++p) {
    if (part.begin(p) <= row && row < part.end(p)) return p;
  }
  return -1;
}

void expect_consistent(const RowPartition& part, gidx_t n_rows, int nparts) {
  ASSERT_EQ(part.nparts(), nparts);
  ASSERT_EQ(part.n_rows(), n_rows);
  ASSERT_EQ(part.begin(0), 0);
  ASSERT_EQ(part.end(nparts - 1), n_rows);
  gidx_t total = 0;
  for (int p = 0; p < nparts; ++p) {
    ASSERT_LE(part.begin(p), part.end(p));
    ASSERT_EQ(part.size(p), part.end(p) - part.begin(p));
    if (p > 0) {
      ASSERT_EQ(part.begin(p), part.end(p - 1));
    }
    total += part.size(p);
  }
  ASSERT_EQ(total, n_rows);
  for (gidx_t r = 0; r < n_rows; ++r) ASSERT_EQ(part.owner(r), owner_by_scan(part, r)) << r;
}

TEST(RowPartition, EqualBlocksSizesDifferByAtMostOne) {
  const RowPartition part = RowPartition::equal_blocks(10, 3);
  EXPECT_TRUE(part.is_equal_blocks());
  expect_consistent(part, 10, 3);
  EXPECT_EQ(part.size(0), 4);
  EXPECT_EQ(part.size(1), 3);
  EXPECT_EQ(part.size(2), 3);
  EXPECT_EQ(part.owner(3), 0);
  EXPECT_EQ(part.owner(4), 1);
  EXPECT_EQ(part.owner(9), 2);
}

TEST(RowPartition, FewerRowsThanPartsLeavesEmptyParts) {
  const RowPartition part = RowPartition::equal_blocks(3, 5);
  expect_consistent(part, 3, 5);
  EXPECT_EQ(part.size(3), 0);
  EXPECT_EQ(part.size(4), 0);
  EXPECT_EQ(part.owner(2), 2);
  const RowPartition none = RowPartition::equal_blocks(0, 4);
  expect_consistent(none, 0, 4);
  EXPECT_THROW((void)none.owner(0), std::out_of_range);
}

TEST(RowPartition, OwnerMatchesALinearScanForRandomShapes) {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<gidx_t> rows(0, 700);
  std::uniform_int_distribution<int> parts(1, 40);
  for (int trial = 0; trial < 200; ++trial) {
    const gidx_t n = rows(rng);
    const int p = parts(rng);
    expect_consistent(RowPartition::equal_blocks(n, p), n, p);
    // A random skewed row_ptr for the nnz-balanced variant.
    std::vector<std::int64_t> row_ptr(static_cast<size_t>(n) + 1, 0);
    std::geometric_distribution<int> degree(0.05);
    for (gidx_t r = 0; r < n; ++r) row_ptr[r + 1] = row_ptr[r] + degree(rng);
    const RowPartition balanced = RowPartition::balanced_by_nnz(row_ptr, p);
    EXPECT_FALSE(balanced.is_equal_blocks() && row_ptr.back() > 0);
    expect_consistent(balanced, n, p);
  }
}

TEST(RowPartition, OutOfRangeRowsThrow) {
  const RowPartition part = RowPartition::equal_blocks(10, 3);
  EXPECT_THROW((void)part.owner(-1), std::out_of_range);
  EXPECT_THROW((void)part.owner(10), std::out_of_range);
  const RowPartition offsets = RowPartition::from_offsets({0, 5, 5, 10});
  EXPECT_THROW((void)offsets.owner(10), std::out_of_range);
  EXPECT_EQ(offsets.owner(5), 2);  // part 1 is empty
}

// Largest |nnz(part) - nnz / P| over the parts.
double worst_imbalance(const RowPartition& part, const std::vector<std::int64_t>& row_ptr) {
  const double ideal = static_cast<double>(row_ptr.back()) / part.nparts();
  double worst = 0;
  for (int q = 0; q < part.nparts(); ++q) {
    const auto nnz = static_cast<double>(row_ptr[part.end(q)] - row_ptr[part.begin(q)]);
    worst = std::max(worst, std::abs(nnz - ideal));
  }
  return worst;
}

std::int64_t max_row_length(const std::vector<std::int64_t>& row_ptr) {
  std::int64_t max_row = 0;
  for (size_t r = 0; r + 1 < row_ptr.size(); ++r) {
    max_row = std::max(max_row, row_ptr[r + 1] - row_ptr[r]);
  }
  return max_row;
}

TEST(RowPartition, NnzBalancedPartsAreWithinOneRowOfTheIdeal) {
  KroneckerParams kp;
  kp.scale = 12;
  const CsrMatrix m = generate_kronecker(kp, 0, gidx_t{1} << 12);
  const auto max_row = static_cast<double>(max_row_length(m.row_ptr));
  for (int p : {1, 2, 7, 16, 64}) {
    const RowPartition part = RowPartition::balanced_by_nnz(m, p);
    expect_consistent(part, m.n_rows, p);
    EXPECT_LE(worst_imbalance(part, m.row_ptr), max_row) << p << " parts";
  }
}

TEST(RowPartition, NnzBalancedBeatsEqualBlocksOnGrowingRows) {
  // Row r has r nonzeros: equal blocks put most of the work in the last parts.
  std::vector<std::int64_t> row_ptr(1001, 0);
  for (size_t r = 0; r + 1 < row_ptr.size(); ++r) {
    row_ptr[r + 1] = row_ptr[r] + static_cast<std::int64_t>(r);
  }
  const RowPartition balanced = RowPartition::balanced_by_nnz(row_ptr, 8);
  expect_consistent(balanced, 1000, 8);
  EXPECT_LE(worst_imbalance(balanced, row_ptr), static_cast<double>(max_row_length(row_ptr)));
  const RowPartition equal = RowPartition::equal_blocks(1000, 8);
  EXPECT_GT(worst_imbalance(equal, row_ptr), 20.0 * worst_imbalance(balanced, row_ptr));
  // The first balanced part takes many more (short) rows than the last.
  EXPECT_GT(balanced.size(0), 4 * balanced.size(7));
}

TEST(RowPartition, NnzBalancedWithoutNonzerosFallsBackToEqualBlocks) {
  const std::vector<std::int64_t> row_ptr(8, 0);
  const RowPartition part = RowPartition::balanced_by_nnz(row_ptr, 3);
  expect_consistent(part, 7, 3);
  EXPECT_EQ(part.size(0), 3);
}

TEST(RowPartition, RejectsBadInput) {
  EXPECT_THROW(RowPartition::equal_blocks(10, 0), std::invalid_argument);
  EXPECT_THROW(RowPartition::equal_blocks(-1, 2), std::invalid_argument);
  EXPECT_THROW(RowPartition::from_offsets({0}), std::invalid_argument);
  EXPECT_THROW(RowPartition::from_offsets({1, 5}), std::invalid_argument);
  EXPECT_THROW(RowPartition::from_offsets({0, 5, 3}), std::invalid_argument);
  const std::vector<std::int64_t> decreasing = {0, 4, 2};
  EXPECT_THROW(RowPartition::balanced_by_nnz(decreasing, 2), std::invalid_argument);
  CsrMatrix block;
  block.n_rows_global = 10;
  block.row_begin = 2;
  block.n_rows = 3;
  block.row_ptr = {0, 0, 0, 0};
  EXPECT_THROW(RowPartition::balanced_by_nnz(block, 2), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse
