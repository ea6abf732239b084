# bench_transpose: MeNDA merge transpose vs scanTrans, mergeTrans and Eigen's transpose, and the
# outer-product vs row-wise SpMV, with a STREAM triad from the same run. Exits 1 when a result
# differs, so the smoke test below checks correctness on a small generated matrix.
if(TARGET netsparse_transpose AND TARGET netsparse_kernels AND TARGET netsparse_sparse)
  add_executable(bench_transpose ${CMAKE_CURRENT_SOURCE_DIR}/bench_transpose.cpp)
  target_link_libraries(bench_transpose PRIVATE netsparse_transpose netsparse_kernels
    netsparse_bench_common
    netsparse_config netsparse_internal
    netsparse_sparse Eigen3::Eigen OpenMP::OpenMP_CXX netsparse_build_flags)
  target_compile_options(bench_transpose PRIVATE -O3)
  if(NETSPARSE_BUILD_TESTS)
    add_test(NAME bench.bench_transpose.smoke
             COMMAND bench_transpose --matrices gen:kron:12 --rounds 2 --leaves 64,3)
    set_tests_properties(bench.bench_transpose.smoke PROPERTIES
      ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive" TIMEOUT 120 PROCESSORS 2)
  endif()
else()
  message(STATUS "bench_transpose not built: needs netsparse_transpose, netsparse_kernels, netsparse_sparse")
endif()
