// What this node knows about the liveness of its peers: the dead flags every unit reads on its
// hot path (UnitPort::dead), the transport's own failure reports, and the presume-dead rule for
// transports that cannot see a dead process. The engine calls it from the thread that steps it;
// only the flags are read elsewhere (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/transport.hpp"

namespace netsparse::rig {

class PeerHealth {
 public:
  // presume_dead_ns: see check(); 0 takes NETSPARSE_PRESUME_DEAD_S (default 20 s).
  PeerHealth(int rank, int size, std::uint64_t now_ns, std::uint64_t presume_dead_ns = 0);

  bool dead(int p) const noexcept { return dead_[p].load(std::memory_order_relaxed); }
  // The flags, for the units' port (size entries).
  std::atomic<bool>* flags() noexcept { return dead_.get(); }
  void mark_dead(int p) noexcept { dead_[p].store(true, std::memory_order_relaxed); }

  // A valid frame from p arrived; `timeouts` is this node's watchdog count at that moment.
  void heard_from(int p, std::uint64_t now_ns, std::uint64_t timeouts) noexcept {
    last_heard_ns_[static_cast<std::size_t>(p)] = now_ns;
    timeouts_seen_[static_cast<std::size_t>(p)] = timeouts;
  }

  // A teardown quiesce is waiting: only then may a silent peer be presumed dead.
  void set_quiesce_waiting(bool waiting) noexcept {
    quiesce_waiting_.store(waiting, std::memory_order_release);
  }

  // Once per watchdog tick: peers the transport reports failed are marked dead, and, while a
  // teardown quiesce waits, a peer that this node timed out on since it last heard from it (or
  // any silent peer, once a peer failure was recorded in this process during this node's life:
  // support/peer_failure.hpp) and that stayed silent for presume_dead_ns is presumed dead
  // (soft-RoCE drops packets to a vanished QP without an RC retry error, and MPI between hosts
  // reports nothing, so nothing else would ever tell). A late live peer is never presumed dead
  // unless a failure was seen and it stayed silent that long. Returns the number of peers newly
  // marked dead.
  int check(std::uint64_t now_ns, std::uint64_t timeouts, transport::Transport& tx);

 private:
  const int rank_;
  const int size_;
  std::unique_ptr<std::atomic<bool>[]> dead_;
  std::vector<std::uint64_t> last_heard_ns_;
  std::vector<std::uint64_t> timeouts_seen_;  // per peer: the timeout count when last heard
  std::atomic<bool> quiesce_waiting_{false};
  std::uint64_t presume_dead_ns_;
  std::uint64_t failures_at_start_;  // support::peer_failure_count() at construction
};

}  // namespace netsparse::rig
