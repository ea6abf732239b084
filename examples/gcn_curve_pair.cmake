# Test driver (examples/CMakeLists.txt): two training runs of a GCN example (C++ or Python, the
# same --curve-out / --expect-curve flags) under mpirun; the first writes its loss curve, the
# second must agree with it to TOLERANCE (relative; 0: bit for bit), which the example checks
# itself and reports as "-> OK". Both must exit 0.
#   -DMPIEXEC=mpirun -DNP=2 -DCURVE=file -DTOLERANCE=0
#   -DFIRST="program|arg|..."  -DSECOND="program|arg|..."  [-DSECOND_ENV="VAR=value|..."]
string(REPLACE "|" ";" first "${FIRST}")
string(REPLACE "|" ";" second "${SECOND}")
string(REPLACE "|" ";" second_env "${SECOND_ENV}")
set(mpirun ${MPIEXEC} --oversubscribe --bind-to none -np ${NP})
file(REMOVE "${CURVE}")
execute_process(COMMAND ${mpirun} ${first} --curve-out ${CURVE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("first run (np ${NP}): ${first}\n${out}${err}")
if(NOT rc EQUAL 0 OR NOT EXISTS "${CURVE}")
  message(FATAL_ERROR "the first run failed (exit ${rc}) or wrote no curve")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${second_env} ${mpirun} ${second}
                        --expect-curve ${CURVE} --expect-curve-tolerance ${TOLERANCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("second run (np ${NP}, env: ${SECOND_ENV}): ${second}\n${out}${err}")
string(FIND "${out}" "-> OK" ok)
if(NOT rc EQUAL 0 OR ok EQUAL -1)
  message(FATAL_ERROR "the second run's loss curve does not agree with the first's "
                      "(tolerance ${TOLERANCE}), or it failed (exit ${rc})")
endif()
