// PETSc in and out: a DistMatrix from a PETSc MATMPIAIJ (no global assembly, no copy through one
// rank), a PETSc MATMPIAIJ from a DistMatrix, and the kernels' operands and results in PETSc
// Vec / dense Mat. Header-only; include it only where PETSc is available (NetSparse itself does
// not depend on PETSc), after PetscInitialize:
//
//   #include <netsparse.hpp>
//   #include <netsparse/petsc.hpp>
//
//   Mat A = ...;                                           // MATMPIAIJ (or MATSEQAIJ), assembled
//   netsparse::DistMatrix a = netsparse::from_petsc(A);    // collective
//   netsparse::DistOptions opt;  opt.scalar = netsparse::ScalarType::f64;
//   netsparse::DistKernel mv(a, netsparse::KernelKind::spmv, 1, opt);
//   netsparse::spmv(mv, x, y);                             // y = A x, PETSc Vecs, in place
//
// Layout: the DistMatrix keeps PETSc's ownership ranges (rows: MatGetOwnershipRanges, columns:
// MatGetOwnershipRangesColumn), so a Vec made by MatCreateVecs(A, &x, &y) is exactly the
// operand block of this rank (x: a.cols(), y: a.rows()). PETSc holds real double scalars here
// (complex builds are refused at compile time); the kernels then run with ScalarType::f64.
// docs/petsc.md says when handing a Mat to NetSparse pays.
#pragma once

#include <petscmat.h>

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/distributed.hpp"
#include "netsparse/interop.hpp"

#if defined(PETSC_USE_COMPLEX)
#error "netsparse/petsc.hpp needs a real PETSc build (PetscScalar = double)"
#endif
static_assert(sizeof(PetscScalar) == sizeof(double), "netsparse/petsc.hpp: PetscScalar is double");

namespace netsparse {

// A failed PETSc call: what() names the call and carries PETSc's error text.
class PetscError : public std::runtime_error {
 public:
  PetscError(PetscErrorCode code, const std::string& what)
      : std::runtime_error(what), code_(code) {}
  [[nodiscard]] PetscErrorCode code() const noexcept { return code_; }

 private:
  PetscErrorCode code_;
};

namespace petsc_detail {

inline void check(PetscErrorCode code, const char* call) {
  if (code == 0) return;
  const char* text = nullptr;
  PetscErrorMessage(code, &text, nullptr);
  throw PetscError(code, std::string(call) + " failed: " + (text ? text : "PETSc error"));
}

inline bool has_type(PetscObject o, const char* type) {
  PetscBool same = PETSC_FALSE;
  check(PetscObjectTypeCompare(o, type, &same), "PetscObjectTypeCompare");
  return same == PETSC_TRUE;
}

// The type is `base` or a type named after it (PETSc names a subclass by its base's name).
inline bool is_aij_kind(PetscObject o, const char* base) {
  const char* t = nullptr;
  check(PetscObjectGetType(o, &t), "PetscObjectGetType");
  PetscBool begins = PETSC_FALSE;
  if (t != nullptr) check(PetscStrbeginswith(t, base, &begins), "PetscStrbeginswith");
  return begins == PETSC_TRUE;
}

inline std::string type_name(PetscObject o) {
  const char* t = nullptr;
  check(PetscObjectGetType(o, &t), "PetscObjectGetType");
  return t ? t : "(no type)";
}

// The CSR arrays of an assembled MATSEQAIJ, read in place (column indices local to it).
class SeqAijRows {
 public:
  explicit SeqAijRows(Mat m) : m_(m) {
    PetscBool done = PETSC_FALSE;
    check(MatGetRowIJ(m_, 0, PETSC_FALSE, PETSC_FALSE, &n_, &ia_, &ja_, &done), "MatGetRowIJ");
    if (done != PETSC_TRUE) throw PetscError(PETSC_ERR_SUP, "MatGetRowIJ: not supported");
    check(MatSeqAIJGetArrayRead(m_, &va_), "MatSeqAIJGetArrayRead");
  }
  ~SeqAijRows() {
    PetscBool done = PETSC_FALSE;
    MatSeqAIJRestoreArrayRead(m_, &va_);
    MatRestoreRowIJ(m_, 0, PETSC_FALSE, PETSC_FALSE, &n_, &ia_, &ja_, &done);
  }
  SeqAijRows(const SeqAijRows&) = delete;
  SeqAijRows& operator=(const SeqAijRows&) = delete;

  [[nodiscard]] PetscInt rows() const noexcept { return n_; }
  [[nodiscard]] PetscInt begin(PetscInt r) const noexcept { return ia_[r]; }
  [[nodiscard]] PetscInt end(PetscInt r) const noexcept { return ia_[r + 1]; }
  [[nodiscard]] PetscInt col(PetscInt i) const noexcept { return ja_[i]; }
  [[nodiscard]] double value(PetscInt i) const noexcept { return va_[i]; }

 private:
  Mat m_;
  PetscInt n_ = 0;
  const PetscInt* ia_ = nullptr;
  const PetscInt* ja_ = nullptr;
  const PetscScalar* va_ = nullptr;
};

inline PetscInt to_petsc_int(std::int64_t v, const char* what) {
  if (v < std::numeric_limits<PetscInt>::min() || v > std::numeric_limits<PetscInt>::max()) {
    throw std::overflow_error(std::string("netsparse/petsc.hpp: ") + what + " " +
                              std::to_string(v) + " does not fit PETSc's PetscInt (" +
                              std::to_string(sizeof(PetscInt) * 8) + "-bit build)");
  }
  return static_cast<PetscInt>(v);
}

// Rows x cols of a dense Mat's local block (column-major, leading dimension lda) <-> row-major.
inline void check_dense(Mat m, const char* what) {
  if (!has_type(reinterpret_cast<PetscObject>(m), MATMPIDENSE) &&
      !has_type(reinterpret_cast<PetscObject>(m), MATSEQDENSE)) {
    throw std::invalid_argument(std::string("netsparse::spmm: ") + what +
                                " must be a MATMPIDENSE / MATSEQDENSE Mat, got " +
                                type_name(reinterpret_cast<PetscObject>(m)));
  }
}

}  // namespace petsc_detail

// Collective over A's communicator. A: an assembled MATMPIAIJ (or MATSEQAIJ on one rank; other
// types: MatConvert(A, MATAIJ, ...) first). Each rank merges the rows it owns from A's diagonal
// and off-diagonal blocks (MatMPIAIJGetSeqAIJ: the off-diagonal block's columns through garray)
// into CSR with global columns: no assembly, no communication but from_local_csr's checks. The
// DistMatrix uses `comm` (default: A's own communicator, PetscObjectGetComm, which lives as
// long as a PETSc object on it does -- keep A alive, or pass a communicator of your own).
inline DistMatrix from_petsc(Mat a, std::string name = "petsc", MPI_Comm comm = MPI_COMM_NULL) {
  using namespace petsc_detail;
  const auto obj = reinterpret_cast<PetscObject>(a);
  // AIJ and the types built on it (mpiaijnetsparse, aijperm, ...: MatMPIAIJGetSeqAIJ accepts a
  // type whose name begins with mpiaij, as PETSc's own subclasses are named).
  const bool mpi = is_aij_kind(obj, MATMPIAIJ);
  if (!mpi && !is_aij_kind(obj, MATSEQAIJ)) {
    throw std::invalid_argument("netsparse::from_petsc: the Mat is " + type_name(obj) +
                                ", not MATMPIAIJ / MATSEQAIJ (MatConvert(A, MATAIJ, ...) first)");
  }
  if (comm == MPI_COMM_NULL) check(PetscObjectGetComm(obj, &comm), "PetscObjectGetComm");
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  PetscInt n_rows = 0, n_cols = 0;
  check(MatGetSize(a, &n_rows, &n_cols), "MatGetSize");
  const PetscInt *row_ranges = nullptr, *col_ranges = nullptr;
  check(MatGetOwnershipRanges(a, &row_ranges), "MatGetOwnershipRanges");
  check(MatGetOwnershipRangesColumn(a, &col_ranges), "MatGetOwnershipRangesColumn");
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const PetscInt col_begin = col_ranges[rank];

  Mat diag = a, off = nullptr;
  const PetscInt* garray = nullptr;
  if (mpi) check(MatMPIAIJGetSeqAIJ(a, &diag, &off, &garray), "MatMPIAIJGetSeqAIJ");
  std::vector<std::int64_t> row_ptr{0};
  std::vector<std::int64_t> col_idx;
  std::vector<double> values;
  {
    const SeqAijRows d(diag);
    row_ptr.reserve(static_cast<std::size_t>(d.rows()) + 1);
    if (off == nullptr) {
      for (PetscInt r = 0; r < d.rows(); ++r) {
        for (PetscInt i = d.begin(r); i < d.end(r); ++i) {
          col_idx.push_back(d.col(i));
          values.push_back(d.value(i));
        }
        row_ptr.push_back(static_cast<std::int64_t>(col_idx.size()));
      }
    } else {
      // The off-diagonal block's columns are sorted through garray (ascending), the diagonal
      // block's are [col_begin, col_end): a row is its off-diagonal entries left of the owned
      // columns, the diagonal block's, then the off-diagonal ones to the right.
      const SeqAijRows o(off);
      for (PetscInt r = 0; r < d.rows(); ++r) {
        PetscInt i = o.begin(r);
        for (; i < o.end(r) && garray[o.col(i)] < col_begin; ++i) {
          col_idx.push_back(garray[o.col(i)]);
          values.push_back(o.value(i));
        }
        for (PetscInt j = d.begin(r); j < d.end(r); ++j) {
          col_idx.push_back(col_begin + d.col(j));
          values.push_back(d.value(j));
        }
        for (; i < o.end(r); ++i) {
          col_idx.push_back(garray[o.col(i)]);
          values.push_back(o.value(i));
        }
        row_ptr.push_back(static_cast<std::int64_t>(col_idx.size()));
      }
    }
  }
  CsrImportOptions opt;
  // PETSc keeps the rows of an assembled AIJ sorted; sort_and_sum also takes a matrix whose
  // rows were left unsorted (it sorts them, and would sum a repeated column).
  opt.columns = ColumnOrder::sort_and_sum;
  opt.col_offsets.assign(col_ranges, col_ranges + nranks + 1);
  opt.name = std::move(name);
  const std::vector<gidx_t> row_offsets(row_ranges, row_ranges + nranks + 1);
  return from_local_csr(comm, row_offsets, n_cols, CsrArrays(row_ptr, col_idx, values), opt);
}

// Collective: a MATMPIAIJ with a's rows, split like a (rows: a.rows(), columns: a.cols()), on
// a.comm() (MatCreateMPIAIJWithArrays copies the rows). The caller destroys it (MatDestroy).
inline Mat to_petsc(const DistMatrix& a) {
  using namespace petsc_detail;
  const CsrMatrix& l = a.local();
  std::vector<PetscInt> ia(l.row_ptr.size()), ja(l.col_idx.size());
  for (std::size_t i = 0; i < ia.size(); ++i) ia[i] = to_petsc_int(l.row_ptr[i], "row offset");
  for (std::size_t i = 0; i < ja.size(); ++i) ja[i] = to_petsc_int(l.col_idx[i], "column");
  static_assert(std::is_same_v<PetscScalar, double>);
  Mat m = nullptr;
  check(MatCreateMPIAIJWithArrays(
            a.comm(), to_petsc_int(a.rows().size(a.rank()), "rows"),
            to_petsc_int(a.cols().size(a.rank()), "columns"), to_petsc_int(a.n_rows(), "rows"),
            to_petsc_int(a.n_cols(), "columns"), ia.data(), ja.data(), l.values.data(), &m),
        "MatCreateMPIAIJWithArrays");
  return m;
}

// y = A x on PETSc Vecs (x: this rank's a.cols() block, y: its a.rows() block, e.g. from
// MatCreateVecs), read and written in place. `kernel`: an SpMV in ScalarType::f64. Collective.
inline void spmv(DistKernel& kernel, Vec x, Vec y) {
  using namespace petsc_detail;
  PetscInt nx = 0, ny = 0;
  check(VecGetLocalSize(x, &nx), "VecGetLocalSize");
  check(VecGetLocalSize(y, &ny), "VecGetLocalSize");
  const PetscScalar* xa = nullptr;
  PetscScalar* ya = nullptr;
  check(VecGetArrayRead(x, &xa), "VecGetArrayRead");
  check(VecGetArrayWrite(y, &ya), "VecGetArrayWrite");
  try {
    kernel.spmv(std::span<const double>(xa, static_cast<std::size_t>(nx)),
                std::span<double>(ya, static_cast<std::size_t>(ny)));
  } catch (...) {
    VecRestoreArrayWrite(y, &ya);
    VecRestoreArrayRead(x, &xa);
    throw;
  }
  check(VecRestoreArrayWrite(y, &ya), "VecRestoreArrayWrite");
  check(VecRestoreArrayRead(x, &xa), "VecRestoreArrayRead");
}

// This rank's block of a dense Mat (MATMPIDENSE / MATSEQDENSE: column-major with its leading
// dimension) as row-major rows x K, the kernels' layout; and back.
inline std::vector<double> dense_rows(Mat m) {
  using namespace petsc_detail;
  check_dense(m, "the Mat");
  PetscInt rows = 0, k = 0, lda = 0;
  check(MatGetLocalSize(m, &rows, nullptr), "MatGetLocalSize");
  check(MatGetSize(m, nullptr, &k), "MatGetSize");
  check(MatDenseGetLDA(m, &lda), "MatDenseGetLDA");
  const PetscScalar* v = nullptr;
  check(MatDenseGetArrayRead(m, &v), "MatDenseGetArrayRead");
  std::vector<double> out(static_cast<std::size_t>(rows) * k);
  for (PetscInt j = 0; j < k; ++j) {
    for (PetscInt r = 0; r < rows; ++r) out[std::size_t(r) * k + j] = v[std::size_t(j) * lda + r];
  }
  check(MatDenseRestoreArrayRead(m, &v), "MatDenseRestoreArrayRead");
  return out;
}
inline void set_dense_rows(Mat m, std::span<const double> rows_k) {
  using namespace petsc_detail;
  check_dense(m, "the Mat");
  PetscInt rows = 0, k = 0, lda = 0;
  check(MatGetLocalSize(m, &rows, nullptr), "MatGetLocalSize");
  check(MatGetSize(m, nullptr, &k), "MatGetSize");
  if (rows_k.size() != static_cast<std::size_t>(rows) * k) {
    throw std::invalid_argument("netsparse::set_dense_rows: " + std::to_string(rows_k.size()) +
                                " values for a " + std::to_string(rows) + " x " +
                                std::to_string(k) + " block");
  }
  check(MatDenseGetLDA(m, &lda), "MatDenseGetLDA");
  PetscScalar* v = nullptr;
  check(MatDenseGetArrayWrite(m, &v), "MatDenseGetArrayWrite");
  for (PetscInt j = 0; j < k; ++j) {
    for (PetscInt r = 0; r < rows; ++r)
      v[std::size_t(j) * lda + r] = rows_k[std::size_t(r) * k + j];
  }
  check(MatDenseRestoreArrayWrite(m, &v), "MatDenseRestoreArrayWrite");
}

// C = A B with dense PETSc Mats (B: a.cols() rows x K, C: a.rows() rows x K, e.g. MatCreateDense
// with the local sizes of A's columns and rows). PETSc stores them column-major, the kernels
// row-major: each call copies B and C once through row-major buffers. `kernel`: an SpMM in
// ScalarType::f64 with k == K. Collective.
inline void spmm(DistKernel& kernel, Mat b, Mat c) {
  const std::vector<double> bt = dense_rows(b);
  petsc_detail::check_dense(c, "C");
  PetscInt rows = 0, k = 0;
  petsc_detail::check(MatGetLocalSize(c, &rows, nullptr), "MatGetLocalSize");
  petsc_detail::check(MatGetSize(c, nullptr, &k), "MatGetSize");
  std::vector<double> ct(static_cast<std::size_t>(rows) * k);
  kernel.spmm(bt, ct);
  set_dense_rows(c, ct);
}

}  // namespace netsparse
