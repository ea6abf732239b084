// RIG engine on in-process fabrics, continued (test_rig_inproc.cpp): engine v2's filter paths
// against reference counts, quiesce, reads to a silently dead peer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "netsparse/netsparse.h"
#include "rig_cluster.hpp"
#include "rig_test_util.hpp"
#include "rig_wr.hpp"

using namespace rigtest;

// ---- engine v2: the filter paths against a reference count ------------------------------------
// One work request of a duplicated stream, on every path the engine has for it: INDEXED on the
// row filter, INDEXED in a window of another mapping (per-WR de-duplication), POSITIONAL
// (per-WR), each with the ablation flags. Every path writes the same bytes, and the statistics
// follow from the stream alone: with filtering or coalescing each distinct remote idx is sent
// once, without both every occurrence is.
TEST(EngineSemantics, EveryPathAgreesWithTheReferenceCounts) {
  for (std::uint32_t flags : {0u, static_cast<std::uint32_t>(NS_CTX_NO_FILTER),
                              static_cast<std::uint32_t>(NS_CTX_NO_COALESCE),
                              static_cast<std::uint32_t>(NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE)}) {
    for (int path = 0; path < 3; ++path) {  // 0 row filter, 1 other mapping, 2 positional
      ClusterOptions o;
      o.nodes = 3;
      o.P = 12;
      o.attr = make_attr(NS_PROGRESS_THREAD, flags);
      run_cluster(o, [&](Node& n) {
        const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 3000, 40, 77 + n.rank);
        const std::uint64_t own_begin = n.offsets[n.rank], own_end = n.offsets[n.rank + 1];
        std::set<std::uint64_t> distinct_remote, distinct_local;
        std::uint64_t remote = 0, local = 0;
        for (std::uint64_t i : idx) {
          const bool own = i >= own_begin && i < own_end;
          (own ? distinct_local : distinct_remote).insert(i);
          (own ? local : remote) += 1;
        }
        std::vector<std::uint8_t> out((path == 2 ? idx.size() : n.total) * n.P, kSentinel);
        if (path == 1) {
          // Claim the epoch's mapping with another buffer first (same window): this request
          // then de-duplicates within itself only.
          std::vector<std::uint8_t> other(n.total * n.P, kSentinel);
          const std::vector<std::uint64_t> one = {idx[0]};
          auto w0 = rig(9, n.mr, one, other.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total,
                        NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH);
          ASSERT_EQ(ns_post_send(n.qp, &w0, nullptr), NS_OK) << ns_last_error();
          for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
          ns_stats_reset(n.ctx);
        }
        auto w = path == 2 ? rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL)
                           : rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total,
                                 NS_SEND_SIGNALED | (path == 0 ? unsigned{NS_SEND_NEW_EPOCH} : 0u));
        ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK) << ns_last_error();
        for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
        check_gathered(n, out, idx, path == 2 ? NS_RIG_LAYOUT_POSITIONAL : NS_RIG_LAYOUT_INDEXED);
        const bool dedup = (flags & (NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE)) !=
                           (NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE);
        const std::string where = "flags " + std::to_string(flags) + " path " +
                                  std::to_string(path) + " node " + std::to_string(n.rank);
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_REQUESTED), idx.size()) << where;
        if (!dedup) {
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), remote) << where;
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_LOCAL), local) << where;
        } else if (flags == 0) {
          // Both mechanisms: each distinct remote idx leaves exactly once.
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), distinct_remote.size()) << where;
          // The row filter also drops repeated local idxs; per-WR paths copy each occurrence.
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_LOCAL), path == 0 ? distinct_local.size() : local)
              << where;
        } else {
          // One mechanism: each distinct remote idx at least once, never more than it occurs.
          EXPECT_GE(stat(n.ctx, NS_STAT_PRS_SENT), distinct_remote.size()) << where;
          EXPECT_LE(stat(n.ctx, NS_STAT_PRS_SENT), remote) << where;
        }
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_REQUESTED),
                  stat(n.ctx, NS_STAT_PRS_FILTERED) + stat(n.ctx, NS_STAT_PRS_COALESCED) +
                      stat(n.ctx, NS_STAT_PRS_LOCAL) + stat(n.ctx, NS_STAT_PRS_SENT))
            << where;
        if (flags & NS_CTX_NO_FILTER) {
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_FILTERED), 0u) << where;
        }
        if (flags & NS_CTX_NO_COALESCE) {
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_COALESCED), 0u) << where;
        }
        n.sync->arrive_and_wait();
      });
    }
  }
}

// NS_SEND_REMOTE_ONLY: a raw column list (own rows included) fills only the remote rows.
TEST(EngineSemantics, RemoteOnlySkipsTheNodesOwnRows) {
  ClusterOptions o = cluster_options(3, 16, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 2000, 30, 5 + n.rank);
    std::vector<std::uint8_t> out(n.total * n.P, kSentinel);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total,
                 NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH | NS_SEND_REMOTE_ONLY);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK) << ns_last_error();
    for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    std::set<std::uint64_t> remote;
    std::uint64_t own = 0;
    for (std::uint64_t i : idx) {
      if (i >= n.offsets[n.rank] && i < n.offsets[n.rank + 1]) {
        ++own;
      } else {
        remote.insert(i);
      }
    }
    check_indexed(out, 0, n.total, remote, n.P, n.rank);  // own rows keep the sentinel
    EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_LOCAL), own);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), remote.size());
    n.sync->arrive_and_wait();
  });
}

// NS_SEND_UNIQUE, the caller's "my idxs are distinct" hint: nothing is filtered or coalesced,
// and a hint that lies (repeated idxs) still gives every row right: each occurrence is asked
// for. The hinted WR leaves the Idx Filter's rows as it found them: a plain WR of the same
// epoch after it still sends each distinct remote row once. On other opcodes it is refused.
TEST(EngineSemantics, UniqueHintSkipsTheFilterAndIsRightEvenWhenItLies) {
  ClusterOptions o = cluster_options(3, 16, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    const std::uint64_t own_begin = n.offsets[n.rank], own_end = n.offsets[n.rank + 1];
    std::vector<std::uint64_t> distinct(n.total);
    for (std::uint64_t i = 0; i < n.total; ++i) distinct[i] = (i * 7 + n.rank) % n.total;
    const std::vector<std::uint64_t> repeated = dup_heavy_idx(n.total, 2000, 30, 11 + n.rank);
    for (const std::vector<std::uint64_t>* idx :
         std::initializer_list<const std::vector<std::uint64_t>*>{&distinct, &repeated}) {
      for (int layout : {NS_RIG_LAYOUT_INDEXED, NS_RIG_LAYOUT_POSITIONAL}) {
        const std::string where = std::string(idx == &distinct ? "distinct" : "repeated") +
                                  (layout == NS_RIG_LAYOUT_INDEXED ? " indexed" : " positional") +
                                  " node " + std::to_string(n.rank);
        std::uint64_t remote = 0, local = 0;
        std::set<std::uint64_t> distinct_remote;
        for (std::uint64_t i : *idx) {
          const bool own = i >= own_begin && i < own_end;
          (own ? local : remote) += 1;
          if (!own) distinct_remote.insert(i);
        }
        const bool indexed = layout == NS_RIG_LAYOUT_INDEXED;
        std::vector<std::uint8_t> out((indexed ? n.total : idx->size()) * n.P, kSentinel);
        ns_stats_reset(n.ctx);
        auto w = indexed ? rig(1, n.mr, *idx, out.data(), layout, 0, n.total,
                               NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH | NS_SEND_UNIQUE)
                         : rig(1, n.mr, *idx, out.data(), layout, 0, 0,
                               NS_SEND_SIGNALED | NS_SEND_UNIQUE);
        ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK) << ns_last_error();
        for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
        check_gathered(n, out, *idx, layout);
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_FILTERED), 0u) << where;
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_COALESCED), 0u) << where;
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), remote) << where;
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_LOCAL), local) << where;
        if (indexed) {
          // The same idxs again without the hint, same epoch and mapping: the rows the hinted
          // WR brought were not marked, so each distinct remote row is asked for once now.
          ns_stats_reset(n.ctx);
          std::vector<std::uint8_t> again(n.total * n.P, kSentinel);
          auto w2 = rig(2, n.mr, *idx, again.data(), layout, 0, n.total, NS_SEND_SIGNALED);
          ASSERT_EQ(ns_post_send(n.qp, &w2, nullptr), NS_OK) << ns_last_error();
          for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
          check_gathered(n, again, *idx, layout);
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), distinct_remote.size()) << where;
        }
        n.sync->arrive_and_wait();
      }
    }
    // Only a plain RIG and a RIS take the hint (test_rig_scatter.cpp for the RIS).
    std::vector<std::uint8_t> row(n.P, 1);
    auto read = read_wr(3, n.mr, 0, row.data(), row.size());
    read.send_flags |= NS_SEND_UNIQUE;
    EXPECT_EQ(ns_post_send(n.qp, &read, nullptr), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("NS_SEND_UNIQUE"), std::string::npos)
        << ns_last_error();
    n.sync->arrive_and_wait();
  });
}

// The client's bulk path (a POSITIONAL WR on the compact wire: owner, copy, two stores per idx,
// and the per-WR de-duplication unless the WR says its idxs are unique) against the general
// per-idx walk (the same WRs on the paper's wire, which always takes it): the same bytes and the
// same counts, for every property size the bulk path specializes (4, 8, 64, 512) and one it
// does not (12), equal and uneven owner blocks (one of them empty), distinct and repeated idxs
// with and without NS_SEND_UNIQUE, WRs past the Pending PR Table (the walk stalls and resumes),
// an empty WR, and an idx beyond every row (the WR fails, on the node that owns the last block
// as on the others).
TEST(EngineSemantics, BulkPathAgreesWithThePerIdxWalk) {
  // Per wire, node, stream and hint: requested, local, sent, filtered + coalesced.
  using Counts = std::array<std::uint64_t, 4>;
  for (const std::uint32_t P : {4u, 8u, 12u, 64u, 512u}) {
    for (const bool uneven : {false, true}) {
      std::map<std::tuple<int, int, int, int>, Counts> counts;
      std::mutex mu;
      for (const int wire : {NS_WIRE_COMPACT, NS_WIRE_PAPER}) {
        ClusterOptions o = cluster_options(3, P, make_attr(NS_PROGRESS_THREAD, 0));
        o.attr.comp_mask |= NS_CTX_ATTR_WIRE;
        o.attr.wire = wire;
        if (uneven) o.offsets = {0, 700, 700, 1000};  // node 1 owns nothing
        run_cluster(o, [&](Node& n) {
          const std::string where = "P " + std::to_string(P) + (uneven ? " uneven" : " equal") +
                                    " wire " + std::to_string(wire) + " node " +
                                    std::to_string(n.rank);
          // Distinct idxs in a scrambled order, longer than the Pending PR Table (256 entries).
          std::vector<std::uint64_t> distinct;
          for (std::uint64_t i = 0; i < n.total; ++i) {
            distinct.push_back((i * 389 + 17 * static_cast<std::uint64_t>(n.rank)) % n.total);
          }
          const std::vector<std::uint64_t> repeated = dup_heavy_idx(n.total, 3000, 50, 3 + n.rank);
          for (int stream = 0; stream < 2; ++stream) {
            const std::vector<std::uint64_t>& idx = stream == 0 ? distinct : repeated;
            for (int unique = 0; unique < 2; ++unique) {
              std::vector<std::uint8_t> out(idx.size() * n.P, kSentinel);
              ns_stats_reset(n.ctx);
              auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL, 0, 0,
                           NS_SEND_SIGNALED | (unique != 0 ? unsigned{NS_SEND_UNIQUE} : 0u));
              ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK) << ns_last_error();
              for (const ns_wc& wc : wait_completions(n.cq, 1)) {
                EXPECT_EQ(wc.status, NS_WC_SUCCESS) << where;
              }
              check_gathered(n, out, idx, NS_RIG_LAYOUT_POSITIONAL);
              const Counts c = {
                  stat(n.ctx, NS_STAT_PRS_REQUESTED), stat(n.ctx, NS_STAT_PRS_LOCAL),
                  stat(n.ctx, NS_STAT_PRS_SENT),
                  stat(n.ctx, NS_STAT_PRS_FILTERED) + stat(n.ctx, NS_STAT_PRS_COALESCED)};
              {
                const std::lock_guard<std::mutex> lock(mu);
                counts[{wire, n.rank, stream, unique}] = c;
              }
              n.sync->arrive_and_wait();
            }
          }
          // An empty WR completes at once.
          std::vector<std::uint8_t> none(n.P, kSentinel);
          auto empty = rig(2, n.mr, {}, none.data(), NS_RIG_LAYOUT_POSITIONAL, 0, 0,
                           NS_SEND_SIGNALED | NS_SEND_UNIQUE);
          ASSERT_EQ(ns_post_send(n.qp, &empty, nullptr), NS_OK) << ns_last_error();
          for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
          // An idx beyond every row fails the WR (it maps to the last node, which refuses it,
          // or is that node's own out-of-range row), with and without the hint.
          for (const unsigned hint : {0u, unsigned{NS_SEND_UNIQUE}}) {
            std::vector<std::uint64_t> bad = {0, n.total - 1, n.total + 5, 1};
            std::vector<std::uint8_t> bad_out(bad.size() * n.P, kSentinel);
            auto b = rig(3, n.mr, bad, bad_out.data(), NS_RIG_LAYOUT_POSITIONAL, 0, 0,
                         NS_SEND_SIGNALED | hint);
            ASSERT_EQ(ns_post_send(n.qp, &b, nullptr), NS_OK) << ns_last_error();
            for (const ns_wc& wc : wait_completions(n.cq, 1)) {
              EXPECT_NE(wc.status, NS_WC_SUCCESS) << where;
            }
          }
          n.sync->arrive_and_wait();
        });
      }
      for (int rank = 0; rank < 3; ++rank) {
        for (int stream = 0; stream < 2; ++stream) {
          for (int unique = 0; unique < 2; ++unique) {
            const std::string where = "P " + std::to_string(P) + (uneven ? " uneven" : " equal") +
                                      " node " + std::to_string(rank) +
                                      (stream == 0 ? " distinct" : " repeated") +
                                      (unique != 0 ? " unique" : "");
            const Counts& bulk = counts[{NS_WIRE_COMPACT, rank, stream, unique}];
            const Counts& walk = counts[{NS_WIRE_PAPER, rank, stream, unique}];
            EXPECT_EQ(bulk, walk) << where;
            EXPECT_EQ(bulk[0], bulk[1] + bulk[2] + bulk[3]) << where;
            if (unique != 0 || stream == 0) {
              EXPECT_EQ(bulk[3], 0u) << where;
            } else {
              EXPECT_GT(bulk[3], 0u) << where << ": repeats dropped";
            }
          }
        }
      }
    }
  }
}

// The client unit's per-WR de-duplication goes when it buys nothing (ClientUnit::skip_dedup):
// a stream with many repeats keeps it on every request (its filtering and coalescing counted);
// POSITIONAL work requests of 8192 idxs with one repeat each (under 1 % of their remote idxs)
// are then walked without it, except every 8th (the probe); and when the repeats come back,
// each client unit's next probe sees them: at most 7 requests per unit go without it. Every
// row is right throughout.
TEST(EngineSemantics, DedupIsSkippedOnlyWhileRequestsRepeatAlmostNothing) {
  constexpr int kWrs = 40;
  constexpr std::size_t kCount = 8192;
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_THREAD, 0));
  o.offsets = {0, 20000, 40000};
  const auto dedup_skipped = [](const ns_context* ctx) {
    const auto j = nlohmann::json::parse(stats_json_text(ctx));
    return j.at("engine").at("dedup_skipped").get<std::uint64_t>();
  };
  run_cluster(o, [&](Node& n) {
    std::mt19937_64 rng(91 + static_cast<std::uint64_t>(n.rank));
    for (const int phase : {0, 1, 2}) {
      const bool heavy = phase != 1;
      const std::string where =
          "phase " + std::to_string(phase) + " node " + std::to_string(n.rank);
      ns_stats_reset(n.ctx);
      const std::uint64_t skipped_before = dedup_skipped(n.ctx);
      for (int w = 0; w < kWrs; ++w) {
        std::vector<std::uint64_t> idx(kCount);
        if (heavy) {
          idx = dup_heavy_idx(n.total, kCount, 64, rng());
        } else {
          // Distinct idxs (the start of a shuffled range), then one repeat.
          std::vector<std::uint64_t> perm(n.total);
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng);
          std::copy_n(perm.begin(), kCount, idx.begin());
          idx.back() = idx.front();
        }
        std::vector<std::uint8_t> out(idx.size() * n.P, kSentinel);
        auto wr = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
        ASSERT_EQ(ns_post_send(n.qp, &wr, nullptr), NS_OK) << ns_last_error();
        for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
        check_positional(out, idx, n.P, n.rank);
      }
      const std::uint64_t repeats =
          stat(n.ctx, NS_STAT_PRS_FILTERED) + stat(n.ctx, NS_STAT_PRS_COALESCED);
      const std::uint64_t skipped = dedup_skipped(n.ctx) - skipped_before;
      if (heavy) {
        // Phase 0 on fresh units; phase 2 after phase 1's skips, until each client unit's next
        // probe sees repeats: at most 7 requests per unit (the engine has two).
        EXPECT_LE(skipped, phase == 0 ? 0u : 14u) << where;
        EXPECT_GT(repeats, static_cast<std::uint64_t>(kWrs) * kCount / 8) << where;
      } else {
        // Measured over the first requests, then skipped on 7 of every 8.
        EXPECT_GE(skipped, static_cast<std::uint64_t>(kWrs) / 2) << where;
        EXPECT_LT(skipped, static_cast<std::uint64_t>(kWrs)) << where << ": probes remain";
      }
      n.sync->arrive_and_wait();
    }
  });
}

// Column panels of one kernel run, gathered into alternating buffers within one epoch: each
// window keeps its own mapping (a repeat into the same window is filtered), while a request
// whose window overlaps another mapping's is served correctly without trusting the filter.
TEST(EngineSemantics, DisjointWindowsOfOneEpochEachUseTheFilter) {
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    if (n.rank == 0) {
      std::vector<std::uint8_t> buf_a(100 * n.P, kSentinel), buf_b(100 * n.P, kSentinel);
      std::vector<std::uint64_t> w1, w2;
      for (std::uint64_t r = 200; r < 300; r += 2) w1.push_back(r);
      for (std::uint64_t r = 300; r < 400; r += 3) w2.push_back(r);
      auto a1 = rig(1, n.mr, w1, buf_a.data(), NS_RIG_LAYOUT_INDEXED, 200, 100,
                    NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH);
      auto b1 = rig(2, n.mr, w2, buf_b.data(), NS_RIG_LAYOUT_INDEXED, 300, 100);
      a1.next = &b1;
      ASSERT_EQ(ns_post_send(n.qp, &a1, nullptr), NS_OK) << ns_last_error();
      for (const ns_wc& wc : wait_completions(n.cq, 2)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      check_indexed(buf_a, 200, 100, std::set<std::uint64_t>(w1.begin(), w1.end()), n.P, 0);
      check_indexed(buf_b, 300, 100, std::set<std::uint64_t>(w2.begin(), w2.end()), n.P, 0);
      const auto sent = stat(n.ctx, NS_STAT_PRS_SENT);
      auto b2 = rig(3, n.mr, w2, buf_b.data(), NS_RIG_LAYOUT_INDEXED, 300, 100);
      ASSERT_EQ(ns_post_send(n.qp, &b2, nullptr), NS_OK);
      for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), sent) << "the second window's rows were filtered";
      // Buffer A reused for rows that overlap window B: another mapping over B's rows.
      std::fill(buf_a.begin(), buf_a.end(), kSentinel);
      auto a2 = rig(4, n.mr, w2, buf_a.data(), NS_RIG_LAYOUT_INDEXED, 300, 100);
      ASSERT_EQ(ns_post_send(n.qp, &a2, nullptr), NS_OK);
      for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      check_indexed(buf_a, 300, 100, std::set<std::uint64_t>(w2.begin(), w2.end()), n.P, 0);
      EXPECT_GT(stat(n.ctx, NS_STAT_PRS_SENT), sent) << "not filtered through B's mapping";
    }
    n.sync->arrive_and_wait();
  });
}

// A work request that coalesced onto an earlier one's requests completes only after the data it
// relies on is in place: checked at the moment each completion is polled.
TEST(EngineSemantics, CoalescedRequestsCompleteWithTheirDataInPlace) {
  ClusterOptions o;
  o.nodes = 3;
  o.P = 32;
  o.qp_depth = 64;
  o.attr = make_attr(NS_PROGRESS_THREAD, 0);
  run_cluster(o, [&](Node& n) {
    std::vector<std::uint8_t> out(n.total * n.P, kSentinel);
    std::vector<std::vector<std::uint64_t>> lists;
    for (int k = 0; k < 16; ++k) lists.push_back(dup_heavy_idx(n.total, 500, 25, 100 * n.rank + k));
    std::vector<ns_send_wr> wrs;
    for (int k = 0; k < 16; ++k) {
      wrs.push_back(rig(static_cast<std::uint64_t>(k), n.mr, lists[static_cast<std::size_t>(k)],
                        out.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total,
                        NS_SEND_SIGNALED | (k == 0 ? unsigned{NS_SEND_NEW_EPOCH} : 0u)));
    }
    chain(wrs);
    ASSERT_EQ(ns_post_send(n.qp, wrs.data(), nullptr), NS_OK) << ns_last_error();
    std::size_t done = 0;
    while (done < wrs.size()) {
      ns_wc wc{};
      const int got = ns_cq_wait(n.cq, 1, &wc, 20000);
      ASSERT_EQ(got, 1) << "timed out";
      ASSERT_EQ(wc.status, NS_WC_SUCCESS);
      for (std::uint64_t i : lists[wc.wr_id]) {
        const std::string e = check_prop(out.data() + i * n.P, i, n.P);
        ASSERT_TRUE(e.empty()) << "WR " << wc.wr_id << " completed before " << e;
      }
      ++done;
    }
    EXPECT_GT(stat(n.ctx, NS_STAT_PRS_FILTERED) + stat(n.ctx, NS_STAT_PRS_COALESCED), 0u);
    n.sync->arrive_and_wait();
  });
}

// Split-phase quiesce: announce, keep working, then wait; and a plain quiesce afterwards.
TEST(EngineSemantics, QuiesceStartThenWait) {
  ClusterOptions o = cluster_options(3, 8, make_attr(NS_PROGRESS_INLINE, 0));
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 500, 10, n.rank);
    std::vector<std::uint8_t> out(idx.size() * n.P);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    ASSERT_EQ(ns_quiesce_start(n.ctx), NS_OK) << ns_last_error();
    ASSERT_EQ(ns_quiesce_start(n.ctx), NS_OK) << "a second start joins the same round";
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    check_positional(out, idx, n.P, n.rank);
    n.sync->arrive_and_wait();
  });
}

// ns_quiesce_test: refused without an announced round; 0 while a peer has not announced its
// own; 1 only once this node's gathers are done (their completion is already in the CQ) and
// every peer is done; then ns_quiesce returns at once and the round is over.
TEST(EngineSemantics, QuiesceTestSaysWhenTheRoundIsComplete) {
  ClusterOptions o = cluster_options(3, 8, make_attr(NS_PROGRESS_INLINE, 0));
  run_cluster(o, [&](Node& n) {
    int done = -1;
    EXPECT_EQ(ns_quiesce_test(n.ctx, &done), NS_ERR_STATE) << "no round announced yet";
    EXPECT_EQ(ns_quiesce_test(n.ctx, nullptr), NS_ERR_INVALID);
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 500, 10, n.rank);
    std::vector<std::uint8_t> out(idx.size() * n.P);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    // Node 0 announces right after posting; the others only after node 0 saw its round open.
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    if (n.rank == 0) {
      ASSERT_EQ(ns_quiesce_start(n.ctx), NS_OK) << ns_last_error();
      ASSERT_EQ(ns_quiesce_test(n.ctx, &done), NS_OK) << ns_last_error();
      EXPECT_EQ(done, 0) << "complete before the gather was answered";
    }
    for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    if (n.rank == 0) {
      for (int i = 0; i < 200; ++i) ns_progress(n.ctx);
      ASSERT_EQ(ns_quiesce_test(n.ctx, &done), NS_OK) << ns_last_error();
      EXPECT_EQ(done, 0) << "complete while two peers had not announced their round";
    }
    n.sync->arrive_and_wait();
    if (n.rank != 0) {
      ASSERT_EQ(ns_quiesce_start(n.ctx), NS_OK) << ns_last_error();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (done = 0; done == 0 && std::chrono::steady_clock::now() < deadline;) {
      ns_progress(n.ctx);
      ASSERT_EQ(ns_quiesce_test(n.ctx, &done), NS_OK) << ns_last_error();
    }
    EXPECT_EQ(done, 1) << "the round never completed";
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5))
        << "ns_quiesce waited although the round was complete";
    EXPECT_EQ(ns_quiesce_test(n.ctx, &done), NS_ERR_STATE) << "the round is over";
    check_positional(out, idx, n.P, n.rank);
    n.sync->arrive_and_wait();
  });
}

// ns_quiesce_peers: a ring of 4 nodes where node r gathers from r+1 only. With the pattern's
// peers named, a round sends one control message per node (to its owner) instead of one to every
// other node, the gathers are right, and a round still waits for its requester (node r's round
// is not complete before r-1 has announced). Bad lists are refused; a node waited for that never
// tells makes the round time out; every node again after quiesce_every_peer.
TEST(EngineSemantics, QuiescePeersTellOnlyThePatternPeers) {
  constexpr int kNodes = 4;
  // A progress thread: a node that has its rows keeps serving its requester while it waits at
  // the test's barriers (INLINE, node r-1 could starve behind node r's barrier).
  ClusterOptions o = cluster_options(kNodes, 8, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    const int owner = (n.rank + 1) % kNodes, requester = (n.rank + kNodes - 1) % kNodes;
    const int bad[] = {kNodes};
    const int ok[] = {owner};
    EXPECT_EQ(ns_quiesce_peers(n.ctx, bad, 1, ok, 1), NS_ERR_INVALID) << "node out of range";
    EXPECT_EQ(ns_quiesce_peers(n.ctx, ok, 1, nullptr, -1), NS_ERR_INVALID) << "one list only";
    EXPECT_EQ(ns_quiesce_peers(n.ctx, nullptr, 1, ok, 1), NS_ERR_INVALID) << "NULL list";
    const int tell[] = {owner, owner, n.rank};  // repeats and the node itself are ignored
    const int wait_for[] = {requester};
    ASSERT_EQ(ns_quiesce_peers(n.ctx, tell, 3, wait_for, 1), NS_OK) << ns_last_error();
    const std::uint64_t first = n.offsets[static_cast<std::size_t>(owner)];
    const std::uint64_t rows = n.offsets[static_cast<std::size_t>(owner) + 1] - first;
    std::vector<std::uint64_t> idx;
    for (std::uint64_t k = 0; k < 40; ++k) idx.push_back(first + (k * 7) % rows);
    std::vector<std::uint8_t> out(idx.size() * n.P);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    n.sync->arrive_and_wait();
    // Node 0 announces first; its round must wait for its requester (node 3), which announces
    // only after node 0 has checked.
    int done = -1;
    const std::uint64_t frames_before = stat(n.ctx, NS_STAT_FRAMES);
    if (n.rank == 0) {
      ASSERT_EQ(ns_quiesce_start(n.ctx), NS_OK) << ns_last_error();
      EXPECT_EQ(ns_quiesce_peers(n.ctx, tell, 1, wait_for, 1), NS_ERR_STATE)
          << "peers changed while a round is announced";
      for (int i = 0; i < 200; ++i) ns_progress(n.ctx);
      ASSERT_EQ(ns_quiesce_test(n.ctx, &done), NS_OK) << ns_last_error();
      EXPECT_EQ(done, 0) << "complete before its requester announced";
    }
    n.sync->arrive_and_wait();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    EXPECT_EQ(stat(n.ctx, NS_STAT_FRAMES) - frames_before, 1u)
        << "one control message, to the owner only";
    check_positional(out, idx, n.P, n.rank);
    n.sync->arrive_and_wait();
    // Waiting for a node that does not tell this one: the round times out.
    if (n.rank == 0) {
      const int nobody_tells[] = {2};
      ASSERT_EQ(ns_quiesce_peers(n.ctx, ok, 1, nobody_tells, 1), NS_OK) << ns_last_error();
      EXPECT_EQ(ns_quiesce(n.ctx, 300), NS_ERR_TIMEOUT);
    } else {
      EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    }
    n.sync->arrive_and_wait();
    // Every node again: one control message to each of the three others.
    ASSERT_EQ(ns_quiesce_peers(n.ctx, nullptr, -1, nullptr, -1), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();
    const std::uint64_t frames_all = stat(n.ctx, NS_STAT_FRAMES);
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    EXPECT_EQ(stat(n.ctx, NS_STAT_FRAMES) - frames_all, static_cast<std::uint64_t>(kNodes - 1));
    n.sync->arrive_and_wait();
  });
}

// NS_WR_RDMA_READ to a peer that died silently (no failure report, its reads never complete):
// each read completes with a watchdog timeout, the user's buffer is never written afterwards
// (the read went to an engine bounce slot), and reads to the live peer still succeed.
TEST(EngineSemantics, RdmaReadsToASilentlyDeadPeerTimeOut) {
  run_cluster_with_dead_node(3, 16, 150, /*victim=*/2, Death::kSilent, [&](Node& n) {
    const std::uint64_t live_row = 200ull * static_cast<std::uint64_t>(1 - n.rank) + 7;
    std::vector<std::uint8_t> dead_out(4 * n.P, kSentinel), live_out(n.P, kSentinel);
    std::vector<ns_send_wr> w(5);
    for (int k = 0; k < 4; ++k) {
      const auto row = 400 + static_cast<std::uint64_t>(k);  // the dead node's rows
      w[k] = read_wr(10 + static_cast<std::uint64_t>(k), n.mr, row, dead_out.data() + k * n.P, n.P);
    }
    w[4] = read_wr(20, n.mr, live_row, live_out.data(), n.P);
    chain(w);
    ASSERT_EQ(ns_post_send(n.qp, w.data(), nullptr), NS_OK) << ns_last_error();
    std::map<std::uint64_t, int> status;
    for (const ns_wc& wc : wait_completions(n.cq, 5, 10000)) status[wc.wr_id] = wc.status;
    ASSERT_EQ(status.size(), 5u) << "every read completes";
    for (int k = 0; k < 4; ++k) EXPECT_EQ(status[10 + k], NS_WC_WATCHDOG_TIMEOUT) << k;
    EXPECT_EQ(status[20], NS_WC_SUCCESS);
    EXPECT_EQ(check_prop(live_out.data(), live_row, n.P), "");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (std::uint8_t b : dead_out) ASSERT_EQ(b, kSentinel) << "written after its timeout";
  });
}

// Handles are checked before use: a closed context, a destroyed CQ or QP, a deregistered
// region, a second close — all NS_ERR_INVALID with a reason, never a use after free (this test
// runs under ASan in CI).
