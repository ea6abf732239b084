// The local reordering step of the distributed transpose (dist_transpose.cpp), behind one
// function so that another local transpose (e.g. a merge-based CSR -> CSC) can replace it.
#pragma once

#include "netsparse/csr.hpp"

namespace netsparse::dist {

// The transpose of m's own n_rows x n_cols matrix, m's rows numbered 0 .. n_rows - 1
// (row_begin is ignored): an n_cols x n_rows CSR (row_begin 0, n_rows_global = n_cols) whose
// column indices are m's local row numbers, sorted within each row; values moved unchanged.
// A counting sort by column: one pass to count, one to place, O(nnz + n_cols).
[[nodiscard]] CsrMatrix local_transpose(const CsrMatrix& m);

}  // namespace netsparse::dist
