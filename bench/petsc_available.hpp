// Whether this benchmark was built with its `petsc` mode (bench/CMakeLists.txt's
// netsparse_bench_petsc defines NETSPARSE_BENCH_PETSC when PETSc is found). The benchmarks name
// their PETSc runners only in `if constexpr (kPetscMode)` branches (not odr-used, no definition
// needed without PETSc).
#pragma once

namespace netsparse::bench {

#if defined(NETSPARSE_BENCH_PETSC)
inline constexpr bool kPetscMode = true;
#else
inline constexpr bool kPetscMode = false;
#endif

}  // namespace netsparse::bench
