// NS_MR_RIG_ONLY regions (ns_reg_props_ex) and ns_rebind_props: a region read by the RIG verbs
// only can move to another buffer locally (no collective), gathers after the move read the new
// buffer (plain gathers and plan replays), one-sided reads of such a region are refused, and
// rebinding a region registered for one-sided reads, or with bad arguments, is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "netsparse/netsparse.hpp"
#include "rig_cluster.hpp"

using namespace rigtest;

namespace {

// The second buffer's contents: every byte of the first one flipped, so a gather that still read
// the old buffer cannot pass for one that reads the new.
std::vector<std::uint8_t> flipped(const std::vector<std::uint8_t>& block) {
  std::vector<std::uint8_t> v(block);
  for (std::uint8_t& b : v) b = static_cast<std::uint8_t>(~b);
  return v;
}

// Every row of the cluster, gathered POSITIONAL, holds its property (flipped: each byte
// complemented).
void check_all_rows(const std::vector<std::uint8_t>& out, const Node& n, bool flip) {
  int errors = 0;
  for (std::uint64_t r = 0; r < n.total && errors < 5; ++r) {
    for (std::uint32_t b = 0; b < n.P; ++b) {
      const std::uint8_t want =
          flip ? static_cast<std::uint8_t>(~prop_byte(r, b)) : prop_byte(r, b);
      if (out[r * n.P + b] != want) {
        ADD_FAILURE() << "node " << n.rank << ": row " << r << " byte " << b << " is "
                      << int{out[r * n.P + b]} << ", want " << int{want}
                      << (flip ? " (the rebound buffer)" : " (the registered buffer)");
        ++errors;
        break;
      }
    }
  }
}

std::vector<std::uint64_t> every_row(std::uint64_t total) {
  std::vector<std::uint64_t> idx(total);
  for (std::uint64_t r = 0; r < total; ++r) idx[r] = r;
  return idx;
}

void gather_all(Node& n, std::vector<std::uint8_t>& out) {
  const std::vector<std::uint64_t> idx = every_row(n.total);
  out.assign(n.total * n.P, kSentinel);
  ns_send_wr w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
  ASSERT_EQ(ns_post_send(n.qp, &w, nullptr), NS_OK) << ns_last_error();
  for (const ns_wc& wc : wait_completions(n.cq, 1)) ASSERT_EQ(wc.status, NS_WC_SUCCESS);
}

nlohmann::json region_stats(const ns_context* ctx) {
  return nlohmann::json::parse(stats_json_text(ctx))["region"];
}

}  // namespace

// Every node moves its rows to a new buffer between two quiesced rounds: the second round's
// gathers read the new buffers, the first round's output is untouched, and the statistics count
// one registration and one rebind (the move needed no collective and no re-registration).
TEST(RegionRebind, ARigOnlyRegionMovesLocally) {
  for (int progress : {NS_PROGRESS_INLINE, NS_PROGRESS_THREAD}) {
    SCOPED_TRACE(progress == NS_PROGRESS_INLINE ? "inline" : "thread");
    ClusterOptions o = cluster_options(3, 8, make_attr(progress, 0));
    o.mr_flags = NS_MR_RIG_ONLY;
    run_cluster(o, [&](Node& n) {
      std::vector<std::uint8_t> first, second;
      gather_all(n, first);
      ASSERT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
      const std::vector<std::uint8_t> moved = flipped(n.block);
      ASSERT_EQ(ns_rebind_props(n.mr, const_cast<std::uint8_t*>(moved.data())), NS_OK)
          << ns_last_error();
      n.sync->arrive_and_wait();  // every node moved before anyone gathers again
      gather_all(n, second);
      ASSERT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
      check_all_rows(first, n, false);
      check_all_rows(second, n, true);
      const nlohmann::json r = region_stats(n.ctx);
      EXPECT_EQ(r.value("registrations", -1), 1) << r;
      EXPECT_EQ(r.value("rebinds", -1), 1) << r;
      // Back to the registered buffer before `moved` goes out of scope (teardown quiesces).
      ASSERT_EQ(ns_rebind_props(n.mr, n.block.data()), NS_OK) << ns_last_error();
      n.sync->arrive_and_wait();
    });
  }
}

// A plan recorded on the registered buffer replays from the rebound one: plans name rows, not
// addresses, so a move needs no new recording and no stale data is served.
TEST(RegionRebind, PlansReplayFromTheNewBuffer) {
  ClusterOptions o = cluster_options(2, 16, make_attr(NS_PROGRESS_INLINE, 0));
  o.mr_flags = NS_MR_RIG_ONLY;
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = every_row(n.total);
    std::vector<std::uint8_t> out(n.total * n.P, kSentinel);
    const ns_send_wr w = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(n.ctx, &w, &plan), NS_OK) << ns_last_error();
    const auto start = [&] {
      ns_send_wr s = netsparse::detail::work_request(7, NS_WR_RIG_PLAN, NS_SEND_SIGNALED);
      s.wr.plan.plan = plan;
      ASSERT_EQ(ns_post_send(n.qp, &s, nullptr), NS_OK) << ns_last_error();
      for (const ns_wc& wc : wait_completions(n.cq, 1)) ASSERT_EQ(wc.status, NS_WC_SUCCESS);
      ASSERT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    };
    start();  // records
    start();  // replays
    check_all_rows(out, n, false);
    const std::vector<std::uint8_t> moved = flipped(n.block);
    ASSERT_EQ(ns_rebind_props(n.mr, const_cast<std::uint8_t*>(moved.data())), NS_OK)
        << ns_last_error();
    n.sync->arrive_and_wait();
    std::fill(out.begin(), out.end(), kSentinel);
    start();  // replays from the new buffer
    check_all_rows(out, n, true);
    ASSERT_EQ(ns_rebind_props(n.mr, n.block.data()), NS_OK) << ns_last_error();
    ASSERT_EQ(ns_plan_destroy(plan), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();
  });
}

// One-sided reads of a RIG-only region are refused at the post, with the reason; rebinding needs
// a base (for a region with rows).
TEST(RegionRebind, RdmaReadsOfARigOnlyRegionAndANullBaseAreRefused) {
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_INLINE, 0));
  o.mr_flags = NS_MR_RIG_ONLY;
  run_cluster(o, [&](Node& n) {
    std::vector<std::uint8_t> out(n.P, kSentinel);
    ns_send_wr w = read_wr(1, n.mr, (n.offsets[1] + 3) % n.total, out.data(), n.P);
    ns_send_wr* bad = nullptr;
    EXPECT_EQ(ns_post_send(n.qp, &w, &bad), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("NS_MR_RIG_ONLY"), std::string::npos)
        << ns_last_error();
    EXPECT_EQ(ns_rebind_props(n.mr, nullptr), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("base is NULL"), std::string::npos)
        << ns_last_error();
    EXPECT_EQ(ns_rebind_props(nullptr, n.block.data()), NS_ERR_INVALID);
    EXPECT_EQ(region_stats(n.ctx).value("rebinds", -1), 0);
    n.sync->arrive_and_wait();
  });
}

// A region registered for one-sided reads cannot move locally: a peer's RDMA READ would still
// read the registered buffer.
TEST(RegionRebind, ARegionForOneSidedReadsIsNotRebound) {
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_INLINE, 0));
  run_cluster(o, [&](Node& n) {
    std::vector<std::uint8_t> other(n.block.size());
    EXPECT_EQ(ns_rebind_props(n.mr, other.data()), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("one-sided"), std::string::npos) << ns_last_error();
    std::vector<std::uint8_t> out(n.total * n.P);
    gather_all(n, out);
    check_all_rows(out, n, false);
    ASSERT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();
  });
}

// Registration flags are agreed: unknown bits fail every node with the reason, and nodes that
// pass different flags all fail instead of some serving one-sided reads and others refusing.
TEST(RegionRebind, RegistrationFlagsAreCheckedAndAgreed) {
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_INLINE, 0));
  run_cluster(o, [&](Node& n) {
    ASSERT_EQ(ns_dereg_props(n.mr), NS_OK) << ns_last_error();
    n.mr = nullptr;
    const std::uint64_t rows = n.offsets[n.rank + 1] - n.offsets[n.rank];
    ns_mr* mr = nullptr;
    EXPECT_EQ(ns_reg_props_ex(n.ctx, n.block.data(), rows, n.P, n.offsets.data(), 1u << 7, &mr),
              NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("unknown flags"), std::string::npos)
        << ns_last_error();
    const std::uint32_t mine = n.rank == 0 ? std::uint32_t{NS_MR_RIG_ONLY} : 0u;
    EXPECT_EQ(ns_reg_props_ex(n.ctx, n.block.data(), rows, n.P, n.offsets.data(), mine, &mr),
              NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("flags"), std::string::npos) << ns_last_error();
    // Agreed flags register; the cluster's teardown deregisters it.
    ASSERT_EQ(
        ns_reg_props_ex(n.ctx, n.block.data(), rows, n.P, n.offsets.data(), NS_MR_RIG_ONLY, &n.mr),
        NS_OK)
        << ns_last_error();
    n.sync->arrive_and_wait();
  });
}
