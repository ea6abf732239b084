// SPADE-style 2-D tiling of one rank's CSR row block (see docs: SPADE, ISCA '23, Appendix A).
//
// The sparse matrix is cut into tiles of `row_panel` rows x `col_panel` columns. Each tile's
// nonzeros are contiguous and row-major. Inside a tile they are grouped into *row runs*: the
// maximal sequences of the tile's nonzeros that lie in one row. The hot loops of the kernels
// walk runs, so a row of the output (SpMM) or of X (SDDMM) is touched once per run and the
// accumulation lives in registers.
//
// Storage, per nonzero: a 32-bit column offset from the column panel's first column and the
// fp32 value (8 bytes, against 12 for CSR with 64-bit global columns). The offset is 32 bits
// because every column panel is at most 2^32 columns wide (the width is clamped to that when
// "all columns" is asked for on a wider matrix); the index stream is most of SpMV's and a large
// part of small-K SpMM's memory traffic, so halving it pays directly. Per run: the local row
// (lidx_t) and the run's end as a 32-bit offset inside its tile; for SDDMM also the position in
// the ORIGINAL CSR order of the run's first nonzero. The run's nonzeros are consecutive in the
// CSR row too (columns are sorted and a column panel is a contiguous column range), so the
// position of the i-th nonzero of a run is that start + i: no per-nonzero position array.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/scalar.hpp"

namespace netsparse {

// How a row block is tiled and in which order the tiles run. `col_panel` = 0 means one column
// panel spanning all columns. With `barriers`, the kernels process groups of `barrier_group`
// consecutive column panels one after another, every thread finishing its tiles of a group
// before any starts the next (SPADE's scheduling barriers, which keep a window of B hot).
struct TileConfig {
  int row_panel = 256;
  gidx_t col_panel = 0;
  bool barriers = false;
  int barrier_group = 1;

  friend bool operator==(const TileConfig&, const TileConfig&) = default;
};

// "RP 256 x CP all, no barriers" style text, for logs and benchmark tables.
[[nodiscard]] std::string to_string(const TileConfig& config);

// Per-tile metadata. Tiles are stored ordered by (row_panel, col_panel); empty tiles do not
// exist. Runs of a tile are [run_offset, run_offset + run_count) in the run arrays, nonzeros
// [nnz_offset, nnz_offset + nnz_count) in the nonzero arrays.
struct Tile {
  std::int32_t row_panel = 0;
  std::int32_t col_panel = 0;
  std::int64_t nnz_offset = 0;
  std::int64_t nnz_count = 0;
  std::int64_t run_offset = 0;
  std::int64_t run_count = 0;
};

// A half-open range [begin, end) of global column (or local row) indices.
struct IndexRange {
  gidx_t begin = 0;
  gidx_t end = 0;
  [[nodiscard]] gidx_t size() const noexcept { return end - begin; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

namespace detail {
// An allocator whose resize() leaves new elements default-initialized (no zero-fill): a layout
// rebuilt for every pattern (TiledMatrix::split_columns) regrows its arrays each run, and
// value-initializing them would write every byte once more before the pass writes it.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using UninitVector = std::vector<T, DefaultInitAllocator<T>>;
}  // namespace detail

struct ColumnSplit;

class TiledMatrix {
 public:
  // Widest column panel a 32-bit column offset can address.
  static constexpr gidx_t kMaxColPanelWidth = gidx_t{1} << 32;

  TiledMatrix() = default;
  // Validates `csr` (row_ptr shape and monotonicity, columns in [0, n_cols), sorted and unique
  // per row) and `config`; throws std::invalid_argument naming the problem. The values are
  // stored in `scalar` precision (the kernels' operands must then be of that type); for f32, a
  // value beyond the float range is refused (it would become inf).
  TiledMatrix(const CsrMatrix& csr, const TileConfig& config, ScalarType scalar = ScalarType::f32);

  // A pattern used once (DistOptions::dynamic_pattern), split at the column range [lo, hi) and
  // laid out in ONE streaming pass over its nonzeros, with no sort: `out.inside` gets the
  // nonzeros with columns in [lo, hi), `out.outside` the others, each one column panel of
  // row panels of 256 rows (the layout the constructor builds with TileConfig{256, 0}, so the
  // tiled kernels run on it at their own speed). With `compact_outside` the outside columns are
  // renumbered onto out.outside_columns (their distinct values, ascending): out.outside then
  // has outside_columns.size() columns and reads B from a compact buffer of those rows; else it
  // keeps the global columns. out's arrays are reused from call to call.
  //
  // Why not the constructor: it validates every nonzero, collects each row panel's runs twice
  // (a counting pass and a writing pass) and builds the panel column lists with a bitmap per
  // panel; for a pattern computed once that costs more than the tiled kernel then saves
  // (docs/benchmarks.md, "Changing sparsity without a tiling penalty"). Here the shape is checked
  // (row_ptr, array sizes, lo <= hi, columns fit 32 bits) and each column's range, branch-free;
  // columns must be sorted within a row, as in every CsrMatrix (SDDMM's scatter back to CSR
  // order relies on it; not checked). Throws std::invalid_argument naming the problem.
  // `row_pointers`: also fill out.outside_row_ptr and out.outside_left (SDDMM's scatter back to
  // CSR order needs them; left empty otherwise). out.inside_row_ptr is always filled.
  static void split_columns(const CsrMatrix& csr, gidx_t lo, gidx_t hi, bool compact_outside,
                            ScalarType scalar, ColumnSplit& out, bool row_pointers = true);

  [[nodiscard]] const TileConfig& config() const noexcept { return config_; }
  [[nodiscard]] gidx_t n_rows_global() const noexcept { return n_rows_global_; }
  [[nodiscard]] gidx_t n_cols() const noexcept { return n_cols_; }
  [[nodiscard]] gidx_t row_begin() const noexcept { return row_begin_; }
  [[nodiscard]] gidx_t n_rows() const noexcept { return n_rows_; }
  [[nodiscard]] std::int64_t nnz() const noexcept { return std::ssize(col_off_); }
  // The precision the values are stored in, and so the operand type of the kernels.
  [[nodiscard]] ScalarType scalar_type() const noexcept { return scalar_; }

  // Row panels: local rows [rp * row_panel, min(n_rows, (rp + 1) * row_panel)).
  [[nodiscard]] int n_row_panels() const noexcept { return n_row_panels_; }
  [[nodiscard]] IndexRange row_panel_rows(int row_panel) const;  // local row indices
  // Tiles of one row panel, in column-panel order.
  [[nodiscard]] std::span<const Tile> row_panel_tiles(int row_panel) const;

  // Column panels: global columns [cp * width, min(n_cols, (cp + 1) * width)). A matrix with
  // no columns still has one (empty) column panel.
  [[nodiscard]] int n_col_panels() const noexcept { return n_col_panels_; }
  [[nodiscard]] gidx_t col_panel_width() const noexcept { return col_panel_width_; }
  [[nodiscard]] IndexRange col_panel_range(int col_panel) const;
  // The distinct columns the nonzeros of one column panel touch, sorted: exactly the rows of B
  // a kernel call on that panel reads.
  [[nodiscard]] std::span<const gidx_t> panel_columns(int col_panel) const;
  // Indices into tiles() of one column panel's tiles, in row-panel order.
  [[nodiscard]] std::span<const std::int64_t> col_panel_tile_ids(int col_panel) const;
  // Smallest range holding every column any nonzero touches (empty range when nnz == 0).
  [[nodiscard]] IndexRange touched_columns() const noexcept { return touched_columns_; }

  // Barrier groups: column panels [g * barrier_group, (g + 1) * barrier_group). Without
  // barriers there is one group holding every panel.
  [[nodiscard]] int n_barrier_groups() const noexcept { return n_barrier_groups_; }
  [[nodiscard]] int barrier_group_size() const noexcept { return barrier_group_size_; }

  // Raw layout, for the kernels and for tests.
  [[nodiscard]] std::span<const Tile> tiles() const noexcept { return tiles_; }
  [[nodiscard]] std::span<const std::uint32_t> col_offsets() const noexcept { return col_off_; }
  // Values in tile order: values() for an f32 matrix, values_f64() for an f64 one (the other is
  // empty); values_as<T>() picks by type.
  [[nodiscard]] std::span<const float> values() const noexcept { return values_; }
  [[nodiscard]] std::span<const double> values_f64() const noexcept { return values_f64_; }
  template <class T>
  [[nodiscard]] std::span<const T> values_as() const noexcept {
    if constexpr (std::is_same_v<T, float>) {
      return values_;
    } else {
      return values_f64_;
    }
  }
  [[nodiscard]] std::span<const lidx_t> run_rows() const noexcept { return run_row_; }
  [[nodiscard]] std::span<const std::uint32_t> run_ends() const noexcept { return run_end_; }
  [[nodiscard]] std::span<const std::int64_t> run_csr_begins() const noexcept {
    return run_csr_begin_;
  }
  // Index of the first tile of each row panel, n_row_panels() + 1 entries.
  [[nodiscard]] std::span<const std::int64_t> row_panel_tile_ptr() const noexcept {
    return row_panel_tile_ptr_;
  }
  // The barrier schedule (empty without barriers): barrier group g owns the segments
  // [barrier_group_segment_ptr()[g], [g + 1]); segment s is one row panel's tiles of that group,
  // in column order: barrier_tile_ids()[barrier_segment_ptr()[s] .. barrier_segment_ptr()[s + 1]).
  [[nodiscard]] std::span<const std::int64_t> barrier_group_segment_ptr() const noexcept {
    return barrier_group_segment_ptr_;
  }
  [[nodiscard]] std::span<const std::int64_t> barrier_segment_ptr() const noexcept {
    return barrier_segment_ptr_;
  }
  [[nodiscard]] std::span<const std::int64_t> barrier_tile_ids() const noexcept {
    return barrier_tile_ids_;
  }

  // Bytes SpMM/SpMV stream from this layout (nonzeros, runs, tile metadata); SDDMM also reads
  // the runs' CSR positions (sddmm_stream_bytes).
  [[nodiscard]] std::int64_t spmm_stream_bytes() const noexcept;
  [[nodiscard]] std::int64_t sddmm_stream_bytes() const noexcept;

 private:
  void build_col_panel_index();
  void build_panel_columns();
  void build_barrier_schedule();

  TileConfig config_{};
  ScalarType scalar_ = ScalarType::f32;
  gidx_t n_rows_global_ = 0;
  gidx_t n_cols_ = 0;
  gidx_t row_begin_ = 0;
  gidx_t n_rows_ = 0;
  int n_row_panels_ = 0;
  int n_col_panels_ = 1;
  gidx_t col_panel_width_ = 0;
  int n_barrier_groups_ = 1;
  int barrier_group_size_ = 1;
  IndexRange touched_columns_{};

  std::vector<Tile> tiles_;
  std::vector<std::int64_t> row_panel_tile_ptr_{0};
  std::vector<std::int64_t> col_panel_tile_ptr_{0, 0};
  std::vector<std::int64_t> col_panel_tile_ids_;
  std::vector<std::int64_t> barrier_group_segment_ptr_;
  std::vector<std::int64_t> barrier_segment_ptr_;
  std::vector<std::int64_t> barrier_tile_ids_;
  std::vector<std::int64_t> panel_col_ptr_{0, 0};
  std::vector<gidx_t> panel_cols_;

  detail::UninitVector<std::uint32_t> col_off_;
  detail::UninitVector<float> values_;       // f32 matrices
  detail::UninitVector<double> values_f64_;  // f64 matrices
  detail::UninitVector<lidx_t> run_row_;
  detail::UninitVector<std::uint32_t> run_end_;
  detail::UninitVector<std::int64_t> run_csr_begin_;
};

// TiledMatrix::split_columns's result: the two parts and, per row, where each part's nonzeros
// of the row start in the part's own order (SDDMM scatters the parts' outputs back to CSR
// order with them: a row's CSR nonzeros are [outside_left | inside | the rest of outside]).
struct ColumnSplit {
  TiledMatrix inside, outside;
  std::vector<std::int64_t> inside_row_ptr, outside_row_ptr;  // n_rows + 1 each
  std::vector<std::int64_t> outside_left;  // per row: outside nonzeros left of `lo`
  // (outside_row_ptr and outside_left only with split_columns' row_pointers)
  std::vector<gidx_t> outside_columns;  // the distinct outside columns, ascending
};

}  // namespace netsparse
