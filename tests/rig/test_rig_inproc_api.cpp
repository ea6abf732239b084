// RIG engine on in-process fabrics, continued (test_rig_inproc.cpp): INLINE mode, statistics and
// their JSON form, concurrent posters, object lifetimes, limits and status strings.
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
