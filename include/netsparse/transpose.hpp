// Local (one rank, shared memory) sparse transposition and outer-product SpMV, after MeNDA
// (ISCA '22): CSR -> CSC by multi-way merge of the row streams, and y = sum_j A[:,j] x_j by
// merging the scaled columns by row index. lib/transpose, docs/architecture.md.
//
// The CSC form of A is held as the CsrMatrix of A^T: its rows are A's columns, its column
// indices A's (global) row indices, sorted within each row.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "netsparse/csr.hpp"

namespace netsparse {

enum class TransposeMethod {
  // MeNDA: an l-leaf merge tree over the row streams, merge key (column, row),
  // ceil(log_l N) passes over the N non-empty row streams of a band, rounds back to back.
  merge,
  // scanTrans (Wang et al., ICS '16): counting sort by column with per-thread histograms.
  scan,
  // mergeTrans (Wang et al., ICS '16), the CPU baseline MeNDA compares with: each thread sorts
  // an equal share of the nonzeros by (column, row), then the sorted blocks are merged pairwise
  // in ceil(log2 threads) rounds with a barrier between rounds.
  merge_trans_cpu,
};

// Leaf count of the merge method when TransposeOptions::leaves is 0, chosen by measurement
// (docs/benchmarks.md, "Local transpose": 32-256 measure alike, 8-16 and 1024 slower).
inline constexpr int kDefaultTransposeLeaves = 64;

// Speed on a CPU (docs/benchmarks.md, "Local transpose"): scan is the fastest here, 3-4x ahead
// of merge on NotreDame_www, mdual and kron20 with 2 threads; merge is MeNDA's dataflow in
// software (log2 N compare levels per nonzero where the hardware tree pops one per cycle).
// The default is therefore scan; merge is there to study MeNDA's dataflow (and for hardware
// that merges at one element per cycle).
struct TransposeOptions {
  TransposeMethod method = TransposeMethod::scan;
  int leaves = 0;           // merge only: leaves of the merge tree, >= 2; 0 = default
  int threads = 0;          // OpenMP threads; 0 = omp_get_max_threads()
  bool check_input = true;  // validate the CsrMatrix first (one parallel pass over it)
};

// The CsrMatrix of A^T (= A in CSC). For a whole matrix (row_begin == 0, n_rows ==
// n_rows_global) that is A^T in every respect. For a row block [row_begin, row_end) of an
// n_rows_global x n_cols matrix the block itself is transposed: the result is the whole
// n_cols x n_rows_global matrix B^T whose nonzeros are those of the block (column indices are
// the block's GLOBAL row indices, so only columns [row_begin, row_end) are used), with
// row_begin = 0 and n_rows = n_rows_global = a.n_cols. Transposing that again gives back the
// block's nonzeros as a whole n_rows_global x n_cols matrix (rows outside the block empty).
// Every method gives the same result, bit for bit; values are copied, never combined.
//
// Threads: merge gives each thread a contiguous band of output rows (= A's columns, the
// columns of the CSC) holding an equal share of the nonzeros; a thread merges every row
// stream's part inside its band and writes its band of the output directly, so threads never
// exchange data. When the merge key (column, row) does not fit 63 bits (n_cols x n_rows >
// 2^63) the merge method falls back to scan.
//
// Throws std::invalid_argument for leaves < 2 (merge), threads < 0, or (check_input) a
// malformed CsrMatrix: shape (negative sizes, row block outside the matrix), row_ptr
// (size, row_ptr[0] != 0, decreasing, last entry != col_idx.size()), values.size() !=
// col_idx.size(), a column outside [0, n_cols), or columns not strictly increasing in a row.
// The message names the problem and the row.
[[nodiscard]] CsrMatrix transpose(const CsrMatrix& a, const TransposeOptions& options = {});
// The same into `out`, whose arrays are resized (kept when they already have the sizes, so a
// repeated transpose of same-sized matrices allocates nothing). `out` must not be `a`.
void transpose_into(const CsrMatrix& a, CsrMatrix& out, const TransposeOptions& options = {});

// The checks of transpose(check_input = true) on their own.
void check_csr(const CsrMatrix& a, const char* who = "netsparse::transpose");

// ---- outer-product SpMV (MeNDA §3.6) --------------------------------------------------------
// y = A x computed as y = sum_j A[:,j] x_j from the CSC form of A, i.e. at = the CsrMatrix of
// A^T (transpose(A)): each row j of `at` is a stream of (row index of A, value) sorted by
// index; it is scaled by x_j as it is read, the streams are merged by index with an l-leaf
// merge tree (ceil(log_l N) passes, intermediate streams stored as (index, value) pairs),
// and equal indices are added as they leave a merge node. Each thread owns a contiguous band
// of y with an equal share of the nonzeros and writes that band only (no atomics, no partial
// vectors).
//
// x has at.n_rows entries (x[j] multiplies row j of at, local numbering). y covers the indices
// [y_base, y_base + y.size()), which must contain every column index of `at`; every entry of y
// is written (zero where A's row has no nonzero). Summation order is fixed by the tree, so
// results are deterministic for a given (leaves, threads).
struct OuterSpmvOptions {
  int leaves = 0;   // >= 2; 0 = kDefaultTransposeLeaves
  int threads = 0;  // 0 = omp_get_max_threads()
};

// A plan: the thread bands and the per-thread stream cuts of `at`, computed once, and the
// merge buffers (2 x (8 B + 8 B) per nonzero), so repeated products cost only the merge. `at`
// must outlive the plan and not change. Construction validates `at` (check_csr).
class OuterSpmv {
 public:
  explicit OuterSpmv(const CsrMatrix& at, const OuterSpmvOptions& options = {});
  ~OuterSpmv();
  OuterSpmv(OuterSpmv&&) noexcept;
  OuterSpmv& operator=(OuterSpmv&&) noexcept;
  OuterSpmv(const OuterSpmv&) = delete;
  OuterSpmv& operator=(const OuterSpmv&) = delete;

  // y = A x. Throws std::invalid_argument if x.size() != at.n_rows or y does not cover the
  // column indices of at. Not safe to call concurrently on one plan (shared buffers).
  void run(std::span<const float> x, std::span<float> y, gidx_t y_base = 0);
  void run(std::span<const double> x, std::span<double> y, gidx_t y_base = 0);

  [[nodiscard]] int threads() const noexcept;
  [[nodiscard]] int leaves() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One-shot form: builds the plan and runs it once.
void spmv_outer(const CsrMatrix& at, std::span<const float> x, std::span<float> y,
                gidx_t y_base = 0, const OuterSpmvOptions& options = {});
void spmv_outer(const CsrMatrix& at, std::span<const double> x, std::span<double> y,
                gidx_t y_base = 0, const OuterSpmvOptions& options = {});

}  // namespace netsparse
