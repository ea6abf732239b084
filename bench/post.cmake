# bench_post: ns_post_send + ns_poll_cq per small work request, the checked default against
# NS_CTX_UNCHECKED in one run (in-process, one node: no MPI job).
#   bench_post [--wrs 200000] [--count 1] [--chain 1] [--rounds 3] [--progress inline|thread]
if(TARGET netsparse_rig)
  add_executable(bench_post ${CMAKE_CURRENT_SOURCE_DIR}/bench_post.cpp)
  target_link_libraries(bench_post PRIVATE netsparse_rig netsparse_bench_common
    netsparse_build_flags)
  if(NETSPARSE_BUILD_TESTS)
    add_test(NAME bench.bench_post.smoke COMMAND bench_post --wrs 2000 --rounds 1)
    set_tests_properties(bench.bench_post.smoke PROPERTIES TIMEOUT 60)
  endif()
endif()
