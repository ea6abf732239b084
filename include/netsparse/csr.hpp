// The sparse matrix type every part of NetSparse shares: one rank's row block in CSR.
//
// Index widths follow what can overflow: a global row/column index can exceed 2^31 (the
// NetSparse paper targets matrices with billions of columns) and so can a rank's nonzero
// count, so both are 64-bit. Local row numbers (position inside this rank's block) are
// provably < n_rows and use 32 bits where a kernel stores many of them (see tiled.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace netsparse {

using gidx_t = std::int64_t;  // global row or column index
using lidx_t = std::int32_t;  // index provably local to a rank's block or a tile

// A block of consecutive rows [row_begin, row_begin + n_rows) of an n_rows_global x n_cols
// matrix. Column indices are global. A whole matrix is the block with row_begin == 0 and
// n_rows == n_rows_global. Values are held in double, the precision files and solvers carry;
// pattern matrices carry 1.0. The precision a kernel computes in (fp32 or fp64) is chosen when
// its compute form is built (TiledMatrix, DistOptions::scalar), not here.
struct CsrMatrix {
  gidx_t n_rows_global = 0;
  gidx_t n_cols = 0;
  gidx_t row_begin = 0;
  gidx_t n_rows = 0;
  std::vector<std::int64_t> row_ptr;  // n_rows + 1 entries, row_ptr[0] == 0
  std::vector<gidx_t> col_idx;        // nnz entries, sorted and unique within each row
  std::vector<double> values;         // nnz entries

  [[nodiscard]] std::int64_t nnz() const noexcept { return row_ptr.empty() ? 0 : row_ptr.back(); }
  [[nodiscard]] gidx_t row_end() const noexcept { return row_begin + n_rows; }
};

// Throws std::invalid_argument "<who>: <reason>" unless `csr` is well formed: non-negative
// dimensions, the block inside n_rows_global, n_rows + 1 row pointers from 0, non-decreasing,
// as many columns and values as the last one says, and every row's columns in [0, n_cols),
// strictly increasing. The first bad row is named (local and global). O(nnz), rows checked in
// parallel (OpenMP). Every kernel and DistMatrix relies on it: an out-of-range column would
// otherwise index outside the buffers built from n_cols.
void check_csr(const CsrMatrix& csr, const std::string& who);

// Whether the columns col[b, e) of one row are strictly increasing and inside [0, n_cols)
// (b <= e): check_csr's test of a row, for a pass that reads the row anyway. Branch-free over
// the row (it vectorizes); the range is its first and last column.
inline bool csr_row_ok(const gidx_t* col, std::int64_t b, std::int64_t e, gidx_t n_cols) {
  if (b == e) return true;
  bool sorted = true;
  for (std::int64_t j = b + 1; j < e; ++j) sorted &= col[j - 1] < col[j];
  return sorted && col[b] >= 0 && col[e - 1] < n_cols;
}

}  // namespace netsparse
