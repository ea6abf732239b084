// NS_CTX_UNCHECKED (the trusted caller's post and poll): the same outputs as the checked default
// for every verb, the engine's checks of indices still in force (a peer never reads outside its
// rows), and the checked default still refusing bad arguments and stale handles.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "netsparse/netsparse.h"
#include "rig_cluster.hpp"
#include "rig_test_util.hpp"
#include "rig_wr.hpp"

using namespace rigtest;

namespace {

// Polls (never waits) until n completions arrived: the path NS_CTX_UNCHECKED makes fast.
std::vector<ns_wc> poll_completions(ns_cq* cq, std::size_t n) {
  std::vector<ns_wc> all;
  ns_wc wc[8];
  for (long spins = 0; all.size() < n && spins < 200'000'000; ++spins) {
    const int got = ns_poll_cq(cq, 8, wc);
    if (got < 0) {
      ADD_FAILURE() << "ns_poll_cq: " << ns_status_str(got) << " " << ns_last_error();
      break;
    }
    all.insert(all.end(), wc, wc + got);
  }
  EXPECT_EQ(all.size(), n);
  return all;
}

// Every verb once on 3 nodes: a POSITIONAL and an INDEXED gather in one chain, a plan started
// twice (recorded, then replayed), a one-sided read, and an integer scatter-reduce (exact in
// any order). Returns each node's outputs and its region's rows afterwards, concatenated.
std::vector<std::vector<std::uint8_t>> every_verb(int progress, std::uint32_t flags) {
  std::vector<std::vector<std::uint8_t>> result(3);
  run_cluster(cluster_options(3, 24, make_attr(progress, flags)), [&](Node& n) {
    const auto idx = dup_heavy_idx(n.total, 2000, 8, 31 + static_cast<std::uint64_t>(n.rank));
    std::vector<std::uint8_t> gathered = gather_both_layouts(n, idx, poll_completions);

    std::vector<std::uint8_t> planned(idx.size() * n.P, kSentinel);
    const ns_send_wr g = rig(0, n.mr, idx, planned.data(), NS_RIG_LAYOUT_POSITIONAL);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(n.ctx, &g, &plan), NS_OK) << ns_last_error();
    for (std::uint64_t start = 0; start < 2; ++start) {
      ns_send_wr s{};
      s.wr_id = 10 + start;
      s.opcode = NS_WR_RIG_PLAN;
      s.send_flags = NS_SEND_SIGNALED;
      s.wr.plan.plan = plan;
      ASSERT_EQ(ns_post_send(n.qp, &s, nullptr), NS_OK) << ns_last_error();
      for (const ns_wc& wc : poll_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    }
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK) << ns_last_error();

    std::vector<std::uint8_t> read(n.P, kSentinel);
    ns_send_wr r = read_wr(20, n.mr, (n.offsets[1] + 3) % n.total, read.data(), read.size());
    ASSERT_EQ(ns_post_send(n.qp, &r, nullptr), NS_OK) << ns_last_error();
    for (const ns_wc& wc : poll_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    // Every gather done before any row changes (INLINE: peers are served only while a node
    // calls in, so each serves until every peer is done).
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();

    const std::vector<std::uint64_t> rows = {1, n.total - 1, 250, 1, 401};
    std::vector<std::int32_t> values(rows.size() * n.P / 4);
    for (std::size_t k = 0; k < values.size(); ++k) {
      values[k] = static_cast<std::int32_t>(k) + 1000 * n.rank;
    }
    ns_send_wr s = ris_wr(30, n.mr, rows.data(), rows.size(), values.data(),
                          values.size() * sizeof(std::int32_t), NS_RIS_SUM, NS_RIS_INT32);
    ASSERT_EQ(ns_post_send(n.qp, &s, nullptr), NS_OK) << ns_last_error();
    for (const ns_wc& wc : poll_completions(n.cq, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();  // every scatter applied

    auto& out = result[static_cast<std::size_t>(n.rank)];
    for (const auto* v : {&gathered, &planned, &read, &n.block}) {
      out.insert(out.end(), v->begin(), v->end());
    }
    n.sync->arrive_and_wait();
  });
  return result;
}

}  // namespace

TEST(Unchecked, EveryVerbGivesTheCheckedOutputs) {
  for (int progress : {NS_PROGRESS_THREAD, NS_PROGRESS_INLINE}) {
    const auto checked = every_verb(progress, 0);
    const auto unchecked = every_verb(progress, NS_CTX_UNCHECKED);
    ASSERT_EQ(checked.size(), unchecked.size());
    for (std::size_t r = 0; r < checked.size(); ++r) {
      EXPECT_FALSE(checked[r].empty());
      EXPECT_TRUE(checked[r] == unchecked[r]) << "progress " << progress << " node " << r;
    }
  }
}

// Only the caller's own arguments go unchecked: an idx outside every owner's rows is still
// refused by its owner (never read), an idx outside an INDEXED window is still caught here.
TEST(Unchecked, IndicesAreStillCheckedByTheEngine) {
  run_cluster(cluster_options(2, 16, make_attr(NS_PROGRESS_THREAD, NS_CTX_UNCHECKED)),
              [&](Node& n) {
                if (n.rank == 0) {
                  const std::vector<std::uint64_t> beyond = {3, n.total + 5, 7};
                  std::vector<std::uint8_t> out(beyond.size() * n.P, kSentinel);
                  auto w = rig(1, n.mr, beyond, out.data(), NS_RIG_LAYOUT_POSITIONAL);
                  ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK);
                  for (const ns_wc& wc : poll_completions(n.cq, 1))
                    EXPECT_EQ(wc.status, NS_WC_REM_INV_REQ);

                  const std::vector<std::uint64_t> outside = {250, 10, 260};
                  std::vector<std::uint8_t> win(50 * n.P, kSentinel);
                  auto v = rig(2, n.mr, outside, win.data(), NS_RIG_LAYOUT_INDEXED, 220, 50);
                  ASSERT_EQ(ns_post_send(n.qp, &v, nullptr), NS_OK);
                  for (const ns_wc& wc : poll_completions(n.cq, 1)) {
                    EXPECT_EQ(wc.status, NS_WC_LOC_INV_REQ);
                    EXPECT_EQ(wc.count, 1u);
                  }
                }
                EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
              });
}

// The default path keeps refusing what the unchecked one would take on trust.
TEST(Unchecked, TheCheckedDefaultStillRefusesBadArguments) {
  run_cluster(cluster_options(1, 16, make_attr(NS_PROGRESS_THREAD, 0)), [&](Node& n) {
    const std::vector<std::uint64_t> idx = {1, 2};
    std::vector<std::uint8_t> out(idx.size() * n.P);
    ns_send_wr w = rig(1, nullptr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ns_send_wr* bad = nullptr;
    EXPECT_EQ(ns_post_send(n.qp, &w, &bad), NS_ERR_INVALID);
    EXPECT_EQ(bad, &w);
    EXPECT_NE(std::string(ns_last_error()).find("wr.rig.mr is NULL"), std::string::npos);
    w = rig(2, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    w.wr.rig.out_bytes = n.P;  // one row short
    EXPECT_EQ(ns_post_send(n.qp, &w, &bad), NS_ERR_INVALID);
    w = rig(3, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    w.opcode = 99;
    EXPECT_EQ(ns_post_send(n.qp, &w, &bad), NS_ERR_INVALID);
    ns_wc wc[1];
    EXPECT_EQ(ns_poll_cq(n.cq, -1, wc), NS_ERR_INVALID);
    EXPECT_EQ(ns_poll_cq(n.cq, 1, nullptr), NS_ERR_INVALID);

    // A stale queue pair and completion queue are refused without being touched.
    ns_cq* cq2 = nullptr;
    ns_qp* qp2 = nullptr;
    ASSERT_EQ(ns_create_cq(n.ctx, 4, &cq2), NS_OK);
    ASSERT_EQ(ns_create_qp(n.ctx, cq2, 4, &qp2), NS_OK);
    ASSERT_EQ(ns_destroy_qp(qp2), NS_OK);
    ASSERT_EQ(ns_destroy_cq(cq2), NS_OK);
    w = rig(4, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    EXPECT_EQ(ns_post_send(qp2, &w, &bad), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("not a live queue pair"), std::string::npos);
    EXPECT_EQ(ns_poll_cq(cq2, 1, wc), NS_ERR_INVALID);
  });
}

// Unchecked handles work with every other entry point (creation, waits, destruction), and the
// flag is refused nowhere it is known.
TEST(Unchecked, HandlesWorkWithTheOtherEntryPoints) {
  run_cluster(cluster_options(2, 8, make_attr(NS_PROGRESS_INLINE, NS_CTX_UNCHECKED)), [&](Node& n) {
    ns_cq* cq2 = nullptr;
    ns_qp* qp2 = nullptr;
    ASSERT_EQ(ns_create_cq(n.ctx, 8, &cq2), NS_OK) << ns_last_error();
    ASSERT_EQ(ns_create_qp(n.ctx, cq2, 8, &qp2), NS_OK) << ns_last_error();
    const std::vector<std::uint64_t> idx = {0, n.total - 1, 5};
    std::vector<std::uint8_t> out(idx.size() * n.P, kSentinel);
    auto w = rig(7, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ASSERT_EQ(ns_post_send(qp2, &w, nullptr), NS_OK) << ns_last_error();
    for (const ns_wc& wc : wait_completions(cq2, 1)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
    check_positional(out, idx, n.P, n.rank);
    EXPECT_EQ(ns_destroy_cq(cq2), NS_ERR_STATE);  // still used by qp2
    EXPECT_EQ(ns_destroy_qp(qp2), NS_OK) << ns_last_error();
    EXPECT_EQ(ns_destroy_cq(cq2), NS_OK) << ns_last_error();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
  });
}
