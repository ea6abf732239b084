// The end of an MPI program that lost a peer (netsparse_mpi.h): ns_watch_host_peers, a thread
// that ends the process when a rank of its host vanished, and ns_finalize_or_exit, which skips
// MPI_Finalize after a recorded peer failure. Open MPI 4.1 cannot report a dead rank: a survivor
// waits for ever in its next collective with it, and MPI_Finalize frees windows with a barrier
// the dead rank never reaches (docs/api.md, "A peer that died, and MPI_Finalize").
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "netsparse/netsparse_mpi.h"
#include "rig/api_status.hpp"
#include "support/peer_failure.hpp"

namespace {

// A rank of this host: its rank in the watched communicator and its process id.
struct HostRank {
  int rank = 0;
  int pid = 0;
};

constexpr auto kWatchPeriod = std::chrono::milliseconds(200);

// The process is gone: kill(pid, 0) fails with ESRCH (it exited and was reaped), or it is a
// zombie (exited; its parent has not reaped it yet, or it was orphaned in a container whose
// init does not reap).
bool process_gone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;  // no /proc: kill() alone decides
  char state = 0;
  // "pid (comm) state ...": comm may hold spaces and parentheses; the state follows the last ')'.
  char line[512];
  const std::size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  line[n] = '\0';
  if (const char* close = std::strrchr(line, ')'); close != nullptr && close[1] == ' ') {
    state = close[2];
  }
  return state == 'Z';
}

class HostWatch {
 public:
  HostWatch(int rank, std::vector<HostRank> others, int exit_code)
      : rank_(rank), others_(std::move(others)), exit_code_(exit_code) {
    thread_ = std::thread([this] { run(); });
  }
  ~HostWatch() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HostWatch(const HostWatch&) = delete;
  HostWatch& operator=(const HostWatch&) = delete;

 private:
  // Sleeps between checks (a condition variable, so stopping it is immediate): costs no core.
  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, kWatchPeriod, [this] { return stop_; })) {
      for (const HostRank& r : others_) {
        if (r.pid <= 0 || !process_gone(r.pid)) continue;
        netsparse::support::record_peer_failure("a rank of this host died");
        std::fflush(stdout);
        std::fprintf(stderr,
                     "netsparse (rank %d): rank %d of this host (pid %d) is gone: a peer died; "
                     "leaving without MPI_Finalize, exit code %d\n",
                     rank_, r.rank, r.pid, exit_code_);
        std::fflush(stderr);
        _exit(exit_code_);
      }
    }
  }

  int rank_;
  std::vector<HostRank> others_;
  int exit_code_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

std::mutex g_watch_mu;
HostWatch* g_watch = nullptr;  // guarded by g_watch_mu; one per process

void stop_watch() {
  std::lock_guard<std::mutex> lk(g_watch_mu);
  delete g_watch;
  g_watch = nullptr;
}

// MPI runs the delete callbacks of MPI_COMM_SELF's attributes at the very start of MPI_Finalize
// (the library's finalize hook does the same): a program that calls MPI_Finalize itself stops
// the watch there, before the other ranks may leave normally.
int stop_watch_at_finalize(MPI_Comm, int, void*, void*) {
  stop_watch();
  return MPI_SUCCESS;
}

void stop_watch_at_finalize_once() {
  static const bool registered = [] {
    int key = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_watch_at_finalize, &key, nullptr) !=
        MPI_SUCCESS) {
      return false;
    }
    return MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr) == MPI_SUCCESS;
  }();
  (void)registered;
}

}  // namespace

extern "C" ns_status_t ns_watch_host_peers(MPI_Comm comm, int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0 || finalized != 0) {
    return netsparse::rig::fail("ns_watch_host_peers", NS_ERR_STATE, "MPI is not initialized");
  }
  // Collective first, so a refusal below never leaves the others waiting in it.
  MPI_Comm host = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) != MPI_SUCCESS) {
    return netsparse::rig::fail("ns_watch_host_peers", NS_ERR_TRANSPORT,
                                "MPI_Comm_split_type failed");
  }
  int rank = 0, n = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(host, &n);
  const HostRank mine{rank, static_cast<int>(getpid())};
  std::vector<HostRank> all(static_cast<std::size_t>(n));  // sized by the host's ranks
  const int rc = MPI_Allgather(&mine, 2, MPI_INT, all.data(), 2, MPI_INT, host);
  MPI_Comm_free(&host);
  if (rc != MPI_SUCCESS) {
    return netsparse::rig::fail("ns_watch_host_peers", NS_ERR_TRANSPORT, "MPI_Allgather failed");
  }
  std::vector<HostRank> others;
  for (const HostRank& r : all) {
    if (r.rank != rank) others.push_back(r);
  }
  stop_watch_at_finalize_once();
  std::lock_guard<std::mutex> lk(g_watch_mu);
  if (g_watch != nullptr) {
    return netsparse::rig::fail("ns_watch_host_peers", NS_ERR_STATE,
                                "this process already watches its host's ranks");
  }
  try {
    g_watch = new HostWatch(rank, std::move(others), exit_code);
  } catch (...) {
    return netsparse::rig::fail("ns_watch_host_peers", NS_ERR_NO_MEMORY,
                                "cannot start the watch thread");
  }
  return NS_OK;
}

extern "C" int ns_finalize_or_exit(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (netsparse::support::peer_failure_recorded()) {
    int rank = -1, initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized != 0 && finalized == 0) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr,
                 "netsparse (rank %d): a peer failed (%s); leaving without MPI_Finalize, exit "
                 "code %d\n",
                 rank, netsparse::support::peer_failure_what().c_str(), exit_code);
    std::fflush(stderr);
    _exit(exit_code);
  }
  // The other ranks may leave before this one from here on: no longer a failure.
  stop_watch();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
  return exit_code;
}
