# Test driver (examples/CMakeLists.txt): bfs_direction (or -DNAME=sssp_direction) with a source
# vertex outside the graph must exit non-zero and every rank must print the same refusal, naming
# itself.
if(NOT DEFINED NAME)
  set(NAME bfs_direction)
endif()
execute_process(
  COMMAND ${MPIEXEC} --oversubscribe --bind-to none -np ${NP} ${PROGRAM} --matrix ${MATRIX}
          --sources 3,60 --check
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${NAME} accepted source 60 of a 60-vertex graph:\n${out}${err}")
endif()
math(EXPR last "${NP} - 1")
foreach(r RANGE 0 ${last})
  string(FIND "${err}"
         "${NAME} (rank ${r}): source vertex '60' is not a vertex of" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "rank ${r} did not report the bad source:\n${out}${err}")
  endif()
endforeach()
