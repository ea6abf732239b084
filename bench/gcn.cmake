# bench_gcn: GCN training with neighbour sampling (examples/gcn_train.cpp built with the project's
# warning flags), every communication mode side by side: time per epoch, its communication share,
# the engine's filter rate, node orders (own, random, rcm, metis, metis-rcm: ghost rows per epoch)
# and the local forward variants (--local-forward split|hybrid|pipelined) side by side.
#   mpirun -np 2 bench_gcn --matrix gen:kron:16 --mode all --rounds 3 --epochs 10
if(TARGET netsparse_distributed AND TARGET netsparse_collectives)
  add_executable(bench_gcn ${PROJECT_SOURCE_DIR}/examples/gcn_train.cpp)
  target_link_libraries(bench_gcn PRIVATE netsparse_dist_transpose netsparse_distributed netsparse_partition
                                          netsparse_collectives netsparse_build_flags)
else()
  message(STATUS "bench_gcn not built: needs netsparse_distributed and netsparse_collectives")
endif()
