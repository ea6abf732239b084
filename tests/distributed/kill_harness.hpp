// The distributed kill tests (test_node_kill.cpp, test_task_kill.cpp), their two halves.
// start_kill_job: MPI started, the victim from the command line, the survivors' communicator.
// kill_and_judge: the victim SIGKILLs itself a moment later while every rank runs its kernel again
// and again; each survivor checks that a run failed, and soon enough after its last good one (a
// hang is what this catches, not a speed); the survivors agree on the verdict over a communicator
// without the victim and rank 0 prints the line ctest matches ("<name>: PASS"). The verdict
// protocol of tests/rig/test_rig_peer_exit.cpp; run under orte_enable_recovery.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace netsparse::test {

// The kernels' watchdog in a kill test, and what follows from it: the victim dies this long after
// the first (checked) run, when the others are mid-way through later runs; a survivor must see
// its error this soon after its last good run: three waits of one deadline each (2 x watchdog
// + 1 s: a host mate's barrier in netsparse-node; the run's own, the end-of-run agreement's and
// the next run's argument agreement's in task-packets), plus slack for a loaded two-core
// machine. Not a timing assertion of speed: a hang is what it catches.
inline constexpr std::uint32_t kKillWatchdogMs = 1000;
inline constexpr int kVictimLifetimeMs = 300;
inline constexpr double kErrorWithinS = 3 * (2 * kKillWatchdogMs / 1000.0 + 1) + 10;
// At np 32 and 64 on two cores a survivor waits its turn for a core between every two steps: a
// loaded CI run (load 10-20, other builds beside) saw up to 20.6 s at np 32 and 38.2 s at np 64
// against the 19 s above, every survivor failing with the right error, none hanging. Half a
// second more per rank of the job: 35 s at np 32, 51 s at np 64, still well below what a hang
// takes (the tests' timeouts).
inline double error_within_s(int job_size) {
  return kErrorWithinS + 0.5 * job_size;
}

struct KillJob {
  int rank = 0, size = 0;
  int victim = 2;                      // argv[1], 2 when not given
  MPI_Comm survivors = MPI_COMM_NULL;  // every rank but the victim (MPI_COMM_NULL on the victim)
};

// MPI_Init, then the job of `name`: nullopt when its size fails `size_ok` or the victim is not
// in 1..size-1 (rank 0 prints "<name>: FAIL (needs <need>)"; MPI is then finalized).
inline std::optional<KillJob> start_kill_job(int& argc, char**& argv, const char* name,
                                             bool (*size_ok)(int), const char* need) {
  MPI_Init(&argc, &argv);
  KillJob j;
  MPI_Comm_rank(MPI_COMM_WORLD, &j.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &j.size);
  if (argc > 1) j.victim = std::atoi(argv[1]);
  if (!size_ok(j.size) || j.victim < 1 || j.victim >= j.size) {
    if (j.rank == 0) std::printf("%s: FAIL (needs %s)\n", name, need);
    MPI_Finalize();
    return std::nullopt;
  }
  MPI_Comm_split(MPI_COMM_WORLD, j.rank == j.victim ? MPI_UNDEFINED : 0, j.rank, &j.survivors);
  return j;
}

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

// The kill tests' common ending: the first run (everyone alive) was off by `first_err` (relative;
// a failed check when above `tolerance`), then the victim dies while every rank runs `run` again
// and again (kill_and_judge with the plan's constants above).
[[noreturn]] inline void check_then_kill(const char* name, const KillJob& job, int failures,
                                         double first_err, double tolerance,
                                         const std::function<void()>& run) {
  if (!(first_err <= tolerance)) {
    std::printf("[rank %d] FAIL: first run off by %g\n", job.rank, first_err);
    ++failures;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  kill_and_judge({name, job.victim, kVictimLifetimeMs, error_within_s(job.size)}, job.survivors,
                 failures, run);
}

}  // namespace netsparse::test
