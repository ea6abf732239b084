// bench_spgemm's `petsc` mode: PETSc's MatMatMult (MATMPIAIJ x MATMPIAIJ) on the bench's matrix
// with the same row / column split (netsparse/petsc.hpp's to_petsc), fp64. Compiled in only when
// PETSc is found (petsc_available.hpp's kPetscMode says whether).
#pragma once

#include "netsparse/dist_matrix.hpp"
#include "petsc_available.hpp"

namespace netsparse::bench {

struct PetscSpgemmRun {
  double setup_seconds = 0;    // to_petsc + MatMatMult(MAT_INITIAL_MATRIX), the slowest rank
  double product_seconds = 0;  // per MatMatMult(MAT_REUSE_MATRIX), the slowest rank's mean
  DistMatrix c;                // C from the last product (from_petsc)
};

// C = A * A with PETSc, `iters` timed reuse products. Collective; PETSc is initialized on first
// use and finalized at the start of MPI_Finalize.
PetscSpgemmRun run_petsc_spgemm(const DistMatrix& a, int iters);

}  // namespace netsparse::bench
