// A RIG server unit (MICRO '25 §5.4): answers the read PRs of one packet from the registered
// region, never reading outside it — an idx outside this node's rows is refused with a
// payload-free kInvalid PR. Each packet is decoded once, by the engine, before it gets here;
// the unit runs inside the transport's receive handler (responses only go into concatenation
// queues, the outbox sends later), so received bytes are never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "concat/gather_wire.hpp"
#include "concat/protocol.hpp"
#include "rig/counters.hpp"
#include "rig/port.hpp"
#include "rig/row_packing.hpp"

namespace netsparse::rig {

struct ServerCounters {
  std::uint64_t packets = 0, answered = 0, invalid = 0, malformed_prs = 0;
  std::uint64_t compact_packets = 0, compact_bytes = 0;  // rows and refusals sent, as sent
  std::uint64_t rows_queued = 0;  // compact-read rows packed into the outbox's queue, not the
                                  // transport's memory (every row where it lends none)
  template <class Self>
  static auto fields(Self& s) {
    return std::tie(s.packets, s.answered, s.invalid, s.malformed_prs, s.compact_packets,
                    s.compact_bytes, s.rows_queued);
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
  // Otherwise the rows are packed straight into the outbox's frames, in the read's order; where
  // the transport lends its memory and has no more room now, the rest of the read's rows are
  // kept (copied out of the received frame) and packed by serve() at later steps.
  // Returns rows answered.
  std::size_t serve_compact(std::uint32_t src, const concat::GatherPacket& pkt);
  // Packs more of the reads still being answered; returns packets packed.
  std::size_t serve();
  bool serving() const noexcept { return !answering_.empty(); }
  // The region is going (deregistered): what is left of each read is refused, never read.
  void region_changed();
  ServerCounters counters;

 private:
  // A compact read being answered (row_packing.hpp): rows [next, n) still to pack, kept from
  // position `base` of the read on.
  struct Answering {
    std::uint32_t dest;
    concat::GatherHeader read;
    std::size_t base;
    std::size_t next;
    std::vector<std::uint64_t> rows;
  };
  // Packs rows [next, read.n) of a read from dest (row_at(k): the k-th row) until done (true)
  // or the transport has no room now (false); next advances past what was packed.
  template <class RowAt>
  bool pack_read(std::uint32_t dest, const concat::GatherHeader& read, std::size_t& next,
                 RowAt&& row_at);
  void refuse(std::uint32_t dest, const concat::GatherHeader& read, std::uint32_t bad);

  const UnitPort& port_;
  AnswerQueue<Answering> answering_;
};

}  // namespace netsparse::rig
