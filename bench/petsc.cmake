# netsparse_bench's petsc mode (bench/petsc_mode.cpp: PETSc's MatMult / MatMatMult beside the
# library's modes), when PETSc is found. Included after netsparse_bench.cmake (the fragments are
# included in name order).
if(TARGET netsparse_bench AND NETSPARSE_HAVE_PETSC)
  target_sources(netsparse_bench PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/petsc_mode.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/petsc_session.cpp)
  target_link_libraries(netsparse_bench PRIVATE PkgConfig::PETSC)
  target_compile_definitions(netsparse_bench PRIVATE NETSPARSE_BENCH_PETSC=1)
endif()
