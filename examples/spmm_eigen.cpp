// A distributed SpMM of an Eigen sparse matrix, checked against Eigen's own product.
//
//   mpirun -np 2 spmm_eigen [SIDE] [K]
//     SIDE  the matrix is the 5-point Laplacian of a SIDE x SIDE grid plus long-range couplings
//           (SIDE^2 rows; default 64)
//     K     dense columns (default 16)
//
// The path of a serial Eigen code moving to NetSparse: the sparse matrix A exists on every rank
// (here each rank builds it; an application could read it), and rank 0 holds the dense B, the
// way the serial code did. Each rank keeps its row block of A (from_global_eigen), receives its
// rows of B (scatter_dense), runs the collective SpMM in the netsparse mode, and rank 0 collects
// C (gather_dense) and compares it with Eigen's A * B.
#include <mpi.h>

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <netsparse.hpp>        // the whole NetSparse C++ API
#include <netsparse/eigen.hpp>  // from_global_eigen / from_local_eigen
#include <span>
#include <vector>

namespace {

// NetSparse's dense operands are row-major with K values per row.
using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The same matrix on every rank: a 2D Laplacian plus, for every 7th row, a coupling to a far
// away row, so that ranks gather from more than their grid neighbours.
Eigen::SparseMatrix<float, Eigen::RowMajor> make_matrix(int side) {
  const int n = side * side;
  std::vector<Eigen::Triplet<float>> entries;
  for (int y = 0; y < side; ++y) {
    for (int x = 0; x < side; ++x) {
      const int r = y * side + x;
      entries.emplace_back(r, r, 4.0f);
      if (x > 0) entries.emplace_back(r, r - 1, -1.0f);
      if (x + 1 < side) entries.emplace_back(r, r + 1, -1.0f);
      if (y > 0) entries.emplace_back(r, r - side, -1.0f);
      if (y + 1 < side) entries.emplace_back(r, r + side, -1.0f);
      if (r % 7 == 0) entries.emplace_back(r, (r * 31 + n / 2) % n, 0.5f);
    }
  }
  Eigen::SparseMatrix<float, Eigen::RowMajor> a(n, n);
  a.setFromTriplets(entries.begin(), entries.end());  // repeated entries are summed
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  // THREAD progress (the RIG engine's own thread) needs MPI_THREAD_MULTIPLE.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // A rank of this host that dies ends this one (exit 1) instead of leaving it waiting for
  // ever in MPI; ns_finalize_or_exit below leaves without MPI_Finalize after a peer failure.
  ns_watch_host_peers(MPI_COMM_WORLD, 1);
  const int side = argc > 1 ? std::atoi(argv[1]) : 64;
  const int k = argc > 2 ? std::atoi(argv[2]) : 16;
  int status = 0;
  try {
    // 1. A, whole on every rank; each rank keeps its block of rows (equal blocks by default).
    const Eigen::SparseMatrix<float, Eigen::RowMajor> A = make_matrix(side);
    const netsparse::DistMatrix a = netsparse::from_global_eigen(MPI_COMM_WORLD, A);

    // 2. B on rank 0 only; every rank receives its rows of B (the column partition a.cols()).
    RowMajorMatrixXf B;
    if (rank == 0) B = RowMajorMatrixXf::Random(A.cols(), k);
    const std::vector<float> b = netsparse::scatter_dense(
        MPI_COMM_WORLD, a.cols(), k, std::span<const float>(B.data(), B.size()), /*root=*/0);

    // 3. C = A * B, collective; the setup (the constructor) is paid once for many runs.
    netsparse::DistOptions options;
    options.mode = netsparse::CommMode::netsparse;  // Remote Indexed Gather
    netsparse::DistKernel spmm(a, netsparse::KernelKind::spmm, k, options);
    std::vector<float> c(static_cast<std::size_t>(a.rows().size(rank)) * k);
    spmm.spmm(b, c);

    // 4. C on rank 0 (rows by a.rows()), compared with Eigen's product.
    const std::vector<float> C = netsparse::gather_dense(MPI_COMM_WORLD, a.rows(), k, c);
    if (rank == 0) {
      const RowMajorMatrixXf want = A * B;
      const Eigen::Map<const RowMajorMatrixXf> got(C.data(), A.rows(), k);
      const float err = (got - want).cwiseAbs().maxCoeff() / want.cwiseAbs().maxCoeff();
      std::printf(
          "%lld x %lld, %lld nonzeros, K = %d, %d ranks: max |C - A*B| / max |A*B| = %.2g\n",
          static_cast<long long>(a.n_rows()), static_cast<long long>(a.n_cols()),
          static_cast<long long>(a.nnz_global()), k, a.nranks(), err);
      status = err <= 1e-5f ? 0 : 1;
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    // Collective calls fail on every rank alike (the same message), so no rank hangs here.
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    status = 1;
  }
  return ns_finalize_or_exit(status);
}
