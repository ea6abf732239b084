#include "spgemm_petsc.hpp"

#include <petscmat.h>

#include "netsparse/petsc.hpp"

namespace netsparse::bench {
namespace {

using petsc_detail::check;

// PETSc lives from the first run to the start of MPI_Finalize (an attribute's delete callback on
// MPI_COMM_SELF runs there, while MPI still works).
int finalize_petsc(MPI_Comm, int, void*, void*) {
  PetscFinalize();
  return MPI_SUCCESS;
}

void ensure_petsc() {
  PetscBool up = PETSC_FALSE;
  check(PetscInitialized(&up), "PetscInitialized");
  if (up == PETSC_TRUE) return;
  check(PetscInitializeNoArguments(), "PetscInitializeNoArguments");
  int key = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_petsc, &key, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
}

double max_over_ranks(MPI_Comm comm, double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, comm);
  return v;
}

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
