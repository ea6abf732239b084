// A RIG server unit (MICRO '25 §5.4): answers the read PRs of one packet from the registered
// region, never reading outside it — an idx outside this node's rows is refused with a
// payload-free kInvalid PR. Each packet is decoded once, by the engine, before it gets here;
// the unit runs inside the transport's receive handler (responses only go into concatenation
// queues, the outbox sends later), so received bytes are never copied.
#pragma once

#include <cstddef>
#include <cstdint>

#include "concat/gather_wire.hpp"
#include "concat/protocol.hpp"
#include "rig/counters.hpp"
#include "rig/port.hpp"

namespace netsparse::rig {

struct ServerCounters {
  std::uint64_t packets = 0, answered = 0, invalid = 0, malformed_prs = 0;
  std::uint64_t compact_packets = 0, compact_bytes = 0;  // rows and refusals sent, as sent
  template <class Self>
  static auto fields(Self& s) {
    return std::tie(s.packets, s.answered, s.invalid, s.malformed_prs, s.compact_packets,
                    s.compact_bytes);
  }
  void add(const ServerCounters& o) { add_counters(*this, o); }
};

class ServerUnit {
 public:
  explicit ServerUnit(const UnitPort& port) : port_(port) {}
  // Answers every PR of a validated kRead packet; returns PRs answered.
  std::size_t serve(const concat::PacketView& v, std::uint64_t now);
  // Answers a validated compact read from node src (gather_wire.hpp): every row is checked
  // against this node's rows first; one outside refuses the whole read and nothing is read.
  // Otherwise the rows are packed straight into the outbox's frames, in the read's order.
  // Returns rows answered.
  std::size_t serve_compact(std::uint32_t src, const concat::GatherPacket& pkt);
  ServerCounters counters;

 private:
  const UnitPort& port_;
};

}  // namespace netsparse::rig
