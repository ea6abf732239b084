#include "spgemm_combblas.hpp"

#include <mpi.h>

#include <CombBLAS/CombBLAS.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace netsparse::bench {
namespace {

using Block = combblas::SpDCCols<std::int64_t, double>;
using Matrix = combblas::SpParMat<std::int64_t, double, Block>;
using PlusTimes = combblas::PlusTimesSRing<double, double>;

struct Triple {
  gidx_t row, col;
  double value;
};

double slowest(MPI_Comm comm, double seconds) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  return seconds;
}

// A (the bench's 1-D row blocks) as a CombBLAS matrix on `grid`: every local triple goes to its
// 2-D owner (SpParMat::Owner, local indices) and SparseCommon exchanges them and builds the
// blocks, the path CombBLAS's own triples constructor takes after its 1-D vectors (that
// constructor needs FullyDistVecs of CombBLAS's layout, which the bench's row split is not).
Matrix to_combblas(const DistMatrix& a, const std::shared_ptr<combblas::CommGrid>& grid) {
  Matrix m(grid);
  const CsrMatrix& local = a.local();
  std::vector<std::vector<std::tuple<std::int64_t, std::int64_t, double>>> outgoing(
      static_cast<std::size_t>(grid->GetSize()));
  for (gidx_t r = 0; r < local.n_rows; ++r) {
    for (std::int64_t x = local.row_ptr[r]; x < local.row_ptr[r + 1]; ++x) {
      std::int64_t lrow = 0, lcol = 0;
      const int owner =
          m.Owner(a.n_rows(), a.n_cols(), local.row_begin + r, local.col_idx[x], lrow, lcol);
      outgoing[static_cast<std::size_t>(owner)].emplace_back(lrow, lcol, local.values[x]);
    }
  }
  // SparseCommon allocates the local block itself: drop the empty one the grid constructor made.
  delete m.seqptr();
  // maximum: the bench's matrices have no duplicate entries, so nothing is combined.
  m.SparseCommon(outgoing, static_cast<std::int64_t>(local.nnz()), a.n_rows(), a.n_cols(),
                 combblas::maximum<double>());
  return m;
}

// This rank's rows of C (a's row split, sorted CSR) from C's 2-D blocks: every entry travels to
// its row owner.
CsrMatrix gather_rows(Matrix& c, const DistMatrix& a) {
  const std::shared_ptr<combblas::CommGrid> grid = c.getcommgrid();
  // CombBLAS's block layout (SpParMat::Owner): processor row i holds global rows from
  // i * (m / grid rows), the last row of processors the remainder; columns alike.
  const gidx_t row_offset = grid->GetRankInProcCol() * (a.n_rows() / grid->GetGridRows());
  const gidx_t col_offset = grid->GetRankInProcRow() * (a.n_cols() / grid->GetGridCols());
  const int nranks = a.nranks();
  std::vector<std::vector<Triple>> outgoing(static_cast<std::size_t>(nranks));
  Block& block = c.seq();
  for (auto col = block.begcol(); col != block.endcol(); ++col) {
    for (auto nz = block.begnz(col); nz != block.endnz(col); ++nz) {
      const gidx_t row = row_offset + nz.rowid();
      outgoing[static_cast<std::size_t>(a.rows().owner(row))].push_back(
          {row, col_offset + col.colid(), nz.value()});
    }
  }
  std::vector<int> send_counts(nranks), recv_counts(nranks), send_displs(nranks + 1, 0),
      recv_displs(nranks + 1, 0);
  std::vector<Triple> send;
  for (int p = 0; p < nranks; ++p) {
    send_counts[p] = static_cast<int>(outgoing[p].size() * sizeof(Triple));
    send.insert(send.end(), outgoing[p].begin(), outgoing[p].end());
  }
  MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, a.comm());
  for (int p = 0; p < nranks; ++p) {
    send_displs[p + 1] = send_displs[p] + send_counts[p];
    recv_displs[p + 1] = recv_displs[p] + recv_counts[p];
  }
  std::vector<Triple> mine(static_cast<std::size_t>(recv_displs[nranks]) / sizeof(Triple));
  MPI_Alltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_BYTE, mine.data(),
                recv_counts.data(), recv_displs.data(), MPI_BYTE, a.comm());
  std::sort(mine.begin(), mine.end(), [](const Triple& x, const Triple& y) {
    return x.row != y.row ? x.row < y.row : x.col < y.col;
  });
  CsrMatrix rows;
  rows.n_rows_global = a.n_rows();
  rows.n_cols = a.n_cols();
  rows.row_begin = a.rows().begin(a.rank());
  rows.n_rows = a.rows().size(a.rank());
  rows.row_ptr.assign(static_cast<std::size_t>(rows.n_rows) + 1, 0);
  for (const Triple& t : mine) {
    ++rows.row_ptr[static_cast<std::size_t>(t.row - rows.row_begin) + 1];
    rows.col_idx.push_back(t.col);
    rows.values.push_back(t.value);
  }
  for (gidx_t r = 0; r < rows.n_rows; ++r) rows.row_ptr[r + 1] += rows.row_ptr[r];
  return rows;
}

// Mult_AnXBn_Synch (blocking SUMMA broadcasts, the column-wise multithreaded heap LocalSpGEMM
// with a symbolic estimateNNZ pass) rather than Mult_AnXBn_DoubleBuff (two half-matrix stages,
// the older heap kernel on a transposed B): measured side by side on this machine, Synch took
// 0.58-0.61x of DoubleBuff's time on stencil:16:16:16 and 1.16-1.32x on kron:12 (np 1 and 4),
// the better of the two over both.
Matrix multiply(Matrix& a, Matrix& b) {
  return combblas::Mult_AnXBn_Synch<PlusTimes, double, Block>(a, b);
}

}  // namespace

CombblasSpgemmRun run_combblas_spgemm(const DistMatrix& a, int iters) {
  if (const std::string why = combblas_skip_reason(a.nranks()); !why.empty()) {
    throw std::invalid_argument("combblas: " + why);
  }
  CombblasSpgemmRun run;
  MPI_Barrier(a.comm());
  const double t0 = MPI_Wtime();
  // A square grid (0 x 0: CombBLAS takes sqrt(p) x sqrt(p)). The communicator is CombBLAS's own
  // duplicate, freed with the grid.
  const auto grid = std::make_shared<combblas::CommGrid>(a.comm(), 0, 0);
  Matrix ca = to_combblas(a, grid);
  Matrix cb(ca);  // Mult_AnXBn_* requires operands that do not alias
  run.setup_seconds = slowest(a.comm(), MPI_Wtime() - t0);
  {
    // Warm-up, untimed like the library modes' first product (first touch of the buffers).
    const Matrix warm_up = multiply(ca, cb);
  }
  MPI_Barrier(a.comm());
  const double t1 = MPI_Wtime();
  for (int it = 1; it < iters; ++it) {
    const Matrix discarded = multiply(ca, cb);
  }
  Matrix c = multiply(ca, cb);
  run.product_seconds = slowest(a.comm(), (MPI_Wtime() - t1) / iters);
  run.c_nnz = c.getnnz();
  run.c_rows = gather_rows(c, a);
  return run;
}

}  // namespace netsparse::bench
