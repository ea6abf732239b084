// The second half of the distributed kill tests (test_node_kill.cpp, test_task_kill.cpp): the
// victim SIGKILLs itself a moment later while every rank runs its kernel again and again; each
// survivor checks that a run failed, and soon enough after its last good one (a hang is what
// this catches, not a speed); the survivors agree on the verdict over a communicator without the
// victim and rank 0 prints the line ctest matches ("<name>: PASS"). The verdict protocol of
// tests/rig/test_rig_peer_exit.cpp; run under orte_enable_recovery.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>

namespace netsparse::test {

struct KillPlan {
  const char* name;       // the test's name in its verdict line
  int victim;             // the rank that dies
  int lifetime_ms;        // how long after this call it dies
  double error_within_s;  // a survivor's error must come this soon after its last good run
};

// Never returns: leaves with _exit (MPI_Finalize and collective teardowns with a dead rank
// would hang; the verdict is already printed). `failures`: the checks this rank failed before.
[[noreturn]] inline void kill_and_judge(const KillPlan& plan, MPI_Comm survivors, int failures,
                                        const std::function<void()>& run) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == plan.victim) {
    const int lifetime_ms = plan.lifetime_ms;
    std::thread([lifetime_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(lifetime_ms));
      std::printf("[rank victim] SIGKILLs itself now\n");
      std::fflush(stdout);
      std::raise(SIGKILL);
    }).detach();
  }
  constexpr int kMaxRuns = 1000000;
  int runs = 0;
  auto last_ok = std::chrono::steady_clock::now();
  std::string what;
  for (; runs < kMaxRuns; ++runs) {
    try {
      run();
      last_ok = std::chrono::steady_clock::now();
    } catch (const std::exception& e) {
      what = e.what();
      break;
    }
  }
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_ok).count();
  if (what.empty()) {
    std::printf("[rank %d] FAIL: %d runs and no error\n", rank, runs);
    ++failures;
  } else if (after_s > plan.error_within_s) {
    std::printf("[rank %d] FAIL: the error came %.1f s after the last good run: %s\n", rank,
                after_s, what.c_str());
    ++failures;
  } else {
    std::printf("[rank %d] error after %d good runs, %.2f s after the last: %s\n", rank, runs,
                after_s, what.c_str());
  }
  std::printf("[rank %d] %s\n", rank, failures == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
  int reported[2] = {failures, 1}, total[2] = {0, 0};  // {failures, survivors that reported}
  MPI_Allreduce(reported, total, 2, MPI_INT, MPI_SUM, survivors);
  if (rank == 0) {
    std::printf("%s: %s (victim %d, %d of %d survivors reported, %d failed checks)\n", plan.name,
                total[0] == 0 && total[1] == size - 1 ? "PASS" : "FAIL", plan.victim, total[1],
                size - 1, total[0]);
  }
  std::fflush(stdout);
  _exit(failures == 0 ? 0 : 1);
}

}  // namespace netsparse::test
