# bench/plot.py draws the emulator's figures (Table 8, Fig. 12, 13, 16, 17, 18, 19, 22; Flare's
# Fig. 15) from
# netsparse_emulate's JSON: a small ladder, a units and delay sweep, a Property Cache sweep and a
# strong-scaling run, then plot.py;
# every figure must be written and name the JSON it came from.
#   cmake -DEMULATE=... -DPLOT=bench/plot.py -DPYTHON=... -DWORK_DIR=... -P plot_emulate.cmake
foreach(var EMULATE PLOT PYTHON WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "plot_emulate.cmake: -D${var}= is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(common --nodes 16 --racks 2 --matrix gen:kron:12)
# emulate(NAME ARGS...): netsparse_emulate ARGS --json WORK_DIR/NAME.json, or a fatal error.
function(emulate name)
  execute_process(COMMAND ${EMULATE} ${ARGN} --json ${WORK_DIR}/${name}.json
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "netsparse_emulate (${name}) failed (${rc}): ${err}")
  endif()
endfunction()
emulate(ladder ${common} --K 1,16 --mechanisms all)
emulate(sweep ${common} --K 16 --mechanisms switch --units 4,8,32 --delay 0,500,5000)
emulate(pcache --nodes 16 --racks 4 --matrix gen:kron:13 --K 16 --mechanisms switch
        --pcache 16K,256K,inf)
emulate(scaling ${common} --K 16 --scaling --compute-gflops 2)
emulate(fig19 --nodes 8 --racks 4 --matrix gen:kron:11 --fig19)
emulate(fig22 --nodes 8 --racks 4 --matrix gen:kron:11 --fig22)
emulate(fig15 --fig15 --nodes 16 --racks 4)
execute_process(COMMAND ${PYTHON} ${PLOT} -o ${WORK_DIR}/figures ${WORK_DIR}/ladder.json
                        ${WORK_DIR}/sweep.json ${WORK_DIR}/pcache.json ${WORK_DIR}/scaling.json
                        ${WORK_DIR}/fig19.json ${WORK_DIR}/fig22.json ${WORK_DIR}/fig15.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "plot.py failed (${rc}):\n${out}\n${err}")
endif()
foreach(fig emu_table8 emu_fig12 emu_fig16_units emu_fig17_delay emu_fig18_pcache
            emu_fig13_scaling emu_fig19_active emu_fig22_topologies emu_flare_fig15_allreduce)
  if(NOT EXISTS ${WORK_DIR}/figures/${fig}.png)
    message(FATAL_ERROR "plot.py did not write ${fig}.png:\n${out}\n${err}")
  endif()
endforeach()
if(NOT out MATCHES "ladder.json: [^\n]*emu_table8.png" OR NOT out MATCHES "sweep.json: [^\n]*emu_fig16_units.png"
   OR NOT out MATCHES "pcache.json: [^\n]*emu_fig18_pcache.png"
   OR NOT out MATCHES "scaling.json: [^\n]*emu_fig13_scaling.png"
   OR NOT out MATCHES "fig19.json: [^\n]*emu_fig19_active.png"
   OR NOT out MATCHES "fig22.json: [^\n]*emu_fig22_topologies.png"
   OR NOT out MATCHES "fig15.json: [^\n]*emu_flare_fig15_allreduce.png")
  message(FATAL_ERROR "plot.py does not say which input went into which figure:\n${out}")
endif()
message("${out}")
