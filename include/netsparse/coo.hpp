// Coordinate (triplet) form and its assembly into CSR.
#pragma once

#include <span>
#include <vector>

#include "netsparse/csr.hpp"

namespace netsparse {

// One nonzero, 0-based. Plain aggregate so vectors of them can be moved as bytes (e.g. when a
// distributed reader redistributes parsed entries to their owners).
struct Triplet {
  gidx_t row;
  gidx_t col;
  double value;

  friend bool operator==(const Triplet&, const Triplet&) = default;
};

// Assembles rows [row_begin, row_end) of an n_rows_global x n_cols matrix from triplets given in
// any order, possibly split into several parts (e.g. one per parser thread, so they need not be
// concatenated first). Columns end up sorted within each row; duplicates (same row and column)
// are summed; explicit zeros are kept. Duplicates are summed in a fixed order (ascending value
// bits), so the result does not depend on the order of the triplets or on the thread count.
// Throws std::invalid_argument if a triplet lies outside the block or the column range, or if
// the block is not inside [0, n_rows_global].
CsrMatrix coo_to_csr(std::span<const std::span<const Triplet>> parts, gidx_t n_rows_global,
                     gidx_t n_cols, gidx_t row_begin, gidx_t row_end);

CsrMatrix coo_to_csr(std::span<const Triplet> triplets, gidx_t n_rows_global, gidx_t n_cols,
                     gidx_t row_begin, gidx_t row_end);

// The whole matrix: rows [0, n_rows).
inline CsrMatrix coo_to_csr(std::span<const Triplet> triplets, gidx_t n_rows, gidx_t n_cols) {
  return coo_to_csr(triplets, n_rows, n_cols, 0, n_rows);
}

}  // namespace netsparse
