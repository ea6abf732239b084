# Micro-benchmarks of the wire protocol, concatenation points, Idx Filter and Pending PR Table.
#   bench_micro --benchmark_counters_tabular=true
add_executable(bench_micro ${CMAKE_CURRENT_SOURCE_DIR}/micro_concat.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/micro_filter.cpp)
# Micro-benchmarks of internals (the concatenation point, the filters): white-box headers.
target_link_libraries(bench_micro PRIVATE netsparse_concat netsparse_filter_model netsparse_internal
  benchmark::benchmark
  benchmark::benchmark_main Threads::Threads netsparse_build_flags)
