// The local SpGEMM's two phases (include/netsparse/spgemm.hpp), on index arrays rather than
// CsrMatrix so that the distributed product can feed them its renumbered rows: A's columns are
// row numbers of a row set B' (the rank's own rows of B followed by the gathered ones, or the
// whole of B), whose columns are B's global columns.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/spgemm.hpp"

namespace netsparse::dist {

// Rows of a CSR: row r is cols[ptr[r], ptr[r + 1]).
struct CsrIndex {
  std::span<const std::int64_t> ptr;
  std::span<const std::int64_t> cols;
  [[nodiscard]] std::int64_t rows() const noexcept {
    return ptr.empty() ? 0 : static_cast<std::int64_t>(ptr.size()) - 1;
  }
};

// C's pattern and how each row panel accumulates (decided here, reused by the numeric phase).
struct SpgemmSymbolic {
  std::vector<std::int64_t> row_ptr;      // A's rows + 1
  std::vector<gidx_t> cols;               // sorted, unique within each row
  std::vector<std::uint8_t> panel_dense;  // per row panel: 1 dense, 0 hash
  // Per row panel, C's columns lie in [panel_lo, panel_lo + panel_span) (span 0: no entries):
  // the numeric phase's value accumulator covers only that window.
  std::vector<gidx_t> panel_lo, panel_span;
  int row_panel = 256;
  gidx_t n_cols = 0;
  [[nodiscard]] std::int64_t nnz() const noexcept { return row_ptr.empty() ? 0 : row_ptr.back(); }
};

// Checks the options (std::invalid_argument).
void check_local_spgemm_options(const LocalSpgemmOptions& options);

// C's pattern for A (columns index b's rows) times b (n_cols columns).
[[nodiscard]] SpgemmSymbolic spgemm_symbolic(const CsrIndex& a, const CsrIndex& b, gidx_t n_cols,
                                             const LocalSpgemmOptions& options);

// C's values on the pattern `sym` (c_values: sym.nnz() entries).
template <class T>
void spgemm_numeric(const SpgemmSymbolic& sym, const CsrIndex& a, std::span<const T> a_values,
                    const CsrIndex& b, std::span<const T> b_values, std::span<T> c_values);

}  // namespace netsparse::dist
