#include "netsparse/autotune.hpp"

#include <sys/mman.h>
#include <array>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <stdexcept>

#include "netsparse/local_kernels.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A dense operand as an application would allocate a large one: 64-byte aligned rows (so the
// streaming-store path of SpMM is timed where it would run) and, from 2 MiB up, 2 MiB pages
// where the kernel allows them (a B read at random rows costs a TLB miss per row otherwise).
// Filled in parallel (first touch by the threads that use it) with exact small fractions.
class Operand {
 public:
  explicit Operand(std::size_t floats) : size_(floats) {
    constexpr std::size_t kHugePage = std::size_t{2} << 20;
    const std::size_t bytes = std::max<std::size_t>(floats * sizeof(float), 64);
    const std::size_t align = bytes >= kHugePage ? kHugePage : 64;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    data_ = static_cast<float*>(std::aligned_alloc(align, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    if (align == kHugePage) madvise(data_, rounded, MADV_HUGEPAGE);  // advisory
    const auto n = static_cast<std::int64_t>(floats);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) data_[i] = 0.125f * static_cast<float>(i % 15) - 0.875f;
  }
  ~Operand() {
    std::free(data_);
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;
  [[nodiscard]] float* data() const noexcept {
    return data_;
  }
  [[nodiscard]] std::size_t size() const noexcept {
    return size_;
  }

 private:
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

constexpr auto kKernelKindNames = std::to_array<support::EnumName<KernelKind>>({
    {KernelKind::spmm, "SpMM"},
    {KernelKind::sddmm, "SDDMM"},
    {KernelKind::spmv, "SpMV"},
});

const char* to_string(KernelKind kind) noexcept {
  return support::name_of<kKernelKindNames>(kind, "unknown kernel kind");
}

TileConfig base_config() noexcept {
  return TileConfig{256, 0, false, 1};
}

std::vector<TileConfig> autotune_grid(gidx_t n_cols, int k, int barrier_group) {
  if (k < 1) throw std::invalid_argument("netsparse::autotune_grid: K must be >= 1");
  if (barrier_group < 1)
    throw std::invalid_argument("netsparse::autotune_grid: barrier_group must be >= 1");
  constexpr double kMiB = 1024.0 * 1024.0;
  std::vector<gidx_t> widths{0};  // 0 = all columns
  for (const double bytes : {1.0 * kMiB, 64.0 * kMiB}) {
    const auto cp = std::max<gidx_t>(1, std::llround(bytes / (4.0 * k)));
    const gidx_t width = cp >= n_cols ? 0 : cp;
    if (std::find(widths.begin(), widths.end(), width) == widths.end()) widths.push_back(width);
  }
  // Order matters when the time budget cuts the search short: the column-panel variants of
  // the base row panel first, then the other row panels.
  std::vector<TileConfig> grid{base_config()};
  for (const int rp : {256, 1024, 64}) {
    for (const gidx_t cp : widths) {
      for (const bool barriers : {false, true}) {
        if (barriers && cp == 0) continue;  // one column panel: barriers change nothing
        const TileConfig c{rp, cp, barriers, barriers ? barrier_group : 1};
        if (std::find(grid.begin(), grid.end(), c) == grid.end()) grid.push_back(c);
      }
    }
  }
  return grid;
}

AutotuneResult autotune(const CsrMatrix& a, KernelKind kernel, int k,
                        const AutotuneOptions& options) {
  if (options.timed_runs < 1)
    throw std::invalid_argument("netsparse::autotune: timed_runs must be >= 1");
  const Clock::time_point start = Clock::now();
  AutotuneResult result;
  for (const TileConfig& c : autotune_grid(a.n_cols, k, options.barrier_group))
    result.candidates.push_back({c});

  // The base candidate is built first: its constructor validates `a`, and its touched column
  // range sizes B (only the rows the matrix reads).
  const Clock::time_point base_build_start = Clock::now();
  std::optional<TiledMatrix> base_tiled(std::in_place, a, result.candidates[0].config);
  result.candidates[0].build_seconds = seconds_since(base_build_start);
  const IndexRange cols = base_tiled->touched_columns();

  const int width = kernel == KernelKind::spmv ? 1 : k;
  const Operand col_operand(static_cast<std::size_t>(cols.size()) * width);
  const Operand row_operand(static_cast<std::size_t>(a.n_rows) * width);
  const Operand out(kernel == KernelKind::sddmm ? static_cast<std::size_t>(a.nnz()) : 0);
  const DenseConstView view{col_operand.data(), cols.begin, width, cols.size()};

  const auto run_once = [&](const TiledMatrix& tiled) {
    switch (kernel) {
      case KernelKind::spmm:
        spmm(tiled, view, row_operand.data(), k, k, false);
        break;
      case KernelKind::sddmm:
        sddmm(tiled, row_operand.data(), k, view, k, out.data());
        break;
      case KernelKind::spmv:
        spmv(tiled, view, row_operand.data(), false);
        break;
    }
  };

  double best = -1;
  for (std::size_t i = 0; i < result.candidates.size(); ++i) {
    AutotuneCandidate& cand = result.candidates[i];
    if (i > 0 && seconds_since(start) > options.time_budget_seconds) {
      result.budget_exhausted = true;
      break;
    }
    std::optional<TiledMatrix> built;
    if (i > 0) {
      const Clock::time_point build_start = Clock::now();
      built.emplace(a, cand.config);
      cand.build_seconds = seconds_since(build_start);
    }
    const TiledMatrix& tiled = i == 0 ? *base_tiled : *built;
    run_once(tiled);  // warm-up: page faults, caches, OpenMP team
    double fastest = 0;
    for (int rep = 0; rep < options.timed_runs; ++rep) {
      const Clock::time_point t0 = Clock::now();
      run_once(tiled);
      const double t = seconds_since(t0);
      fastest = rep == 0 ? t : std::min(fastest, t);
    }
    cand.timed = true;
    cand.kernel_seconds = fastest;
    if (i == 0) {
      result.base_seconds = fastest;
      base_tiled.reset();  // only one layout in memory at a time
    }
    if (best < 0 || fastest < best) {
      best = fastest;
      result.best = cand.config;
    }
  }
  result.best_seconds = best;
  result.seconds_spent = seconds_since(start);
  return result;
}

std::string summary(const AutotuneResult& result) {
  std::size_t timed = 0;
  for (const AutotuneCandidate& c : result.candidates) timed += c.timed ? 1 : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "chose %s: %.3f ms (base %.3f ms, %.2fx) after %zu of %zu candidates in %.2f s%s",
                to_string(result.best).c_str(), result.best_seconds * 1e3,
                result.base_seconds * 1e3,
                result.best_seconds > 0 ? result.base_seconds / result.best_seconds : 0.0, timed,
                result.candidates.size(), result.seconds_spent,
                result.budget_exhausted ? " (time budget reached)" : "");
  return buf;
}

}  // namespace netsparse
