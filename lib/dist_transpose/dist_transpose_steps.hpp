// The two local steps of the distributed transpose, shared by the synchronous transpose()
// (dist_transpose.cpp, one MPI_Alltoallv between them) and the non-blocking transpose_start()
// (dist_transpose_async.cpp, point-to-point messages progressed by test() / wait() or a thread):
// packing this rank's nonzeros by the owner of their column, and merging the received runs.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dist_transpose/local_transpose.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/partition.hpp"

namespace netsparse::dist {

// One nonzero on its way to the owner of its column: A[row, col] = value, with the column
// relative to the owner's first column and the row relative to the sender's first row (both
// below a rank's row count, which lidx_t holds: 16 bytes per nonzero instead of 24).
struct TransposeEntry {
  lidx_t col;
  lidx_t row;
  double value;
};

// Why `rows` cannot be transposed over a's partitions as this rank's block (shape, CSR array
// sizes, more than 2^31 - 1 rows on a rank), or nothing. Local.
[[nodiscard]] inline std::optional<std::string> transpose_block_problem(const char* call,
                                                                        const DistMatrix& a,
                                                                        const CsrMatrix& rows) {
  const int r = a.rank();
  if (rows.row_begin != a.rows().begin(r) || rows.n_rows != a.rows().size(r) ||
      rows.n_rows_global != a.n_rows() || rows.n_cols != a.n_cols() ||
      rows.row_ptr.size() != static_cast<std::size_t>(rows.n_rows) + 1 ||
      rows.col_idx.size() != static_cast<std::size_t>(rows.nnz()) ||
      rows.values.size() != static_cast<std::size_t>(rows.nnz())) {
    return std::string(call) + " (rank " + std::to_string(r) +
           "): the rows must be this rank's block [" + std::to_string(a.rows().begin(r)) + ", " +
           std::to_string(a.rows().end(r)) + ") of a " + std::to_string(a.n_rows()) + " x " +
           std::to_string(a.n_cols()) + " matrix with consistent CSR arrays; got rows [" +
           std::to_string(rows.row_begin) + ", " + std::to_string(rows.row_end()) + ") of " +
           std::to_string(rows.n_rows_global) + " x " + std::to_string(rows.n_cols);
  }
  // The entries carry rank-relative indices (TransposeEntry).
  constexpr gidx_t kMaxLocal = std::numeric_limits<lidx_t>::max();
  if (rows.n_rows > kMaxLocal || a.cols().size(r) > kMaxLocal) {
    return std::string(call) + " (rank " + std::to_string(r) +
           "): a rank's block exceeds 2^31 - 1 rows";
  }
  return std::nullopt;
}

// This rank's nonzeros of `block` in the order they are sent: owner by owner (the owner of
// column c is the rank whose cols_part range holds c), within an owner by (column, row).
struct PackedTranspose {
  std::vector<TransposeEntry> entries;
  std::vector<std::int64_t> offsets;  // owner q's entries: [offsets[q], offsets[q + 1])
};

// Local reorder by (column, row) -- the block's own CSC -- in which each owner's columns are one
// contiguous run.
[[nodiscard]] inline PackedTranspose pack_transpose(const RowPartition& cols_part,
                                                    const CsrMatrix& block) {
  const CsrMatrix lt = local_transpose(block);
  const int nranks = cols_part.nparts();
  PackedTranspose p;
  p.entries.reserve(static_cast<std::size_t>(lt.nnz()));
  p.offsets.assign(static_cast<std::size_t>(nranks) + 1, 0);
  for (int q = 0; q < nranks; ++q) {
    const gidx_t cb = cols_part.begin(q), ce = cols_part.end(q);
    for (gidx_t c = cb; c < ce; ++c) {
      for (std::int64_t i = lt.row_ptr[c]; i < lt.row_ptr[c + 1]; ++i) {
        p.entries.push_back(TransposeEntry{static_cast<lidx_t>(c - cb),
                                           static_cast<lidx_t>(lt.col_idx[i]), lt.values[i]});
      }
    }
    p.offsets[static_cast<std::size_t>(q) + 1] = static_cast<std::int64_t>(p.entries.size());
  }
  return p;
}

// This rank's block of A^T from what it received: `got` holds the runs of the ranks in rank order
// (`from[q]` entries from rank q). The run from rank q is sorted by (column, row) and holds only
// rows of q, which all precede the rows of q + 1: so placing every run's entries, in rank order,
// after the entries already placed in their column is the merge (no comparison needed).
[[nodiscard]] inline CsrMatrix merge_transpose(int rank, const RowPartition& rows_part,
                                               const RowPartition& cols_part,
                                               std::span<const TransposeEntry> got,
                                               std::span<const std::int64_t> from) {
  CsrMatrix t;
  t.n_rows_global = cols_part.n_rows();
  t.n_cols = rows_part.n_rows();
  t.row_begin = cols_part.begin(rank);
  t.n_rows = cols_part.size(rank);
  t.row_ptr.assign(static_cast<std::size_t>(t.n_rows) + 1, 0);
  for (const TransposeEntry& e : got) ++t.row_ptr[static_cast<std::size_t>(e.col) + 1];
  for (gidx_t r = 0; r < t.n_rows; ++r) t.row_ptr[r + 1] += t.row_ptr[r];
  t.col_idx.resize(got.size());
  t.values.resize(got.size());
  std::vector<std::int64_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  std::size_t e = 0;
  for (std::size_t q = 0; q < from.size(); ++q) {
    const gidx_t row0 = rows_part.begin(static_cast<int>(q));
    for (const std::size_t end = e + static_cast<std::size_t>(from[q]); e < end; ++e) {
      const std::int64_t at = next[static_cast<std::size_t>(got[e].col)]++;
      t.col_idx[at] = row0 + got[e].row;
      t.values[at] = got[e].value;
    }
  }
  return t;
}

}  // namespace netsparse::dist
