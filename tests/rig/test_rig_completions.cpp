// A completion queue smaller than its queue pair (issue 21.5): completions that find the CQ full
// wait in the engine, and so do their queue-pair slots, so a host that posts whenever the queue
// pair has room is held back instead of running ahead of the CQ without bound.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "netsparse/netsparse.h"
#include "rig_wr.hpp"

namespace {

TEST(Completions, WaitingCompletionsHoldTheirQueuePairSlots) {
  ns_fabric* fabric = nullptr;
  ASSERT_EQ(ns_fabric_create(1, &fabric), NS_OK);
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS;
  attr.progress_mode = NS_PROGRESS_INLINE;  // nothing moves unless this thread drives it
  ns_context* ctx = nullptr;
  ASSERT_EQ(ns_open_inproc(fabric, 0, &attr, &ctx), NS_OK) << ns_last_error();
  constexpr std::uint64_t kRows = 16;
  std::vector<std::uint32_t> table(kRows);
  for (std::uint64_t r = 0; r < kRows; ++r) table[r] = static_cast<std::uint32_t>(100 + r);
  const std::uint64_t offsets[] = {0, kRows};
  ns_mr* mr = nullptr;
  ASSERT_EQ(ns_reg_props(ctx, table.data(), kRows, 4, offsets, &mr), NS_OK) << ns_last_error();
  constexpr int kDepth = 4;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ASSERT_EQ(ns_create_cq(ctx, 1, &cq), NS_OK);
  ASSERT_EQ(ns_create_qp(ctx, cq, kDepth, &qp), NS_OK);

  // Post whenever the queue pair takes a request, never poll: 100 rounds.
  const std::uint64_t idx[2] = {3, 7};
  std::vector<std::uint32_t> out(2);
  std::uint64_t posted = 0;
  int refused = 0;
  for (int round = 0; round < 100; ++round) {
    ns_send_wr w = rigtest::rig_wr(posted, mr, idx, 2, out.data());
    w.wr.rig.out_bytes = sizeof(std::uint32_t) * out.size();
    ns_send_wr* bad = nullptr;
    const ns_status_t s = ns_post_send(qp, &w, &bad);
    if (s == NS_OK) {
      ++posted;
    } else {
      ASSERT_EQ(s, NS_ERR_NO_RESOURCE) << ns_last_error();
      ++refused;
    }
    for (int k = 0; k < 4; ++k) ns_progress(ctx);
    // One completion in the CQ, the rest held by the engine: never more than the queue pair.
    ASSERT_LE(ns_stat_get(ctx, NS_STAT_WC_BACKLOG), static_cast<std::uint64_t>(kDepth));
  }
  // The CQ holds 1 and the queue pair's 4 slots hold the rest: 5 accepted, then refusals.
  EXPECT_EQ(posted, 1u + kDepth);
  EXPECT_EQ(refused, 100 - static_cast<int>(posted));
  EXPECT_EQ(ns_stat_get(ctx, NS_STAT_WC_BACKLOG), static_cast<std::uint64_t>(kDepth));
  EXPECT_EQ(ns_stat_get(ctx, NS_STAT_COMMANDS_ACTIVE), 0u);
  EXPECT_EQ(ns_destroy_qp(qp), NS_ERR_STATE);  // completions are still on their way

  // Polling frees room: every completion arrives exactly once, in the end nothing is held.
  std::set<std::uint64_t> seen;
  for (int k = 0; k < 100 && seen.size() < posted; ++k) {
    ns_wc wc{};
    const int got = ns_poll_cq(cq, 1, &wc);
    ASSERT_GE(got, 0);
    if (got == 1) {
      EXPECT_EQ(wc.status, NS_WC_SUCCESS);
      EXPECT_TRUE(seen.insert(wc.wr_id).second) << "wr_id " << wc.wr_id << " twice";
    }
  }
  EXPECT_EQ(seen.size(), posted);
  EXPECT_EQ(ns_stat_get(ctx, NS_STAT_WC_BACKLOG), 0u);
  EXPECT_EQ(out[0], 103u);
  EXPECT_EQ(out[1], 107u);
  EXPECT_EQ(ns_destroy_qp(qp), NS_OK);
  EXPECT_EQ(ns_destroy_cq(cq), NS_OK);
  EXPECT_EQ(ns_dereg_props(mr), NS_OK);
  EXPECT_EQ(ns_close(ctx), NS_OK);
  ns_fabric_destroy(fabric);
}

}  // namespace
