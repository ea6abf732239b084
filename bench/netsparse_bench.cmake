# netsparse_bench: distributed SpMM / SDDMM / SpMV, NetSparse's RIG engine against every
# baseline (su, su-panel, sa-vanilla, sa-conveyors, sa-opt, inspector-executor, ideal) in one
# run, with the paper's Table 7 columns and a result check against ideal.
#   mpirun -np 2 netsparse_bench            # default comparison
#   netsparse_bench --help
# bench/sweep.sh produces JSON for bench/plot.py (figures in the style of the paper).
if(TARGET netsparse_distributed)
  # mpi_calls.cpp: the collective counters (PMPI), in the executable itself.
  add_executable(netsparse_bench ${CMAKE_CURRENT_SOURCE_DIR}/netsparse_bench.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/common/mpi_calls.cpp)
  target_link_libraries(netsparse_bench PRIVATE netsparse_distributed netsparse_partition
    netsparse_bench_common netsparse_build_flags
    netsparse_config netsparse_internal)
else()
  message(STATUS "netsparse_bench not built: needs netsparse_distributed")
endif()
