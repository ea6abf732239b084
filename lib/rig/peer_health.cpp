#include "rig/peer_health.hpp"

#include "config/settings.hpp"
#include "support/peer_failure.hpp"

namespace netsparse::rig {

namespace {
// NETSPARSE_PRESUME_DEAD_S from the configuration table (validated there), default 20 s. Not
// the watchdog: a peer stopped for longer than a watchdog and resumed must still be quiesced
// with normally (rig.mpi's PeerThatStopsRespondingGivesTimeoutsNotHangs).
std::uint64_t presume_dead_ns_from_env() {
  using netsparse::config::Env;
  if (!netsparse::config::is_set(Env::kPresumeDeadS)) return 20'000'000'000ull;
  return static_cast<std::uint64_t>(netsparse::config::real(Env::kPresumeDeadS) * 1e9);
}
}  // namespace

PeerHealth::PeerHealth(int rank, int size, std::uint64_t now_ns, std::uint64_t presume_dead_ns)
    : rank_(rank),
      size_(size),
      dead_(new std::atomic<bool>[static_cast<std::size_t>(size)]),
      last_heard_ns_(static_cast<std::size_t>(size), now_ns),
      timeouts_seen_(static_cast<std::size_t>(size), 0),
      presume_dead_ns_(presume_dead_ns != 0 ? presume_dead_ns : presume_dead_ns_from_env()),
      failures_at_start_(support::peer_failure_count()) {
  for (int p = 0; p < size_; ++p) dead_[p].store(false);
}

int PeerHealth::check(std::uint64_t now_ns, std::uint64_t timeouts, transport::Transport& tx) {
  int marked = 0;
  const bool waiting = quiesce_waiting_.load(std::memory_order_acquire);
  // A peer failure recorded in this process during this engine's life (a run's bounded
  // collective step gave up, another engine's request timed out): evidence against every
  // silent peer, as a timeout of this engine's own is against the peer it timed out on.
  const bool failed_since = support::peer_failure_count() > failures_at_start_;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || dead(p)) continue;
    const auto i = static_cast<std::size_t>(p);
    const bool presumed = waiting && (timeouts > timeouts_seen_[i] || failed_since) &&
                          now_ns >= last_heard_ns_[i] + presume_dead_ns_;
    if (presumed) tx.note_peer_failed(p);
    if (presumed || tx.peer_failed(p)) {
      mark_dead(p);
      support::record_peer_failure("a peer's process is gone");
      ++marked;
    }
  }
  return marked;
}

}  // namespace netsparse::rig
