// Building the SPADE tiled layout from a CSR row block.
//
// Two passes over the row panels, both parallel: the first finds each panel's runs, tiles and
// their counts, a prefix sum then places every panel's output, and the second pass writes it.
// The runs are recomputed in the second pass instead of kept between the passes, so the extra
// memory is one panel's worth per thread, not a copy of the whole matrix.
#include "netsparse/tiled.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace netsparse {

namespace {

// One row run before it is placed: key = (column panel << 32) | row inside the row panel, so
// sorting by key gives tile order (column panel) and row order inside a tile.
struct PendingRun {
  std::uint64_t key;
  std::int64_t csr_begin;
  std::int64_t csr_end;
};

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("netsparse::TiledMatrix: " + what);
}

void validate_config(const TileConfig& config) {
  if (config.row_panel < 1) fail("row_panel must be >= 1, got " + std::to_string(config.row_panel));
  if (config.col_panel < 0)
    fail("col_panel must be >= 0 (0 = all columns), got " + std::to_string(config.col_panel));
  if (config.barrier_group < 1)
    fail("barrier_group must be >= 1, got " + std::to_string(config.barrier_group));
}

void validate_csr(const CsrMatrix& csr, const std::string& who) {
  const auto fail = [&who](const std::string& what) {
    throw std::invalid_argument(who + ": " + what);
  };
  if (csr.n_rows < 0 || csr.n_cols < 0 || csr.row_begin < 0 || csr.n_rows_global < 0)
    fail("negative dimension (n_rows " + std::to_string(csr.n_rows) + ", n_cols " +
         std::to_string(csr.n_cols) + ", row_begin " + std::to_string(csr.row_begin) +
         ", n_rows_global " + std::to_string(csr.n_rows_global) + ")");
  if (csr.row_begin + csr.n_rows > csr.n_rows_global)
    fail("row block [" + std::to_string(csr.row_begin) + ", " + std::to_string(csr.row_end()) +
         ") exceeds n_rows_global " + std::to_string(csr.n_rows_global));
  if (csr.n_rows > std::numeric_limits<lidx_t>::max())
    fail("row block of " + std::to_string(csr.n_rows) + " rows does not fit 32-bit local rows");
  if (std::ssize(csr.row_ptr) != csr.n_rows + 1)
    fail("row_ptr has " + std::to_string(csr.row_ptr.size()) +
         " entries, expected n_rows + 1 = " + std::to_string(csr.n_rows + 1));
  if (csr.row_ptr[0] != 0) fail("row_ptr[0] is " + std::to_string(csr.row_ptr[0]) + ", not 0");
  const std::int64_t nnz = csr.row_ptr.back();
  if (std::ssize(csr.col_idx) != nnz || std::ssize(csr.values) != nnz)
    fail("row_ptr says " + std::to_string(nnz) + " nonzeros but col_idx has " +
         std::to_string(csr.col_idx.size()) + " and values " + std::to_string(csr.values.size()));

  // Rows are checked in parallel; the first bad row is then reported with its reason.
  const gidx_t n_rows = csr.n_rows;
  gidx_t first_bad_row = n_rows;
#pragma omp parallel for schedule(static) reduction(min : first_bad_row)
  for (gidx_t r = 0; r < n_rows; ++r) {
    const std::int64_t b = csr.row_ptr[r];
    const std::int64_t e = csr.row_ptr[r + 1];
    // csr_row_ok is branch-free (a per-column branchy loop cost 0.36 ms a changing-sparsity
    // run, 18 %, on kron:16 at np 2, when the check ran as a pass of its own).
    const bool ok =
        0 <= b && b <= e && e <= nnz && csr_row_ok(csr.col_idx.data(), b, e, csr.n_cols);
    if (!ok) first_bad_row = std::min(first_bad_row, r);
  }
  if (first_bad_row == n_rows) return;
  const gidx_t r = first_bad_row;
  const std::string where =
      "local row " + std::to_string(r) + " (global row " + std::to_string(csr.row_begin + r) + ")";
  const std::int64_t b = csr.row_ptr[r];
  const std::int64_t e = csr.row_ptr[r + 1];
  if (b < 0 || b > e || e > nnz)
    fail("row_ptr is not non-decreasing within [0, nnz] at " + where + ": row_ptr[" +
         std::to_string(r) + "] = " + std::to_string(b) + ", row_ptr[" + std::to_string(r + 1) +
         "] = " + std::to_string(e));
  for (std::int64_t j = b; j < e; ++j) {
    const gidx_t c = csr.col_idx[j];
    if (c < 0 || c >= csr.n_cols)
      fail("column " + std::to_string(c) + " at " + where + " is outside [0, " +
           std::to_string(csr.n_cols) + ")");
    if (j != b && csr.col_idx[j - 1] >= c)
      fail("columns of " + where + " are not sorted and unique (" +
           std::to_string(csr.col_idx[j - 1]) + " then " + std::to_string(c) + ")");
  }
}

constexpr double kFloatMax = std::numeric_limits<float>::max();

// A value that becomes +-inf in fp32 would silently poison every result it touches: refused,
// naming the first one and how to compute instead. Called only once one was seen.
[[noreturn]] void fail_beyond_f32(const CsrMatrix& csr) {
  std::int64_t first_bad = 0;
  while (!(std::fabs(csr.values[first_bad]) > kFloatMax)) ++first_bad;
  const auto row =
      static_cast<gidx_t>(std::upper_bound(csr.row_ptr.begin(), csr.row_ptr.end(), first_bad) -
                          csr.row_ptr.begin() - 1);
  char value[32];
  const auto end = std::to_chars(value, value + sizeof value, csr.values[first_bad]).ptr;
  fail("value " + std::string(value, end) + " at global row " +
       std::to_string(csr.row_begin + row) + ", column " + std::to_string(csr.col_idx[first_bad]) +
       " does not fit fp32 (magnitude above 3.4e38); compute in fp64 (ScalarType::f64)");
}

// How the matrix is cut into tiles: row panels of `rp_height` rows, column panels of `width`.
struct PanelShape {
  gidx_t rp_height;
  gidx_t width;
  bool single_col_panel;
};

// The runs (a row's nonzeros inside one column panel) of row panel `rp`, in tile order.
void collect_runs(const CsrMatrix& csr, const PanelShape& shape, int rp,
                  std::vector<PendingRun>& runs) {
  runs.clear();
  const gidx_t r_begin = rp * shape.rp_height;
  const gidx_t r_end = std::min(csr.n_rows, r_begin + shape.rp_height);
  for (gidx_t r = r_begin; r < r_end; ++r) {
    const auto row_in_panel = static_cast<std::uint64_t>(r - r_begin);
    std::int64_t j = csr.row_ptr[r];
    const std::int64_t e = csr.row_ptr[r + 1];
    while (j < e) {
      const auto cp = static_cast<std::uint64_t>(csr.col_idx[j] / shape.width);
      const gidx_t cp_end_col = static_cast<gidx_t>(cp + 1) * shape.width;
      std::int64_t k = j + 1;
      if (shape.single_col_panel) {
        k = e;
      } else {
        while (k < e && csr.col_idx[k] < cp_end_col) ++k;
      }
      runs.push_back({(cp << 32) | row_in_panel, j, k});
      j = k;
    }
  }
  if (!shape.single_col_panel)
    std::sort(runs.begin(), runs.end(),
              [](const PendingRun& a, const PendingRun& b) { return a.key < b.key; });
}

// Where each row panel's tiles and runs start (prefix sums, one entry past the last panel);
// refuses a tile too big for its 32-bit nonzero count.
struct TileBases {
  std::vector<std::int64_t> tile_base;
  std::vector<std::int64_t> run_base;
};

TileBases count_tiles(const CsrMatrix& csr, const PanelShape& shape, int n_row_panels) {
  TileBases b{std::vector<std::int64_t>(n_row_panels + 1, 0),
              std::vector<std::int64_t>(n_row_panels + 1, 0)};
  std::int64_t biggest_tile = 0;
#pragma omp parallel reduction(max : biggest_tile)
  {
    std::vector<PendingRun> runs;
#pragma omp for schedule(dynamic, 4)
    for (int rp = 0; rp < n_row_panels; ++rp) {
      collect_runs(csr, shape, rp, runs);
      std::int64_t n_tiles = 0;
      std::int64_t tile_nnz = 0;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        if (i == 0 || (runs[i].key >> 32) != (runs[i - 1].key >> 32)) {
          ++n_tiles;
          tile_nnz = 0;
        }
        tile_nnz += runs[i].csr_end - runs[i].csr_begin;
        biggest_tile = std::max(biggest_tile, tile_nnz);
      }
      b.tile_base[rp + 1] = n_tiles;
      b.run_base[rp + 1] = std::ssize(runs);
    }
  }
  if (biggest_tile > std::numeric_limits<std::uint32_t>::max())
    fail("a tile holds " + std::to_string(biggest_tile) +
         " nonzeros, more than 2^32 - 1; use a smaller row_panel or col_panel");
  for (int rp = 0; rp < n_row_panels; ++rp) {
    b.tile_base[rp + 1] += b.tile_base[rp];
    b.run_base[rp + 1] += b.run_base[rp];
  }
  return b;
}

}  // namespace

std::string to_string(const TileConfig& config) {
  std::string text =
      "RP " + std::to_string(config.row_panel) + " x CP " +
      (config.col_panel == 0 ? std::string("all") : std::to_string(config.col_panel));
  if (config.barriers) text += " +barriers(group " + std::to_string(config.barrier_group) + ")";
  return text;
}

TiledMatrix::TiledMatrix(const CsrMatrix& csr, const TileConfig& config, ScalarType scalar)
    : config_(config), scalar_(scalar) {
  validate_config(config);
  validate_csr(csr, "netsparse::TiledMatrix");
  n_rows_global_ = csr.n_rows_global;
  n_cols_ = csr.n_cols;
  row_begin_ = csr.row_begin;
  n_rows_ = csr.n_rows;

  const gidx_t rp_height = config.row_panel;
  n_row_panels_ = static_cast<int>((n_rows_ + rp_height - 1) / rp_height);

  // "All columns" and any width past the matrix mean one panel; widths beyond what a 32-bit
  // offset addresses are clamped (see the header), which only matters past 2^32 columns.
  gidx_t width = config.col_panel == 0 ? n_cols_ : std::min(config.col_panel, n_cols_);
  width = std::clamp<gidx_t>(width, 1, kMaxColPanelWidth);
  col_panel_width_ = width;
  const gidx_t n_cp = n_cols_ == 0 ? 1 : (n_cols_ + width - 1) / width;
  if (n_cp > std::numeric_limits<std::int32_t>::max())
    fail("col_panel " + std::to_string(config.col_panel) + " gives " + std::to_string(n_cp) +
         " column panels for " + std::to_string(n_cols_) + " columns; at most 2^31 - 1 allowed");
  n_col_panels_ = static_cast<int>(n_cp);
  if (config.barriers) {
    barrier_group_size_ = std::min(config.barrier_group, n_col_panels_);
    n_barrier_groups_ = (n_col_panels_ + barrier_group_size_ - 1) / barrier_group_size_;
  } else {
    barrier_group_size_ = n_col_panels_;
    n_barrier_groups_ = 1;
  }

  const std::int64_t nnz = csr.nnz();
  const PanelShape shape{rp_height, width, n_col_panels_ == 1};
  // Pass 1: per row panel, how many tiles and runs.
  TileBases bases = count_tiles(csr, shape, n_row_panels_);
  std::vector<std::int64_t>& tile_base = bases.tile_base;
  const std::vector<std::int64_t>& run_base = bases.run_base;

  tiles_.resize(tile_base.back());
  run_row_.resize(run_base.back());
  run_end_.resize(run_base.back());
  run_csr_begin_.resize(run_base.back());
  col_off_.resize(nnz);
  if (scalar == ScalarType::f32) {
    values_.resize(nnz);
  } else {
    values_f64_.resize(nnz);
  }
  float* const values32 = values_.data();
  double* const values64 = values_f64_.data();

  // Pass 2: write every row panel's tiles. A row panel's nonzeros start where its first row's
  // do in the CSR, since both layouts hold the same nonzeros per panel. An fp32 layout notes a
  // value beyond float's range on the way (reported with its position afterwards).
  bool beyond_f32 = false;
#pragma omp parallel reduction(|| : beyond_f32)
  {
    std::vector<PendingRun> runs;
#pragma omp for schedule(dynamic, 4)
    for (int rp = 0; rp < n_row_panels_; ++rp) {
      collect_runs(csr, shape, rp, runs);
      const gidx_t r_begin = rp * rp_height;
      std::int64_t tile = tile_base[rp] - 1;
      std::int64_t nz = csr.row_ptr[r_begin];
      std::int64_t tile_nz_begin = nz;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const PendingRun& run = runs[i];
        const auto cp = static_cast<std::int32_t>(run.key >> 32);
        if (i == 0 || cp != tiles_[tile].col_panel) {
          ++tile;
          tile_nz_begin = nz;
          tiles_[tile] = Tile{rp, cp, nz, 0, run_base[rp] + static_cast<std::int64_t>(i), 0};
        }
        const gidx_t col_base = gidx_t{cp} * width;
        for (std::int64_t j = run.csr_begin; j < run.csr_end; ++j, ++nz) {
          col_off_[nz] = static_cast<std::uint32_t>(csr.col_idx[j] - col_base);
          if (values32 != nullptr) {
            beyond_f32 = beyond_f32 || std::fabs(csr.values[j]) > kFloatMax;
            values32[nz] = static_cast<float>(csr.values[j]);
          } else {
            values64[nz] = csr.values[j];
          }
        }
        const std::int64_t run_id = run_base[rp] + static_cast<std::int64_t>(i);
        run_row_[run_id] =
            static_cast<lidx_t>(r_begin + static_cast<gidx_t>(run.key & 0xffffffffu));
        run_end_[run_id] = static_cast<std::uint32_t>(nz - tile_nz_begin);
        run_csr_begin_[run_id] = run.csr_begin;
        tiles_[tile].nnz_count = nz - tile_nz_begin;
        ++tiles_[tile].run_count;
      }
    }
  }
  if (beyond_f32) fail_beyond_f32(csr);

  row_panel_tile_ptr_ = std::move(tile_base);
  build_col_panel_index();
  build_panel_columns();
  build_barrier_schedule();
}

void TiledMatrix::build_col_panel_index() {
  col_panel_tile_ptr_.assign(n_col_panels_ + 1, 0);
  for (const Tile& t : tiles_) ++col_panel_tile_ptr_[t.col_panel + 1];
  for (int cp = 0; cp < n_col_panels_; ++cp) col_panel_tile_ptr_[cp + 1] += col_panel_tile_ptr_[cp];
  col_panel_tile_ids_.resize(tiles_.size());
  std::vector<std::int64_t> next(col_panel_tile_ptr_.begin(), col_panel_tile_ptr_.end() - 1);
  // Tiles are in row-panel order, so each column panel's list comes out in row-panel order.
  for (std::int64_t t = 0; t < std::ssize(tiles_); ++t)
    col_panel_tile_ids_[next[tiles_[t].col_panel]++] = t;
}

void TiledMatrix::build_barrier_schedule() {
  if (n_barrier_groups_ <= 1) return;
  // Tiles are in (row panel, column panel) order; a stable sort by group keeps that order
  // inside each group, so every row panel's tiles of a group are adjacent: one segment.
  barrier_tile_ids_.resize(tiles_.size());
  std::vector<std::int64_t> group_count(n_barrier_groups_ + 1, 0);
  for (const Tile& t : tiles_) ++group_count[t.col_panel / barrier_group_size_ + 1];
  for (int g = 0; g < n_barrier_groups_; ++g) group_count[g + 1] += group_count[g];
  std::vector<std::int64_t> next(group_count.begin(), group_count.end() - 1);
  for (std::int64_t t = 0; t < std::ssize(tiles_); ++t)
    barrier_tile_ids_[next[tiles_[t].col_panel / barrier_group_size_]++] = t;
  barrier_group_segment_ptr_.assign(1, 0);
  barrier_segment_ptr_.clear();
  for (int g = 0; g < n_barrier_groups_; ++g) {
    for (std::int64_t i = group_count[g]; i < group_count[g + 1]; ++i) {
      if (i == group_count[g] ||
          tiles_[barrier_tile_ids_[i]].row_panel != tiles_[barrier_tile_ids_[i - 1]].row_panel)
        barrier_segment_ptr_.push_back(i);
    }
    barrier_group_segment_ptr_.push_back(std::ssize(barrier_segment_ptr_));
  }
  barrier_segment_ptr_.push_back(std::ssize(barrier_tile_ids_));
}

void TiledMatrix::build_panel_columns() {
  // Distinct columns per panel, as 32-bit offsets first. A bitmap over the panel's width is
  // used when scanning it costs no more than sorting the panel's columns would.
  std::vector<std::vector<std::uint32_t>> distinct(n_col_panels_);
#pragma omp parallel
  {
    std::vector<std::uint64_t> bitmap;
#pragma omp for schedule(dynamic, 1)
    for (int cp = 0; cp < n_col_panels_; ++cp) {
      std::int64_t panel_nnz = 0;
      for (std::int64_t i = col_panel_tile_ptr_[cp]; i < col_panel_tile_ptr_[cp + 1]; ++i)
        panel_nnz += tiles_[col_panel_tile_ids_[i]].nnz_count;
      if (panel_nnz == 0) continue;
      std::vector<std::uint32_t>& out = distinct[cp];
      const gidx_t words = (col_panel_range(cp).size() + 63) / 64;
      if (words <= panel_nnz) {
        bitmap.assign(words, 0);
        for (std::int64_t i = col_panel_tile_ptr_[cp]; i < col_panel_tile_ptr_[cp + 1]; ++i) {
          const Tile& t = tiles_[col_panel_tile_ids_[i]];
          for (std::int64_t j = t.nnz_offset; j < t.nnz_offset + t.nnz_count; ++j)
            bitmap[col_off_[j] >> 6] |= std::uint64_t{1} << (col_off_[j] & 63);
        }
        std::int64_t count = 0;
        for (const std::uint64_t w : bitmap) count += std::popcount(w);
        out.reserve(count);
        for (gidx_t w = 0; w < words; ++w)
          for (std::uint64_t bits = bitmap[w]; bits != 0; bits &= bits - 1)
            out.push_back(static_cast<std::uint32_t>(w * 64 + std::countr_zero(bits)));
      } else {
        out.reserve(panel_nnz);
        for (std::int64_t i = col_panel_tile_ptr_[cp]; i < col_panel_tile_ptr_[cp + 1]; ++i) {
          const Tile& t = tiles_[col_panel_tile_ids_[i]];
          out.insert(out.end(), col_off_.begin() + t.nnz_offset,
                     col_off_.begin() + t.nnz_offset + t.nnz_count);
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
      }
    }
  }
  panel_col_ptr_.assign(n_col_panels_ + 1, 0);
  for (int cp = 0; cp < n_col_panels_; ++cp)
    panel_col_ptr_[cp + 1] = panel_col_ptr_[cp] + std::ssize(distinct[cp]);
  panel_cols_.resize(panel_col_ptr_.back());
  for (int cp = 0; cp < n_col_panels_; ++cp) {
    const gidx_t base = col_panel_range(cp).begin;
    std::transform(distinct[cp].begin(), distinct[cp].end(),
                   panel_cols_.begin() + panel_col_ptr_[cp],
                   [base](std::uint32_t off) { return base + gidx_t{off}; });
  }
  touched_columns_ =
      panel_cols_.empty() ? IndexRange{} : IndexRange{panel_cols_.front(), panel_cols_.back() + 1};
}

IndexRange TiledMatrix::row_panel_rows(int row_panel) const {
  if (row_panel < 0 || row_panel >= n_row_panels_)
    throw std::out_of_range("netsparse::TiledMatrix: row panel " + std::to_string(row_panel) +
                            " outside [0, " + std::to_string(n_row_panels_) + ")");
  const gidx_t b = gidx_t{row_panel} * config_.row_panel;
  return {b, std::min(n_rows_, b + config_.row_panel)};
}

std::span<const Tile> TiledMatrix::row_panel_tiles(int row_panel) const {
  if (row_panel < 0 || row_panel >= n_row_panels_)
    throw std::out_of_range("netsparse::TiledMatrix: row panel " + std::to_string(row_panel) +
                            " outside [0, " + std::to_string(n_row_panels_) + ")");
  const std::int64_t b = row_panel_tile_ptr_[row_panel];
  return std::span<const Tile>(tiles_).subspan(b, row_panel_tile_ptr_[row_panel + 1] - b);
}

IndexRange TiledMatrix::col_panel_range(int col_panel) const {
  if (col_panel < 0 || col_panel >= n_col_panels_)
    throw std::out_of_range("netsparse::TiledMatrix: column panel " + std::to_string(col_panel) +
                            " outside [0, " + std::to_string(n_col_panels_) + ")");
  const gidx_t b = gidx_t{col_panel} * col_panel_width_;
  return {std::min(b, n_cols_), std::min(n_cols_, b + col_panel_width_)};
}

std::span<const gidx_t> TiledMatrix::panel_columns(int col_panel) const {
  (void)col_panel_range(col_panel);  // bounds check
  const std::int64_t b = panel_col_ptr_[col_panel];
  return std::span<const gidx_t>(panel_cols_).subspan(b, panel_col_ptr_[col_panel + 1] - b);
}

std::span<const std::int64_t> TiledMatrix::col_panel_tile_ids(int col_panel) const {
  (void)col_panel_range(col_panel);  // bounds check
  const std::int64_t b = col_panel_tile_ptr_[col_panel];
  return std::span<const std::int64_t>(col_panel_tile_ids_)
      .subspan(b, col_panel_tile_ptr_[col_panel + 1] - b);
}

std::int64_t TiledMatrix::spmm_stream_bytes() const noexcept {
  return nnz() * std::int64_t{sizeof(std::uint32_t)} +
         nnz() * static_cast<std::int64_t>(scalar_bytes(scalar_)) +
         std::ssize(run_row_) * std::int64_t{sizeof(lidx_t) + sizeof(std::uint32_t)} +
         std::ssize(tiles_) * std::int64_t{sizeof(Tile)};
}

std::int64_t TiledMatrix::sddmm_stream_bytes() const noexcept {
  return spmm_stream_bytes() + std::ssize(run_csr_begin_) * std::int64_t{sizeof(std::int64_t)};
}

void check_csr(const CsrMatrix& csr, const std::string& who) {
  validate_csr(csr, who);
}

}  // namespace netsparse
