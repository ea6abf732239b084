// The local SpGEMM (include/netsparse/spgemm.hpp, spgemm_local.hpp): Gustavson row by row, in
// SPADE-style row panels, each panel with the accumulator its estimated output width calls for.
#include "spgemm/spgemm_local.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/spgemm.hpp"
#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#endif
#include "support/enum_names.hpp"
#include "support/hash.hpp"

namespace netsparse {

constexpr auto kSpgemmAccumulatorNames = std::to_array<support::EnumName<SpgemmAccumulator>>({
    {SpgemmAccumulator::automatic, "auto"},
    {SpgemmAccumulator::dense, "dense"},
    {SpgemmAccumulator::hash, "hash"},
});

const char* to_string(SpgemmAccumulator accumulator) noexcept {
  return support::name_of<kSpgemmAccumulatorNames>(accumulator, "?");
}

namespace dist {

namespace {

constexpr std::int64_t kEmpty = -1;

// An open-addressing table of column -> slot payload, sized per panel; only the slots a row
// used are cleared after it (the row's own column list says which).
struct HashTable {
  std::vector<std::int64_t> keys;
  std::vector<std::int64_t> payload;
  int shift = 64;
  std::uint64_t mask = 0;

  void reserve_for(std::int64_t width) {
    const std::uint64_t want =
        std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(16, 2 * width)));
    if (keys.size() < want) {
      keys.assign(want, kEmpty);
      payload.assign(want, 0);
    }
    mask = keys.size() - 1;
    shift = 64 - std::countr_zero(static_cast<std::uint64_t>(keys.size()));
  }
  [[nodiscard]] std::uint64_t home(std::int64_t key) const noexcept {
    return support::fibonacci_slot(static_cast<std::uint64_t>(key), shift);
  }
  // The slot of key, inserting it; true in `fresh` when it was not there.
  std::uint64_t insert(std::int64_t key, bool& fresh) noexcept {
    std::uint64_t s = home(key) & mask;
    for (;;) {
      if (keys[s] == key) {
        fresh = false;
        return s;
      }
      if (keys[s] == kEmpty) {
        keys[s] = key;
        fresh = true;
        return s;
      }
      s = (s + 1) & mask;
    }
  }
  // The slot of a key known to be present.
  [[nodiscard]] std::uint64_t find(std::int64_t key) const noexcept {
    std::uint64_t s = home(key) & mask;
    while (keys[s] != key) s = (s + 1) & mask;
    return s;
  }
  void erase_all(std::span<const std::int64_t> present) noexcept {
    for (const std::int64_t k : present) keys[find(k)] = kEmpty;
  }
};

// One thread's symbolic accumulators, allocated on first use.
struct Workspace {
  std::vector<std::int64_t> dense;  // dense: per column, the last row stamp that saw it
  HashTable hash;
  std::vector<std::int64_t> row_cols;
};

// A panel's dense accumulator -- the symbolic phase's stamps, the numeric phase's values --
// covers the panel's column window whenever the window takes at most this many bytes (an L2's
// worth: every product is a read-modify-write somewhere in the window).
constexpr std::size_t kValueWindowBytes = std::size_t{1} << 20;

// C's values are written once per product and not read again by the kernel: when they are far
// larger than the caches (kStreamBytes), a non-temporal store skips reading each line in first
// (a third of the gather's memory traffic); smaller, they stay cached for whoever reads C next.
constexpr std::size_t kStreamBytes = std::size_t{16} << 20;
template <class T>
inline void store_streaming(T* at, T v) noexcept {
#if defined(__SSE2__) && defined(__x86_64__)
  if constexpr (sizeof(T) == 8) {
    _mm_stream_si64(reinterpret_cast<long long*>(at), std::bit_cast<long long>(v));
  } else {
    _mm_stream_si32(reinterpret_cast<int*>(at), std::bit_cast<int>(v));
  }
#else
  *at = v;
#endif
}

// At most this many columns reserved up front for a panel's output list (32 MiB).
constexpr std::int64_t kPanelReserve = std::int64_t{1} << 22;

// Sorts a row's n distinct columns cols[0, n) (cols has room for n + 1). A dense row scans
// the stamps over its column range instead once the list is long compared with the range
// (sort: ~n log n branchy steps; scan: one branch-free step per column of the range).
// stamps[c - base] is column c's stamp.
void sort_row_columns(std::int64_t* cols, std::int64_t n, const std::int64_t* stamps,
                      std::int64_t base, std::int64_t row, bool dense) {
  if (dense && n > 64) {
    const auto [lo, hi] = std::minmax_element(cols, cols + n);
    const std::int64_t first = *lo, last = *hi;
    const std::int64_t log_n = std::bit_width(static_cast<std::uint64_t>(n));
    if (4 * n * log_n >= last - first + 1) {
      std::int64_t k = 0;
      for (std::int64_t c = first; c <= last; ++c) {
        cols[k] = c;
        k += stamps[c - base] == row ? 1 : 0;
      }
      return;
    }
  }
  std::sort(cols, cols + n);
}

std::int64_t row_width_bound(const CsrIndex& a, const CsrIndex& b, std::int64_t row,
                             gidx_t n_cols) {
  std::int64_t w = 0;
  for (std::int64_t p = a.ptr[row]; p < a.ptr[row + 1]; ++p) {
    const std::int64_t br = a.cols[p];
    w += b.ptr[br + 1] - b.ptr[br];
  }
  return std::min<std::int64_t>(w, n_cols);
}

}  // namespace

void check_local_spgemm_options(const LocalSpgemmOptions& options) {
  if (options.row_panel < 1) {
    throw std::invalid_argument("spgemm: row_panel must be >= 1 (got " +
                                std::to_string(options.row_panel) + ")");
  }
  if (options.dense_divisor < 1) {
    throw std::invalid_argument("spgemm: dense_divisor must be >= 1 (got " +
                                std::to_string(options.dense_divisor) + ")");
  }
}

SpgemmSymbolic spgemm_symbolic(const CsrIndex& a, const CsrIndex& b, gidx_t n_cols,
                               const LocalSpgemmOptions& options) {
  check_local_spgemm_options(options);
  SpgemmSymbolic sym;
  sym.row_panel = options.row_panel;
  sym.n_cols = n_cols;
  const std::int64_t n_rows = a.rows();
  const std::int64_t panel = options.row_panel;
  const std::int64_t n_panels = (n_rows + panel - 1) / panel;
  sym.panel_dense.assign(static_cast<std::size_t>(n_panels), 0);
  sym.panel_lo.assign(static_cast<std::size_t>(n_panels), 0);
  sym.panel_span.assign(static_cast<std::size_t>(n_panels), 0);
  sym.row_ptr.assign(static_cast<std::size_t>(n_rows) + 1, 0);
  std::vector<std::vector<gidx_t>> panel_cols(static_cast<std::size_t>(n_panels));
  // Each B row's smallest and largest column: a panel's columns lie between the smallest and
  // the largest of those of the B rows it touches, so its dense accumulator needs only that
  // window (a banded matrix's panel touches a few thousand columns of millions).
  const std::int64_t b_rows = b.rows();
  std::vector<gidx_t> b_lo(static_cast<std::size_t>(b_rows)),
      b_hi(static_cast<std::size_t>(b_rows));
#pragma omp parallel for schedule(static)
  for (std::int64_t br = 0; br < b_rows; ++br) {
    gidx_t lo = n_cols, hi = -1;
    for (std::int64_t q = b.ptr[br]; q < b.ptr[br + 1]; ++q) {
      lo = std::min(lo, b.cols[q]);
      hi = std::max(hi, b.cols[q]);
    }
    b_lo[static_cast<std::size_t>(br)] = lo;
    b_hi[static_cast<std::size_t>(br)] = hi;
  }

#pragma omp parallel
  {
    Workspace ws;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t rp = 0; rp < n_panels; ++rp) {
      const std::int64_t r0 = rp * panel;
      const std::int64_t r1 = std::min(n_rows, r0 + panel);
      std::int64_t width = 0, total = 0;
      gidx_t w_lo = n_cols, w_hi = -1;
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t bound = row_width_bound(a, b, r, n_cols);
        width = std::max(width, bound);
        total += bound;
        for (std::int64_t p = a.ptr[r]; p < a.ptr[r + 1]; ++p) {
          w_lo = std::min(w_lo, b_lo[static_cast<std::size_t>(a.cols[p])]);
          w_hi = std::max(w_hi, b_hi[static_cast<std::size_t>(a.cols[p])]);
        }
      }
      const std::int64_t window = w_hi >= w_lo ? w_hi - w_lo + 1 : 0;
      bool dense = options.accumulator == SpgemmAccumulator::dense;
      if (options.accumulator == SpgemmAccumulator::automatic) {
        dense = width > 0 &&
                (width * options.dense_divisor >= n_cols ||
                 static_cast<std::size_t>(window) * sizeof(std::int64_t) <= kValueWindowBytes);
      }
      sym.panel_dense[static_cast<std::size_t>(rp)] = dense ? 1 : 0;
      if (dense && ws.dense.size() < static_cast<std::size_t>(window)) {
        ws.dense.assign(static_cast<std::size_t>(window), kEmpty);
      }
      if (!dense) ws.hash.reserve_for(width);
      std::vector<gidx_t>& out = panel_cols[static_cast<std::size_t>(rp)];
      // Address space for the panel's upper bound (capped): only the pages its rows fill are
      // touched, and the list never reallocates and copies itself as it grows.
      out.reserve(static_cast<std::size_t>(std::min<std::int64_t>(total, kPanelReserve)));
      // Room for a row's distinct columns (at most `width`) and one more: the loops below store
      // every column and advance only past new ones, without a branch on the accumulator.
      if (ws.row_cols.size() < static_cast<std::size_t>(width) + 1) {
        ws.row_cols.resize(static_cast<std::size_t>(width) + 1);
      }
      std::int64_t* row_cols = ws.row_cols.data();
      std::int64_t* stamps = ws.dense.data();
      for (std::int64_t r = r0; r < r1; ++r) {
        std::int64_t n = 0;
        for (std::int64_t p = a.ptr[r]; p < a.ptr[r + 1]; ++p) {
          const std::int64_t br = a.cols[p];
          if (dense) {
            for (std::int64_t q = b.ptr[br]; q < b.ptr[br + 1]; ++q) {
              const std::int64_t c = b.cols[q];
              row_cols[n] = c;
              n += stamps[c - w_lo] != r ? 1 : 0;
              stamps[c - w_lo] = r;
            }
          } else {
            for (std::int64_t q = b.ptr[br]; q < b.ptr[br + 1]; ++q) {
              bool fresh = false;
              row_cols[n] = b.cols[q];
              ws.hash.insert(b.cols[q], fresh);
              n += fresh ? 1 : 0;
            }
          }
        }
        if (!dense) ws.hash.erase_all({row_cols, static_cast<std::size_t>(n)});
        sort_row_columns(row_cols, n, stamps, w_lo, r, dense);
        sym.row_ptr[static_cast<std::size_t>(r) + 1] = n;
        out.insert(out.end(), row_cols, row_cols + n);
      }
      // Rows are sorted: the panel's window runs from the smallest first to the largest last
      // column of its rows.
      gidx_t lo = n_cols, hi = -1;
      std::int64_t at = 0;
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t len = sym.row_ptr[static_cast<std::size_t>(r) + 1];
        if (len > 0) {
          lo = std::min(lo, out[static_cast<std::size_t>(at)]);
          hi = std::max(hi, out[static_cast<std::size_t>(at + len - 1)]);
        }
        at += len;
      }
      if (hi >= lo) {
        sym.panel_lo[static_cast<std::size_t>(rp)] = lo;
        sym.panel_span[static_cast<std::size_t>(rp)] = hi - lo + 1;
      }
      // A stamp of a row of this panel must not match a row of a later panel on this thread:
      // rows only grow, so the stamps stay valid across panels.
    }
  }
  for (std::int64_t r = 0; r < n_rows; ++r) {
    sym.row_ptr[static_cast<std::size_t>(r) + 1] += sym.row_ptr[static_cast<std::size_t>(r)];
  }
  // Appended rather than resized and overwritten: no zero-fill pass over C's columns.
  sym.cols.reserve(static_cast<std::size_t>(sym.nnz()));
  for (std::vector<gidx_t>& in : panel_cols) {
    sym.cols.insert(sym.cols.end(), in.begin(), in.end());
    std::vector<gidx_t>().swap(in);
  }
  return sym;
}

template <class T>
void spgemm_numeric(const SpgemmSymbolic& sym, const CsrIndex& a, std::span<const T> a_values,
                    const CsrIndex& b, std::span<const T> b_values, std::span<T> c_values) {
  const std::int64_t n_rows = a.rows();
  const std::int64_t panel = sym.row_panel;
  const auto n_panels = static_cast<std::int64_t>(sym.panel_dense.size());
  const std::int64_t* b_ptr = b.ptr.data();
  const std::int64_t* b_cols = b.cols.data();
  const T* b_vals = b_values.data();
  const bool stream = static_cast<std::size_t>(sym.nnz()) * sizeof(T) >= kStreamBytes;
#pragma omp parallel
  {
    // All zero between rows: a row zeroes the entries it touched (its C pattern) as it copies
    // them out, so nothing is cleared wholesale.
    std::vector<T> window;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t rp = 0; rp < n_panels; ++rp) {
      const std::int64_t r0 = rp * panel;
      const std::int64_t r1 = std::min(n_rows, r0 + panel);
      const gidx_t lo = sym.panel_lo[static_cast<std::size_t>(rp)];
      const gidx_t span = sym.panel_span[static_cast<std::size_t>(rp)];
      const bool by_value = sym.panel_dense[static_cast<std::size_t>(rp)] != 0 ||
                            static_cast<std::size_t>(span) * sizeof(T) <= kValueWindowBytes;
      if (by_value && window.size() < static_cast<std::size_t>(span)) {
        window.assign(static_cast<std::size_t>(span), T(0));
      }
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t c0 = sym.row_ptr[static_cast<std::size_t>(r)];
        const std::int64_t c1 = sym.row_ptr[static_cast<std::size_t>(r) + 1];
        const std::int64_t* row_cols = sym.cols.data() + c0;
        T* out = c_values.data() + c0;
        if (by_value) {
          // PETSc-style dense axpy: the products add straight into a value per column of the
          // panel's window (one indirection per product), then C's sorted row gathers them and
          // zeroes what it read. Each entry still sums its products in A's row order, then
          // B's, from 0: the same additions as the sorted walk below, so the same bits.
          T* acc = window.data();
          for (std::int64_t p = a.ptr[r]; p < a.ptr[r + 1]; ++p) {
            const std::int64_t br = a.cols[p];
            const T av = a_values[static_cast<std::size_t>(p)];
            const std::int64_t q1 = b_ptr[br + 1];
            for (std::int64_t q = b_ptr[br]; q < q1; ++q) {
              acc[b_cols[q] - lo] += av * b_vals[q];
            }
          }
          for (std::int64_t j = 0; j < c1 - c0; ++j) {
            T& slot = acc[row_cols[j] - lo];
            if (stream) {
              store_streaming(out + j, slot);
            } else {
              out[j] = slot;
            }
            slot = T(0);
          }
        } else {
          // A window too large for the cache (narrow rows spread over a wide matrix): C's row
          // is known and sorted, and every B row it sums is a sorted subset of it, so one
          // forward walk of C's row per B row finds each position.
          std::fill(out, out + (c1 - c0), T(0));
          for (std::int64_t p = a.ptr[r]; p < a.ptr[r + 1]; ++p) {
            const std::int64_t br = a.cols[p];
            const T av = a_values[static_cast<std::size_t>(p)];
            std::int64_t j = 0;
            for (std::int64_t q = b_ptr[br]; q < b_ptr[br + 1]; ++q) {
              const std::int64_t c = b_cols[q];
              while (row_cols[j] < c) ++j;
              out[j] += av * b_vals[q];
            }
          }
        }
      }
    }
#if defined(__SSE2__) && defined(__x86_64__)
    // The streaming stores are weakly ordered: fenced before the region's closing barrier.
    _mm_sfence();
#endif
  }
}

template void spgemm_numeric<float>(const SpgemmSymbolic&, const CsrIndex&, std::span<const float>,
                                    const CsrIndex&, std::span<const float>, std::span<float>);
template void spgemm_numeric<double>(const SpgemmSymbolic&, const CsrIndex&,
                                     std::span<const double>, const CsrIndex&,
                                     std::span<const double>, std::span<double>);

}  // namespace dist

CsrMatrix local_spgemm(const CsrMatrix& a, const CsrMatrix& b, const LocalSpgemmOptions& options) {
  dist::check_local_spgemm_options(options);
  if (b.row_begin != 0 || b.n_rows != b.n_rows_global || b.n_rows != a.n_cols) {
    throw std::invalid_argument(
        "local_spgemm: b must hold the whole of B with a.n_cols rows (a.n_cols " +
        std::to_string(a.n_cols) + ", b rows [" + std::to_string(b.row_begin) + ", " +
        std::to_string(b.row_end()) + ") of " + std::to_string(b.n_rows_global) + ")");
  }
  if (static_cast<gidx_t>(a.row_ptr.size()) != a.n_rows + 1 ||
      static_cast<gidx_t>(b.row_ptr.size()) != b.n_rows + 1) {
    throw std::invalid_argument("local_spgemm: a row pointer does not have n_rows + 1 entries");
  }
  const dist::CsrIndex ai{a.row_ptr, a.col_idx};
  const dist::CsrIndex bi{b.row_ptr, b.col_idx};
  dist::SpgemmSymbolic sym = dist::spgemm_symbolic(ai, bi, b.n_cols, options);
  CsrMatrix c;
  c.n_rows_global = a.n_rows_global;
  c.n_cols = b.n_cols;
  c.row_begin = a.row_begin;
  c.n_rows = a.n_rows;
  c.values.resize(static_cast<std::size_t>(sym.nnz()));
  dist::spgemm_numeric<double>(sym, ai, a.values, bi, b.values, c.values);
  c.row_ptr = std::move(sym.row_ptr);
  c.col_idx = std::move(sym.cols);
  return c;
}

}  // namespace netsparse
