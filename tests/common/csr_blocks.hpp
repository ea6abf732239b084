// Cutting a whole matrix into the row blocks ranks hold, for the tests of the readers, the fuzz
// targets and the distributed layer (no MPI, no GoogleTest: any test may include it).
#pragma once

#include <cstdint>

#include "netsparse/csr.hpp"

namespace netsparse::test {

// Rows [begin, end) of a whole matrix as a block (global columns).
inline CsrMatrix row_block(const CsrMatrix& whole, gidx_t begin, gidx_t end) {
  CsrMatrix b;
  b.n_rows_global = whole.n_rows_global;
  b.n_cols = whole.n_cols;
  b.row_begin = begin;
  b.n_rows = end - begin;
  const std::int64_t first = whole.row_ptr[begin], last = whole.row_ptr[end];
  for (gidx_t r = begin; r <= end; ++r) b.row_ptr.push_back(whole.row_ptr[r] - first);
  b.col_idx.assign(whole.col_idx.begin() + first, whole.col_idx.begin() + last);
  b.values.assign(whole.values.begin() + first, whole.values.begin() + last);
  return b;
}

}  // namespace netsparse::test
