// Graph partitioning against the inter-node imbalance (the NetSparse paper's future work, §9.4 /
// Fig. 19): a row-distributed square matrix renumbered so that each rank's rows are one part of a
// METIS k-way partition of the matrix's graph (fewer edges between parts = fewer remote rows;
// vertex weights = a row's nonzeros + 1, so the parts also balance the kernels' work).
//
//   PartitionedMatrix p = netsparse::partition_with_metis(a);
//   DistKernel k(p.matrix, ...);                // P A P^T: each part's rows contiguous
//   // this rank's row i of p.matrix is row p.original_rows[i] of A: fill B's and read C's rows
//   // by it (the permutation is symmetric, so B and C move with A's rows).
//
// METIS runs on rank 0 over the gathered pattern (O(nnz) there; METIS 5 is serial, and Debian's
// ParMETIS is non-free); everything else is O(a rank's rows + its distinct columns): the new row
// numbers travel by scatter and by one request/answer exchange for the columns a rank holds.
// Collective; every rank passes the same options (agreed). Throws std::invalid_argument for a
// rectangular matrix or bad options, std::runtime_error when METIS fails (same text on every
// rank), std::overflow_error for a graph beyond METIS' 32-bit indices.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "netsparse/dist_matrix.hpp"

namespace netsparse {

// What METIS minimizes: the edges of A + A^T between parts (METIS_OBJTYPE_CUT), or the total
// communication volume (METIS_OBJTYPE_VOL: per row, the parts other than its own that hold a
// neighbour -- the remote rows the distributed kernels fetch, summed over the ranks).
enum class PartitionObjective { edge_cut, volume };

struct GraphPartitionOptions {
  // Largest part weight / average part weight (METIS' ufactor = 1000 * (imbalance - 1)).
  double imbalance = 1.03;
  // METIS' random seed: the same partition on every run of the same input.
  int seed = 1;
  PartitionObjective objective = PartitionObjective::edge_cut;
};

struct PartitionedMatrix {
  DistMatrix matrix;                  // P A P^T, rows and columns split by the parts
  std::vector<gidx_t> original_rows;  // this rank's rows of `matrix`: their row numbers in A
  std::int64_t edge_cut = 0;          // edges of A + A^T between parts (whatever the objective)
  double partition_seconds = 0;       // METIS alone (rank 0)
};

[[nodiscard]] PartitionedMatrix partition_with_metis(const DistMatrix& a,
                                                     const GraphPartitionOptions& options = {});

// Locality orderings of a graph (GNN locality, docs/benchmarks.md "GCN locality"): a symmetric
// renumbering P A P^T chosen for fewer remote rows and nearer neighbours.
//   rcm        reverse Cuthill-McKee of A + A^T (bandwidth reduction) on rank 0; the row blocks
//              keep their sizes, so each rank's rows become one band of the RCM order
//   metis      = partition_with_metis: each rank's rows are one METIS k-way part (the fewest
//              edges between ranks), a part's rows in their old relative order
//   metis-rcm  the METIS parts, each part's rows in the RCM order of the whole graph (the cut
//              of metis and, inside a rank, RCM's nearness)
enum class GraphOrdering { rcm, metis, metis_rcm };
// "rcm", "metis", "metis-rcm"; anything else throws std::invalid_argument naming the known ones.
[[nodiscard]] GraphOrdering parse_graph_ordering(std::string_view name);
[[nodiscard]] const char* to_string(GraphOrdering ordering);

// The graph renumbered by `ordering` (collective; `options` apply to the METIS orderings).
// Errors as partition_with_metis; every rank must pass the same ordering. `edge_cut` is METIS'
// (0 for rcm); `partition_seconds` is the ordering's computation on rank 0.
[[nodiscard]] PartitionedMatrix reorder_graph(const DistMatrix& a, GraphOrdering ordering,
                                              const GraphPartitionOptions& options = {});

// A caller's symmetric permutation: old row r becomes row new_of_old[r]; the row blocks keep
// their sizes. Every rank passes the whole permutation (n entries, the same on every rank,
// agreed by a digest). Throws std::invalid_argument on every rank for a wrong length, an entry
// outside [0, n), a repeated entry or a rectangular matrix.
[[nodiscard]] PartitionedMatrix permute_graph(const DistMatrix& a,
                                              std::span<const gidx_t> new_of_old);

}  // namespace netsparse
