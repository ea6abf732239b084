// RIG engine on in-process fabrics (2..16 nodes = threads): correctness of every byte under all
// ablations and both layouts, error completions, watchdog and dead peers, chained posts,
// RDMA_READ, statistics and their JSON form.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "netsparse/netsparse.h"
#include "rig_cluster.hpp"
#include "rig_test_util.hpp"
#include "rig_wr.hpp"

using namespace rigtest;

// ---- random batches with heavy duplication --------------------------------------------------
struct GatherCase {
  const char* name;
  int nodes;
  std::uint32_t P;
  int layout;
  std::uint32_t flags;
  int progress;
  bool uneven;
  bool virtual_queues;
};

void PrintTo(const GatherCase& c, std::ostream* os) {
  *os << c.name;
}

class Gather : public ::testing::TestWithParam<GatherCase> {};

TEST_P(Gather, RandomBatchesEveryByte) {
  const GatherCase gc = GetParam();
  ClusterOptions o = cluster_options(gc.nodes, gc.P, make_attr(gc.progress, gc.flags));
  if (gc.virtual_queues) {
    o.attr.comp_mask |= NS_CTX_ATTR_VIRTUAL_QUEUES;
    o.attr.virtual_queues = 1;
  }
  const std::uint64_t total = 150ull * static_cast<std::uint64_t>(gc.nodes) + 7;
  o.offsets = gc.uneven ? uneven_offsets(gc.nodes, total, 99) : equal_offsets(gc.nodes, total);
  const int kWrs = 5;
  const std::size_t kCount = gc.nodes >= 8 ? 600 : 1500;
  std::vector<ns_context*> ctxs(static_cast<std::size_t>(gc.nodes));
  run_cluster(o, [&](Node& n) {
    std::vector<std::vector<std::uint64_t>> idx(kWrs);
    std::vector<std::vector<std::uint8_t>> out(kWrs);
    std::vector<ns_send_wr> wrs;
    for (int k = 0; k < kWrs; ++k) {
      idx[k] =
          dup_heavy_idx(n.total, kCount, 16,
                        1000u * static_cast<std::uint64_t>(n.rank) + static_cast<std::uint64_t>(k));
      wrs.push_back(gather_into(n, static_cast<std::uint64_t>(k), idx[k], out[k], gc.layout));
    }
    chain(wrs);
    ns_send_wr* bad = nullptr;
    ASSERT_EQ(ns_post_send(n.qp, wrs.data(), &bad), NS_OK) << ns_last_error();
    auto wcs = wait_completions(n.cq, kWrs);
    std::set<std::uint64_t> ids;
    for (const ns_wc& wc : wcs) {
      EXPECT_EQ(wc.status, NS_WC_SUCCESS) << ns_wc_status_str(wc.status);
      EXPECT_EQ(wc.opcode, NS_WR_RIG);
      EXPECT_EQ(wc.count, kCount);
      ids.insert(wc.wr_id);
    }
    EXPECT_EQ(ids.size(), static_cast<std::size_t>(kWrs));
    for (int k = 0; k < kWrs; ++k) check_gathered(n, out[k], idx[k], gc.layout);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_REQUESTED), kWrs * kCount);
    if ((gc.flags & (NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE)) !=
        (NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE)) {
      // 16 hot rows requested hundreds of times: filtering or coalescing must drop some.
      EXPECT_GT(stat(n.ctx, NS_STAT_PRS_FILTERED) + stat(n.ctx, NS_STAT_PRS_COALESCED), 0u);
    }
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    ctxs[static_cast<std::size_t>(n.rank)] = n.ctx;
    n.sync->arrive_and_wait();
    if (n.rank == 0) check_stats_after_quiesce(ctxs, gc.flags);
    n.sync->arrive_and_wait();
  });
}

constexpr std::uint32_t kAll = NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT;
INSTANTIATE_TEST_SUITE_P(
    Inproc, Gather,
    ::testing::Values(
        GatherCase{"n2_K1_pos", 2, 4, NS_RIG_LAYOUT_POSITIONAL, 0, NS_PROGRESS_THREAD, false,
                   false},
        GatherCase{"n3_K16_idx", 3, 64, NS_RIG_LAYOUT_INDEXED, 0, NS_PROGRESS_THREAD, false, false},
        GatherCase{"n4_odd_pos_nofilter_inline", 4, 100, NS_RIG_LAYOUT_POSITIONAL, NS_CTX_NO_FILTER,
                   NS_PROGRESS_INLINE, false, false},
        GatherCase{"n5_idx_nocoalesce", 5, 64, NS_RIG_LAYOUT_INDEXED, NS_CTX_NO_COALESCE,
                   NS_PROGRESS_THREAD, false, false},
        GatherCase{"n8_idx_noconcat_inline", 8, 16, NS_RIG_LAYOUT_INDEXED, NS_CTX_NO_CONCAT,
                   NS_PROGRESS_INLINE, false, false},
        GatherCase{"n16_pos", 16, 8, NS_RIG_LAYOUT_POSITIONAL, 0, NS_PROGRESS_THREAD, false, false},
        GatherCase{"n2_K256_idx_all_off", 2, 1024, NS_RIG_LAYOUT_INDEXED, kAll, NS_PROGRESS_THREAD,
                   false, false},
        GatherCase{"n4_uneven_idx_inline", 4, 12, NS_RIG_LAYOUT_INDEXED, 0, NS_PROGRESS_INLINE,
                   true, false},
        GatherCase{"n5_uneven_pos", 5, 32, NS_RIG_LAYOUT_POSITIONAL, 0, NS_PROGRESS_THREAD, true,
                   false},
        GatherCase{"n3_pos_nofilter_nocoalesce", 3, 64, NS_RIG_LAYOUT_POSITIONAL,
                   NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE, NS_PROGRESS_THREAD, false, false},
        GatherCase{"n3_virtual_queues", 3, 64, NS_RIG_LAYOUT_POSITIONAL, 0, NS_PROGRESS_THREAD,
                   false, true}),
    [](const ::testing::TestParamInfo<GatherCase>& i) { return std::string(i.param.name); });

// ---- the same requests give byte-identical outputs whatever mechanism is switched off ---------
TEST(Ablation, IdenticalOutputsWithEachMechanismOnOrOff) {
  const std::uint32_t variants[] = {0, NS_CTX_NO_FILTER, NS_CTX_NO_COALESCE, NS_CTX_NO_CONCAT,
                                    kAll};
  std::map<std::uint32_t, std::vector<std::vector<std::uint8_t>>> outputs;
  for (std::uint32_t flags : variants) {
    ClusterOptions o;
    o.nodes = 3;
    o.P = 24;
    o.attr = make_attr(NS_PROGRESS_THREAD, flags);
    auto& node_out = outputs[flags];
    node_out.resize(3);
    run_cluster(o, [&](Node& n) {
      const auto idx = dup_heavy_idx(n.total, 3000, 8, 77 + static_cast<std::uint64_t>(n.rank));
      std::vector<std::uint8_t> pos(idx.size() * n.P, kSentinel), ind(n.total * n.P, kSentinel);
      std::vector<ns_send_wr> w{rig(1, n.mr, idx, pos.data(), NS_RIG_LAYOUT_POSITIONAL),
                                rig(2, n.mr, idx, ind.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total)};
      chain(w);
      ASSERT_EQ(ns_post_send(n.qp, w.data(), nullptr), NS_OK);
      for (const ns_wc& wc : wait_completions(n.cq, 2)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      pos.insert(pos.end(), ind.begin(), ind.end());
      node_out[static_cast<std::size_t>(n.rank)] = std::move(pos);
      n.sync->arrive_and_wait();
    });
  }
  for (std::uint32_t flags : variants) {
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(outputs[flags][static_cast<std::size_t>(r)] ==
                  outputs[0][static_cast<std::size_t>(r)])
          << "flags " << flags << " node " << r;
    }
  }
}

// ---- POSITIONAL: repeats inside one work request are filled from the first position ----------
TEST(Positional, RepeatsAreFilledLocallyFromTheFirstPosition) {
  for (std::uint32_t flags : {0u, static_cast<std::uint32_t>(NS_CTX_NO_FILTER)}) {
    ClusterOptions o;
    o.nodes = 2;
    o.P = 20;
    o.attr = make_attr(NS_PROGRESS_THREAD, flags);
    // One unit with a one-entry table: every remote idx waits for its response before the next
    // is generated, so which repeats are filtered (rather than coalesced) is deterministic.
    o.attr.comp_mask |= NS_CTX_ATTR_PENDING | NS_CTX_ATTR_UNITS;
    o.attr.pending_entries = 1;
    o.attr.num_client_units = 1;
    o.attr.num_server_units = 1;
    run_cluster(o, [&](Node& n) {
      if (n.rank == 0) {
        const std::vector<std::uint64_t> idx = {300, 301, 302, 300, 303, 301, 5, 5, 300};
        std::vector<std::uint8_t> out(idx.size() * n.P, kSentinel);
        auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
        ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
        for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
        check_positional(out, idx, n.P, n.rank);
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_LOCAL), 2u);
        EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_COALESCED), 0u);
        if (flags == 0) {
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), 4u);      // 300, 301, 302, 303
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_FILTERED), 3u);  // 300, 301, 300 again
        } else {
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), 7u);
          EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_FILTERED), 0u);
        }
      }
      n.sync->arrive_and_wait();
    });
  }
}

// ---- INDEXED windows (column panels), filter epochs ------------------------------------------
TEST(Indexed, PanelWindowsAndFilterEpochs) {
  ClusterOptions o = cluster_options(2, 16, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    if (n.rank == 0) {
      // Panel [150, 250) straddles both nodes' blocks [0,200) and [200,400).
      const std::uint64_t base = 150, len = 100;
      std::vector<std::uint64_t> idx;
      for (int rep = 0; rep < 3; ++rep)
        for (std::uint64_t r = base; r < base + len; r += 3) idx.push_back(r);
      std::set<std::uint64_t> rows(idx.begin(), idx.end());
      std::vector<std::uint8_t> out(len * n.P, kSentinel);
      auto w1 = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_INDEXED, base, len);
      ASSERT_EQ(ns_post_send(n.qp, &w1, nullptr), NS_OK) << ns_last_error();
      for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      check_indexed(out, base, len, rows, n.P, n.rank);
      // Same panel and buffer again: everything is already there, nothing is sent.
      const auto sent_before = stat(n.ctx, NS_STAT_PRS_SENT);
      const auto filtered_before = stat(n.ctx, NS_STAT_PRS_FILTERED);
      auto w2 = rig(2, n.mr, idx, out.data(), NS_RIG_LAYOUT_INDEXED, base, len);
      ASSERT_EQ(ns_post_send(n.qp, &w2, nullptr), NS_OK);
      for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_SENT), sent_before);
      EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_FILTERED) - filtered_before, idx.size());
      // A new epoch forgets: the (cleared) buffer is refilled.
      std::fill(out.begin(), out.end(), kSentinel);
      auto w3 = rig(3, n.mr, idx, out.data(), NS_RIG_LAYOUT_INDEXED, base, len,
                    NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH);
      ASSERT_EQ(ns_post_send(n.qp, &w3, nullptr), NS_OK);
      for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      check_indexed(out, base, len, rows, n.P, n.rank);
      EXPECT_GT(stat(n.ctx, NS_STAT_PRS_SENT), sent_before);
      // Another buffer in the same epoch maps idx -> address differently: it bypasses the filter
      // (correct data, nothing wrongly "filtered").
      std::vector<std::uint8_t> other(len * n.P, kSentinel);
      auto w4 = rig(4, n.mr, idx, other.data(), NS_RIG_LAYOUT_INDEXED, base, len);
      ASSERT_EQ(ns_post_send(n.qp, &w4, nullptr), NS_OK);
      for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      check_indexed(other, base, len, rows, n.P, n.rank);
    }
    n.sync->arrive_and_wait();
  });
}

// ---- error completions -----------------------------------------------------------------------
TEST(Errors, OutOfRangeIdxGivesRemoteInvalidRequest) {
  ClusterOptions o = cluster_options(3, 40, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    // Node 0 asks a remote owner (the last node) to check; the last node checks itself locally.
    if (n.rank == 0 || n.rank == n.nodes - 1) {
      const std::vector<std::uint64_t> good = {1, n.total - 1, 250, 3};
      const std::vector<std::uint64_t> past = {5, n.total, 7};
      const std::vector<std::uint64_t> huge = {UINT64_MAX - 1, 2};
      const std::vector<std::uint64_t> window = {160, 170, 149};  // 149 outside [150, 200)
      std::vector<std::uint8_t> o1(good.size() * n.P), o2(past.size() * n.P), o3(huge.size() * n.P),
          o4(50 * n.P), o5(good.size() * n.P);
      std::vector<ns_send_wr> w{rig(1, n.mr, good, o1.data(), NS_RIG_LAYOUT_POSITIONAL),
                                rig(2, n.mr, past, o2.data(), NS_RIG_LAYOUT_POSITIONAL),
                                rig(3, n.mr, huge, o3.data(), NS_RIG_LAYOUT_POSITIONAL),
                                rig(4, n.mr, window, o4.data(), NS_RIG_LAYOUT_INDEXED, 150, 50),
                                rig(5, n.mr, good, o5.data(), NS_RIG_LAYOUT_POSITIONAL)};
      chain(w);
      ASSERT_EQ(ns_post_send(n.qp, w.data(), nullptr), NS_OK);
      std::map<std::uint64_t, ns_wc> by_id;
      for (const ns_wc& wc : wait_completions(n.cq, 5)) by_id[wc.wr_id] = wc;
      EXPECT_EQ(by_id[1].status, NS_WC_SUCCESS);
      EXPECT_EQ(by_id[2].status, NS_WC_REM_INV_REQ) << ns_wc_status_str(by_id[2].status);
      EXPECT_EQ(by_id[3].status, NS_WC_REM_INV_REQ) << ns_wc_status_str(by_id[3].status);
      EXPECT_EQ(by_id[4].status, NS_WC_LOC_INV_REQ) << ns_wc_status_str(by_id[4].status);
      EXPECT_EQ(by_id[4].count, 2u) << "position of the offending idx";
      EXPECT_EQ(by_id[5].status, NS_WC_SUCCESS);
      check_positional(o1, good, n.P, n.rank);
      check_positional(o5, good, n.P, n.rank);
      if (n.rank == 0) {
        EXPECT_EQ(stat(n.ctx, NS_STAT_INVALID_PRS), 0u);
      }
    }
    n.sync->arrive_and_wait();
    if (n.rank == n.nodes - 1) {
      // The last node's server rejected node 0's out-of-range idxs (never reading outside).
      EXPECT_GE(stat(n.ctx, NS_STAT_INVALID_PRS), 2u);
    }
    n.sync->arrive_and_wait();
  });
}

// ---- chained posts, bad_wr, queue full, unsignaled ------------------------------------------
TEST(Post, ChainStopsAtFirstBadWr) {
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_THREAD, 0));
  o.qp_depth = 2;
  run_cluster(o, [&](Node& n) {
    if (n.rank == 0) {
      const std::vector<std::uint64_t> idx = {1, 300, 2, 399};
      std::vector<std::uint8_t> a(idx.size() * n.P), b(idx.size() * n.P), c(idx.size() * n.P);
      std::vector<ns_send_wr> w{rig(1, n.mr, idx, a.data(), NS_RIG_LAYOUT_POSITIONAL),
                                rig(2, n.mr, idx, b.data(), 7 /* no such layout */),
                                rig(3, n.mr, idx, c.data(), NS_RIG_LAYOUT_POSITIONAL)};
      chain(w);
      ns_send_wr* bad = nullptr;
      EXPECT_EQ(ns_post_send(n.qp, w.data(), &bad), NS_ERR_INVALID);
      EXPECT_EQ(bad, &w[1]);
      EXPECT_NE(std::string(ns_last_error()).find("layout"), std::string::npos) << ns_last_error();
      auto wcs = wait_completions(n.cq, 1);
      ASSERT_EQ(wcs.size(), 1u);
      EXPECT_EQ(wcs[0].wr_id, 1u);
      check_positional(a, idx, n.P, 0);
      // Depth 2: a chain of 3 posts two, then NO_RESOURCE at the third.
      w[1] = rig(2, n.mr, idx, b.data(), NS_RIG_LAYOUT_POSITIONAL);
      chain(w);
      EXPECT_EQ(ns_post_send(n.qp, w.data(), &bad), NS_ERR_NO_RESOURCE);
      EXPECT_EQ(bad, &w[2]);
      EXPECT_EQ(wait_completions(n.cq, 2).size(), 2u);
      // Unsignaled successes produce no completion; a signaled one after them does.
      std::vector<ns_send_wr> u{rig(10, n.mr, idx, a.data(), NS_RIG_LAYOUT_POSITIONAL, 0, 0, 0),
                                rig(11, n.mr, idx, b.data(), NS_RIG_LAYOUT_POSITIONAL)};
      chain(u);
      ASSERT_EQ(ns_post_send(n.qp, u.data(), &bad), NS_OK);
      auto last = wait_completions(n.cq, 1);
      ASSERT_EQ(last.size(), 1u);
      EXPECT_EQ(last[0].wr_id, 11u);
      ns_wc extra;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_EQ(ns_poll_cq(n.cq, 1, &extra), 0);
      // Errors on unsignaled WRs still complete.
      const std::vector<std::uint64_t> oob = {n.total + 1};
      auto e = rig(12, n.mr, oob, a.data(), NS_RIG_LAYOUT_POSITIONAL, 0, 0, 0);
      ASSERT_EQ(ns_post_send(n.qp, &e, &bad), NS_OK);
      auto err = wait_completions(n.cq, 1);
      ASSERT_EQ(err.size(), 1u);
      EXPECT_EQ(err[0].wr_id, 12u);
      EXPECT_EQ(err[0].status, NS_WC_REM_INV_REQ);
      // Invalid arguments.
      ns_send_wr z = rig(13, nullptr, idx, a.data(), NS_RIG_LAYOUT_POSITIONAL);
      EXPECT_EQ(ns_post_send(n.qp, &z, &bad), NS_ERR_INVALID);
      z = rig(14, n.mr, idx, a.data(), NS_RIG_LAYOUT_INDEXED, 0, 0);  // empty window
      EXPECT_EQ(ns_post_send(n.qp, &z, &bad), NS_ERR_INVALID);
      z.opcode = 42;
      EXPECT_EQ(ns_post_send(n.qp, &z, &bad), NS_ERR_INVALID);
      EXPECT_EQ(bad, &z);
      // Zero idxs: valid, completes at once.
      const std::vector<std::uint64_t> none;
      z = rig(15, n.mr, none, nullptr, NS_RIG_LAYOUT_POSITIONAL);
      ASSERT_EQ(ns_post_send(n.qp, &z, &bad), NS_OK);
      auto zero = wait_completions(n.cq, 1);
      ASSERT_EQ(zero.size(), 1u);
      EXPECT_EQ(zero[0].status, NS_WC_SUCCESS);
    }
    n.sync->arrive_and_wait();
  });
}

// ---- the vanilla SA path -----------------------------------------------------------------------
TEST(RdmaRead, SingleReadsEveryByte) {
  ClusterOptions o = cluster_options(4, 36, make_attr(NS_PROGRESS_THREAD, 0));
  o.qp_depth = 256;
  run_cluster(o, [&](Node& n) {
    std::mt19937_64 rng(5 + static_cast<std::uint64_t>(n.rank));
    const int kReads = 200;
    std::vector<std::uint64_t> rows(kReads);
    std::vector<std::uint8_t> out(kReads * n.P);
    std::vector<ns_send_wr> w(kReads);
    for (int k = 0; k < kReads; ++k) {
      rows[k] = rng() % n.total;
      w[k] = read_wr(static_cast<std::uint64_t>(k), n.mr, rows[k], out.data() + k * n.P, n.P);
    }
    chain(w);
    ASSERT_EQ(ns_post_send(n.qp, w.data(), nullptr), NS_OK) << ns_last_error();
    for (const ns_wc& wc : wait_completions(n.cq, kReads)) {
      EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      EXPECT_EQ(wc.opcode, NS_WR_RDMA_READ);
    }
    check_positional(out, rows, n.P, n.rank);
    EXPECT_EQ(stat(n.ctx, NS_STAT_RDMA_READS), static_cast<std::uint64_t>(kReads));
    ns_send_wr bad_read = w[0];
    bad_read.next = nullptr;
    bad_read.wr.rdma_read.idx = n.total;
    ASSERT_EQ(ns_post_send(n.qp, &bad_read, nullptr), NS_OK);
    auto e = wait_completions(n.cq, 1);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].status, NS_WC_REM_INV_REQ);
    // Outputs too small for what the request writes are refused before anything is written
    // (like an SGE's length): a read into P - 1 bytes, a POSITIONAL gather one property short,
    // an INDEXED window one property short.
    bad_read.wr.rdma_read.idx = 0;
    bad_read.wr.rdma_read.out_bytes = n.P - 1;
    EXPECT_EQ(ns_post_send(n.qp, &bad_read, nullptr), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("wr.rdma_read.out_bytes"), std::string::npos)
        << ns_last_error();
    std::vector<std::uint8_t> small(rows.size() * n.P, kSentinel);
    ns_send_wr g = rig(1, n.mr, rows, small.data(), NS_RIG_LAYOUT_POSITIONAL);
    g.wr.rig.out_bytes = small.size() - n.P;
    EXPECT_EQ(ns_post_send(n.qp, &g, nullptr), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("wr.rig.out_bytes"), std::string::npos)
        << ns_last_error();
    g = rig(2, n.mr, rows, small.data(), NS_RIG_LAYOUT_INDEXED, 0, rows.size());
    g.wr.rig.out_bytes = (rows.size() - 1) * n.P;
    EXPECT_EQ(ns_post_send(n.qp, &g, nullptr), NS_ERR_INVALID);
    EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](auto b) { return b == kSentinel; }))
        << "nothing may be written by a refused request";
    n.sync->arrive_and_wait();
  });
}

// ---- watchdog and failures ---------------------------------------------------------------------
TEST(Failure, KilledPeerGivesTimeoutsAndSurvivorsGoOn) {
  run_cluster_with_dead_node(3, 16, 200, /*victim=*/2, Death::kSilent, [&](Node& n) {
    // Rows of the dead node (400..599) in every WR but the last; the last needs only the
    // other survivor.
    const int other = 1 - n.rank;
    std::vector<std::uint64_t> dead_rows, live_rows;
    for (std::uint64_t r = 400; r < 600; r += 5) dead_rows.push_back(r);
    for (std::uint64_t r = 200ull * other; r < 200ull * other + 200; r += 3) live_rows.push_back(r);
    std::vector<std::uint64_t> mixed = live_rows;
    mixed.insert(mixed.end(), dead_rows.begin(), dead_rows.end());
    std::vector<std::uint8_t> a(mixed.size() * n.P), b(dead_rows.size() * n.P),
        c(live_rows.size() * n.P);
    std::vector<ns_send_wr> w{rig(1, n.mr, mixed, a.data(), NS_RIG_LAYOUT_POSITIONAL),
                              rig(2, n.mr, dead_rows, b.data(), NS_RIG_LAYOUT_POSITIONAL),
                              rig(3, n.mr, live_rows, c.data(), NS_RIG_LAYOUT_POSITIONAL)};
    chain(w);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(ns_post_send(n.qp, w.data(), nullptr), NS_OK);
    std::map<std::uint64_t, int> status;
    for (const ns_wc& wc : wait_completions(n.cq, 3, 10000)) status[wc.wr_id] = wc.status;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    RecordProperty("timeout_completion_ms_node" + std::to_string(n.rank), static_cast<int>(ms));
    EXPECT_EQ(status[1], NS_WC_WATCHDOG_TIMEOUT);
    EXPECT_EQ(status[2], NS_WC_WATCHDOG_TIMEOUT);
    EXPECT_EQ(status[3], NS_WC_SUCCESS);
    check_positional(c, live_rows, n.P, n.rank);
    EXPECT_GE(stat(n.ctx, NS_STAT_TIMEOUTS), 2u);
    // After the timeouts the engine still works with the survivor.
    std::vector<std::uint8_t> d(live_rows.size() * n.P);
    auto again = rig(4, n.mr, live_rows, d.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &again, nullptr), NS_OK);
    auto wc = wait_completions(n.cq, 1, 10000);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, NS_WC_SUCCESS);
    check_positional(d, live_rows, n.P, n.rank);
  });
}

TEST(Failure, ReportedDeadPeerGivesTransportError) {
  run_cluster_with_dead_node(2, 8, 300, /*victim=*/1, Death::kReported, [&](Node& n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the watchdog tick see it
    const std::vector<std::uint64_t> rows = {250, 260, 5};
    std::vector<std::uint8_t> out(rows.size() * n.P);
    auto w = rig(1, n.mr, rows, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    auto wc = wait_completions(n.cq, 1, 10000);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, NS_WC_TRANSPORT_ERR) << ns_wc_status_str(wc[0].status);
  });
}

// ---- resources: small tables stall but stay correct; unit counts
// ---------------------------------
TEST(Resources, TinyPendingTableStallsButStaysCorrect) {
  ClusterOptions o = cluster_options(3, 8, make_attr(NS_PROGRESS_THREAD, 0));
  o.attr.comp_mask |= NS_CTX_ATTR_PENDING | NS_CTX_ATTR_UNITS | NS_CTX_ATTR_BATCH;
  o.attr.pending_entries = 4;
  o.attr.num_client_units = 3;
  o.attr.num_server_units = 1;
  o.attr.idx_chunk = 7;
  run_cluster(o, [&](Node& n) {
    std::vector<std::uint64_t> idx(2000);
    std::mt19937_64 rng(n.rank);
    for (auto& i : idx) i = rng() % n.total;
    std::vector<std::uint8_t> out(idx.size() * n.P);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    check_positional(out, idx, n.P, n.rank);
    EXPECT_GT(stat(n.ctx, NS_STAT_STALLS), 0u);
    n.sync->arrive_and_wait();
  });
}

// ---- INLINE mode: ns_cq_wait drives the engine; quiesce keeps serving peers --------------------
TEST(Inline, CompletionsAndQuiesceWithoutProgressThread) {
  ClusterOptions o = cluster_options(4, 64, make_attr(NS_PROGRESS_INLINE, 0));
  run_cluster(o, [&](Node& n) {
    // Uneven work: node 0 gathers much more, so the others finish first and must keep serving
    // it from inside ns_quiesce.
    const std::size_t count = n.rank == 0 ? 20000 : 100;
    const auto idx = dup_heavy_idx(n.total, count, 32, 9 + static_cast<std::uint64_t>(n.rank));
    std::vector<std::uint8_t> out(idx.size() * n.P);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    for (const ns_wc& wc : wait_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    check_positional(out, idx, n.P, n.rank);
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();
  });
}

// ---- statistics: JSON
// ------------------------------------------------------------------------------
TEST(Stats, JsonParsesAndNamesEveryCounter) {
  ClusterOptions o = cluster_options(2, 64, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    const auto idx = dup_heavy_idx(n.total, 500, 4, 3);
    std::vector<std::uint8_t> out(idx.size() * n.P);
    auto w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
    wait_completions(n.cq, 1);
    // Both gathers are done, so the counters stop moving; the text is still read with retries
    // (a node whose assertion failed before the last barrier would leave its peer waiting there).
    n.sync->arrive_and_wait();
    [&] {
      const std::string s = stats_json_text(n.ctx);
      ASSERT_TRUE(nlohmann::json::accept(s)) << s;
      const nlohmann::json j = nlohmann::json::parse(s);
      // The configuration in effect: every variable of the table (lib/config/settings.hpp).
      ASSERT_TRUE(j.contains("environment")) << s;
      EXPECT_TRUE(j["environment"].value("NETSPARSE_TRANSPORT", nlohmann::json()).is_string()) << s;
      EXPECT_EQ(j["environment"].value("NETSPARSE_MPI_MESSAGE_BYTES", ""), "65536") << s;
      ASSERT_TRUE(j.contains("stats")) << s;
      for (int k = 0; k < NS_STAT__COUNT; ++k) {
        EXPECT_TRUE(j["stats"].value(ns_stat_name(k), nlohmann::json()).is_number_unsigned())
            << ns_stat_name(k);
      }
      // snprintf semantics: a short buffer gets a truncated, terminated text and the length the
      // whole needs.
      char small[16];
      EXPECT_GE(ns_stats_json(n.ctx, small, sizeof small), static_cast<int>(s.size()) - 64);
      EXPECT_EQ(std::strlen(small), sizeof small - 1);
      EXPECT_EQ(ns_stat_name(NS_STAT__COUNT), nullptr);
    }();
    ns_stats_reset(n.ctx);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PRS_REQUESTED), 0u);
    n.sync->arrive_and_wait();
  });
}

// ---- concurrency: several application threads on one context ----------------------------------
TEST(Threads, ConcurrentPostersOnSeparateQueuePairs) {
  ClusterOptions o = cluster_options(2, 16, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    auto worker = [&](int t) {
      ns_cq* cq = nullptr;
      ns_qp* qp = nullptr;
      ASSERT_EQ(ns_create_cq(n.ctx, 64, &cq), NS_OK);
      ASSERT_EQ(ns_create_qp(n.ctx, cq, 8, &qp), NS_OK);
      for (int round = 0; round < 20; ++round) {
        const auto idx = dup_heavy_idx(n.total, 300, 8,
                                       static_cast<std::uint64_t>(round * 31 + t + 100 * n.rank));
        std::vector<std::uint8_t> out(idx.size() * n.P);
        auto w =
            rig(static_cast<std::uint64_t>(round), n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
        ASSERT_EQ(ns_post_send(qp, &w, nullptr), NS_OK);
        for (const ns_wc& wc : wait_completions(cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
        check_positional(out, idx, n.P, n.rank);
      }
      EXPECT_EQ(ns_destroy_qp(qp), NS_OK);
      EXPECT_EQ(ns_destroy_cq(cq), NS_OK);
    };
    std::thread a(worker, 1), b(worker, 2);
    a.join();
    b.join();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    n.sync->arrive_and_wait();
  });
}

// ---- object lifetime errors
// ----------------------------------------------------------------------
TEST(Lifetime, BusyObjectsRefuseDestruction) {
  ns_fabric* fabric = nullptr;
  ASSERT_EQ(ns_fabric_create(1, &fabric), NS_OK);
  ns_context* ctx = nullptr;
  ASSERT_EQ(ns_open_inproc(fabric, 0, nullptr, &ctx), NS_OK);
  EXPECT_EQ(ns_size(ctx), 1);
  EXPECT_STREQ(ns_transport_name(ctx), "inproc");
  ns_context* twice = nullptr;
  EXPECT_EQ(ns_open_inproc(fabric, 0, nullptr, &twice), NS_ERR_STATE);
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ASSERT_EQ(ns_create_cq(ctx, 4, &cq), NS_OK);
  ASSERT_EQ(ns_create_qp(ctx, cq, 4, &qp), NS_OK);
  EXPECT_EQ(ns_destroy_cq(cq), NS_ERR_STATE);
  EXPECT_EQ(ns_close(ctx), NS_ERR_STATE);
  EXPECT_EQ(ns_quiesce(ctx, 10), NS_ERR_NOT_REGISTERED);
  std::vector<std::uint8_t> block(10 * 4);
  const std::uint64_t bad_offsets[] = {0, 11};
  ns_mr* mr = nullptr;
  EXPECT_EQ(ns_reg_props(ctx, block.data(), 10, 4, bad_offsets, &mr), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("local_rows"), std::string::npos) << ns_last_error();
  const std::uint64_t offsets[] = {0, 10};
  ASSERT_EQ(ns_reg_props(ctx, block.data(), 10, 4, offsets, &mr), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_reg_props(ctx, block.data(), 10, 4, offsets, &mr), NS_ERR_STATE);
  EXPECT_EQ(ns_mr_total_rows(mr), 10u);
  EXPECT_EQ(ns_destroy_qp(qp), NS_OK);
  EXPECT_EQ(ns_destroy_cq(cq), NS_OK);
  EXPECT_EQ(ns_dereg_props(mr), NS_OK);
  EXPECT_EQ(ns_close(ctx), NS_OK);
  ns_fabric_destroy(fabric);
  ns_context_attr bad{};
  bad.comp_mask = NS_CTX_ATTR_UNITS;
  bad.num_client_units = 0;
  bad.num_server_units = 1;
  ASSERT_EQ(ns_fabric_create(1, &fabric), NS_OK);
  EXPECT_EQ(ns_open_inproc(fabric, 0, &bad, &ctx), NS_ERR_INVALID);
  ns_fabric_destroy(fabric);
}

// The largest property a region accepts is what one response packet with one PR leaves of the
// transport's largest message (inproc: 4096 B); one byte more is refused with the sizes named.
TEST(Limits, MaxPropBytesIsExactlyTheLargestAcceptedProperty) {
  ns_fabric* fabric = nullptr;
  ASSERT_EQ(ns_fabric_create(1, &fabric), NS_OK);
  ns_context* ctx = nullptr;
  ASSERT_EQ(ns_open_inproc(fabric, 0, nullptr, &ctx), NS_OK);
  const std::uint32_t max_prop = ns_max_prop_bytes(ctx);
  ASSERT_GT(max_prop, 0u);
  ASSERT_LT(max_prop, 4096u);
  EXPECT_EQ(ns_max_prop_bytes(nullptr), 0u);
  std::vector<std::uint8_t> block(2 * (max_prop + 1));
  const std::uint64_t offsets[] = {0, 2};
  ns_mr* mr = nullptr;
  EXPECT_EQ(ns_reg_props(ctx, block.data(), 2, max_prop + 1, offsets, &mr), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("largest message is 4096 bytes"), std::string::npos)
      << ns_last_error();
  ASSERT_EQ(ns_reg_props(ctx, block.data(), 2, max_prop, offsets, &mr), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_dereg_props(mr), NS_OK);
  EXPECT_EQ(ns_close(ctx), NS_OK);
  EXPECT_EQ(ns_max_prop_bytes(ctx), 0u);  // closed: a stale handle, not a read of freed memory
  ns_fabric_destroy(fabric);
}

TEST(Strings, StatusAndCompletionTextHaveFallbacks) {
  EXPECT_STREQ(ns_status_str(NS_OK), "success");
  EXPECT_STREQ(ns_status_str(12345), "unknown status");
  EXPECT_STREQ(ns_wc_status_str(NS_WC_SUCCESS), "success");
  EXPECT_STREQ(ns_wc_status_str(-3), "unknown status");
  EXPECT_STREQ(ns_wc_status_str(99), "unknown status");
  EXPECT_STREQ(ns_wr_opcode_str(NS_WR_RIG), "RIG");
  EXPECT_STREQ(ns_wr_opcode_str(17), "unknown opcode");
  EXPECT_NE(std::string(ns_wc_status_str(NS_WC_WATCHDOG_TIMEOUT)).find("watchdog"),
            std::string::npos);
}

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
TEST(Lifetime, StaleHandlesAreRefusedNotUsed) {
  ns_fabric* fabric = nullptr;
  ASSERT_EQ(ns_fabric_create(1, &fabric), NS_OK);
  ns_context* ctx = nullptr;
  ASSERT_EQ(ns_open_inproc(fabric, 0, nullptr, &ctx), NS_OK) << ns_last_error();
  std::vector<std::uint8_t> block(10 * 8);
  const std::vector<std::uint64_t> offsets = {0, 10};
  ns_mr* mr = nullptr;
  ASSERT_EQ(ns_reg_props(ctx, block.data(), 10, 8, offsets.data(), &mr), NS_OK);
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ASSERT_EQ(ns_create_cq(ctx, 4, &cq), NS_OK);
  ASSERT_EQ(ns_create_qp(ctx, cq, 4, &qp), NS_OK);
  ASSERT_EQ(ns_destroy_qp(qp), NS_OK);
  ns_send_wr w{};
  w.opcode = NS_WR_RIG;
  EXPECT_EQ(ns_post_send(qp, &w, nullptr), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("not a live queue pair"), std::string::npos)
      << ns_last_error();
  EXPECT_EQ(ns_destroy_qp(qp), NS_ERR_INVALID) << "destroyed twice";
  ASSERT_EQ(ns_destroy_cq(cq), NS_OK);
  ns_wc wc{};
  EXPECT_EQ(ns_poll_cq(cq, 1, &wc), NS_ERR_INVALID);
  EXPECT_EQ(ns_cq_wait(cq, 1, &wc, 0), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("not a live completion queue"), std::string::npos);
  ASSERT_EQ(ns_dereg_props(mr), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_dereg_props(mr), NS_ERR_INVALID) << "deregistered twice";
  EXPECT_EQ(ns_mr_prop_bytes(mr), 0u);
  ASSERT_EQ(ns_close(ctx), NS_OK);
  EXPECT_EQ(ns_close(ctx), NS_ERR_INVALID) << "closed twice";
  EXPECT_NE(std::string(ns_last_error()).find("not a live context"), std::string::npos);
  EXPECT_EQ(ns_progress(ctx), NS_ERR_INVALID);
  EXPECT_EQ(ns_rank(ctx), -1);
  EXPECT_EQ(ns_stat_get(ctx, NS_STAT_PRS_SENT), 0u);
  EXPECT_EQ(ns_create_cq(ctx, 4, &cq), NS_ERR_INVALID);
  ns_fabric_destroy(fabric);
  ns_fabric_destroy(fabric);  // a second destroy is ignored
  EXPECT_EQ(ns_open_inproc(fabric, 0, nullptr, &ctx), NS_ERR_INVALID);
}
