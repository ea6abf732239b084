# Allreduce: MPI_Allreduce beside NetSparse's dense designs and its sparse allreduce:
#   mpirun -np P bench_allreduce [--sizes-mib 1,4,16,64] [--rounds 3] [--json PATH]
if(TARGET netsparse_collectives)
  add_executable(bench_allreduce ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/sparcml_allreduce.cpp)
  # Public API only (collectives_mpi.h).
  target_link_libraries(bench_allreduce PRIVATE netsparse_collectives netsparse_bench_common MPI::MPI_CXX
    netsparse_build_flags)
endif()
