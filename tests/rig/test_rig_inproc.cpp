// RIG engine on in-process fabrics (2..16 nodes = threads): correctness of every byte under all
// ablations and both layouts, error completions, watchdog and dead peers, chained posts,
// RDMA_READ. (INLINE mode, statistics and their JSON form, threads, lifetimes:
// test_rig_inproc_api.cpp; the engine's filter paths: test_rig_inproc_semantics.cpp. One file
// was 35 s of one core at -O3; three compile in parallel.)
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

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
      node_out[static_cast<std::size_t>(n.rank)] = gather_both_layouts(n, idx);
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
