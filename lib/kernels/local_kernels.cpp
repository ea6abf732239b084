// Public entry points of the local kernels: argument checks, then the instruction-set variant
// chosen for this CPU (kernels_impl.inc holds the loops).
#include "netsparse/local_kernels.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "config/settings.hpp"
#include "kernels/kernel_variants.hpp"

namespace netsparse {

namespace {

using kernels_detail::IsaKernels;

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("netsparse::") + fn + ": " + what);
}

std::string range_text(IndexRange r) {
  // Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on "[" + std::string.
  std::string text(1, '[');
  text += std::to_string(r.begin);
  text += ", ";
  text += std::to_string(r.end);
  text += ')';
  return text;
}

// Columns a call reads: all touched ones, or those of one column panel.
IndexRange needed_columns(const char* fn, const TiledMatrix& a, int col_panel) {
  if (col_panel < 0) return a.touched_columns();
  if (col_panel >= a.n_col_panels())
    fail(fn, "column panel " + std::to_string(col_panel) + " outside [0, " +
                 std::to_string(a.n_col_panels()) + ")");
  const std::span<const gidx_t> cols = a.panel_columns(col_panel);
  return cols.empty() ? IndexRange{} : IndexRange{cols.front(), cols.back() + 1};
}

void check_k(const char* fn, int k) {
  if (k < 1) fail(fn, "K must be >= 1, got " + std::to_string(k));
}

// The column-indexed operand must hold every row the call reads, with ld >= width.
template <class T>
void check_col_view(const char* fn, const char* name, const BasicDenseConstView<T>& v,
                    IndexRange needed, std::int64_t width) {
  if (needed.size() == 0) return;  // nothing is read
  if (v.data == nullptr) fail(fn, std::string(name) + " is null");
  if (v.ld < width)
    fail(fn, std::string(name) + ".ld = " + std::to_string(v.ld) + " is less than " +
                 std::to_string(width));
  if (v.n_rows < 0 || needed.begin < v.row_base || needed.end - v.row_base > v.n_rows)
    fail(fn, std::string(name) + " holds rows " + range_text({v.row_base, v.row_base + v.n_rows}) +
                 " (row_base, n_rows) but the call reads columns " + range_text(needed) +
                 "; set DenseConstView::n_rows to the rows the buffer holds");
}

void check_row_operand(const char* fn, const char* name, const void* p, std::int64_t ld,
                       std::int64_t width, bool used) {
  if (!used) return;
  if (p == nullptr) fail(fn, std::string(name) + " is null");
  if (ld < width)
    fail(fn, std::string("leading dimension of ") + name + " = " + std::to_string(ld) +
                 " is less than " + std::to_string(width));
}

// ---- variant selection --------------------------------------------------------------------

bool cpu_can_run(const IsaKernels& isa) {
#if defined(NETSPARSE_KERNELS_X86_VARIANTS)
  __builtin_cpu_init();
  if (&isa == &kernels_detail::kernels_avx2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (&isa == &kernels_detail::kernels_avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  (void)isa;
  return true;
}

// Best first.
const IsaKernels* const kVariants[] = {
#if defined(NETSPARSE_KERNELS_X86_VARIANTS)
    &kernels_detail::kernels_avx512,
    &kernels_detail::kernels_avx2,
#endif
    &kernels_detail::kernels_baseline,
};

const IsaKernels& variant_named(std::string_view name, const char* source) {
  for (const IsaKernels* v : kVariants) {
    if (name != v->name) continue;
    if (!cpu_can_run(*v))
      throw std::invalid_argument(std::string("netsparse: kernel ISA '") + std::string(name) +
                                  "' (" + source + ") is not supported by this CPU");
    return *v;
  }
  std::string known;
  for (const IsaKernels* v : kVariants) known += std::string(known.empty() ? "" : ", ") + v->name;
  throw std::invalid_argument(std::string("netsparse: unknown kernel ISA '") + std::string(name) +
                              "' (" + source + "); this build has: " + known);
}

std::atomic<const IsaKernels*> g_active{nullptr};

const IsaKernels& active_variant() {
  const IsaKernels* v = g_active.load(std::memory_order_acquire);
  if (v != nullptr) return *v;
  if (const std::string isa = config::choice(config::Env::kKernelIsa); !isa.empty()) {
    v = &variant_named(isa, "from NETSPARSE_KERNEL_ISA");
  } else {
    for (const IsaKernels* cand : kVariants) {
      if (cpu_can_run(*cand)) {
        v = cand;
        break;
      }
    }
  }
  g_active.store(v, std::memory_order_release);
  return *v;
}

}  // namespace

std::vector<std::string> supported_kernel_isas() {
  std::vector<std::string> names;
  for (const IsaKernels* v : kVariants)
    if (cpu_can_run(*v)) names.emplace_back(v->name);
  return names;
}

std::string active_kernel_isa() {
  return active_variant().name;
}

void set_kernel_isa(std::string_view name) {
  g_active.store(&variant_named(name, "set_kernel_isa"), std::memory_order_release);
}

// ---- kernels ------------------------------------------------------------------------------

namespace {

// Size of the largest cache, read once: sysfs first (in a VM, sysconf can report a made-up
// figure -- 320 MiB for a 32 MiB L3 on the development machine), then sysconf, then 32 MiB.
std::int64_t last_level_cache_bytes() {
  static const std::int64_t bytes = [] {
    std::int64_t best = 0;
    for (int index = 0; index < 8; ++index) {
      std::ifstream size_file("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) +
                              "/size");
      std::int64_t kib = 0;
      char unit = 0;
      if (size_file >> kib >> unit && unit == 'K') best = std::max(best, kib * 1024);
    }
#if defined(_SC_LEVEL3_CACHE_SIZE)
    if (best == 0) best = std::max<std::int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
    return best > 0 ? best : std::int64_t{32} << 20;
  }();
  return bytes;
}

std::atomic<std::int64_t> g_stream_threshold{-1};  // < 0: the default

// C = A * B on the whole matrix writes every row of C once; when C is large it cannot stay
// cached anyway, so its lines are written with streaming stores instead of being read for
// ownership first.
template <class T>
bool stream_spmm_output(const TiledMatrix& a, int col_panel, int k, bool accumulate) {
  return !accumulate && col_panel < 0 &&
         a.n_rows() * std::int64_t{k} * std::int64_t{sizeof(T)} >= spmm_streaming_threshold_bytes();
}

thread_local ProgressHook t_progress_hook;

const ProgressHook* current_hook() noexcept {
  return t_progress_hook.fn == nullptr ? nullptr : &t_progress_hook;
}

// The matrix's values must be in the operands' precision.
template <class T>
void check_scalar(const char* fn, const TiledMatrix& a) {
  if (a.scalar_type() != scalar_type_of<T>)
    fail(fn, std::string("the matrix holds ") + std::string(to_string(a.scalar_type())) +
                 " values but the operands are " + std::string(to_string(scalar_type_of<T>)) +
                 "; build the TiledMatrix with ScalarType::" +
                 std::string(to_string(scalar_type_of<T>)));
}

template <class T>
void spmm_checked(const char* fn, const TiledMatrix& a, int col_panel, BasicDenseConstView<T> b,
                  T* c, std::int64_t ldc, int k, bool accumulate) {
  check_scalar<T>(fn, a);
  check_k(fn, k);
  check_col_view(fn, "B", b, needed_columns(fn, a, col_panel), k);
  check_row_operand(fn, "C", c, ldc, k, a.n_rows() > 0);
  active_variant().loops<T>().spmm({{&a, col_panel},
                                    b,
                                    c,
                                    ldc,
                                    k,
                                    accumulate,
                                    stream_spmm_output<T>(a, col_panel, k, accumulate),
                                    current_hook()});
}

template <class T>
void sddmm_checked(const char* fn, const TiledMatrix& a, int col_panel, const T* x,
                   std::int64_t ldx, BasicDenseConstView<T> y, int k, T* out) {
  check_scalar<T>(fn, a);
  check_k(fn, k);
  const IndexRange needed = needed_columns(fn, a, col_panel);
  check_col_view(fn, "Y", y, needed, k);
  check_row_operand(fn, "X", x, ldx, k, needed.size() > 0);
  check_row_operand(fn, "out", out, 1, 1, needed.size() > 0);
  active_variant().loops<T>().sddmm({{&a, col_panel}, x, ldx, y, k, out, current_hook()});
}

template <class T>
void spmv_checked(const char* fn, const TiledMatrix& a, int col_panel, BasicDenseConstView<T> x,
                  T* y, bool accumulate) {
  check_scalar<T>(fn, a);
  check_col_view(fn, "x", x, needed_columns(fn, a, col_panel), 1);
  check_row_operand(fn, "y", y, 1, 1, a.n_rows() > 0);
  active_variant().loops<T>().spmv({{&a, col_panel}, x, y, accumulate, current_hook()});
}

}  // namespace

std::int64_t spmm_streaming_threshold_bytes() {
  const std::int64_t t = g_stream_threshold.load(std::memory_order_relaxed);
  return t >= 0 ? t : 2 * last_level_cache_bytes();
}

void set_spmm_streaming_threshold_bytes(std::int64_t bytes) {
  g_stream_threshold.store(bytes < 0 ? -1 : bytes, std::memory_order_relaxed);
}

// The public overloads, once per precision.
#define NETSPARSE_LOCAL_KERNELS_FOR(T)                                                            \
  void spmm(const TiledMatrix& a, BasicDenseConstView<T> b, T* c, std::int64_t ldc, int k,        \
            bool accumulate) {                                                                    \
    spmm_checked<T>("spmm", a, -1, b, c, ldc, k, accumulate);                                     \
  }                                                                                               \
  void spmm_col_panel(const TiledMatrix& a, int col_panel, BasicDenseConstView<T> b, T* c,        \
                      std::int64_t ldc, int k) {                                                  \
    if (col_panel < 0)                                                                            \
      fail("spmm_col_panel", "column panel " + std::to_string(col_panel) + " is negative");       \
    spmm_checked<T>("spmm_col_panel", a, col_panel, b, c, ldc, k, true);                          \
  }                                                                                               \
  void sddmm(const TiledMatrix& a, const T* x, std::int64_t ldx, BasicDenseConstView<T> y, int k, \
             T* out) {                                                                            \
    sddmm_checked<T>("sddmm", a, -1, x, ldx, y, k, out);                                          \
  }                                                                                               \
  void sddmm_col_panel(const TiledMatrix& a, int col_panel, const T* x, std::int64_t ldx,         \
                       BasicDenseConstView<T> y, int k, T* out) {                                 \
    if (col_panel < 0)                                                                            \
      fail("sddmm_col_panel", "column panel " + std::to_string(col_panel) + " is negative");      \
    sddmm_checked<T>("sddmm_col_panel", a, col_panel, x, ldx, y, k, out);                         \
  }                                                                                               \
  void spmv(const TiledMatrix& a, BasicDenseConstView<T> x, T* y, bool accumulate) {              \
    spmv_checked<T>("spmv", a, -1, x, y, accumulate);                                             \
  }                                                                                               \
  void spmv_col_panel(const TiledMatrix& a, int col_panel, BasicDenseConstView<T> x, T* y) {      \
    if (col_panel < 0)                                                                            \
      fail("spmv_col_panel", "column panel " + std::to_string(col_panel) + " is negative");       \
    spmv_checked<T>("spmv_col_panel", a, col_panel, x, y, true);                                  \
  }

NETSPARSE_LOCAL_KERNELS_FOR(float)
NETSPARSE_LOCAL_KERNELS_FOR(double)
#undef NETSPARSE_LOCAL_KERNELS_FOR

ScopedProgressHook::ScopedProgressHook(ProgressHook hook) noexcept : saved_(t_progress_hook) {
  t_progress_hook = hook;
}
ScopedProgressHook::~ScopedProgressHook() {
  t_progress_hook = saved_;
}

namespace kernels_detail {
const ProgressHook* current_progress_hook() noexcept {
  return current_hook();
}
const IsaKernels& selected_kernels() {
  return active_variant();
}
}  // namespace kernels_detail

}  // namespace netsparse
