// DistKernel's pattern: the column window, the split into local and remote parts and their
// tiling (build_pattern; build_pattern_once for ideal on a changing pattern), and the pattern's
// volume per rank (compute_volume).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/deadlines.hpp"
#include "distributed/dist_kernel_impl.hpp"
#include "netsparse/autotune.hpp"
#include "support/hash.hpp"

namespace netsparse {

namespace {

// Window (remote column panel) width: the option, or the widest window of at most 64 MiB.
// The profile (docs/benchmarks.md) decides: every column panel is one more pass of the kernel
// over C (5 passes instead of 2 cost kron:16 SpMM K=16 0.9 ms of 2.3 ms), whereas overlapping
// communication with computation needs no panels: all of a run's requests are posted before
// the local part is computed, and the engine answers and takes answers while it computes.
// Narrower windows remain for operands whose remote part exceeds the budget.
gidx_t choose_window(gidx_t n_cols, std::uint64_t row_bytes, gidx_t requested) {
  if (requested > 0) return std::min(requested, TiledMatrix::kMaxColPanelWidth);
  constexpr gidx_t kWindowBudgetBytes = gidx_t{64} << 20;
  const gidx_t by_bytes = std::max<gidx_t>(1, kWindowBudgetBytes / static_cast<gidx_t>(row_bytes));
  return std::min({by_bytes, std::max<gidx_t>(n_cols, 1), TiledMatrix::kMaxColPanelWidth});
}

// DistOptions::autotune_tiles: the choices made in this process, by the pattern's fingerprint
// (its local block's rows and columns hashed), the kernel and K. Kernels on one matrix share
// it; a different pattern (sampled rows, another matrix) searches again.
struct TuneKey {
  std::uint64_t fingerprint;
  gidx_t n_rows;
  std::int64_t nnz;
  int kernel, k;
  auto operator<=>(const TuneKey&) const = default;
};
struct TuneCache {
  std::mutex mutex;
  std::map<TuneKey, TileTuning> choices;
};
TuneCache& tune_cache() {
  static TuneCache cache;
  return cache;
}

std::uint64_t fingerprint(const CsrMatrix& m) {
  std::uint64_t h = support::mix64(static_cast<std::uint64_t>(m.n_cols));
  for (const std::int64_t p : m.row_ptr) h = support::mix64(h ^ static_cast<std::uint64_t>(p));
  for (const gidx_t c : m.col_idx) h = support::mix64(h ^ static_cast<std::uint64_t>(c));
  return h;
}

// SPADE's search on the local block, or the cached choice for the same block.
TileTuning tune_tiles(const CsrMatrix& local, KernelKind kernel, int k, double budget_seconds) {
  const TuneKey key{fingerprint(local), local.n_rows, static_cast<std::int64_t>(local.nnz()),
                    static_cast<int>(kernel), k};
  TuneCache& cache = tune_cache();
  {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    if (const auto it = cache.choices.find(key); it != cache.choices.end()) {
      TileTuning t = it->second;
      t.from_cache = true;
      t.search_seconds = 0;
      return t;
    }
  }
  AutotuneOptions o;  // a warm-up and two timed runs per candidate: one alone chased noise
  o.time_budget_seconds = budget_seconds;
  const AutotuneResult r = autotune(local, kernel, k, o);
  TileTuning t;
  t.tuned = true;
  t.local = r.best;
  t.search_seconds = r.seconds_spent;
  t.best_seconds = r.best_seconds;
  t.base_seconds = r.base_seconds;
  for (const AutotuneCandidate& c : r.candidates) t.candidates_timed += c.timed ? 1 : 0;
  const std::lock_guard<std::mutex> lock(cache.mutex);
  cache.choices.emplace(key, t);
  return t;
}

}  // namespace

void DistKernel::Impl::build_pattern() {
  dist::Pattern& pat = pattern;
  pat = dist::Pattern{};
  pat.col_begin = cols.begin(rank);
  pat.col_end = cols.end(rank);
  pat.window = choose_window(cols.n_rows(), std::uint64_t(k) * scalar_bytes(options.scalar),
                             options.tiling.col_panel);
  TileConfig local_config = options.tiling;
  local_config.col_panel = 0;
  local_config.barriers = false;
  // Split the rows at the local column range (sorted columns: one contiguous range per row).
  const gidx_t cb = pat.col_begin, ce = pat.col_end;
  const gidx_t n = csr.n_rows;
  // The rows are checked as they are read (check_csr's checks, fused into the split's passes:
  // a pass of its own cost 0.36 ms on kron:16's block at np 2): the row pointers first, before
  // any column is read through them; every column's range and each row's order in the copy
  // below. A bad matrix throws check_csr's message (it scans again, only then).
  const std::string who = "DistKernel (rank " + std::to_string(rank) + ")";
  {
    bool rows_ok = std::ssize(csr.row_ptr) == n + 1 && n >= 0 && csr.row_ptr[0] == 0 &&
                   std::ssize(csr.col_idx) == csr.row_ptr.back() &&
                   std::ssize(csr.values) == csr.row_ptr.back();
    for (gidx_t r = 0; rows_ok && r < n; ++r) rows_ok = csr.row_ptr[r] <= csr.row_ptr[r + 1];
    if (!rows_ok) check_csr(csr, who);
  }
  pat.row_ptr = csr.row_ptr;
  pat.local_row_ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  pat.remote_row_ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  pat.remote_left.assign(static_cast<std::size_t>(n), 0);
#pragma omp parallel for schedule(static) if (n > 4096)
  for (gidx_t r = 0; r < n; ++r) {
    const gidx_t* b = csr.col_idx.data() + csr.row_ptr[r];
    const gidx_t* e = csr.col_idx.data() + csr.row_ptr[r + 1];
    const gidx_t* lb = std::lower_bound(b, e, cb);
    const gidx_t* le = std::lower_bound(lb, e, ce);
    pat.remote_left[r] = lb - b;
    pat.local_row_ptr[r + 1] = le - lb;
    pat.remote_row_ptr[r + 1] = (lb - b) + (e - le);
  }
  for (gidx_t r = 0; r < n; ++r) {
    pat.local_row_ptr[r + 1] += pat.local_row_ptr[r];
    pat.remote_row_ptr[r + 1] += pat.remote_row_ptr[r];
  }
  CsrMatrix local_csr, remote_csr;
  for (CsrMatrix* m : {&local_csr, &remote_csr}) {
    m->n_rows_global = csr.n_rows_global;
    m->n_cols = csr.n_cols;
    m->row_begin = csr.row_begin;
    m->n_rows = csr.n_rows;
  }
  local_csr.row_ptr = pat.local_row_ptr;
  remote_csr.row_ptr = pat.remote_row_ptr;
  local_csr.col_idx.resize(static_cast<std::size_t>(local_csr.row_ptr.back()));
  local_csr.values.resize(local_csr.col_idx.size());
  remote_csr.col_idx.resize(static_cast<std::size_t>(remote_csr.row_ptr.back()));
  remote_csr.values.resize(remote_csr.col_idx.size());
  gidx_t first_bad_row = n;
  const gidx_t n_cols = csr.n_cols;
#pragma omp parallel for schedule(static) if (n > 4096) reduction(min : first_bad_row)
  for (gidx_t r = 0; r < n; ++r) {
    const std::int64_t b = csr.row_ptr[r], e = csr.row_ptr[r + 1];
    const std::int64_t left = pat.remote_left[r];
    const std::int64_t n_local = pat.local_row_ptr[r + 1] - pat.local_row_ptr[r];
    std::int64_t ro = pat.remote_row_ptr[r], lo = pat.local_row_ptr[r];
    if (!csr_row_ok(csr.col_idx.data(), b, e, n_cols)) first_bad_row = std::min(first_bad_row, r);
    for (std::int64_t i = b; i < e; ++i) {
      const bool is_local = i >= b + left && i < b + left + n_local;
      if (is_local) {
        local_csr.col_idx[lo] = csr.col_idx[i];
        local_csr.values[lo++] = csr.values[i];
      } else {
        remote_csr.col_idx[ro] = csr.col_idx[i];
        remote_csr.values[ro++] = csr.values[i];
      }
    }
  }
  if (first_bad_row < n) check_csr(csr, who);  // throws, naming the first bad row
  tile_tuning = TileTuning{};  // a new pattern: the previous one's choice no longer applies
  if (options.autotune_tiles && local_csr.nnz() > 0) {
    tile_tuning = tune_tiles(local_csr, kernel, k, options.autotune_budget_seconds);
    local_config = tile_tuning.local;
  }
  pat.local_part = TiledMatrix(local_csr, local_config, options.scalar);
  TileConfig remote_config = local_config;
  remote_config.barriers = false;  // the window's panels follow the gather, not a tuned choice
  remote_config.col_panel = pat.window;
  if (exchange->needs_remote_panels()) {
    const double t0 = dist::now_seconds();
    pat.remote_part = TiledMatrix(remote_csr, remote_config, options.scalar);
    remote_tiling_seconds = dist::now_seconds() - t0;
    for (int p = 0; p < pat.remote_part.n_col_panels(); ++p) {
      if (!pat.remote_part.panel_columns(p).empty()) pat.remote_panels.push_back(p);
    }
  }
  pat.remote_csr = std::move(remote_csr);
}

void DistKernel::Impl::build_pattern_once(const CsrMatrix& rows) {
  dist::Pattern& pat = pattern;
  // The previous pattern's arrays go back to the split's reuse (no reallocation per pattern).
  std::swap(once_split.inside, pat.local_part);
  std::swap(once_split.outside, pat.remote_part);
  std::swap(once_split.inside_row_ptr, pat.local_row_ptr);
  std::swap(once_split.outside_row_ptr, pat.remote_row_ptr);
  std::swap(once_split.outside_left, pat.remote_left);
  pat = dist::Pattern{};
  pat.col_begin = cols.begin(rank);
  pat.col_end = cols.end(rank);
  pat.window = std::max<gidx_t>(cols.n_rows(), 1);  // one remote panel: every column
  TiledMatrix::split_columns(rows, pat.col_begin, pat.col_end, false, options.scalar, once_split,
                             kernel == KernelKind::sddmm);
  std::swap(once_split.inside, pat.local_part);
  std::swap(once_split.outside, pat.remote_part);
  std::swap(once_split.inside_row_ptr, pat.local_row_ptr);
  std::swap(once_split.outside_row_ptr, pat.remote_row_ptr);
  std::swap(once_split.outside_left, pat.remote_left);
  if (kernel == KernelKind::sddmm) pat.row_ptr = rows.row_ptr;  // the scatter's (Compute::finish)
  if (pat.remote_part.nnz() > 0) pat.remote_panels.push_back(0);
}

void DistKernel::Impl::compute_volume() const {
  // A bitmap over the columns: distinct remote columns, and how many per owner.
  const gidx_t n_cols = cols.n_rows();
  const gidx_t cb = cols.begin(rank), ce = cols.end(rank);
  std::vector<std::uint64_t> bits(static_cast<std::size_t>((n_cols + 63) / 64), 0);
  std::uint64_t remote_nnz = 0;
  for (const gidx_t c : rows_in_use->col_idx) {
    if (c >= cb && c < ce) continue;
    ++remote_nnz;
    bits[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
  std::vector<std::uint64_t>& unique_per_owner = volume.unique_remote_per_owner;
  unique_per_owner.assign(static_cast<std::size_t>(nranks), 0);
  std::uint64_t unique = 0;
  for (int q = 0; q < nranks; ++q) {
    std::uint64_t count = 0;
    for (gidx_t c = cols.begin(q); c < cols.end(q);) {
      // Whole words where possible.
      if ((c & 63) == 0 && c + 64 <= cols.end(q)) {
        count += static_cast<std::uint64_t>(std::popcount(bits[c >> 6]));
        c += 64;
      } else {
        count += (bits[c >> 6] >> (c & 63)) & 1;
        ++c;
      }
    }
    unique_per_owner[q] = count;
    unique += count;
  }
  volume.remote_nonzeros = remote_nnz;
  volume.unique_remote_cols = unique;
  volume.remote_rows_total = static_cast<std::uint64_t>(n_cols - (ce - cb));
  volume_known = true;
}

}  // namespace netsparse
