// A peer SIGKILLed while the survivors READ from it (NS_WR_RDMA_READ, the vanilla path), np 3
// (issue 21.2): every read of the dead peer must complete with an error within the watchdog
// (never a stall), reads of the other survivor must keep succeeding, and teardown must end.
// Usage: test_rig_peer_kill_reads [thread|inline] [finalize]. Same verdict protocol as
// test_rig_peer_exit: rank 0 prints "kill_reads: PASS" (ctest matches it); run under
// orte_enable_recovery.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "netsparse/netsparse.h"
#include "netsparse/netsparse_mpi.h"
#include "peer_failure_harness.hpp"
#include "rig_wr.hpp"

using namespace peerfail;

namespace {

// Rounds posted to the dead victim after its first failed one: every one must fail too.
constexpr int kRoundsAfterDeath = 3;

}  // namespace

int main(int argc, char** argv) {
  const bool inline_progress = argc > 1 && std::strcmp(argv[1], "inline") == 0;
  Job job =
      start_job(argc, argv, inline_progress ? NS_PROGRESS_INLINE : NS_PROGRESS_THREAD, 512, 256);

  if (rank == job.victim) {
    // Serves reads for a while (inline: by polling), then is killed without any teardown.
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kVictimLifetimeMs);
    while (std::chrono::steady_clock::now() < until) {
      if (inline_progress)
        ns_progress(job.ctx);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("[rank %d] victim SIGKILLs itself now\n", rank);
    std::fflush(stdout);
    std::raise(SIGKILL);
  }

  // Reads of the victim's rows and of the partner's, one property each, in chains of kChain.
  constexpr int kChain = 32;
  const auto start = std::chrono::steady_clock::now();
  int rounds_ok = 0, rounds_dead = 0;
  long long worst_wait_ms = 0;
  std::vector<std::uint8_t> out(2 * kChain * kPropBytes);
  std::vector<std::uint64_t> rows(2 * kChain);
  for (int round = 0; round < kMaxRoundsBeforeDeath && rounds_dead <= kRoundsAfterDeath; ++round) {
    std::vector<ns_send_wr> w(2 * kChain);
    for (int j = 0; j < 2 * kChain; ++j) {
      const int owner = j < kChain ? job.victim : job.partner;
      rows[j] = job.offsets[owner] + static_cast<std::uint64_t>((round * 7 + j) % kRowsPerRank);
      w[j] = rigtest::read_wr(static_cast<std::uint64_t>(j), job.mr, rows[j],
                              out.data() + j * kPropBytes, kPropBytes);
      w[j].next = j + 1 < 2 * kChain ? &w[j + 1] : nullptr;
    }
    const auto posted = std::chrono::steady_clock::now();
    if (ns_post_send(job.qp, w.data(), nullptr) != NS_OK) {
      fail(std::string("ns_post_send: ") + ns_last_error());
      break;
    }
    const std::vector<ns_wc> wcs = wait_for(job.cq, 2 * kChain);
    if (static_cast<int>(wcs.size()) != 2 * kChain) break;
    const long long waited_ms = ms_since(posted);
    worst_wait_ms = std::max(worst_wait_ms, waited_ms);
    bool victim_failed = false;
    for (const ns_wc& c : wcs) {
      const auto j = static_cast<std::size_t>(c.wr_id);
      const bool from_victim = j < static_cast<std::size_t>(kChain);
      bool right = true;
      for (std::uint32_t b = 0; b < kPropBytes; ++b)
        right = right && out[j * kPropBytes + b] == prop_byte(rows[j], b);
      if (!from_victim) {
        if (c.status != NS_WC_SUCCESS || !right)
          fail("round " + std::to_string(round) + ": partner read " + ns_wc_status_str(c.status) +
               (right ? "" : " with wrong data"));
      } else if (c.status == NS_WC_SUCCESS) {
        if (rounds_dead > 0)
          fail("a victim read succeeded after its death");
        else if (!right)
          fail("wrong victim data");
      } else {
        if (!is_peer_failure(c.status))
          fail(std::string("victim read completed with ") + ns_wc_status_str(c.status));
        victim_failed = true;
      }
    }
    if (victim_failed) {
      std::printf("[rank %d] round %d: victim reads failed after %lld ms (watchdog %u ms)\n", rank,
                  round, waited_ms, kWatchdogMs);
      ++rounds_dead;
    } else {
      ++rounds_ok;
    }
  }
  // Each round waits at most the watchdog (plus scheduling on a loaded machine).
  if (worst_wait_ms > 4 * static_cast<long long>(kWatchdogMs))
    fail("a round waited " + std::to_string(worst_wait_ms) + " ms, beyond the watchdog");
  if (rounds_ok == 0) fail("no successful read of the victim before its death");
  if (rounds_dead <= kRoundsAfterDeath) fail("victim reads never failed");
  std::printf("[rank %d] %d rounds alive, %d after the kill, worst round %lld ms, %lld ms total\n",
              rank, rounds_ok, rounds_dead, worst_wait_ms, ms_since(start));

  const long long teardown_ms = tear_down(job, [](ns_status_t s) { return s != NS_OK; });
  std::printf("[rank %d] teardown took %lld ms (close: %s)\n", rank, teardown_ms, ns_last_error());
  report_verdict(job, "kill_reads");
  // MPI_Finalize after a peer's death hangs in Open MPI 4.1 (docs/api.md): leave without it.
  // `finalize` as the second argument calls it anyway (to see where it waits).
  if (argc > 2 && std::strcmp(argv[2], "finalize") == 0) {
    std::printf("[rank %d] calling MPI_Finalize\n", rank);
    std::fflush(stdout);
    MPI_Finalize();
    std::printf("[rank %d] MPI_Finalize returned\n", rank);
    std::fflush(stdout);
  }
  _exit(failures == 0 ? 0 : 1);
}
