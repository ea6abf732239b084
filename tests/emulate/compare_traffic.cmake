# The emulator against a real MPI run of the engine (issue 12 item 5): the same matrix, nodes,
# property size and ladder steps through netsparse_emulate (virtual time, one process) and
# netsparse_emulate_mpi (real ranks over the MPI transport); their per-node engine counters must
# agree. With concatenation off (steps rig, coalesce) every counter is fixed by the workload and
# must be equal; with NIC concatenation (nic) how many PRs share a packet depends on timing, so
# the packet and byte counts are left out and the PR counts and property bytes must be equal.
# (The filter step without coalescing is timing-dependent too: a repeat whose first request is
# still in flight is sent again; it is not compared.)
# With -DRANKS_PER_NODE=R (> 1) each node is a virtual host of R ranks: the emulator cuts the
# rows per rank (--ranks-per-node R) and the MPI run has NODES x R ranks under
# NETSPARSE_RANKS_PER_HOST=R (the test's environment), one engine per host at its leader.
#   cmake -DEMULATE=... -DEMULATE_MPI=... -DMPIRUN=... -DNODES=4 -DMATRIX=gen:kron:11 -DK=16
#         [-DRANKS_PER_NODE=2] -DWORK_DIR=... -P compare_traffic.cmake
foreach(var EMULATE EMULATE_MPI MPIRUN NODES MATRIX K WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "compare_traffic.cmake: -D${var}= is required")
  endif()
endforeach()
if(NOT DEFINED RANKS_PER_NODE)
  set(RANKS_PER_NODE 1)
endif()
math(EXPR ranks "${NODES} * ${RANKS_PER_NODE}")
file(MAKE_DIRECTORY ${WORK_DIR})
set(emulated ${WORK_DIR}/emulated.txt)
set(real ${WORK_DIR}/mpi.txt)
file(REMOVE ${emulated} ${real})
set(steps rig,coalesce,nic)
execute_process(COMMAND ${EMULATE} --nodes ${NODES} --racks 1 --ranks-per-node ${RANKS_PER_NODE}
                        --matrix ${MATRIX} --K ${K}
                        --mechanisms ${steps} --verify --traffic ${emulated}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "netsparse_emulate failed (${rc}):\n${out}\n${err}")
endif()
separate_arguments(mpirun_cmd UNIX_COMMAND "${MPIRUN}")
execute_process(COMMAND ${mpirun_cmd} -np ${ranks} ${EMULATE_MPI} --matrix ${MATRIX} --K ${K}
                        --mechanisms ${steps} --traffic ${real}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "netsparse_emulate_mpi failed (${rc}):\n${out}\n${err}")
endif()

# The lines to compare: every field of rig and coalesce, the timing-independent ones of nic.
function(comparable file out_var)
  file(STRINGS ${file} lines)
  set(result "")
  set(step "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^K [0-9]+ mechanisms (.*)$")
      set(step ${CMAKE_MATCH_1})
    elseif(step STREQUAL "nic")
      string(REGEX REPLACE " read_packets [0-9]+ response_packets [0-9]+ read_bytes [0-9]+ response_bytes [0-9]+" "" line "${line}")
    endif()
    list(APPEND result "${line}")
  endforeach()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()
comparable(${emulated} e)
comparable(${real} m)
list(LENGTH e n_e)
list(LENGTH m n_m)
math(EXPR expected "3 * (${NODES} + 1)")
if(NOT n_e EQUAL expected OR NOT n_m EQUAL expected)
  message(FATAL_ERROR "expected ${expected} lines, emulated ${n_e}, MPI ${n_m}")
endif()
set(mismatches 0)
math(EXPR last "${n_e} - 1")
foreach(i RANGE ${last})
  list(GET e ${i} le)
  list(GET m ${i} lm)
  if(NOT le STREQUAL lm)
    math(EXPR mismatches "${mismatches} + 1")
    message("emulated: ${le}\nMPI:      ${lm}")
  endif()
endforeach()
if(mismatches GREATER 0)
  message(FATAL_ERROR "${mismatches} lines differ between the emulator and the MPI run")
endif()
message("the emulator's per-node counters equal the MPI run's (${NODES} nodes of ${RANKS_PER_NODE} ranks, ${MATRIX}, K ${K}: steps ${steps})")
