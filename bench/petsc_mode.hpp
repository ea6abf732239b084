// netsparse_bench's `petsc` mode: what HPC codes run today for the same products, PETSc's
// MatMult (SpMV) and MatMatMult with an MPIDENSE B (SpMM), on a MATMPIAIJ holding the bench's
// matrix with the same row / column split (netsparse/petsc.hpp's to_petsc), in fp64 (PETSc's
// scalar). Compiled in only when PETSc is found (petsc_available.hpp's kPetscMode says whether).
#pragma once

#include <span>

#include "baseline_run.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "petsc_available.hpp"

namespace netsparse::bench {

// setup_seconds: MatCreateMPIAIJWithArrays + operands + MatMatMult's symbolic phase. Ghosts:
// PETSc's VecScatter moves each ghost row once, the off-diagonal block's columns (garray).
using PetscRun = BaselineRun;

// Collective. b_local: this rank's rows of the column-indexed operand (a.cols(), rows x k,
// row-major). kernel spmv (k == 1) or spmm; anything else: std::invalid_argument. PETSc is
// initialized on first use (after MPI) and finalized at MPI_Finalize.
PetscRun run_petsc(const DistMatrix& a, KernelKind kernel, int k, std::span<const double> b_local,
                   int warmup, int iters);

}  // namespace netsparse::bench
