// COO -> CSR assembly: a counting sort by row, then a sort of each row by column, then a
// compaction that sums duplicates.
//
// Parallel counting sort without atomics where memory allows: each thread counts its own
// pieces of the input into a private histogram, and the histograms give every (thread, row)
// pair its own slots. When n_threads x n_rows counters would cost more than the entries
// themselves (very sparse blocks, many threads), counts and slots come from relaxed atomics.
// Either way each row is then sorted by (column, value bits), so the result does not depend on
// where the placement put an entry.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparse/coo_assembly.hpp"

namespace netsparse {

namespace sparse_detail {

namespace {

// Below this many triplets, starting threads costs more than it saves.
constexpr std::int64_t kParallelThreshold = std::int64_t{1} << 15;
// Rows handed to a thread at a time in the per-row phases (rows are short; degrees skewed).
constexpr int kRowChunk = 1024;

// How a (column, value) pair is held while rows are sorted. The order is column first, then
// the value's bits, so duplicates are summed in an order fixed by their values alone. (Values
// are double: a 64-bit key packing a 32-bit column with a float value no longer fits, so every
// matrix uses the 16-byte entry.)
struct ColumnValueEntry {
  struct Entry {
    gidx_t col;
    double value;
  };
  static Entry make(gidx_t col, double value) noexcept { return {col, value}; }
  static gidx_t col(const Entry& e) noexcept { return e.col; }
  static double value(const Entry& e) noexcept { return e.value; }
  static bool less(const Entry& x, const Entry& y) noexcept {
    if (x.col != y.col) return x.col < y.col;
    return std::bit_cast<std::uint64_t>(x.value) < std::bit_cast<std::uint64_t>(y.value);
  }
};

template <class Record>
struct Piece {
  const Record* begin;
  const Record* end;
};

// Splits the parts into pieces of at most max_len records, so threads share the work even
// when it arrives as one big part.
template <class Record>
std::vector<Piece<Record>> split_into_pieces(std::span<const std::span<const Record>> parts,
                                             std::int64_t max_len) {
  std::vector<Piece<Record>> pieces;
  for (const auto& part : parts) {
    const Record* p = part.data();
    const Record* end = p + part.size();
    while (p < end) {
      const Record* q = end - p > max_len ? p + max_len : end;
      pieces.push_back({p, q});
      p = q;
    }
  }
  return pieces;
}

template <class Record>
void validate(const std::vector<Piece<Record>>& pieces, int n_threads, gidx_t n_cols,
              gidx_t row_begin, gidx_t row_end) {
  // The first bad triplet in input order is reported.
  const auto n_pieces = static_cast<std::int64_t>(pieces.size());
  std::vector<const Record*> first_bad(pieces.size(), nullptr);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (std::int64_t k = 0; k < n_pieces; ++k) {
    for (const Record* t = pieces[k].begin; t < pieces[k].end; ++t) {
      if (row_of(*t) < row_begin || row_of(*t) >= row_end || col_of(*t) < 0 ||
          col_of(*t) >= n_cols) {
        first_bad[k] = t;
        break;
      }
    }
  }
  for (const Record* t : first_bad) {
    if (t == nullptr) continue;
    throw std::invalid_argument("coo_to_csr: triplet (" + std::to_string(row_of(*t)) + ", " +
                                std::to_string(col_of(*t)) + ") is outside rows [" +
                                std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                ") x columns [0, " + std::to_string(n_cols) + ")");
  }
}

// Turns counts held at start[r + 1] into slots: afterwards start[r + 1] is row r's first
// slot, so placing each entry at start[row + 1]++ leaves start[r] = first slot of row r.
void counts_to_shifted_slots(std::vector<std::int64_t>& start) {
  std::int64_t next = 0;
  for (size_t r = 1; r < start.size(); ++r) {
    const std::int64_t count = start[r];
    start[r] = next;
    next += count;
  }
}

// Counting sort of the records by row into entries; start gets each row's first slot
// (n_rows + 1 entries, start[n_rows] = total).
template <class Codec, class Record>
void bucket_by_row(const std::vector<Piece<Record>>& pieces, gidx_t row_begin, gidx_t n_rows,
                   std::int64_t total, int n_threads, typename Codec::Entry* entries,
                   std::vector<std::int64_t>& start) {
  const auto n_pieces = static_cast<std::int64_t>(pieces.size());
  start.assign(static_cast<size_t>(n_rows) + 1, 0);

  if (n_threads == 1) {
    for (const auto& piece : pieces) {
      for (const Record* t = piece.begin; t < piece.end; ++t) ++start[row_of(*t) - row_begin + 1];
    }
    counts_to_shifted_slots(start);
    for (const auto& piece : pieces) {
      for (const Record* t = piece.begin; t < piece.end; ++t) {
        entries[start[row_of(*t) - row_begin + 1]++] = Codec::make(col_of(*t), value_of(*t));
      }
    }
    return;
  }

  if (static_cast<std::int64_t>(n_threads) * n_rows <= std::max<std::int64_t>(total, 1 << 20)) {
    // Private histograms: slot[t * n_rows + r] is thread t's next slot in row r. Thread t
    // handles the t-th contiguous run of pieces in both passes, so the placement keeps the
    // input order within each row (and rows of a column-sorted file need no sorting).
    std::vector<std::int64_t> slot(static_cast<size_t>(n_threads) * n_rows, 0);
#pragma omp parallel num_threads(n_threads)
    {
      // The runtime may grant fewer threads than asked for: stride by the real team size.
      const int team = omp_get_num_threads();
      const int t = omp_get_thread_num();
      std::int64_t* const mine = slot.data() + static_cast<size_t>(t) * n_rows;
      const std::int64_t my_first = n_pieces * t / team;
      const std::int64_t my_last = n_pieces * (t + 1) / team;
      for (std::int64_t k = my_first; k < my_last; ++k) {
        for (const Record* e = pieces[k].begin; e < pieces[k].end; ++e) {
          ++mine[row_of(*e) - row_begin];
        }
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
      for (std::int64_t k = my_first; k < my_last; ++k) {
        for (const Record* e = pieces[k].begin; e < pieces[k].end; ++e) {
          entries[mine[row_of(*e) - row_begin]++] = Codec::make(col_of(*e), value_of(*e));
        }
      }
    }
    return;
  }

  // Relaxed atomics on the shifted counters.
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (std::int64_t k = 0; k < n_pieces; ++k) {
    for (const Record* t = pieces[k].begin; t < pieces[k].end; ++t) {
      std::atomic_ref<std::int64_t>(start[row_of(*t) - row_begin + 1])
          .fetch_add(1, std::memory_order_relaxed);
    }
  }
  counts_to_shifted_slots(start);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (std::int64_t k = 0; k < n_pieces; ++k) {
    for (const Record* t = pieces[k].begin; t < pieces[k].end; ++t) {
      const std::int64_t at = std::atomic_ref<std::int64_t>(start[row_of(*t) - row_begin + 1])
                                  .fetch_add(1, std::memory_order_relaxed);
      entries[at] = Codec::make(col_of(*t), value_of(*t));
    }
  }
}

template <class Codec, class Record>
CsrMatrix assemble(const std::vector<Piece<Record>>& pieces, std::int64_t total,
                   gidx_t n_rows_global, gidx_t n_cols, gidx_t row_begin, gidx_t row_end,
                   int n_threads) {
  using Entry = typename Codec::Entry;
  const gidx_t n_rows = row_end - row_begin;

  // Uninitialized storage: every slot is written exactly once.
  std::unique_ptr<Entry[]> entries(new Entry[static_cast<size_t>(total)]);
  std::vector<std::int64_t> start;
  bucket_by_row<Codec>(pieces, row_begin, n_rows, total, n_threads, entries.get(), start);

  CsrMatrix out;
  out.n_rows_global = n_rows_global;
  out.n_cols = n_cols;
  out.row_begin = row_begin;
  out.n_rows = n_rows;
  out.row_ptr.assign(static_cast<size_t>(n_rows) + 1, 0);
  // Sort each row; count its distinct columns into row_ptr[r + 1].
#pragma omp parallel for schedule(dynamic, kRowChunk) num_threads(n_threads)
  for (gidx_t r = 0; r < n_rows; ++r) {
    Entry* const first = entries.get() + start[r];
    Entry* const last = entries.get() + start[r + 1];
    // Files are often written sorted (by column, or by row then column), and the placement
    // keeps that order except on the atomic path: check before sorting.
    if (!std::is_sorted(first, last, Codec::less)) std::sort(first, last, Codec::less);
    std::int64_t distinct = 0;
    for (const Entry* e = first; e < last; ++e) {
      distinct += (e == first || Codec::col(*e) != Codec::col(e[-1]));
    }
    out.row_ptr[r + 1] = distinct;
  }
  for (gidx_t r = 0; r < n_rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];

  // Compact, summing duplicates (in double).
  const std::int64_t nnz = out.row_ptr[n_rows];
  out.col_idx.resize(static_cast<size_t>(nnz));
  out.values.resize(static_cast<size_t>(nnz));
#pragma omp parallel for schedule(dynamic, kRowChunk) num_threads(n_threads)
  for (gidx_t r = 0; r < n_rows; ++r) {
    const Entry* e = entries.get() + start[r];
    const Entry* const last = entries.get() + start[r + 1];
    std::int64_t dst = out.row_ptr[r];
    while (e < last) {
      const gidx_t col = Codec::col(*e);
      double sum = Codec::value(*e);
      for (++e; e < last && Codec::col(*e) == col; ++e) sum += Codec::value(*e);
      out.col_idx[dst] = col;
      out.values[dst] = sum;
      ++dst;
    }
  }
  return out;
}

}  // namespace

template <class Record>
CsrMatrix assemble_csr(std::span<const std::span<const Record>> parts, gidx_t n_rows_global,
                       gidx_t n_cols, gidx_t row_begin, gidx_t row_end, bool trusted) {
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
  const auto pieces =
      split_into_pieces(parts, std::max<std::int64_t>(4096, total / (8 * n_threads) + 1));
  if (!trusted) validate(pieces, n_threads, n_cols, row_begin, row_end);
  return assemble<ColumnValueEntry>(pieces, total, n_rows_global, n_cols, row_begin, row_end,
                                    n_threads);
}

template CsrMatrix assemble_csr<Triplet>(std::span<const std::span<const Triplet>>, gidx_t, gidx_t,
                                         gidx_t, gidx_t, bool);
template CsrMatrix assemble_csr<CompactTriplet>(std::span<const std::span<const CompactTriplet>>,
                                                gidx_t, gidx_t, gidx_t, gidx_t, bool);

}  // namespace sparse_detail

CsrMatrix coo_to_csr(std::span<const std::span<const Triplet>> parts, gidx_t n_rows_global,
                     gidx_t n_cols, gidx_t row_begin, gidx_t row_end) {
  return sparse_detail::assemble_csr(parts, n_rows_global, n_cols, row_begin, row_end,
                                     /*trusted=*/false);
}

CsrMatrix coo_to_csr(std::span<const Triplet> triplets, gidx_t n_rows_global, gidx_t n_cols,
                     gidx_t row_begin, gidx_t row_end) {
  const std::span<const Triplet> parts[1] = {triplets};
  return coo_to_csr(std::span<const std::span<const Triplet>>(parts), n_rows_global, n_cols,
                    row_begin, row_end);
}

}  // namespace netsparse
