// Per-tile dense/sparse SpMM and the pipelined A (X W) (include/netsparse/dense_tiles.hpp).
// The dense products go to the CBLAS GEMM of the system BLAS (Debian: libblas.so.3, an
// alternative that OpenBLAS provides when installed; scripts/install-deps.sh).
#include "netsparse/dense_tiles.hpp"

#include <cblas.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace netsparse {

namespace {

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("netsparse::") + fn + ": " + what);
}

// C (m x n, ldc) = alpha A (m x k, lda) B (k x n, ldb) + beta C, row-major.
void gemm(int m, int n, int k, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
void gemm(int m, int n, int k, const double* a, std::int64_t lda, const double* b, std::int64_t ldb,
          double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

template <class T>
void check_view(const char* fn, const char* name, const BasicDenseConstView<T>& v, IndexRange need,
                std::int64_t width) {
  if (need.size() == 0) return;
  if (v.data == nullptr) fail(fn, std::string(name) + " is null");
  if (v.ld < width) {
    fail(fn, std::string(name) + ".ld = " + std::to_string(v.ld) + " is less than " +
                 std::to_string(width));
  }
  if (need.begin < v.row_base || need.end - v.row_base > v.n_rows) {
    fail(fn, std::string(name) + " holds rows [" + std::to_string(v.row_base) + ", " +
                 std::to_string(v.row_base + v.n_rows) + "), the call reads [" +
                 std::to_string(need.begin) + ", " + std::to_string(need.end) + ")");
  }
}

template <class T>
void check_out(const char* fn, gidx_t n_rows, const T* c, std::int64_t ldc, int k) {
  if (k < 1) fail(fn, "K must be >= 1, got " + std::to_string(k));
  if (ldc < k) fail(fn, "ldc = " + std::to_string(ldc) + " is less than K = " + std::to_string(k));
  if (n_rows > 0 && c == nullptr) fail(fn, "C is null");
}

template <class T>
void clear_rows(T* c, gidx_t n_rows, std::int64_t ldc, int k) {
#pragma omp parallel for schedule(static) if (n_rows * k > 65536)
  for (gidx_t r = 0; r < n_rows; ++r) std::fill_n(c + r * ldc, k, T{0});
}

template <class T>
void hybrid_spmm(const HybridMatrix& a, BasicDenseConstView<T> b, T* c, std::int64_t ldc, int k,
                 bool accumulate) {
  constexpr const char* fn = "spmm (HybridMatrix)";
  check_out(fn, a.n_rows(), c, ldc, k);
  if ((a.scalar_type() == ScalarType::f32) != std::is_same_v<T, float>) {
    fail(fn, "the matrix holds the other precision than the operands");
  }
  check_view(fn, "B", b, a.touched_columns(), k);
  if (a.n_rows() == 0) return;
  const TiledMatrix& sparse = a.sparse_part();
  if (sparse.nnz() > 0) {
    spmm(sparse, b, c, ldc, k, accumulate);
  } else if (!accumulate) {
    clear_rows(c, a.n_rows(), ldc, k);
  }
  const std::span<const HybridMatrix::DenseTile> tiles = a.dense_tiles();
  if (tiles.empty()) return;
  const std::span<const T> values = a.dense_values<T>();
  // Tiles sorted by row: one group per tile row, each group's output rows written by one thread.
  std::vector<std::size_t> groups{0};
  for (std::size_t i = 1; i < tiles.size(); ++i) {
    if (tiles[i].row != tiles[i - 1].row) groups.push_back(i);
  }
  groups.push_back(tiles.size());
  const auto n_groups = static_cast<std::int64_t>(groups.size()) - 1;
#pragma omp parallel for schedule(dynamic) if (n_groups > 1)
  for (std::int64_t g = 0; g < n_groups; ++g) {
    for (std::size_t i = groups[static_cast<std::size_t>(g)];
         i < groups[static_cast<std::size_t>(g) + 1]; ++i) {
      const HybridMatrix::DenseTile& t = tiles[i];
      gemm(t.rows, k, t.cols, values.data() + t.offset, t.cols,
           b.data + (t.col - b.row_base) * b.ld, b.ld, T{1}, c + t.row * ldc, ldc);
    }
  }
}

template <class T>
void spmm_xw_impl(const TiledMatrix& a, BasicDenseConstView<T> x, int f, const T* w, int k, T* c,
                  std::int64_t ldc, bool pipelined, std::vector<T>& scratch) {
  constexpr const char* fn = "spmm_xw";
  check_out(fn, a.n_rows(), c, ldc, k);
  if (f < 1) fail(fn, "F must be >= 1, got " + std::to_string(f));
  if (w == nullptr) fail(fn, "W is null");
  if ((a.scalar_type() == ScalarType::f32) != std::is_same_v<T, float>) {
    fail(fn, "the matrix holds the other precision than the operands");
  }
  check_view(fn, "X", x, a.touched_columns(), f);
  if (a.n_rows() == 0) return;
  // X W for the columns [range.begin, range.end) into scratch (rows by column - range.begin).
  const auto transform = [&](IndexRange range) {
    scratch.resize(static_cast<std::size_t>(range.size() * k));
    gemm(static_cast<int>(range.size()), k, f, x.data + (range.begin - x.row_base) * x.ld, x.ld, w,
         k, T{0}, scratch.data(), k);
    return BasicDenseConstView<T>{scratch.data(), range.begin, k, range.size()};
  };
  if (!pipelined || a.n_col_panels() == 1) {
    const IndexRange range = a.touched_columns();
    if (range.size() == 0 || a.nnz() == 0) {
      clear_rows(c, a.n_rows(), ldc, k);
      return;
    }
    spmm(a, transform(range), c, ldc, k, false);
    return;
  }
  clear_rows(c, a.n_rows(), ldc, k);
  for (int p = 0; p < a.n_col_panels(); ++p) {
    const std::span<const gidx_t> cols = a.panel_columns(p);
    if (cols.empty()) continue;
    spmm_col_panel(a, p, transform({cols.front(), cols.back() + 1}), c, ldc, k);
  }
}

}  // namespace

HybridMatrix::HybridMatrix(const CsrMatrix& csr, const DenseTileOptions& options, ScalarType scalar)
    : options_(options) {
  constexpr const char* fn = "HybridMatrix";
  if (options.tile_rows < 1)
    fail(fn, "tile_rows must be >= 1, got " + std::to_string(options.tile_rows));
  if (options.tile_cols < 1)
    fail(fn, "tile_cols must be >= 1, got " + std::to_string(options.tile_cols));
  if (!(options.min_density > 0)) {
    fail(fn, "min_density must be > 0 (> 1 turns dense tiles off), got " +
                 std::to_string(options.min_density));
  }
  const gidx_t n = csr.n_rows;
  if (n < 0 || csr.row_ptr.size() != static_cast<std::size_t>(n) + 1 || csr.row_ptr.front() != 0 ||
      static_cast<std::size_t>(csr.row_ptr.back()) != csr.col_idx.size() ||
      csr.values.size() != csr.col_idx.size()) {
    fail(fn, "the CSR's row_ptr (" + std::to_string(csr.row_ptr.size()) + " entries for " +
                 std::to_string(n) + " rows), col_idx and values do not agree");
  }
  for (gidx_t r = 0; r < n; ++r) {
    if (csr.row_ptr[r + 1] < csr.row_ptr[r])
      fail(fn, "row_ptr decreases at row " + std::to_string(r));
  }
  for (const gidx_t col : csr.col_idx) {
    if (col < 0 || col >= csr.n_cols) {
      fail(fn,
           "column " + std::to_string(col) + " outside [0, " + std::to_string(csr.n_cols) + ")");
    }
  }
  const gidx_t tr = options.tile_rows, tc = options.tile_cols;
  CsrMatrix rest;
  rest.n_rows_global = csr.n_rows_global;
  rest.n_cols = csr.n_cols;
  rest.row_begin = csr.row_begin;
  rest.n_rows = n;
  rest.row_ptr.assign(1, 0);
  std::vector<gidx_t> ids, dense_ids, col_lo, col_hi;
  for (gidx_t r0 = 0; r0 < n; r0 += tr) {
    const gidx_t r1 = std::min(n, r0 + tr);
    // The tile columns of this tile row's nonzeros, counted; the dense ones.
    ids.assign(csr.col_idx.begin() + csr.row_ptr[r0], csr.col_idx.begin() + csr.row_ptr[r1]);
    for (gidx_t& id : ids) id /= tc;
    std::sort(ids.begin(), ids.end());
    dense_ids.clear();
    for (std::size_t i = 0; i < ids.size();) {
      std::size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      const gidx_t cols = std::min(tc, csr.n_cols - ids[i] * tc);
      if (static_cast<double>(j - i) >=
          options.min_density * static_cast<double>((r1 - r0) * cols)) {
        dense_ids.push_back(ids[i]);
        dense_nnz_ += static_cast<std::int64_t>(j - i);
      }
      i = j;
    }
    // A dense tile spans only the columns its nonzeros touch (GEMM reads every column of the
    // tile from B, which need hold no more than the touched columns).
    col_lo.assign(dense_ids.size(), csr.n_cols);
    col_hi.assign(dense_ids.size(), 0);
    for (std::int64_t q = csr.row_ptr[r0]; q < csr.row_ptr[r1] && !dense_ids.empty(); ++q) {
      const gidx_t col = csr.col_idx[static_cast<std::size_t>(q)];
      const auto it = std::lower_bound(dense_ids.begin(), dense_ids.end(), col / tc);
      if (it == dense_ids.end() || *it != col / tc) continue;
      const auto d = static_cast<std::size_t>(it - dense_ids.begin());
      col_lo[d] = std::min(col_lo[d], col);
      col_hi[d] = std::max(col_hi[d], col + 1);
    }
    for (std::size_t d = 0; d < dense_ids.size(); ++d) {
      DenseTile t;
      t.row = r0;
      t.col = col_lo[d];
      t.rows = static_cast<int>(r1 - r0);
      t.cols = static_cast<int>(col_hi[d] - col_lo[d]);
      t.offset = scalar == ScalarType::f32 ? std::ssize(dense_f32_) : std::ssize(dense_f64_);
      const auto size = static_cast<std::size_t>(t.rows) * static_cast<std::size_t>(t.cols);
      if (scalar == ScalarType::f32) {
        dense_f32_.resize(dense_f32_.size() + size, 0.0f);
      } else {
        dense_f64_.resize(dense_f64_.size() + size, 0.0);
      }
      dense_.push_back(t);
    }
    const std::size_t first = dense_.size() - dense_ids.size();
    for (gidx_t r = r0; r < r1; ++r) {
      for (std::int64_t q = csr.row_ptr[r]; q < csr.row_ptr[r + 1]; ++q) {
        const gidx_t col = csr.col_idx[static_cast<std::size_t>(q)];
        const double v = csr.values[static_cast<std::size_t>(q)];
        const auto it = std::lower_bound(dense_ids.begin(), dense_ids.end(), col / tc);
        if (it != dense_ids.end() && *it == col / tc) {
          const DenseTile& t = dense_[first + static_cast<std::size_t>(it - dense_ids.begin())];
          const std::int64_t at = t.offset + (r - t.row) * t.cols + (col - t.col);
          if (scalar == ScalarType::f32) {
            dense_f32_[static_cast<std::size_t>(at)] = static_cast<float>(v);
          } else {
            dense_f64_[static_cast<std::size_t>(at)] = v;
          }
        } else {
          rest.col_idx.push_back(col);
          rest.values.push_back(v);
        }
      }
      rest.row_ptr.push_back(std::ssize(rest.col_idx));
    }
  }
  if (n == 0) rest.row_ptr.assign(1, 0);
  // Validates what the counting above did not (sorted, unique columns per row; f32 range).
  sparse_ = TiledMatrix(rest, options.sparse_tiling, scalar);
  touched_ = sparse_.touched_columns();
  for (const DenseTile& t : dense_) {
    touched_ = touched_.size() == 0 ? IndexRange{t.col, t.col + t.cols}
                                    : IndexRange{std::min(touched_.begin, t.col),
                                                 std::max(touched_.end, t.col + t.cols)};
  }
}

void spmm(const HybridMatrix& a, DenseConstView b, float* c, std::int64_t ldc, int k,
          bool accumulate) {
  hybrid_spmm(a, b, c, ldc, k, accumulate);
}
void spmm(const HybridMatrix& a, DenseConstViewF64 b, double* c, std::int64_t ldc, int k,
          bool accumulate) {
  hybrid_spmm(a, b, c, ldc, k, accumulate);
}

void spmm_xw(const TiledMatrix& a, DenseConstView x, int f, const float* w, int k, float* c,
             std::int64_t ldc, bool pipelined, std::vector<float>& scratch) {
  spmm_xw_impl(a, x, f, w, k, c, ldc, pipelined, scratch);
}
void spmm_xw(const TiledMatrix& a, DenseConstViewF64 x, int f, const double* w, int k, double* c,
             std::int64_t ldc, bool pipelined, std::vector<double>& scratch) {
  spmm_xw_impl(a, x, f, w, k, c, ldc, pipelined, scratch);
}

}  // namespace netsparse
