#include "petsc_mode.hpp"

#include <petscmat.h>

#include <stdexcept>
#include <string>

#include "netsparse/petsc.hpp"
#include "petsc_session.hpp"

namespace netsparse::bench {
namespace {

using petsc_detail::check;

// Owns PETSc objects for the length of one run.
struct Objects {
  Mat a = nullptr, b = nullptr, c = nullptr;
  Vec x = nullptr, y = nullptr;
  ~Objects() {
    MatDestroy(&c);
    MatDestroy(&b);
    MatDestroy(&a);
    VecDestroy(&y);
    VecDestroy(&x);
  }
};

}  // namespace

PetscRun run_petsc(const DistMatrix& a, KernelKind kernel, int k, std::span<const double> b_local,
                   int warmup, int iters) {
  if (kernel == KernelKind::sddmm || (kernel == KernelKind::spmv && k != 1)) {
    throw std::invalid_argument("petsc mode: SpMV (MatMult) and SpMM (MatMatMult) only");
  }
  ensure_petsc();
  const MPI_Comm comm = a.comm();
  const int rank = a.rank();
  PetscRun run;
  Objects o;
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  o.a = to_petsc(a);
  const auto product = [&](bool first) {
    if (kernel == KernelKind::spmv) {
      check(MatMult(o.a, o.x, o.y), "MatMult");
    } else {
      check(
          MatMatMult(o.a, o.b, first ? MAT_INITIAL_MATRIX : MAT_REUSE_MATRIX, PETSC_DEFAULT, &o.c),
          "MatMatMult");
    }
  };
  if (kernel == KernelKind::spmv) {
    // x wraps the bench's block (no copy); y is PETSc's.
    check(VecCreateMPIWithArray(comm, 1, static_cast<PetscInt>(b_local.size()), PETSC_DECIDE,
                                b_local.data(), &o.x),
          "VecCreateMPIWithArray");
    check(MatCreateVecs(o.a, nullptr, &o.y), "MatCreateVecs");
  } else {
    check(MatCreateDense(comm, static_cast<PetscInt>(a.cols().size(rank)), PETSC_DECIDE,
                         static_cast<PetscInt>(a.n_cols()), k, nullptr, &o.b),
          "MatCreateDense");
    set_dense_rows(o.b, b_local);
    check(MatAssemblyBegin(o.b, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
    check(MatAssemblyEnd(o.b, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
    product(true);  // the symbolic phase and C: setup, as the library modes' plans are
  }
  run.setup_seconds = max_over_ranks(comm, MPI_Wtime() - t0);
  {
    Mat diag = nullptr, off = nullptr;
    const PetscInt* garray = nullptr;
    check(MatMPIAIJGetSeqAIJ(o.a, &diag, &off, &garray), "MatMPIAIJGetSeqAIJ");
    PetscInt ghosts = 0;
    check(MatGetSize(off, nullptr, &ghosts), "MatGetSize");
    run.ghost_bytes = static_cast<double>(ghosts) * k * sizeof(double);
    int last_owner = -1;
    for (PetscInt g = 0; g < ghosts; ++g) {  // garray is sorted: owners come in runs
      const int owner = a.cols().owner(garray[g]);
      if (owner != last_owner) ++run.ghost_messages;
      last_owner = owner;
    }
  }
  for (int i = 0; i < warmup + iters; ++i) {
    MPI_Barrier(comm);
    const double s = MPI_Wtime();
    product(false);
    const double t = max_over_ranks(comm, MPI_Wtime() - s);
    if (i >= warmup) run.times.push_back(t);
  }
  if (kernel == KernelKind::spmv) {
    const PetscScalar* y = nullptr;
    PetscInt n = 0;
    check(VecGetLocalSize(o.y, &n), "VecGetLocalSize");
    check(VecGetArrayRead(o.y, &y), "VecGetArrayRead");
    run.out.assign(y, y + n);
    check(VecRestoreArrayRead(o.y, &y), "VecRestoreArrayRead");
  } else {
    run.out = dense_rows(o.c);
  }
  return run;
}

}  // namespace netsparse::bench
