// bench_transpose_overlap: how much of the distributed transpose a computation hides when it runs
// while the transpose is pending (transpose_start ... wait) instead of after it (transpose()).
//
//   mpirun -np 2 bench_transpose_overlap [--matrix SPEC] [--compute-reps N] [--reps R]
//
// The independent computation is N local SpMVs y = A_local x over this rank's rows (no
// communication, nothing of A^T). Per configuration, the slowest rank's time, best of R:
//   transpose      transpose(a) alone
//   compute        the N SpMVs alone
//   sequential     transpose(a), then the SpMVs
//   overlap-calls  transpose_start(calls), the SpMVs with test() after each, wait()
//   overlap-thread transpose_start(thread), the SpMVs, wait()
// hidden = (sequential - overlap) / min(transpose, compute): 1 when the shorter one is hidden
// entirely, 0 when nothing is. Exits 1 when an overlapped A^T differs from transpose(a).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/dist_transpose.hpp"

namespace {

using netsparse::CsrMatrix;
using netsparse::DistMatrix;

double slowest(double seconds) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

// Best of `reps` of the slowest rank's time of f().
double best_of(int reps, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    f();
    best = std::min(best, slowest(MPI_Wtime() - t0));
  }
  return best;
}

void local_spmv(const CsrMatrix& m, const std::vector<double>& x, std::vector<double>& y) {
  for (netsparse::gidx_t r = 0; r < m.n_rows; ++r) {
    double s = 0;
    for (std::int64_t i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i)
      s += m.values[i] * x[m.col_idx[i]];
    y[r] = s;
  }
}

bool same(const CsrMatrix& a, const CsrMatrix& b) {
  return a.row_begin == b.row_begin && a.n_rows == b.n_rows && a.n_cols == b.n_cols &&
         a.row_ptr == b.row_ptr && a.col_idx == b.col_idx && a.values == b.values;
}

int run(int argc, char** argv) {
  std::string spec = "gen:kron:18";
  int compute_reps = 10, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--matrix") {
      spec = value;
    } else if (arg == "--compute-reps") {
      compute_reps = std::atoi(value.c_str());
    } else if (arg == "--reps") {
      reps = std::max(1, std::atoi(value.c_str()));
    } else {
      throw std::invalid_argument("unknown argument " + arg);
    }
  }
  if (argc % 2 == 0)
    throw std::invalid_argument(std::string("missing value after ") + argv[argc - 1]);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const DistMatrix a = netsparse::load_distributed_matrix(MPI_COMM_WORLD, spec);
  const DistMatrix want = netsparse::transpose(a);
  std::vector<double> x(static_cast<std::size_t>(a.n_cols()), 0.5), y(a.local().n_rows);
  bool all_same = true;
  const auto compute = [&](netsparse::PendingTranspose* pending) {
    for (int i = 0; i < compute_reps; ++i) {
      local_spmv(a.local(), x, y);
      if (pending != nullptr) (void)pending->test();
    }
  };
  const auto overlapped = [&](netsparse::TransposeProgress progress) {
    return best_of(reps, [&] {
      netsparse::PendingTranspose pending = netsparse::transpose_start(a, progress);
      compute(&pending);
      all_same = same(pending.wait().local(), want.local()) && all_same;
    });
  };
  const double t_transpose = best_of(reps, [&] { (void)netsparse::transpose(a); });
  const double t_compute = best_of(reps, [&] { compute(nullptr); });
  const double t_sequential = best_of(reps, [&] {
    const DistMatrix at = netsparse::transpose(a);
    compute(nullptr);
  });
  const double t_calls = overlapped(netsparse::TransposeProgress::calls);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  const double t_thread =
      level == MPI_THREAD_MULTIPLE ? overlapped(netsparse::TransposeProgress::thread) : 0.0;
  int ok = all_same ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    const double shorter = std::min(t_transpose, t_compute);
    std::printf("%s, %d ranks, %lld nonzeros, %d local SpMVs, best of %d (slowest rank)\n",
                a.name().c_str(), a.nranks(), static_cast<long long>(a.nnz_global()), compute_reps,
                reps);
    std::printf("  transpose       %9.3f ms\n  compute         %9.3f ms\n", t_transpose * 1e3,
                t_compute * 1e3);
    std::printf("  sequential      %9.3f ms\n", t_sequential * 1e3);
    std::printf("  overlap-calls   %9.3f ms  hidden %.2f\n", t_calls * 1e3,
                (t_sequential - t_calls) / shorter);
    if (t_thread > 0) {
      std::printf("  overlap-thread  %9.3f ms  hidden %.2f\n", t_thread * 1e3,
                  (t_sequential - t_thread) / shorter);
    }
    std::printf("  overlapped A^T equal to transpose(a): %s\n", ok ? "yes" : "NO");
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 1;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "bench_transpose_overlap (rank %d): %s\n", rank, e.what());
  }
  MPI_Finalize();
  return rc;
}
