// GNN locality in the local SpMM (docs/benchmarks.md, "GCN locality"):
//
// 1. A per-tile dense/sparse choice. The row block is cut into tiles of `tile_rows` local rows
//    x `tile_cols` global columns; a tile holding at least min_density * rows * cols nonzeros
//    is stored as a dense row-major block and multiplied by a BLAS GEMM (Debian's libblas.so.3,
//    OpenBLAS where installed), every other nonzero goes to a SPADE-tiled sparse part and the
//    tile kernel (local_kernels.hpp). A reordering that clusters a graph's edges near the
//    diagonal (rcm, metis-rcm) is what can make tiles dense enough.
// 2. A (X W) pipelined: X W (the GCN's dense transform, F -> K features) computed for one
//    column panel of A at a time, just before the panel's tiles consume it, so the panel's rows
//    of X W are still in cache when the SpMM reads them, instead of the whole X W first.
//
// Both take and give the operands of local_kernels.hpp: B and X addressed by global column
// through a view, C by local row; errors are std::invalid_argument naming the argument.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse {

struct DenseTileOptions {
  int tile_rows = 64;     // local rows per tile (> 0)
  gidx_t tile_cols = 64;  // global columns per tile (> 0), blocks [j * tile_cols, ...)
  // A tile is dense when nnz >= min_density * its rows * its columns (edge tiles count their
  // actual size). > 1: no tile is dense (everything sparse); 0 < d <= 1 otherwise. 0.4: where
  // GEMM started to win on this project's 2-core test machine for 64 x 64 tiles (0.3-0.5 by K;
  // bench_dense_tiles, docs/benchmarks.md "GCN locality").
  double min_density = 0.4;
  TileConfig sparse_tiling{};  // the SPADE tiling of the nonzeros left sparse
};

class HybridMatrix {
 public:
  // One dense tile: local rows [row, row + rows), global columns [col, col + cols); its
  // values row-major (ld = cols) at `offset` in the dense values.
  struct DenseTile {
    gidx_t row = 0;
    gidx_t col = 0;
    int rows = 0;
    int cols = 0;
    std::int64_t offset = 0;
  };

  HybridMatrix() = default;
  // Validates `csr` as TiledMatrix does and `options` (sizes > 0, min_density > 0).
  HybridMatrix(const CsrMatrix& csr, const DenseTileOptions& options,
               ScalarType scalar = ScalarType::f32);

  [[nodiscard]] const TiledMatrix& sparse_part() const noexcept { return sparse_; }
  [[nodiscard]] std::span<const DenseTile> dense_tiles() const noexcept { return dense_; }
  [[nodiscard]] std::int64_t dense_nnz() const noexcept { return dense_nnz_; }
  [[nodiscard]] std::int64_t nnz() const noexcept { return dense_nnz_ + sparse_.nnz(); }
  [[nodiscard]] gidx_t n_rows() const noexcept { return sparse_.n_rows(); }
  [[nodiscard]] ScalarType scalar_type() const noexcept { return sparse_.scalar_type(); }
  [[nodiscard]] const DenseTileOptions& options() const noexcept { return options_; }
  // The columns any nonzero (dense or sparse) touches.
  [[nodiscard]] IndexRange touched_columns() const noexcept { return touched_; }
  template <class T>
  [[nodiscard]] std::span<const T> dense_values() const noexcept {
    if constexpr (std::is_same_v<T, float>) {
      return dense_f32_;
    } else {
      return dense_f64_;
    }
  }

 private:
  DenseTileOptions options_{};
  TiledMatrix sparse_;
  std::vector<DenseTile> dense_;  // by (row, col)
  std::vector<float> dense_f32_;
  std::vector<double> dense_f64_;
  std::int64_t dense_nnz_ = 0;
  IndexRange touched_{};
};

// C (n_rows x K, ldc) += A * B, or = when accumulate is false: the sparse part through the tile
// kernel, the dense tiles through GEMM (OpenMP over tile rows, each output row by one thread).
void spmm(const HybridMatrix& a, DenseConstView b, float* c, std::int64_t ldc, int k,
          bool accumulate = true);
void spmm(const HybridMatrix& a, DenseConstViewF64 b, double* c, std::int64_t ldc, int k,
          bool accumulate = true);

// C (n_rows x K, ldc) = A (X W): X is F columns wide, addressed by global column like B
// (x.ld >= f), W is F x K row-major (ld K). pipelined: per column panel of A (its TileConfig's
// col_panel), X W for the panel's touched column range into `scratch`, then the panel's tiles;
// otherwise X W for every touched column first, then one SpMM. `scratch` is resized as needed
// (reuse it across calls to avoid the allocation).
void spmm_xw(const TiledMatrix& a, DenseConstView x, int f, const float* w, int k, float* c,
             std::int64_t ldc, bool pipelined, std::vector<float>& scratch);
void spmm_xw(const TiledMatrix& a, DenseConstViewF64 x, int f, const double* w, int k, double* c,
             std::int64_t ldc, bool pipelined, std::vector<double>& scratch);

}  // namespace netsparse
