// Choosing a TileConfig per matrix and kernel by exhaustive search, as SPADE does (no model):
// every configuration of a small grid is built and timed with real kernel runs.
//
// Grid (SPADE's Table 3, with column panels sized by bytes of B rather than fixed widths so
// the same rule works for any K):
//   row panel    RP in {64, 256, 1024}
//   column panel CP = round(bytes / (K * 4)) for bytes in {1 MiB, 64 MiB}, clamped to n_cols
//                (a width >= n_cols is "all columns"), plus all columns
//   barriers     on / off (on only where there is more than one column panel)
// with duplicates removed. The base configuration (RP 256, CP all, no barriers; SPADE Base) is
// always timed first, so a search cut short by its time budget still has a fair reference; then
// the column-panel variants at RP 256, then RP 1024, then RP 64.
#pragma once

#include <string>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse {

enum class KernelKind { spmm, sddmm, spmv };
[[nodiscard]] const char* to_string(KernelKind kind) noexcept;

// SPADE Base: RP 256, CP all, no barriers.
[[nodiscard]] TileConfig base_config() noexcept;

// The deduplicated search grid for a matrix with n_cols columns at dense width k, base first.
[[nodiscard]] std::vector<TileConfig> autotune_grid(gidx_t n_cols, int k, int barrier_group = 1);

struct AutotuneOptions {
  int timed_runs = 2;                 // per candidate, after one untimed warm-up; the best counts
  double time_budget_seconds = 20.0;  // no new candidate is started once this much has elapsed
  int barrier_group = 1;              // column panels per barrier group for barrier candidates
};

struct AutotuneCandidate {
  TileConfig config;
  bool timed = false;         // false: skipped because the time budget ran out
  double kernel_seconds = 0;  // best of the timed runs
  double build_seconds = 0;   // building the TiledMatrix
};

struct AutotuneResult {
  TileConfig best;
  double best_seconds = 0;   // kernel time of `best`
  double base_seconds = 0;   // kernel time of base_config()
  double seconds_spent = 0;  // wall time of the whole search (operands, builds, runs)
  bool budget_exhausted = false;
  std::vector<AutotuneCandidate> candidates;  // in the order tried
};

// Times every grid configuration of `kernel` at width k on `a` (C = A*B for SpMM, y = A*x for
// SpMV) with operands it allocates itself, as an application would a large one (64-byte
// aligned, 2 MiB pages advised): the rows of B the matrix touches, C or X (n_rows x k) and, for
// SDDMM, the nnz outputs. Threads: as the kernels (OpenMP). The search stops starting new
// candidates once the budget is spent, so it can overrun by one candidate's build and runs.
[[nodiscard]] AutotuneResult autotune(const CsrMatrix& a, KernelKind kernel, int k,
                                      const AutotuneOptions& options = {});

// One line: chosen config, its time, base time and the speedup, candidates timed, time spent.
[[nodiscard]] std::string summary(const AutotuneResult& result);

}  // namespace netsparse
