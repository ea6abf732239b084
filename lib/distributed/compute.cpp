// The compute helpers every mode shares (compute.hpp): the kernel dispatch of a run's parts and
// SDDMM's scatter back to CSR order.
#include "distributed/compute.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "distributed/exchange.hpp"

namespace netsparse {
namespace dist {

template <class T>
void Exchange<T>::replicate(const RunContext&, std::span<const T>) {
  throw std::logic_error("DistKernel::replicate is only for the ideal mode");
}

template <class T>
void Compute<T>::all_present(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                             const T* full) {
  Operands<T> from_full = ops;
  from_full.b = full + pat.col_begin * rc.k;
  local(pat, rc, from_full);
  const BasicDenseConstView<T> view{full, 0, rc.k, rc.cols->n_rows()};
  for (int panel : pat.remote_panels) remote_panel(pat, rc, ops, panel, view);
  finish(pat, rc, ops);
}

template <class T>
void Compute<T>::local(const Pattern& pat, const RunContext& rc, const Operands<T>& ops) {
  const TiledMatrix& a = pat.local_part;
  const BasicDenseConstView<T> view{ops.b, pat.col_begin, rc.k, pat.col_end - pat.col_begin};
  switch (rc.kernel) {
    case KernelKind::spmm:
      if (a.n_rows() == 0) return;
      if (a.nnz() == 0) {
        std::fill_n(ops.out, a.n_rows() * rc.k, T{0});
        return;
      }
      spmm(a, view, ops.out, rc.k, rc.k, false);
      return;
    case KernelKind::spmv:
      if (a.n_rows() == 0) return;
      if (a.nnz() == 0) {
        std::fill_n(ops.out, a.n_rows(), T{0});
        return;
      }
      spmv(a, view, ops.out, false);
      return;
    case KernelKind::sddmm:
      local_out_.resize(static_cast<std::size_t>(a.nnz()));
      // The remote nonzeros: remote_row_ptr counts them whichever way the pattern was built.
      remote_out_.resize(
          pat.remote_row_ptr.empty() ? 0 : static_cast<std::size_t>(pat.remote_row_ptr.back()));
      if (a.nnz() == 0) return;
      sddmm(a, ops.x, rc.k, view, rc.k, local_out_.data());
      return;
  }
}

template <class T>
void Compute<T>::remote_panel(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                              int panel, BasicDenseConstView<T> view) {
  const TiledMatrix& a = pat.remote_part;
  switch (rc.kernel) {
    case KernelKind::spmm:
      spmm_col_panel(a, panel, view, ops.out, rc.k, rc.k);
      return;
    case KernelKind::spmv:
      spmv_col_panel(a, panel, view, ops.out);
      return;
    case KernelKind::sddmm:
      sddmm_col_panel(a, panel, ops.x, rc.k, view, rc.k, remote_out_.data());
      return;
  }
}

template <class T>
void Compute<T>::remote_all(const TiledMatrix& a, const RunContext& rc, const Operands<T>& ops,
                            BasicDenseConstView<T> view) {
  if (a.nnz() == 0) return;
  switch (rc.kernel) {
    case KernelKind::spmm:
      spmm(a, view, ops.out, rc.k, rc.k, true);
      return;
    case KernelKind::spmv:
      spmv(a, view, ops.out, true);
      return;
    case KernelKind::sddmm:
      sddmm(a, ops.x, rc.k, view, rc.k, remote_out_.data());
      return;
  }
}

template <class T>
void Compute<T>::finish(const Pattern& pat, const RunContext& rc, const Operands<T>& ops) {
  if (rc.kernel != KernelKind::sddmm) return;
  // Within a row the columns are sorted and the local range is contiguous, so the row's CSR
  // entries are [remote left | local | remote right]: three copies per row, no index array.
  const auto n_rows = static_cast<std::int64_t>(pat.row_ptr.size()) - 1;
  const T* loc = local_out_.data();
  const T* rem = remote_out_.data();
  T* out = ops.out;
#pragma omp parallel for schedule(static) if (n_rows > 4096)
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::int64_t o = pat.row_ptr[r];
    const std::int64_t rb = pat.remote_row_ptr[r];
    const std::int64_t re = pat.remote_row_ptr[r + 1];
    const std::int64_t lb = pat.local_row_ptr[r];
    const std::int64_t le = pat.local_row_ptr[r + 1];
    const std::int64_t left = pat.remote_left[r];
    std::copy(rem + rb, rem + rb + left, out + o);
    std::copy(loc + lb, loc + le, out + o + left);
    std::copy(rem + rb + left, rem + re, out + o + left + (le - lb));
  }
}

template class Exchange<float>;
template class Exchange<double>;
template class Compute<float>;
template class Compute<double>;

}  // namespace dist

}  // namespace netsparse
