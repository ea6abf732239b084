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
# The combblas mode (bench/spgemm_combblas.cpp: CombBLAS's 2-D SUMMA Mult_AnXBn_Synch), when
# CombBLAS is found. An object library of its own so CombBLAS's usage requirements (its THREADED
# definition, OpenMP) reach only that translation unit, the one including its headers.
if(TARGET bench_spgemm AND NETSPARSE_HAVE_COMBBLAS)
  add_library(bench_spgemm_combblas OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/spgemm_combblas.cpp)
  target_link_libraries(bench_spgemm_combblas PRIVATE CombBLAS::CombBLAS netsparse_spgemm
    MPI::MPI_CXX netsparse_build_flags)
  target_compile_definitions(bench_spgemm_combblas PRIVATE NETSPARSE_BENCH_COMBBLAS=1)
  # Linking the object library adds its object and, link-only, CombBLAS's libraries.
  target_link_libraries(bench_spgemm PRIVATE bench_spgemm_combblas)
  target_compile_definitions(bench_spgemm PRIVATE NETSPARSE_BENCH_COMBBLAS=1)
endif()
