# The rack switch of a real job against the emulator's prediction (issue 22 item 3 and goal 2):
# the same matrix and layout (racks x hosts x ranks per host) through netsparse_emulate (virtual
# time, one process, its ToRs running lib/switch) and netsparse_bench --rack-switch (real ranks,
# virtual hosts and racks, one software ToR per rack running the same lib/switch code).
# The real switch serialises a rack's hosts (rack_switch.hpp: waves), so the emulator runs with
# --rack-waves, the same schedule. Compared, per run, summed over the racks:
#   reads to other racks looked up at the switches: equal (the hosts' Idx Filter unions, fixed by
#       the workload);
#   cache hits and the bytes between racks: within 10 % of the emulator's (how PRs share packets
#       depends on the concatenation's timing, the real switch sending a wave's reads at once).
# With -DPLOT=bench/plot.py -DPYTHON=...: plot.py draws the real run's host traffic (hosts.png,
# hosts.md) and says that the run went into them.
#   cmake -DEMULATE=... -DBENCH=... -DMPIRUN=... -DRACKS=2 -DHOSTS_PER_RACK=2 -DRANKS_PER_HOST=2
#         -DMATRIX=gen:kron:12 -DK=16 -DWORK_DIR=... [-DPLOT=... -DPYTHON=...] -P compare_switch.cmake
foreach(var EMULATE BENCH MPIRUN RACKS HOSTS_PER_RACK RANKS_PER_HOST MATRIX K WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "compare_switch.cmake: -D${var}= is required")
  endif()
endforeach()
math(EXPR hosts "${RACKS} * ${HOSTS_PER_RACK}")
math(EXPR ranks "${hosts} * ${RANKS_PER_HOST}")
file(MAKE_DIRECTORY ${WORK_DIR})
set(emulated ${WORK_DIR}/emulated.json)
set(real ${WORK_DIR}/real.json)
file(REMOVE ${emulated} ${real})

execute_process(COMMAND ${EMULATE} --nodes ${hosts} --racks ${RACKS}
                        --ranks-per-node ${RANKS_PER_HOST} --matrix ${MATRIX} --K ${K}
                        --mechanisms switch --rack-waves --verify --json ${emulated}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "netsparse_emulate failed (${rc}):\n${out}\n${err}")
endif()
separate_arguments(mpirun_cmd UNIX_COMMAND "${MPIRUN}")
set(ENV{NETSPARSE_RANKS_PER_HOST} ${RANKS_PER_HOST})
set(ENV{NETSPARSE_HOSTS_PER_RACK} ${HOSTS_PER_RACK})
execute_process(COMMAND ${mpirun_cmd} -np ${ranks} ${BENCH} --matrix ${MATRIX} --K ${K}
                        --modes netsparse-node --rack-switch --rounds 1 --iters 2
                        --json ${real}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "netsparse_bench failed (${rc}):\n${out}\n${err}")
endif()

file(READ ${emulated} e)
string(JSON e_reads GET "${e}" experiments 0 runs 0 pcache_inter_rack_reads)
string(JSON e_hits GET "${e}" experiments 0 runs 0 pcache_inter_rack_hits)
string(JSON e_bytes GET "${e}" experiments 0 runs 0 inter_rack_bytes)
file(READ ${real} m)
string(JSON n_results LENGTH "${m}" results)
set(m_reads "")
math(EXPR last "${n_results} - 1")
foreach(i RANGE ${last})
  string(JSON mode GET "${m}" results ${i} mode)
  if(mode STREQUAL "netsparse-node")
    string(JSON correct GET "${m}" results ${i} correct)
    string(JSON m_reads GET "${m}" results ${i} switch_lookups_total)
    string(JSON m_hits GET "${m}" results ${i} switch_hits_total)
    string(JSON m_bytes GET "${m}" results ${i} inter_rack_bytes_total)
  endif()
endforeach()
if(m_reads STREQUAL "")
  message(FATAL_ERROR "no netsparse-node result in ${real}")
endif()
if(NOT correct)
  message(FATAL_ERROR "netsparse-node's result differs from the reference")
endif()
# Per-run figures are averages over the iterations: whole numbers here, since every iteration
# moves the same; the JSON writes them as reals.
foreach(v m_reads m_hits m_bytes)
  string(REGEX REPLACE "\\.0*$" "" ${v} "${${v}}")
  if(NOT ${v} MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${v} = ${${v}} is not a whole number: iterations moved different amounts")
  endif()
endforeach()
message("reads to other racks: emulated ${e_reads}, real ${m_reads}\n"
        "cache hits:           emulated ${e_hits}, real ${m_hits}\n"
        "bytes between racks:  emulated ${e_bytes}, real ${m_bytes}")
if(e_reads EQUAL 0 OR e_hits EQUAL 0)
  message(FATAL_ERROR "no reads to other racks or no cache hits: the layout tests nothing")
endif()
if(NOT e_reads EQUAL m_reads)
  message(FATAL_ERROR "the switches looked up ${m_reads} reads in the real run, ${e_reads} in the emulator")
endif()
# within 10 %: 10 |real - emulated| <= emulated
function(within_ten_percent what emulated_value real_value)
  math(EXPR diff "${real_value} - ${emulated_value}")
  if(diff LESS 0)
    math(EXPR diff "-${diff}")
  endif()
  math(EXPR scaled "10 * ${diff}")
  if(scaled GREATER emulated_value)
    message(FATAL_ERROR "${what}: real ${real_value} is not within 10 % of the emulator's ${emulated_value}")
  endif()
endfunction()
within_ten_percent("cache hits" ${e_hits} ${m_hits})
within_ten_percent("bytes between racks" ${e_bytes} ${m_bytes})
message("the real rack switch agrees with the emulator (${RACKS} racks x ${HOSTS_PER_RACK} hosts x ${RANKS_PER_HOST} ranks, ${MATRIX}, K ${K})")

if(DEFINED PLOT AND DEFINED PYTHON)
  execute_process(COMMAND ${PYTHON} ${PLOT} -o ${WORK_DIR}/figures ${real}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "plot.py failed (${rc}):\n${out}\n${err}")
  endif()
  foreach(fig hosts.png hosts.md)
    if(NOT EXISTS ${WORK_DIR}/figures/${fig})
      message(FATAL_ERROR "plot.py did not write ${fig}:\n${out}\n${err}")
    endif()
  endforeach()
  file(READ ${WORK_DIR}/figures/hosts.md table)
  if(NOT out MATCHES "real.json: [^\n]*hosts.png" OR NOT table MATCHES "hits [0-9]+\\.[0-9]%, inter-rack")
    message(FATAL_ERROR "plot.py's host figure or table lacks the run or its switch:\n${out}\n${table}")
  endif()
endif()
