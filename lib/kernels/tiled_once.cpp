// TiledMatrix::split_columns: the tiled layout of a pattern used once, in one streaming pass
// (tiled.hpp says what it builds and why not the constructor).
//
// The pass writes every nonzero to both parts and advances only the part it belongs to (the
// other's slot is overwritten by the next nonzero): no per-row search for the inside run and no
// mispredicted branch per nonzero. It marks every column in one bitmap over the columns (n_cols
// / 8 bytes, 8 KiB on kron:16: L1-resident) instead of a tag per column, whose random
// read-modify-write missed L1 and L2 on every nonzero (the profile of the changing-pattern path,
// docs/benchmarks.md part 4). The outside columns' numbers are then rank queries: the marked
// columns in the words before (a 4 B prefix per 64 columns) plus a popcount.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/tiled.hpp"
#include "sparse/csr_part.hpp"

namespace netsparse {

namespace {

constexpr int kOnceRowPanel = 256;  // TileConfig's default: the layout the kernels are tuned on

// Where pass 2 writes one part's runs and tiles.
struct TiledMatrixRuns {
  lidx_t* run_row;
  std::uint32_t* run_end;
  std::int64_t* run_csr;
  Tile* tiles;
  std::int64_t* tile_ptr;
};

[[noreturn]] void fail_split(const std::string& what) {
  throw std::invalid_argument("netsparse::TiledMatrix::split_columns: " + what);
}

// The bitmap's bits of columns [lo, hi) appended to `out` as columns, then cleared.
void take_range(std::vector<std::uint64_t>& words, gidx_t lo, gidx_t hi, std::vector<gidx_t>& out) {
  for (gidx_t w = lo >> 6; w < ((hi + 63) >> 6); ++w) {
    std::uint64_t mask = ~std::uint64_t{0};
    if (w == (lo >> 6)) mask &= ~std::uint64_t{0} << (lo & 63);
    if (w == ((hi - 1) >> 6) && (hi & 63) != 0) mask &= (std::uint64_t{1} << (hi & 63)) - 1;
    std::uint64_t bits = words[static_cast<std::size_t>(w)] & mask;
    words[static_cast<std::size_t>(w)] &= ~mask;
    for (; bits != 0; bits &= bits - 1) out.push_back(w * 64 + std::countr_zero(bits));
  }
}

}  // namespace

namespace {

// Pass 1, the nonzero stream, for values stored as V: every nonzero to both parts' arrays (the
// other part's slot is overwritten next), every column marked, and per row where its inside
// nonzeros end (inside_end[r + 1]; the outside ones end at row_ptr[r + 1] - inside_end[r + 1]).
// Nothing else is live in the loop: with the row bookkeeping in it too, the compiler spilled a
// pointer per nonzero (`perf annotate`: most samples on reloads from the stack; NotreDame_www's
// half-rows, 1.1 nonzeros per row, 3.0 ms for 182 K nonzeros). Returns bit 0: a column outside
// [0, n_cols), bit 1: a value beyond float's range (f32 only).
template <class V>
unsigned split_stream(const CsrMatrix& csr, gidx_t lo, gidx_t hi, std::uint32_t* __restrict in_col,
                      V* __restrict in_val, std::uint32_t* __restrict out_col,
                      V* __restrict out_val, std::uint64_t* __restrict words,
                      std::int64_t* __restrict inside_end) {
  const gidx_t n = csr.n_rows;
  const auto n_cols = static_cast<std::uint64_t>(csr.n_cols);
  const auto width = static_cast<std::uint64_t>(hi - lo);
  const gidx_t* __restrict col = csr.col_idx.data();
  const double* __restrict val = csr.values.data();
  const std::int64_t* __restrict row_ptr = csr.row_ptr.data();
  std::int64_t ni = 0, no = 0, j = 0;
  unsigned flags = 0;
  inside_end[0] = 0;
  for (gidx_t r = 0; r < n; ++r) {
    for (const std::int64_t e = row_ptr[r + 1]; j < e; ++j) {
      const gidx_t c = col[j];
      const auto uc = static_cast<std::uint64_t>(c);
      const bool bad = uc >= n_cols;
      const std::uint64_t cm = bad ? 0 : uc;  // a bad column marks column 0, then is refused
      words[cm >> 6] |= std::uint64_t{1} << (cm & 63);
      // Inside or not is a coin toss per nonzero: the hint keeps the count updates as
      // conditional moves (without it GCC 12 branched on it, a misprediction per nonzero).
      const bool inside =
          __builtin_expect_with_probability(static_cast<std::uint64_t>(c - lo) < width, 1, 0.5);
      const V v = static_cast<V>(val[j]);
      if constexpr (std::is_same_v<V, float>) {
        flags |= (std::fabs(val[j]) > static_cast<double>(std::numeric_limits<float>::max())) << 1;
      }
      flags |= bad;
      in_col[ni] = static_cast<std::uint32_t>(cm);
      in_val[ni] = v;
      out_col[no] = static_cast<std::uint32_t>(cm);
      out_val[no] = v;
      ni += inside ? 1 : 0;
      no += inside ? 0 : 1;
    }
    inside_end[r + 1] = ni;
  }
  return flags;
}

// Pass 2, per row: the runs (one per non-empty row of a part, written branch-free) and the tiles
// (one per non-empty row panel of a part) of both parts.
void split_runs(const CsrMatrix& csr, const std::int64_t* inside_end, TiledMatrixRuns in,
                TiledMatrixRuns out, std::int64_t counts[4]) {
  const gidx_t n = csr.n_rows;
  const std::int64_t* row_ptr = csr.row_ptr.data();
  std::int64_t nri = 0, nro = 0, nti = 0, nto = 0;
  in.tile_ptr[0] = out.tile_ptr[0] = 0;
  const int n_panels = static_cast<int>((n + kOnceRowPanel - 1) / kOnceRowPanel);
  for (int rp = 0; rp < n_panels; ++rp) {
    const gidx_t r0 = gidx_t{rp} * kOnceRowPanel, r1 = std::min(n, r0 + kOnceRowPanel);
    const std::int64_t tile_in = inside_end[r0], tile_out = row_ptr[r0] - inside_end[r0];
    const std::int64_t runs_in = nri, runs_out = nro;
    for (gidx_t r = r0; r < r1; ++r) {
      const std::int64_t ib = inside_end[r], ie = inside_end[r + 1];
      const std::int64_t ob = row_ptr[r] - ib, oe = row_ptr[r + 1] - ie;
      in.run_row[nri] = static_cast<lidx_t>(r);
      in.run_end[nri] = static_cast<std::uint32_t>(ie - tile_in);
      in.run_csr[nri] = ib;
      nri += ie > ib ? 1 : 0;
      out.run_row[nro] = static_cast<lidx_t>(r);
      out.run_end[nro] = static_cast<std::uint32_t>(oe - tile_out);
      out.run_csr[nro] = ob;
      nro += oe > ob ? 1 : 0;
    }
    const std::int64_t tile_in_end = inside_end[r1];
    const std::int64_t tile_out_end = row_ptr[r1] - inside_end[r1];
    if (tile_in_end - tile_in > std::numeric_limits<std::uint32_t>::max() ||
        tile_out_end - tile_out > std::numeric_limits<std::uint32_t>::max())
      fail_split("a row panel of 256 rows holds more than 2^32 - 1 nonzeros");
    if (tile_in_end > tile_in)
      in.tiles[nti++] = Tile{rp, 0, tile_in, tile_in_end - tile_in, runs_in, nri - runs_in};
    if (tile_out_end > tile_out)
      out.tiles[nto++] = Tile{rp, 0, tile_out, tile_out_end - tile_out, runs_out, nro - runs_out};
    in.tile_ptr[rp + 1] = nti;
    out.tile_ptr[rp + 1] = nto;
  }
  counts[0] = nri;
  counts[1] = nro;
  counts[2] = nti;
  counts[3] = nto;
}

}  // namespace

void TiledMatrix::split_columns(const CsrMatrix& csr, gidx_t lo, gidx_t hi, bool compact_outside,
                                ScalarType scalar, ColumnSplit& out, bool row_pointers) {
  const gidx_t n = csr.n_rows;
  if (n < 0 || csr.n_cols < 0 || csr.row_begin < 0 || csr.row_begin + n > csr.n_rows_global)
    fail_split("bad dimensions (n_rows " + std::to_string(n) + ", n_cols " +
               std::to_string(csr.n_cols) + ", row_begin " + std::to_string(csr.row_begin) +
               ", n_rows_global " + std::to_string(csr.n_rows_global) + ")");
  if (n > std::numeric_limits<lidx_t>::max())
    fail_split("row block of " + std::to_string(n) + " rows does not fit 32-bit local rows");
  if (csr.n_cols > kMaxColPanelWidth)
    fail_split(std::to_string(csr.n_cols) + " columns do not fit 32-bit column offsets");
  if (std::ssize(csr.row_ptr) != n + 1 || csr.row_ptr[0] != 0)
    fail_split("row_ptr has " + std::to_string(csr.row_ptr.size()) +
               " entries (expected n_rows + 1 = " + std::to_string(n + 1) + ", the first 0)");
  const std::int64_t nnz = csr.row_ptr.back();
  if (std::ssize(csr.col_idx) != nnz || std::ssize(csr.values) != nnz)
    fail_split("row_ptr says " + std::to_string(nnz) + " nonzeros but col_idx has " +
               std::to_string(csr.col_idx.size()) + " and values " +
               std::to_string(csr.values.size()));
  for (gidx_t r = 0; r < n; ++r) {
    if (csr.row_ptr[r + 1] < csr.row_ptr[r])
      fail_split("row_ptr decreases at local row " + std::to_string(r));
  }
  if (lo < 0 || hi < lo || hi > csr.n_cols)
    fail_split("column range [" + std::to_string(lo) + ", " + std::to_string(hi) +
               ") is not inside [0, " + std::to_string(csr.n_cols) + ")");

  TiledMatrix& in = out.inside;
  TiledMatrix& ou = out.outside;
  const int n_panels = static_cast<int>((n + kOnceRowPanel - 1) / kOnceRowPanel);
  for (TiledMatrix* m : {&in, &ou}) {
    m->config_ = TileConfig{kOnceRowPanel, 0, false, 1};
    m->scalar_ = scalar;
    m->n_rows_global_ = csr.n_rows_global;
    m->n_cols_ = csr.n_cols;
    m->row_begin_ = csr.row_begin;
    m->n_rows_ = n;
    m->n_row_panels_ = n_panels;
    m->n_col_panels_ = 1;
    m->n_barrier_groups_ = 1;
    m->barrier_group_size_ = 1;
    m->barrier_group_segment_ptr_.clear();
    m->barrier_segment_ptr_.clear();
    m->barrier_tile_ids_.clear();
    // Room for every nonzero in either part plus the slot the other part's writes land in.
    m->col_off_.resize(static_cast<std::size_t>(nnz) + 1);
    if (scalar == ScalarType::f32) {
      m->values_.resize(static_cast<std::size_t>(nnz) + 1);
      m->values_f64_.clear();
    } else {
      m->values_f64_.resize(static_cast<std::size_t>(nnz) + 1);
      m->values_.clear();
    }
    m->run_row_.resize(static_cast<std::size_t>(n));
    m->run_end_.resize(static_cast<std::size_t>(n));
    m->run_csr_begin_.resize(static_cast<std::size_t>(n));
    m->tiles_.resize(static_cast<std::size_t>(n_panels));
    m->row_panel_tile_ptr_.resize(static_cast<std::size_t>(n_panels) + 1);
  }
  out.inside_row_ptr.resize(static_cast<std::size_t>(n) + 1);
  std::vector<std::uint64_t> words(static_cast<std::size_t>((csr.n_cols + 63) / 64) + 1, 0);

  unsigned flags = 0;
  if (scalar == ScalarType::f32) {
    flags =
        split_stream<float>(csr, lo, hi, in.col_off_.data(), in.values_.data(), ou.col_off_.data(),
                            ou.values_.data(), words.data(), out.inside_row_ptr.data());
  } else {
    flags = split_stream<double>(csr, lo, hi, in.col_off_.data(), in.values_f64_.data(),
                                 ou.col_off_.data(), ou.values_f64_.data(), words.data(),
                                 out.inside_row_ptr.data());
  }
  if ((flags & 1) != 0) {
    for (std::int64_t j = 0; j < nnz; ++j) {
      if (csr.col_idx[j] < 0 || csr.col_idx[j] >= csr.n_cols) {
        const auto row =
            std::upper_bound(csr.row_ptr.begin(), csr.row_ptr.end(), j) - csr.row_ptr.begin() - 1;
        fail_split("column " + std::to_string(csr.col_idx[j]) + " of local row " +
                   std::to_string(row) + " is outside [0, " + std::to_string(csr.n_cols) + ")");
      }
    }
  }
  if ((flags & 2) != 0)
    fail_split(
        "a value does not fit fp32 (magnitude above 3.4e38); compute in fp64 "
        "(ScalarType::f64)");
  std::int64_t run_counts[4];
  split_runs(csr, out.inside_row_ptr.data(),
             {in.run_row_.data(), in.run_end_.data(), in.run_csr_begin_.data(), in.tiles_.data(),
              in.row_panel_tile_ptr_.data()},
             {ou.run_row_.data(), ou.run_end_.data(), ou.run_csr_begin_.data(), ou.tiles_.data(),
              ou.row_panel_tile_ptr_.data()},
             run_counts);
  const std::int64_t n_inside = out.inside_row_ptr[static_cast<std::size_t>(n)];
  const std::int64_t counts[6] = {n_inside,      nnz - n_inside, run_counts[0],
                                  run_counts[1], run_counts[2],  run_counts[3]};
  if (row_pointers) {
    // SDDMM's scatter: the outside part's row pointers and, per row, its nonzeros left of lo
    // (columns are sorted: a binary search, skipped for rows wholly on one side).
    out.outside_row_ptr.resize(static_cast<std::size_t>(n) + 1);
    out.outside_left.resize(static_cast<std::size_t>(n));
    for (gidx_t r = 0; r <= n; ++r)
      out.outside_row_ptr[static_cast<std::size_t>(r)] = csr.row_ptr[r] - out.inside_row_ptr[r];
    for (gidx_t r = 0; r < n; ++r) {
      const std::int64_t b = csr.row_ptr[r], e = csr.row_ptr[r + 1];
      out.outside_left[static_cast<std::size_t>(r)] =
          csr_part_bounds(csr.col_idx.data(), b, e, lo, hi).lo_at - b;
    }
  } else {
    out.outside_row_ptr.clear();
    out.outside_left.clear();
  }
  for (int part = 0; part < 2; ++part) {
    TiledMatrix& m = part == 0 ? in : ou;
    const auto nz = static_cast<std::size_t>(counts[part]);
    m.col_off_.resize(nz);  // shrinking: no reallocation, no writes
    if (scalar == ScalarType::f32) {
      m.values_.resize(nz);
    } else {
      m.values_f64_.resize(nz);
    }
    m.run_row_.resize(static_cast<std::size_t>(counts[2 + part]));
    m.run_end_.resize(static_cast<std::size_t>(counts[2 + part]));
    m.run_csr_begin_.resize(static_cast<std::size_t>(counts[2 + part]));
    m.tiles_.resize(static_cast<std::size_t>(counts[4 + part]));
    m.build_col_panel_index();
  }

  // The inside part's distinct columns, then (the inside bits cleared) the outside part's.
  in.panel_cols_.clear();
  if (hi > lo) take_range(words, lo, hi, in.panel_cols_);
  out.outside_columns.clear();
  if (csr.n_cols > 0) take_range(words, 0, csr.n_cols, out.outside_columns);
  in.panel_col_ptr_ = {0, std::ssize(in.panel_cols_)};
  in.col_panel_width_ = std::clamp<gidx_t>(csr.n_cols, 1, kMaxColPanelWidth);
  in.touched_columns_ = in.panel_cols_.empty()
                            ? IndexRange{}
                            : IndexRange{in.panel_cols_.front(), in.panel_cols_.back() + 1};

  const std::vector<gidx_t>& ghosts = out.outside_columns;
  const auto n_ghosts = static_cast<gidx_t>(ghosts.size());
  if (compact_outside) {
    // Renumber: the outside column's rank among the distinct outside columns. The bitmap is
    // re-marked from the list (the take cleared it) and prefixed per word.
    std::fill(words.begin(), words.end(), 0);
    for (const gidx_t c : ghosts)
      words[static_cast<std::size_t>(c) >> 6] |= std::uint64_t{1} << (c & 63);
    std::vector<std::uint32_t> prefix(words.size());
    std::uint32_t count = 0;
    for (std::size_t w = 0; w < words.size(); ++w) {
      prefix[w] = count;
      count += static_cast<std::uint32_t>(std::popcount(words[w]));
    }
    std::uint32_t* oc = ou.col_off_.data();
    const std::int64_t n_out = counts[1];
    for (std::int64_t j = 0; j < n_out; ++j) {
      const std::uint32_t c = oc[j];
      const std::uint64_t below = (std::uint64_t{1} << (c & 63)) - 1;
      oc[j] = prefix[c >> 6] + static_cast<std::uint32_t>(std::popcount(words[c >> 6] & below));
    }
    ou.n_cols_ = n_ghosts;
    ou.panel_cols_.resize(ghosts.size());
    for (gidx_t i = 0; i < n_ghosts; ++i) ou.panel_cols_[static_cast<std::size_t>(i)] = i;
  } else {
    ou.panel_cols_.assign(ghosts.begin(), ghosts.end());
  }
  ou.panel_col_ptr_ = {0, std::ssize(ou.panel_cols_)};
  ou.col_panel_width_ = std::clamp<gidx_t>(ou.n_cols_, 1, kMaxColPanelWidth);
  ou.touched_columns_ = ou.panel_cols_.empty()
                            ? IndexRange{}
                            : IndexRange{ou.panel_cols_.front(), ou.panel_cols_.back() + 1};
}

}  // namespace netsparse
