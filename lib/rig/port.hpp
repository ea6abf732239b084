// What the RIG units see of their engine: plain data read on the hot path (this node, the
// peers known dead, the concatenation point, the region) and one narrow interface to hand back
// finished commands. Units never hold the Engine itself.
#pragma once

#include <atomic>
#include <cstdint>

#include "concat/concat_point.hpp"

namespace netsparse::rig {

struct Command;
class Region;
class Outbox;

class CommandSink {
 public:
  // The command is done (its status is final): completion entry, slot release.
  virtual void complete(Command& c) = 0;
  virtual void note_timeout() noexcept = 0;
  virtual void note_failure() noexcept = 0;

 protected:
  ~CommandSink() = default;
};

struct UnitPort {
  std::uint32_t rank = 0;
  std::uint32_t size = 1;
  std::atomic<bool>* dead = nullptr;      // [size]: peers known to have failed (PeerHealth's flags)
  concat::ConcatPoint* concat = nullptr;  // set while a region is registered
  Region* region = nullptr;               // likewise
  Outbox* outbox = nullptr;  // where units build compact packets in place (gather_wire.hpp)
  CommandSink* sink = nullptr;

  bool peer_dead(std::uint32_t p) const noexcept { return dead[p].load(std::memory_order_relaxed); }
  // A unit learned from the transport that p failed.
  void mark_dead(std::uint32_t p) const noexcept { dead[p].store(true, std::memory_order_relaxed); }
};

}  // namespace netsparse::rig
