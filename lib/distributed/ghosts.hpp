// The compact layout of a row block's remote part (PETSc's off-diagonal block with its column
// map): the distinct remote columns ("ghosts"), sorted, and the remote nonzeros renumbered onto
// them and tiled once. Gathered ghost rows then sit contiguously, and the kernel reads a dense
// buffer of |ghosts| rows instead of a window over every column. Built by the
// inspector-executor's setup, and by netsparse's for a pattern that stays fixed across runs (a
// pattern that changes every run uses DistOptions::dynamic_pattern instead: no inspector work).
#pragma once

#include <cstdint>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse::dist {

class GhostLayout {
 public:
  // From the remote nonzeros (global column ids) of a row block with n_cols columns: a bitmap
  // over the columns, a column's ghost index = marked columns before it (per-word prefix counts
  // + popcount), so the renumbering is O(1) per nonzero and keeps rows sorted.
  // The compact matrix holds its values in `scalar` precision.
  void build(const CsrMatrix& remote, gidx_t n_cols, const TileConfig& config, ScalarType scalar);
  const std::vector<gidx_t>& ghosts() const noexcept { return ghosts_; }
  const TiledMatrix& compact() const noexcept { return compact_; }

 private:
  std::vector<std::uint64_t> bits_;  // remote columns, one bit each
  std::vector<gidx_t> word_prefix_;  // marked columns before each 64-column word
  std::vector<gidx_t> ghosts_;
  TiledMatrix compact_;
};

}  // namespace netsparse::dist
