// Synthetic sparse matrices at any scale. Every generator is deterministic for (parameters,
// seed) and produces one row block [row_begin, row_end) with work proportional to that block,
// so each rank generates only its own rows and any split of the rows gives the same matrix.
// Randomness comes from a counter-based hash of (seed, row, draw number), never from a
// sequential stream.
#pragma once

#include <cstdint>
#include <vector>

#include "netsparse/csr.hpp"

namespace netsparse {

// ---- Graph500-style Kronecker / R-MAT ----------------------------------------------------
// n = 2^scale vertices, M = edge_factor * n edges drawn from the initiator [[a, b], [c, d]]
// (d = 1 - a - b - c; row = source, column = destination), vertices relabelled by a keyed
// random permutation of [0, n). Row u holds the out-edges of u: the matrix is directed (not
// symmetrized), self-loops are kept, and duplicate edges are merged into one nonzero of value
// 1.0 (a pattern matrix).
//
// How one row is generated without the others: in R-MAT the source bits of an edge are i.i.d.
// over the levels with P(bit = 1) = c + d, so the (pre-permutation) source u receives each of
// the M edges with probability p(u) = (c + d)^k (a + b)^(scale - k), k = popcount(u). Its
// out-degree is drawn as Binomial(M, p(u)) -- exactly (by CDF inversion) when M p(u) < 32,
// else by the normal approximation N(M p, M p (1 - p)) rounded and clamped to [0, M]. Each
// destination then descends the levels with P(dst bit = 1 | src bit) = b / (a + b) or
// d / (c + d) (as 16-bit thresholds). Degrees are independent across rows, so the total edge count
// is M only in expectation (its standard deviation is below sqrt(M)).
struct KroneckerParams {
  int scale = 16;
  int edge_factor = 16;
  double a = 0.57;
  double b = 0.19;
  double c = 0.19;
  std::uint64_t seed = 1;
};

// Throws std::invalid_argument for scale outside [1, 40], edge_factor < 1, probabilities
// outside (0, 1) or a + b + c >= 1, or rows outside [0, 2^scale).
CsrMatrix generate_kronecker(const KroneckerParams& params, gidx_t row_begin, gidx_t row_end);

// The drawn out-degrees of rows [row_begin, row_end) before duplicate merging (what
// generate_kronecker's rows hold before merging); cheap (no destinations drawn), e.g. to
// balance a partition before generating.
std::vector<std::int64_t> kronecker_raw_degrees(const KroneckerParams& params, gidx_t row_begin,
                                                gidx_t row_end);

// ---- 3D 27-point stencil ------------------------------------------------------------------
// An nx x ny x nz grid with dof unknowns per point; row (and column) index
// ((z * ny + y) * nx + x) * dof + component. Every unknown couples to all dof unknowns of each
// of its <= 27 neighbouring points (itself included): interior rows have 27 * dof nonzeros,
// boundary rows fewer. Values follow HPCG: 26 on the diagonal, -1 elsewhere. Not random.
struct StencilParams {
  gidx_t nx = 16;
  gidx_t ny = 16;
  gidx_t nz = 16;
  int dof = 1;
};

// Throws std::invalid_argument for non-positive sizes or rows outside the matrix.
CsrMatrix generate_stencil27(const StencilParams& params, gidx_t row_begin, gidx_t row_end);

// ---- Road-like geometric graph ------------------------------------------------------------
// A width x height grid (vertex y * width + x) with its 4-neighbour edges, plus a few long
// edges like highways: vertices are paired at random by a keyed permutation (vertex pi(2k) with
// pi(2k + 1)) and each pair is joined with probability long_edge_fraction. The graph is
// symmetric (undirected), has no self-loops, degree <= 5, pattern values 1.0.
// grid_edge_fraction < 1 keeps each grid edge with that probability (keyed by the edge, so both
// ends agree): real road networks are mostly chains of degree-2 vertices (europe_osm: 2.1
// nonzeros per row, against the full grid's 4).
struct RoadParams {
  gidx_t width = 256;
  gidx_t height = 256;
  double long_edge_fraction = 0.01;
  std::uint64_t seed = 1;
  double grid_edge_fraction = 1.0;
};

// Throws std::invalid_argument for non-positive sizes, a fraction outside [0, 1] or rows
// outside the matrix.
CsrMatrix generate_road(const RoadParams& params, gidx_t row_begin, gidx_t row_end);

// ---- Web crawl in URL order ---------------------------------------------------------------
// n pages numbered in crawl (URL) order, where a site's pages are consecutive. Page r's
// out-degree is drawn from a power law (exponent 2.72, the out-degree tail Broder et al. measured
// on a web crawl) scaled to `mean_degree` links drawn per page and capped at 50 000. Each link
// is local with probability local_fraction -- to r +- d, d = floor(locality_span^u) for u
// uniform in [0, 1) (log-uniform distance: mostly the same site, some far; reflected at the
// ends) -- else to a popular page: rank k drawn with density ~ k^-0.91 over [1, n] (in-degree
// exponent 2.1) and mapped to a page by a keyed permutation, so popular pages are anywhere in
// the crawl. Duplicate links are merged (a pattern matrix, values 1.0), so a row holds at most
// its drawn degree. Rows are independent: any split of the rows gives the same matrix.
struct WebParams {
  gidx_t n = 1 << 16;
  double mean_degree = 28.0;
  double local_fraction = 0.9;
  gidx_t locality_span = 4096;
  std::uint64_t seed = 1;
};

// Throws std::invalid_argument for n < 1, a mean degree outside [1, 10000], a fraction outside
// [0, 1], a span < 1 or rows outside the matrix.
CsrMatrix generate_web(const WebParams& params, gidx_t row_begin, gidx_t row_end);

}  // namespace netsparse
