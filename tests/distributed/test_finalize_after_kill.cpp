// The end of a job that lost a rank, without ns_watch_host_peers: the library alone must see
// the death and let the survivors leave (issue 37 item 2). Every rank runs the netsparse mode's
// SpMM again and again (a 1 s watchdog) until a run fails or 120 s pass, then ends with
// `return ns_finalize_or_exit(4)` after a failure, `ns_finalize_or_exit(0)` after none.
// tests/bench/expect_survivors_exit.sh SIGKILLs one rank mid-run and checks that every survivor
// exits 4 soon after: the failed run recorded the peer failure (ns_peer_failed), the kernel's
// teardown did not wait on the dead, and ns_finalize_or_exit did not call MPI_Finalize (which
// would wait for ever in Open MPI 4.1). Usage: distributed_finalize_after_kill [MATRIX].
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "netsparse/distributed.hpp"
#include "netsparse/netsparse_mpi.h"

int main(int argc, char** argv) {
  using namespace netsparse;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  constexpr int kExitPeerFailed = 4;
  const std::string spec = argc > 1 ? argv[1] : "gen:kron:10";
  std::string error;
  int runs = 0;
  try {
    const DistMatrix a = load_distributed_matrix(MPI_COMM_WORLD, spec);
    DistOptions o;
    o.mode = CommMode::netsparse;
    o.engine.watchdog_ms = 1000;
    const int k = 16;
    DistKernel kern(a, KernelKind::spmm, k, o);
    const auto my_rows = static_cast<std::size_t>(a.rows().size(rank));
    std::vector<float> b(my_rows * k, 1.0f), c(my_rows * k);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until) {
      kern.spmm(b, c);
      ++runs;
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (error.empty()) {
    std::printf("[rank %d] no run failed in 120 s (%d runs)\n", rank, runs);
    return ns_finalize_or_exit(0);
  }
  std::printf("[rank %d] run %d failed (ns_peer_failed %d): %s\n", rank, runs + 1, ns_peer_failed(),
              error.c_str());
  return ns_finalize_or_exit(kExitPeerFailed);
}
