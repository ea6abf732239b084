#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

#include "netsparse/generators.hpp"
#include "sparse/counter_rng.hpp"
#include "sparse_test_util.hpp"

namespace netsparse {
namespace {

using test::entries_of;
using test::expect_same_csr;
using test::expect_valid_csr;
using test::row_block;

using Generator = std::function<CsrMatrix(gidx_t, gidx_t)>;

// Generating the rows block by block gives the whole matrix, whatever the thread count.
void expect_blocks_concatenate(const Generator& generate, gidx_t n,
                               const std::vector<gidx_t>& cuts) {
  const CsrMatrix whole = generate(0, n);
  expect_valid_csr(whole);
  ASSERT_EQ(whole.n_rows, n);
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    const CsrMatrix block = generate(cuts[k], cuts[k + 1]);
    expect_valid_csr(block);
    expect_same_csr(block, row_block(whole, cuts[k], cuts[k + 1]));
  }
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const CsrMatrix serial = generate(0, n);
  omp_set_num_threads(3);
  const CsrMatrix three = generate(0, n);
  omp_set_num_threads(saved_threads);
  expect_same_csr(serial, whole);
  expect_same_csr(three, whole);
}

bool is_symmetric(const CsrMatrix& m) {
  const auto e = entries_of(m);
  return std::all_of(e.begin(), e.end(), [&](const auto& kv) {
    const auto it = e.find({kv.first.second, kv.first.first});
    return it != e.end() && it->second == kv.second;
  });
}

// ---- the keyed permutation ------------------------------------------------------------------

TEST(KeyedPermutation, IsABijectionWithItsInverse) {
  for (std::uint64_t n : {1u, 2u, 3u, 7u, 64u, 100u, 1000u, 1024u, 4099u}) {
    const sparse_detail::KeyedPermutation perm(n, 42 + n);
    std::vector<bool> hit(n, false);
    for (std::uint64_t x = 0; x < n; ++x) {
      const std::uint64_t y = perm.forward(x);
      ASSERT_LT(y, n);
      ASSERT_FALSE(hit[y]) << "n = " << n << ": " << y << " hit twice";
      hit[y] = true;
      ASSERT_EQ(perm.inverse(y), x);
    }
  }
}

TEST(KeyedPermutation, DependsOnTheKey) {
  const sparse_detail::KeyedPermutation a(1000, 1);
  const sparse_detail::KeyedPermutation b(1000, 2);
  int same = 0;
  for (std::uint64_t x = 0; x < 1000; ++x) same += a.forward(x) == b.forward(x);
  EXPECT_LT(same, 20);  // a random pair of permutations agrees on ~1 point
}

// ---- Kronecker ------------------------------------------------------------------------------

KroneckerParams kron(int scale, std::uint64_t seed = 1) {
  KroneckerParams p;
  p.scale = scale;
  p.seed = seed;
  return p;
}

TEST(Kronecker, BlocksConcatenateAndThreadsDoNotMatter) {
  const KroneckerParams p = kron(10, 3);
  expect_blocks_concatenate([&](gidx_t b, gidx_t e) { return generate_kronecker(p, b, e); }, 1024,
                            {0, 37, 500, 501, 501, 1024});
}

TEST(Kronecker, DeterministicPerSeed) {
  const CsrMatrix a = generate_kronecker(kron(9, 5), 0, 512);
  const CsrMatrix b = generate_kronecker(kron(9, 5), 0, 512);
  const CsrMatrix c = generate_kronecker(kron(9, 6), 0, 512);
  expect_same_csr(a, b);
  EXPECT_NE(a.col_idx, c.col_idx);
  for (float v : a.values) ASSERT_EQ(v, 1.0f);
}

TEST(Kronecker, RawDegreesMatchTheRowsBeforeMerging) {
  const KroneckerParams p = kron(12, 8);
  const gidx_t n = gidx_t{1} << 12;
  const std::vector<std::int64_t> raw = kronecker_raw_degrees(p, 0, n);
  const CsrMatrix m = generate_kronecker(p, 0, n);
  for (gidx_t r = 0; r < n; ++r) {
    const std::int64_t merged = m.row_ptr[r + 1] - m.row_ptr[r];
    ASSERT_LE(merged, raw[r]) << "row " << r;
    ASSERT_EQ(merged == 0, raw[r] == 0) << "row " << r;
  }
  const std::vector<std::int64_t> part = kronecker_raw_degrees(p, 100, 200);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), raw.begin() + 100));
}

// Expected share of the M edges held by the top `fraction` of vertices, from the model: vertex u
// draws a share p(u) = (c + d)^k (a + b)^(s - k), k = popcount(u).
double model_top_share(const KroneckerParams& p, double fraction) {
  const int s = p.scale;
  const double one = 1.0 - p.a - p.b;  // c + d
  std::vector<double> shares;
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << s); ++u) {
    const int k = __builtin_popcountll(u);
    shares.push_back(std::pow(one, k) * std::pow(1.0 - one, s - k));
  }
  std::sort(shares.rbegin(), shares.rend());
  const auto top = static_cast<size_t>(fraction * static_cast<double>(shares.size()));
  return std::accumulate(shares.begin(), shares.begin() + top, 0.0);
}

TEST(Kronecker, DegreeSkewAndEdgeCountAtScale14) {
  const KroneckerParams p = kron(14, 1);
  const gidx_t n = gidx_t{1} << 14;
  const double edges = 16.0 * static_cast<double>(n);
  const CsrMatrix m = generate_kronecker(p, 0, n);
  expect_valid_csr(m);
  std::vector<std::int64_t> degree(static_cast<size_t>(n));
  for (gidx_t r = 0; r < n; ++r) degree[r] = m.row_ptr[r + 1] - m.row_ptr[r];
  const double mean = static_cast<double>(m.nnz()) / static_cast<double>(n);
  const auto max_degree = *std::max_element(degree.begin(), degree.end());
  EXPECT_GT(static_cast<double>(max_degree) / mean, 20.0);

  // The drawn degrees: their total is M up to sampling noise (sd < sqrt(M)), and the top 1 %
  // of rows hold the share the model predicts.
  std::vector<std::int64_t> raw = kronecker_raw_degrees(p, 0, n);
  const double raw_total = static_cast<double>(std::accumulate(raw.begin(), raw.end(), 0LL));
  EXPECT_LT(std::abs(raw_total - edges), 5.0 * std::sqrt(edges));
  std::sort(raw.rbegin(), raw.rend());
  const double raw_top =
      static_cast<double>(std::accumulate(raw.begin(), raw.begin() + n / 100, 0LL)) / raw_total;
  const double model_top = model_top_share(p, 0.01);
  EXPECT_NEAR(raw_top, model_top, 0.02);

  // After merging duplicates the top 1 % still hold many times their uniform share.
  std::sort(degree.rbegin(), degree.rend());
  const double top =
      static_cast<double>(std::accumulate(degree.begin(), degree.begin() + n / 100, 0LL)) /
      static_cast<double>(m.nnz());
  EXPECT_GT(top, 0.10);
  // Merging removes duplicates only.
  EXPECT_LE(static_cast<double>(m.nnz()), raw_total);

  // Destinations follow the same law: in-degrees are skewed too.
  std::vector<std::int64_t> in_degree(static_cast<size_t>(n), 0);
  for (gidx_t c : m.col_idx) ++in_degree[c];
  EXPECT_GT(static_cast<double>(*std::max_element(in_degree.begin(), in_degree.end())) / mean,
            20.0);
}

TEST(Kronecker, RejectsBadParameters) {
  KroneckerParams p = kron(0);
  EXPECT_THROW(generate_kronecker(p, 0, 1), std::invalid_argument);
  p = kron(41);
  EXPECT_THROW(generate_kronecker(p, 0, 1), std::invalid_argument);
  p = kron(8);
  p.a = 0.7;
  p.b = 0.2;
  p.c = 0.2;  // d < 0
  EXPECT_THROW(generate_kronecker(p, 0, 1), std::invalid_argument);
  p = kron(8);
  p.edge_factor = 0;
  EXPECT_THROW(generate_kronecker(p, 0, 1), std::invalid_argument);
  EXPECT_THROW(generate_kronecker(kron(8), 0, 257), std::invalid_argument);
  EXPECT_THROW(generate_kronecker(kron(8), 5, 4), std::invalid_argument);
}

// ---- 27-point stencil -----------------------------------------------------------------------

TEST(Stencil27, StructureMatchesABruteForceNeighbourhood) {
  const StencilParams p{4, 3, 5, 2};
  const gidx_t n = p.nx * p.ny * p.nz * p.dof;
  const CsrMatrix m = generate_stencil27(p, 0, n);
  expect_valid_csr(m);
  const auto coord = [&](gidx_t index, int axis) {
    const gidx_t point = index / p.dof;
    if (axis == 0) return point % p.nx;
    if (axis == 1) return point / p.nx % p.ny;
    return point / (p.nx * p.ny);
  };
  for (gidx_t r = 0; r < n; ++r) {
    std::vector<gidx_t> expected;
    for (gidx_t c = 0; c < n; ++c) {
      if (std::abs(coord(r, 0) - coord(c, 0)) <= 1 && std::abs(coord(r, 1) - coord(c, 1)) <= 1 &&
          std::abs(coord(r, 2) - coord(c, 2)) <= 1) {
        expected.push_back(c);
      }
    }
    const std::vector<gidx_t> got(m.col_idx.begin() + m.row_ptr[r],
                                  m.col_idx.begin() + m.row_ptr[r + 1]);
    ASSERT_EQ(got, expected) << "row " << r;
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      ASSERT_EQ(m.values[k], m.col_idx[k] == r ? 26.0f : -1.0f);
    }
  }
}

TEST(Stencil27, ExactDegreesOfInteriorFaceEdgeAndCornerRows) {
  const StencilParams p{5, 5, 5, 3};
  const gidx_t n = 5 * 5 * 5 * 3;
  const CsrMatrix m = generate_stencil27(p, 0, n);
  const auto degree = [&](gidx_t x, gidx_t y, gidx_t z, gidx_t component) {
    const gidx_t r = ((z * 5 + y) * 5 + x) * 3 + component;
    return m.row_ptr[r + 1] - m.row_ptr[r];
  };
  EXPECT_EQ(degree(2, 2, 2, 0), 27 * 3);  // interior: 3 x 3 x 3 points
  EXPECT_EQ(degree(2, 2, 2, 2), 27 * 3);
  EXPECT_EQ(degree(0, 2, 2, 1), 18 * 3);  // face: 2 x 3 x 3
  EXPECT_EQ(degree(0, 0, 2, 0), 12 * 3);  // edge: 2 x 2 x 3
  EXPECT_EQ(degree(4, 4, 4, 2), 8 * 3);   // corner: 2 x 2 x 2
  // Total: per axis of extent 5 the neighbour counts are 2 + 3 + 3 + 3 + 2 = 13.
  EXPECT_EQ(m.nnz(), 13 * 13 * 13 * 3 * 3);
  EXPECT_TRUE(is_symmetric(m));
}

TEST(Stencil27, BlocksConcatenate) {
  const StencilParams p{7, 6, 5, 3};
  expect_blocks_concatenate([&](gidx_t b, gidx_t e) { return generate_stencil27(p, b, e); },
                            7 * 6 * 5 * 3, {0, 1, 100, 333, 630});
}

TEST(Stencil27, DegenerateGridsAndBadParameters) {
  const CsrMatrix single = generate_stencil27({1, 1, 1, 4}, 0, 4);
  EXPECT_EQ(single.nnz(), 16);  // one point: its 4 unknowns couple to each other
  const CsrMatrix line = generate_stencil27({6, 1, 1, 1}, 0, 6);
  EXPECT_EQ(line.nnz(), 2 + 3 * 4 + 2);
  EXPECT_THROW(generate_stencil27({0, 1, 1, 1}, 0, 0), std::invalid_argument);
  EXPECT_THROW(generate_stencil27({2, 2, 2, 0}, 0, 0), std::invalid_argument);
  EXPECT_THROW(generate_stencil27({2, 2, 2, 1}, 0, 9), std::invalid_argument);
  EXPECT_THROW(generate_stencil27({gidx_t{1} << 30, gidx_t{1} << 30, gidx_t{1} << 30, 1}, 0, 1),
               std::invalid_argument);
}

// ---- road-like graph ------------------------------------------------------------------------

TEST(Road, SymmetricLowDegreeGridWithLongEdges) {
  RoadParams p;
  p.width = 60;
  p.height = 50;
  p.long_edge_fraction = 0.05;
  p.seed = 4;
  const gidx_t n = p.width * p.height;
  const CsrMatrix m = generate_road(p, 0, n);
  expect_valid_csr(m);
  EXPECT_TRUE(is_symmetric(m));
  std::int64_t long_entries = 0;
  for (gidx_t v = 0; v < n; ++v) {
    const gidx_t x = v % p.width;
    const gidx_t y = v / p.width;
    const std::set<gidx_t> row(m.col_idx.begin() + m.row_ptr[v],
                               m.col_idx.begin() + m.row_ptr[v + 1]);
    EXPECT_EQ(row.count(v), 0u) << "self-loop at " << v;
    std::set<gidx_t> grid;
    if (x > 0) grid.insert(v - 1);
    if (x + 1 < p.width) grid.insert(v + 1);
    if (y > 0) grid.insert(v - p.width);
    if (y + 1 < p.height) grid.insert(v + p.width);
    EXPECT_TRUE(std::includes(row.begin(), row.end(), grid.begin(), grid.end())) << v;
    EXPECT_LE(row.size(), grid.size() + 1) << v;  // at most one long edge
    long_entries += static_cast<std::int64_t>(row.size() - grid.size());
  }
  // n / 2 candidate pairs, each joined with probability 0.05 (two entries per edge); a pair
  // that happens to be grid neighbours adds nothing, which is rare.
  const double pairs = static_cast<double>(n / 2);
  const double expected = 0.05 * pairs;
  const double sd = std::sqrt(pairs * 0.05 * 0.95);
  EXPECT_NEAR(static_cast<double>(long_entries) / 2.0, expected, 5.0 * sd);
  EXPECT_GT(long_entries, 0);
}

TEST(Road, PureGridWithoutLongEdges) {
  RoadParams p;
  p.width = 9;
  p.height = 4;
  p.long_edge_fraction = 0.0;
  const CsrMatrix m = generate_road(p, 0, 36);
  EXPECT_EQ(m.nnz(), 2 * ((9 - 1) * 4 + 9 * (4 - 1)));
}

TEST(Road, BlocksConcatenateAndSeedMatters) {
  RoadParams p;
  p.width = 41;
  p.height = 37;
  p.long_edge_fraction = 0.2;
  p.seed = 9;
  const gidx_t n = 41 * 37;
  expect_blocks_concatenate([&](gidx_t b, gidx_t e) { return generate_road(p, b, e); }, n,
                            {0, 1, 700, 1000, n});
  RoadParams q = p;
  q.seed = 10;
  EXPECT_NE(generate_road(p, 0, n).col_idx, generate_road(q, 0, n).col_idx);
}

// europe_osm's 2.1 nonzeros per row: grid edges kept with a probability, both ends agreeing.
TEST(Road, GridEdgeFractionThinsTheGridSymmetrically) {
  RoadParams p;
  p.width = 200;
  p.height = 150;
  p.long_edge_fraction = 0.0;
  p.grid_edge_fraction = 0.53;
  p.seed = 5;
  const gidx_t n = p.width * p.height;
  const CsrMatrix m = generate_road(p, 0, n);
  expect_valid_csr(m);
  EXPECT_TRUE(is_symmetric(m));
  // Every kept entry is a grid neighbour (no long edges asked for).
  for (gidx_t v = 0; v < n; ++v) {
    for (auto j = m.row_ptr[v]; j < m.row_ptr[v + 1]; ++j) {
      const gidx_t d = m.col_idx[j] > v ? m.col_idx[j] - v : v - m.col_idx[j];
      EXPECT_TRUE(d == 1 || d == p.width) << v << " -> " << m.col_idx[j];
    }
  }
  // Each of the full grid's edges kept with probability 0.53.
  const double edges = static_cast<double>((p.width - 1) * p.height + p.width * (p.height - 1));
  const double sd = std::sqrt(edges * 0.53 * 0.47);
  EXPECT_NEAR(static_cast<double>(m.nnz()) / 2.0, 0.53 * edges, 5.0 * sd);
  expect_blocks_concatenate([&](gidx_t b, gidx_t e) { return generate_road(p, b, e); }, n,
                            {0, 1, 7777, 20000, n});
  // 1 (the default) is the full grid, as before the option existed.
  RoadParams full = p;
  full.grid_edge_fraction = 1.0;
  EXPECT_EQ(generate_road(full, 0, n).nnz(), static_cast<std::int64_t>(2 * edges));
  p.grid_edge_fraction = -0.1;
  EXPECT_THROW(generate_road(p, 0, 1), std::invalid_argument);
}

TEST(Road, RejectsBadParameters) {
  RoadParams p;
  p.width = 0;
  EXPECT_THROW(generate_road(p, 0, 0), std::invalid_argument);
  p = RoadParams{};
  p.long_edge_fraction = 1.5;
  EXPECT_THROW(generate_road(p, 0, 1), std::invalid_argument);
  p = RoadParams{};
  EXPECT_THROW(generate_road(p, 0, p.width * p.height + 1), std::invalid_argument);
}

// ---- web crawl in URL order -----------------------------------------------------------------

TEST(Web, LocalLinksStayNearAndPopularPagesAreShared) {
  WebParams p;
  p.n = 200000;
  p.mean_degree = 20;
  p.local_fraction = 0.9;
  p.locality_span = 1000;
  p.seed = 3;
  const gidx_t b = 50000, e = 70000;
  const CsrMatrix m = generate_web(p, b, e);
  expect_valid_csr(m);
  std::int64_t near = 0;
  std::map<gidx_t, int> far_targets;
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    for (auto j = m.row_ptr[r]; j < m.row_ptr[r + 1]; ++j) {
      const gidx_t d = m.col_idx[j] > b + r ? m.col_idx[j] - b - r : b + r - m.col_idx[j];
      if (d <= p.locality_span) {
        ++near;
      } else {
        ++far_targets[m.col_idx[j]];
      }
    }
  }
  const auto nnz = static_cast<double>(m.nnz());
  // Links drawn per page: 20 on average (duplicates merged: a bit fewer nonzeros).
  EXPECT_GT(nnz / static_cast<double>(m.n_rows), 14.0);
  EXPECT_LE(nnz / static_cast<double>(m.n_rows), 20.5);
  // Most nonzeros are near their row (the local links, and the few popular pages that happen to
  // be near); the far ones go to popular pages, so some far page is linked from many rows.
  EXPECT_GT(static_cast<double>(near) / nnz, 0.85);
  int most = 0;
  for (const auto& [c, k] : far_targets) most = std::max(most, k);
  EXPECT_GT(most, 100);
  // Out-degrees are skewed: some row holds several times the mean.
  std::int64_t widest = 0;
  for (gidx_t r = 0; r < m.n_rows; ++r) widest = std::max(widest, m.row_ptr[r + 1] - m.row_ptr[r]);
  EXPECT_GT(widest, 5 * 20);
}

TEST(Web, BlocksConcatenateSeedMattersBadParametersRefused) {
  WebParams p;
  p.n = 3000;
  p.mean_degree = 6;
  p.locality_span = 50;
  p.seed = 8;
  expect_blocks_concatenate([&](gidx_t b, gidx_t e) { return generate_web(p, b, e); }, p.n,
                            {0, 1, 999, 2000, p.n});
  WebParams q = p;
  q.seed = 9;
  EXPECT_NE(generate_web(p, 0, p.n).col_idx, generate_web(q, 0, p.n).col_idx);
  q = p;
  q.local_fraction = 0;  // every link to a popular page: the top ranks collect most links
  EXPECT_EQ(generate_web(q, 0, 10).n_cols, p.n);
  q.mean_degree = 0.5;
  EXPECT_THROW(generate_web(q, 0, 1), std::invalid_argument);
  q = p;
  q.local_fraction = 1.5;
  EXPECT_THROW(generate_web(q, 0, 1), std::invalid_argument);
  q = p;
  EXPECT_THROW(generate_web(q, 0, p.n + 1), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse
