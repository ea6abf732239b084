// A benchmark's guard against waiting forever: Open MPI 4.1 cannot report a dead rank, so after
// a peer's death the survivors' next MPI collective never returns (the engine's own requests are
// bounded by its watchdog, the benchmark's collectives are not). The guard thread watches a
// heartbeat the benchmark beats at every step; if none comes for `limit`, it prints what was
// being measured and ends the process with exit code 3. NETSPARSE_BENCH_STALL_S overrides the
// limit (0 disables the guard). A rank of this host that dies is seen sooner, by the library's
// watch (ns_watch_host_peers: exit code 4), and so is a peer whose requests time out
// (ns_peer_failed, ns_finalize_or_exit); the heartbeat's limit is for the rest (a rank of
// another host that died while this one waits in an MPI collective, a finalize that hangs).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "config/settings.hpp"

namespace netsparse::bench {

// The benchmarks' exit codes for a job that lost a rank (--help of each benchmark).
inline constexpr int kExitStalled = 3;   // no progress for the stall limit
inline constexpr int kExitPeerDied = 4;  // a peer failed (ns_peer_failed, ns_watch_host_peers)

class StallGuard {
 public:
  StallGuard(const char* program, int rank, std::chrono::seconds limit)
      : program_(program), rank_(rank) {
    // A malformed value throws std::invalid_argument naming the variable (config/settings.hpp).
    if (config::is_set(config::Env::kBenchStallS)) {
      limit = std::chrono::seconds(config::integer(config::Env::kBenchStallS));
    }
    limit_ = limit;
    beat("start");
    if (limit_.count() > 0) thread_ = std::thread([this] { watch(); });
  }
  ~StallGuard() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  StallGuard(const StallGuard&) = delete;
  StallGuard& operator=(const StallGuard&) = delete;

  // The benchmark made progress; `what` says what it is doing now (for the message).
  void beat(const std::string& what) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      what_ = what;
    }
    last_.store(now_ms(), std::memory_order_release);
  }

 private:
  static long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void watch() {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const long long idle = now_ms() - last_.load(std::memory_order_acquire);
      if (idle > static_cast<long long>(limit_.count()) * 1000) {
        std::string what;
        {
          std::lock_guard<std::mutex> lk(mu_);
          what = what_;
        }
        std::fprintf(stderr,
                     "%s: rank %d made no progress for %lld s while %s: a peer probably died (MPI "
                     "cannot report it); giving up (NETSPARSE_BENCH_STALL_S sets the limit)\n",
                     program_, rank_, idle / 1000, what.c_str());
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(kExitStalled);
      }
    }
  }
  const char* program_;
  int rank_;
  std::chrono::seconds limit_{0};
  std::atomic<long long> last_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string what_;
  std::thread thread_;
};

}  // namespace netsparse::bench
