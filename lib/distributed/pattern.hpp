// The local rows' pattern of a DistKernel, tiled the way its mode computes it (built once per
// pattern by dist_kernel_pattern.cpp, read by every mode).
#pragma once

#include <cstdint>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse::dist {

// The local rows' pattern, tiled the way the mode computes it.
//   whole:  one TiledMatrix of all local nonzeros (ideal, su: the whole operand is present).
//   split:  local_part = nonzeros in columns this rank owns (computed in place on the local block
//           of the operand), remote_part = the others, tiled in column panels of `window` columns
//           (the unit of gathering). For SDDMM the split outputs are scattered back to CSR order.
struct Pattern {
  // Direct mode (Exchange::direct_csr): the caller's rows, borrowed, computed with the CSR
  // kernels; nothing below is built (no split, no tiling: a pattern that changes every run must
  // not pay an inspector's work).
  const CsrMatrix* direct = nullptr;
  bool split = false;
  gidx_t window = 0;                  // column panel width of remote_part
  gidx_t col_begin = 0, col_end = 0;  // columns (operand rows) this rank owns
  TiledMatrix whole;
  TiledMatrix local_part;
  TiledMatrix remote_part;  // empty when the mode does not need it (needs_remote_panels)
  CsrMatrix remote_csr;     // the remote nonzeros in CSR order (inspector-executor renumbers it)
  // SDDMM scatter: CSR row pointers of the original rows and of the two parts, and per row the
  // number of remote nonzeros left of the local column range.
  std::vector<std::int64_t> row_ptr, local_row_ptr, remote_row_ptr, remote_left;
  std::vector<int> remote_panels;  // column panels of remote_part holding nonzeros, in order
};

}  // namespace netsparse::dist
