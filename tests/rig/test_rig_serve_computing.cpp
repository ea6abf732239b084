// A rank's RIG serving goes on while its application computes (issue 37 item 3). Rank 1 computes
// for 4 s (or SECONDS) in a busy loop that makes no library call; meanwhile rank 0 gathers 256 of
// rank 1's rows again and again (every 0.2 s until three quarters of the compute have passed),
// and must have each, correct, within 2 s (a progress thread takes about 0.01 s; with INLINE
// progress nobody serves rank 1's rows until it calls the library again, and the gather waits
// for its compute to end). Usage: test_rig_serve_computing thread|inline|auto [SECONDS] (the
// context's progress mode; the hostile-case runner uses 60 s, the goal). np 2; prints
// "[rank N] FAIL ..." lines and the verdict "serve_computing: PASS".
// With `auto` on a rank without a free core (the ctest pins both ranks to one core) AUTO resolves
// to INLINE with a standby thread, which must have served the gather: the test also asserts that
// rank 1's statistics count a standby takeover.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "netsparse/netsparse_mpi.h"
#include "stats_json.hpp"

namespace {

constexpr std::uint64_t kRows = 1024;  // per rank
constexpr int kK = 8;
constexpr int kGather = 256;
constexpr double kDefaultComputeS = 4.0;  // rank 1's busy loop
constexpr double kDeadlineS = 2.0;        // each of rank 0's gathers, well inside it

float value(std::uint64_t row, int j) {
  return static_cast<float>(row * 16 + static_cast<std::uint64_t>(j));
}

// Keeps the core busy for `seconds` without any library call; returns something the compiler
// cannot drop.
double compute(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile double acc = 1.0;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 10000; ++i) acc = acc * 1.0000001 + 1e-9;
  }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string mode = argc > 1 ? argv[1] : "auto";
  const double compute_s = argc > 2 ? std::atof(argv[2]) : kDefaultComputeS;
  int failures = 0;
  const auto fail = [&](const std::string& why) {
    std::printf("[rank %d] FAIL: %s\n", rank, why.c_str());
    ++failures;
  };
  if (size != 2 || (mode != "thread" && mode != "inline" && mode != "auto") || !(compute_s >= 1)) {
    if (rank == 0)
      std::printf("serve_computing: FAIL (needs np 2, thread|inline|auto and SECONDS >= 1)\n");
    MPI_Finalize();
    return 1;
  }
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS;
  attr.progress_mode = mode == "thread"   ? NS_PROGRESS_THREAD
                       : mode == "inline" ? NS_PROGRESS_INLINE
                                          : NS_PROGRESS_AUTO;
  ns_context* ctx = nullptr;
  if (ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx) != NS_OK) {
    std::printf("[rank %d] FAIL: ns_open_mpi: %s\n", rank, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::vector<std::uint64_t> offsets = {0, kRows, 2 * kRows};
  std::vector<float> props(kRows * kK);
  for (std::uint64_t r = 0; r < kRows; ++r) {
    for (int j = 0; j < kK; ++j) props[r * kK + j] = value(offsets[rank] + r, j);
  }
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  if (ns_reg_props(ctx, props.data(), kRows, kK * sizeof(float), offsets.data(), &mr) != NS_OK ||
      ns_create_cq(ctx, 4, &cq) != NS_OK || ns_create_qp(ctx, cq, 4, &qp) != NS_OK) {
    std::printf("[rank %d] FAIL: setup: %s\n", rank, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::printf("[rank %d] progress %s (asked %s)\n", rank,
              ns_progress_mode_of(ctx) == NS_PROGRESS_THREAD ? "thread" : "inline", mode.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    const double acc = compute(compute_s);
    std::printf("[rank 1] computed %.1f s without a library call (%g)\n", compute_s, acc);
    if (mode == "auto" && ns_progress_mode_of(ctx) == NS_PROGRESS_INLINE) {
      // Who served rank 0's gather while this rank computed: the standby thread's counter.
      const std::string json = netsparse::test::stats_json_whole(ctx);
      const std::string key = "\"standby_takeovers\":";
      const std::size_t at = json.find(key);
      const unsigned long long takeovers =
          at == std::string::npos ? 0 : std::strtoull(json.c_str() + at + key.size(), nullptr, 10);
      std::printf("[rank 1] standby takeovers %llu\n", takeovers);
      if (takeovers == 0) fail("AUTO resolved to INLINE but no standby thread served the peer");
    }
  } else {
    std::vector<std::uint64_t> idx(kGather);
    for (int i = 0; i < kGather; ++i) idx[i] = kRows + (static_cast<std::uint64_t>(i) * 7) % kRows;
    std::vector<float> out(static_cast<std::size_t>(kGather) * kK);
    const auto start = std::chrono::steady_clock::now();
    const auto since_start = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    int gathers = 0;
    double slowest = 0;
    // Gathers while rank 1 is surely still computing (it started at the barrier, as this loop).
    while (failures == 0 && since_start() < 0.75 * compute_s) {
      std::fill(out.begin(), out.end(), -1.0f);
      ns_send_wr wr{};
      wr.wr_id = static_cast<std::uint64_t>(gathers) + 1;
      wr.opcode = NS_WR_RIG;
      wr.send_flags = NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH;
      wr.wr.rig.mr = mr;
      wr.wr.rig.idx = idx.data();
      wr.wr.rig.count = kGather;
      wr.wr.rig.out = out.data();
      wr.wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
      wr.wr.rig.out_bytes = out.size() * sizeof(float);
      ns_send_wr* bad = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      if (ns_post_send(qp, &wr, &bad) != NS_OK) {
        fail(std::string("ns_post_send: ") + ns_last_error());
        break;
      }
      ns_wc wc{};
      const int n = ns_cq_wait(cq, 1, &wc, static_cast<int>(kDeadlineS * 1000));
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (n != 1) {
        fail("gather " + std::to_string(gathers + 1) +
             " from the computing rank did not complete " + "within " + std::to_string(kDeadlineS) +
             " s (ns_cq_wait returned " + std::to_string(n) + ")");
        // Let it finish once rank 1 serves again, so the teardown below stays clean.
        if (ns_cq_wait(cq, 1, &wc, static_cast<int>((compute_s + 30) * 1000)) != 1)
          fail("the gather never completed");
      }
      if (wc.status != NS_WC_SUCCESS) fail(std::string("status ") + ns_wc_status_str(wc.status));
      int wrong = 0;
      for (int i = 0; i < kGather; ++i) {
        for (int j = 0; j < kK; ++j)
          wrong += out[static_cast<std::size_t>(i) * kK + j] != value(idx[i], j);
      }
      if (wrong != 0) fail(std::to_string(wrong) + " gathered values are wrong");
      ++gathers;
      slowest = std::max(slowest, took);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::printf("[rank 0] %d gathers from the computing rank completed, the slowest in %.3f s\n",
                gathers, slowest);
    if (gathers == 0) fail("no gather ran while rank 1 computed");
  }
  // Rank 0 waits here for rank 1's compute to end.
  if (ns_quiesce(ctx, static_cast<int>((compute_s + 30) * 1000)) != NS_OK)
    fail(std::string("ns_quiesce: ") + ns_last_error());
  ns_destroy_qp(qp);
  ns_destroy_cq(cq);
  ns_dereg_props(mr);
  ns_close(ctx);
  std::printf("[rank %d] %s\n", rank, failures == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("serve_computing: %s\n", total == 0 ? "PASS" : "FAIL");
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
