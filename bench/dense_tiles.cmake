# bench_dense_tiles: where a tile's dense GEMM beats the sparse tile kernel on this machine
# (the threshold of HybridMatrix / gcn_train --dense-tile-density), and the pipelined A (X W)
# against X W first. A plain program printing tables, not a test.
if(TARGET netsparse_kernels)
  add_executable(bench_dense_tiles ${CMAKE_CURRENT_SOURCE_DIR}/bench_dense_tiles.cpp)
  target_link_libraries(bench_dense_tiles PRIVATE netsparse_kernels OpenMP::OpenMP_CXX
    netsparse_build_flags)
endif()
