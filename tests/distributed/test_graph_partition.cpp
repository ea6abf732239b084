// partition_with_metis (include/netsparse/graph_partition.hpp) under real mpirun: the result is
// exactly P A P^T (every nonzero, by the reported original rows), the original rows are a
// permutation, METIS' cut beats the equal row blocks on a graph without locality, and bad
// arguments fail on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "dist_test_util.hpp"
#include "mpi_test_util.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/graph_partition.hpp"

namespace netsparse {
namespace {

using namespace test;

// Every rank's (row, col, value) of a distributed matrix, on every rank.
std::vector<std::tuple<gidx_t, gidx_t, double>> all_nonzeros(const DistMatrix& m) {
  std::vector<double> mine;
  const CsrMatrix& l = m.local();
  for (gidx_t r = 0; r < l.n_rows; ++r) {
    for (std::int64_t q = l.row_ptr[r]; q < l.row_ptr[r + 1]; ++q) {
      mine.push_back(static_cast<double>(l.row_begin + r));
      mine.push_back(static_cast<double>(l.col_idx[static_cast<std::size_t>(q)]));
      mine.push_back(l.values[static_cast<std::size_t>(q)]);
    }
  }
  const int p = world_size();
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(p)), displs(counts.size() + 1, 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<double> all(static_cast<std::size_t>(displs[p]));
  MPI_Allgatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                 MPI_COMM_WORLD);
  std::vector<std::tuple<gidx_t, gidx_t, double>> out;
  for (std::size_t k = 0; k + 2 < all.size(); k += 3) {
    out.emplace_back(static_cast<gidx_t>(all[k]), static_cast<gidx_t>(all[k + 1]), all[k + 2]);
  }
  return out;
}

// The whole permutation (new row -> original row), on every rank.
std::vector<gidx_t> all_original_rows(const PartitionedMatrix& p) {
  const int n_ranks = world_size();
  int n = static_cast<int>(p.original_rows.size());
  std::vector<int> counts(static_cast<std::size_t>(n_ranks)), displs(counts.size() + 1, 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < n_ranks; ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<gidx_t> all(static_cast<std::size_t>(displs[n_ranks]));
  MPI_Allgatherv(p.original_rows.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(),
                 MPI_INT64_T, MPI_COMM_WORLD);
  return all;
}

// Edges of the symmetrized graph (no self-loops, each once) whose ends lie in different parts.
std::int64_t cut_of(const std::vector<std::tuple<gidx_t, gidx_t, double>>& nz,
                    const RowPartition& parts) {
  std::vector<std::pair<gidx_t, gidx_t>> edges;
  for (const auto& [r, c, v] : nz) {
    if (r != c) edges.emplace_back(std::min(r, c), std::max(r, c));
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::int64_t cut = 0;
  for (const auto& [u, v] : edges) cut += parts.owner(u) != parts.owner(v) ? 1 : 0;
  return cut;
}

// The communication volume: per part, the distinct columns of its rows that another part owns,
// summed (the remote rows the distributed kernels fetch).
std::int64_t volume_of(const std::vector<std::tuple<gidx_t, gidx_t, double>>& nz,
                       const RowPartition& parts) {
  std::set<std::pair<int, gidx_t>> fetched;
  for (const auto& [r, c, v] : nz) {
    if (parts.owner(r) != parts.owner(c)) fetched.emplace(parts.owner(r), c);
  }
  return static_cast<std::int64_t>(fetched.size());
}

void expect_is_permuted_copy(const DistMatrix& a, const PartitionedMatrix& p) {
  ASSERT_EQ(p.matrix.n_rows(), a.n_rows());
  ASSERT_EQ(p.matrix.nnz_global(), a.nnz_global());
  ASSERT_EQ(static_cast<gidx_t>(p.original_rows.size()), p.matrix.local().n_rows);
  const std::vector<gidx_t> old_of_new = all_original_rows(p);
  ASSERT_EQ(static_cast<gidx_t>(old_of_new.size()), a.n_rows());
  std::vector<gidx_t> sorted = old_of_new;
  std::sort(sorted.begin(), sorted.end());
  for (gidx_t i = 0; i < a.n_rows(); ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
  // Every nonzero of the result, mapped back, is A's (same count: a bijection).
  std::map<std::pair<gidx_t, gidx_t>, double> original;
  for (const auto& [r, c, v] : all_nonzeros(a)) original[{r, c}] = v;
  for (const auto& [r, c, v] : all_nonzeros(p.matrix)) {
    const auto it = original.find(
        {old_of_new[static_cast<std::size_t>(r)], old_of_new[static_cast<std::size_t>(c)]});
    ASSERT_NE(it, original.end()) << "new (" << r << ", " << c << ") is not in A";
    EXPECT_EQ(it->second, v);
  }
  // Rows and columns split alike; the local block is sorted within rows.
  EXPECT_EQ(p.matrix.rows().offsets(), p.matrix.cols().offsets());
  const CsrMatrix& l = p.matrix.local();
  for (gidx_t r = 0; r < l.n_rows; ++r) {
    EXPECT_TRUE(
        std::is_sorted(l.col_idx.begin() + l.row_ptr[r], l.col_idx.begin() + l.row_ptr[r + 1]));
  }
}

void expect_permuted_copy(const DistMatrix& a, const GraphPartitionOptions& options) {
  expect_is_permuted_copy(a, partition_with_metis(a, options));
}

TEST(GraphPartition, ResultIsTheSymmetricPermutationOfA) {
  KroneckerParams kron;
  kron.scale = 9;
  expect_permuted_copy(generate_distributed(MPI_COMM_WORLD, kron), {});
  StencilParams stencil;
  stencil.nx = stencil.ny = stencil.nz = 6;
  expect_permuted_copy(generate_distributed(MPI_COMM_WORLD, stencil, PartitionKind::balanced_nnz),
                       {1.2, 7});
}

TEST(GraphPartition, CutsFewerEdgesThanEqualBlocksOnAGraphWithoutLocality) {
  KroneckerParams kron;
  kron.scale = 10;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, kron);
  const PartitionedMatrix p = partition_with_metis(a);
  const std::int64_t before = cut_of(all_nonzeros(a), a.rows());
  const std::int64_t after = cut_of(all_nonzeros(p.matrix), p.matrix.rows());
  EXPECT_EQ(after, p.edge_cut) << "METIS' reported cut";
  if (world_size() == 1) {
    EXPECT_EQ(after, 0);  // one part: nothing is cut
  } else {
    EXPECT_LT(after, before) << "equal blocks cut " << before;
  }
}

// PartitionObjective::volume: still A's symmetric permutation, its edge cut counted right, and
// fewer remote rows than equal blocks of a graph without locality.
TEST(GraphPartition, VolumeObjectiveFetchesFewerRowsThanEqualBlocks) {
  KroneckerParams kron;
  kron.scale = 10;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, kron);
  GraphPartitionOptions options;
  options.objective = PartitionObjective::volume;
  const PartitionedMatrix p = partition_with_metis(a, options);
  expect_is_permuted_copy(a, p);
  const auto before = all_nonzeros(a), after = all_nonzeros(p.matrix);
  EXPECT_EQ(cut_of(after, p.matrix.rows()), p.edge_cut) << "the reported cut";
  const std::int64_t v_before = volume_of(before, a.rows());
  const std::int64_t v_after = volume_of(after, p.matrix.rows());
  if (world_size() == 1) {
    EXPECT_EQ(v_after, 0);
  } else {
    EXPECT_LT(v_after, v_before) << "equal blocks fetch " << v_before << " rows";
  }
}

TEST(GraphPartition, RectangularOrBadOptionsFailOnEveryRank) {
  KroneckerParams kron;
  kron.scale = 6;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, kron);
  EXPECT_THROW((void)partition_with_metis(a, {0.5, 1}), std::invalid_argument);
  // Ranks that pass different seeds are refused alike, naming the field.
  GraphPartitionOptions mine;
  mine.seed = world_rank() == 0 ? 1 : 2;
  if (world_size() > 1) {
    const std::string message =
        invalid_argument_message([&] { (void)partition_with_metis(a, mine); });
    EXPECT_NE(message.find("seed"), std::string::npos) << message;
  }
  CsrMatrix local;
  const RowPartition rows = RowPartition::equal_blocks(8, world_size());
  const RowPartition cols = RowPartition::equal_blocks(5, world_size());
  local.n_rows_global = 8;
  local.n_cols = 5;
  local.row_begin = rows.begin(world_rank());
  local.n_rows = rows.size(world_rank());
  local.row_ptr.assign(static_cast<std::size_t>(local.n_rows) + 1, 0);
  const DistMatrix rect(MPI_COMM_WORLD, local, rows, cols, "rect");
  const std::string message = invalid_argument_message([&] { (void)partition_with_metis(rect); });
  EXPECT_NE(message.find("square"), std::string::npos) << message;
}

// ---- locality orderings (reorder_graph, permute_graph) ----------------------------------------

// A random permutation, the same on every rank (a fixed-seed Fisher-Yates).
std::vector<gidx_t> shuffled(gidx_t n, std::uint64_t seed) {
  std::vector<gidx_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), gidx_t{0});
  for (gidx_t i = n - 1; i > 0; --i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(p[static_cast<std::size_t>(i)],
              p[static_cast<std::size_t>((seed >> 33) % static_cast<std::uint64_t>(i + 1))]);
  }
  return p;
}

// Largest |row - col| over the nonzeros, over every rank.
gidx_t bandwidth(const DistMatrix& m) {
  gidx_t band = 0;
  for (const auto& [r, c, v] : all_nonzeros(m)) band = std::max(band, r > c ? r - c : c - r);
  return band;
}

TEST(GraphOrdering, EveryOrderingIsTheSymmetricPermutationOfA) {
  KroneckerParams kron;
  kron.scale = 9;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, kron);
  for (const char* name : {"rcm", "metis", "metis-rcm"}) {
    SCOPED_TRACE(name);
    const GraphOrdering ordering = parse_graph_ordering(name);
    EXPECT_STREQ(to_string(ordering), name);
    const PartitionedMatrix p = reorder_graph(a, ordering);
    expect_is_permuted_copy(a, p);
    // rcm keeps the row blocks; the METIS orderings have METIS' parts.
    if (ordering == GraphOrdering::rcm) {
      EXPECT_EQ(p.matrix.rows().offsets(), a.rows().offsets());
    }
  }
  const std::vector<gidx_t> perm = shuffled(a.n_rows(), 5);
  const PartitionedMatrix p = permute_graph(a, perm);
  expect_is_permuted_copy(a, p);
  for (std::size_t i = 0; i < p.original_rows.size(); ++i) {
    EXPECT_EQ(perm[static_cast<std::size_t>(p.original_rows[i])],
              p.matrix.rows().begin(world_rank()) + static_cast<gidx_t>(i));
  }
}

// The product on the reordered graph, its rows mapped back by original_rows, is the product on
// A (B's rows permuted alike): what a GCN trained on the reordered graph relies on.
TEST(GraphOrdering, SpmmOnTheReorderedGraphMapsBackToTheOriginalProduct) {
  StencilParams stencil;
  stencil.nx = stencil.ny = 7;
  stencil.nz = 5;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, stencil);
  constexpr int k = 3;
  // B row g (original numbering) = f(g): the same values whatever rank holds the row.
  const auto b_of = [](gidx_t g, int x) { return std::sin(0.37 * static_cast<double>(g) + x); };
  DistOptions options;
  options.mode = CommMode::su;
  options.scalar = ScalarType::f64;
  const auto product = [&](const DistMatrix& m, const std::vector<gidx_t>& original) {
    const gidx_t n = m.local().n_rows;
    std::vector<double> b(static_cast<std::size_t>(n * k)), c(b.size());
    for (gidx_t r = 0; r < n; ++r) {
      const gidx_t g = original.empty() ? m.rows().begin(world_rank()) + r
                                        : original[static_cast<std::size_t>(r)];
      for (int x = 0; x < k; ++x) b[static_cast<std::size_t>(r * k + x)] = b_of(g, x);
    }
    DistKernel kernel(m, KernelKind::spmm, k, options);
    kernel.spmm(std::span<const double>(b), std::span<double>(c));
    // (original row, column) -> value, gathered on every rank.
    std::vector<double> mine;
    for (gidx_t r = 0; r < n; ++r) {
      mine.push_back(static_cast<double>(original.empty() ? m.rows().begin(world_rank()) + r
                                                          : original[static_cast<std::size_t>(r)]));
      for (int x = 0; x < k; ++x) mine.push_back(c[static_cast<std::size_t>(r * k + x)]);
    }
    const int p = world_size();
    int count = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(p)), displs(counts.size() + 1, 0);
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < p; ++r) displs[r + 1] = displs[r] + counts[r];
    std::vector<double> all(static_cast<std::size_t>(displs[p]));
    MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                   MPI_DOUBLE, MPI_COMM_WORLD);
    std::vector<double> by_row(static_cast<std::size_t>(m.n_rows() * k));
    for (std::size_t at = 0; at < all.size(); at += k + 1) {
      const auto g = static_cast<std::size_t>(all[at]);
      for (int x = 0; x < k; ++x) by_row[g * k + static_cast<std::size_t>(x)] = all[at + 1 + x];
    }
    return by_row;
  };
  const std::vector<double> reference = product(a, {});
  for (const char* name : {"rcm", "metis", "metis-rcm"}) {
    SCOPED_TRACE(name);
    const PartitionedMatrix p = reorder_graph(a, parse_graph_ordering(name));
    const std::vector<double> got = product(p.matrix, p.original_rows);
    ASSERT_EQ(got.size(), reference.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], reference[i], 1e-12 * (1 + std::abs(reference[i]))) << "entry " << i;
    }
  }
}

// RCM undoes a random relabelling of a stencil: the band shrinks from about n back to the size
// of a BFS level. On a 27-point stencil the levels from a corner are the cube's shells
// max(x, y, z) = d, the largest 8^3 - 7^3 = 169 rows (the natural order's band is 73).
TEST(GraphOrdering, RcmNarrowsTheBandOfAShuffledStencil) {
  StencilParams stencil;
  stencil.nx = stencil.ny = stencil.nz = 8;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, stencil);
  const PartitionedMatrix shuffled_a = permute_graph(a, shuffled(a.n_rows(), 11));
  const PartitionedMatrix rcm = reorder_graph(shuffled_a.matrix, GraphOrdering::rcm);
  const gidx_t before = bandwidth(shuffled_a.matrix), after = bandwidth(rcm.matrix);
  EXPECT_LT(after * 2, before) << "shuffled band " << before << ", after rcm " << after;
  EXPECT_LE(after, 8 * 8 * 8 - 7 * 7 * 7) << "the largest BFS level of a 8^3 27-point stencil";
}

TEST(GraphOrdering, BadNamesAndPermutationsFailClearlyOnEveryRank) {
  try {
    (void)parse_graph_ordering("rcmm");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'rcmm'"), std::string::npos) << m;
    EXPECT_NE(m.find("metis-rcm"), std::string::npos) << m;
  }
  KroneckerParams kron;
  kron.scale = 6;
  const DistMatrix a = generate_distributed(MPI_COMM_WORLD, kron);
  std::vector<gidx_t> perm(static_cast<std::size_t>(a.n_rows()) - 1);
  std::iota(perm.begin(), perm.end(), gidx_t{0});
  std::string m = invalid_argument_message([&] { (void)permute_graph(a, perm); });
  EXPECT_NE(m.find("63 entries, the matrix 64 rows"), std::string::npos) << m;
  perm.push_back(3);
  m = invalid_argument_message([&] { (void)permute_graph(a, perm); });
  EXPECT_NE(m.find("entry 63 repeats 3"), std::string::npos) << m;
  perm.back() = 64;
  m = invalid_argument_message([&] { (void)permute_graph(a, perm); });
  EXPECT_NE(m.find("outside [0, 64)"), std::string::npos) << m;
  // One rank alone with a bad permutation: every rank throws.
  perm.back() = world_rank() == world_size() - 1 && world_size() > 1 ? 3 : 63;
  m = invalid_argument_message([&] { (void)permute_graph(a, perm); });
  if (world_size() > 1) {
    EXPECT_NE(m.find("permute_graph"), std::string::npos) << m;
  }
  // After the refusals, a good call works.
  perm.back() = 63;
  expect_is_permuted_copy(a, permute_graph(a, perm));
}

}  // namespace
}  // namespace netsparse
