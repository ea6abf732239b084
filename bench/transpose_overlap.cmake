# bench_transpose_overlap: the non-blocking distributed transpose (transpose_start) overlapped
# with independent local compute, against transpose() then the compute. Exits 1 when an
# overlapped A^T differs from transpose(a), so the smoke test checks that under mpirun.
if(TARGET netsparse_distributed)
  add_executable(bench_transpose_overlap ${CMAKE_CURRENT_SOURCE_DIR}/bench_transpose_overlap.cpp)
  target_link_libraries(bench_transpose_overlap PRIVATE netsparse_dist_transpose
    netsparse_build_flags)
  if(NETSPARSE_BUILD_TESTS)
    add_test(NAME bench.bench_transpose_overlap.smoke.mpi.np2
             COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none -np 2 $<TARGET_FILE:bench_transpose_overlap>
                     --matrix gen:kron:10 --compute-reps 2 --reps 2)
    set_tests_properties(bench.bench_transpose_overlap.smoke.mpi.np2 PROPERTIES
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_mpi_yield_when_idle=1"
      TIMEOUT 120 PROCESSORS 2)
  endif()
endif()
