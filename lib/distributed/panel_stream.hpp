// The column ids one column panel of the remote part requests, in the order the kernel touches
// them (internal): every nonzero (tile order) or, with a prefilter, each distinct column once.
#pragma once

#include <cstdint>
#include <span>

#include "netsparse/tiled.hpp"

namespace netsparse::dist {

class PanelIdxStream {
 public:
  PanelIdxStream(const TiledMatrix& a, int panel, bool prefilter)
      : a_(a), prefilter_(prefilter), base_(a.col_panel_range(panel).begin) {
    if (prefilter_) {
      unique_ = a.panel_columns(panel);
    } else {
      tile_ids_ = a.col_panel_tile_ids(panel);
      load_tile();
    }
  }
  // The current idx, if any.
  [[nodiscard]] bool valid() const noexcept {
    return prefilter_ ? pos_ < unique_.size() : tile_ < tile_ids_.size();
  }
  [[nodiscard]] gidx_t idx() const noexcept {
    return prefilter_ ? unique_[pos_] : base_ + a_.col_offsets()[static_cast<std::size_t>(pos_)];
  }
  void next() noexcept {
    ++pos_;
    if (!prefilter_ && static_cast<std::int64_t>(pos_) >= end_) {
      ++tile_;
      load_tile();
    }
  }

 private:
  void load_tile() noexcept {
    while (tile_ < tile_ids_.size()) {
      const Tile& t = a_.tiles()[static_cast<std::size_t>(tile_ids_[tile_])];
      pos_ = static_cast<std::size_t>(t.nnz_offset);
      end_ = t.nnz_offset + t.nnz_count;
      if (t.nnz_count > 0) return;
      ++tile_;
    }
  }
  const TiledMatrix& a_;
  const bool prefilter_;
  const gidx_t base_;
  std::span<const gidx_t> unique_;
  std::span<const std::int64_t> tile_ids_;
  std::size_t tile_ = 0;
  std::size_t pos_ = 0;
  std::int64_t end_ = 0;
};

}  // namespace netsparse::dist
