// Local sparse transposition (CSR -> the CsrMatrix of A^T): MeNDA's merge transpose and the two
// CPU baselines MeNDA compares with, scanTrans and mergeTrans (Wang et al., ICS '16).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "netsparse/transpose.hpp"
#include "transpose/merge_tree.hpp"

namespace netsparse {

namespace transpose_detail {

int resolve_threads(int threads, const char* who) {
  if (threads < 0)
    throw std::invalid_argument(std::string(who) +
                                ": threads must be >= 0 (0 = OpenMP's default), got " +
                                std::to_string(threads));
  return threads == 0 ? std::max(1, omp_get_max_threads()) : threads;
}

std::vector<Band> nnz_bands(const CsrMatrix& a, int threads) {
  const std::int64_t nnz = a.nnz();
  const gidx_t n = a.n_cols;
  std::vector<Band> bands(static_cast<std::size_t>(threads));
  if (threads == 1 || nnz == 0 || n <= 1) {
    bands[0] = {0, n, 0, nnz};
    for (std::size_t t = 1; t < bands.size(); ++t) bands[t] = {n, n, nnz, 0};
    return bands;
  }
  int shift = 0;
  const std::int64_t target_buckets = std::int64_t{4096} * threads;
  while (((n - 1) >> shift) + 1 > target_buckets) ++shift;
  const std::int64_t nb = ((n - 1) >> shift) + 1;
  std::vector<std::int64_t> hist(static_cast<std::size_t>(threads * nb), 0);
  const gidx_t* col = a.col_idx.data();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    std::int64_t* h = hist.data() + t * nb;
    const std::int64_t p0 = nnz * t / nt, p1 = nnz * (t + 1) / nt;
    for (std::int64_t p = p0; p < p1; ++p) ++h[col[p] >> shift];
  }
  for (int t = 1; t < threads; ++t)
    for (std::int64_t b = 0; b < nb; ++b) hist[b] += hist[t * nb + b];
  int t = 1;
  std::int64_t run = 0;
  for (std::int64_t b = 0; b < nb && t < threads; ++b) {
    while (t < threads && run >= nnz * t / threads) {
      bands[t].lo = b << shift;
      bands[t].off = run;
      ++t;
    }
    run += hist[b];
  }
  for (; t < threads; ++t) bands[t] = {n, n, nnz, 0};
  for (int u = 0; u < threads; ++u) {
    bands[u].hi = u + 1 < threads ? bands[u + 1].lo : n;
    bands[u].nnz = (u + 1 < threads ? bands[u + 1].off : nnz) - bands[u].off;
  }
  return bands;
}

}  // namespace transpose_detail

namespace {

namespace td = transpose_detail;
using namespace transpose_detail;  // the merge tree's pieces (merge_tree.hpp)

[[noreturn]] void fail(const char* who, const std::string& msg) {
  throw std::invalid_argument(std::string(who) + ": " + msg);
}

std::string describe_bad_row(const CsrMatrix& a, gidx_t r) {
  const std::string row =
      "row " + std::to_string(r) + " (global " + std::to_string(r + a.row_begin) + ")";
  const std::int64_t b = a.row_ptr[r], e = a.row_ptr[r + 1];
  if (e < b)
    return "row_ptr decreases at " + row + ": row_ptr[" + std::to_string(r) +
           "] = " + std::to_string(b) + " > row_ptr[" + std::to_string(r + 1) +
           "] = " + std::to_string(e);
  if (b < 0 || e > a.nnz())
    return "row_ptr of " + row + " points outside [0, nnz = " + std::to_string(a.nnz()) + "]";
  for (std::int64_t p = b; p < e; ++p) {
    const gidx_t c = a.col_idx[p];
    if (c < 0 || c >= a.n_cols)
      return row + ": column " + std::to_string(c) + " (position " + std::to_string(p) +
             ") outside [0, n_cols = " + std::to_string(a.n_cols) + ")";
    if (p > b && c <= a.col_idx[p - 1])
      return row + ": columns not sorted or repeated (" + std::to_string(a.col_idx[p - 1]) +
             " then " + std::to_string(c) + " at position " + std::to_string(p) + ")";
  }
  return row + ": malformed";
}

void check_csr_threads(const CsrMatrix& a, const char* who, int threads) {
  if (a.n_rows < 0 || a.n_cols < 0 || a.row_begin < 0 || a.n_rows_global < 0)
    fail(who, "negative size (n_rows " + std::to_string(a.n_rows) + ", n_cols " +
                  std::to_string(a.n_cols) + ", row_begin " + std::to_string(a.row_begin) +
                  ", n_rows_global " + std::to_string(a.n_rows_global) + ")");
  if (a.row_begin + a.n_rows > a.n_rows_global)
    fail(who, "row block [" + std::to_string(a.row_begin) + ", " + std::to_string(a.row_end()) +
                  ") lies outside the matrix's " + std::to_string(a.n_rows_global) + " rows");
  if (a.row_ptr.size() != static_cast<std::size_t>(a.n_rows) + 1)
    fail(who, "row_ptr has " + std::to_string(a.row_ptr.size()) +
                  " entries, expected n_rows + 1 = " + std::to_string(a.n_rows + 1));
  if (a.row_ptr[0] != 0) fail(who, "row_ptr[0] = " + std::to_string(a.row_ptr[0]) + ", not 0");
  if (a.row_ptr.back() != std::ssize(a.col_idx))
    fail(who, "row_ptr[n_rows] = " + std::to_string(a.row_ptr.back()) + " but col_idx has " +
                  std::to_string(a.col_idx.size()) + " entries");
  if (a.values.size() != a.col_idx.size())
    fail(who, "values has " + std::to_string(a.values.size()) + " entries, col_idx " +
                  std::to_string(a.col_idx.size()));
  const std::int64_t nnz = a.nnz();
  const std::int64_t* rp = a.row_ptr.data();
  const gidx_t* col = a.col_idx.data();
  const gidx_t n_cols = a.n_cols;
  gidx_t first_bad = a.n_rows;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(min : first_bad)
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    const std::int64_t b = rp[r], e = rp[r + 1];
    bool bad = e < b || b < 0 || e > nnz;
    if (!bad) {
      gidx_t prev = -1;
      for (std::int64_t p = b; p < e; ++p) {
        const gidx_t c = col[p];
        bad |= (c <= prev) | (c >= n_cols);
        prev = c;
      }
    }
    if (bad) first_bad = std::min(first_bad, r);
  }
  if (first_bad < a.n_rows) fail(who, describe_bad_row(a, first_bad));
}

void shape_output(const CsrMatrix& a, CsrMatrix& out) {
  out.n_rows = a.n_cols;
  out.n_rows_global = a.n_cols;
  out.row_begin = 0;
  out.n_cols = a.n_rows_global;
  out.row_ptr.resize(static_cast<std::size_t>(a.n_cols) + 1);
  out.col_idx.resize(static_cast<std::size_t>(a.nnz()));
  out.values.resize(static_cast<std::size_t>(a.nnz()));
  out.row_ptr[0] = 0;
  out.row_ptr[static_cast<std::size_t>(a.n_cols)] = a.nnz();
}

// Runs body(t, nt) on every OpenMP thread and rethrows the first exception after the region.
template <class F>
void parallel_guarded(int threads, F&& body) {
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    try {
      body(omp_get_thread_num(), omp_get_num_threads());
    } catch (...) {
#pragma omp critical(netsparse_transpose_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// The arrays of a transpose's input and (shaped) output that the scan and mergeTrans loops walk.
struct RawArrays {
  gidx_t n;  // A's columns: the output's rows
  std::int64_t nnz;
  const std::int64_t* rp;
  const gidx_t* col;
  const double* val;
  std::int64_t* orp;
  gidx_t* oc;
  double* ov;
  gidx_t row_begin;
};

RawArrays raw_arrays(const CsrMatrix& a, CsrMatrix& out) {
  return {a.n_cols,           a.nnz(),           a.row_ptr.data(),
          a.col_idx.data(),   a.values.data(),   out.row_ptr.data(),
          out.col_idx.data(), out.values.data(), a.row_begin};
}

// The scan step both parallel transposes share, for thread t of a parallel region (its barrier
// is the region's): orp[c0, c1) holds the entry counts of the thread's columns, `total` their
// sum. Turns them into the columns' first positions in the output (the column ranges of threads
// 0..t-1 first, chunk_total of nt + 1 entries with chunk_total[0] == 0 passing the totals on)
// and calls at_start(c, first) for each column.
template <class AtStart>
void column_starts(int t, gidx_t c0, gidx_t c1, std::int64_t total, std::int64_t* orp,
                   std::vector<std::int64_t>& chunk_total, AtStart at_start) {
  chunk_total[static_cast<std::size_t>(t) + 1] = total;
#pragma omp barrier
  std::int64_t run = 0;
  for (int u = 0; u <= t; ++u) run += chunk_total[static_cast<std::size_t>(u)];
  for (gidx_t c = c0; c < c1; ++c) {
    const std::int64_t count = orp[c];
    orp[c] = run;
    at_start(c, run);
    run += count;
  }
}

// ---- scanTrans: counting sort by column, per-thread histograms ------------------------------
// Thread t takes the rows holding an equal share of the nonzeros and counts their columns in
// its own histogram; a scan over (column, thread) turns the histograms into write cursors, and
// every thread scatters its rows (so a column's entries come out in row order).
void scan_transpose(const CsrMatrix& a, CsrMatrix& out, int threads) {
  // Plain variables, not a structured binding: Clang before 16 cannot capture bindings in the
  // parallel region's lambda (the sanitizer tree is built with Clang).
  const RawArrays arrays = raw_arrays(a, out);
  const gidx_t n = arrays.n, row_begin = arrays.row_begin;
  const std::int64_t nnz = arrays.nnz;
  const std::int64_t* rp = arrays.rp;
  const gidx_t* col = arrays.col;
  const double* val = arrays.val;
  std::int64_t* orp = arrays.orp;
  gidx_t* oc = arrays.oc;
  double* ov = arrays.ov;
  AlignedArray<std::int64_t> hist = make_aligned_array<std::int64_t>(
      static_cast<std::size_t>(threads) * static_cast<std::size_t>(std::max<gidx_t>(n, 1)));
  std::vector<std::int64_t> chunk_total(static_cast<std::size_t>(threads) + 1, 0);
  parallel_guarded(threads, [&](int t, int nt) {
    std::int64_t* h = hist.get() + static_cast<std::int64_t>(t) * n;
    const gidx_t r0 = std::upper_bound(rp, rp + a.n_rows + 1, nnz * t / nt) - rp - 1;
    const gidx_t r1 = t + 1 == nt
                          ? a.n_rows
                          : std::upper_bound(rp, rp + a.n_rows + 1, nnz * (t + 1) / nt) - rp - 1;
    std::fill(h, h + n, 0);
    for (std::int64_t p = rp[r0]; p < rp[r1]; ++p) ++h[col[p]];
#pragma omp barrier
    const gidx_t c0 = n * t / nt, c1 = n * (t + 1) / nt;
    std::int64_t total = 0;
    for (gidx_t c = c0; c < c1; ++c) {
      std::int64_t sum = 0;
      for (int u = 0; u < nt; ++u) {
        std::int64_t& x = hist[static_cast<std::int64_t>(u) * n + c];
        const std::int64_t v = x;
        x = sum;
        sum += v;
      }
      orp[c] = sum;  // the column's count for now
      total += sum;
    }
    column_starts(t, c0, c1, total, orp, chunk_total, [&](gidx_t c, std::int64_t first) {
      for (int u = 0; u < nt; ++u) hist[static_cast<std::int64_t>(u) * n + c] += first;
    });
#pragma omp barrier
    for (gidx_t r = r0; r < r1; ++r) {
      const gidx_t grow = row_begin + r;
      for (std::int64_t p = rp[r]; p < rp[r + 1]; ++p) {
        const std::int64_t q = h[col[p]]++;
        oc[q] = grow;
        ov[q] = val[p];
      }
    }
  });
  orp[n] = nnz;
}

// ---- mergeTrans (Wang et al.) ----------------------------------------------------------------
// As MeNDA describes its CPU baseline: the nonzeros are cut into one block per thread (equal
// counts, any position); each thread sorts its block by (column, row) with a counting sort on
// the column (the block's rows are already in order), writing COO; then ceil(log2 threads)
// rounds merge adjacent sorted blocks pairwise, every merge split among all threads by merge
// path, with a barrier between rounds. The last round writes the output.
struct Coo {
  AlignedArray<gidx_t> col, row;
  AlignedArray<double> val;
  explicit Coo(std::size_t n)
      : col(make_aligned_array<gidx_t>(n)),
        row(make_aligned_array<gidx_t>(n)),
        val(make_aligned_array<double>(n)) {}
};

inline bool key_less(const Coo& s, std::int64_t i, std::int64_t j) {
  return s.col[i] < s.col[j] || (s.col[i] == s.col[j] && s.row[i] < s.row[j]);
}

void merge_trans_cpu(const CsrMatrix& a, CsrMatrix& out, int threads) {
  // Plain variables, not a structured binding: Clang before 16 cannot capture bindings in the
  // parallel region's lambda (the sanitizer tree is built with Clang).
  const RawArrays arrays = raw_arrays(a, out);
  const gidx_t n = arrays.n, row_begin = arrays.row_begin;
  const std::int64_t nnz = arrays.nnz;
  const std::int64_t* rp = arrays.rp;
  const gidx_t* col = arrays.col;
  const double* val = arrays.val;
  std::int64_t* orp = arrays.orp;
  gidx_t* oc = arrays.oc;
  double* ov = arrays.ov;
  int rounds = 0;
  while ((1 << rounds) < threads) ++rounds;
  Coo buf0(threads > 1 ? static_cast<std::size_t>(nnz) : 0);
  Coo buf1(rounds > 1 ? static_cast<std::size_t>(nnz) : 0);
  AlignedArray<std::int64_t> hist = make_aligned_array<std::int64_t>(
      static_cast<std::size_t>(threads) * static_cast<std::size_t>(std::max<gidx_t>(n, 1)));
  std::vector<std::int64_t> chunk_total(static_cast<std::size_t>(threads) + 1, 0);
  std::vector<std::int64_t> run_start;
  parallel_guarded(threads, [&](int t, int nt) {
    // 1. Sort the block [p0, p1) by column.
    const std::int64_t p0 = nnz * t / nt, p1 = nnz * (t + 1) / nt;
    std::int64_t* h = hist.get() + static_cast<std::int64_t>(t) * n;
    std::fill(h, h + n, 0);
    for (std::int64_t p = p0; p < p1; ++p) ++h[col[p]];
      // Column totals over the blocks give the output's row_ptr (a scan like scanTrans's).
#pragma omp barrier
    const gidx_t c0 = n * t / nt, c1 = n * (t + 1) / nt;
    std::int64_t total = 0;
    for (gidx_t c = c0; c < c1; ++c) {
      std::int64_t sum = 0;
      for (int u = 0; u < nt; ++u) sum += hist[static_cast<std::int64_t>(u) * n + c];
      orp[c] = sum;
      total += sum;
    }
    column_starts(t, c0, c1, total, orp, chunk_total, [](gidx_t, std::int64_t) {});
    // The block's own exclusive prefix (its sorted order starts at p0).
    std::int64_t pos = p0;
    for (gidx_t c = 0; c < n; ++c) {
      const std::int64_t v = h[c];
      h[c] = pos;
      pos += v;
    }
    gidx_t r = std::upper_bound(rp, rp + a.n_rows + 1, p0) - rp - 1;
    if (nt == 1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        while (p >= rp[r + 1]) ++r;
        const std::int64_t q = h[col[p]]++;
        oc[q] = row_begin + r;
        ov[q] = val[p];
      }
      return;
    }
    for (std::int64_t p = p0; p < p1; ++p) {
      while (p >= rp[r + 1]) ++r;
      const std::int64_t q = h[col[p]]++;
      buf0.col[q] = col[p];
      buf0.row[q] = row_begin + r;
      buf0.val[q] = val[p];
    }
#pragma omp single
    {
      run_start.clear();
      for (int u = 0; u <= nt; ++u) run_start.push_back(nnz * u / nt);
    }
    // 2. Pairwise merge rounds (the single above ends with a barrier).
    Coo* src = &buf0;
    Coo* dst = &buf1;
    std::vector<std::int64_t> starts = run_start;
    while (starts.size() > 2) {
      const bool last = starts.size() == 3;
      std::vector<std::int64_t> next;
      for (std::size_t i = 0; i + 1 < starts.size(); i += 2) {
        const std::int64_t x0 = starts[i], x1 = starts[i + 1];
        const std::int64_t x2 = i + 2 < starts.size() ? starts[i + 2] : x1;
        next.push_back(x0);
        const std::int64_t len = x2 - x0, na = x1 - x0, nb = x2 - x1;
        const std::int64_t d0 = len * t / nt, d1 = len * (t + 1) / nt;
        // Merge path: where diagonal d crosses, as (i in A, d - i in B).
        const auto split = [&](std::int64_t d) {
          std::int64_t lo = std::max<std::int64_t>(0, d - nb), hi = std::min(d, na);
          while (lo < hi) {
            const std::int64_t mid = (lo + hi) / 2;
            if (!key_less(*src, x1 + (d - mid - 1), x0 + mid))
              lo = mid + 1;
            else
              hi = mid;
          }
          return lo;
        };
        std::int64_t ia = x0 + split(d0), ib = x1 + (d0 - (ia - x0));
        const std::int64_t ea = x1, eb = x2;
        for (std::int64_t q = x0 + d0; q < x0 + d1; ++q) {
          const bool take_a = ib >= eb || (ia < ea && !key_less(*src, ib, ia));
          const std::int64_t s = take_a ? ia++ : ib++;
          if (last) {
            oc[q] = src->row[s];
            ov[q] = src->val[s];
          } else {
            dst->col[q] = src->col[s];
            dst->row[q] = src->row[s];
            dst->val[q] = src->val[s];
          }
        }
      }
      next.push_back(starts.back());
      starts = std::move(next);
      std::swap(src, dst);
#pragma omp barrier
    }
  });
  orp[n] = nnz;
}

// ---- MeNDA's merge transpose ----------------------------------------------------------------
struct RowStream {
  std::int64_t b, e;  // the part of the row inside the band: positions [b, e) of col_idx
  std::uint64_t row;  // local row number (the low bits of the key)
};

// The streams of a first-pass merge: parts of CSR rows, key = (column << row_bits) | row.
struct RowPartStreams {
  struct Leaf {
    std::int64_t p, e;
    std::uint64_t row;
  };
  const gidx_t* keys;  // the columns
  const double* values;
  int row_bits;
  std::uint64_t key(const Leaf& x, std::int64_t p) const {
    return (static_cast<std::uint64_t>(keys[p]) << row_bits) | x.row;
  }
  double value(const Leaf&, std::int64_t p) const { return values[p]; }
};
using RawLeaves = StreamLeaves<RowPartStreams>;

// Leaves of a later pass: intermediate COO streams (key, value) in a buffer.
using BufLeaves = PairLeaves<double>;

struct BufSink {
  std::uint64_t* key;
  double* val;
  void put(std::uint64_t k, double v) {
    *key++ = k;
    *val++ = v;
  }
};

// The root of the last pass: decodes the key into the output row (A's column: fills row_ptr
// as columns are passed) and column (A's global row).
struct FinalSink {
  gidx_t* out_col;
  double* out_val;
  std::int64_t* row_ptr;
  std::int64_t pos;
  gidx_t cur;  // row_ptr is final up to and including cur
  int row_bits;
  std::uint64_t row_mask;
  gidx_t row_begin;
  void put(std::uint64_t k, double v) {
    const auto c = static_cast<gidx_t>(k >> row_bits);
    while (cur < c) row_ptr[++cur] = pos;
    out_col[pos] = row_begin + static_cast<gidx_t>(k & row_mask);
    out_val[pos] = v;
    ++pos;
  }
};

class MergeWorker {
 public:
  MergeWorker(const CsrMatrix& a, const Band& band, bool first, bool last, int leaves, int row_bits,
              CsrMatrix& out)
      : a_(a), band_(band), leaves_(leaves), row_bits_(row_bits), out_(out), tree_(leaves) {
    collect_streams(first, last);
    const std::size_t n = streams_.size();
    int depth = 1;
    for (std::size_t p = static_cast<std::size_t>(leaves); p < n;
         p *= static_cast<std::size_t>(leaves))
      ++depth;
    children_.assign(
        static_cast<std::size_t>(depth) + 1,
        std::vector<std::pair<std::int64_t, std::int64_t>>(static_cast<std::size_t>(leaves)));
    raw_.resize(static_cast<std::size_t>(leaves));
    buf_.resize(static_cast<std::size_t>(leaves));
    if (n > static_cast<std::size_t>(leaves)) {
      tkey_ = make_aligned_array<std::uint64_t>(static_cast<std::size_t>(band.nnz));
      tval_ = make_aligned_array<double>(static_cast<std::size_t>(band.nnz));
    }
  }

  void run() {
    if (band_.lo >= band_.hi) return;
    std::int64_t* rp = out_.row_ptr.data();
    rp[band_.lo] = band_.off;
    cur_ = band_.lo;
    if (!streams_.empty()) node(0, streams_.size(), 0);
    const std::int64_t end = band_.off + band_.nnz;
    for (gidx_t c = cur_ + 1; c < band_.hi; ++c) rp[c] = end;
  }

 private:
  void collect_streams(bool first, bool last) {
    const std::int64_t* rp = a_.row_ptr.data();
    const gidx_t* col = a_.col_idx.data();
    streams_.reserve(static_cast<std::size_t>(std::min<std::int64_t>(a_.n_rows, band_.nnz)));
    for (gidx_t r = 0; r < a_.n_rows; ++r) {
      std::int64_t b = rp[r], e = rp[r + 1];
      if (b == e) continue;
      if (!first) {
        if (col[e - 1] < band_.lo) continue;
        b = std::lower_bound(col + b, col + e, band_.lo) - col;
      }
      if (!last) {
        if (col[b] >= band_.hi) continue;
        e = std::lower_bound(col + b, col + e, band_.hi) - col;
      }
      if (b < e) streams_.push_back({b, e, static_cast<std::uint64_t>(r)});
    }
  }

  // Merges streams [s0, s1) (a subtree `depth` levels below the root) and returns where its
  // output lies (offset in the band, length) in the buffer of that depth.
  std::pair<std::int64_t, std::int64_t> node(std::size_t s0, std::size_t s1, int depth) {
    const auto m = static_cast<std::int64_t>(s1 - s0);
    const std::int64_t off = cursor_;
    std::int64_t total = 0;
    if (m <= leaves_) {
      for (std::int64_t i = 0; i < m; ++i) {
        const RowStream& s = streams_[s0 + static_cast<std::size_t>(i)];
        raw_[static_cast<std::size_t>(i)] = {s.b, s.e, s.row};
        total += s.e - s.b;
      }
      cursor_ += total;
      RawLeaves lv{{a_.col_idx.data(), a_.values.data(), row_bits_}, raw_.data()};
      emit(lv, static_cast<int>(m), depth, off, total);
      return {off, total};
    }
    std::int64_t chunk = 1;
    while (chunk * leaves_ < m) chunk *= leaves_;
    auto& kids = children_[static_cast<std::size_t>(depth)];
    int nk = 0;
    for (std::size_t c0 = s0; c0 < s1; c0 += static_cast<std::size_t>(chunk))
      kids[static_cast<std::size_t>(nk++)] =
          node(c0, std::min(s1, c0 + static_cast<std::size_t>(chunk)), depth + 1);
    for (int i = 0; i < nk; ++i) {
      const auto& [o, len] = kids[static_cast<std::size_t>(i)];
      buf_[static_cast<std::size_t>(i)] = {o, o + len};
      total += len;
    }
    BufLeaves lv{{key_buffer(depth + 1), val_buffer(depth + 1)}, buf_.data()};
    emit(lv, nk, depth, off, total);
    return {off, total};
  }

  // Intermediate streams of odd depth live in the thread's scratch buffer, those of even
  // depth in the band's part of the output arrays (the key in col_idx's storage): a node's
  // output region is the union of its children's, in the other buffer.
  std::uint64_t* key_buffer(int depth) {
    return depth % 2 == 1 ? tkey_.get()
                          : reinterpret_cast<std::uint64_t*>(out_.col_idx.data() + band_.off);
  }
  double* val_buffer(int depth) {
    return depth % 2 == 1 ? tval_.get() : out_.values.data() + band_.off;
  }

  template <class Leaves>
  void emit(Leaves& lv, int k, int depth, std::int64_t off, std::int64_t total) {
    if (depth == 0) {
      FinalSink sink{out_.col_idx.data(),
                     out_.values.data(),
                     out_.row_ptr.data(),
                     band_.off + off,
                     cur_,
                     row_bits_,
                     (std::uint64_t{1} << row_bits_) - 1,
                     a_.row_begin};
      td::merge_leaves(lv, k, sink, total, tree_);
      cur_ = sink.cur;
    } else {
      BufSink sink{key_buffer(depth) + off, val_buffer(depth) + off};
      td::merge_leaves(lv, k, sink, total, tree_);
    }
  }

  const CsrMatrix& a_;
  Band band_;
  int leaves_;
  int row_bits_;
  CsrMatrix& out_;
  td::TreeScratch tree_;
  std::vector<RowStream> streams_;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> children_;
  std::vector<RawLeaves::Leaf> raw_;
  std::vector<BufLeaves::Leaf> buf_;
  AlignedArray<std::uint64_t> tkey_;
  AlignedArray<double> tval_;
  std::int64_t cursor_ = 0;
  gidx_t cur_ = 0;
};

int bit_width_of_max(gidx_t n) {  // bits to hold 0 .. n - 1
  return n <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<std::uint64_t>(n - 1)));
}

void merge_transpose(const CsrMatrix& a, CsrMatrix& out, int threads, int leaves) {
  const int row_bits = bit_width_of_max(a.n_rows);
  const std::vector<Band> bands = td::nnz_bands(a, threads);
  parallel_guarded(threads, [&](int t, int nt) {
    for (int b = t; b < threads; b += nt) {
      MergeWorker w(a, bands[static_cast<std::size_t>(b)], b == 0, b + 1 == threads, leaves,
                    row_bits, out);
      w.run();
    }
  });
}

}  // namespace

void check_csr(const CsrMatrix& a, const char* who) {
  check_csr_threads(a, who, std::max(1, omp_get_max_threads()));
}

void transpose_into(const CsrMatrix& a, CsrMatrix& out, const TransposeOptions& options) {
  constexpr const char* who = "netsparse::transpose";
  if (&out == &a) fail(who, "the output must not be the input matrix");
  const int threads = td::resolve_threads(options.threads, who);
  const int leaves = options.leaves == 0 ? kDefaultTransposeLeaves : options.leaves;
  if (options.method == TransposeMethod::merge && leaves < 2)
    fail(who, "the merge tree needs at least 2 leaves, got " + std::to_string(options.leaves));
  if (options.check_input) check_csr_threads(a, who, threads);
  shape_output(a, out);
  if (a.nnz() == 0) {
    std::fill(out.row_ptr.begin(), out.row_ptr.end(), 0);
    return;
  }
  switch (options.method) {
    case TransposeMethod::merge:
      if (bit_width_of_max(a.n_cols) + bit_width_of_max(a.n_rows) <= 63) {
        merge_transpose(a, out, threads, leaves);
        return;
      }
      scan_transpose(a, out, threads);  // the (column, row) key would not fit 63 bits
      return;
    case TransposeMethod::scan:
      scan_transpose(a, out, threads);
      return;
    case TransposeMethod::merge_trans_cpu:
      merge_trans_cpu(a, out, threads);
      return;
  }
  fail(who, "unknown method");
}

CsrMatrix transpose(const CsrMatrix& a, const TransposeOptions& options) {
  CsrMatrix out;
  transpose_into(a, out, options);
  return out;
}

}  // namespace netsparse
