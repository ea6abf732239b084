# bench_index_gather: bale-style index gather through the RIG engine (all mechanisms and
# ablations), one RDMA_READ per index (vanilla SA), the library's Conveyors-style aggregation
# baseline (lib/distributed RequestReply) and the line rate, measured side by side in one run.
#   mpirun -np 2 bench_index_gather --K 16 --unique
if(TARGET netsparse_distributed)
  add_executable(bench_index_gather ${CMAKE_CURRENT_SOURCE_DIR}/bench_index_gather.cpp)
  # netsparse_distributed: the Conveyors baseline, the line rate and the wire model (it links
  # netsparse_rig, whose public C API runs the RIG and vanilla modes).
  # netsparse_internal: the Conveyors baseline and the wire model are library internals.
  target_link_libraries(bench_index_gather PRIVATE netsparse_distributed netsparse_internal
    netsparse_bench_common
    netsparse_config
    MPI::MPI_CXX netsparse_build_flags)
else()
  message(STATUS "bench_index_gather not built: needs netsparse_distributed")
endif()
