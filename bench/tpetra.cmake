# netsparse_bench's tpetra mode (bench/tpetra_mode.cpp: Tpetra's CrsMatrix::apply beside the
# library's modes), when Trilinos Tpetra is found (CMakeLists.txt: NETSPARSE_HAVE_TPETRA; its
# configure line says why not otherwise). Tpetra's include directory (as system headers: Kokkos'
# warnings are not ours) is given to tpetra_mode.cpp alone: nothing else sees its headers.
if(TARGET netsparse_bench AND NETSPARSE_HAVE_TPETRA)
  target_sources(netsparse_bench PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tpetra_mode.cpp)
  set(_tpetra_isystem)
  foreach(dir IN LISTS NETSPARSE_TPETRA_INCLUDE_DIRS)
    list(APPEND _tpetra_isystem -isystem ${dir})
  endforeach()
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/tpetra_mode.cpp PROPERTIES
    COMPILE_OPTIONS "${_tpetra_isystem}")
  # trilinos_tpetra (TpetraCoreConfig.cmake's imported target) brings Teuchos and Kokkos.
  target_link_libraries(netsparse_bench PRIVATE trilinos_tpetra)
  target_compile_definitions(netsparse_bench PRIVATE NETSPARSE_BENCH_TPETRA=1)
endif()
