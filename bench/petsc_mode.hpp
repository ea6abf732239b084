// netsparse_bench's `petsc` mode: what HPC codes run today for the same products, PETSc's
// MatMult (SpMV) and MatMatMult with an MPIDENSE B (SpMM), on a MATMPIAIJ holding the bench's
// matrix with the same row / column split (netsparse/petsc.hpp's to_petsc), in fp64 (PETSc's
// scalar). Compiled in only when PETSc is found (petsc_available.hpp's kPetscMode says whether).
#pragma once

#include <span>
#include <vector>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "petsc_available.hpp"

namespace netsparse::bench {

struct PetscRun {
  std::vector<double> times;  // per timed product, the slowest rank's
  double setup_seconds = 0;   // MatCreateMPIAIJWithArrays + operands + MatMatMult's symbolic
  std::vector<double> out;    // this rank's result rows (rows x k, row-major)
  // What this rank receives per product, counted like the inspector-executor mode (PETSc's
  // VecScatter moves each ghost row once): the off-diagonal block's columns (garray) x k x 8
  // bytes, in one message per owning rank.
  double ghost_bytes = 0;
  double ghost_messages = 0;
};

// Collective. b_local: this rank's rows of the column-indexed operand (a.cols(), rows x k,
// row-major). kernel spmv (k == 1) or spmm; anything else: std::invalid_argument. PETSc is
// initialized on first use (after MPI) and finalized at MPI_Finalize.
PetscRun run_petsc(const DistMatrix& a, KernelKind kernel, int k, std::span<const double> b_local,
                   int warmup, int iters);

}  // namespace netsparse::bench
