// COO -> CSR assembly: a counting sort by row, then a sort of each row by column, then a
// compaction that sums duplicates.
//
// Parallel counting sort without atomics where memory allows: each thread counts its own
// pieces of the input into a private histogram, and the histograms give every (thread, row)
// pair its own slots. When n_threads x n_rows counters would cost more than the entries
// themselves (very sparse blocks, many threads), counts and slots come from relaxed atomics.
// Either way each row is then sorted by (column, value bits), so the result does not depend on
// where the placement put an entry.
#include "netsparse/coo.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace netsparse {

namespace {

// Below this many triplets, starting threads costs more than it saves.
constexpr std::int64_t kParallelThreshold = std::int64_t{1} << 15;
// Rows handed to a thread at a time in the per-row phases (rows are short; degrees skewed).
constexpr int kRowChunk = 1024;

// How a (column, value) pair is held while rows are sorted. The order is column first, then
// the value's bits, so duplicates are summed in an order fixed by their values alone.
struct PackedEntry {  // columns < 2^32: one 64-bit key, sorted as an integer
  using Entry = std::uint64_t;
  static Entry make(gidx_t col, float value) noexcept {
    return (static_cast<std::uint64_t>(col) << 32) | std::bit_cast<std::uint32_t>(value);
  }
  static gidx_t col(Entry e) noexcept { return static_cast<gidx_t>(e >> 32); }
  static float value(Entry e) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(e));
  }
  static bool less(Entry x, Entry y) noexcept { return x < y; }
};

struct WideEntry {  // any column
  struct Entry {
    gidx_t col;
    float value;
  };
  static Entry make(gidx_t col, float value) noexcept { return {col, value}; }
  static gidx_t col(const Entry& e) noexcept { return e.col; }
  static float value(const Entry& e) noexcept { return e.value; }
  static bool less(const Entry& x, const Entry& y) noexcept {
    if (x.col != y.col) return x.col < y.col;
    return std::bit_cast<std::uint32_t>(x.value) < std::bit_cast<std::uint32_t>(y.value);
  }
};

struct Piece {
  const Triplet* begin;
  const Triplet* end;
};

// Splits the parts into pieces of at most max_len triplets, so threads share the work even
// when it arrives as one big part.
std::vector<Piece> split_into_pieces(std::span<const std::span<const Triplet>> parts,
                                     std::int64_t max_len) {
  std::vector<Piece> pieces;
  for (const auto& part : parts) {
    const Triplet* p = part.data();
    const Triplet* end = p + part.size();
    while (p < end) {
      const Triplet* q = end - p > max_len ? p + max_len : end;
      pieces.push_back({p, q});
      p = q;
    }
  }
  return pieces;
}

void validate(const std::vector<Piece>& pieces, bool parallel, gidx_t n_cols, gidx_t row_begin,
              gidx_t row_end) {
  // The first bad triplet in input order is reported.
  const auto n_pieces = static_cast<std::int64_t>(pieces.size());
  std::vector<const Triplet*> first_bad(pieces.size(), nullptr);
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (std::int64_t k = 0; k < n_pieces; ++k) {
    for (const Triplet* t = pieces[k].begin; t < pieces[k].end; ++t) {
      if (t->row < row_begin || t->row >= row_end || t->col < 0 || t->col >= n_cols) {
        first_bad[k] = t;
        break;
      }
    }
  }
  for (const Triplet* t : first_bad) {
    if (t == nullptr) continue;
    throw std::invalid_argument("coo_to_csr: triplet (" + std::to_string(t->row) + ", " +
                                std::to_string(t->col) + ") is outside rows [" +
                                std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                ") x columns [0, " + std::to_string(n_cols) + ")");
  }
}

// Counting sort of the triplets by row into entries; start gets each row's first slot
// (n_rows + 1 entries).
template <class Codec>
void bucket_by_row(const std::vector<Piece>& pieces, gidx_t row_begin, gidx_t n_rows, int n_threads,
                   typename Codec::Entry* entries, std::vector<std::int64_t>& start) {
  const auto n_pieces = static_cast<std::int64_t>(pieces.size());
  start.assign(static_cast<size_t>(n_rows) + 1, 0);
  std::int64_t total = 0;
  for (const Piece& piece : pieces) total += piece.end - piece.begin;

  if (n_threads == 1) {
    for (const Piece& piece : pieces) {
      for (const Triplet* t = piece.begin; t < piece.end; ++t) ++start[t->row - row_begin + 1];
    }
    for (gidx_t r = 0; r < n_rows; ++r) start[r + 1] += start[r];
    std::vector<std::int64_t> cursor(start.begin(), start.end() - 1);
    for (const Piece& piece : pieces) {
      for (const Triplet* t = piece.begin; t < piece.end; ++t) {
        entries[cursor[t->row - row_begin]++] = Codec::make(t->col, t->value);
      }
    }
    return;
  }

  if (static_cast<std::int64_t>(n_threads) * n_rows <= std::max<std::int64_t>(total, 1 << 20)) {
    // Private histograms: slot[t * n_rows + r] is thread t's next slot in row r. Thread t
    // handles pieces t, t + T, t + 2T, ... in both passes.
    std::vector<std::int64_t> slot(static_cast<size_t>(n_threads) * n_rows, 0);
#pragma omp parallel num_threads(n_threads)
    {
      // The runtime may grant fewer threads than asked for: stride by the real team size.
      const int team = omp_get_num_threads();
      const int t = omp_get_thread_num();
      std::int64_t* const mine = slot.data() + static_cast<size_t>(t) * n_rows;
      for (std::int64_t k = t; k < n_pieces; k += team) {
        for (const Triplet* e = pieces[k].begin; e < pieces[k].end; ++e) ++mine[e->row - row_begin];
      }
#pragma omp barrier
#pragma omp for schedule(static)
      for (gidx_t r = 0; r < n_rows; ++r) {
        std::int64_t count = 0;
        for (int u = 0; u < team; ++u) count += slot[static_cast<size_t>(u) * n_rows + r];
        start[r + 1] = count;
      }
#pragma omp single
      for (gidx_t r = 0; r < n_rows; ++r) start[r + 1] += start[r];
#pragma omp for schedule(static)
      for (gidx_t r = 0; r < n_rows; ++r) {
        std::int64_t next = start[r];
        for (int u = 0; u < team; ++u) {
          const std::int64_t count = slot[static_cast<size_t>(u) * n_rows + r];
          slot[static_cast<size_t>(u) * n_rows + r] = next;
          next += count;
        }
      }
      for (std::int64_t k = t; k < n_pieces; k += team) {
        for (const Triplet* e = pieces[k].begin; e < pieces[k].end; ++e) {
          entries[mine[e->row - row_begin]++] = Codec::make(e->col, e->value);
        }
      }
    }
    return;
  }

  // Relaxed atomics: counts into start[r + 1], then slots from a cursor per row.
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (std::int64_t k = 0; k < n_pieces; ++k) {
    for (const Triplet* t = pieces[k].begin; t < pieces[k].end; ++t) {
      std::atomic_ref<std::int64_t>(start[t->row - row_begin + 1])
          .fetch_add(1, std::memory_order_relaxed);
    }
  }
  for (gidx_t r = 0; r < n_rows; ++r) start[r + 1] += start[r];
  std::vector<std::int64_t> cursor(start.begin(), start.end() - 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (std::int64_t k = 0; k < n_pieces; ++k) {
    for (const Triplet* t = pieces[k].begin; t < pieces[k].end; ++t) {
      const std::int64_t at = std::atomic_ref<std::int64_t>(cursor[t->row - row_begin])
                                  .fetch_add(1, std::memory_order_relaxed);
      entries[at] = Codec::make(t->col, t->value);
    }
  }
}

template <class Codec>
CsrMatrix assemble(const std::vector<Piece>& pieces, std::int64_t total, gidx_t n_rows_global,
                   gidx_t n_cols, gidx_t row_begin, gidx_t row_end, int n_threads) {
  using Entry = typename Codec::Entry;
  const gidx_t n_rows = row_end - row_begin;
  const bool parallel = n_threads > 1;

  // Uninitialized storage: every slot is written exactly once.
  std::unique_ptr<Entry[]> entries(new Entry[static_cast<size_t>(total)]);
  std::vector<std::int64_t> start;
  bucket_by_row<Codec>(pieces, row_begin, n_rows, n_threads, entries.get(), start);

  CsrMatrix out;
  out.n_rows_global = n_rows_global;
  out.n_cols = n_cols;
  out.row_begin = row_begin;
  out.n_rows = n_rows;
  out.row_ptr.assign(static_cast<size_t>(n_rows) + 1, 0);
  // Sort each row; count its distinct columns into row_ptr[r + 1].
#pragma omp parallel for schedule(dynamic, kRowChunk) if (parallel) num_threads(n_threads)
  for (gidx_t r = 0; r < n_rows; ++r) {
    Entry* const first = entries.get() + start[r];
    Entry* const last = entries.get() + start[r + 1];
    std::sort(first, last, Codec::less);
    std::int64_t distinct = 0;
    for (const Entry* e = first; e < last; ++e) {
      distinct += (e == first || Codec::col(*e) != Codec::col(e[-1]));
    }
    out.row_ptr[r + 1] = distinct;
  }
  for (gidx_t r = 0; r < n_rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];

  // Compact, summing duplicates (in double, rounded once).
  const std::int64_t nnz = out.row_ptr[n_rows];
  out.col_idx.resize(static_cast<size_t>(nnz));
  out.values.resize(static_cast<size_t>(nnz));
#pragma omp parallel for schedule(dynamic, kRowChunk) if (parallel) num_threads(n_threads)
  for (gidx_t r = 0; r < n_rows; ++r) {
    const Entry* e = entries.get() + start[r];
    const Entry* const last = entries.get() + start[r + 1];
    std::int64_t dst = out.row_ptr[r];
    while (e < last) {
      const gidx_t col = Codec::col(*e);
      double sum = Codec::value(*e);
      for (++e; e < last && Codec::col(*e) == col; ++e) sum += Codec::value(*e);
      out.col_idx[dst] = col;
      out.values[dst] = static_cast<float>(sum);
      ++dst;
    }
  }
  return out;
}

}  // namespace

CsrMatrix coo_to_csr(std::span<const std::span<const Triplet>> parts, gidx_t n_rows_global,
                     gidx_t n_cols, gidx_t row_begin, gidx_t row_end) {
  if (n_rows_global < 0 || n_cols < 0 || row_begin < 0 || row_begin > row_end ||
      row_end > n_rows_global) {
    throw std::invalid_argument("coo_to_csr: rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_end) + ") are not a block of a " +
                                std::to_string(n_rows_global) + " x " + std::to_string(n_cols) +
                                " matrix");
  }
  std::int64_t total = 0;
  for (const auto& part : parts) total += static_cast<std::int64_t>(part.size());
  const int n_threads = total >= kParallelThreshold ? omp_get_max_threads() : 1;
  const std::vector<Piece> pieces =
      split_into_pieces(parts, std::max<std::int64_t>(4096, total / (8 * n_threads) + 1));
  validate(pieces, n_threads > 1, n_cols, row_begin, row_end);
  if (n_cols <= (gidx_t{1} << 32)) {
    return assemble<PackedEntry>(pieces, total, n_rows_global, n_cols, row_begin, row_end,
                                 n_threads);
  }
  return assemble<WideEntry>(pieces, total, n_rows_global, n_cols, row_begin, row_end, n_threads);
}

CsrMatrix coo_to_csr(std::span<const Triplet> triplets, gidx_t n_rows_global, gidx_t n_cols,
                     gidx_t row_begin, gidx_t row_end) {
  const std::span<const Triplet> parts[1] = {triplets};
  return coo_to_csr(std::span<const std::span<const Triplet>>(parts), n_rows_global, n_cols,
                    row_begin, row_end);
}

}  // namespace netsparse
