// COO -> CSR assembly over any triplet record type (internal to the sparse component).
#pragma once

#include <cstdint>
#include <span>

#include "netsparse/coo.hpp"
#include "netsparse/csr.hpp"

namespace netsparse::sparse_detail {

// A triplet whose indices fit 32 bits: two thirds of the bytes of a Triplet, for readers that know
// the matrix is at most 2^32 x 2^32 before they parse (less memory to fault in and stream).
struct CompactTriplet {
  std::uint32_t row;
  std::uint32_t col;
  double value;
};

// The fields of a Triplet or a CompactTriplet, widened to the global types.
template <class Record>
gidx_t row_of(const Record& t) noexcept {
  return t.row;
}
template <class Record>
gidx_t col_of(const Record& t) noexcept {
  return t.col;
}
template <class Record>
double value_of(const Record& t) noexcept {
  return t.value;
}

// coo_to_csr for Record = Triplet or CompactTriplet. `trusted`: the caller guarantees every
// record lies in the block and the column range (a reader that validated while parsing), so
// the validation pass is skipped.
template <class Record>
CsrMatrix assemble_csr(std::span<const std::span<const Record>> parts, gidx_t n_rows_global,
                       gidx_t n_cols, gidx_t row_begin, gidx_t row_end, bool trusted);

}  // namespace netsparse::sparse_detail
