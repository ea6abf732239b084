// Distributed transpose of a 1D row-distributed matrix, and C = A^T * B without and with forming
// A^T (the backward pass of a GNN layer, whose forward pass is C = A * B).
//
//   DistMatrix at = transpose(a);                        // collective: the 1D row split of A^T
//   DistKernel k(at, KernelKind::spmm, 16, options);     // any CommMode
//
//   TransposedSpmm back(a, /*k=*/16, options);           // collective
//   back.spmm(b_local, c_local);                         // collective: C = A^T * B
//
// Layout: A^T's rows are A's columns, so A^T is distributed by a.cols() (rank p holds rows
// [a.cols().begin(p), a.cols().end(p)) of A^T) and its columns follow a.rows(). For C = A^T * B:
//   b_local : a.rows().size(rank) x K   (B is row-indexed like A's rows, e.g. the C of A * X)
//   c_local : a.cols().size(rank) x K   (C is indexed like A's columns)
// both row-major, leading dimension K, float for DistOptions::scalar f32 and double for f64.
#pragma once

#include <mpi.h>

#include <memory>
#include <span>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse {

// A^T, 1D row-distributed by a.cols() (its cols() is a.rows()); named a.name() + "^T".
// Collective. Each rank sorts its nonzeros (i, j, v) by (column, row) locally, sends each column
// run to the owner of row j of A^T (one MPI_Alltoallv), and each owner merges the runs it
// received by (column, row): the run from rank q holds only rows of q, so the merge keeps rows
// sorted. Values are moved exactly (no arithmetic). Empty rows, empty ranks and rectangular
// shapes are fine.
[[nodiscard]] DistMatrix transpose(const DistMatrix& a);

// The same for another pattern of a's rows (`local_rows`: this rank's block of an
// a.n_rows() x a.n_cols() matrix over a.rows(), e.g. sample_rows(a.local(), ...)): this rank's
// block of the transposed pattern over a.cols(). Collective; throws std::invalid_argument on
// every rank if any rank's block does not fit a's partition.
[[nodiscard]] CsrMatrix transpose_rows(const DistMatrix& a, const CsrMatrix& local_rows);

// How TransposedSpmm computes C = A^T * B.
enum class TransposedMethod {
  // Form A^T with transpose() / transpose_rows() and run a DistKernel SpMM on it in
  // DistOptions::mode (netsparse, su, inspector-executor, ...): C's owners gather the rows of B
  // they need. set_pattern re-transposes (one MPI_Alltoallv of the nonzeros) and redoes the
  // kernel's setup.
  via_transpose,
  // Push, without forming A^T: each rank computes partial rows of C from its own rows,
  // C_partial[j] += A[i, j] * B[i], for the columns j its rows touch, and sends each partial row
  // to the owner of row j of C, which sums them (one MPI_Alltoallv of only the touched rows:
  // sparsity-aware reduce-scatter). The plan (touched columns per owner, and which rows each
  // owner receives) is built once per pattern. DistOptions::mode is not used.
  push
};
[[nodiscard]] const char* to_string(TransposedMethod method) noexcept;  // "transpose", "push"

class TransposedSpmm {
 public:
  // Collective. `a` must outlive this object (its partitions and communicator are used); the
  // pattern is a.local() until set_pattern. k >= 1. via_transpose: `engine` is passed to the
  // DistKernel (null: one is made for the RIG modes).
  TransposedSpmm(const DistMatrix& a, int k, const DistOptions& options,
                 TransposedMethod method = TransposedMethod::via_transpose,
                 std::shared_ptr<RigEngine> engine = {});
  ~TransposedSpmm();
  TransposedSpmm(TransposedSpmm&&) noexcept;
  TransposedSpmm& operator=(TransposedSpmm&&) noexcept;

  // Changing sparsity: A's rows on this rank get a new pattern (same rows, same partitions).
  // Collective. The rows are copied (or transposed) here; they need not stay alive.
  void set_pattern(const CsrMatrix& local_rows);

  // C = A^T * B. Collective. Throws std::invalid_argument on every rank when any rank's B or C
  // has the wrong size or the wrong precision.
  void spmm(std::span<const float> b_local, std::span<float> c_local);
  void spmm(std::span<const double> b_local, std::span<double> c_local);

  [[nodiscard]] TransposedMethod method() const noexcept;
  [[nodiscard]] int k() const noexcept;
  // Seconds of the last setup (constructor or set_pattern) on this rank, and the part of it
  // spent transposing (via_transpose: local sort + exchange + merge; push: the plan, including
  // its index exchange).
  [[nodiscard]] double setup_seconds() const noexcept;
  [[nodiscard]] double transpose_seconds() const noexcept;
  // via_transpose: the kernel's statistics; push: bytes / messages of the partial-row exchange,
  // wait_seconds = time in MPI_Alltoallv, compute_seconds = the partial rows and the sums.
  [[nodiscard]] const CommStats& last_run_stats() const noexcept;
  [[nodiscard]] const CommStats& total_stats() const noexcept;
  void reset_stats() noexcept;
  // via_transpose only (null for push): the transposed pattern's kernel.
  [[nodiscard]] DistKernel* kernel() noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One C = A^T * B (builds a TransposedSpmm with k = B's width and runs it once). Collective.
void spmm_transposed(const DistMatrix& a, int k, std::span<const float> b_local,
                     std::span<float> c_local, const DistOptions& options,
                     TransposedMethod method = TransposedMethod::via_transpose);
void spmm_transposed(const DistMatrix& a, int k, std::span<const double> b_local,
                     std::span<double> c_local, const DistOptions& options,
                     TransposedMethod method = TransposedMethod::via_transpose);

}  // namespace netsparse
