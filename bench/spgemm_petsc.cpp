#include "spgemm_petsc.hpp"

#include <petscmat.h>

#include "netsparse/petsc.hpp"
#include "petsc_session.hpp"

namespace netsparse::bench {
namespace {

using petsc_detail::check;

}  // namespace

PetscSpgemmRun run_petsc_spgemm(const DistMatrix& a, int iters) {
  ensure_petsc();
  PetscSpgemmRun run;
  Mat pa = nullptr, pc = nullptr;
  MPI_Barrier(a.comm());
  const double t0 = MPI_Wtime();
  pa = to_petsc(a);
  check(MatMatMult(pa, pa, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &pc), "MatMatMult");
  run.setup_seconds = max_over_ranks(a.comm(), MPI_Wtime() - t0);
  MPI_Barrier(a.comm());
  const double t1 = MPI_Wtime();
  for (int it = 0; it < iters; ++it) {
    check(MatMatMult(pa, pa, MAT_REUSE_MATRIX, PETSC_DEFAULT, &pc), "MatMatMult");
  }
  run.product_seconds = max_over_ranks(a.comm(), (MPI_Wtime() - t1) / iters);
  run.c = from_petsc(pc, a.name() + "*" + a.name(), a.comm());
  MatDestroy(&pc);
  MatDestroy(&pa);
  return run;
}

}  // namespace netsparse::bench
