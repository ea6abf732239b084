# SpGEMM: C = A * A with the RIG engine (netsparse) against su and inspector-executor:
#   mpirun -np P bench_spgemm [--matrix gen:kron:14,gen:stencil:...] [--rounds 3] [--iters 5]
# Exits 1 when a mode's C differs from the sequential reference, so its smoke test
# (tests/bench/CMakeLists.txt) checks correctness at np 2 on small matrices.
if(TARGET netsparse_spgemm)
  add_executable(bench_spgemm ${CMAKE_CURRENT_SOURCE_DIR}/bench_spgemm.cpp)
  target_link_libraries(bench_spgemm PRIVATE netsparse_spgemm netsparse_bench_common
    MPI::MPI_CXX netsparse_build_flags)
endif()
# The petsc mode (bench/spgemm_petsc.cpp: PETSc's MatMatMult beside the library's modes), when
# PETSc is found.
netsparse_bench_petsc(bench_spgemm spgemm_petsc.cpp)
