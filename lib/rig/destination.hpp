// The Destination Solver of a RIG unit: which node owns a global row, and where the row starts
// in that node's block. Built once per registered region from the row offsets of the 1D
// partition. Equal blocks (every block but the last of the same size b) give O(1) owner lookup
// by a division; any other partition falls back to a binary search, O(log nodes).
//
// An idx at or beyond the total row count has no owner; owner() maps it to the last node so that
// the request is still answered (as invalid) by a server unit that checks it against its region.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace netsparse::rig {

class DestinationSolver {
 public:
  DestinationSolver() = default;
  // offsets: nodes + 1 non-decreasing entries starting at 0 (std::invalid_argument otherwise).
  explicit DestinationSolver(std::span<const std::uint64_t> offsets)
      : offsets_(offsets.begin(), offsets.end()) {
    if (offsets_.size() < 2) throw std::invalid_argument("row_offsets needs at least 2 entries");
    if (offsets_.front() != 0) throw std::invalid_argument("row_offsets[0] must be 0");
    for (std::size_t p = 1; p < offsets_.size(); ++p) {
      if (offsets_[p] < offsets_[p - 1]) {
        throw std::invalid_argument("row_offsets must be non-decreasing (entry " +
                                    std::to_string(p) + " is smaller than entry " +
                                    std::to_string(p - 1) + ")");
      }
    }
    nodes_ = static_cast<int>(offsets_.size() - 1);
    total_ = offsets_.back();
    block_ = offsets_[1];
    equal_ = block_ > 0;
    for (std::size_t p = 0; equal_ && p < offsets_.size(); ++p) {
      const std::uint64_t expect = std::min<std::uint64_t>(block_ * p, total_);
      equal_ = offsets_[p] == expect;
    }
    if (equal_ && std::has_single_bit(block_)) shift_ = std::countr_zero(block_);
  }

  int nodes() const noexcept { return nodes_; }
  std::uint64_t total_rows() const noexcept { return total_; }
  bool equal_blocks() const noexcept { return equal_; }
  std::uint64_t begin(int node) const noexcept { return offsets_[static_cast<std::size_t>(node)]; }
  std::uint64_t end(int node) const noexcept {
    return offsets_[static_cast<std::size_t>(node) + 1];
  }

  int owner(std::uint64_t row) const noexcept {
    if (row >= total_) return nodes_ - 1;
    if (equal_) {
      if (shift_ >= 0) return static_cast<int>(row >> shift_);
      return static_cast<int>(row / block_);
    }
    // First offset > row, minus one; empty blocks are skipped naturally.
    const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), row);
    return static_cast<int>(it - offsets_.begin()) - 1;
  }

 private:
  std::vector<std::uint64_t> offsets_{0, 0};
  int nodes_ = 1;
  std::uint64_t total_ = 0;
  std::uint64_t block_ = 0;
  bool equal_ = false;
  int shift_ = -1;
};

}  // namespace netsparse::rig
