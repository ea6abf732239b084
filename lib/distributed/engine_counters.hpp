// The RIG engine's counters a run reads before and after it (RigEngine or the host leaders'
// Context of netsparse-node).
#pragma once

#include <cstdint>

#include "netsparse/netsparse.h"

namespace netsparse::dist {

// The engine's counters a run reads before and after, from RigEngine::stat or Context::stat
// (netsparse-node's leader engine). Plan traffic (replays) is counted with the paper's 50 B
// upper-layer model per packet, like the RIG packets, so wire bytes compare across modes; each
// replayed row is a property received.
struct EngineCounters {
  std::uint64_t wire = 0, packets = 0, frames = 0, prs_sent = 0, rdma_reads = 0, plan_rows = 0;
  template <class Engine>
  static EngineCounters read(const Engine& e) {
    EngineCounters c;
    c.wire = e.stat(NS_STAT_WIRE_BYTES) + e.stat(NS_STAT_PLAN_WIRE_BYTES);
    c.packets = e.stat(NS_STAT_READ_PACKETS) + e.stat(NS_STAT_RESPONSE_PACKETS) +
                e.stat(NS_STAT_PLAN_PACKETS);
    c.frames = e.stat(NS_STAT_FRAMES);
    c.prs_sent = e.stat(NS_STAT_PRS_SENT);
    c.rdma_reads = e.stat(NS_STAT_RDMA_READS);
    c.plan_rows = e.stat(NS_STAT_PLAN_ROWS);
    return c;
  }
};

}  // namespace netsparse::dist
