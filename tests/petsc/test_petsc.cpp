// <netsparse/petsc.hpp> under mpirun: a DistMatrix from a PETSc MATMPIAIJ against PETSc's own
// rows, and NetSparse's SpMV / SpMM on PETSc Vecs and dense Mats against MatMult / MatMatMult
// (fp64, every element; the matrix and operands hold small integers, so both libraries' sums are
// exact and must agree bit for bit). Exits 1 on the first mismatch, naming it.
#include <mpi.h>
#include <petscmat.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/petsc.hpp"
#include "petsc_test_check.hpp"

namespace {

using petsc_test::check;
using petsc_test::expect;
using petsc_test::failures;
using petsc_test::rank;

// An n x m MATMPIAIJ with PETSc's own row / column split (PETSC_DECIDE) and a pattern that
// reaches every other rank's columns: a(i, j) = 1 + (i + 2j) % 4 where (i * 7 + j * 3) % 11 < 2,
// plus the diagonal band.
Mat make_matrix(PetscInt n, PetscInt m) {
  Mat a = nullptr;
  check(
      MatCreateAIJ(PETSC_COMM_WORLD, PETSC_DECIDE, PETSC_DECIDE, n, m, 8, nullptr, 8, nullptr, &a),
      "MatCreateAIJ");
  check(MatSetOption(a, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE), "MatSetOption");
  PetscInt begin = 0, end = 0;
  check(MatGetOwnershipRange(a, &begin, &end), "MatGetOwnershipRange");
  for (PetscInt i = begin; i < end; ++i) {
    for (PetscInt j = 0; j < m; ++j) {
      if ((i * 7 + j * 3) % 11 < 2 || j == i % m) {
        const PetscScalar v = 1 + (i + 2 * j) % 4;
        check(MatSetValue(a, i, j, v, INSERT_VALUES), "MatSetValue");
      }
    }
  }
  check(MatAssemblyBegin(a, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
  check(MatAssemblyEnd(a, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
  return a;
}

void test_rows_equal_petsc(Mat a, const netsparse::DistMatrix& d) {
  PetscInt begin = 0, end = 0;
  check(MatGetOwnershipRange(a, &begin, &end), "MatGetOwnershipRange");
  const netsparse::CsrMatrix& l = d.local();
  expect(l.row_begin == begin && l.n_rows == end - begin, "from_petsc: the row block");
  for (PetscInt i = begin; i < end; ++i) {
    PetscInt ncols = 0;
    const PetscInt* cols = nullptr;
    const PetscScalar* vals = nullptr;
    check(MatGetRow(a, i, &ncols, &cols, &vals), "MatGetRow");
    const std::int64_t r = i - begin;
    bool same = l.row_ptr[r + 1] - l.row_ptr[r] == ncols;
    for (PetscInt c = 0; same && c < ncols; ++c) {
      same = l.col_idx[l.row_ptr[r] + c] == cols[c] && l.values[l.row_ptr[r] + c] == vals[c];
    }
    check(MatRestoreRow(a, i, &ncols, &cols, &vals), "MatRestoreRow");
    expect(same, "from_petsc: row " + std::to_string(i) + " differs from MatGetRow");
  }
}

void test_spmv(Mat a, const netsparse::DistMatrix& d, netsparse::CommMode mode) {
  Vec x = nullptr, y = nullptr, y_petsc = nullptr;
  check(MatCreateVecs(a, &x, &y), "MatCreateVecs");
  check(VecDuplicate(y, &y_petsc), "VecDuplicate");
  PetscInt begin = 0, end = 0;
  check(VecGetOwnershipRange(x, &begin, &end), "VecGetOwnershipRange");
  for (PetscInt i = begin; i < end; ++i) {
    check(VecSetValue(x, i, (i % 7) - 3.0, INSERT_VALUES), "VecSetValue");
  }
  check(VecAssemblyBegin(x), "VecAssemblyBegin");
  check(VecAssemblyEnd(x), "VecAssemblyEnd");
  netsparse::DistOptions opt;
  opt.mode = mode;
  opt.scalar = netsparse::ScalarType::f64;
  netsparse::DistKernel mv(d, netsparse::KernelKind::spmv, 1, opt);
  netsparse::spmv(mv, x, y);
  check(MatMult(a, x, y_petsc), "MatMult");
  PetscBool equal = PETSC_FALSE;
  check(VecEqual(y, y_petsc, &equal), "VecEqual");
  expect(equal == PETSC_TRUE,
         std::string("spmv (") + netsparse::to_string(mode) + ") differs from MatMult");
  VecDestroy(&x);
  VecDestroy(&y);
  VecDestroy(&y_petsc);
}

void test_spmm(Mat a, const netsparse::DistMatrix& d, PetscInt k) {
  PetscInt m_local = 0, n_local = 0, m = 0, n = 0;
  check(MatGetLocalSize(a, &m_local, &n_local), "MatGetLocalSize");
  check(MatGetSize(a, &m, &n), "MatGetSize");
  Mat b = nullptr, c = nullptr, c_petsc = nullptr;
  check(MatCreateDense(PETSC_COMM_WORLD, n_local, PETSC_DECIDE, n, k, nullptr, &b),
        "MatCreateDense");
  check(MatCreateDense(PETSC_COMM_WORLD, m_local, PETSC_DECIDE, m, k, nullptr, &c),
        "MatCreateDense");
  const std::int64_t first = d.cols().begin(d.rank());
  std::vector<double> rows(static_cast<std::size_t>(n_local) * k);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<double>((first * k + static_cast<std::int64_t>(i)) % 9) - 4;
  }
  netsparse::set_dense_rows(b, rows);
  check(MatAssemblyBegin(b, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
  check(MatAssemblyEnd(b, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
  expect(netsparse::dense_rows(b) == rows, "dense_rows(set_dense_rows(rows)) != rows");
  netsparse::DistOptions opt;
  opt.scalar = netsparse::ScalarType::f64;
  netsparse::DistKernel mm(d, netsparse::KernelKind::spmm, static_cast<int>(k), opt);
  netsparse::spmm(mm, b, c);
  check(MatMatMult(a, b, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &c_petsc), "MatMatMult");
  expect(netsparse::dense_rows(c) == netsparse::dense_rows(c_petsc),
         "spmm differs from MatMatMult (K = " + std::to_string(k) + ")");
  MatDestroy(&b);
  MatDestroy(&c);
  MatDestroy(&c_petsc);
}

void run() {
  for (const auto& [n, m] : {std::pair<PetscInt, PetscInt>{61, 61}, {50, 37}}) {
    Mat a = make_matrix(n, m);
    const netsparse::DistMatrix d = netsparse::from_petsc(a, "petsc-test");
    expect(d.n_rows() == n && d.n_cols() == m, "from_petsc: the shape");
    test_rows_equal_petsc(a, d);
    for (auto mode : {netsparse::CommMode::netsparse, netsparse::CommMode::inspector_executor}) {
      test_spmv(a, d, mode);
    }
    test_spmm(a, d, 5);
    // And back: to_petsc(d) is A again (MatEqual compares every entry).
    Mat back = netsparse::to_petsc(d);
    PetscBool equal = PETSC_FALSE;
    check(MatEqual(a, back, &equal), "MatEqual");
    expect(equal == PETSC_TRUE, "to_petsc(from_petsc(A)) != A");
    MatDestroy(&back);
    MatDestroy(&a);
  }
  // A generated matrix through to_petsc: the same product both ways.
  const netsparse::DistMatrix g =
      netsparse::load_distributed_matrix(PETSC_COMM_WORLD, "gen:kron:7");
  Mat a = netsparse::to_petsc(g);
  test_spmv(a, g, netsparse::CommMode::netsparse);
  MatDestroy(&a);
  // A Mat that is not AIJ is refused with a message naming its type.
  Mat dense = nullptr;
  check(MatCreateDense(PETSC_COMM_WORLD, PETSC_DECIDE, PETSC_DECIDE, 4, 4, nullptr, &dense),
        "MatCreateDense");
  try {
    (void)netsparse::from_petsc(dense);
    expect(false, "from_petsc accepted a dense Mat");
  } catch (const std::invalid_argument& e) {
    expect(std::string(e.what()).find("dense") != std::string::npos,
           std::string("from_petsc's message does not name the type: ") + e.what());
  }
  MatDestroy(&dense);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (PetscInitialize(&argc, &argv, nullptr, nullptr) != 0) return 2;
  try {
    run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    ++failures;
  }
  PetscFinalize();
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("petsc interop: %s\n", failures == 0 ? "OK" : "FAILED");
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
