// 1D row partition: part p owns the consecutive rows [begin(p), end(p)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/csr.hpp"

namespace netsparse {

class RowPartition {
 public:
  // n_rows split into nparts blocks whose sizes differ by at most one (the first n % P parts
  // get one row more). n_rows < nparts leaves the last parts empty. owner() is O(1).
  static RowPartition equal_blocks(gidx_t n_rows, int nparts);

  // Boundaries chosen so each part holds about nnz / nparts nonzeros, from the CSR row pointer
  // of the whole matrix (n_rows + 1 non-decreasing entries, row_ptr[0] == 0): boundary p is the
  // row whose prefix is nearest to p * nnz / nparts. A matrix without nonzeros gets equal
  // blocks. owner() is O(log P).
  static RowPartition balanced_by_nnz(std::span<const std::int64_t> row_ptr, int nparts);
  static RowPartition balanced_by_nnz(const CsrMatrix& whole_matrix, int nparts);

  // Explicit boundaries: nparts + 1 non-decreasing offsets starting at 0.
  static RowPartition from_offsets(std::vector<gidx_t> offsets);

  [[nodiscard]] int nparts() const noexcept { return static_cast<int>(offsets_.size()) - 1; }
  [[nodiscard]] gidx_t n_rows() const noexcept { return offsets_.back(); }
  [[nodiscard]] gidx_t begin(int part) const { return offsets_.at(static_cast<size_t>(part)); }
  [[nodiscard]] gidx_t end(int part) const { return offsets_.at(static_cast<size_t>(part) + 1); }
  [[nodiscard]] gidx_t size(int part) const { return end(part) - begin(part); }
  [[nodiscard]] const std::vector<gidx_t>& offsets() const noexcept { return offsets_; }
  [[nodiscard]] bool is_equal_blocks() const noexcept { return equal_blocks_; }

  // The part owning `row`; with empty parts, the non-empty part whose range contains it.
  // Throws std::out_of_range if row is not in [0, n_rows()).
  [[nodiscard]] int owner(gidx_t row) const {
    if (row < 0 || row >= n_rows()) throw_row_out_of_range(row);
    if (equal_blocks_) {
      // Rows [0, big_rows_) are in parts of size base_ + 1, the rest in parts of size base_
      // (base_ > 0 whenever such rows exist).
      if (row < big_rows_) return static_cast<int>(row / (base_ + 1));
      return static_cast<int>(remainder_ + (row - big_rows_) / base_);
    }
    auto it = std::upper_bound(offsets_.begin(), offsets_.end(), row);
    return static_cast<int>(it - offsets_.begin()) - 1;
  }

 private:
  RowPartition() = default;
  [[noreturn]] void throw_row_out_of_range(gidx_t row) const;

  std::vector<gidx_t> offsets_{0};
  bool equal_blocks_ = false;
  gidx_t base_ = 0;       // rows per part in an equal split, rounded down
  gidx_t remainder_ = 0;  // parts that get base_ + 1 rows
  gidx_t big_rows_ = 0;   // remainder_ * (base_ + 1)
};

}  // namespace netsparse
