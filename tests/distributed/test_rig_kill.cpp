// netsparse (the per-rank RIG engine) with a rank SIGKILLed while the job runs SpMM after SpMM
// (np 3, and np 32 on virtual hosts of 8: issue 34's faults at scale): every survivor gets an
// error from its run within the deadline, never a hang, wherever
// the victim dies: mid-gather (the engine's watchdog), or between runs, in DistKernel's
// argument agreement (which, for the RIG engine's modes, gives up after the engine's deadline
// like netsparse-node's and task-packets' do). Usage: distributed_rig_kill VICTIM [dynamic]
// (dynamic: the changing-pattern path, DistOptions::dynamic_pattern). Plain main, the verdict
// protocol of tests/rig/test_rig_peer_exit.cpp (kill_harness.hpp); run under
// orte_enable_recovery.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "kill_harness.hpp"
#include "netsparse/distributed.hpp"
#include "task_test_util.hpp"

int main(int argc, char** argv) {
  using namespace netsparse;
  const auto job = test::start_kill_job(
      argc, argv, "rig_kill", [](int size) { return size >= 3; },
      "np >= 3 and a victim in 1..np-1");
  if (!job) return 1;
  const int rank = job->rank;
  const bool dynamic = argc > 2 && std::string(argv[2]) == "dynamic";

  int failures = 0;
  const gidx_t m = 2000;
  const DistMatrix dm = test::mixed_choice_matrix(MPI_COMM_WORLD, m);
  DistOptions o;
  o.mode = CommMode::netsparse;
  o.dynamic_pattern = dynamic;
  o.engine.watchdog_ms = test::kKillWatchdogMs;  // sets the deadline (node_wait_deadline)
  const int k = 16;
  DistKernel kern(dm, KernelKind::spmm, k, o);
  if (dynamic) kern.set_pattern(dm.local());
  const gidx_t cb = dm.cols().begin(rank), ce = dm.cols().end(rank);
  const std::vector<float> b = test::operand_block(1, cb, ce, k);
  std::vector<float> c(static_cast<std::size_t>(dm.rows().size(rank)) * k);
  kern.spmm(b, c);  // everyone alive: the result must be right
  const double err = test::max_relative_error(c, test::reference_spmm(dm.local(), k, 1));
  test::check_then_kill("rig_kill", *job, failures, err, test::kTolerance,
                        [&] { kern.spmm(b, c); });
}
