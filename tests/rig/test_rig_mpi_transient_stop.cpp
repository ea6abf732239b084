// A transient failure is not a death: rank 0 stops rank 1 (SIGSTOP) for 1 s while gathering from
// it with a 100 ms watchdog (its requests time out), then resumes it. Both ranks must then gather
// again successfully and tear down collectively and cleanly (NS_OK): earlier timeouts must not
// make a rank skip the quiesce with a live peer. Exit 0 and "transient_stop: PASS" on success.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_util.hpp"
#include "netsparse/netsparse_mpi.h"
#include "rig_wr.hpp"

namespace {

// SIGSTOP takes effect asynchronously: under load the peer's threads may run (and answer) for a
// moment after kill() returns. Waits until the kernel reports the process stopped ('T' in
// /proc/PID/stat), at most 5 s.
bool wait_until_stopped(int pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const std::size_t close = line.rfind(')');  // the command name may hold spaces
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'T') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const netsparse::test::World world = netsparse::test::init_world(argc, argv);
  const int rank = world.rank, size = world.size;
  int failures = 0;
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_WATCHDOG;
  attr.progress_mode = NS_PROGRESS_THREAD;  // rank 1's engine stops with its process
  attr.watchdog_ms = 100;
  ns_context* ctx = nullptr;
  if (size != 2 || ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx) != NS_OK) {
    std::fprintf(stderr, "rank %d: needs 2 ranks / ns_open_mpi: %s\n", rank, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int pid = static_cast<int>(getpid()), peer_pid = 0;
  MPI_Sendrecv(&pid, 1, MPI_INT, 1 - rank, 0, &peer_pid, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  const std::uint64_t rows = 1000;
  std::vector<std::uint64_t> offsets = {0, rows, 2 * rows};
  std::vector<std::uint64_t> block(rows);
  for (std::uint64_t r = 0; r < rows; ++r) block[r] = rank * rows + r;
  rigtest::RankQueues queues;
  if (!rigtest::open_queues(ctx, block.data(), rows, 8, offsets.data(), 8, 8, rank, &queues)) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::vector<std::uint64_t> idx;
  for (std::uint64_t i = 0; i < rows; ++i) idx.push_back((1 - rank) * rows + i);  // the peer's
  std::vector<std::uint64_t> out(idx.size());
  const auto gather = [&](int expect) {
    ns_send_wr w = rigtest::rig_wr(0, queues.mr, idx, out.data());
    ns_wc wc{};
    if (ns_post_send(queues.qp, &w, nullptr) != NS_OK ||
        ns_cq_wait(queues.cq, 1, &wc, 20000) != 1 || wc.status != expect) {
      std::fprintf(stderr, "rank %d: gather status %d, expected %d\n", rank, wc.status, expect);
      ++failures;
    }
  };
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    kill(peer_pid, SIGSTOP);
    if (!wait_until_stopped(peer_pid)) {
      std::fprintf(stderr, "rank 0: the peer (pid %d) did not stop\n", peer_pid);
      ++failures;
    }
    gather(NS_WC_WATCHDOG_TIMEOUT);  // the stopped peer cannot answer
    std::this_thread::sleep_for(std::chrono::seconds(1));
    kill(peer_pid, SIGCONT);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  gather(NS_WC_SUCCESS);  // both alive again
  for (std::size_t j = 0; j < idx.size(); ++j) {
    if (out[j] != idx[j]) ++failures;
  }
  const ns_status_t q = ns_destroy_qp(queues.qp), c = ns_destroy_cq(queues.cq),
                    d = ns_dereg_props(queues.mr);
  const ns_status_t closed = ns_close(ctx);
  if (q != NS_OK || c != NS_OK || d != NS_OK || closed != NS_OK) {
    std::fprintf(stderr, "rank %d: teardown qp %d cq %d dereg %d close %d: %s\n", rank, q, c, d,
                 closed, ns_last_error());
    ++failures;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("transient_stop: %s\n", all == 0 ? "PASS" : "FAIL");
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
