// What the plain-main peer-failure programs share (test_rig_peer_exit: a peer exits mid-gather;
// test_rig_peer_kill_reads: a peer is SIGKILLed mid-read): the failure log, deterministic
// properties, the hang-guarded completion wait, and the setup of np >= 3 ranks whose last rank
// is the victim. Plain mains, not GoogleTest: the verdict is a line rank 0 prints (see the
// programs), because under orte_enable_recovery mpirun's exit code says nothing.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_test_util.hpp"
#include "netsparse/netsparse.h"
#include "netsparse/netsparse_mpi.h"
#include "rig_wr.hpp"

namespace peerfail {

// Long enough that a live peer never trips it on a loaded two-core CI machine.
constexpr std::uint32_t kWatchdogMs = 2500;
constexpr std::uint32_t kPropBytes = 16;
constexpr std::uint64_t kRowsPerRank = 200;
// The victim keeps serving for this long after the start barrier, so the survivors have
// gathered from it successfully (and have requests in flight) when it dies.
constexpr int kVictimLifetimeMs = 400;
// Hang guard for every wait; generous because CI shares two cores. Not a timing assertion.
constexpr int kHangGuardMs = 30000;
// Bound on the rounds before the victim's death is noticed (each one waits for completions).
constexpr int kMaxRoundsBeforeDeath = 100000;

inline int rank = 0;
inline int failures = 0;

inline void fail(const std::string& what) {
  std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, what.c_str());
  ++failures;
}

// Byte b of global row r: a function of both, so a misplaced or stale byte is caught.
inline std::uint8_t prop_byte(std::uint64_t row, std::uint32_t b) {
  std::uint64_t x = (row + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t{b} + 3) * 0xC2B2AE3Dull;
  x ^= x >> 31;
  return static_cast<std::uint8_t>(x);
}

inline long long ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

// Waits for n completions (hang guard per wait); fewer than n means the engine hung.
inline std::vector<ns_wc> wait_for(ns_cq* cq, int n) {
  std::vector<ns_wc> got;
  ns_wc wc[4];
  while (static_cast<int>(got.size()) < n) {
    const int k = ns_cq_wait(cq, 4, wc, kHangGuardMs);
    if (k < 0) {
      fail(std::string("ns_cq_wait: ") + ns_last_error());
      break;
    }
    if (k == 0) {
      fail("no completion within the hang guard of " + std::to_string(kHangGuardMs) + " ms");
      break;
    }
    got.insert(got.end(), wc, wc + k);
  }
  return got;
}

inline bool is_peer_failure(int status) {
  return status == NS_WC_WATCHDOG_TIMEOUT || status == NS_WC_TRANSPORT_ERR;
}

// Every rank's context, region (kRowsPerRank rows of kPropBytes) and queues; the last rank is
// the victim, `partner` another survivor. Aborts the job on a setup failure; returns after a
// barrier, every region registered.
struct Job : rigtest::RankRig {
  int size = 0, victim = 0, partner = 0;
  MPI_Comm survivors = MPI_COMM_NULL;  // the survivors only: still works once the victim is gone
};

inline Job start_job(int& argc, char**& argv, int progress_mode, int cqe, int qp_depth) {
  Job j;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &j.size);
  if (provided < MPI_THREAD_MULTIPLE || j.size < 3) {
    std::fprintf(stderr, "[rank %d] FAIL: needs MPI_THREAD_MULTIPLE and np >= 3 (np %d)\n", rank,
                 j.size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  j.victim = j.size - 1;
  j.partner = (rank + 1) % j.victim;
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_WATCHDOG;
  attr.progress_mode = progress_mode;
  attr.watchdog_ms = kWatchdogMs;
  if (ns_open_mpi(MPI_COMM_WORLD, &attr, &j.ctx) != NS_OK) {
    std::fprintf(stderr, "[rank %d] FAIL: ns_open_mpi: %s\n", rank, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  j.offsets.resize(static_cast<std::size_t>(j.size) + 1);
  for (int p = 0; p <= j.size; ++p) j.offsets[static_cast<std::size_t>(p)] = kRowsPerRank * p;
  j.block.resize(kRowsPerRank * kPropBytes);
  for (std::uint64_t r = 0; r < kRowsPerRank; ++r)
    for (std::uint32_t b = 0; b < kPropBytes; ++b)
      j.block[r * kPropBytes + b] = prop_byte(j.offsets[static_cast<std::size_t>(rank)] + r, b);
  if (ns_reg_props(j.ctx, j.block.data(), kRowsPerRank, kPropBytes, j.offsets.data(), &j.mr) !=
          NS_OK ||
      ns_create_cq(j.ctx, cqe, &j.cq) != NS_OK ||
      ns_create_qp(j.ctx, j.cq, qp_depth, &j.qp) != NS_OK) {
    std::fprintf(stderr, "[rank %d] FAIL: setup: %s\n", rank, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Comm_split(MPI_COMM_WORLD, rank == j.victim ? MPI_UNDEFINED : 0, rank, &j.survivors);
  MPI_Barrier(MPI_COMM_WORLD);  // everyone registered; the engines serve from here
  return j;
}

// A survivor's teardown with a dead peer: destroys the queue pair and the completion queue and
// closes the context; fails naming every status unless both queues went and close_ok(the
// close's status) holds (ns_last_error() still the close's). Returns how long it took (ms).
template <class CloseOk>
long long tear_down(const Job& job, CloseOk close_ok) {
  const auto start = std::chrono::steady_clock::now();
  const ns_status_t qp_status = ns_destroy_qp(job.qp);
  const ns_status_t cq_status = ns_destroy_cq(job.cq);
  const ns_status_t close_status = ns_close(job.ctx);
  if (qp_status != NS_OK || cq_status != NS_OK || !close_ok(close_status))
    fail("teardown: destroy_qp " + std::to_string(qp_status) + ", destroy_cq " +
         std::to_string(cq_status) + ", close " + std::to_string(close_status) + ": " +
         ns_last_error());
  return ms_since(start);
}

// The verdict (collective over the survivors): this rank's PASS / FAIL line, then rank 0's
// "<program>: PASS|FAIL (k of n survivors reported, f failed checks)".
inline void report_verdict(const Job& job, const char* program) {
  std::printf("[rank %d] %s\n", rank, failures == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
  std::fflush(stderr);
  netsparse::test::print_survivors_verdict(program, failures, job.size, job.survivors);
}

}  // namespace peerfail
