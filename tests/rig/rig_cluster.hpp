// The in-process cluster the RIG engine tests run on (one thread per node: open, register,
// queues, the test's body, teardown) and the checks they share. Written once, used by every
// in-process test file of tests/rig.
#pragma once

#include <gtest/gtest.h>

#include <barrier>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "netsparse/netsparse.h"
#include "rig_test_util.hpp"
#include "rig_wr.hpp"

namespace rigtest {

struct Node {
  int rank = 0;
  int nodes = 0;
  std::uint32_t P = 0;
  std::uint64_t total = 0;
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint8_t> block;
  ns_context* ctx = nullptr;
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  std::barrier<>* sync = nullptr;
};

struct ClusterOptions {
  int nodes = 2;
  std::uint32_t P = 8;
  std::vector<std::uint64_t> offsets;  // empty: equal blocks of 200 rows per node
  ns_context_attr attr{};
  int qp_depth = 64;
  int cqe = 256;
  // Nodes that close after a peer failure release their region locally and say so.
  bool expect_local_close = false;
  std::uint32_t mr_flags = 0;  // ns_reg_props_ex flags (0: ns_reg_props)
};

// Runs fn on every node, each in its own thread, between open/register and teardown.
inline void run_cluster(const ClusterOptions& o, const std::function<void(Node&)>& fn,
                        ns_fabric** fabric_out = nullptr,
                        const std::function<void(ns_fabric*)>& on_fabric = {}) {
  ns_fabric* fabric = nullptr;
  ASSERT_EQ(ns_fabric_create(o.nodes, &fabric), NS_OK);
  if (fabric_out != nullptr) *fabric_out = fabric;
  if (on_fabric) on_fabric(fabric);
  const std::vector<std::uint64_t> offsets =
      o.offsets.empty() ? equal_offsets(o.nodes, 200ull * static_cast<std::uint64_t>(o.nodes))
                        : o.offsets;
  std::barrier<> sync(o.nodes);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.nodes; ++r) {
    threads.emplace_back([&, r] {
      Node n;
      n.rank = r;
      n.nodes = o.nodes;
      n.P = o.P;
      n.offsets = offsets;
      n.total = offsets.back();
      n.sync = &sync;
      n.block = make_block(offsets[r], offsets[r + 1], o.P);
      ns_status_t s = ns_open_inproc(fabric, r, &o.attr, &n.ctx);
      EXPECT_EQ(s, NS_OK) << ns_last_error();
      if (s != NS_OK) return;
      s = o.mr_flags == 0 ? ns_reg_props(n.ctx, n.block.data(), offsets[r + 1] - offsets[r], o.P,
                                         offsets.data(), &n.mr)
                          : ns_reg_props_ex(n.ctx, n.block.data(), offsets[r + 1] - offsets[r], o.P,
                                            offsets.data(), o.mr_flags, &n.mr);
      EXPECT_EQ(s, NS_OK) << ns_last_error();
      EXPECT_EQ(ns_create_cq(n.ctx, o.cqe, &n.cq), NS_OK) << ns_last_error();
      EXPECT_EQ(ns_create_qp(n.ctx, n.cq, o.qp_depth, &n.qp), NS_OK) << ns_last_error();
      fn(n);
      EXPECT_EQ(ns_destroy_qp(n.qp), NS_OK) << ns_last_error();
      EXPECT_EQ(ns_destroy_cq(n.cq), NS_OK) << ns_last_error();
      const ns_status_t closed = ns_close(n.ctx);
      if (o.expect_local_close) {
        EXPECT_TRUE(closed == NS_ERR_TRANSPORT || closed == NS_OK) << ns_last_error();
      } else {
        EXPECT_EQ(closed, NS_OK) << ns_last_error();
      }
    });
  }
  for (auto& t : threads) t.join();
  ns_fabric_destroy(fabric);
}

inline ns_send_wr rig(std::uint64_t id, ns_mr* mr, const std::vector<std::uint64_t>& idx, void* out,
                      int layout, std::uint64_t base = 0, std::uint64_t len = 0,
                      unsigned flags = NS_SEND_SIGNALED) {
  return rigtest::rig_wr(id, mr, idx, out, layout, base, len, flags);
}

inline void chain(std::vector<ns_send_wr>& wrs) {
  for (std::size_t k = 0; k + 1 < wrs.size(); ++k) wrs[k].next = &wrs[k + 1];
  if (!wrs.empty()) wrs.back().next = nullptr;
}

constexpr std::uint8_t kSentinel = 0xEE;

// Checks an INDEXED output (window [base, base+len)): requested rows hold their property,
// every other row still holds the sentinel (nothing was written out of place).
inline void check_indexed(const std::vector<std::uint8_t>& out, std::uint64_t base,
                          std::uint64_t len, const std::set<std::uint64_t>& rows, std::uint32_t P,
                          int rank) {
  int errors = 0;
  for (std::uint64_t r = base; r < base + len && errors < 5; ++r) {
    const std::uint8_t* p = out.data() + (r - base) * P;
    if (rows.count(r) != 0) {
      const std::string e = check_prop(p, r, P);
      if (!e.empty()) {
        ADD_FAILURE() << "node " << rank << ": " << e;
        ++errors;
      }
    } else {
      for (std::uint32_t b = 0; b < P; ++b) {
        if (p[b] != kSentinel) {
          ADD_FAILURE() << "node " << rank << ": row " << r << " not requested but written";
          ++errors;
          break;
        }
      }
    }
  }
}

inline void check_positional(const std::vector<std::uint8_t>& out,
                             const std::vector<std::uint64_t>& idx, std::uint32_t P, int rank) {
  int errors = 0;
  for (std::size_t j = 0; j < idx.size() && errors < 5; ++j) {
    const std::string e = check_prop(out.data() + j * P, idx[j], P);
    if (!e.empty()) {
      ADD_FAILURE() << "node " << rank << " position " << j << ": " << e;
      ++errors;
    }
  }
}

// A RIG of idx in `layout` into out, refilled with the sentinel first: an INDEXED gather into
// the whole table's window [0, n.total), a POSITIONAL one into idx.size() rows.
inline ns_send_wr gather_into(const Node& n, std::uint64_t id,
                              const std::vector<std::uint64_t>& idx, std::vector<std::uint8_t>& out,
                              int layout) {
  if (layout == NS_RIG_LAYOUT_INDEXED) {
    out.assign(n.total * n.P, kSentinel);
    return rig(id, n.mr, idx, out.data(), layout, 0, n.total);
  }
  out.assign(idx.size() * n.P, kSentinel);
  return rig(id, n.mr, idx, out.data(), layout);
}

// Checks what a gather_into of idx in `layout` wrote (check_indexed / check_positional).
inline void check_gathered(const Node& n, const std::vector<std::uint8_t>& out,
                           const std::vector<std::uint64_t>& idx, int layout) {
  if (layout == NS_RIG_LAYOUT_INDEXED) {
    check_indexed(out, 0, n.total, std::set<std::uint64_t>(idx.begin(), idx.end()), n.P, n.rank);
  } else {
    check_positional(out, idx, n.P, n.rank);
  }
}

inline ns_context_attr make_attr(int progress, std::uint32_t flags) {
  ns_context_attr a{};
  a.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_FLAGS | NS_CTX_ATTR_WATCHDOG;
  a.progress_mode = progress;
  a.flags = flags;
  a.watchdog_ms = 20000;  // generous: a loaded CI machine must not time out a healthy gather
  return a;
}

// Stats identities that hold on every node, and across nodes after everyone quiesced.
inline void check_stats_after_quiesce(std::vector<ns_context*>& ctxs, std::uint32_t flags) {
  std::uint64_t sent = 0, served = 0;
  for (ns_context* c : ctxs) {
    const auto req = stat(c, NS_STAT_PRS_REQUESTED);
    EXPECT_EQ(req, stat(c, NS_STAT_PRS_FILTERED) + stat(c, NS_STAT_PRS_COALESCED) +
                       stat(c, NS_STAT_PRS_LOCAL) + stat(c, NS_STAT_PRS_SENT));
    EXPECT_EQ(stat(c, NS_STAT_HEADER_BYTES) + stat(c, NS_STAT_PAYLOAD_BYTES),
              stat(c, NS_STAT_WIRE_BYTES));
    EXPECT_EQ(stat(c, NS_STAT_READ_BYTES) + stat(c, NS_STAT_RESPONSE_BYTES),
              stat(c, NS_STAT_WIRE_BYTES));
    EXPECT_EQ(stat(c, NS_STAT_INVALID_PRS), 0u);
    EXPECT_EQ(stat(c, NS_STAT_MALFORMED), 0u);
    EXPECT_EQ(stat(c, NS_STAT_TIMEOUTS), 0u);
    if (flags & NS_CTX_NO_FILTER) {
      EXPECT_EQ(stat(c, NS_STAT_PRS_FILTERED), 0u);
    }
    if (flags & NS_CTX_NO_COALESCE) {
      EXPECT_EQ(stat(c, NS_STAT_PRS_COALESCED), 0u);
    }
    if (flags & NS_CTX_NO_CONCAT) {
      EXPECT_DOUBLE_EQ(ns_stat_prs_per_packet(c), 1.0);
    }
    sent += stat(c, NS_STAT_PRS_SENT);
    served += stat(c, NS_STAT_SERVER_PRS);
  }
  EXPECT_EQ(sent, served) << "read PRs sent must equal read PRs answered, summed over nodes";
}

// How a test collects n completions of a CQ (wait_completions, or a polling loop).
using CompletionWaiter = std::vector<ns_wc> (*)(ns_cq* cq, std::size_t n);
inline std::vector<ns_wc> wait_for_completions(ns_cq* cq, std::size_t n) {
  return wait_completions(cq, n);
}

// idx gathered twice in one chain, POSITIONAL and INDEXED over every row, each expected to
// succeed; returns the two outputs one after the other (POSITIONAL first).
inline std::vector<std::uint8_t> gather_both_layouts(const Node& n,
                                                     const std::vector<std::uint64_t>& idx,
                                                     CompletionWaiter wait = wait_for_completions) {
  std::vector<std::uint8_t> pos(idx.size() * n.P, kSentinel), ind(n.total * n.P, kSentinel);
  std::vector<ns_send_wr> w{rig(1, n.mr, idx, pos.data(), NS_RIG_LAYOUT_POSITIONAL),
                            rig(2, n.mr, idx, ind.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total)};
  chain(w);
  EXPECT_EQ(ns_post_send(n.qp, w.data(), nullptr), NS_OK) << ns_last_error();
  for (const ns_wc& wc : wait(n.cq, 2)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
  pos.insert(pos.end(), ind.begin(), ind.end());
  return pos;
}

// `nodes` nodes of P-byte properties opened with `attr` (the other options at their defaults).
inline ClusterOptions cluster_options(int nodes, std::uint32_t P, const ns_context_attr& attr) {
  ClusterOptions o;
  o.nodes = nodes;
  o.P = P;
  o.attr = attr;
  return o;
}

// How a node dies in a failure test: silently (ns_fabric_kill_node: its requests are never
// answered and nothing reports it, like a soft-RoCE peer that vanished) or reported
// (ns_fabric_kill_node_reported: like a verbs QP error or an intra-host process check).
enum class Death { kSilent, kReported };

// A cluster of `nodes` (P-byte properties, progress thread, the given watchdog) in which node
// `victim` dies before `survivor` runs on every other node. The victim's thread keeps the
// barrier count; a silent death is reported once every survivor is done (the transport's
// detection, at last), so teardown excludes the dead node instead of waiting for it (no timeout
// decides that a peer is gone).
inline void run_cluster_with_dead_node(int nodes, std::uint32_t P, std::uint32_t watchdog_ms,
                                       int victim, Death death,
                                       const std::function<void(Node&)>& survivor) {
  ClusterOptions o = cluster_options(nodes, P, make_attr(NS_PROGRESS_THREAD, 0));
  o.expect_local_close = true;
  o.attr.watchdog_ms = watchdog_ms;
  ns_fabric* fabric = nullptr;
  run_cluster(
      o,
      [&](Node& n) {
        n.sync->arrive_and_wait();
        if (n.rank == victim) {
          EXPECT_EQ(death == Death::kSilent ? ns_fabric_kill_node(fabric, victim)
                                            : ns_fabric_kill_node_reported(fabric, victim),
                    NS_OK);
        }
        n.sync->arrive_and_wait();
        if (n.rank != victim) survivor(n);
        n.sync->arrive_and_wait();
        if (death == Death::kSilent && n.rank == (victim == 0 ? 1 : 0)) {
          EXPECT_EQ(ns_fabric_kill_node_reported(fabric, victim), NS_OK);
        }
      },
      &fabric);
}

}  // namespace rigtest
