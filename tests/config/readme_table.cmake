cmake_minimum_required(VERSION 3.25)
# The README's environment table must be exactly what `netsparse_info --markdown` prints from the
# configuration table (lib/config/settings.hpp). To update the README, paste that output between
# the markers `<!-- environment table: netsparse_info --markdown -->` and `<!-- end -->`.
# -DINFO=netsparse_info -DREADME=README.md -DOUT=where to write the expected table on a mismatch
execute_process(COMMAND ${INFO} --markdown OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "netsparse_info --markdown failed (${rc})")
endif()
file(READ ${README} readme)
set(begin_marker "<!-- environment table: netsparse_info --markdown -->\n")
string(FIND "${readme}" "${begin_marker}" begin)
string(FIND "${readme}" "<!-- end -->" end)
if(begin LESS 0 OR end LESS 0 OR end LESS begin)
  message(FATAL_ERROR "README.md: the environment table markers are missing")
endif()
string(LENGTH "${begin_marker}" marker_length)
math(EXPR begin "${begin} + ${marker_length}")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${readme}" ${begin} ${length} documented)
if(NOT documented STREQUAL generated)
  file(WRITE ${OUT} "${generated}")
  message(FATAL_ERROR "README.md's environment table differs from the configuration table; "
          "replace it by the output of `netsparse_info --markdown` (written to ${OUT})")
endif()
message(STATUS "README environment table matches the configuration table")
