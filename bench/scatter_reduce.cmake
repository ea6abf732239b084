# Scatter-reduce: NS_WR_RIS against the Conveyors-style push of (idx, value) pairs:
#   mpirun -np P bench_scatter_reduce [--K 1,16] [--updates N] [--rounds 3] [--json PATH]
if(TARGET netsparse_distributed)
  add_executable(bench_scatter_reduce ${CMAKE_CURRENT_SOURCE_DIR}/bench_scatter_reduce.cpp)
  # netsparse_internal: the Conveyors baseline (lib/conveyor/conveyor.hpp) is internal.
  target_link_libraries(bench_scatter_reduce PRIVATE netsparse_distributed netsparse_internal
    netsparse_bench_common MPI::MPI_CXX netsparse_build_flags)
endif()
