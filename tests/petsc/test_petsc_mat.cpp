// MATNETSPARSE (<netsparse/petsc_mat.hpp>) under mpirun against PETSc's own MATAIJ:
//   - `-mat_type netsparse` through MatSetFromOptions gives seqaijnetsparse / mpiaijnetsparse;
//   - MatMult equals AIJ's bit for bit on a matrix of small integers (exact sums);
//   - a KSP CG + Jacobi solve on the 2-D 5-point Laplacian converges in the same number of
//     iterations as on AIJ, to the same solution (relative 1e-10), and prints the time per solve
//     of both (a figure, never asserted: speed is measured in benchmarks);
//   - MatMatMult with a dense B equals AIJ's bit for bit and runs on NetSparse (K 3 and 8, the
//     second product reusing C); A^T B goes to AIJ's own product;
//   - a final assembly with new values rebuilds the kernel at the next MatMult (the new values
//     are used), `-mat_netsparse_mode inspector-executor` is honoured, a bad mode name is an
//     error of MatMult on every rank naming the name, a plain AIJ Mat is refused by the accessors.
// Exits 1 on the first failed check, naming it.
//   petsc_mat [GRID_N [SOLVES]]   (default 40 x 40 grid, 2 solves per type)
#include <mpi.h>
#include <petscksp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "netsparse/petsc_mat.hpp"
#include "petsc_test_check.hpp"

namespace {

using petsc_test::check;
using petsc_test::expect;
using petsc_test::failures;
using petsc_test::rank;

// The 2-D 5-point Laplacian on an n x n grid (4 on the diagonal, -1 to each neighbour) times
// `diag_scale` on the diagonal, as `type` (nullptr: from the options database).
Mat laplacian(PetscInt n, const char* type, PetscScalar diag_scale = 1) {
  Mat a = nullptr;
  check(MatCreate(PETSC_COMM_WORLD, &a), "MatCreate");
  check(MatSetSizes(a, PETSC_DECIDE, PETSC_DECIDE, n * n, n * n), "MatSetSizes");
  if (type != nullptr) {
    check(MatSetType(a, type), "MatSetType");
  } else {
    check(MatSetFromOptions(a), "MatSetFromOptions");
  }
  check(MatSeqAIJSetPreallocation(a, 5, nullptr), "MatSeqAIJSetPreallocation");
  check(MatMPIAIJSetPreallocation(a, 5, nullptr, 2, nullptr), "MatMPIAIJSetPreallocation");
  PetscInt begin = 0, end = 0;
  check(MatGetOwnershipRange(a, &begin, &end), "MatGetOwnershipRange");
  for (PetscInt row = begin; row < end; ++row) {
    const PetscInt i = row / n, j = row % n;
    check(MatSetValue(a, row, row, 4 * diag_scale, INSERT_VALUES), "MatSetValue");
    if (i > 0) check(MatSetValue(a, row, row - n, -1, INSERT_VALUES), "MatSetValue");
    if (i < n - 1) check(MatSetValue(a, row, row + n, -1, INSERT_VALUES), "MatSetValue");
    if (j > 0) check(MatSetValue(a, row, row - 1, -1, INSERT_VALUES), "MatSetValue");
    if (j < n - 1) check(MatSetValue(a, row, row + 1, -1, INSERT_VALUES), "MatSetValue");
  }
  check(MatAssemblyBegin(a, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
  check(MatAssemblyEnd(a, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
  return a;
}

// A PETSc error handler that keeps the messages instead of printing them.
PetscErrorCode record_error(MPI_Comm, int, const char*, const char*, PetscErrorCode n,
                            PetscErrorType, const char* message, void* ctx) {
  if (message != nullptr) *static_cast<std::string*>(ctx) += std::string(message) + "\n";
  return n;
}

std::string type_of(Mat a) {
  return netsparse::petsc_detail::type_name((PetscObject)a);
}

// y_a = A x and y_n = N x with x(i) = 1 + i % 7: equal bit for bit (small integers).
void expect_same_mult(Mat aij, Mat ns, const std::string& what) {
  Vec x = nullptr, ya = nullptr, yn = nullptr;
  check(MatCreateVecs(aij, &x, &ya), "MatCreateVecs");
  check(VecDuplicate(ya, &yn), "VecDuplicate");
  PetscInt begin = 0, end = 0;
  check(VecGetOwnershipRange(x, &begin, &end), "VecGetOwnershipRange");
  for (PetscInt i = begin; i < end; ++i) check(VecSetValue(x, i, 1 + i % 7, INSERT_VALUES), "Set");
  check(VecAssemblyBegin(x), "VecAssemblyBegin");
  check(VecAssemblyEnd(x), "VecAssemblyEnd");
  check(MatMult(aij, x, ya), "MatMult(AIJ)");
  check(MatMult(ns, x, yn), "MatMult(netsparse)");
  const PetscScalar *a = nullptr, *b = nullptr;
  PetscInt local = 0;
  check(VecGetLocalSize(ya, &local), "VecGetLocalSize");
  check(VecGetArrayRead(ya, &a), "VecGetArrayRead");
  check(VecGetArrayRead(yn, &b), "VecGetArrayRead");
  PetscInt differ = 0;
  for (PetscInt i = 0; i < local; ++i) differ += a[i] != b[i];
  check(VecRestoreArrayRead(yn, &b), "VecRestoreArrayRead");
  check(VecRestoreArrayRead(ya, &a), "VecRestoreArrayRead");
  expect(differ == 0,
         what + ": " + std::to_string(differ) + " elements of MatMult differ from AIJ");
  VecDestroy(&x);
  VecDestroy(&ya);
  VecDestroy(&yn);
}

// C_a = A B and C_n = N B through MatMatMult, B dense (A's columns x k, B(i, j) = 1 + (i + 3 j) %
// 5): equal bit for bit; N's second product reuses C (MAT_REUSE_MATRIX) with B changed in
// place. Both products of N run on NetSparse (mat_netsparse_products), A^T B on N goes to
// AIJ's own product and equals AIJ's.
void expect_same_matmatmult(Mat aij, Mat ns, PetscInt k, const std::string& what) {
  PetscInt rows_local = 0, cols_local = 0, big_rows = 0, big_cols = 0;
  check(MatGetLocalSize(aij, &rows_local, &cols_local), "MatGetLocalSize");
  check(MatGetSize(aij, &big_rows, &big_cols), "MatGetSize");
  Mat b = nullptr;
  check(MatCreateDense(PETSC_COMM_WORLD, cols_local, PETSC_DECIDE, big_cols, k, nullptr, &b),
        "MatCreateDense");
  const auto fill = [&](int shift) {
    PetscInt begin = 0, end = 0;
    check(MatGetOwnershipRange(b, &begin, &end), "MatGetOwnershipRange");
    for (PetscInt i = begin; i < end; ++i) {
      for (PetscInt j = 0; j < k; ++j) {
        check(MatSetValue(b, i, j, 1 + (i + 3 * j + shift) % 5, INSERT_VALUES), "MatSetValue");
      }
    }
    check(MatAssemblyBegin(b, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
    check(MatAssemblyEnd(b, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
  };
  const auto differing = [&](Mat x, Mat y) {
    Mat d = nullptr;
    check(MatDuplicate(x, MAT_COPY_VALUES, &d), "MatDuplicate");
    check(MatAXPY(d, -1.0, y, SAME_NONZERO_PATTERN), "MatAXPY");
    PetscReal norm = 0;
    check(MatNorm(d, NORM_FROBENIUS, &norm), "MatNorm");
    MatDestroy(&d);
    return norm;
  };
  fill(0);
  const unsigned long before = netsparse::mat_netsparse_products(ns);
  Mat ca = nullptr, cn = nullptr;
  check(MatMatMult(aij, b, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &ca), "MatMatMult(AIJ)");
  check(MatMatMult(ns, b, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &cn), "MatMatMult(netsparse)");
  PetscInt cm = 0, ck = 0;
  check(MatGetSize(cn, &cm, &ck), "MatGetSize");
  expect(cm == big_rows && ck == k,
         what + ": C is " + std::to_string(cm) + " x " + std::to_string(ck));
  expect(differing(ca, cn) == 0, what + ": MatMatMult differs from AIJ's");
  fill(2);  // new values of B, the same C
  check(MatMatMult(aij, b, MAT_REUSE_MATRIX, PETSC_DEFAULT, &ca), "MatMatMult(AIJ, reuse)");
  check(MatMatMult(ns, b, MAT_REUSE_MATRIX, PETSC_DEFAULT, &cn), "MatMatMult(netsparse, reuse)");
  expect(differing(ca, cn) == 0, what + ": MatMatMult with MAT_REUSE_MATRIX differs from AIJ's");
  expect(netsparse::mat_netsparse_products(ns) == before + 2,
         what + ": both products ran on NetSparse (" +
             std::to_string(netsparse::mat_netsparse_products(ns) - before) + ")");
  // A^T B is not NetSparse's: AIJ's own product, the same numbers.
  Mat ta = nullptr, tn = nullptr;
  check(MatTransposeMatMult(aij, b, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &ta), "MatTransposeMatMult");
  check(MatTransposeMatMult(ns, b, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &tn), "MatTransposeMatMult");
  expect(differing(ta, tn) == 0, what + ": A^T B (AIJ's product) differs");
  expect(netsparse::mat_netsparse_products(ns) == before + 2, what + ": A^T B is not NetSparse's");
  MatDestroy(&ta);
  MatDestroy(&tn);
  MatDestroy(&ca);
  MatDestroy(&cn);
  MatDestroy(&b);
}

struct Solve {
  PetscInt iterations = 0;
  double seconds = 0;  // per solve, the slowest rank's
  Vec x = nullptr;
};

// `solves` CG + Jacobi solves of A x = b (b = A * ones), rtol 1e-10; the last solution kept.
Solve solve(Mat a, int solves) {
  KSP ksp = nullptr;
  PC pc = nullptr;
  Vec b = nullptr, ones = nullptr;
  Solve s;
  check(MatCreateVecs(a, &ones, &b), "MatCreateVecs");
  check(VecDuplicate(ones, &s.x), "VecDuplicate");
  check(VecSet(ones, 1.0), "VecSet");
  check(MatMult(a, ones, b), "MatMult");
  check(KSPCreate(PETSC_COMM_WORLD, &ksp), "KSPCreate");
  check(KSPSetOperators(ksp, a, a), "KSPSetOperators");
  check(KSPSetType(ksp, KSPCG), "KSPSetType");
  check(KSPGetPC(ksp, &pc), "KSPGetPC");
  check(PCSetType(pc, PCJACOBI), "PCSetType");
  check(KSPSetTolerances(ksp, 1e-10, PETSC_DEFAULT, PETSC_DEFAULT, 10000), "KSPSetTolerances");
  double best = 1e300;
  for (int r = 0; r < solves; ++r) {
    check(VecSet(s.x, 0.0), "VecSet");
    MPI_Barrier(PETSC_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    check(KSPSolve(ksp, b, s.x), "KSPSolve");
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    best = std::min(best, t);
    KSPConvergedReason reason;
    check(KSPGetConvergedReason(ksp, &reason), "KSPGetConvergedReason");
    expect(reason > 0,
           type_of(a) + ": CG did not converge (reason " + std::to_string(reason) + ")");
  }
  check(KSPGetIterationNumber(ksp, &s.iterations), "KSPGetIterationNumber");
  s.seconds = best;
  KSPDestroy(&ksp);
  VecDestroy(&b);
  VecDestroy(&ones);
  return s;
}

void run(PetscInt n, int solves) {
  int nranks = 1;
  MPI_Comm_size(PETSC_COMM_WORLD, &nranks);
  netsparse::register_mat_netsparse();
  netsparse::register_mat_netsparse();  // a second call does nothing

  // -mat_type netsparse through the options database, as a user's command line would.
  check(PetscOptionsSetValue(nullptr, "-mat_type", "netsparse"), "PetscOptionsSetValue");
  Mat ns = laplacian(n, nullptr);
  check(PetscOptionsClearValue(nullptr, "-mat_type"), "PetscOptionsClearValue");
  const std::string want =
      nranks == 1 ? netsparse::MATSEQAIJNETSPARSE : netsparse::MATMPIAIJNETSPARSE;
  expect(type_of(ns) == want, "-mat_type netsparse gave " + type_of(ns) + ", not " + want);
  expect(netsparse::is_mat_netsparse(ns), "is_mat_netsparse(the netsparse Mat)");
  expect(netsparse::mat_netsparse_kernel(ns) == nullptr, "a kernel before the first MatMult");

  Mat aij = laplacian(n, MATAIJ);
  expect(!netsparse::is_mat_netsparse(aij), "is_mat_netsparse(AIJ) is false");
  bool refused = false;
  try {
    (void)netsparse::mat_netsparse_kernel(aij);
  } catch (const std::invalid_argument& e) {
    refused = std::string(e.what()).find("not a MATNETSPARSE") != std::string::npos;
  }
  expect(refused, "mat_netsparse_kernel(AIJ) throws invalid_argument naming the type");

  expect_same_mult(aij, ns, "first assembly");
  expect(netsparse::mat_netsparse_builds(ns) == 1, "one kernel built by the first MatMult");
  const netsparse::DistKernel* k = netsparse::mat_netsparse_kernel(ns);
  // The default, netsparse, resolves to the node-wide or the per-rank engine by the layout.
  const netsparse::CommMode resolved = netsparse::resolve_comm_mode(PETSC_COMM_WORLD, {});
  expect(k != nullptr && k->mode() == resolved,
         std::string("the default mode is netsparse, resolved as ") +
             netsparse::to_string(resolved) + " (the kernel runs " +
             (k ? netsparse::to_string(k->mode()) : "none") + ")");
  expect_same_mult(aij, ns, "second MatMult");
  expect(netsparse::mat_netsparse_builds(ns) == 1, "no rebuild without an assembly");
  expect_same_matmatmult(aij, ns, 3, "MatMatMult, K 3");
  expect_same_matmatmult(aij, ns, 8, "MatMatMult, K 8");

  // The solve: same iterations, same solution.
  Solve sa = solve(aij, solves);
  Solve sn = solve(ns, solves);
  expect(sa.iterations == sn.iterations, "CG iterations: AIJ " + std::to_string(sa.iterations) +
                                             ", netsparse " + std::to_string(sn.iterations));
  check(VecAXPY(sn.x, -1.0, sa.x), "VecAXPY");
  PetscReal diff = 0, norm = 0;
  check(VecNorm(sn.x, NORM_2, &diff), "VecNorm");
  check(VecNorm(sa.x, NORM_2, &norm), "VecNorm");
  expect(diff <= 1e-10 * norm,
         "solutions differ: |x_ns - x_aij| / |x_aij| = " + std::to_string(diff / norm));
  if (rank == 0) {
    std::printf(
        "KSP CG + Jacobi, 2-D Laplacian %lld x %lld (%lld rows), %d ranks: AIJ %lld "
        "iterations %.3f ms per solve, netsparse %lld iterations %.3f ms per solve "
        "(%.2fx; best of %d)\n",
        (long long)n, (long long)n, (long long)(n * n), nranks, (long long)sa.iterations,
        sa.seconds * 1e3, (long long)sn.iterations, sn.seconds * 1e3, sa.seconds / sn.seconds,
        solves);
  }
  VecDestroy(&sa.x);
  VecDestroy(&sn.x);

  // New values, a final assembly: the next MatMult builds a new kernel and uses them.
  MatDestroy(&aij);
  aij = laplacian(n, MATAIJ, 2);
  PetscInt begin = 0, end = 0;
  check(MatGetOwnershipRange(ns, &begin, &end), "MatGetOwnershipRange");
  for (PetscInt row = begin; row < end; ++row)
    check(MatSetValue(ns, row, row, 8, INSERT_VALUES), "MatSetValue");
  check(MatAssemblyBegin(ns, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
  check(MatAssemblyEnd(ns, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
  expect(netsparse::mat_netsparse_kernel(ns) == nullptr, "the kernel dropped by the assembly");
  const unsigned long before = netsparse::mat_netsparse_builds(ns);
  expect_same_mult(aij, ns, "after new values");
  expect(netsparse::mat_netsparse_builds(ns) == before + 1, "rebuilt after the assembly");
  MatDestroy(&ns);

  // The mode from the options database, with the Mat's prefix.
  check(PetscOptionsSetValue(nullptr, "-a_mat_netsparse_mode", "inspector-executor"), "Set");
  {
    Mat m = laplacian(n, netsparse::MATNETSPARSE, 2);
    check(MatSetOptionsPrefix(m, "a_"), "MatSetOptionsPrefix");
    expect_same_mult(aij, m, "inspector-executor mode");
    k = netsparse::mat_netsparse_kernel(m);
    expect(k != nullptr && k->mode() == netsparse::CommMode::inspector_executor,
           "-a_mat_netsparse_mode inspector-executor honoured");
    MatDestroy(&m);
  }
  // A bad mode name: MatMult fails on every rank, naming it; nothing is left half-built.
  check(PetscOptionsSetValue(nullptr, "-b_mat_netsparse_mode", "warp-drive"), "Set");
  {
    Mat m = laplacian(n, netsparse::MATNETSPARSE);
    check(MatSetOptionsPrefix(m, "b_"), "MatSetOptionsPrefix");
    Vec x = nullptr, y = nullptr;
    check(MatCreateVecs(m, &x, &y), "MatCreateVecs");
    check(VecSet(x, 1.0), "VecSet");
    std::string messages;
    check(PetscPushErrorHandler(record_error, &messages), "PetscPushErrorHandler");
    const PetscErrorCode rc = MatMult(m, x, y);
    check(PetscPopErrorHandler(), "PetscPopErrorHandler");
    expect(rc != 0, "MatMult with -mat_netsparse_mode warp-drive failed");
    expect(messages.find("warp-drive") != std::string::npos,
           "the error names the bad mode (PETSc's messages: " + messages + ")");
    expect(netsparse::mat_netsparse_kernel(m) == nullptr, "no kernel after the failed build");
    VecDestroy(&x);
    VecDestroy(&y);
    MatDestroy(&m);
  }
  MatDestroy(&aij);
}

}  // namespace

int main(int argc, char** argv) {
  PetscInitialize(&argc, &argv, nullptr, nullptr);
  MPI_Comm_rank(PETSC_COMM_WORLD, &rank);
  const PetscInt n = argc > 1 ? std::atoll(argv[1]) : 40;
  const int solves = argc > 2 ? std::atoi(argv[2]) : 2;
  try {
    run(n, solves);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, e.what());
    ++failures;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, PETSC_COMM_WORLD);
  if (rank == 0) std::printf("%s: %d failed checks\n", all ? "FAILED" : "PASSED", all);
  PetscFinalize();
  return all ? 1 : 0;
}
