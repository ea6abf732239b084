# Matrix Market parsing throughput: our reader against Eigen's loadMarket, side by side.
#   bench_mm_parse [FILE.mtx] [REPETITIONS]
add_executable(bench_mm_parse ${CMAKE_CURRENT_SOURCE_DIR}/bench_mm_parse.cpp)
target_link_libraries(bench_mm_parse PRIVATE netsparse_sparse netsparse_bench_common Eigen3::Eigen
  netsparse_build_flags)
