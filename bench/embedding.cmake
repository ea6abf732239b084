# Embedding exchange (DLRM-style): the cached embedding table beside a de-duplicated gather, a
# plain gather and an allgather of the table:
#   mpirun -np P bench_embedding [--alpha 1.0] [--batch N] [--rounds 3] [--json PATH]
if(TARGET netsparse_embedding)
  add_executable(bench_embedding ${CMAKE_CURRENT_SOURCE_DIR}/bench_embedding.cpp)
  # Public API only (embedding.hpp, netsparse_mpi.h).
  target_link_libraries(bench_embedding PRIVATE netsparse_embedding netsparse_bench_common
    MPI::MPI_CXX netsparse_build_flags)
endif()
