// Learned gather plans (ns_plan_create / NS_WR_RIG_PLAN): a replay writes exactly what a fresh
// NS_WR_RIG gather writes (every byte, every layout, duplicates, empty lists, 1..4 nodes), reads
// the owners' current data, and is never stale: a changed caller array, a region registered
// again, a new epoch, a peer that died. Plus the owner's validation of forged plan packets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "concat/frame.hpp"
#include "concat/plan_wire.hpp"
#include "raw_peer.hpp"
#include "rig/engine.hpp"
#include "rig_cluster.hpp"
#include "transport/transport.hpp"

using namespace rigtest;
namespace nrig = netsparse::rig;
namespace cc = netsparse::concat;
namespace tr = netsparse::transport;

namespace {

ns_send_wr plan_start(std::uint64_t id, ns_plan* p, unsigned flags = NS_SEND_SIGNALED) {
  ns_send_wr wr = work_request(id, NS_WR_RIG_PLAN, flags);
  wr.wr.plan.plan = p;
  return wr;
}

// Posts one work request and waits for its completion; returns its status.
int run_one(Node& n, ns_send_wr wr) {
  ns_send_wr* bad = nullptr;
  const ns_status_t s = ns_post_send(n.qp, &wr, &bad);
  EXPECT_EQ(s, NS_OK) << ns_last_error();
  if (s != NS_OK) return -1;
  const auto wc = wait_completions(n.cq, 1);
  return wc.empty() ? -1 : wc[0].status;
}

// A plan of the POSITIONAL gather of idx into out (nullptr, and a failure, if refused).
ns_plan* positional_plan(Node& n, const std::vector<std::uint64_t>& idx,
                         std::vector<std::uint8_t>& out) {
  ns_send_wr wr = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
  ns_plan* plan = nullptr;
  EXPECT_EQ(ns_plan_create(n.ctx, &wr, &plan), NS_OK) << ns_last_error();
  return plan;
}

// The plan's first two starts: the first records, the second replays; both succeed.
void record_and_replay(Node& n, ns_plan* plan) {
  EXPECT_EQ(run_one(n, plan_start(1, plan)), NS_WC_SUCCESS);
  EXPECT_EQ(run_one(n, plan_start(2, plan)), NS_WC_SUCCESS);
}

// Every node changes its own rows (so a replay must read current data): row r's bytes + salt.
void salt_block(Node& n, std::uint8_t salt) {
  const std::uint64_t begin = n.offsets[static_cast<std::size_t>(n.rank)];
  for (std::size_t b = 0; b < n.block.size(); ++b) {
    n.block[b] = static_cast<std::uint8_t>(prop_byte(begin + b / n.P, b % n.P) + salt);
  }
}

struct PlanCase {
  const char* name;
  int nodes;
  std::uint32_t P;
  int layout;
  std::uint32_t flags;
  std::size_t count;
};
void PrintTo(const PlanCase& c, std::ostream* os) {
  *os << c.name;
}

class PlanReplay : public ::testing::TestWithParam<PlanCase> {};

}  // namespace

TEST_P(PlanReplay, EqualsAFreshGatherByteForByteAndReadsCurrentData) {
  const PlanCase pc = GetParam();
  ClusterOptions o = cluster_options(pc.nodes, pc.P, make_attr(NS_PROGRESS_THREAD, pc.flags));
  run_cluster(o, [&](Node& n) {
    const bool indexed = pc.layout == NS_RIG_LAYOUT_INDEXED;
    std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, pc.count, 16, 7 + n.rank);
    const std::uint64_t len = indexed ? n.total : idx.size();
    std::vector<std::uint8_t> out(std::max<std::uint64_t>(1, len) * n.P, kSentinel);
    std::vector<std::uint8_t> fresh(out.size(), kSentinel);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(n.ctx, nullptr, &plan), NS_ERR_INVALID);
    ns_send_wr wr = rig(1, n.mr, idx, out.data(), pc.layout, 0, indexed ? n.total : 0);
    ASSERT_EQ(ns_plan_create(n.ctx, &wr, &plan), NS_OK) << ns_last_error();
    // The plan copied the list: changing the caller's array afterwards changes nothing.
    const std::vector<std::uint64_t> original = idx;
    for (auto& i : idx) i = 0;
    std::uint64_t recorded_remote = 0;  // read PRs the recording sent
    for (int start = 0; start < 4; ++start) {
      salt_block(n, static_cast<std::uint8_t>(17 * start));
      n.sync->arrive_and_wait();  // every owner's data is in place before anyone gathers
      std::fill(out.begin(), out.end(), kSentinel);
      std::fill(fresh.begin(), fresh.end(), kSentinel);
      EXPECT_EQ(run_one(n, plan_start(10 + start, plan)), NS_WC_SUCCESS) << "start " << start;
      if (start == 0) recorded_remote = stat(n.ctx, NS_STAT_PRS_SENT);
      // A new epoch: an INDEXED gather into the same buffer again must not be filtered.
      ns_send_wr f = rig(2, n.mr, original, fresh.data(), pc.layout, 0, indexed ? n.total : 0,
                         NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH);
      EXPECT_EQ(run_one(n, f), NS_WC_SUCCESS);
      EXPECT_EQ(std::memcmp(out.data(), fresh.data(), out.size()), 0)
          << "node " << n.rank << " start " << start << ": replay differs from a fresh gather";
      n.sync->arrive_and_wait();  // nobody changes its rows while a peer still reads them
      EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    }
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_RECORDS), 1u);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_REPLAYS), 3u);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_ROWS), 3 * recorded_remote)
        << "each replay lands each recorded remote row once";
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK) << ns_last_error();
    EXPECT_EQ(ns_plan_destroy(plan), NS_ERR_INVALID) << "a destroyed plan is not a live handle";
  });
}

INSTANTIATE_TEST_SUITE_P(
    Rig, PlanReplay,
    ::testing::Values(PlanCase{"one_node", 1, 8, NS_RIG_LAYOUT_POSITIONAL, 0, 500},
                      PlanCase{"n2_positional_p4", 2, 4, NS_RIG_LAYOUT_POSITIONAL, 0, 3000},
                      PlanCase{"n2_indexed_p64", 2, 64, NS_RIG_LAYOUT_INDEXED, 0, 3000},
                      PlanCase{"n3_positional_p8", 3, 8, NS_RIG_LAYOUT_POSITIONAL, 0, 5000},
                      PlanCase{"n4_positional_p256", 4, 256, NS_RIG_LAYOUT_POSITIONAL, 0, 2000},
                      PlanCase{"n4_indexed_p16", 4, 16, NS_RIG_LAYOUT_INDEXED, 0, 5000},
                      PlanCase{"n3_nofilter", 3, 8, NS_RIG_LAYOUT_POSITIONAL, NS_CTX_NO_FILTER,
                               2000},
                      PlanCase{"n2_empty", 2, 8, NS_RIG_LAYOUT_POSITIONAL, 0, 0}),
    [](const auto& info) { return std::string(info.param.name); });

// Owner-pushed replays (NS_SEND_PUSHED + ns_plan_push): the first start records, the second
// asks and arms the owners, every later one is pushed by the owners without a request and equals
// a fresh gather of their current rows, every layout and node count of PlanReplay's. Rows pushed
// before the start is posted land early; a push with another tag pushes nothing; the same plan
// started without the flag asks again (and disarms), and with it arms again.
class PlanPushed : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanPushed, EqualsAFreshGatherWithoutAnyRequest) {
  const PlanCase pc = GetParam();
  ClusterOptions o = cluster_options(pc.nodes, pc.P, make_attr(NS_PROGRESS_THREAD, pc.flags));
  constexpr std::uint32_t kTag = 0x5eed;
  run_cluster(o, [&](Node& n) {
    const bool indexed = pc.layout == NS_RIG_LAYOUT_INDEXED;
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, pc.count, 16, 11 + n.rank);
    const std::uint64_t len = indexed ? n.total : idx.size();
    std::vector<std::uint8_t> out(std::max<std::uint64_t>(1, len) * n.P, kSentinel);
    std::vector<std::uint8_t> fresh(out.size(), kSentinel);
    ns_send_wr wr = rig(1, n.mr, idx, out.data(), pc.layout, 0, indexed ? n.total : 0);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(n.ctx, &wr, &plan), NS_OK) << ns_last_error();
    const auto pushed_start = [&](std::uint64_t id, unsigned flags) {
      ns_send_wr w = plan_start(id, plan, NS_SEND_SIGNALED | flags);
      w.wr.plan.push_tag = kTag;
      w.wr.plan.push_round = static_cast<std::uint32_t>(id - 20);  // the round: the start's index
      return w;
    };
    const auto plan_stat = [&](const char* key) {
      return nlohmann::json::parse(stats_json_text(n.ctx))["plans"][key].get<std::uint64_t>();
    };
    std::uint64_t starts_armed = 0;
    for (int start = 0; start < 7; ++start) {
      salt_block(n, static_cast<std::uint8_t>(29 * start));
      // Cleared before the fence: pushed rows may land as soon as a peer passes it.
      std::fill(out.begin(), out.end(), kSentinel);
      // The fence a pusher needs: every node's rows are in place and every node is done with
      // its previous output.
      n.sync->arrive_and_wait();
      int lists = -1;
      ASSERT_EQ(ns_plan_push(n.ctx, kTag + 1, static_cast<std::uint32_t>(start), &lists), NS_OK)
          << ns_last_error();
      EXPECT_EQ(lists, 0) << "no list is armed with another tag";
      if (start != 4) {  // start 4 asks without the flag: nobody pushes it (ns_plan_push's rule)
        ASSERT_EQ(ns_plan_push(n.ctx, kTag, static_cast<std::uint32_t>(start), &lists), NS_OK)
            << ns_last_error();
        const bool armed = start == 2 || start == 3 || start == 6;
        EXPECT_EQ(lists > 0, armed && pc.nodes > 1 && pc.count > 0)
            << "start " << start << ": " << lists << " lists pushed";
      }
      if (start == 2) starts_armed = plan_stat("starts_sent");
      if (start == 3) {
        // Posted only once the pushed rows are here: they landed before their start.
        std::uint64_t remote_rows = 0;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (std::chrono::steady_clock::now() < deadline &&
               (remote_rows = plan_stat("rows_early")) == 0 && pc.nodes > 1 && pc.count > 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (pc.nodes > 1 && pc.count > 0) {
          EXPECT_GT(remote_rows, 0u) << "nothing landed early";
        }
      }
      // Start 4 asks without the flag (the owners' lists are disarmed), 5 arms them again.
      const unsigned flags = start == 4 ? 0u : static_cast<unsigned>(NS_SEND_PUSHED);
      EXPECT_EQ(run_one(n, pushed_start(20 + static_cast<std::uint64_t>(start), flags)),
                NS_WC_SUCCESS)
          << "start " << start;
      std::fill(fresh.begin(), fresh.end(), kSentinel);
      ns_send_wr f = rig(2, n.mr, idx, fresh.data(), pc.layout, 0, indexed ? n.total : 0,
                         NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH);
      EXPECT_EQ(run_one(n, f), NS_WC_SUCCESS);
      EXPECT_EQ(std::memcmp(out.data(), fresh.data(), out.size()), 0)
          << "node " << n.rank << " start " << start << ": replay differs from a fresh gather";
      if (start == 3) {
        EXPECT_EQ(plan_stat("starts_sent"), starts_armed) << "a pushed start asked an owner";
      }
      n.sync->arrive_and_wait();
      EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    }
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_RECORDS), 1u);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_REPLAYS), 6u);
    if (pc.nodes > 1 && pc.count > 0) {
      // Starts 2, 3 and 6 pushed by every owner; 1, 4 and 5 asked each owner.
      const std::uint64_t owners = plan_stat("starts_sent") / 3;
      EXPECT_GT(owners, 0u);
      EXPECT_EQ(plan_stat("starts_sent"), 3 * owners);
      EXPECT_EQ(plan_stat("pushed_starts"), 3 * owners);
    }
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK) << ns_last_error();
  });
}

INSTANTIATE_TEST_SUITE_P(
    Rig, PlanPushed,
    ::testing::Values(PlanCase{"one_node", 1, 8, NS_RIG_LAYOUT_POSITIONAL, 0, 500},
                      PlanCase{"n2_positional_p4", 2, 4, NS_RIG_LAYOUT_POSITIONAL, 0, 3000},
                      PlanCase{"n3_indexed_p64", 3, 64, NS_RIG_LAYOUT_INDEXED, 0, 3000},
                      PlanCase{"n4_positional_p256", 4, 256, NS_RIG_LAYOUT_POSITIONAL, 0, 2000},
                      PlanCase{"n2_empty", 2, 8, NS_RIG_LAYOUT_POSITIONAL, 0, 0}),
    [](const auto& info) { return std::string(info.param.name); });

// A pushed start whose owners never push completes by the watchdog (never hangs, never writes
// stale rows as success); NS_SEND_PUSHED outside a plan start is refused.
TEST(PlanPushed, WithoutAPushTheWatchdogEndsTheStart) {
  ClusterOptions o = cluster_options(2, 8, make_attr(NS_PROGRESS_THREAD, 0));
  o.attr.watchdog_ms = 500;
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 400, 8, 5 + n.rank);
    std::vector<std::uint8_t> out(idx.size() * n.P, kSentinel);
    ns_send_wr bad = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL, 0, 0,
                         NS_SEND_SIGNALED | NS_SEND_PUSHED);
    EXPECT_EQ(ns_post_send(n.qp, &bad, nullptr), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("NS_SEND_PUSHED"), std::string::npos)
        << ns_last_error();
    ns_send_wr wr = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(n.ctx, &wr, &plan), NS_OK) << ns_last_error();
    ns_send_wr w = plan_start(1, plan, NS_SEND_SIGNALED | NS_SEND_PUSHED);
    w.wr.plan.push_tag = 3;
    EXPECT_EQ(run_one(n, w), NS_WC_SUCCESS);  // records
    EXPECT_EQ(run_one(n, w), NS_WC_SUCCESS);  // asks and arms
    n.sync->arrive_and_wait();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    EXPECT_EQ(run_one(n, w), NS_WC_WATCHDOG_TIMEOUT) << "nobody pushed";
    n.sync->arrive_and_wait();
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK) << ns_last_error();
  });
}

// A region registered again (other partition, other data) makes the recording stale: the next
// start records afresh, and the output follows the new region.
TEST(Plan, RegionRegisteredAgainIsRecordedAfresh) {
  ClusterOptions o = cluster_options(3, 8, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 2000, 16, 3 + n.rank);
    std::vector<std::uint8_t> out(idx.size() * n.P);
    ns_plan* plan = positional_plan(n, idx, out);
    ASSERT_NE(plan, nullptr);
    record_and_replay(n, plan);
    check_positional(out, idx, n.P, n.rank);
    // New partition: uneven blocks over the same total rows.
    ASSERT_EQ(ns_dereg_props(n.mr), NS_OK) << ns_last_error();
    const std::vector<std::uint64_t> off = uneven_offsets(n.nodes, n.total, 5);
    n.block = make_block(off[n.rank], off[n.rank + 1], n.P);
    ASSERT_EQ(
        ns_reg_props(n.ctx, n.block.data(), off[n.rank + 1] - off[n.rank], n.P, off.data(), &n.mr),
        NS_OK)
        << ns_last_error();
    std::fill(out.begin(), out.end(), kSentinel);
    EXPECT_EQ(run_one(n, plan_start(3, plan)), NS_WC_SUCCESS);
    check_positional(out, idx, n.P, n.rank);
    std::fill(out.begin(), out.end(), kSentinel);
    EXPECT_EQ(run_one(n, plan_start(4, plan)), NS_WC_SUCCESS);
    check_positional(out, idx, n.P, n.rank);
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_RECORDS), 2u) << "recorded once per region";
    EXPECT_EQ(stat(n.ctx, NS_STAT_PLAN_REPLAYS), 2u);
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK);
  });
}

// A start carrying NS_SEND_NEW_EPOCH, and RIG work of other epochs between starts: the replay
// does not depend on the Idx Filter, so its output stays complete.
TEST(Plan, EpochsBetweenStartsDoNotMatter) {
  ClusterOptions o = cluster_options(2, 16, make_attr(NS_PROGRESS_THREAD, 0));
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 1000, 8, 11 + n.rank);
    std::vector<std::uint8_t> out(n.total * n.P, kSentinel), other(n.total * n.P, kSentinel);
    ns_send_wr wr = rig(1, n.mr, idx, out.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(n.ctx, &wr, &plan), NS_OK) << ns_last_error();
    const std::set<std::uint64_t> rows(idx.begin(), idx.end());
    for (int k = 0; k < 3; ++k) {
      std::fill(out.begin(), out.end(), kSentinel);
      EXPECT_EQ(run_one(n, plan_start(k, plan, NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH)),
                NS_WC_SUCCESS);
      check_indexed(out, 0, n.total, rows, n.P, n.rank);
      // Other gathers on the filter (same rows, another buffer) in the same epoch.
      ns_send_wr g = rig(100 + k, n.mr, idx, other.data(), NS_RIG_LAYOUT_INDEXED, 0, n.total);
      EXPECT_EQ(run_one(n, g), NS_WC_SUCCESS);
    }
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK);
  });
}

// Misuse: a second start while one is in flight, destroy while busy, a plan of another context,
// a plan from an RDMA_READ.
TEST(Plan, MisuseGetsClearErrors) {
  ClusterOptions o;
  o.nodes = 2;
  o.P = 8;
  o.attr = make_attr(NS_PROGRESS_INLINE, 0);  // nothing moves until this thread drives it
  std::vector<ns_plan*> plans(2, nullptr);
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = dup_heavy_idx(n.total, 500, 8, 1 + n.rank);
    std::vector<std::uint8_t> out(idx.size() * n.P);
    ns_send_wr bad_wr{};
    bad_wr.opcode = NS_WR_RDMA_READ;
    ns_plan* plan = nullptr;
    EXPECT_EQ(ns_plan_create(n.ctx, &bad_wr, &plan), NS_ERR_INVALID);
    plan = positional_plan(n, idx, out);
    ASSERT_NE(plan, nullptr);
    plans[static_cast<std::size_t>(n.rank)] = plan;
    n.sync->arrive_and_wait();
    ns_send_wr foreign = plan_start(9, plans[static_cast<std::size_t>(1 - n.rank)]);
    ns_send_wr* bad = nullptr;
    EXPECT_EQ(ns_post_send(n.qp, &foreign, &bad), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("not a live plan of this context"),
              std::string::npos)
        << ns_last_error();
    n.sync->arrive_and_wait();
    // Two starts in one chain: the second is refused while the first is in flight.
    ns_send_wr two[2] = {plan_start(1, plan), plan_start(2, plan)};
    two[0].next = &two[1];
    EXPECT_EQ(ns_post_send(n.qp, two, &bad), NS_ERR_INVALID);
    EXPECT_EQ(bad, &two[1]);
    EXPECT_EQ(ns_plan_destroy(plan), NS_ERR_STATE) << "destroy while a start is in flight";
    const auto wc = wait_completions(n.cq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, NS_WC_SUCCESS);
    EXPECT_EQ(wc[0].opcode, NS_WR_RIG_PLAN);
    EXPECT_EQ(wc[0].count, idx.size());
    check_positional(out, idx, n.P, n.rank);
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK);
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK);
  });
}

// A peer that died between the recording and a replay: the replay fails (error completion), it
// does not hang and writes no stale data it claims as valid.
TEST(Plan, PeerDeadBeforeReplayFails) {
  ClusterOptions o = cluster_options(3, 8, make_attr(NS_PROGRESS_THREAD, 0));
  o.attr.watchdog_ms = 3000;
  o.expect_local_close = true;
  ns_fabric* fabric = nullptr;
  run_cluster(
      o,
      [&](Node& n) {
        // Every node reads rows of every other node.
        std::vector<std::uint64_t> idx;
        for (std::uint64_t r = 0; r < n.total; r += 7) idx.push_back(r);
        std::vector<std::uint8_t> out(idx.size() * n.P);
        ns_plan* plan = positional_plan(n, idx, out);
        ASSERT_NE(plan, nullptr);
        record_and_replay(n, plan);
        n.sync->arrive_and_wait();
        if (n.rank == 2) {
          ASSERT_EQ(ns_fabric_kill_node_reported(fabric, 2), NS_OK);
          n.sync->arrive_and_wait();
          EXPECT_EQ(ns_plan_destroy(plan), NS_OK);
          return;
        }
        n.sync->arrive_and_wait();
        const int st = run_one(n, plan_start(3, plan));
        EXPECT_TRUE(st == NS_WC_TRANSPORT_ERR || st == NS_WC_WATCHDOG_TIMEOUT)
            << ns_wc_status_str(st);
        EXPECT_EQ(ns_plan_destroy(plan), NS_OK);
      },
      &fabric);
}

// ---- the owner's validation of plan packets, forged by a raw endpoint ------------------------
namespace {
std::vector<std::byte> plan_packet(cc::PlanType type, std::uint32_t dest, std::uint32_t rec_len,
                                   std::uint32_t plan, std::uint32_t version, std::uint16_t seq,
                                   std::uint32_t first, const std::vector<std::uint32_t>& rows) {
  const auto n = static_cast<std::uint32_t>(rows.size());
  std::vector<std::byte> p(cc::kPlanHeaderBytes + std::size_t{n} * rec_len);
  cc::encode_plan_header(p.data(), {{type, dest, rec_len, n, 0}, plan, version, seq, first});
  for (std::uint32_t k = 0; k < n; ++k) {
    cc::wire::store<std::uint32_t>(p.data() + cc::kPlanHeaderBytes + 4 * k, rows[k]);
  }
  return p;
}
}  // namespace

TEST(PlanServer, ServesInstalledListsAndRefusesEverythingElse) {
  constexpr std::uint32_t P = 24;
  rigtest::EngineWithRawPeer c(P);
  ASSERT_NE(c.mr, nullptr);
  using T = cc::PlanType;
  // Plan 5: a valid list of two chunks, then a start; plan 6: a row outside the owner's 100
  // rows; plan 7: started without a list; plan 5 again with a wrong length; a chunk that does
  // not continue the list (plan 8); malformed packets.
  c.raw->send(1, plan_packet(T::kInstall, 1, 4, 5, 1, 0, 0, {3, 99, 3}));
  c.raw->send(1, plan_packet(T::kInstall, 1, 4, 5, 1, 0, 3, {0, 50}));
  c.raw->send(1, plan_packet(T::kStart, 1, 0, 5, 1, 42, 5, {}));
  c.raw->send(1, plan_packet(T::kInstall, 1, 4, 6, 1, 0, 0, {1, 100}));
  c.raw->send(1, plan_packet(T::kStart, 1, 0, 6, 1, 43, 2, {}));
  c.raw->send(1, plan_packet(T::kStart, 1, 0, 7, 1, 44, 3, {}));
  c.raw->send(1, plan_packet(T::kStart, 1, 0, 5, 1, 45, 4, {}));
  c.raw->send(1, plan_packet(T::kInstall, 1, 4, 8, 1, 0, 1, {1}));
  c.raw->send(1, plan_packet(T::kStart, 1, 0, 8, 1, 46, 1, {}));
  auto cut = plan_packet(T::kInstall, 1, 4, 9, 1, 0, 0, {1, 2});
  cut.pop_back();
  c.raw->send(1, cut);                                                   // truncated: frame refused
  c.raw->send(1, plan_packet(T::kInstall, 1, 5, 9, 1, 0, 0, {1}));       // rec_len 5 (body of 4)
  c.raw->send(1, plan_packet(T::kStart, 0, 0, 9, 1, 0, 0, {}));          // wrong destination
  c.raw->send(1, plan_packet(T::kRows, 1, P, 77, 1, 0, 0, {}));          // rows with n = 0
  std::map<std::uint16_t, std::pair<T, std::vector<std::uint8_t>>> got;  // seq -> answer
  rigtest::poll_packets(
      *c.raw, 200, [&] { c.engine.progress_inline(); },
      [&](std::span<const std::byte> part) {
        cc::PlanPacket pk;
        ASSERT_EQ(cc::decode_plan_packet(part, 0, P, &pk), cc::DecodeError::kOk);
        auto& [type, bytes] = got[pk.header.seq];
        type = pk.header.type;
        if (type == T::kRows) {
          EXPECT_EQ(pk.header.first, bytes.size() / P);
          const auto* b = reinterpret_cast<const std::uint8_t*>(pk.body.data());
          bytes.insert(bytes.end(), b, b + pk.body.size());
        } else {
          bytes.assign(1, static_cast<std::uint8_t>(pk.header.first));
        }
      },
      [&] { return got.size() >= 5; });
  ASSERT_EQ(got.size(), 5u);
  ASSERT_EQ(got[42].first, T::kRows);
  const std::vector<std::uint64_t> want = {103, 199, 103, 100, 150};
  ASSERT_EQ(got[42].second.size(), want.size() * P);
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(check_prop(got[42].second.data() + k * P, want[k], P), "") << k;
  }
  auto refusal = [&](std::uint16_t seq) {
    return static_cast<cc::PlanRefusal>(got[seq].second.at(0));
  };
  EXPECT_EQ(got[43].first, T::kRefuse);
  EXPECT_EQ(refusal(43), cc::PlanRefusal::kOutOfRange);
  EXPECT_EQ(refusal(44), cc::PlanRefusal::kUnknown);
  EXPECT_EQ(refusal(45), cc::PlanRefusal::kBadList);
  EXPECT_EQ(refusal(46), cc::PlanRefusal::kBadList);
  const auto s = c.engine.snapshot();
  EXPECT_EQ(s.plans.rows_served, 5u);
  EXPECT_EQ(s.plans.refused, 4u);
  EXPECT_EQ(s.plans.malformed, 3u) << "bad rec_len, wrong destination, rows with n = 0";
  EXPECT_EQ(s.malformed_packets, 1u) << "the truncated frame, refused whole";
  EXPECT_EQ(s.malformed_total(), 4u) << "NS_STAT_MALFORMED counts the plan unit's refusals too";
  EXPECT_EQ(s.plans.stale, 0u);
  // Rows for a plan nobody started are dropped as stale (a late answer, not malformed).
  std::vector<std::byte> rows(cc::kPlanHeaderBytes + P);
  cc::encode_plan_header(rows.data(), {{T::kRows, 1, P, 1, 0}, 77, 1, 0, 0});
  c.raw->send(1, rows);
  for (int k = 0; k < 50; ++k) c.engine.progress_inline();
  EXPECT_EQ(c.engine.snapshot().plans.stale, 1u);
  // Teardown: node 0 declares itself done (a control PR), then both run the collectives.
  EXPECT_TRUE(deregister_with_raw_peer(*c.raw, c.raw_region, P,
                                       [&] { return c.engine.deregister_region(c.mr); }));
}
