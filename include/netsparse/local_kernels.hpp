// Local (one rank, shared memory) sparse kernels over a SPADE-tiled row block, in fp32 or fp64:
// every kernel has a float and a double overload, and the TiledMatrix must hold its values in
// the same precision (TiledMatrix::scalar_type(); a mismatch throws std::invalid_argument).
//
// Dense matrices are row-major with an explicit leading dimension (elements between the starts
// of consecutive rows, >= K). The matrix indexed by COLUMN id (B of SpMM, Y of SDDMM, x of
// SpMV; SPADE's "cMatrix") is passed as a DenseConstView addressed by GLOBAL column index:
// row c is data + (c - row_base) * ld and the view holds rows [row_base, row_base + n_rows).
// A distributed driver can so hand in a buffer holding only one column panel's range of rows.
// The matrix indexed by row (C of SpMM, X of SDDMM, y of SpMV) is indexed by LOCAL row
// (0 .. n_rows-1 of the block).
//
// Every call checks its arguments before touching memory (K >= 1, leading dimensions, null
// pointers, and that the view covers every column the call reads) and throws
// std::invalid_argument naming the problem. The kernels themselves never allocate.
//
// Threads: OpenMP, as many as omp_get_max_threads(). SpMM and SpMV give all tiles of a row
// panel to one thread (no atomics, each output row written by one thread), row panels
// scheduled dynamically, a panel's tiles in column order; with TileConfig::barriers, groups of
// column panels run one after another with a barrier between them. SDDMM schedules single
// tiles. Inner loops are compiled for K in {1, 16, 32, 64, 128, 256} with a generic loop for
// any other K, and (on x86-64) in baseline, AVX2 and AVX-512 variants picked at run time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse {

// Read-only rows of a dense row-major matrix, addressed by global index (see above). n_rows is
// checked against the columns a kernel reads; a view left with n_rows = 0 covers nothing.
template <class T>
struct BasicDenseConstView {
  const T* data = nullptr;
  gidx_t row_base = 0;
  std::int64_t ld = 0;
  gidx_t n_rows = 0;
};
using DenseConstView = BasicDenseConstView<float>;
using DenseConstViewF64 = BasicDenseConstView<double>;

// C (n_rows x K, ldc) += A * B, or C = A * B when accumulate is false (rows of A without
// nonzeros then get zeros).
void spmm(const TiledMatrix& a, DenseConstView b, float* c, std::int64_t ldc, int k,
          bool accumulate = true);
void spmm(const TiledMatrix& a, DenseConstViewF64 b, double* c, std::int64_t ldc, int k,
          bool accumulate = true);
// C += A_p * B_p for the tiles of one column panel p only; B needs only the rows of
// a.panel_columns(p). Summing the calls over every panel gives spmm().
void spmm_col_panel(const TiledMatrix& a, int col_panel, DenseConstView b, float* c,
                    std::int64_t ldc, int k);
void spmm_col_panel(const TiledMatrix& a, int col_panel, DenseConstViewF64 b, double* c,
                    std::int64_t ldc, int k);

// out[i] = a_i * dot(X[r_i, 0:K], Y[c_i, 0:K]) for every nonzero i = (r_i, c_i, a_i), where i is
// the position of the nonzero in the ORIGINAL CSR order of the block (out has nnz entries).
// X is indexed by local row (n_rows x K, ldx).
void sddmm(const TiledMatrix& a, const float* x, std::int64_t ldx, DenseConstView y, int k,
           float* out);
void sddmm(const TiledMatrix& a, const double* x, std::int64_t ldx, DenseConstViewF64 y, int k,
           double* out);
// The same, for the nonzeros of one column panel only (other entries of out are not touched).
void sddmm_col_panel(const TiledMatrix& a, int col_panel, const float* x, std::int64_t ldx,
                     DenseConstView y, int k, float* out);
void sddmm_col_panel(const TiledMatrix& a, int col_panel, const double* x, std::int64_t ldx,
                     DenseConstViewF64 y, int k, double* out);

// y (n_rows) += A * x, or y = A * x when accumulate is false. x is a view like B with K = 1:
// element c is x.data[(c - x.row_base) * x.ld] (ld = 1 for a contiguous vector).
void spmv(const TiledMatrix& a, DenseConstView x, float* y, bool accumulate = true);
void spmv(const TiledMatrix& a, DenseConstViewF64 x, double* y, bool accumulate = true);
void spmv_col_panel(const TiledMatrix& a, int col_panel, DenseConstView x, float* y);
void spmv_col_panel(const TiledMatrix& a, int col_panel, DenseConstViewF64 x, double* y);

// ---- CSR kernels (no tiling) ----------------------------------------------------------------
// For patterns that live for one run only (GNN neighbour sampling: a new pattern every
// iteration), where building the SPADE tiling would cost more than the kernel saves: row-wise
// loops straight over the CSR arrays, OpenMP over rows. They compute only the nonzeros whose
// column lies inside [lo, hi) (inside = true) or outside it (inside = false) — the local and
// the remote part of a distributed row block without splitting it. Columns are sorted per row
// (CsrMatrix's invariant), so each part is at most two runs per row, found by binary search.
// The matrix values (double in CsrMatrix) are converted to the operands' precision.
// C (n_rows x K, ldc) = (or += when accumulate) A_part * B.
void spmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, DenseConstView b,
                      float* c, std::int64_t ldc, int k, bool accumulate);
void spmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, DenseConstViewF64 b,
                      double* c, std::int64_t ldc, int k, bool accumulate);
// out[i] = a_i * dot(X[r_i], Y[c_i]) for the nonzeros i of the part (CSR order; others untouched).
void sddmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, const float* x,
                       std::int64_t ldx, DenseConstView y, int k, float* out);
void sddmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, const double* x,
                       std::int64_t ldx, DenseConstViewF64 y, int k, double* out);

// Communication progress while a kernel computes. Inside a ScopedProgressHook, the kernels call
// hook.fn(hook.arg) between tiles, on the thread that called the kernel only (OpenMP's master),
// so that a communication engine without a progress thread (ns_progress_mode INLINE) keeps
// answering its peers while this thread computes instead of making them wait until it polls.
// The hook should be cheap when there is nothing to do (the distributed layer's hook polls the
// engine at most every few microseconds). Nests: the innermost scope wins, the outer one is
// restored on exit.
struct ProgressHook {
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;
};
class ScopedProgressHook {
 public:
  explicit ScopedProgressHook(ProgressHook hook) noexcept;
  ~ScopedProgressHook();
  ScopedProgressHook(const ScopedProgressHook&) = delete;
  ScopedProgressHook& operator=(const ScopedProgressHook&) = delete;

 private:
  ProgressHook saved_;
};

// C = A * B (spmm on the whole matrix with accumulate = false) writes C with streaming,
// cache-bypassing stores when C holds at least this many bytes and its rows are aligned to the
// vector width: SPADE's "rMatrix bypass". Such a C cannot stay cached anyway, and the stores then
// skip reading every line of C first. Default: twice the last-level cache; a negative value
// restores the default, 0 streams whenever alignment allows.
[[nodiscard]] std::int64_t spmm_streaming_threshold_bytes();
void set_spmm_streaming_threshold_bytes(std::int64_t bytes);

// Instruction-set variants of the kernels. The best variant the CPU supports is used, unless
// the environment variable NETSPARSE_KERNEL_ISA names another one (read at first use) or
// set_kernel_isa() is called. Names: "baseline" (the compiler's target, always present),
// "avx2" (AVX2 + FMA), "avx512" (AVX-512 F/VL/BW/DQ).
[[nodiscard]] std::vector<std::string> supported_kernel_isas();
[[nodiscard]] std::string active_kernel_isa();
// Throws std::invalid_argument for an unknown name or one this CPU cannot run. Must not be
// called while kernels run on other threads.
void set_kernel_isa(std::string_view name);

}  // namespace netsparse
