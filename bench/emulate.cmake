# netsparse_emulate: a cluster emulated in one process (lib/emulate) printing the paper's
# Table 4/7/8-style statistics. Needs the generators and readers (netsparse_sparse).
#   netsparse_emulate --nodes 128 --racks 8 --matrix gen:kron:16 --K 16 --mechanisms all
if(TARGET netsparse_emulate AND TARGET netsparse_sparse)
  # The target is netsparse_emulate_tool (netsparse_emulate is the library); the program is
  # netsparse_emulate.
  add_executable(netsparse_emulate_tool ${CMAKE_CURRENT_SOURCE_DIR}/netsparse_emulate.cpp)
  set_target_properties(netsparse_emulate_tool PROPERTIES OUTPUT_NAME netsparse_emulate)
  # netsparse_internal: the emulator is a white-box tool over the engine's internals.
  target_link_libraries(netsparse_emulate_tool PRIVATE netsparse_emulate netsparse_sparse
    netsparse_bench_common
    netsparse_internal netsparse_kernels netsparse_build_flags)
else()
  message(STATUS "netsparse_emulate not built: needs netsparse_emulate and netsparse_sparse")
endif()

# netsparse_emulate_mpi: the same gather on real MPI ranks (one rank = one node), writing the
# per-node engine counters netsparse_emulate --traffic writes, to check the emulator against a
# real run of the engine (tests/emulate: emulate.vs_mpi.*).
if(TARGET netsparse_emulate AND TARGET netsparse_sparse AND TARGET MPI::MPI_CXX)
  add_executable(netsparse_emulate_mpi ${CMAKE_CURRENT_SOURCE_DIR}/netsparse_emulate_mpi.cpp)
  target_link_libraries(netsparse_emulate_mpi PRIVATE netsparse_emulate netsparse_sparse
    netsparse_bench_common
    netsparse_internal netsparse_config MPI::MPI_CXX netsparse_build_flags)
else()
  message(STATUS "netsparse_emulate_mpi not built: needs netsparse_emulate, netsparse_sparse, MPI")
endif()
