// The quiesce protocol (docs/architecture.md): before a node may stop serving (block in a
// collective, deregister its region), every live node must be done with it. Each node, once it
// has no work request in flight and has flushed what it queued, sends each peer a control PR
// "done with round r"; a round is complete on a node when its own "done" has left and every live
// peer's has arrived. Rounds are numbered so that repeated quiesces (one per kernel run) never
// mix. The application asks (request), the engine thread sends and receives.
//
// Peers of a round (ns_quiesce_peers): by default every node tells every other and waits for
// all of them, O(nodes) control PRs per node and round. An application that knows its pattern
// names them instead: tell = the nodes it posts requests to, wait_for = the nodes that post
// requests to it; a round then costs each node one control PR per pattern peer (issue 34: a run's
// control traffic grows with the neighbours, not with the job).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace netsparse::rig {

// A control PR's req_id says which message it is and idx carries its argument; src_unit is 0.
// kControlQuiesceDone: src_node has finished quiesce round `idx`. Any other req_id is malformed.
inline constexpr std::uint32_t kControlQuiesceDone = 0;

class Quiesce {
 public:
  explicit Quiesce(int nodes) : done_from_(new std::atomic<std::uint64_t>[nodes]), nodes_(nodes) {
    for (int p = 0; p < nodes; ++p) done_from_[p].store(0);
  }
  // Application: starts a round unless one is started and not yet waited for (split phase:
  // ns_quiesce_start, then ns_quiesce); returns it.
  std::uint64_t start() noexcept {
    const std::uint64_t r = requested_.load();
    if (r > waited_) return r;
    requested_.store(r + 1, std::memory_order_release);
    return r + 1;
  }
  // Application: the round started and not yet waited for, or 0.
  std::uint64_t announced() const noexcept {
    const std::uint64_t r = requested_.load(std::memory_order_relaxed);
    return r > waited_ ? r : 0;
  }
  // Application: the round is complete here (or abandoned by a failure).
  void waited(std::uint64_t r) noexcept { waited_ = r; }
  // Engine thread: the round to announce now, or 0.
  std::uint64_t to_send() const noexcept {
    const std::uint64_t want = requested_.load(std::memory_order_acquire);
    return want > sent_.load(std::memory_order_relaxed) ? want : 0;
  }
  void sent(std::uint64_t round) noexcept { sent_.store(round, std::memory_order_release); }
  // Engine thread, once the outbox is empty: our announcements have left.
  void left() noexcept {
    const std::uint64_t s = sent_.load(std::memory_order_relaxed);
    if (s > out_.load(std::memory_order_relaxed)) out_.store(s, std::memory_order_release);
  }
  void received(int peer, std::uint64_t round) noexcept {
    auto& d = done_from_[peer];
    if (round > d.load(std::memory_order_relaxed)) d.store(round, std::memory_order_release);
  }
  // Is round r complete here? `dead(p)` excludes peers known to have failed.
  template <class Dead>
  bool complete(std::uint64_t r, int self, Dead&& dead) const {
    if (out_.load(std::memory_order_acquire) < r) return false;
    const auto waits_for = [&](int p) {
      return p == self || dead(p) || done_from_[p].load(std::memory_order_acquire) >= r;
    };
    if (all_peers_) {
      for (int p = 0; p < nodes_; ++p) {
        if (!waits_for(p)) return false;
      }
      return true;
    }
    for (const int p : wait_for_) {
      if (!waits_for(p)) return false;
    }
    return true;
  }

  // The peers of the next rounds (caller: the application, with the engine's step lock and the
  // quiesce lock held, between rounds). all_peers(): every node, the default.
  void set_peers(std::vector<int> tell, std::vector<int> wait_for) {
    tell_ = std::move(tell);
    wait_for_ = std::move(wait_for);
    all_peers_ = false;
  }
  void all_peers() noexcept {
    all_peers_ = true;
    tell_.clear();
    wait_for_.clear();
  }
  bool every_peer() const noexcept { return all_peers_; }
  // Engine thread (step lock): the nodes this round's "done" goes to, when not every node.
  const std::vector<int>& told() const noexcept { return tell_; }

 private:
  std::atomic<std::uint64_t> requested_{0};
  std::atomic<std::uint64_t> sent_{0};
  std::atomic<std::uint64_t> out_{0};  // sent and handed to the transport
  std::uint64_t waited_ = 0;           // application side (under the engine's quiesce lock)
  std::unique_ptr<std::atomic<std::uint64_t>[]> done_from_;
  int nodes_;
  bool all_peers_ = true;
  std::vector<int> tell_, wait_for_;
};

}  // namespace netsparse::rig
