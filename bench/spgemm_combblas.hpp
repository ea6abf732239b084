// bench_spgemm's `combblas` mode: CombBLAS 1.6.2's 2-D SUMMA SpGEMM (Mult_AnXBn_Synch with the
// PlusTimes semiring, fp64) on the bench's matrix, the 2-D peer of the library's 1-D modes.
// CombBLAS lays a matrix out on a sqrt(p) x sqrt(p) process grid, so the mode runs only when the
// number of ranks is a perfect square (combblas_skip_reason says why not). Compiled in only when
// CombBLAS is found (bench/spgemm.cmake defines NETSPARSE_BENCH_COMBBLAS); the CombBLAS headers
// stay in spgemm_combblas.cpp (they are slow to compile).
#pragma once

#include <cstdint>
#include <string>

#include "netsparse/csr.hpp"
#include "netsparse/dist_matrix.hpp"

namespace netsparse::bench {

#if defined(NETSPARSE_BENCH_COMBBLAS)
inline constexpr bool kCombblasMode = true;
#else
inline constexpr bool kCombblasMode = false;
#endif

// Empty when CombBLAS can run on `nranks` ranks (a perfect square), else a one-line reason.
inline std::string combblas_skip_reason(int nranks) {
  int side = 0;
  while ((side + 1) * (side + 1) <= nranks) ++side;
  if (side * side == nranks) return {};
  return "np " + std::to_string(nranks) +
         " is not a perfect square (CombBLAS distributes on a sqrt(p) x sqrt(p) grid)";
}

struct CombblasSpgemmRun {
  // A's triples (the bench's 1-D rows) redistributed to CombBLAS's 2-D blocks (SpParMat built
  // with SparseCommon) plus the copy B of A (CombBLAS's multiply needs unaliased operands); the
  // slowest rank.
  double setup_seconds = 0;
  // Per Mult_AnXBn_Synch, the slowest rank's mean: the whole SUMMA every time (row / column
  // broadcasts of A's and B's blocks, the local SpGEMM, the merge); nothing is reused across
  // products.
  double product_seconds = 0;
  std::int64_t c_nnz = 0;
  // This rank's rows of C (A's row split), gathered from C's 2-D blocks of the last product.
  CsrMatrix c_rows;
};

// C = A * A with CombBLAS: one untimed warm-up product, then `iters` timed ones. Collective over
// a.comm(); requires combblas_skip_reason(a.nranks()) to be empty (throws std::invalid_argument
// otherwise).
CombblasSpgemmRun run_combblas_spgemm(const DistMatrix& a, int iters);

}  // namespace netsparse::bench
