# bench_soak: RIG gathers through the public C API for minutes, throughput, RSS and the engine's
# queue gauges per interval (docs/benchmarks.md, "Soak").
#   mpirun -np 2 bench_soak --seconds 600 --interval 60
if(TARGET netsparse_rig)
  add_executable(bench_soak ${CMAKE_CURRENT_SOURCE_DIR}/bench_soak.cpp)
  # netsparse_config: the stall guard reads NETSPARSE_BENCH_STALL_S through the table.
  target_link_libraries(bench_soak PRIVATE netsparse_rig netsparse_internal netsparse_config
    netsparse_bench_common MPI::MPI_CXX netsparse_build_flags)
else()
  message(STATUS "bench_soak not built: needs netsparse_rig")
endif()
