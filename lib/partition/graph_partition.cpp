// METIS k-way partition of a distributed matrix's graph (include/netsparse/graph_partition.hpp).
//
// 1. every rank sends its rows' lengths and columns to rank 0 (MPI_Gatherv);
// 2. rank 0 builds the graph of A + A^T without self-loops (METIS wants it symmetric), weights
//    each vertex by its row's nonzeros + 1, runs METIS_PartGraphKway into P parts and numbers
//    the rows part by part (stable: a part keeps its rows' relative order);
// 3. rank 0 scatters each rank's rows' new numbers (by the old row blocks) and the new offsets;
// 4. each rank asks the old owners of its distinct columns for their new numbers (one
//    request/answer all-to-all pair), relabels its nonzeros and sends every row to its new
//    owner with its old number (one all-to-all), and builds its new CSR block.
#include <metis.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agreement/agreement.hpp"
#include "agreement/mpi.hpp"
#include "agreement/mpi_util.hpp"
#include "netsparse/graph_partition.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

namespace {

using agreement::check_mpi;
using agreement::comm_rank;
using agreement::comm_size;
using agreement::exchange_all_to_all;
using agreement::to_mpi_count;

// A nonzero on its way to its new owner: new row, new column, value, and the row's old number.
struct MovedNonzero {
  gidx_t row;
  gidx_t col;
  double value;
  gidx_t old_row;
};

idx_t to_idx(std::int64_t n, const char* what) {
  if (n < 0 || n > std::numeric_limits<idx_t>::max()) {
    throw std::overflow_error(std::string("partition_with_metis: ") + what + " (" +
                              std::to_string(n) + ") exceeds METIS' 32-bit indices");
  }
  return static_cast<idx_t>(n);
}

const char* metis_status(int status) {
  switch (status) {
    case METIS_ERROR_INPUT:
      return "METIS_ERROR_INPUT";
    case METIS_ERROR_MEMORY:
      return "METIS_ERROR_MEMORY";
    default:
      return "METIS_ERROR";
  }
}

// The graph of A + A^T without self-loops (METIS and RCM want it symmetric), as METIS' CSR
// arrays. `lengths` and `cols` are the whole matrix's rows in order.
struct SymmetricGraph {
  std::vector<idx_t> xadj;
  std::vector<idx_t> adjncy;
};
SymmetricGraph symmetric_graph(gidx_t n, const std::vector<std::int64_t>& lengths,
                               const std::vector<gidx_t>& cols) {
  // Count both directions, fill, then sort and drop repeats.
  std::vector<std::int64_t> degree(static_cast<std::size_t>(n) + 1, 0);
  std::int64_t at = 0;
  for (gidx_t r = 0; r < n; ++r) {
    for (std::int64_t q = 0; q < lengths[static_cast<std::size_t>(r)]; ++q, ++at) {
      const gidx_t c = cols[static_cast<std::size_t>(at)];
      if (c == r) continue;
      ++degree[static_cast<std::size_t>(r) + 1];
      ++degree[static_cast<std::size_t>(c) + 1];
    }
  }
  std::partial_sum(degree.begin(), degree.end(), degree.begin());
  std::vector<gidx_t> adj(static_cast<std::size_t>(degree.back()));
  std::vector<std::int64_t> fill(degree.begin(), degree.end() - 1);
  at = 0;
  for (gidx_t r = 0; r < n; ++r) {
    for (std::int64_t q = 0; q < lengths[static_cast<std::size_t>(r)]; ++q, ++at) {
      const gidx_t c = cols[static_cast<std::size_t>(at)];
      if (c == r) continue;
      adj[static_cast<std::size_t>(fill[static_cast<std::size_t>(r)]++)] = c;
      adj[static_cast<std::size_t>(fill[static_cast<std::size_t>(c)]++)] = r;
    }
  }
  SymmetricGraph g;
  g.xadj.assign(static_cast<std::size_t>(n) + 1, 0);
  g.adjncy.reserve(adj.size());
  for (gidx_t r = 0; r < n; ++r) {
    auto first = adj.begin() + degree[static_cast<std::size_t>(r)];
    auto last = adj.begin() + degree[static_cast<std::size_t>(r) + 1];
    std::sort(first, last);
    last = std::unique(first, last);
    for (auto it = first; it != last; ++it) g.adjncy.push_back(static_cast<idx_t>(*it));
    g.xadj[static_cast<std::size_t>(r) + 1] = to_idx(static_cast<std::int64_t>(g.adjncy.size()),
                                                     "the symmetrized graph's adjacency entries");
  }
  return g;
}

// Rank 0: the part of every row.
std::vector<idx_t> metis_parts(gidx_t n, const std::vector<std::int64_t>& lengths,
                               SymmetricGraph& graph, int nparts,
                               const GraphPartitionOptions& options, std::int64_t& edge_cut) {
  std::vector<idx_t> part(static_cast<std::size_t>(n), 0);
  edge_cut = 0;
  if (nparts == 1 || n == 0) return part;
  std::vector<idx_t>& xadj = graph.xadj;
  std::vector<idx_t>& adjncy = graph.adjncy;
  std::vector<idx_t> vwgt(static_cast<std::size_t>(n));
  for (gidx_t r = 0; r < n; ++r) {
    vwgt[static_cast<std::size_t>(r)] =
        to_idx(lengths[static_cast<std::size_t>(r)] + 1, "a weight");
  }
  idx_t options_array[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options_array);
  options_array[METIS_OPTION_SEED] = options.seed;
  options_array[METIS_OPTION_UFACTOR] =
      static_cast<idx_t>(std::lround(1000.0 * (options.imbalance - 1.0)));
  options_array[METIS_OPTION_OBJTYPE] =
      options.objective == PartitionObjective::volume ? METIS_OBJTYPE_VOL : METIS_OBJTYPE_CUT;
  idx_t nvtxs = to_idx(n, "the rows");
  idx_t ncon = 1;
  idx_t np = nparts;
  idx_t objval = 0;
  const int status =
      METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr, nullptr,
                          &np, nullptr, nullptr, options_array, &objval, part.data());
  if (status != METIS_OK) {
    throw std::runtime_error(std::string("partition_with_metis: METIS_PartGraphKway returned ") +
                             metis_status(status) + " for " + std::to_string(n) + " rows in " +
                             std::to_string(nparts) + " parts");
  }
  if (options.objective == PartitionObjective::edge_cut) {
    edge_cut = objval;
    return part;
  }
  // objval is the communication volume: the cut counted here (each edge of A + A^T once).
  for (gidx_t r = 0; r < n; ++r) {
    for (idx_t e = xadj[static_cast<std::size_t>(r)]; e < xadj[static_cast<std::size_t>(r) + 1];
         ++e) {
      const idx_t c = adjncy[static_cast<std::size_t>(e)];
      if (c > r && part[static_cast<std::size_t>(c)] != part[static_cast<std::size_t>(r)]) {
        ++edge_cut;
      }
    }
  }
  return part;
}

// 1. The pattern to rank 0 (`lengths` and `cols` are filled there only); every rank gets the
// MPI counts and displacements of the old row blocks.
struct GatheredPattern {
  std::vector<std::int64_t> lengths;
  std::vector<gidx_t> cols;
  std::vector<int> row_counts, row_displs;
};
GatheredPattern gather_pattern(const DistMatrix& a) {
  MPI_Comm comm = a.comm();
  const int rank = comm_rank(comm);
  const int nranks = comm_size(comm);
  const CsrMatrix& local = a.local();
  const RowPartition& old_rows = a.rows();
  GatheredPattern g;
  std::vector<std::int64_t> my_lengths(static_cast<std::size_t>(local.n_rows));
  for (gidx_t r = 0; r < local.n_rows; ++r) {
    my_lengths[static_cast<std::size_t>(r)] = local.row_ptr[r + 1] - local.row_ptr[r];
  }
  g.row_counts.resize(static_cast<std::size_t>(nranks));
  g.row_displs.resize(g.row_counts.size());
  std::vector<int> nnz_counts(g.row_counts.size()), nnz_displs(g.row_counts.size());
  const int my_nnz = to_mpi_count(static_cast<std::uint64_t>(local.nnz()), "a rank's nonzeros");
  check_mpi(MPI_Gather(&my_nnz, 1, MPI_INT, nnz_counts.data(), 1, MPI_INT, 0, comm), "MPI_Gather");
  std::int64_t total_nnz = 0;
  for (int p = 0; p < nranks; ++p) {
    const auto sp = static_cast<std::size_t>(p);
    g.row_counts[sp] = to_mpi_count(static_cast<std::uint64_t>(old_rows.size(p)), "a rank's rows");
    g.row_displs[sp] = to_mpi_count(static_cast<std::uint64_t>(old_rows.begin(p)), "the rows");
    nnz_displs[sp] = to_mpi_count(static_cast<std::uint64_t>(total_nnz), "the nonzeros");
    total_nnz += nnz_counts[sp];
  }
  g.lengths.resize(rank == 0 ? static_cast<std::size_t>(a.n_rows()) : 0);
  g.cols.resize(rank == 0 ? static_cast<std::size_t>(total_nnz) : 0);
  check_mpi(
      MPI_Gatherv(my_lengths.data(), g.row_counts[static_cast<std::size_t>(rank)], MPI_INT64_T,
                  g.lengths.data(), g.row_counts.data(), g.row_displs.data(), MPI_INT64_T, 0, comm),
      "MPI_Gatherv");
  static_assert(sizeof(gidx_t) == sizeof(std::int64_t));
  check_mpi(MPI_Gatherv(local.col_idx.data(), my_nnz, MPI_INT64_T, g.cols.data(), nnz_counts.data(),
                        nnz_displs.data(), MPI_INT64_T, 0, comm),
            "MPI_Gatherv");
  return g;
}

// Reverse Cuthill-McKee order of a symmetric graph: order[k] = the vertex placed k-th. Each
// connected component starts at a pseudo-peripheral vertex (from its smallest-degree unvisited
// vertex, BFS sweeps to the farthest smallest-degree vertex until the depth stops growing) and
// is walked breadth first, each vertex's unvisited neighbours by increasing degree; the whole
// sequence is reversed at the end. Deterministic (ties by vertex number).
std::vector<gidx_t> rcm_order(const SymmetricGraph& g, gidx_t n) {
  const auto degree = [&](gidx_t v) {
    return g.xadj[static_cast<std::size_t>(v) + 1] - g.xadj[static_cast<std::size_t>(v)];
  };
  std::vector<gidx_t> by_degree(static_cast<std::size_t>(n));
  std::iota(by_degree.begin(), by_degree.end(), gidx_t{0});
  std::stable_sort(by_degree.begin(), by_degree.end(),
                   [&](gidx_t x, gidx_t y) { return degree(x) < degree(y); });
  std::vector<char> placed(static_cast<std::size_t>(n), 0);
  std::vector<gidx_t> order;
  order.reserve(static_cast<std::size_t>(n));
  std::vector<int> level(static_cast<std::size_t>(n), -1);
  std::vector<gidx_t> touched;
  // BFS levels from `root` inside its (unplaced) component: returns the depth and the
  // smallest-degree vertex of the last level.
  const auto sweep = [&](gidx_t root, gidx_t& far) {
    for (gidx_t v : touched) level[static_cast<std::size_t>(v)] = -1;
    touched.assign(1, root);
    level[static_cast<std::size_t>(root)] = 0;
    int depth = 0;
    far = root;
    for (std::size_t head = 0; head < touched.size(); ++head) {
      const gidx_t v = touched[head];
      const int lv = level[static_cast<std::size_t>(v)];
      if (lv > depth || (lv == depth && degree(v) < degree(far))) {
        depth = lv;
        far = v;
      }
      for (idx_t q = g.xadj[static_cast<std::size_t>(v)];
           q < g.xadj[static_cast<std::size_t>(v) + 1]; ++q) {
        const gidx_t u = g.adjncy[static_cast<std::size_t>(q)];
        if (level[static_cast<std::size_t>(u)] < 0) {
          level[static_cast<std::size_t>(u)] = lv + 1;
          touched.push_back(u);
        }
      }
    }
    return depth;
  };
  std::vector<gidx_t> neighbours;
  for (const gidx_t seed : by_degree) {
    if (placed[static_cast<std::size_t>(seed)]) continue;
    gidx_t root = seed, far = seed;
    int depth = sweep(root, far);
    for (int tries = 0; tries < 8 && far != root; ++tries) {
      gidx_t next_far = far;
      const int d = sweep(far, next_far);
      if (d <= depth) break;
      root = far;
      depth = d;
      far = next_far;
    }
    const std::size_t start = order.size();
    order.push_back(root);
    placed[static_cast<std::size_t>(root)] = 1;
    for (std::size_t head = start; head < order.size(); ++head) {
      const gidx_t v = order[head];
      neighbours.clear();
      for (idx_t q = g.xadj[static_cast<std::size_t>(v)];
           q < g.xadj[static_cast<std::size_t>(v) + 1]; ++q) {
        const gidx_t u = g.adjncy[static_cast<std::size_t>(q)];
        if (!placed[static_cast<std::size_t>(u)]) {
          placed[static_cast<std::size_t>(u)] = 1;
          neighbours.push_back(u);
        }
      }
      std::stable_sort(neighbours.begin(), neighbours.end(),
                       [&](gidx_t x, gidx_t y) { return degree(x) < degree(y); });
      order.insert(order.end(), neighbours.begin(), neighbours.end());
    }
  }
  std::reverse(order.begin(), order.end());
  return order;
}

// 3.-4.: renumber A by `new_of_old` (rank 0 only: every old row's new number) into the row
// blocks `offsets` (every rank), moving the rows to their new owners.
PartitionedMatrix renumber(const DistMatrix& a, const GatheredPattern& gathered,
                           std::vector<gidx_t> new_of_old, const std::vector<gidx_t>& offsets,
                           PartitionedMatrix out, const std::string& suffix) {
  MPI_Comm comm = a.comm();
  const int rank = comm_rank(comm);
  const int nranks = comm_size(comm);
  const CsrMatrix& local = a.local();
  const gidx_t n = a.n_rows();
  const RowPartition& old_rows = a.rows();
  const std::vector<int>& row_counts = gathered.row_counts;
  const std::vector<int>& row_displs = gathered.row_displs;
  RowPartition new_rows = RowPartition::from_offsets(offsets);
  // 3. Each rank's own rows' new numbers.
  std::vector<gidx_t> my_new(static_cast<std::size_t>(local.n_rows));
  check_mpi(
      MPI_Scatterv(new_of_old.data(), row_counts.data(), row_displs.data(), MPI_INT64_T,
                   my_new.data(), row_counts[static_cast<std::size_t>(rank)], MPI_INT64_T, 0, comm),
      "MPI_Scatterv");
  new_of_old = {};

  // 4. The new numbers of this rank's distinct columns, from their old owners.
  std::vector<gidx_t> distinct(local.col_idx.begin(), local.col_idx.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<std::vector<gidx_t>> asks(static_cast<std::size_t>(nranks));
  for (const gidx_t c : distinct) asks[static_cast<std::size_t>(old_rows.owner(c))].push_back(c);
  std::vector<int> from;
  const std::vector<gidx_t> asked = exchange_all_to_all(comm, asks, &from);
  std::vector<std::vector<gidx_t>> answers(static_cast<std::size_t>(nranks));
  {
    std::size_t k = 0;
    const gidx_t own0 = old_rows.begin(rank);
    for (int p = 0; p < nranks; ++p) {
      for (int i = 0; i < from[static_cast<std::size_t>(p)]; ++i, ++k) {
        answers[static_cast<std::size_t>(p)].push_back(
            my_new[static_cast<std::size_t>(asked[k] - own0)]);
      }
    }
  }
  // Answers come back per owner in the order asked, which is `distinct`'s order grouped by owner:
  // ascending owners for ascending columns (row blocks), so it is `distinct`'s order.
  const std::vector<gidx_t> new_cols = exchange_all_to_all(comm, answers);

  std::vector<std::vector<MovedNonzero>> moving(static_cast<std::size_t>(nranks));
  std::vector<std::vector<gidx_t>> empty_rows(static_cast<std::size_t>(nranks));
  for (gidx_t r = 0; r < local.n_rows; ++r) {
    const gidx_t row = my_new[static_cast<std::size_t>(r)];
    const int owner = new_rows.owner(row);
    if (local.row_ptr[r] == local.row_ptr[r + 1]) {
      empty_rows[static_cast<std::size_t>(owner)].push_back(row);
      empty_rows[static_cast<std::size_t>(owner)].push_back(local.row_begin + r);
    }
    for (std::int64_t q = local.row_ptr[r]; q < local.row_ptr[r + 1]; ++q) {
      const gidx_t c = local.col_idx[static_cast<std::size_t>(q)];
      const auto d = std::lower_bound(distinct.begin(), distinct.end(), c) - distinct.begin();
      moving[static_cast<std::size_t>(owner)].push_back({row, new_cols[static_cast<std::size_t>(d)],
                                                         local.values[static_cast<std::size_t>(q)],
                                                         local.row_begin + r});
    }
  }
  std::vector<MovedNonzero> mine = exchange_all_to_all(comm, moving);
  const std::vector<gidx_t> mine_empty = exchange_all_to_all(comm, empty_rows);
  std::sort(mine.begin(), mine.end(), [](const MovedNonzero& x, const MovedNonzero& y) {
    return x.row < y.row || (x.row == y.row && x.col < y.col);
  });

  CsrMatrix block;
  block.n_rows_global = n;
  block.n_cols = n;
  block.row_begin = new_rows.begin(rank);
  block.n_rows = new_rows.size(rank);
  block.row_ptr.assign(static_cast<std::size_t>(block.n_rows) + 1, 0);
  out.original_rows.assign(static_cast<std::size_t>(block.n_rows), -1);
  block.col_idx.reserve(mine.size());
  block.values.reserve(mine.size());
  for (const MovedNonzero& m : mine) {
    const auto r = static_cast<std::size_t>(m.row - block.row_begin);
    ++block.row_ptr[r + 1];
    out.original_rows[r] = m.old_row;
    block.col_idx.push_back(m.col);
    block.values.push_back(m.value);
  }
  for (std::size_t k = 0; k + 1 < mine_empty.size(); k += 2) {
    out.original_rows[static_cast<std::size_t>(mine_empty[k] - block.row_begin)] =
        mine_empty[k + 1];
  }
  std::partial_sum(block.row_ptr.begin(), block.row_ptr.end(), block.row_ptr.begin());
  RowPartition new_cols_part = new_rows;
  out.matrix = DistMatrix(comm, std::move(block), std::move(new_rows), std::move(new_cols_part),
                          a.name() + suffix);
  return out;
}
}  // namespace
PartitionedMatrix partition_with_metis(const DistMatrix& a, const GraphPartitionOptions& options) {
  return reorder_graph(a, GraphOrdering::metis, options);
}

constexpr auto kGraphOrderingNames = std::to_array<support::EnumName<GraphOrdering>>({
    {GraphOrdering::rcm, "rcm"},
    {GraphOrdering::metis, "metis"},
    {GraphOrdering::metis_rcm, "metis-rcm"},
});

GraphOrdering parse_graph_ordering(std::string_view name) {
  if (const auto ordering = support::value_named<kGraphOrderingNames>(name)) return *ordering;
  throw std::invalid_argument("unknown graph ordering '" + std::string(name) +
                              "' (known: " + support::names_joined<kGraphOrderingNames>() + ")");
}

const char* to_string(GraphOrdering ordering) {
  return support::name_of<kGraphOrderingNames>(ordering, "?");
}

PartitionedMatrix reorder_graph(const DistMatrix& a, GraphOrdering ordering,
                                const GraphPartitionOptions& options) {
  MPI_Comm comm = a.comm();
  const int rank = comm_rank(comm);
  const int nranks = comm_size(comm);
  const bool partitions = ordering != GraphOrdering::rcm;
  const std::string fn = ordering == GraphOrdering::metis
                             ? "partition_with_metis"
                             : std::string("reorder_graph (") + to_string(ordering) + ")";
  {
    std::exception_ptr refused;
    if (a.n_rows() != a.n_cols()) {
      refused = std::make_exception_ptr(std::invalid_argument(
          fn + ": the matrix is " + std::to_string(a.n_rows()) + " x " +
          std::to_string(a.n_cols()) + "; a symmetric renumbering needs a square one"));
    } else if (partitions && !(options.imbalance >= 1.001 && options.imbalance <= 10.0)) {
      refused = std::make_exception_ptr(std::invalid_argument(
          fn + ": imbalance " + std::to_string(options.imbalance) + " is outside [1.001, 10]"));
    }
    agreement::Agreement agreed;
    agreed.field("the ordering", to_string(ordering));
    agreed.field("the imbalance", std::to_string(options.imbalance));
    agreed.field("the seed", std::to_string(options.seed));
    agreed.field("the objective",
                 options.objective == PartitionObjective::volume ? "volume" : "edge cut");
    agreement::agree_on_call(comm, fn, std::move(agreed), refused);
  }
  const gidx_t n = a.n_rows();
  GatheredPattern gathered = gather_pattern(a);
  // 2. The new numbers by old row order and the new blocks, on rank 0.
  PartitionedMatrix out;
  std::vector<gidx_t> new_of_old;
  std::vector<gidx_t> offsets = a.rows().offsets();
  std::exception_ptr failed;
  if (rank == 0) {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      SymmetricGraph graph = symmetric_graph(n, gathered.lengths, gathered.cols);
      std::vector<gidx_t> rcm;
      if (ordering != GraphOrdering::metis) rcm = rcm_order(graph, n);
      new_of_old.resize(static_cast<std::size_t>(n));
      if (!partitions) {
        for (gidx_t k = 0; k < n; ++k) new_of_old[static_cast<std::size_t>(rcm[k])] = k;
      } else {
        const std::vector<idx_t> part =
            metis_parts(n, gathered.lengths, graph, nranks, options, out.edge_cut);
        std::fill(offsets.begin(), offsets.end(), 0);
        for (const idx_t p : part) ++offsets[static_cast<std::size_t>(p) + 1];
        std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
        std::vector<gidx_t> next(offsets.begin(), offsets.end() - 1);
        // Part by part; inside a part the rows keep their relative order (metis) or take the
        // order of the whole graph's RCM (metis-rcm).
        for (gidx_t k = 0; k < n; ++k) {
          const gidx_t r = rcm.empty() ? k : rcm[static_cast<std::size_t>(k)];
          new_of_old[static_cast<std::size_t>(r)] = next[static_cast<std::size_t>(part[r])]++;
        }
      }
      out.partition_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  agreement::agree_on_failure(comm, failed);
  gathered.lengths = {};
  gathered.cols = {};
  check_mpi(MPI_Bcast(offsets.data(), nranks + 1, MPI_INT64_T, 0, comm), "MPI_Bcast");
  double seconds[2] = {out.partition_seconds, static_cast<double>(out.edge_cut)};
  check_mpi(MPI_Bcast(seconds, 2, MPI_DOUBLE, 0, comm), "MPI_Bcast");
  out.partition_seconds = seconds[0];
  out.edge_cut = static_cast<std::int64_t>(seconds[1]);
  return renumber(a, gathered, std::move(new_of_old), offsets, std::move(out),
                  std::string(" (") + to_string(ordering) + ")");
}

PartitionedMatrix permute_graph(const DistMatrix& a, std::span<const gidx_t> new_of_old) {
  MPI_Comm comm = a.comm();
  const gidx_t n = a.n_rows();
  {
    std::exception_ptr refused;
    std::string why;
    if (a.n_rows() != a.n_cols()) {
      why = "the matrix is " + std::to_string(a.n_rows()) + " x " + std::to_string(a.n_cols()) +
            "; a symmetric renumbering needs a square one";
    } else if (static_cast<gidx_t>(new_of_old.size()) != n) {
      why = "the permutation has " + std::to_string(new_of_old.size()) + " entries, the matrix " +
            std::to_string(n) + " rows";
    } else {
      std::vector<char> seen(static_cast<std::size_t>(n), 0);
      for (std::size_t i = 0; i < new_of_old.size() && why.empty(); ++i) {
        const gidx_t v = new_of_old[i];
        if (v < 0 || v >= n) {
          why = "entry " + std::to_string(i) + " is " + std::to_string(v) + ", outside [0, " +
                std::to_string(n) + ")";
        } else if (seen[static_cast<std::size_t>(v)]++) {
          why = "entry " + std::to_string(i) + " repeats " + std::to_string(v) +
                " (not a permutation)";
        }
      }
    }
    if (!why.empty()) {
      refused = std::make_exception_ptr(std::invalid_argument("permute_graph: " + why));
    }
    // The same permutation on every rank: a digest of it, hidden from the message.
    std::uint64_t digest = 1469598103934665603ULL;
    for (const gidx_t v : new_of_old) {
      digest = (digest ^ static_cast<std::uint64_t>(v)) * 1099511628211ULL;
    }
    agreement::Agreement agreed;
    agreed.field("the permutation", std::to_string(digest), false);
    agreement::agree_on_call(comm, "permute_graph", std::move(agreed), refused);
  }
  GatheredPattern gathered;
  const int nranks = comm_size(comm);
  for (int p = 0; p < nranks; ++p) {
    gathered.row_counts.push_back(
        to_mpi_count(static_cast<std::uint64_t>(a.rows().size(p)), "a rank's rows"));
    gathered.row_displs.push_back(
        to_mpi_count(static_cast<std::uint64_t>(a.rows().begin(p)), "the rows"));
  }
  std::vector<gidx_t> mine;
  if (comm_rank(comm) == 0) mine.assign(new_of_old.begin(), new_of_old.end());
  return renumber(a, gathered, std::move(mine), a.rows().offsets(), PartitionedMatrix{},
                  " (permuted)");
}

}  // namespace netsparse
