# What the documentation checks share (layer_table.cmake, readme_layout.cmake).

# Fails with the usage of `script` unless ROOT (the repository) is given.
function(netsparse_require_root script)
  if(NOT ROOT)
    message(FATAL_ERROR "usage: cmake -DROOT=<repository> -P ${script}")
  endif()
endfunction()

# The lines of `file` as a list: the text's own ";" (a list separator) and brackets (which would
# protect a ";" from splitting) become harmless characters first.
function(netsparse_doc_lines file out)
  file(READ ${file} content)
  string(REPLACE ";" "," content "${content}")
  string(REPLACE "[" "(" content "${content}")
  string(REPLACE "]" ")" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# The lines of `lines` after the first that matches `start`, up to the first after it that
# matches `stop` (not included).
function(netsparse_doc_section lines start stop out)
  set(inside OFF)
  set(section "")
  foreach(line IN LISTS lines)
    if(NOT inside)
      if(line MATCHES "${start}")
        set(inside ON)
      endif()
      continue()
    endif()
    if(line MATCHES "${stop}")
      break()
    endif()
    list(APPEND section "${line}")
  endforeach()
  set(${out} "${section}" PARENT_SCOPE)
endfunction()

# The folders of <root>/lib.
function(netsparse_lib_folders root out)
  file(GLOB entries LIST_DIRECTORIES true ${root}/lib/*)
  set(folders "")
  foreach(entry IN LISTS entries)
    if(IS_DIRECTORY ${entry})
      get_filename_component(name ${entry} NAME)
      list(APPEND folders ${name})
    endif()
  endforeach()
  set(${out} "${folders}" PARENT_SCOPE)
endfunction()

# Appends to the list named `out_var` every folder missing from `named` (a table's rows) and every
# name in `named` that is no folder; `table` names the table in the messages. Fails at once
# when `named` is empty (the table was not found).
function(netsparse_compare_folders folders named table out_var)
  if(NOT named)
    message(FATAL_ERROR "no rows of lib/ folders found in ${table}")
  endif()
  set(found "${${out_var}}")
  foreach(folder IN LISTS folders)
    if(NOT folder IN_LIST named)
      list(APPEND found "lib/${folder} has no row in ${table}")
    endif()
  endforeach()
  foreach(name IN LISTS named)
    if(NOT name IN_LIST folders)
      list(APPEND found "${table} names lib/${name}, which does not exist")
    endif()
  endforeach()
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

# Fails with every problem, one per line, under `title`.
function(netsparse_fail_on problems title)
  if(problems)
    list(REMOVE_DUPLICATES problems)
    list(JOIN problems "\n  " text)
    message(FATAL_ERROR "${title}:\n  ${text}")
  endif()
endfunction()
