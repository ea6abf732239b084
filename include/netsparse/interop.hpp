// Bringing your own data: a DistMatrix from CSR arrays, and dense operands moved between one
// rank's global copy and the ranks' blocks. (From an Eigen::SparseMatrix: netsparse/eigen.hpp.)
//
//   // every rank passes the whole matrix; each keeps its row block
//   DistMatrix a = from_global_csr(MPI_COMM_WORLD, n_rows, n_cols, {row_ptr, col_idx, values});
//   // or each rank passes only its rows (blocks in rank order, or explicit row offsets)
//   DistMatrix a = from_local_csr(MPI_COMM_WORLD, n_cols, {my_row_ptr, my_col_idx, my_values});
//
//   std::vector<float> b = scatter_dense(a.comm(), a.cols(), k, b_global);  // B on rank 0
//   ... DistKernel::spmm(b, c) ...
//   std::vector<float> c_global = gather_dense(a.comm(), a.rows(), k, c);  // C on rank 0
//
// Every function here is collective over the communicator and validates its arguments on every
// rank. A problem found on any rank makes EVERY rank throw std::invalid_argument with the same
// message (the one of the lowest rank that found a problem), so no rank is left waiting in a
// collective. The messages start with the function's name.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <iterator>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/partition.hpp"

namespace netsparse {

// ---- CSR arrays ---------------------------------------------------------------------------

// A non-owning view of 0-based CSR arrays: row_ptr (rows + 1 offsets, row_ptr[0] == 0, non
// decreasing), col_idx and values (row_ptr[rows] entries each). Index arrays may be int32 or
// int64 (the two may differ), values float or double (kept in double; the precision a kernel
// computes in is DistOptions::scalar). Any contiguous range works: std::vector, std::span,
// std::array, a span over raw pointers (std::span(ptr, n)), Eigen's
// outerIndexPtr()/innerIndexPtr()/valuePtr() wrapped in spans. The arrays are only read, during the
// call that takes the view.
template <class R>
concept csr_input_range =
    std::ranges::contiguous_range<const R&> && std::ranges::sized_range<const R&>;

class CsrArrays {
 public:
  enum class IndexType { i32, i64 };
  enum class ValueType { f32, f64 };

  template <csr_input_range RowPtr, csr_input_range ColIdx, csr_input_range Values>
  CsrArrays(const RowPtr& row_ptr, const ColIdx& col_idx, const Values& values)
      : row_ptr_(std::ranges::data(row_ptr)),
        col_idx_(std::ranges::data(col_idx)),
        values_(std::ranges::data(values)),
        n_row_ptr_(std::ranges::size(row_ptr)),
        n_col_idx_(std::ranges::size(col_idx)),
        n_values_(std::ranges::size(values)),
        row_ptr_type_(index_type<std::ranges::range_value_t<const RowPtr&>>()),
        col_idx_type_(index_type<std::ranges::range_value_t<const ColIdx&>>()),
        value_type_(value_type<std::ranges::range_value_t<const Values&>>()) {}

  [[nodiscard]] const void* row_ptr() const noexcept { return row_ptr_; }
  [[nodiscard]] const void* col_idx() const noexcept { return col_idx_; }
  [[nodiscard]] const void* values() const noexcept { return values_; }
  [[nodiscard]] std::size_t row_ptr_size() const noexcept { return n_row_ptr_; }
  [[nodiscard]] std::size_t col_idx_size() const noexcept { return n_col_idx_; }
  [[nodiscard]] std::size_t values_size() const noexcept { return n_values_; }
  [[nodiscard]] IndexType row_ptr_type() const noexcept { return row_ptr_type_; }
  [[nodiscard]] IndexType col_idx_type() const noexcept { return col_idx_type_; }
  [[nodiscard]] ValueType value_type() const noexcept { return value_type_; }

 private:
  template <class T>
  static constexpr IndexType index_type() {
    using U = std::remove_cv_t<T>;
    static_assert(std::is_same_v<U, std::int32_t> || std::is_same_v<U, std::int64_t>,
                  "netsparse::CsrArrays: index arrays must hold std::int32_t or std::int64_t");
    return std::is_same_v<U, std::int32_t> ? IndexType::i32 : IndexType::i64;
  }
  template <class T>
  static constexpr ValueType value_type() {
    using U = std::remove_cv_t<T>;
    static_assert(std::is_same_v<U, float> || std::is_same_v<U, double>,
                  "netsparse::CsrArrays: values must be float or double");
    return std::is_same_v<U, float> ? ValueType::f32 : ValueType::f64;
  }

  const void* row_ptr_;
  const void* col_idx_;
  const void* values_;
  std::size_t n_row_ptr_, n_col_idx_, n_values_;
  IndexType row_ptr_type_, col_idx_type_;
  ValueType value_type_;
};

// What to do with the column indices of a row.
enum class ColumnOrder {
  // Any order, repeats allowed: each row is sorted by column and repeated columns are summed
  // (in the order given), like Matrix Market files and Eigen's setFromTriplets. Explicit zeros
  // are kept.
  sort_and_sum,
  // Every row must list strictly increasing columns; anything else is refused with
  // std::invalid_argument naming the row and the position ("... not sorted" or "... repeats
  // column C"). Use it to catch a producer's bug instead of repairing its output.
  require_sorted
};

struct CsrImportOptions {
  ColumnOrder columns = ColumnOrder::sort_and_sum;
  // from_global_csr: how the rows are split (balanced_nnz counts the entries as given).
  // from_local_csr ignores it (the caller's blocks are the partition).
  PartitionKind partition = PartitionKind::equal_rows;
  // The column partition (how B / x / Y are split): nranks + 1 non-decreasing offsets from 0 to
  // n_cols, the same on every rank. Empty: the row partition for a square matrix (so C of one
  // SpMM can be the B of the next), equal blocks otherwise -- what the file readers do.
  std::vector<gidx_t> col_offsets;
  // DistMatrix::name().
  std::string name = "csr";
};

// Every rank passes the same whole n_rows x n_cols matrix and keeps its row block. Only the
// shape (n_rows, n_cols, number of entries) is compared across ranks -- ranks that disagree
// all fail with "from_global_csr: the ranks disagree on ..." -- the contents are trusted to be
// the same. Each rank reads only its rows' entries (plus the whole row_ptr).
DistMatrix from_global_csr(MPI_Comm comm, gidx_t n_rows, gidx_t n_cols, const CsrArrays& whole,
                           const CsrImportOptions& options = {});

// Each rank passes only its own rows, whose global numbers are given by row_offsets (nranks + 1
// non-decreasing offsets starting at 0, the same on every rank: rank p holds rows
// [row_offsets[p], row_offsets[p + 1])). n_cols must be the same on every rank.
DistMatrix from_local_csr(MPI_Comm comm, std::span<const gidx_t> row_offsets, gidx_t n_cols,
                          const CsrArrays& local_rows, const CsrImportOptions& options = {});
// The same with the blocks in rank order: rank p's rows follow rank p - 1's, the offsets are
// the prefix sums of every rank's row count.
DistMatrix from_local_csr(MPI_Comm comm, gidx_t n_cols, const CsrArrays& local_rows,
                          const CsrImportOptions& options = {});

// ---- dense operands -----------------------------------------------------------------------
// A dense matrix of part.n_rows() rows and k columns, row-major (leading dimension k), split by
// rows according to `part` (one part per rank): the column-indexed operands (B of SpMM, x of
// SpMV, Y of SDDMM) by DistMatrix::cols(), the row-indexed ones (C of SpMM, y of SpMV, X of
// SDDMM) by DistMatrix::rows(). SpMV vectors are k = 1. float and double.

// Root's `global` (n_rows x k; ignored on the other ranks) cut into the ranks' blocks: returns
// this rank's part.size(rank) x k block.
std::vector<float> scatter_dense(MPI_Comm comm, const RowPartition& part, int k,
                                 std::span<const float> global, int root = 0);
std::vector<double> scatter_dense(MPI_Comm comm, const RowPartition& part, int k,
                                  std::span<const double> global, int root = 0);
// The same into a caller's block (part.size(rank) * k elements).
void scatter_dense(MPI_Comm comm, const RowPartition& part, int k, std::span<const float> global,
                   std::span<float> local, int root = 0);
void scatter_dense(MPI_Comm comm, const RowPartition& part, int k, std::span<const double> global,
                   std::span<double> local, int root = 0);

// Every rank's block (part.size(rank) x k) gathered on root: returns the n_rows x k matrix on
// root, an empty vector elsewhere.
std::vector<float> gather_dense(MPI_Comm comm, const RowPartition& part, int k,
                                std::span<const float> local, int root = 0);
std::vector<double> gather_dense(MPI_Comm comm, const RowPartition& part, int k,
                                 std::span<const double> local, int root = 0);
// The same into a caller's buffer on root (n_rows * k elements; ignored elsewhere).
void gather_dense(MPI_Comm comm, const RowPartition& part, int k, std::span<const float> local,
                  std::span<float> global, int root = 0);
void gather_dense(MPI_Comm comm, const RowPartition& part, int k, std::span<const double> local,
                  std::span<double> global, int root = 0);

// Every rank's block gathered on every rank: returns the n_rows x k matrix.
std::vector<float> allgather_dense(MPI_Comm comm, const RowPartition& part, int k,
                                   std::span<const float> local);
std::vector<double> allgather_dense(MPI_Comm comm, const RowPartition& part, int k,
                                    std::span<const double> local);

}  // namespace netsparse
