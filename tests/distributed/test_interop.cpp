// Bringing your own data (interop.hpp, eigen.hpp): a DistMatrix built from CSR arrays or an
// Eigen::SparseMatrix, whole or by row blocks, equals the one the distributed loaders build from
// the same matrix; bad input fails on every rank with the same documented message; dense
// operands survive scatter / gather / allgather round trips over uneven partitions.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Eigen/SparseCore>
#include <numeric>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/eigen.hpp"
#include "netsparse/interop.hpp"
#include "netsparse/matrix_market.hpp"

namespace netsparse {
namespace {

// The distributed tests' helpers (dist_test_util.hpp).
using namespace test;

const char* const kFiles[] = {"distributed/small_symmetric.mtx", "distributed/rect_general.mtx",
                              "distributed/pattern_square.mtx", "mm/general_real.mtx",
                              "mm/empty_matrix.mtx"};
const PartitionKind kKinds[] = {PartitionKind::equal_rows, PartitionKind::balanced_nnz};

// Calls check(whole, want, opt, what) for every test file and partition kind: the whole matrix,
// what the distributed reader makes of it (every import must equal that), import options on
// that partition and a label for the failures.
template <class Check>
void for_each_import_case(Check&& check) {
  for (const char* f : kFiles) {
    const CsrMatrix whole = read_matrix_market(data_path(f));
    for (PartitionKind kind : kKinds) {
      const DistMatrix want = read_distributed_matrix_market(MPI_COMM_WORLD, data_path(f), kind);
      CsrImportOptions opt;
      opt.partition = kind;
      check(whole, want, opt, std::string(f) + " " + to_string(kind));
    }
  }
}

// values_from_float: `got` was built from float values, so its (double) values are `want`'s
// rounded to float.
void expect_same(const DistMatrix& got, const DistMatrix& want, const std::string& what,
                 bool values_from_float = false) {
  EXPECT_EQ(got.rows().offsets(), want.rows().offsets()) << what;
  EXPECT_EQ(got.cols().offsets(), want.cols().offsets()) << what;
  EXPECT_EQ(got.nnz_global(), want.nnz_global()) << what;
  if (!values_from_float) {
    expect_same_csr(got.local(), want.local(), what);
    return;
  }
  CsrMatrix rounded = want.local();
  for (double& v : rounded.values) v = static_cast<float>(v);
  expect_same_csr(got.local(), rounded, what);
}

template <class T, class U>
std::vector<T> converted(const std::vector<U>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Runs f, which must throw std::invalid_argument with exactly `message` on every rank.
template <class F>
void expect_invalid_everywhere(F&& f, const std::string& message) {
  EXPECT_EQ(invalid_argument_message(f), message) << "rank " << world_rank();
}

// ---- construction from CSR arrays ----------------------------------------------------------

TEST(Interop, GlobalCsrEqualsTheDistributedReader) {
  for_each_import_case([&](const CsrMatrix& whole, const DistMatrix& want, CsrImportOptions opt,
                           const std::string& what) {
    // Native types, read in place.
    expect_same(from_global_csr(MPI_COMM_WORLD, whole.n_rows, whole.n_cols,
                                {whole.row_ptr, whole.col_idx, whole.values}, opt),
                want, what + " int64/float");
    // 32-bit indices and double values.
    const auto rp = converted<std::int32_t>(whole.row_ptr);
    const auto ci = converted<std::int32_t>(whole.col_idx);
    const auto v = converted<double>(whole.values);
    opt.columns = ColumnOrder::require_sorted;
    expect_same(from_global_csr(MPI_COMM_WORLD, whole.n_rows, whole.n_cols, {rp, ci, v}, opt), want,
                what + " int32/double");
  });
}

TEST(Interop, LocalCsrEqualsTheLoader) {
  for (const char* f : kFiles) {
    for (PartitionKind kind : kKinds) {
      const DistMatrix want = load_distributed_matrix(MPI_COMM_WORLD, data_path(f), kind);
      const CsrMatrix& mine = want.local();
      const std::string what = std::string(f) + " " + to_string(kind);
      // Blocks in rank order: the offsets come from the row counts.
      expect_same(
          from_local_csr(MPI_COMM_WORLD, want.n_cols(), {mine.row_ptr, mine.col_idx, mine.values}),
          want, what + " rank order");
      // Explicit offsets, 32-bit row pointer.
      const auto rp = converted<std::int32_t>(mine.row_ptr);
      expect_same(from_local_csr(MPI_COMM_WORLD, want.rows().offsets(), want.n_cols(),
                                 {rp, mine.col_idx, mine.values}),
                  want, what + " explicit offsets");
    }
  }
  // A generator's matrix too (uneven blocks with balanced_nnz).
  const DistMatrix kron =
      load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:7", PartitionKind::balanced_nnz);
  const CsrMatrix& mine = kron.local();
  expect_same(
      from_local_csr(MPI_COMM_WORLD, kron.n_cols(), {mine.row_ptr, mine.col_idx, mine.values}),
      kron, "kron:7 balanced");
}

TEST(Interop, UnsortedRowsAreSortedAndRepeatsSummed) {
  // 3 x 4: row 0 unsorted with a repeat, row 1 empty, row 2 sorted.
  const std::vector<std::int64_t> rp = {0, 4, 4, 6};
  const std::vector<std::int64_t> ci = {3, 0, 3, 1, 0, 2};
  const std::vector<float> v = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f, 32.0f};
  const DistMatrix a = from_global_csr(MPI_COMM_WORLD, 3, 4, {rp, ci, v});
  // The same matrix, clean.
  const std::vector<std::int64_t> rp2 = {0, 3, 3, 5};
  const std::vector<std::int64_t> ci2 = {0, 1, 3, 0, 2};
  const std::vector<float> v2 = {2.0f, 8.0f, 5.0f, 16.0f, 32.0f};
  const DistMatrix b = from_global_csr(MPI_COMM_WORLD, 3, 4, {rp2, ci2, v2});
  expect_same(a, b, "sorted and summed");
  EXPECT_EQ(a.nnz_global(), 5);

  CsrImportOptions strict;
  strict.columns = ColumnOrder::require_sorted;
  expect_invalid_everywhere(
      [&] {
        (void)from_global_csr(MPI_COMM_WORLD, 3, 4, {rp, ci, v}, strict);
      },
      "from_global_csr: row 0 is not sorted: col_idx[1] = 0 follows 3; "
      "ColumnOrder::require_sorted needs strictly increasing columns (sort_and_sum would sort "
      "them)");
  const std::vector<std::int64_t> ci3 = {0, 1, 1, 3, 0, 2};
  expect_invalid_everywhere(
      [&] {
        (void)from_global_csr(MPI_COMM_WORLD, 3, 4, {rp, ci3, v}, strict);
      },
      "from_global_csr: row 0 repeats column 1 (col_idx[1] and col_idx[2]); "
      "ColumnOrder::require_sorted refuses repeats (sort_and_sum would add them)");
}

TEST(Interop, BadGlobalCsrFailsEverywhereWithTheSameMessage) {
  const int p = world_size();
  // 4 x 6 with 6 entries.
  std::vector<std::int64_t> rp = {0, 2, 3, 5, 6};
  std::vector<std::int64_t> ci = {0, 5, 1, 2, 4, 3};
  std::vector<float> v(6, 1.0f);
  const auto call = [&](gidx_t n_rows, gidx_t n_cols, const CsrImportOptions& opt = {}) {
    (void)from_global_csr(MPI_COMM_WORLD, n_rows, n_cols, {rp, ci, v}, opt);
  };
  ASSERT_NO_THROW(call(4, 6));
  // The 4 x 6 call with other arrays.
  const auto call_with = [](const std::vector<std::int64_t>& row_ptr,
                            const std::vector<std::int64_t>& col_idx,
                            const std::vector<float>& values) {
    (void)from_global_csr(MPI_COMM_WORLD, 4, 6, {row_ptr, col_idx, values});
  };

  auto bad_ci = ci;
  bad_ci[4] = 6;
  expect_invalid_everywhere([&] { call_with(rp, bad_ci, v); },
                            "from_global_csr: row 2: col_idx[4] = 6 is out of range [0, 6)");
  bad_ci[4] = -1;
  expect_invalid_everywhere([&] { call_with(rp, bad_ci, v); },
                            "from_global_csr: row 2: col_idx[4] = -1 is out of range [0, 6)");
  expect_invalid_everywhere([&] { call(5, 6); },
                            "from_global_csr: row_ptr has 5 entries, 5 rows need 6");
  expect_invalid_everywhere([&] { call(-1, 6); }, "from_global_csr: the shape -1 x 6 is negative");
  auto short_v = v;
  short_v.pop_back();
  expect_invalid_everywhere([&] { call_with(rp, ci, short_v); },
                            "from_global_csr: col_idx has 6 entries but values has 5");
  auto one_based = rp;
  for (auto& x : one_based) ++x;
  expect_invalid_everywhere(
      [&] { call_with(one_based, ci, v); },
      "from_global_csr: row_ptr[0] is 1, it must be 0 (0-based CSR; convert 1-based arrays "
      "first)");
  auto decreasing = rp;
  decreasing[2] = 1;
  expect_invalid_everywhere(
      [&] { call_with(decreasing, ci, v); },
      "from_global_csr: row_ptr decreases at row 1 (row_ptr[1] = 2, row_ptr[2] = 1)");
  auto short_end = rp;
  short_end[4] = 5;
  expect_invalid_everywhere(
      [&] { call_with(short_end, ci, v); },
      "from_global_csr: row_ptr[4] is 5 but col_idx and values have 6 entries");
  // Ranks that disagree on the shape: every rank reports the range.
  if (p > 1) {
    const gidx_t n_cols = world_rank() == p - 1 ? 7 : 6;
    expect_invalid_everywhere([&] { call(4, n_cols); },
                              "from_global_csr: the ranks disagree on n_cols (from 6 to 7 over "
                              "the ranks); every rank must pass the same whole matrix");
  }
  CsrImportOptions opt;
  opt.col_offsets.assign(static_cast<std::size_t>(p) + 1, 0);
  opt.col_offsets.back() = 5;
  expect_invalid_everywhere([&] { call(4, 6, opt); },
                            "from_global_csr: col_offsets[nranks] is 5, it must be n_cols = 6");
}

TEST(Interop, BadLocalCsrFailsEverywhereWithTheSameMessage) {
  const int p = world_size(), r = world_rank();
  // Rank q holds q + 1 rows of a 5-column matrix, one entry per row at column q.
  const auto rows_of = [](int q) { return static_cast<gidx_t>(q + 1); };
  std::vector<std::int64_t> rp(static_cast<std::size_t>(rows_of(r)) + 1);
  std::iota(rp.begin(), rp.end(), 0);
  std::vector<std::int64_t> ci(static_cast<std::size_t>(rows_of(r)), r % 5);
  std::vector<float> v(ci.size(), 1.0f);
  std::vector<gidx_t> offsets = {0};
  for (int q = 0; q < p; ++q) offsets.push_back(offsets.back() + rows_of(q));
  const DistMatrix good = from_local_csr(MPI_COMM_WORLD, 5, {rp, ci, v});
  EXPECT_EQ(good.rows().offsets(), offsets);
  EXPECT_EQ(good.nnz_global(), offsets.back());
  expect_same(from_local_csr(MPI_COMM_WORLD, offsets, 5, {rp, ci, v}), good, "explicit offsets");

  // Only the last rank's block is bad: every rank reports it.
  auto bad_ci = ci;
  if (r == p - 1) bad_ci.back() = 9;
  const std::string last = std::to_string(p - 1);
  const std::string last_row = std::to_string(rows_of(p - 1) - 1);
  expect_invalid_everywhere(
      [&] {
        (void)from_local_csr(MPI_COMM_WORLD, 5, {rp, bad_ci, v});
      },
      "from_local_csr: rank " + last + ", local row " + last_row + " (global row " +
          std::to_string(offsets.back() - 1) + "): col_idx[" + last_row +
          "] = 9 is out of range [0, 5)");
  // The block does not match the offsets on the last rank.
  std::vector<gidx_t> wrong = offsets;
  wrong.back() += 1;
  expect_invalid_everywhere(
      [&] {
        (void)from_local_csr(MPI_COMM_WORLD, wrong, 5, {rp, ci, v});
      },
      "from_local_csr (rank " + last + "): local_rows has " + std::to_string(rows_of(p - 1)) +
          " rows, row_offsets give this rank " + std::to_string(rows_of(p - 1) + 1) + " (rows [" +
          std::to_string(offsets[p - 1]) + ", " + std::to_string(wrong.back()) + "))");
  expect_invalid_everywhere(
      [&] {
        (void)from_local_csr(MPI_COMM_WORLD, std::vector<gidx_t>{0}, 5, {rp, ci, v});
      },
      "from_local_csr: row_offsets has 1 entries, it needs nranks + 1 = " + std::to_string(p + 1));
  if (p > 1) {
    // The ranks disagree on the offsets or on n_cols.
    std::vector<gidx_t> mine = offsets;
    if (r == 0) mine[1] += 1;
    expect_invalid_everywhere(
        [&] {
          (void)from_local_csr(MPI_COMM_WORLD, mine, 5, {rp, ci, v});
        },
        "from_local_csr: the ranks disagree on row_offsets[1] (from 1 to 2 over the ranks)");
    expect_invalid_everywhere(
        [&] {
          (void)from_local_csr(MPI_COMM_WORLD, r == 1 ? 6 : 5, {rp, ci, v});
        },
        "from_local_csr: the ranks disagree on n_cols (from 5 to 6 over the ranks)");
  }
  // A structural problem on rank 0 only.
  auto bad_rp = rp;
  if (r == 0) bad_rp[0] = 1;
  expect_invalid_everywhere(
      [&] {
        (void)from_local_csr(MPI_COMM_WORLD, 5, {bad_rp, ci, v});
      },
      "from_local_csr (rank 0): row_ptr[0] is 1, it must be 0 (0-based "
      "CSR; convert 1-based arrays first)");
}

TEST(Interop, ExplicitColumnPartitionAndRanksWithoutRows) {
  const int p = world_size(), r = world_rank();
  const CsrMatrix whole = read_matrix_market(data_path("distributed/rect_general.mtx"));
  // Every column on the last rank.
  CsrImportOptions opt;
  opt.col_offsets.assign(static_cast<std::size_t>(p) + 1, 0);
  opt.col_offsets.back() = whole.n_cols;
  opt.name = "rect";
  const DistMatrix a = from_global_csr(MPI_COMM_WORLD, whole.n_rows, whole.n_cols,
                                       {whole.row_ptr, whole.col_idx, whole.values}, opt);
  EXPECT_EQ(a.cols().offsets(), opt.col_offsets);
  EXPECT_EQ(a.name(), "rect");
  EXPECT_EQ(a.nnz_global(), whole.nnz());
  // Rows split at n / 2 between ranks 0 and 1; ranks 2.. have none and pass empty arrays.
  std::vector<gidx_t> offsets(static_cast<std::size_t>(p) + 1, whole.n_rows);
  offsets[0] = 0;
  if (p > 1) offsets[1] = whole.n_rows / 2;
  for (int q = 2; q < p; ++q) offsets[q] = whole.n_rows;
  const CsrMatrix mine = test::row_block(whole, offsets[r], offsets[r + 1]);
  const std::vector<std::int64_t> none_i;
  const std::vector<float> none_v;
  const bool empty = mine.n_rows == 0;
  const DistMatrix b =
      empty ? from_local_csr(MPI_COMM_WORLD, offsets, whole.n_cols, {none_i, none_i, none_v}, opt)
            : from_local_csr(MPI_COMM_WORLD, offsets, whole.n_cols,
                             {mine.row_ptr, mine.col_idx, mine.values}, opt);
  EXPECT_EQ(b.rows().offsets(), offsets);
  EXPECT_EQ(b.cols().offsets(), opt.col_offsets);
  EXPECT_EQ(b.nnz_global(), whole.nnz());
  expect_same_csr(b.local(), mine, "local block");
  // SpMV on it equals the whole matrix's product.
  DistOptions su;
  su.mode = CommMode::su;
  DistKernel spmv(b, KernelKind::spmv, 1, su);
  std::vector<float> x_all(static_cast<std::size_t>(whole.n_cols));
  for (gidx_t c = 0; c < whole.n_cols; ++c) x_all[c] = test::operand_value(5, c, 0);
  const std::vector<float> x = scatter_dense(MPI_COMM_WORLD, b.cols(), 1, x_all);
  std::vector<float> y(static_cast<std::size_t>(b.rows().size(r)));
  spmv.spmv(x, y);
  const std::vector<double> want = test::reference_spmm(mine, 1, 5);
  EXPECT_LE(test::max_relative_error(y, want), 1e-5);
}

// ---- construction from Eigen -----------------------------------------------------------------

template <class Scalar, int Options, class Index>
Eigen::SparseMatrix<Scalar, Options, Index> to_eigen(const CsrMatrix& m) {
  std::vector<Eigen::Triplet<Scalar, Index>> t;
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    for (std::int64_t i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i) {
      t.emplace_back(static_cast<Index>(r), static_cast<Index>(m.col_idx[i]),
                     static_cast<Scalar>(m.values[i]));
    }
  }
  Eigen::SparseMatrix<Scalar, Options, Index> e(static_cast<Index>(m.n_rows),
                                                static_cast<Index>(m.n_cols));
  e.setFromTriplets(t.begin(), t.end());
  return e;
}

TEST(Interop, EigenGlobalAndLocalEqualTheLoader) {
  for_each_import_case([&](const CsrMatrix& whole, const DistMatrix& want, CsrImportOptions opt,
                           const std::string& what) {
    expect_same(
        from_global_eigen(MPI_COMM_WORLD, to_eigen<float, Eigen::RowMajor, int>(whole), opt), want,
        what + " RowMajor float int", true);
    expect_same(from_global_eigen(MPI_COMM_WORLD,
                                  to_eigen<double, Eigen::ColMajor, std::int64_t>(whole), opt),
                want, what + " ColMajor double int64");
    // Uncompressed mode (room reserved in every row).
    auto loose = to_eigen<float, Eigen::RowMajor, int>(whole);
    loose.reserve(Eigen::VectorXi::Constant(loose.outerSize(), 2));
    ASSERT_FALSE(loose.isCompressed() && loose.outerSize() > 0);
    expect_same(from_global_eigen(MPI_COMM_WORLD, loose, opt), want, what + " uncompressed", true);

    // This rank's rows only.
    const CsrMatrix& mine = want.local();
    expect_same(from_local_eigen(MPI_COMM_WORLD, to_eigen<float, Eigen::RowMajor, int>(mine)), want,
                what + " local RowMajor", true);
    expect_same(from_local_eigen(MPI_COMM_WORLD, want.rows().offsets(),
                                 to_eigen<float, Eigen::ColMajor, int>(mine)),
                want, what + " local ColMajor explicit offsets", true);
  });
}

TEST(Interop, EigenMatrixWithAnOutOfRangeShapeIsRefused) {
  // A local block whose column count differs on rank 1 (on one rank there is nothing to
  // disagree with: the same call must then succeed with that rank's shape).
  const int r = world_rank();
  Eigen::SparseMatrix<float, Eigen::RowMajor> m(2, r == 1 ? 4 : 3);
  m.insert(0, 0) = 1.0f;
  m.makeCompressed();
  if (world_size() == 1) {
    const DistMatrix a = from_local_eigen(MPI_COMM_WORLD, m);
    EXPECT_EQ(a.n_cols(), 3);
    EXPECT_EQ(a.nnz_global(), 1);
    return;
  }
  expect_invalid_everywhere([&] { (void)from_local_eigen(MPI_COMM_WORLD, m); },
                            "from_local_csr: the ranks disagree on n_cols (from 3 to 4 over the "
                            "ranks)");
}

// ---- dense operands --------------------------------------------------------------------------

std::vector<RowPartition> uneven_partitions(gidx_t n) {
  const int p = world_size();
  std::vector<RowPartition> parts = {RowPartition::equal_blocks(n, p)};
  // Empty parts at the front and the end, the rest uneven.
  std::vector<gidx_t> off(static_cast<std::size_t>(p) + 1, 0);
  for (int q = 1; q < p; ++q) off[q] = std::min<gidx_t>(n, (n * q * q) / (p * p));
  off[p] = n;
  parts.push_back(RowPartition::from_offsets(off));
  if (p > 1) {
    std::vector<gidx_t> front(static_cast<std::size_t>(p) + 1, n);
    front[0] = 0;
    parts.push_back(RowPartition::from_offsets(front));  // all rows on rank 0
  }
  return parts;
}

template <class T>
void round_trip(const RowPartition& part, int k, int root) {
  const int r = world_rank();
  const gidx_t n = part.n_rows();
  std::vector<T> global;
  if (r == root) {
    global.resize(static_cast<std::size_t>(n) * k);
    for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<T>(i) * T(0.5) - 3;
  }
  const std::vector<T> local =
      scatter_dense(MPI_COMM_WORLD, part, k, std::span<const T>(global), root);
  ASSERT_EQ(local.size(), static_cast<std::size_t>(part.size(r)) * k);
  for (gidx_t i = 0; i < part.size(r); ++i) {
    for (int j = 0; j < k; ++j) {
      const auto g = static_cast<std::size_t>((part.begin(r) + i) * k + j);
      ASSERT_EQ(local[static_cast<std::size_t>(i * k + j)], static_cast<T>(g) * T(0.5) - 3);
    }
  }
  const std::vector<T> back =
      gather_dense(MPI_COMM_WORLD, part, k, std::span<const T>(local), root);
  if (r == root) {
    EXPECT_EQ(back, global);
  } else {
    EXPECT_TRUE(back.empty());
  }
  std::vector<T> all = allgather_dense(MPI_COMM_WORLD, part, k, std::span<const T>(local));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(n) * k);
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<T>(i) * T(0.5) - 3);
  // Into caller buffers.
  std::vector<T> local2(local.size(), T(-99));
  scatter_dense(MPI_COMM_WORLD, part, k, std::span<const T>(global), std::span<T>(local2), root);
  EXPECT_EQ(local2, local);
  std::vector<T> global2(r == root ? global.size() : 0, T(-99));
  gather_dense(MPI_COMM_WORLD, part, k, std::span<const T>(local2), std::span<T>(global2), root);
  if (r == root) {
    EXPECT_EQ(global2, global);
  }
}

TEST(Interop, DenseScatterGatherRoundTrips) {
  const int p = world_size();
  for (gidx_t n : {gidx_t{0}, gidx_t{1}, gidx_t{10}, gidx_t{37}}) {
    for (const RowPartition& part : uneven_partitions(n)) {
      for (int k : {1, 16}) {
        for (int root : {0, p - 1}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " root=" + std::to_string(root));
          round_trip<float>(part, k, root);
          round_trip<double>(part, k, root);
        }
      }
    }
  }
}

TEST(Interop, DenseArgumentsAreCheckedEverywhere) {
  const int p = world_size(), r = world_rank();
  const RowPartition part = RowPartition::equal_blocks(10, p);
  std::vector<float> global(r == 0 ? 10 * 4 - 1 : 0);
  expect_invalid_everywhere(
      [&] { (void)scatter_dense(MPI_COMM_WORLD, part, 4, global); },
      "scatter_dense: the global matrix on the root has 39 elements, 10 rows x k = 4 need 40");
  expect_invalid_everywhere([&] { (void)scatter_dense(MPI_COMM_WORLD, part, 0, global); },
                            "scatter_dense: k must be >= 1, got 0");
  expect_invalid_everywhere([&] { (void)scatter_dense(MPI_COMM_WORLD, part, 4, global, p); },
                            "scatter_dense: root " + std::to_string(p) +
                                " is not a rank of the communicator (0.." + std::to_string(p - 1) +
                                ")");
  const RowPartition wrong = RowPartition::equal_blocks(10, p + 1);
  expect_invalid_everywhere(
      [&] { (void)allgather_dense(MPI_COMM_WORLD, wrong, 1, std::vector<float>{}); },
      "allgather_dense: the partition has " + std::to_string(p + 1) + " parts, the communicator " +
          std::to_string(p) + " ranks");
  std::vector<float> block(static_cast<std::size_t>(part.size(r)) * 2 + (r == p - 1 ? 1 : 0));
  expect_invalid_everywhere([&] { (void)gather_dense(MPI_COMM_WORLD, part, 2, block); },
                            "gather_dense: rank " + std::to_string(p - 1) + "'s block has " +
                                std::to_string(part.size(p - 1) * 2 + 1) + " elements, its " +
                                std::to_string(part.size(p - 1)) + " rows (" +
                                std::to_string(part.begin(p - 1)) + ".." +
                                std::to_string(part.end(p - 1)) + ") x k = 2 need " +
                                std::to_string(part.size(p - 1) * 2));
  if (p > 1) {
    expect_invalid_everywhere(
        [&] { (void)allgather_dense(MPI_COMM_WORLD, part, r == 0 ? 2 : 3, std::vector<float>{}); },
        "allgather_dense: the ranks disagree on k (from 2 to 3 over the ranks)");
  }
}

// ---- the whole path: Eigen in, SpMM, C out -------------------------------------------------

TEST(Interop, SpmmOfAnEigenMatrixEqualsEigensProduct) {
  const CsrMatrix whole = read_matrix_market(data_path("distributed/rect_general.mtx"));
  const auto ea = to_eigen<float, Eigen::RowMajor, int>(whole);
  constexpr int k = 16;
  using Dense = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Dense eb(ea.cols(), k);
  for (Eigen::Index i = 0; i < eb.rows(); ++i) {
    for (int j = 0; j < k; ++j) eb(i, j) = test::operand_value(3, i, j);
  }
  const DistMatrix a = from_global_eigen(MPI_COMM_WORLD, ea);
  for (CommMode mode : {CommMode::netsparse, CommMode::su, CommMode::inspector_executor}) {
    DistOptions opt;
    opt.mode = mode;
    DistKernel spmm(a, KernelKind::spmm, k, opt);
    const std::vector<float> b =
        scatter_dense(MPI_COMM_WORLD, a.cols(), k,
                      std::span<const float>(eb.data(), world_rank() == 0 ? eb.size() : 0));
    std::vector<float> c(static_cast<std::size_t>(a.rows().size(world_rank())) * k);
    spmm.spmm(b, c);
    const std::vector<float> c_all = allgather_dense(MPI_COMM_WORLD, a.rows(), k, c);
    const Dense want = ea * eb;
    const Eigen::Map<const Dense> got(c_all.data(), a.n_rows(), k);
    EXPECT_LE((got - want).cwiseAbs().maxCoeff(), 1e-5f * (1.0f + want.cwiseAbs().maxCoeff()))
        << to_string(mode);
  }
}

}  // namespace
}  // namespace netsparse
