#include "netsparse/partition.hpp"

#include <cstdlib>

namespace netsparse {

namespace {

void check_nparts(int nparts, const char* who) {
  if (nparts < 1) {
    throw std::invalid_argument(std::string("RowPartition::") + who +
                                ": nparts must be >= 1, got " + std::to_string(nparts));
  }
}

}  // namespace

RowPartition RowPartition::equal_blocks(gidx_t n_rows, int nparts) {
  check_nparts(nparts, "equal_blocks");
  if (n_rows < 0) {
    throw std::invalid_argument("RowPartition::equal_blocks: negative row count " +
                                std::to_string(n_rows));
  }
  RowPartition part;
  part.equal_blocks_ = true;
  part.base_ = n_rows / nparts;
  part.remainder_ = n_rows % nparts;
  part.big_rows_ = part.remainder_ * (part.base_ + 1);
  part.offsets_.resize(static_cast<size_t>(nparts) + 1);
  for (int p = 0; p <= nparts; ++p) {
    part.offsets_[p] = p * part.base_ + std::min<gidx_t>(p, part.remainder_);
  }
  return part;
}

RowPartition RowPartition::balanced_by_nnz(std::span<const std::int64_t> row_ptr, int nparts) {
  check_nparts(nparts, "balanced_by_nnz");
  if (row_ptr.empty() || row_ptr.front() != 0) {
    throw std::invalid_argument(
        "RowPartition::balanced_by_nnz: row_ptr must have n_rows + 1 entries starting at 0");
  }
  if (!std::is_sorted(row_ptr.begin(), row_ptr.end())) {
    throw std::invalid_argument("RowPartition::balanced_by_nnz: row_ptr must be non-decreasing");
  }
  const auto n_rows = static_cast<gidx_t>(row_ptr.size()) - 1;
  const std::int64_t nnz = row_ptr.back();
  if (nnz == 0) return equal_blocks(n_rows, nparts);
  std::vector<gidx_t> offsets(static_cast<size_t>(nparts) + 1);
  offsets[0] = 0;
  offsets[nparts] = n_rows;
  for (int p = 1; p < nparts; ++p) {
    // Ideal prefix p * nnz / P (128-bit: the product can exceed 64 bits).
    const auto target = static_cast<std::int64_t>(static_cast<__int128>(nnz) * p / nparts);
    // First row boundary whose prefix reaches the target, or the one before if nearer.
    auto it = std::lower_bound(row_ptr.begin(), row_ptr.end(), target);
    if (it != row_ptr.begin() && target - *(it - 1) < *it - target) --it;
    offsets[p] = std::max(offsets[p - 1], static_cast<gidx_t>(it - row_ptr.begin()));
  }
  return from_offsets(std::move(offsets));
}

RowPartition RowPartition::balanced_by_nnz(const CsrMatrix& whole_matrix, int nparts) {
  if (whole_matrix.row_begin != 0 || whole_matrix.n_rows != whole_matrix.n_rows_global) {
    throw std::invalid_argument(
        "RowPartition::balanced_by_nnz: needs the whole matrix, got a row block");
  }
  return balanced_by_nnz(std::span<const std::int64_t>(whole_matrix.row_ptr), nparts);
}

RowPartition RowPartition::from_offsets(std::vector<gidx_t> offsets) {
  if (offsets.size() < 2 || offsets.front() != 0 ||
      !std::is_sorted(offsets.begin(), offsets.end())) {
    throw std::invalid_argument(
        "RowPartition::from_offsets: need nparts + 1 >= 2 non-decreasing offsets starting at 0");
  }
  RowPartition part;
  part.offsets_ = std::move(offsets);
  return part;
}

void RowPartition::throw_row_out_of_range(gidx_t row) const {
  throw std::out_of_range("RowPartition::owner: row " + std::to_string(row) + " is outside [0, " +
                          std::to_string(n_rows()) + ")");
}

}  // namespace netsparse
