// A distributed SpMM with NetSparse, the way an application uses it.
//
//   mpirun -np 2 spmm_distributed [MATRIX] [K]
//     MATRIX  a .mtx / METIS file or a generator (default gen:stencil:24:24:24:1)
//     K       dense columns (default 16)
//
// Every rank loads its rows of A (no rank reads the whole file), holds its rows of the dense
// operand B and of the result C, and calls the collective SpMM. Ten power-iteration steps
// B <- A B / ||A B|| run with the netsparse mode (Remote Indexed Gather of exactly the remote
// rows each column panel needs), then one step is repeated with the sparsity-unaware
// MPI_Allgatherv baseline to show both agree and how many bytes each moved.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "netsparse/distributed.hpp"
#include "netsparse/netsparse.hpp"
#include "netsparse/netsparse_mpi.h"

namespace {

double global_norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return std::sqrt(s);
}

std::uint64_t global_sum(std::uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

int run(int argc, char** argv, int rank) {
  const std::string spec = argc > 1 ? argv[1] : "gen:stencil:24:24:24:1";
  const int k = argc > 2 ? std::atoi(argv[2]) : 16;

  netsparse::DistMatrix a = netsparse::load_distributed_matrix(MPI_COMM_WORLD, spec);
  if (a.n_rows() != a.n_cols()) {
    if (rank == 0) std::fprintf(stderr, "power iteration needs a square matrix\n");
    return 1;
  }
  // This rank's rows of B (the column-indexed operand) and of C; B and C split the same way.
  const auto my_rows = static_cast<std::size_t>(a.rows().size(rank));
  std::vector<float> b(my_rows * k), c(my_rows * k);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.0f + static_cast<float>((i * 7) % 13) / 13;

  netsparse::DistOptions options;
  options.mode = netsparse::CommMode::netsparse;
  netsparse::DistKernel spmm(a, netsparse::KernelKind::spmm, k, options);

  double lambda = 0;
  for (int step = 0; step < 10; ++step) {
    spmm.spmm(b, c);  // C = A * B (collective)
    lambda = global_norm(c) / global_norm(b);
    const double inv = 1.0 / global_norm(c);
    for (std::size_t i = 0; i < c.size(); ++i) b[i] = static_cast<float>(c[i] * inv);
  }
  const netsparse::CommStats ns = spmm.total_stats();

  // One more step with both modes on the same B: the results agree.
  spmm.spmm(b, c);
  netsparse::DistOptions su_options;
  su_options.mode = netsparse::CommMode::su;
  netsparse::DistKernel su(a, netsparse::KernelKind::spmm, k, su_options);
  std::vector<float> c_su(c.size());
  su.spmm(b, c_su);
  double diff = 0;
  for (std::size_t i = 0; i < c.size(); ++i) diff = std::fmax(diff, std::fabs(c[i] - c_su[i]));
  MPI_Allreduce(MPI_IN_PLACE, &diff, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  const std::uint64_t ns_bytes = global_sum(ns.bytes_sent) / ns.runs;
  const std::uint64_t su_bytes = global_sum(su.last_run_stats().bytes_sent);
  if (rank == 0) {
    std::printf("%s: %lld x %lld, %lld nonzeros, K = %d\n", a.name().c_str(),
                static_cast<long long>(a.n_rows()), static_cast<long long>(a.n_cols()),
                static_cast<long long>(a.nnz_global()), k);
    std::printf("dominant |eigenvalue| estimate after 10 steps: %.6f\n", lambda);
    std::printf("bytes per SpMM: netsparse %llu, su %llu (su / netsparse = %.1fx)\n",
                static_cast<unsigned long long>(ns_bytes),
                static_cast<unsigned long long>(su_bytes),
                ns_bytes > 0 ? double(su_bytes) / double(ns_bytes) : 0.0);
    std::printf("max |C_netsparse - C_su| = %.3g\n", diff);
  }
  return diff <= 1e-4 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The RIG engine's progress thread calls MPI alongside the application.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // A rank of this host that dies ends this one (exit 1) instead of leaving it waiting for
  // ever in MPI; ns_finalize_or_exit below leaves without MPI_Finalize after a peer failure.
  ns_watch_host_peers(MPI_COMM_WORLD, 1);
  int status = 0;
  try {
    status = run(argc, argv, rank);
  } catch (const netsparse::Error& e) {
    // RIG engine failures carry an ns_status_t: its status string and the call's reason.
    std::fprintf(stderr, "rank %d: %s (status %d: %s)\n", rank, e.what(), e.status(),
                 ns_status_str(e.status()));
    status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    status = 1;
  }
  return ns_finalize_or_exit(status);
}
