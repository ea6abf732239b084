#include "distributed/ghosts.hpp"

#include <bit>

namespace netsparse::dist {

void GhostLayout::build(const CsrMatrix& remote, gidx_t n_cols, const TileConfig& config,
                        ScalarType scalar, std::span<const ColumnRange> whole) {
  const std::size_t words = static_cast<std::size_t>((n_cols + 63) / 64);
  bits_.assign(words, 0);
  for (const gidx_t c : remote.col_idx) bits_[c >> 6] |= std::uint64_t{1} << (c & 63);
  for (const ColumnRange& r : whole) {
    for (gidx_t c = r.begin; c < r.end; ++c) bits_[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
  word_prefix_.resize(words + 1);
  word_prefix_[0] = 0;
  for (std::size_t w = 0; w < words; ++w) {
    word_prefix_[w + 1] = word_prefix_[w] + std::popcount(bits_[w]);
  }
  ghosts_.resize(static_cast<std::size_t>(word_prefix_[words]));
  for (std::size_t w = 0, g = 0; w < words; ++w) {
    for (std::uint64_t m = bits_[w]; m != 0; m &= m - 1) {
      ghosts_[g++] = static_cast<gidx_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(m)));
    }
  }
  CsrMatrix compact = remote;
  compact.n_cols = static_cast<gidx_t>(ghosts_.size());
  const auto nnz = static_cast<std::int64_t>(compact.col_idx.size());
#pragma omp parallel for schedule(static) if (nnz > 65536)
  for (std::int64_t i = 0; i < nnz; ++i) {
    compact.col_idx[i] = ghost_index(compact.col_idx[i]);
  }
  TileConfig cfg = config;
  cfg.col_panel = 0;
  compact_ = TiledMatrix(compact, cfg, scalar);
}

}  // namespace netsparse::dist
