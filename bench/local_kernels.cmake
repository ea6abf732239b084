# bench_local_kernels: tiled SpMM / SDDMM / SpMV vs Eigen and a STREAM triad (a plain program
# printing a table, not a test). Needs the sparse-core readers and generators.
if(TARGET netsparse_kernels AND TARGET netsparse_sparse)
  add_executable(bench_local_kernels ${CMAKE_CURRENT_SOURCE_DIR}/bench_local_kernels.cpp)
  target_link_libraries(bench_local_kernels PRIVATE netsparse_kernels netsparse_sparse
    netsparse_bench_common
    netsparse_config netsparse_internal
    Eigen3::Eigen OpenMP::OpenMP_CXX netsparse_build_flags)
  target_compile_options(bench_local_kernels PRIVATE -O3)
  target_compile_definitions(bench_local_kernels PRIVATE
    NETSPARSE_BENCH_ARCH="${NETSPARSE_ARCH}")
else()
  message(STATUS "bench_local_kernels not built: needs netsparse_kernels and netsparse_sparse")
endif()
