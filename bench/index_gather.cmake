# bench_index_gather: bale-style index gather through the RIG engine (all mechanisms and
# ablations), one RDMA_READ per index (vanilla SA), a Conveyors-style aggregation baseline and
# the MPI line rate, measured side by side in one run.
#   mpirun -np 2 bench_index_gather --K 16 --unique
if(TARGET netsparse_rig)
  add_executable(bench_index_gather ${CMAKE_CURRENT_SOURCE_DIR}/bench_index_gather.cpp)
  target_link_libraries(bench_index_gather PRIVATE netsparse_rig MPI::MPI_CXX netsparse_build_flags)
else()
  message(STATUS "bench_index_gather not built: needs netsparse_rig")
endif()
