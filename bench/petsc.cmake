# netsparse_bench's petsc mode (bench/petsc_mode.cpp: PETSc's MatMult / MatMatMult beside the
# library's modes), when PETSc is found. Included after netsparse_bench.cmake (the fragments are
# included in name order).
netsparse_bench_petsc(netsparse_bench petsc_mode.cpp)
