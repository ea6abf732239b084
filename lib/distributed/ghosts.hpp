// The compact layout of a row block's remote part (PETSc's off-diagonal block with its column
// map): the distinct remote columns ("ghosts"), sorted, and the remote nonzeros renumbered onto
// them and tiled once. Gathered ghost rows then sit contiguously, and the kernel reads a dense
// buffer of |ghosts| rows instead of a window over every column. Built by the
// inspector-executor's setup, and by netsparse's for a pattern that stays fixed across runs (a
// pattern that changes every run uses DistOptions::dynamic_pattern instead: no inspector work).
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse::dist {

// A column range [begin, end) every one of whose columns is a ghost (a block fetched whole).
struct ColumnRange {
  gidx_t begin = 0, end = 0;
};

class GhostLayout {
 public:
  // From the remote nonzeros (global column ids) of a row block with n_cols columns: a bitmap
  // over the columns, a column's ghost index = marked columns before it (per-word prefix counts
  // + popcount), so the renumbering is O(1) per nonzero and keeps rows sorted.
  // The compact matrix holds its values in `scalar` precision. The columns of `whole` are ghosts
  // too, nonzero or not (task-packets' blocks: an owner's whole block lands in one slice).
  void build(const CsrMatrix& remote, gidx_t n_cols, const TileConfig& config, ScalarType scalar,
             std::span<const ColumnRange> whole = {});
  // The ghost index of column c, which must be a ghost.
  [[nodiscard]] gidx_t ghost_index(gidx_t c) const noexcept {
    const std::uint64_t below = bits_[c >> 6] & ((std::uint64_t{1} << (c & 63)) - 1);
    return word_prefix_[c >> 6] + std::popcount(below);
  }
  const std::vector<gidx_t>& ghosts() const noexcept { return ghosts_; }
  const TiledMatrix& compact() const noexcept { return compact_; }

 private:
  std::vector<std::uint64_t> bits_;  // remote columns, one bit each
  std::vector<gidx_t> word_prefix_;  // marked columns before each 64-column word
  std::vector<gidx_t> ghosts_;
  TiledMatrix compact_;
};

}  // namespace netsparse::dist
