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
#include <vector>

#include "netsparse/dist_matrix.hpp"

namespace netsparse {

struct GraphPartitionOptions {
  // Largest part weight / average part weight (METIS' ufactor = 1000 * (imbalance - 1)).
  double imbalance = 1.03;
  // METIS' random seed: the same partition on every run of the same input.
  int seed = 1;
};

struct PartitionedMatrix {
  DistMatrix matrix;                  // P A P^T, rows and columns split by the parts
  std::vector<gidx_t> original_rows;  // this rank's rows of `matrix`: their row numbers in A
  std::int64_t edge_cut = 0;          // METIS' objective: edges of A + A^T between parts
  double partition_seconds = 0;       // METIS alone (rank 0)
};

[[nodiscard]] PartitionedMatrix partition_with_metis(const DistMatrix& a,
                                                     const GraphPartitionOptions& options = {});

}  // namespace netsparse
