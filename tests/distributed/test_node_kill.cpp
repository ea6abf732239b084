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
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/distributed.hpp"

namespace {

constexpr std::uint32_t kWatchdogMs = 1000;
// The victim dies this long after the first (checked) run: the others are mid-way through
// later runs by then.
constexpr int kVictimLifetimeMs = 300;
// A survivor must see its error this soon after its last successful run: a host mate's
// barrier deadline (3 x the deadline of one wait, 2 x watchdog + 1 s), plus slack for a loaded
// two-core machine. Not a timing assertion of speed: a hang is what it catches.
constexpr double kErrorWithinS = 3 * (2 * kWatchdogMs / 1000.0 + 1) + 10;
constexpr int kMaxRuns = 1000000;

}  // namespace

int main(int argc, char** argv) {
  using namespace netsparse;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int victim = argc > 1 ? std::atoi(argv[1]) : 2;
  if ((size != 4 && size != 8) || victim < 1 || victim >= size) {
    if (rank == 0) std::printf("node_kill: FAIL (needs np 4 or 8 and a victim in 1..np-1)\n");
    MPI_Finalize();
    return 1;
  }
  MPI_Comm survivors = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank == victim ? MPI_UNDEFINED : 0, rank, &survivors);

  int failures = 0;
  const test::Fixture f = test::make_fixture("gen:kron:10");
  DistOptions o;
  o.mode = CommMode::netsparse_node;
  o.engine.watchdog_ms = kWatchdogMs;
  const int k = 8;
  DistKernel kern(f.dm, KernelKind::spmm, k, o);
  const gidx_t cb = f.dm.cols().begin(rank), ce = f.dm.cols().end(rank);
  const std::vector<float> b = test::operand_block(1, cb, ce, k);
  std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(rank)) * k);
  kern.spmm(b, c);  // everyone alive: the result must be right
  const double err = test::max_relative_error(c, test::reference_spmm(f.dm.local(), k, 1));
  if (!(err <= test::kTolerance)) {
    std::printf("[rank %d] FAIL: first run off by %g\n", rank, err);
    ++failures;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == victim) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(kVictimLifetimeMs));
      std::printf("[rank victim] SIGKILLs itself now\n");
      std::fflush(stdout);
      std::raise(SIGKILL);
    }).detach();
  }
  // Run until the job notices the death.
  int runs = 0;
  auto last_ok = std::chrono::steady_clock::now();
  std::string what;
  for (; runs < kMaxRuns; ++runs) {
    try {
      kern.spmm(b, c);
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
  } else if (after_s > kErrorWithinS) {
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
    std::printf("node_kill: %s (victim %d, %d of %d survivors reported, %d failed checks)\n",
                total[0] == 0 && total[1] == size - 1 ? "PASS" : "FAIL", victim, total[1], size - 1,
                total[0]);
  }
  std::fflush(stdout);
  // MPI_Finalize (and the kernel's collective teardown) with a dead rank would hang; the result
  // is reported, so leave without them.
  _exit(failures == 0 ? 0 : 1);
}
