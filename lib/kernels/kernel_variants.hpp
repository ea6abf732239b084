// Internal: the contract between the checked public kernel entry points (local_kernels.cpp)
// and the instruction-set variants of the hot loops (kernels_impl.inc, compiled once per ISA).
// Arguments reaching a variant have been validated.
#pragma once

#include <cstdint>
#include <type_traits>

#include "netsparse/csr.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/tiled.hpp"
#include "sparse/csr_part.hpp"

namespace netsparse::kernels_detail {

// The calling thread's progress hook (ScopedProgressHook), or nullptr.
const ProgressHook* current_progress_hook() noexcept;

// Every call is a template on the operand precision T (float or double); the matrix values a
// tiled kernel reads are TiledMatrix::values_as<T>(), a CSR kernel reads CsrMatrix::values
// (double) converted to T. A dense operand read by global row arrives as the view the checked
// entry point validated.

// What a tiled call runs over: the matrix, and one column panel of it or (col_panel < 0) the
// whole matrix, honouring the barrier configuration.
struct TiledPart {
  const TiledMatrix* a;
  int col_panel;
};

template <class T>
struct SpmmCall : TiledPart {
  BasicDenseConstView<T> b;
  T* c;
  std::int64_t ldc;
  int k;
  bool accumulate;
  // C = A * B may be written with streaming (cache-bypassing) stores where C's rows are
  // vector-aligned: SPADE's rMatrix bypass, chosen by size (see local_kernels.cpp).
  bool stream_output;
  const ProgressHook* progress;  // the caller's hook, or nullptr
};

template <class T>
struct SddmmCall : TiledPart {
  const T* x;
  std::int64_t ldx;
  BasicDenseConstView<T> y;
  int k;
  T* out;
  const ProgressHook* progress;
};

template <class T>
struct SpmvCall : TiledPart {
  BasicDenseConstView<T> x;  // ld: the stride between consecutive elements
  T* y;
  bool accumulate;
  const ProgressHook* progress;
};

// Rows [row_begin, row_end) of a CSR block, the nonzeros of one column part (see
// spmm_csr_columns): C rows = (or +=) A_part * B.
template <class T>
struct CsrSpmmCall {
  const CsrMatrix* a;
  gidx_t lo, hi;
  bool inside;
  BasicDenseConstView<T> b;
  T* c;
  std::int64_t ldc;
  int k;
  bool accumulate;
  gidx_t row_begin, row_end;
};

// One precision's loops of one instruction set.
template <class T>
struct IsaLoops {
  void (*spmm)(const SpmmCall<T>&);
  void (*sddmm)(const SddmmCall<T>&);
  void (*spmv)(const SpmvCall<T>&);
  void (*csr_spmm_rows)(const CsrSpmmCall<T>&);
};

struct IsaKernels {
  const char* name;
  IsaLoops<float> f32;
  IsaLoops<double> f64;

  template <class T>
  [[nodiscard]] const IsaLoops<T>& loops() const noexcept {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return f64;
    }
  }
};

// The kernel variant in use (NETSPARSE_KERNEL_ISA / set_kernel_isa / the best the CPU runs).
const IsaKernels& selected_kernels();

extern const IsaKernels kernels_baseline;
#if defined(NETSPARSE_KERNELS_X86_VARIANTS)
extern const IsaKernels kernels_avx2;
extern const IsaKernels kernels_avx512;
#endif

}  // namespace netsparse::kernels_detail
