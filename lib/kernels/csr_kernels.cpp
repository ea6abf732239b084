// Row-wise CSR kernels over one column part of a row block (local_kernels.hpp): no tiling, so
// a pattern that is used once costs nothing to prepare. K-specialized inner loops (the compiler
// vectorizes the K loop at the build's -march); the progress hook runs between row chunks.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/kernel_variants.hpp"
#include "netsparse/local_kernels.hpp"

namespace netsparse {

namespace {

using kernels_detail::current_progress_hook;

constexpr std::int64_t kRowChunk = 256;

// The nonzeros of row r in the part: up to two runs [b0, e0) and [b1, e1).
struct Runs {
  std::int64_t b0, e0, b1, e1;
};
inline Runs part_runs(const CsrMatrix& a, gidx_t r, gidx_t lo, gidx_t hi, bool inside) {
  const std::int64_t b = a.row_ptr[r], e = a.row_ptr[r + 1];
  const auto [l, h] = csr_part_bounds(a.col_idx.data(), b, e, lo, hi);
  if (inside) return {l, h, h, h};
  return {b, l, h, e};
}

template <class T>
void check_view(const char* fn, const char* what, BasicDenseConstView<T> v, const CsrMatrix& a,
                gidx_t lo, gidx_t hi, bool inside, int k) {
  if (k < 1) throw std::invalid_argument(std::string(fn) + ": K must be >= 1");
  if (v.ld < k) throw std::invalid_argument(std::string(fn) + ": " + what + ".ld < K");
  // The columns the part can read: [lo, hi) inside, or [0, lo) and [hi, n_cols) outside; one
  // view is contiguous, so it must cover the span from the first to the last of them.
  const gidx_t n = a.n_cols;
  const gidx_t clo = std::clamp<gidx_t>(lo, 0, n), chi = std::clamp<gidx_t>(hi, clo, n);
  gidx_t need_lo = clo, need_hi = chi;
  if (!inside) {
    need_lo = clo > 0 ? 0 : chi;
    need_hi = chi < n ? n : clo;
  }
  if (need_lo >= need_hi || a.nnz() == 0) return;
  if (v.data == nullptr) throw std::invalid_argument(std::string(fn) + ": " + what + " is NULL");
  if (v.row_base > need_lo || v.row_base + v.n_rows < need_hi) {
    throw std::invalid_argument(std::string(fn) + ": " + what + " holds rows [" +
                                std::to_string(v.row_base) + ", " +
                                std::to_string(v.row_base + v.n_rows) + "), the part reads [" +
                                std::to_string(need_lo) + ", " + std::to_string(need_hi) + ")");
  }
}

template <class T>
void spmm_csr_columns_impl(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside,
                           BasicDenseConstView<T> b, T* c, std::int64_t ldc, int k,
                           bool accumulate) {
  check_view("spmm_csr_columns", "B", b, a, lo, hi, inside, k);
  if (a.n_rows > 0 && (c == nullptr || ldc < k)) {
    throw std::invalid_argument("spmm_csr_columns: C is NULL or ldc < K");
  }
  const kernels_detail::IsaKernels& isa = kernels_detail::selected_kernels();
  const ProgressHook* hook = current_progress_hook();
  const std::int64_t n = a.n_rows;
  const std::int64_t n_chunks = (n + kRowChunk - 1) / kRowChunk;
#pragma omp parallel for schedule(dynamic, 1) if (a.nnz() * k > (1 << 20))
  for (std::int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    isa.loops<T>().csr_spmm_rows({&a, lo, hi, inside, b, c, ldc, k, accumulate, chunk * kRowChunk,
                                  std::min(n, (chunk + 1) * kRowChunk)});
    if (hook != nullptr && omp_get_thread_num() == 0) hook->fn(hook->arg);
  }
}

template <class T>
void sddmm_csr_columns_impl(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, const T* x,
                            std::int64_t ldx, BasicDenseConstView<T> y, int k, T* out) {
  check_view("sddmm_csr_columns", "Y", y, a, lo, hi, inside, k);
  if (a.nnz() > 0 && (x == nullptr || ldx < k || out == nullptr)) {
    throw std::invalid_argument("sddmm_csr_columns: X or out is NULL, or ldx < K");
  }
  const gidx_t* col = a.col_idx.data();
  const double* val = a.values.data();
  const ProgressHook* hook = current_progress_hook();
  const std::int64_t n = a.n_rows;
  const std::int64_t n_chunks = (n + kRowChunk - 1) / kRowChunk;
#pragma omp parallel for schedule(dynamic, 1) if (a.nnz() * k > (1 << 20))
  for (std::int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    const std::int64_t r_end = std::min(n, (chunk + 1) * kRowChunk);
    for (std::int64_t r = chunk * kRowChunk; r < r_end; ++r) {
      const Runs runs = part_runs(a, r, lo, hi, inside);
      const T* xrow = x + r * ldx;
      for (int part = 0; part < 2; ++part) {
        const std::int64_t jb = part == 0 ? runs.b0 : runs.b1;
        const std::int64_t je = part == 0 ? runs.e0 : runs.e1;
        for (std::int64_t j = jb; j < je; ++j) {
          const T* yrow = y.data + (col[j] - y.row_base) * y.ld;
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int kk = 0; kk < k; ++kk) dot += xrow[kk] * yrow[kk];
          out[j] = static_cast<T>(val[j]) * dot;
        }
      }
    }
    if (hook != nullptr && omp_get_thread_num() == 0) hook->fn(hook->arg);
  }
}

}  // namespace

void spmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, DenseConstView b,
                      float* c, std::int64_t ldc, int k, bool accumulate) {
  spmm_csr_columns_impl(a, lo, hi, inside, b, c, ldc, k, accumulate);
}
void spmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, DenseConstViewF64 b,
                      double* c, std::int64_t ldc, int k, bool accumulate) {
  spmm_csr_columns_impl(a, lo, hi, inside, b, c, ldc, k, accumulate);
}
void sddmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, const float* x,
                       std::int64_t ldx, DenseConstView y, int k, float* out) {
  sddmm_csr_columns_impl(a, lo, hi, inside, x, ldx, y, k, out);
}
void sddmm_csr_columns(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside, const double* x,
                       std::int64_t ldx, DenseConstViewF64 y, int k, double* out) {
  sddmm_csr_columns_impl(a, lo, hi, inside, x, ldx, y, k, out);
}

}  // namespace netsparse
