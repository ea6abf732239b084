// A DistMatrix from an Eigen::SparseMatrix. Header-only; include it only where Eigen is
// available (NetSparse itself does not make Eigen a dependency of your program):
//
//   #include <netsparse.hpp>
//   #include <netsparse/eigen.hpp>
//
//   Eigen::SparseMatrix<float, Eigen::RowMajor> A = ...;          // the same on every rank
//   netsparse::DistMatrix a = netsparse::from_global_eigen(MPI_COMM_WORLD, A);
//
//   Eigen::SparseMatrix<float, Eigen::RowMajor> mine = ...;       // this rank's rows only
//   netsparse::DistMatrix a = netsparse::from_local_eigen(MPI_COMM_WORLD, mine);
//
// Any storage order, index type and real scalar type is accepted. A compressed RowMajor matrix
// with int32 / int64 indices and float / double values is read in place; anything else is first
// copied into such a matrix (a ColMajor global matrix: one row-major copy of the whole matrix on
// every rank -- pass a RowMajor matrix to avoid it). Values are kept in double (DistOptions::scalar
// picks the kernels' precision). The checks, options and errors are those of from_global_csr /
// from_local_csr (interop.hpp).
#pragma once

#include <Eigen/SparseCore>
#include <cstdint>
#include <span>
#include <type_traits>

#include "netsparse/interop.hpp"

namespace netsparse {

namespace eigen_detail {

template <class T>
inline constexpr bool is_csr_index_v =
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;
template <class T>
inline constexpr bool is_csr_value_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The arrays of a compressed RowMajor matrix, read in place.
template <class Scalar, class Index>
CsrArrays arrays_of(const Eigen::SparseMatrix<Scalar, Eigen::RowMajor, Index>& m) {
  const auto outer = static_cast<std::size_t>(m.outerSize()) + 1;
  const auto nnz = static_cast<std::size_t>(m.nonZeros());
  return CsrArrays(std::span<const Index>(m.outerIndexPtr(), outer),
                   std::span<const Index>(m.innerIndexPtr(), nnz),
                   std::span<const Scalar>(m.valuePtr(), nnz));
}

// Calls f(CsrArrays) with m's arrays: in place when m is a compressed RowMajor matrix of
// supported types, else of a compressed RowMajor copy.
template <class Scalar, int Options, class Index, class F>
decltype(auto) with_row_major(const Eigen::SparseMatrix<Scalar, Options, Index>& m, F&& f) {
  static_assert(!Eigen::NumTraits<Scalar>::IsComplex,
                "netsparse: complex sparse matrices are not supported");
  using Value = std::conditional_t<is_csr_value_v<Scalar>, Scalar, float>;
  using CopyIndex = std::conditional_t<is_csr_index_v<Index>, Index, std::int64_t>;
  if constexpr ((Options & Eigen::RowMajorBit) != 0 && is_csr_value_v<Scalar> &&
                is_csr_index_v<Index>) {
    if (m.isCompressed()) return f(arrays_of(m));
  }
  Eigen::SparseMatrix<Value, Eigen::RowMajor, CopyIndex> copy = m.template cast<Value>();
  copy.makeCompressed();
  return f(arrays_of(copy));
}

}  // namespace eigen_detail

// Every rank passes the same whole matrix and keeps its row block (see from_global_csr).
template <class Scalar, int Options, class Index>
DistMatrix from_global_eigen(MPI_Comm comm, const Eigen::SparseMatrix<Scalar, Options, Index>& a,
                             const CsrImportOptions& options = {}) {
  return eigen_detail::with_row_major(a, [&](const CsrArrays& arrays) {
    return from_global_csr(comm, static_cast<gidx_t>(a.rows()), static_cast<gidx_t>(a.cols()),
                           arrays, options);
  });
}

// Each rank passes its own rows (a.rows() x n_cols), blocks in rank order (see
// from_local_csr).
template <class Scalar, int Options, class Index>
DistMatrix from_local_eigen(MPI_Comm comm,
                            const Eigen::SparseMatrix<Scalar, Options, Index>& local_rows,
                            const CsrImportOptions& options = {}) {
  return eigen_detail::with_row_major(local_rows, [&](const CsrArrays& arrays) {
    return from_local_csr(comm, static_cast<gidx_t>(local_rows.cols()), arrays, options);
  });
}

// The same with explicit global row offsets (nranks + 1 entries, alike on every rank).
template <class Scalar, int Options, class Index>
DistMatrix from_local_eigen(MPI_Comm comm, std::span<const gidx_t> row_offsets,
                            const Eigen::SparseMatrix<Scalar, Options, Index>& local_rows,
                            const CsrImportOptions& options = {}) {
  return eigen_detail::with_row_major(local_rows, [&](const CsrArrays& arrays) {
    return from_local_csr(comm, row_offsets, static_cast<gidx_t>(local_rows.cols()), arrays,
                          options);
  });
}

}  // namespace netsparse
