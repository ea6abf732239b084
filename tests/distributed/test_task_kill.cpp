// task-packets with a rank SIGKILLed while the job runs SpMM after SpMM (np 3, the matrix of
// task_test_util.hpp at K = 16: rank 0 sends task packets to rank 1 and fetches rows from rank 2,
// rank 2 sends task packets to rank 0 and fetches rows from rank 1): every survivor gets an error
// from its run within the deadline, never a hang, wherever the victim dies (mid-exchange, in the
// end-of-run failure agreement, in DistKernel's argument agreement between runs). Usage:
// distributed_task_kill VICTIM (1 = the owner rank 0's task packets go to, 2 = rank 0's row
// owner). Plain main, the verdict protocol of tests/rig/test_rig_peer_exit.cpp: each survivor
// checks its own run, they agree over a communicator without the victim, and rank 0 prints the
// line ctest matches ("task_kill: PASS"); run under orte_enable_recovery.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist_test_util.hpp"
#include "kill_harness.hpp"
#include "netsparse/distributed.hpp"
#include "task_test_util.hpp"

namespace {

constexpr std::uint32_t kWatchdogMs = 1000;
// The victim dies this long after the first (checked) run: the others are mid-way through
// later runs by then.
constexpr int kVictimLifetimeMs = 300;
// A survivor must see its error this soon after its last successful run: the run's own deadline,
// the end-of-run agreement's and the next run's argument agreement's (each 2 x watchdog + 1 s),
// plus slack for a loaded two-core machine. Not a timing assertion of speed: a hang is what it
// catches.
constexpr double kErrorWithinS = 3 * (2 * kWatchdogMs / 1000.0 + 1) + 10;

}  // namespace

int main(int argc, char** argv) {
  using namespace netsparse;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int victim = argc > 1 ? std::atoi(argv[1]) : 2;
  if (size != 3 || victim < 1 || victim >= size) {
    if (rank == 0) std::printf("task_kill: FAIL (needs np 3 and a victim in 1..2)\n");
    MPI_Finalize();
    return 1;
  }
  MPI_Comm survivors = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank == victim ? MPI_UNDEFINED : 0, rank, &survivors);

  int failures = 0;
  const gidx_t m = 2000;
  const DistMatrix dm = test::mixed_choice_matrix(MPI_COMM_WORLD, m);
  DistOptions o;
  o.mode = CommMode::task_packets;
  o.engine.watchdog_ms = kWatchdogMs;  // sets the deadline (node_wait_deadline)
  const int k = 16;
  DistKernel kern(dm, KernelKind::spmm, k, o);
  const gidx_t cb = dm.cols().begin(rank), ce = dm.cols().end(rank);
  const std::vector<float> b = test::operand_block(1, cb, ce, k);
  std::vector<float> c(static_cast<std::size_t>(dm.rows().size(rank)) * k);
  kern.spmm(b, c);  // everyone alive: the result must be right
  const double err = test::max_relative_error(c, test::reference_spmm(dm.local(), k, 1));
  if (kern.total_stats().task_owners != (rank % 2 == 0 ? 1u : 0u)) {
    std::printf("[rank %d] FAIL: %llu task owners\n", rank,
                static_cast<unsigned long long>(kern.total_stats().task_owners));
    ++failures;
  }
  if (!(err <= test::kTolerance)) {
    std::printf("[rank %d] FAIL: first run off by %g\n", rank, err);
    ++failures;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  test::kill_and_judge({"task_kill", victim, kVictimLifetimeMs, kErrorWithinS}, survivors, failures,
                       [&] { kern.spmm(b, c); });
}
