# Transport line rate (bandwidth, latency, tiny-read rate) per transport:
#   mpirun -np 2 bench_transport_bw [--seconds S] [--packet BYTES] [--transports inproc,mpi,verbs]
if(TARGET netsparse_transport)
  add_executable(bench_transport_bw ${CMAKE_CURRENT_SOURCE_DIR}/bench_transport_bw.cpp)
  # Measures the transports themselves: white-box headers.
  target_link_libraries(bench_transport_bw PRIVATE netsparse_transport netsparse_internal
    netsparse_bench_common MPI::MPI_CXX
    netsparse_build_flags)
endif()
