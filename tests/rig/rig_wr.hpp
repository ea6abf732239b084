// The RIG work request every RIG test posts, and the region and queues of a rank (no GoogleTest
// dependency: the standalone MPI test programs use it too).
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "netsparse/netsparse.h"
#include "netsparse/netsparse.hpp"  // detail: work_request and the raw builders

namespace rigtest {

using netsparse::detail::work_request;

// A RIG of idx (read by the engine until completion) into out; INDEXED layouts take the window.
// The tests size every output for what they gather; out_bytes = UINT64_MAX vouches for that
// (tests of the length check set wr.rig.out_bytes themselves).
inline ns_send_wr rig_wr(std::uint64_t id, ns_mr* mr, const std::uint64_t* idx, std::uint64_t count,
                         void* out, int layout = NS_RIG_LAYOUT_POSITIONAL,
                         std::uint64_t window_base = 0, std::uint64_t window_len = 0,
                         unsigned flags = NS_SEND_SIGNALED) {
  return netsparse::detail::rig_wr(id, mr, idx, count, out, UINT64_MAX, layout, window_base,
                                   window_len, flags);
}

inline ns_send_wr rig_wr(std::uint64_t id, ns_mr* mr, const std::vector<std::uint64_t>& idx,
                         void* out, int layout = NS_RIG_LAYOUT_POSITIONAL,
                         std::uint64_t window_base = 0, std::uint64_t window_len = 0,
                         unsigned flags = NS_SEND_SIGNALED) {
  return rig_wr(id, mr, idx.data(), idx.size(), out, layout, window_base, window_len, flags);
}

// A signalled RDMA_READ of row idx into out (out_bytes of it).
inline ns_send_wr read_wr(std::uint64_t id, ns_mr* mr, std::uint64_t idx, void* out,
                          std::uint64_t out_bytes) {
  return netsparse::detail::rdma_read_wr(id, mr, idx, out, out_bytes, NS_SEND_SIGNALED);
}

// A signalled NS_WR_RIS: count rows idx with `values` (values_bytes of them), reduced by op in
// datatype.
inline ns_send_wr ris_wr(std::uint64_t id, ns_mr* mr, const std::uint64_t* idx, std::uint64_t count,
                         const void* values, std::uint64_t values_bytes, int op, int datatype) {
  return netsparse::detail::ris_wr(id, mr, idx, count, values, values_bytes, op, datatype,
                                   NS_SEND_SIGNALED);
}

// A rank's region and the queues it posts on.
struct RankQueues {
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
};

// A rank's context, its region's rows (`block`; `offsets`, the ranks' first rows) and queues.
struct RankRig : RankQueues {
  ns_context* ctx = nullptr;
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint8_t> block;
};

// Registers `block` (rows rows of prop_bytes, `offsets` the ranks' first rows), then creates a
// completion queue of cqe entries and a queue pair of `depth` on it. On a failure prints
// "rank R: setup: <ns_last_error()>" and returns false.
inline bool open_queues(ns_context* ctx, void* block, std::uint64_t rows, std::uint32_t prop_bytes,
                        const std::uint64_t* offsets, int cqe, int depth, int rank, RankQueues* q) {
  if (ns_reg_props(ctx, block, rows, prop_bytes, offsets, &q->mr) != NS_OK ||
      ns_create_cq(ctx, cqe, &q->cq) != NS_OK || ns_create_qp(ctx, q->cq, depth, &q->qp) != NS_OK) {
    std::fprintf(stderr, "rank %d: setup: %s\n", rank, ns_last_error());
    return false;
  }
  return true;
}

}  // namespace rigtest
