// netsparse-node with a rank SIGKILLed while the job runs SpMM after SpMM (np 4 = 2 virtual hosts
// x 2 ranks): the dead rank takes its host's engine down, and every survivor -- its host mate
// and the other host's two ranks -- gets an error from its run within the deadline, never a
// hang: wherever the victim dies (mid-gather, at a host barrier, between runs in DistKernel's
// argument agreement). Usage: distributed_node_kill VICTIM (2 = a host leader,
// whose engine dies mid-gather; 3 = a non-leader, whose leader then gives up at the host
// barrier). Plain main, the verdict protocol of tests/rig/test_rig_peer_exit.cpp: each survivor
// checks its own run, they agree over a communicator without the victim, and rank 0 prints the
// line ctest matches ("node_kill: PASS"); run under orte_enable_recovery.
// At np 8 (2 racks x 2 hosts x 2 ranks, NETSPARSE_RACK_SWITCH=1 from ctest) victim 4 leads the
// first host of rack 1, i.e. it is rack 1's switch process: every rank of both racks must fail.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "dist_test_util.hpp"
#include "kill_harness.hpp"
#include "netsparse/distributed.hpp"

int main(int argc, char** argv) {
  using namespace netsparse;
  const std::optional<test::KillJob> job = test::start_kill_job(
      argc, argv, "node_kill", [](int np) { return np == 4 || np == 8; },
      "np 4 or 8 and a victim in 1..np-1");
  if (!job) return 1;
  const int rank = job->rank;

  int failures = 0;
  const test::Fixture f = test::make_fixture("gen:kron:10");
  DistOptions o;
  o.mode = CommMode::netsparse_node;
  o.engine.watchdog_ms = test::kKillWatchdogMs;
  const int k = 8;
  DistKernel kern(f.dm, KernelKind::spmm, k, o);
  const gidx_t cb = f.dm.cols().begin(rank), ce = f.dm.cols().end(rank);
  const std::vector<float> b = test::operand_block(1, cb, ce, k);
  std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(rank)) * k);
  kern.spmm(b, c);  // everyone alive: the result must be right
  const double err = test::max_relative_error(c, test::reference_spmm(f.dm.local(), k, 1));
  test::check_then_kill("node_kill", *job, failures, err, test::kTolerance,
                        [&] { kern.spmm(b, c); });
}
