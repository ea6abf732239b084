// PETSc inside an MPI benchmark (netsparse_bench's petsc mode, bench_spgemm's): initialised on
// first use, finalised at the start of MPI_Finalize, and the slowest rank's time. Compiled only
// with PETSc (bench/petsc.cmake, bench/spgemm.cmake).
#pragma once

#include <mpi.h>

namespace netsparse::bench {

// PetscInitialize once; PetscFinalize runs from the delete callback of an attribute on
// MPI_COMM_SELF, i.e. at the start of MPI_Finalize while MPI still works.
void ensure_petsc();

// The largest of `v` over the ranks of `comm`.
double max_over_ranks(MPI_Comm comm, double v);

}  // namespace netsparse::bench
