// netsparse_bench's `tpetra` mode: the second real inspector-executor baseline beside PETSc's,
// Trilinos Tpetra's CrsMatrix::apply (its Import gathers the ghost entries of X, then the local
// product), on a Tpetra::CrsMatrix<double> holding the bench's row block with the same row /
// column split, X and Y Tpetra::MultiVectors of K columns (a Tpetra::Vector for SpMV). Compiled
// in only when Tpetra is found (CMakeLists.txt, bench/tpetra.cmake define NETSPARSE_BENCH_TPETRA);
// Tpetra's headers are included by bench/tpetra_mode.cpp alone (they cost compile time).
#pragma once

#include <span>

#include "baseline_run.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse::bench {

// Whether this benchmark was built with its tpetra mode. run_tpetra is named only in
// `if constexpr (kTpetraMode)` branches (not odr-used, no definition needed without Tpetra).
#if defined(NETSPARSE_BENCH_TPETRA)
inline constexpr bool kTpetraMode = true;
#else
inline constexpr bool kTpetraMode = false;
#endif

// Collective. b_local: this rank's rows of the column-indexed operand (a.cols(), rows x k,
// row-major). kernel spmv (k == 1) or spmm; anything else: std::invalid_argument. Tpetra (and
// Kokkos) are initialized on first use, after MPI, and finalized at MPI_Finalize. setup_seconds:
// the maps, the matrix (insertGlobalValues), fillComplete (column map, Import) and X, Y. Ghosts:
// the Import's remote entries, one message per process it receives from.
BaselineRun run_tpetra(const DistMatrix& a, KernelKind kernel, int k,
                       std::span<const double> b_local, int warmup, int iters);

}  // namespace netsparse::bench
