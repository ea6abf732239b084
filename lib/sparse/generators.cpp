#include "netsparse/generators.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparse/counter_rng.hpp"

namespace netsparse {

namespace {

using sparse_detail::CounterRng;
using sparse_detail::KeyedPermutation;
using sparse_detail::mix64;

// Rows per scheduling unit in the per-row loops (Kronecker degrees are very skewed).
constexpr int kRowChunk = 256;

void check_rows(const char* generator, gidx_t row_begin, gidx_t row_end, gidx_t n_rows) {
  if (row_begin < 0 || row_begin > row_end || row_end > n_rows) {
    throw std::invalid_argument(std::string(generator) + ": rows [" + std::to_string(row_begin) +
                                ", " + std::to_string(row_end) + ") are not inside the " +
                                std::to_string(n_rows) + " rows of the matrix");
  }
}

// Row r's count, held at ptr[r + 1] (ptr[0] == 0), becomes the offset of row r + 1.
void counts_to_row_ptr(std::vector<std::int64_t>& ptr) {
  for (size_t r = 1; r < ptr.size(); ++r) ptr[r] += ptr[r - 1];
}

CsrMatrix empty_block(gidx_t n_rows_global, gidx_t n_cols, gidx_t row_begin, gidx_t row_end) {
  CsrMatrix m;
  m.n_rows_global = n_rows_global;
  m.n_cols = n_cols;
  m.row_begin = row_begin;
  m.n_rows = row_end - row_begin;
  m.row_ptr.assign(static_cast<size_t>(m.n_rows) + 1, 0);
  return m;
}

// Rows whose columns are drawn, then sorted and merged (Kronecker, web): row r (0-based in the
// block) has degree_of(r) draws, which draw(r, first, degree) writes to first[0, degree).
// Rows run in parallel above 1024 of them.
template <class DegreeOf, class Draw>
CsrMatrix drawn_rows(gidx_t n, gidx_t row_begin, gidx_t row_end, const DegreeOf& degree_of,
                     const Draw& draw) {
  const gidx_t n_rows = row_end - row_begin;
  const bool parallel = n_rows > 1024;
  std::vector<std::int64_t> raw_start(static_cast<size_t>(n_rows) + 1, 0);
#pragma omp parallel for schedule(static) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) raw_start[r + 1] = degree_of(r);
  counts_to_row_ptr(raw_start);
  std::unique_ptr<gidx_t[]> raw(new gidx_t[static_cast<size_t>(raw_start[n_rows])]);
  CsrMatrix m = empty_block(n, n, row_begin, row_end);
#pragma omp parallel for schedule(dynamic, kRowChunk) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) {
    gidx_t* const first = raw.get() + raw_start[r];
    const std::int64_t degree = raw_start[r + 1] - raw_start[r];
    draw(r, first, degree);
    std::sort(first, first + degree);
    m.row_ptr[r + 1] = std::unique(first, first + degree) - first;
  }
  counts_to_row_ptr(m.row_ptr);
  // Compact.
  m.col_idx.resize(static_cast<size_t>(m.nnz()));
#pragma omp parallel for schedule(dynamic, kRowChunk) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) {
    std::copy(raw.get() + raw_start[r],
              raw.get() + raw_start[r] + (m.row_ptr[r + 1] - m.row_ptr[r]),
              m.col_idx.begin() + m.row_ptr[r]);
  }
  m.values.assign(static_cast<size_t>(m.nnz()), 1.0);
  return m;
}

// ---- Kronecker ----------------------------------------------------------------------------

class KroneckerModel {
 public:
  explicit KroneckerModel(const KroneckerParams& p) : params_(p) {
    const double d = 1.0 - p.a - p.b - p.c;
    const auto in_unit = [](double x) { return x > 0.0 && x < 1.0; };
    if (p.scale < 1 || p.scale > 40) {
      throw std::invalid_argument("generate_kronecker: scale must be in [1, 40], got " +
                                  std::to_string(p.scale));
    }
    if (p.edge_factor < 1 || p.edge_factor > (1 << 20)) {
      throw std::invalid_argument("generate_kronecker: edge_factor must be in [1, 2^20], got " +
                                  std::to_string(p.edge_factor));
    }
    if (!in_unit(p.a) || !in_unit(p.b) || !in_unit(p.c) || !in_unit(d)) {
      throw std::invalid_argument(
          "generate_kronecker: a, b, c and d = 1 - a - b - c must all lie in (0, 1)");
    }
    n_ = gidx_t{1} << p.scale;
    edges_ = static_cast<std::int64_t>(p.edge_factor) * n_;
    p_source_one_ = p.c + d;
    // P(destination bit = 1 | source bit) as 16-bit thresholds (resolution 2^-16, far below
    // anything the initiator's two decimals express); four levels per 64-bit random word.
    dst_one_threshold_[0] = static_cast<std::uint64_t>(std::lround(p.b / (p.a + p.b) * 0x1.0p16));
    dst_one_threshold_[1] = static_cast<std::uint64_t>(std::lround(d / (p.c + d) * 0x1.0p16));
    words_per_edge_ = static_cast<std::uint64_t>((p.scale + 3) / 4);
  }

  [[nodiscard]] gidx_t n() const noexcept { return n_; }
  [[nodiscard]] KeyedPermutation permutation() const noexcept {
    return KeyedPermutation(static_cast<std::uint64_t>(n_), mix64(params_.seed ^ 0x7065726dULL));
  }

  // Out-degree of pre-permutation vertex u: Binomial(M, p(u)).
  [[nodiscard]] std::int64_t degree(std::uint64_t u) const noexcept {
    const int ones = __builtin_popcountll(u);
    const double p =
        std::pow(p_source_one_, ones) * std::pow(1.0 - p_source_one_, params_.scale - ones);
    const double mean = static_cast<double>(edges_) * p;
    const CounterRng rng(params_.seed, 2 * u);
    if (mean < 32.0) {
      // Exact: invert the CDF, walking up from 0 (expected mean + 1 steps).
      const double target = rng.uniform(0);
      const double ratio = p / (1.0 - p);
      double pmf = std::exp(static_cast<double>(edges_) * std::log1p(-p));
      double cdf = pmf;
      std::int64_t k = 0;
      while (target > cdf && k < edges_ && pmf > 0.0) {
        pmf *= static_cast<double>(edges_ - k) / static_cast<double>(k + 1) * ratio;
        ++k;
        cdf += pmf;
      }
      return k;
    }
    // Normal approximation (Box-Muller), rounded and clamped.
    const double u1 = 1.0 - rng.uniform(0);  // (0, 1]
    const double u2 = rng.uniform(1);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    const double draw = std::round(mean + std::sqrt(mean * (1.0 - p)) * z);
    return static_cast<std::int64_t>(std::clamp(draw, 0.0, static_cast<double>(edges_)));
  }

  // Destination (pre-permutation) of u's k-th edge: descend the levels, most significant bit
  // first, four levels per random word.
  [[nodiscard]] std::uint64_t destination(const CounterRng& rng, std::uint64_t u,
                                          std::int64_t k) const noexcept {
    const int s = params_.scale;
    std::uint64_t v = 0;
    std::uint64_t word = 0;
    for (int level = 0; level < s; ++level) {
      if ((level & 3) == 0) {
        word = rng.word(static_cast<std::uint64_t>(k) * words_per_edge_ + level / 4);
      }
      const std::uint64_t src_bit = (u >> (s - 1 - level)) & 1;
      const std::uint64_t r16 = word & 0xffff;
      word >>= 16;
      v = (v << 1) | static_cast<std::uint64_t>(r16 < dst_one_threshold_[src_bit]);
    }
    return v;
  }

  [[nodiscard]] CounterRng destination_rng(std::uint64_t u) const noexcept {
    return CounterRng(params_.seed, 2 * u + 1);
  }

 private:
  KroneckerParams params_;
  gidx_t n_ = 0;
  std::int64_t edges_ = 0;
  double p_source_one_ = 0.0;
  std::uint64_t dst_one_threshold_[2] = {0, 0};
  std::uint64_t words_per_edge_ = 1;
};

// ---- road ---------------------------------------------------------------------------------

class RoadModel {
 public:
  explicit RoadModel(const RoadParams& p) : params_(p) {
    if (p.width < 1 || p.height < 1 || p.width > (gidx_t{1} << 31) ||
        p.height > (gidx_t{1} << 31)) {
      throw std::invalid_argument("generate_road: width and height must be in [1, 2^31]");
    }
    if (!(p.long_edge_fraction >= 0.0 && p.long_edge_fraction <= 1.0)) {
      throw std::invalid_argument("generate_road: long_edge_fraction must be in [0, 1]");
    }
    if (!(p.grid_edge_fraction >= 0.0 && p.grid_edge_fraction <= 1.0)) {
      throw std::invalid_argument("generate_road: grid_edge_fraction must be in [0, 1]");
    }
    n_ = p.width * p.height;
  }

  [[nodiscard]] gidx_t n() const noexcept { return n_; }

  // The vertex v is paired with by a long edge, or -1.
  [[nodiscard]] gidx_t long_edge_partner(const KeyedPermutation& perm, const CounterRng& rng,
                                         gidx_t v) const noexcept {
    const std::uint64_t slot = perm.inverse(static_cast<std::uint64_t>(v));
    const std::uint64_t mate_slot = slot ^ 1;
    if (mate_slot >= static_cast<std::uint64_t>(n_)) return -1;
    if (rng.uniform(slot >> 1) >= params_.long_edge_fraction) return -1;
    return static_cast<gidx_t>(perm.forward(mate_slot));
  }

  // Writes v's sorted, distinct neighbours to out (room for 5); returns how many.
  int neighbours(gidx_t v, gidx_t partner, gidx_t* out) const noexcept {
    const gidx_t w = params_.width;
    const gidx_t x = v % w;
    const gidx_t y = v / w;
    int k = 0;
    // Grid edge (u, u + 1) is keyed 2u, (u, u + w) 2u + 1: both ends draw the same number.
    if (y > 0 && keep(2 * (v - w) + 1)) out[k++] = v - w;
    if (x > 0 && keep(2 * (v - 1))) out[k++] = v - 1;
    if (x + 1 < w && keep(2 * v)) out[k++] = v + 1;
    if (y + 1 < params_.height && keep(2 * v + 1)) out[k++] = v + w;
    if (partner >= 0 && std::find(out, out + k, partner) == out + k) {
      out[k++] = partner;
      std::sort(out, out + k);
    }
    return k;
  }

  [[nodiscard]] KeyedPermutation permutation() const noexcept {
    return KeyedPermutation(static_cast<std::uint64_t>(n_), mix64(params_.seed ^ 0x726f6164ULL));
  }
  [[nodiscard]] CounterRng pair_rng() const noexcept {
    return CounterRng(params_.seed, 0x70616972ULL);
  }

 private:
  [[nodiscard]] bool keep(gidx_t edge_key) const noexcept {
    return params_.grid_edge_fraction >= 1.0 ||
           grid_rng_.uniform(static_cast<std::uint64_t>(edge_key)) < params_.grid_edge_fraction;
  }

  RoadParams params_;
  gidx_t n_ = 0;
  CounterRng grid_rng_{params_.seed, 0x67726964ULL};
};

// ---- web crawl ----------------------------------------------------------------------------

class WebModel {
 public:
  static constexpr double kOutExponent = 2.72;  // out-degree tail
  static constexpr double kPopularity = 0.91;   // 1 / (in-degree exponent 2.1 - 1)
  static constexpr std::int64_t kMaxDegree = 50000;

  explicit WebModel(const WebParams& p) : p_(p) {
    if (p.n < 1) throw std::invalid_argument("generate_web: n must be >= 1");
    if (!(p.mean_degree >= 1.0 && p.mean_degree <= 10000.0))
      throw std::invalid_argument("generate_web: mean_degree must be in [1, 10000]");
    if (!(p.local_fraction >= 0.0 && p.local_fraction <= 1.0))
      throw std::invalid_argument("generate_web: local_fraction must be in [0, 1]");
    if (p.locality_span < 1)
      throw std::invalid_argument("generate_web: locality_span must be >= 1");
    // A Pareto of exponent a has mean x_min (a - 1) / (a - 2).
    x_min_ = p.mean_degree * (kOutExponent - 2.0) / (kOutExponent - 1.0);
    log_span_ = std::log(static_cast<double>(p.locality_span));
    n_pow_ = std::pow(static_cast<double>(p.n), 1.0 - kPopularity);
  }

  [[nodiscard]] std::int64_t degree(gidx_t r) const noexcept {
    const double u = degree_rng_.uniform(static_cast<std::uint64_t>(r));
    const double x = x_min_ * std::pow(1.0 - u, -1.0 / (kOutExponent - 1.0));
    return std::min<std::int64_t>(
        {kMaxDegree, static_cast<std::int64_t>(x + 0.5), static_cast<std::int64_t>(p_.n)});
  }

  // Link k of page r (k < kMaxDegree: its three draws have counters of their own).
  [[nodiscard]] gidx_t link(gidx_t r, std::int64_t k, const KeyedPermutation& perm) const noexcept {
    const std::uint64_t c =
        (static_cast<std::uint64_t>(r) << 20) + 3 * static_cast<std::uint64_t>(k);
    if (link_rng_.uniform(c) < p_.local_fraction) {
      const auto d = static_cast<gidx_t>(std::exp(log_span_ * link_rng_.uniform(c + 1)));
      const bool up = (link_rng_.word(c + 2) & 1) != 0;
      gidx_t t = up ? r + d : r - d;
      if (t < 0 || t >= p_.n) t = up ? r - d : r + d;  // reflected at the ends
      return std::clamp<gidx_t>(t, 0, p_.n - 1);
    }
    // Popularity rank by inverse CDF of density ~ k^-beta on [1, n].
    const double u = link_rng_.uniform(c + 1);
    const double rank = std::pow((n_pow_ - 1.0) * u + 1.0, 1.0 / (1.0 - kPopularity));
    const auto k0 = std::min<std::uint64_t>(static_cast<std::uint64_t>(rank) - 1,
                                            static_cast<std::uint64_t>(p_.n) - 1);
    return static_cast<gidx_t>(perm.forward(k0));
  }

  [[nodiscard]] KeyedPermutation permutation() const noexcept {
    return KeyedPermutation(static_cast<std::uint64_t>(p_.n), mix64(p_.seed ^ 0x776562ULL));
  }
  [[nodiscard]] gidx_t n() const noexcept { return p_.n; }

 private:
  WebParams p_;
  double x_min_ = 1, log_span_ = 0, n_pow_ = 1;
  CounterRng degree_rng_{p_.seed, 0x77646567ULL};
  CounterRng link_rng_{p_.seed, 0x776c6e6bULL};
};

}  // namespace

CsrMatrix generate_web(const WebParams& params, gidx_t row_begin, gidx_t row_end) {
  const WebModel model(params);
  check_rows("generate_web", row_begin, row_end, model.n());
  const KeyedPermutation perm = model.permutation();
  return drawn_rows(
      model.n(), row_begin, row_end, [&](gidx_t r) { return model.degree(row_begin + r); },
      [&](gidx_t r, gidx_t* first, std::int64_t degree) {
        for (std::int64_t k = 0; k < degree; ++k) first[k] = model.link(row_begin + r, k, perm);
      });
}

std::vector<std::int64_t> kronecker_raw_degrees(const KroneckerParams& params, gidx_t row_begin,
                                                gidx_t row_end) {
  const KroneckerModel model(params);
  check_rows("kronecker_raw_degrees", row_begin, row_end, model.n());
  const KeyedPermutation perm = model.permutation();
  std::vector<std::int64_t> degrees(static_cast<size_t>(row_end - row_begin));
#pragma omp parallel for schedule(static) if (row_end - row_begin > 4096)
  for (gidx_t r = row_begin; r < row_end; ++r) {
    degrees[r - row_begin] = model.degree(perm.inverse(static_cast<std::uint64_t>(r)));
  }
  return degrees;
}

CsrMatrix generate_kronecker(const KroneckerParams& params, gidx_t row_begin, gidx_t row_end) {
  const KroneckerModel model(params);
  check_rows("generate_kronecker", row_begin, row_end, model.n());
  const KeyedPermutation perm = model.permutation();
  // The pre-permutation vertex of each row (noted with its drawn degree), then each row's
  // destinations drawn and relabelled; sorted, merged and compacted by drawn_rows.
  std::vector<std::uint64_t> source(static_cast<size_t>(row_end - row_begin));
  return drawn_rows(
      model.n(), row_begin, row_end,
      [&](gidx_t r) {
        source[r] = perm.inverse(static_cast<std::uint64_t>(row_begin + r));
        return model.degree(source[r]);
      },
      [&](gidx_t r, gidx_t* first, std::int64_t degree) {
        const std::uint64_t u = source[r];
        const CounterRng rng = model.destination_rng(u);
        for (std::int64_t k = 0; k < degree; ++k)
          first[k] = static_cast<gidx_t>(perm.forward(model.destination(rng, u, k)));
      });
}

CsrMatrix generate_stencil27(const StencilParams& p, gidx_t row_begin, gidx_t row_end) {
  if (p.nx < 1 || p.ny < 1 || p.nz < 1 || p.dof < 1) {
    throw std::invalid_argument("generate_stencil27: nx, ny, nz and dof must be positive");
  }
  gidx_t n = 0;
  if (__builtin_mul_overflow(p.nx, p.ny, &n) || __builtin_mul_overflow(n, p.nz, &n) ||
      __builtin_mul_overflow(n, static_cast<gidx_t>(p.dof), &n) ||
      n > std::numeric_limits<gidx_t>::max() / 27) {
    throw std::invalid_argument("generate_stencil27: the matrix is too large for 64-bit indices");
  }
  check_rows("generate_stencil27", row_begin, row_end, n);
  const gidx_t dof = p.dof;
  struct Span {
    gidx_t lo, hi;  // inclusive neighbour coordinates along one axis
  };
  const auto axis = [](gidx_t c, gidx_t extent) {
    return Span{c > 0 ? c - 1 : 0, c + 1 < extent ? c + 1 : extent - 1};
  };
  struct Point {
    Span x, y, z;
  };
  const auto neighbourhood = [&](gidx_t row) {
    const gidx_t point = row / dof;
    return Point{axis(point % p.nx, p.nx), axis(point / p.nx % p.ny, p.ny),
                 axis(point / (p.nx * p.ny), p.nz)};
  };
  const gidx_t n_rows = row_end - row_begin;
  const bool parallel = n_rows > 4096;
  CsrMatrix m = empty_block(n, n, row_begin, row_end);
#pragma omp parallel for schedule(static) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) {
    const Point nb = neighbourhood(row_begin + r);
    m.row_ptr[r + 1] =
        (nb.x.hi - nb.x.lo + 1) * (nb.y.hi - nb.y.lo + 1) * (nb.z.hi - nb.z.lo + 1) * dof;
  }
  counts_to_row_ptr(m.row_ptr);
  m.col_idx.resize(static_cast<size_t>(m.nnz()));
  m.values.resize(static_cast<size_t>(m.nnz()));
#pragma omp parallel for schedule(static) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) {
    const gidx_t row = row_begin + r;
    const Point nb = neighbourhood(row);
    std::int64_t k = m.row_ptr[r];
    // z, y, x, component ascending = column ascending.
    for (gidx_t z = nb.z.lo; z <= nb.z.hi; ++z) {
      for (gidx_t y = nb.y.lo; y <= nb.y.hi; ++y) {
        for (gidx_t x = nb.x.lo; x <= nb.x.hi; ++x) {
          const gidx_t first_col = ((z * p.ny + y) * p.nx + x) * dof;
          for (gidx_t c = 0; c < dof; ++c, ++k) {
            m.col_idx[k] = first_col + c;
            m.values[k] = first_col + c == row ? 26.0 : -1.0;
          }
        }
      }
    }
  }
  return m;
}

CsrMatrix generate_road(const RoadParams& params, gidx_t row_begin, gidx_t row_end) {
  const RoadModel model(params);
  check_rows("generate_road", row_begin, row_end, model.n());
  const KeyedPermutation perm = model.permutation();
  const CounterRng pair_rng = model.pair_rng();
  const gidx_t n_rows = row_end - row_begin;
  const bool parallel = n_rows > 4096;
  CsrMatrix m = empty_block(model.n(), model.n(), row_begin, row_end);
  std::vector<gidx_t> partner(static_cast<size_t>(n_rows));
  gidx_t scratch[5];
#pragma omp parallel for schedule(static) private(scratch) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) {
    partner[r] = model.long_edge_partner(perm, pair_rng, row_begin + r);
    m.row_ptr[r + 1] = model.neighbours(row_begin + r, partner[r], scratch);
  }
  counts_to_row_ptr(m.row_ptr);
  m.col_idx.resize(static_cast<size_t>(m.nnz()));
#pragma omp parallel for schedule(static) if (parallel)
  for (gidx_t r = 0; r < n_rows; ++r) {
    model.neighbours(row_begin + r, partner[r], m.col_idx.data() + m.row_ptr[r]);
  }
  m.values.assign(static_cast<size_t>(m.nnz()), 1.0);
  return m;
}

}  // namespace netsparse
