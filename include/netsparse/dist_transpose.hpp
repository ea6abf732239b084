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

// ---- the non-blocking transpose (MeNDA's start / wait interface) ----------------------------
//
//   PendingTranspose pending = transpose_start(a);   // collective, returns at once
//   ... compute that does not need A^T (may call pending.test() now and then) ...
//   const DistMatrix& at = pending.wait();           // collective: A^T, as transpose(a) gives it
//
// The exchange runs on a private duplicate of a.comm(), made by the first transpose_start on that
// communicator (a blocking MPI_Comm_dup, and MPI_Comm_split_type to count the host's ranks) and
// freed with it. Each transpose has tags of its own on it, so the caller's communication on
// a.comm() meanwhile -- and other pending transposes -- cannot mix with it: point-to-point
// messages of the per-owner counts (and of each rank's "my block is valid" flag) to every other
// rank, then one message per peer that has nonzeros for the other, then the merge. Each step is
// posted as soon as the one before completes; who advances them is TransposeProgress.

// Who advances a pending transpose.
enum class TransposeProgress {
  // thread where MPI provides MPI_THREAD_MULTIPLE and a core is free for it (the rank's usable
  // cores exceed the host's ranks x OpenMP threads, decided once per communicator when it is
  // duplicated), else calls: on 2 cores with 2 ranks a thread would slow the compute it overlaps.
  automatic,
  // The caller's thread, inside test() and wait(): transpose_start packs the nonzeros and posts
  // the first step; each test() advances every step that can advance without blocking (the
  // merge included), so a computation that calls test() between its pieces overlaps the exchange.
  calls,
  // A progress thread started by transpose_start packs, posts, polls (MPI_Test, yielding the core
  // between polls) and merges; test() only reads its state. Needs MPI_THREAD_MULTIPLE
  // (std::invalid_argument otherwise, on every rank alike).
  thread,
};
[[nodiscard]] const char* to_string(TransposeProgress progress) noexcept;  // "calls", ...

// A transpose in flight, and its result once wait() returned. Move-only.
class PendingTranspose {
 public:
  PendingTranspose() noexcept;  // holds nothing: valid() is false
  // A transpose still pending is completed first (its messages must be received before the
  // buffers go): destroying it blocks until every peer has sent its part.
  ~PendingTranspose();
  PendingTranspose(PendingTranspose&&) noexcept;
  PendingTranspose& operator=(PendingTranspose&&) noexcept;

  [[nodiscard]] bool valid() const noexcept;
  // Local and non-blocking: advances the exchange (calls) and says whether this rank's part is
  // finished -- its block of A^T merged, or the transpose refused (wait() then throws). True
  // once wait() returned.
  bool test();
  // Completes the transpose: waits for this rank's part (advancing it), then builds the
  // DistMatrix, which is collective (its agreement on the shape). Every rank throws the same
  // std::invalid_argument if any rank's block did not fit a's partitions (the refused rank names
  // the problem). Returns A^T -- bit for bit transpose(a) -- owned by this object: the address
  // stays valid until it is destroyed or assigned (a second wait() returns the same object).
  const DistMatrix& wait();
  // A^T once wait() returned, else null.
  [[nodiscard]] const DistMatrix* result() const noexcept;
  [[nodiscard]] TransposeProgress progress() const noexcept;  // automatic resolved
  // Seconds from transpose_start until this rank's part was found finished (by test(), wait()
  // or the progress thread), and the part of them spent on local work (pack and merge).
  [[nodiscard]] double pending_seconds() const noexcept;
  [[nodiscard]] double local_seconds() const noexcept;

  struct Impl;

 private:
  friend PendingTranspose transpose_start(const DistMatrix& a, TransposeProgress progress);
  explicit PendingTranspose(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

// Starts A^T = transpose(a). Collective in that every rank calls it, in the same order relative
// to its other collectives on a.comm(), but (after the first on a communicator, which duplicates
// it) it does not wait for any other rank: bad input is reported by wait(). `a` must stay alive and
// unchanged until wait() returned (or the object is destroyed). Throws std::invalid_argument on the
// calling rank for TransposeProgress::thread without MPI_THREAD_MULTIPLE (every rank alike, the
// thread level being the job's).
[[nodiscard]] PendingTranspose transpose_start(
    const DistMatrix& a, TransposeProgress progress = TransposeProgress::automatic);

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
