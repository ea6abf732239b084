#include "dist_transpose/local_transpose.hpp"

#include <cstdint>
#include <vector>

namespace netsparse::dist {

CsrMatrix local_transpose(const CsrMatrix& m) {
  CsrMatrix t;
  t.n_rows_global = m.n_cols;
  t.n_cols = m.n_rows;
  t.row_begin = 0;
  t.n_rows = m.n_cols;
  const std::int64_t nnz = m.nnz();
  t.row_ptr.assign(static_cast<std::size_t>(m.n_cols) + 1, 0);
  for (std::int64_t i = 0; i < nnz; ++i) ++t.row_ptr[static_cast<std::size_t>(m.col_idx[i]) + 1];
  for (gidx_t c = 0; c < m.n_cols; ++c) t.row_ptr[c + 1] += t.row_ptr[c];
  t.col_idx.resize(static_cast<std::size_t>(nnz));
  t.values.resize(static_cast<std::size_t>(nnz));
  std::vector<std::int64_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  // Rows in increasing order: each column's entries come out sorted by row.
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    for (std::int64_t i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i) {
      const std::int64_t at = next[static_cast<std::size_t>(m.col_idx[i])]++;
      t.col_idx[at] = r;
      t.values[at] = m.values[i];
    }
  }
  return t;
}

}  // namespace netsparse::dist
