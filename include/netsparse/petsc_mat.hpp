// MATNETSPARSE: a PETSc matrix type whose MatMult runs on NetSparse, so a KSP solve (or any
// PETSc code that calls MatMult) uses NetSparse's SpMV without changing a line but the type:
//
//   #include <netsparse/petsc_mat.hpp>
//   PetscInitialize(...);
//   netsparse::register_mat_netsparse();       // once, after PetscInitialize
//   MatCreate(comm, &A); MatSetSizes(...); MatSetFromOptions(A);  // run with -mat_type netsparse
//   ... MatSetValues, MatAssemblyBegin/End as for AIJ ...
//   KSPSetOperators(ksp, A, A); KSPSolve(ksp, b, x);   // every MatMult: netsparse::spmv
//
// The type is AIJ underneath (like PETSc's own aijcusparse / aijperm): `netsparse` is a root name
// that becomes `seqaijnetsparse` on one rank and `mpiaijnetsparse` on several; each is created as
// MATSEQAIJ / MATMPIAIJ (assembly, MatSetValues, MatGetDiagonal for Jacobi, MatMultTranspose,
// preallocation, viewers: all AIJ's), then MatMult is replaced through PETSc's public
// MatSetOperation. The first MatMult after a final assembly builds the NetSparse DistMatrix
// (from_petsc, this rank's rows, no communication but its checks) and an f64 SpMV DistKernel
// (collective: every MatMult is); a final assembly drops them, so changed values or a changed
// pattern are picked up by the next MatMult. Options (the Mat's prefix applies):
//   -mat_netsparse_mode NAME   the communication mode (default netsparse; any CommMode name,
//                              e.g. inspector-executor; see netsparse_bench --help)
// MatMatMult(A, B, ...) / MatProductCreate with MATPRODUCT_AB and a dense B (MATSEQDENSE /
// MATMPIDENSE) runs NetSparse's SpMM (an f64 DistKernel of K = B's columns, built by the first
// product after a final assembly and kept while K stays); C is dense. Every other product type
// and operand type goes to AIJ's own implementation.
// PETSc's public API is used, except the product's hooks (Mat_Product, ops->productsymbolic /
// productnumeric from petsc/private/matimpl.h), which only a type's implementation can set, as
// PETSc's own AIJ subtypes do. Header-only, like netsparse/petsc.hpp: NetSparse itself never
// links PETSc.
#pragma once

#include <petsc/private/matimpl.h>
#include <petscmat.h>

#include <exception>
#include <optional>
#include <string>

#include "netsparse/distributed.hpp"
#include "netsparse/petsc.hpp"

namespace netsparse {

inline constexpr const char* MATNETSPARSE = "netsparse";              // the root name
inline constexpr const char* MATSEQAIJNETSPARSE = "seqaijnetsparse";  // one rank
inline constexpr const char* MATMPIAIJNETSPARSE = "mpiaijnetsparse";  // several ranks

namespace petsc_mat_detail {

using AssemblyEnd = PetscErrorCode (*)(Mat, MatAssemblyType);
inline constexpr const char* state_key = "NetSparse_MatState";

// What a MATNETSPARSE Mat holds beside its AIJ data (a PetscContainer composed on the Mat:
// destroyed with it, inside the collective MatDestroy). The kernel is declared after the matrix
// it reads, so it goes first.
struct MatState {
  AssemblyEnd aij_assembly_end = nullptr;
  std::optional<DistMatrix> matrix;
  std::optional<DistKernel> kernel;       // MatMult's SpMV
  std::optional<DistKernel> spmm_kernel;  // MatMatMult's SpMM, of K = spmm_k
  PetscInt spmm_k = 0;
  unsigned long builds = 0;    // kernels built so far (a test watches the rebuild after assembly)
  unsigned long products = 0;  // MatMatMult numeric phases run on NetSparse
};

inline PetscErrorCode destroy_state(void* p) noexcept {
  delete static_cast<MatState*>(p);
  return 0;
}

// Turns an exception into PETSc's error chain (the callbacks are called from C).
inline PetscErrorCode report(Mat a, const char* function, const std::exception& e) noexcept {
  return ::PetscError(PetscObjectComm(reinterpret_cast<PetscObject>(a)), __LINE__, function,
                      __FILE__, PETSC_ERR_LIB, PETSC_ERROR_INITIAL, "NetSparse: %s", e.what());
}

inline MatState* find_state(Mat a) {
  PetscObject found = nullptr;
  petsc_detail::check(PetscObjectQuery(reinterpret_cast<PetscObject>(a), state_key, &found),
                      "PetscObjectQuery");
  if (found == nullptr) return nullptr;
  void* p = nullptr;
  petsc_detail::check(PetscContainerGetPointer(reinterpret_cast<PetscContainer>(found), &p),
                      "PetscContainerGetPointer");
  return static_cast<MatState*>(p);
}

inline MatState& state_of(Mat a) {
  MatState* s = find_state(a);
  if (s == nullptr) {
    throw std::invalid_argument("netsparse: the Mat is " +
                                petsc_detail::type_name(reinterpret_cast<PetscObject>(a)) +
                                ", not a MATNETSPARSE matrix");
  }
  return *s;
}

// The options of the kernel, from the PETSc options database (with the Mat's prefix).
inline DistOptions kernel_options(Mat a) {
  using petsc_detail::check;
  DistOptions o;
  o.scalar = ScalarType::f64;
  const char* prefix = nullptr;
  check(MatGetOptionsPrefix(a, &prefix), "MatGetOptionsPrefix");
  char mode[64] = {0};
  PetscBool set = PETSC_FALSE;
  check(PetscOptionsGetString(nullptr, prefix, "-mat_netsparse_mode", mode, sizeof mode, &set),
        "PetscOptionsGetString");
  if (set == PETSC_TRUE) o.mode = parse_comm_mode(mode);  // throws, naming the bad name
  return o;
}

// Drops the kernels and the matrix they read (the kernels first).
inline void drop(MatState& s) {
  s.spmm_kernel.reset();
  s.spmm_k = 0;
  s.kernel.reset();
  s.matrix.reset();
}

inline void build(Mat a, MatState& s) {
  drop(s);
  const DistOptions options = kernel_options(a);
  s.matrix.emplace(from_petsc(a, "petsc-" + std::string(MATNETSPARSE)));
  s.kernel.emplace(*s.matrix, KernelKind::spmv, 1, options);
  ++s.builds;
}

// The SpMM kernel for K columns (the matrix built first when a final assembly dropped it).
inline DistKernel& spmm_kernel(Mat a, MatState& s, PetscInt k) {
  if (!s.matrix) build(a, s);
  if (!s.spmm_kernel || s.spmm_k != k) {
    s.spmm_kernel.reset();
    s.spmm_kernel.emplace(*s.matrix, KernelKind::spmm, static_cast<int>(k), kernel_options(a));
    s.spmm_k = k;
  }
  return *s.spmm_kernel;
}

// ---- MatMatMult (MATPRODUCT_AB with a dense B) ----------------------------------------------

inline PetscErrorCode product_numeric(Mat c) noexcept {
  Mat a = c->product->A;
  try {
    Mat b = c->product->B;
    MatState& s = state_of(a);
    PetscInt k = 0;
    petsc_detail::check(MatGetSize(b, nullptr, &k), "MatGetSize");
    spmm(spmm_kernel(a, s, k), b, c);
    ++s.products;
    return 0;
  } catch (const std::exception& e) {
    return report(a, "MatProductNumeric_NetSparse", e);
  }
}

// C: A's rows x B's columns, dense, split as A's rows and B's columns.
inline PetscErrorCode product_symbolic(Mat c) noexcept {
  Mat a = c->product->A;
  try {
    using petsc_detail::check;
    Mat b = c->product->B;
    PetscInt m = 0, big_m = 0, n = 0, big_n = 0;
    check(MatGetLocalSize(a, &m, nullptr), "MatGetLocalSize");
    check(MatGetSize(a, &big_m, nullptr), "MatGetSize");
    check(MatGetLocalSize(b, nullptr, &n), "MatGetLocalSize");
    check(MatGetSize(b, nullptr, &big_n), "MatGetSize");
    check(MatSetSizes(c, m, n, big_m, big_n), "MatSetSizes");
    check(MatSetType(c, MATDENSE), "MatSetType");
    check(MatSetUp(c), "MatSetUp");
    c->ops->productnumeric = product_numeric;
    return 0;
  } catch (const std::exception& e) {
    return report(a, "MatProductSymbolic_NetSparse", e);
  }
}

// Composed on the Mat for (its type, a dense type): AB is NetSparse's; any other product goes to
// AIJ's own choice for the same operands (composed on the Mat by its AIJ creation).
inline PetscErrorCode product_set_from_options(Mat c) noexcept {
  Mat a = c->product->A;
  try {
    if (c->product->type == MATPRODUCT_AB) {
      c->ops->productsymbolic = product_symbolic;
      return 0;
    }
    const auto obj = reinterpret_cast<PetscObject>(a);
    const std::string base = petsc_detail::has_type(obj, MATSEQAIJNETSPARSE) ? "seqaij" : "mpiaij";
    const std::string key = "MatProductSetFromOptions_" + base + "_" +
                            petsc_detail::type_name(reinterpret_cast<PetscObject>(c->product->B)) +
                            "_C";
    PetscErrorCode (*aij)(Mat) = nullptr;
    petsc_detail::check(PetscObjectQueryFunction(obj, key.c_str(), &aij),
                        "PetscObjectQueryFunction");
    return aij != nullptr ? aij(c) : 0;  // none: PETSc reports the product as unsupported
  } catch (const std::exception& e) {
    return report(a, "MatProductSetFromOptions_NetSparse", e);
  }
}

inline PetscErrorCode mult(Mat a, Vec x, Vec y) noexcept {
  try {
    MatState& s = state_of(a);
    if (!s.kernel) build(a, s);
    spmv(*s.kernel, x, y);
    return 0;
  } catch (const std::exception& e) {
    return report(a, "MatMult_NetSparse", e);
  }
}

inline PetscErrorCode assembly_end(Mat a, MatAssemblyType type) noexcept {
  try {
    MatState& s = state_of(a);
    if (PetscErrorCode rc = s.aij_assembly_end(a, type); rc != 0) return rc;
    if (type == MAT_FINAL_ASSEMBLY)
      drop(s);  // values or pattern may have changed: rebuilt
                // on demand
    return 0;
  } catch (const std::exception& e) {
    return report(a, "MatAssemblyEnd_NetSparse", e);
  }
}

// Creates `a` as the AIJ type `base`, then puts NetSparse's operations and state on it.
inline PetscErrorCode create(Mat a, MatType base, const char* name) noexcept {
  try {
    using petsc_detail::check;
    const auto obj = reinterpret_cast<PetscObject>(a);
    // MatSetType returns at once when the Mat already carries the requested name (a Mat that
    // was `base` before becoming MATNETSPARSE would then be left without data): a placeholder
    // name first.
    check(PetscObjectChangeTypeName(obj, name), "PetscObjectChangeTypeName");
    check(MatSetType(a, base), "MatSetType");
    void (*op)(void) = nullptr;
    check(MatGetOperation(a, MATOP_ASSEMBLY_END, &op), "MatGetOperation");
    auto* s = new MatState;
    s->aij_assembly_end = reinterpret_cast<AssemblyEnd>(op);
    PetscContainer c = nullptr;
    if (PetscErrorCode rc = PetscContainerCreate(PetscObjectComm(obj), &c); rc != 0) {
      delete s;
      check(rc, "PetscContainerCreate");
    }
    check(PetscContainerSetPointer(c, s), "PetscContainerSetPointer");
    check(PetscContainerSetUserDestroy(c, destroy_state), "PetscContainerSetUserDestroy");
    check(PetscObjectCompose(obj, state_key, reinterpret_cast<PetscObject>(c)),
          "PetscObjectCompose");
    check(PetscContainerDestroy(&c), "PetscContainerDestroy");  // the Mat holds the reference
    check(MatSetOperation(a, MATOP_MULT, reinterpret_cast<void (*)(void)>(&mult)),
          "MatSetOperation");
    check(MatSetOperation(a, MATOP_ASSEMBLY_END, reinterpret_cast<void (*)(void)>(&assembly_end)),
          "MatSetOperation");
    // MatMatMult with a dense B: PETSc looks up MatProductSetFromOptions_<A type>_<B type>_C.
    for (const char* dense : {MATSEQDENSE, MATMPIDENSE}) {
      const std::string key = std::string("MatProductSetFromOptions_") + name + "_" + dense + "_C";
      check(PetscObjectComposeFunction(obj, key.c_str(), product_set_from_options),
            "PetscObjectComposeFunction");
    }
    check(PetscObjectChangeTypeName(obj, name), "PetscObjectChangeTypeName");
    return 0;
  } catch (const std::exception& e) {
    return report(a, "MatCreate_NetSparse", e);
  }
}

inline PetscErrorCode create_seq(Mat a) noexcept {
  return create(a, MATSEQAIJ, MATSEQAIJNETSPARSE);
}
inline PetscErrorCode create_mpi(Mat a) noexcept {
  return create(a, MATMPIAIJ, MATMPIAIJNETSPARSE);
}

}  // namespace petsc_mat_detail

// Registers MATNETSPARSE (and its seq / mpi names) with PETSc, so MatSetType(A, "netsparse") and
// -mat_type netsparse work. Call after PetscInitialize; calling it again does nothing.
inline void register_mat_netsparse() {
  using namespace petsc_mat_detail;
  static bool registered = false;
  if (registered) return;
  petsc_detail::check(MatRegister(MATSEQAIJNETSPARSE, create_seq), "MatRegister");
  petsc_detail::check(MatRegister(MATMPIAIJNETSPARSE, create_mpi), "MatRegister");
  // The root name must be listed too, for -mat_type (MatSetFromOptions offers MatList's names);
  // MatSetType maps it to the seq / mpi name before looking it up.
  petsc_detail::check(MatRegister(MATNETSPARSE, create_mpi), "MatRegister");
  petsc_detail::check(MatRegisterRootName(MATNETSPARSE, MATSEQAIJNETSPARSE, MATMPIAIJNETSPARSE),
                      "MatRegisterRootName");
  registered = true;
}

// Whether `a` is a MATNETSPARSE matrix (either name).
inline bool is_mat_netsparse(Mat a) {
  return petsc_mat_detail::find_state(a) != nullptr;
}

// The NetSparse SpMV kernel behind a MATNETSPARSE Mat's MatMult (its statistics, its mode), or
// nullptr before the first MatMult after a final assembly. Throws for another type.
inline DistKernel* mat_netsparse_kernel(Mat a) {
  auto& s = petsc_mat_detail::state_of(a);
  return s.kernel ? &*s.kernel : nullptr;
}

// MatMatMult numeric phases (C = A B, dense B) `a` ran on NetSparse so far.
inline unsigned long mat_netsparse_products(Mat a) {
  return petsc_mat_detail::state_of(a).products;
}

// Kernels built for `a` so far (one per final assembly that a MatMult followed).
inline unsigned long mat_netsparse_builds(Mat a) {
  return petsc_mat_detail::state_of(a).builds;
}

}  // namespace netsparse
