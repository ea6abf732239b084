// A sparse matrix distributed over the ranks of an MPI communicator by rows (1D).
//
// Rank p holds rows [rows().begin(p), rows().end(p)) of A in CSR (global column indices). The
// dense operands follow the same 1D split:
//   * the ROW-indexed ones (C of SpMM, X of SDDMM, y of SpMV) by rows(),
//   * the COLUMN-indexed ones (B of SpMM, Y of SDDMM, x of SpMV; the "properties" a rank
//     gathers from their owners) by cols().
// For a square matrix cols() is the same partition as rows(), so C of one SpMM can be the B of
// the next. Every dense block is row-major with K elements per row (leading dimension K), float or
// double as the kernel's DistOptions::scalar says.
//
// Building one is collective and never funnels data through one rank: a Matrix Market file is
// cut into one byte range per rank, each rank parses its range and the triplets travel to their
// row owners with MPI_Alltoallv; a generator produces each rank's rows on that rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "netsparse/csr.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/partition.hpp"

namespace netsparse {

enum class PartitionKind {
  equal_rows,   // blocks of n / P rows (RowPartition::equal_blocks): O(1) owner lookup
  balanced_nnz  // about nnz / P nonzeros per rank, computed without gathering the row pointer
};
[[nodiscard]] const char* to_string(PartitionKind kind) noexcept;

class DistMatrix {
 public:
  DistMatrix() = default;
  // Collective. `local` must be exactly rows [rows.begin(rank), rows.end(rank)) of an
  // rows.n_rows() x cols.n_rows() matrix (checked on every rank; if any rank's block is wrong,
  // every rank throws std::invalid_argument).
  // `comm` is used, not duplicated: it must outlive this object.
  DistMatrix(MPI_Comm comm, CsrMatrix local, RowPartition rows, RowPartition cols,
             std::string name);

  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int nranks() const noexcept { return nranks_; }
  [[nodiscard]] const CsrMatrix& local() const noexcept { return local_; }
  [[nodiscard]] const RowPartition& rows() const noexcept { return rows_; }
  [[nodiscard]] const RowPartition& cols() const noexcept { return cols_; }
  [[nodiscard]] gidx_t n_rows() const noexcept { return rows_.n_rows(); }
  [[nodiscard]] gidx_t n_cols() const noexcept { return cols_.n_rows(); }
  [[nodiscard]] std::int64_t nnz_global() const noexcept { return nnz_global_; }
  // What the matrix is ("NotreDame_www.mtx", "kron:16", ...), for tables.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int nranks_ = 1;
  CsrMatrix local_;
  RowPartition rows_ = RowPartition::equal_blocks(0, 1);
  RowPartition cols_ = RowPartition::equal_blocks(0, 1);
  std::int64_t nnz_global_ = 0;
  std::string name_;
};

// ---- collective loaders ---------------------------------------------------------------------
// Every rank passes the same arguments. On malformed input every rank throws: the rank that met
// the problem throws its ParseError ("FILE:LINE: reason"), the others a ParseError with the same
// text, so no rank is left waiting in a collective.

// Matrix Market (coordinate real|integer|pattern, general|symmetric|skew-symmetric; see
// matrix_market.hpp). Each rank parses one byte range of the file; the triplets are sent to
// their row owners with MPI_Alltoallv. The result equals read_matrix_market() row block by row
// block.
DistMatrix read_distributed_matrix_market(MPI_Comm comm, const std::string& path,
                                          PartitionKind partition = PartitionKind::equal_rows);

// METIS graph file. The reader validates the whole graph (symmetry, edge count), which needs
// every adjacency list, so each rank reads the file itself and keeps its rows: no data passes
// through one rank, but each rank parses the whole file (fine up to a few hundred MB).
DistMatrix read_distributed_metis(MPI_Comm comm, const std::string& path,
                                  PartitionKind partition = PartitionKind::equal_rows);

// Generators: each rank generates its own rows (generators.hpp); balanced_nnz generates the
// equal blocks first to count the nonzeros per row, then each rank generates its balanced block.
DistMatrix generate_distributed(MPI_Comm comm, const KroneckerParams& params,
                                PartitionKind partition = PartitionKind::equal_rows);
DistMatrix generate_distributed(MPI_Comm comm, const StencilParams& params,
                                PartitionKind partition = PartitionKind::equal_rows);
DistMatrix generate_distributed(MPI_Comm comm, const RoadParams& params,
                                PartitionKind partition = PartitionKind::equal_rows);
DistMatrix generate_distributed(MPI_Comm comm, const WebParams& params,
                                PartitionKind partition = PartitionKind::equal_rows);

// A matrix named by a specification string (what netsparse_bench --matrix takes):
//   PATH.mtx                          Matrix Market file
//   PATH.graph | PATH.metis           METIS graph file
//   PATH (any other name)             Matrix Market if the content (decompressed, for gzip
//                                     data: x.mtx.gz) starts with %%MatrixMarket, else METIS
//   gen:kron:SCALE[:EDGE_FACTOR[:SEED]]            Graph500 Kronecker, 2^SCALE rows
//   gen:stencil:NX:NY:NZ[:DOF]                     3D 27-point stencil
//   gen:road:WIDTH:HEIGHT[:LONG_FRACTION[:SEED[:GRID_FRACTION]]]  road-like grid, long edges
//   gen:web:ROWS[:MEAN_DEGREE[:LOCAL_FRACTION[:SEED]]]  web crawl in URL order
// Throws std::invalid_argument for a malformed specification (same text on every rank).
DistMatrix load_distributed_matrix(MPI_Comm comm, std::string_view spec,
                                   PartitionKind partition = PartitionKind::equal_rows);
// The accepted forms above, for --help texts.
[[nodiscard]] std::string matrix_spec_help();

// ---- changing sparsity ----------------------------------------------------------------------
// GNN-style neighbour sampling of a row block: nonzero (r, c) is kept when a hash of
// (seed, r, c) falls below keep_fraction; with max_per_row > 0, at most that many of a row's
// nonzeros are kept (those with the smallest hashes). The decision depends only on (seed, r, c)
// and the row's own nonzeros, never on the partition, so sampling each rank's rows gives the
// rows of the sampled whole matrix. Values are kept. Throws std::invalid_argument for a
// fraction outside [0, 1] or a negative max_per_row.
struct SamplingParams {
  double keep_fraction = 0.5;
  int max_per_row = 0;
};
[[nodiscard]] CsrMatrix sample_rows(const CsrMatrix& rows, const SamplingParams& params,
                                    std::uint64_t seed);

}  // namespace netsparse
