// A CsrMatrix as an Eigen sparse matrix, for the benchmarks that compare with Eigen (header-only:
// include it only in a benchmark that links Eigen).
#pragma once

#include <Eigen/SparseCore>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "netsparse/csr.hpp"

namespace netsparse::bench {

// m as E, a compressed row-major Eigen::SparseMatrix (the row block's rows, m's columns); a
// std::runtime_error when E's index type cannot hold m's columns or nonzeros.
template <class E>
E to_eigen(const CsrMatrix& m) {
  using I = typename E::StorageIndex;
  constexpr auto kMax = static_cast<std::int64_t>(std::numeric_limits<I>::max());
  if (m.n_cols > kMax || m.nnz() > kMax) {
    throw std::runtime_error("matrix too large for Eigen's " + std::to_string(8 * sizeof(I)) +
                             "-bit indices");
  }
  E e(m.n_rows, m.n_cols);
  e.resizeNonZeros(m.nnz());
  for (gidx_t r = 0; r <= m.n_rows; ++r) e.outerIndexPtr()[r] = static_cast<I>(m.row_ptr[r]);
  for (std::int64_t j = 0; j < m.nnz(); ++j) {
    e.innerIndexPtr()[j] = static_cast<I>(m.col_idx[j]);
    e.valuePtr()[j] = static_cast<typename E::Scalar>(m.values[j]);
  }
  return e;
}

}  // namespace netsparse::bench
