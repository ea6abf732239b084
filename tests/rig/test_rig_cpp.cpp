// The C++ layer: RAII handles, spans, exceptions carrying the status in the "netsparse"
// error category.
#include <gtest/gtest.h>

#include <barrier>
#include <nlohmann/json.hpp>
#include <thread>

#include "netsparse/netsparse.hpp"
#include "rig_test_util.hpp"

namespace ns = netsparse;

TEST(Cpp, RaiiGatherBothLayoutsAndErrors) {
  constexpr int kNodes = 3;
  constexpr std::size_t K = 5;  // floats per property
  ns::Fabric fabric(kNodes);
  const auto offsets = rigtest::equal_offsets(kNodes, 90);
  std::barrier<> sync(kNodes);
  std::vector<std::thread> threads;
  for (int r = 0; r < kNodes; ++r) {
    threads.emplace_back([&, r] {
      ns::Context ctx = ns::Context::inproc(
          fabric, r, ns::ContextAttr().units(1, 1).watchdog(std::chrono::milliseconds(20000)));
      EXPECT_EQ(ctx.rank(), r);
      EXPECT_EQ(ctx.size(), kNodes);
      const std::uint64_t begin = offsets[r], end = offsets[r + 1];
      std::vector<float> local((end - begin) * K);
      for (std::uint64_t row = begin; row < end; ++row)
        for (std::size_t k = 0; k < K; ++k)
          local[(row - begin) * K + k] = static_cast<float>(row * 10 + k);
      ns::PropertyRegion mr(ctx, std::span<float>(local), K, offsets);
      EXPECT_EQ(mr.prop_bytes(), K * sizeof(float));
      EXPECT_EQ(mr.total_rows(), 90u);
      ns::Cq cq(ctx, 16);
      ns::Qp qp(ctx, cq, 8);
      const std::vector<std::uint64_t> idx = {89, 0, 45, 45, 30, 89};
      std::vector<float> pos(idx.size() * K), panel(30 * K, -1.0f);
      const std::vector<std::uint64_t> panel_idx = {31, 59, 40, 31};
      ns_send_wr a = ns::rig_wr(1, mr, idx, std::span<float>(pos), ns::Layout::kPositional);
      ns_send_wr b =
          ns::rig_wr(2, mr, panel_idx, std::span<float>(panel), ns::Layout::kIndexed, 30, 30);
      // An output one property short is refused before anything is written.
      ns_send_wr shorter = ns::rig_wr(4, mr, idx, std::span<float>(pos).first(pos.size() - K),
                                      ns::Layout::kPositional);
      try {
        qp.post(shorter);
        ADD_FAILURE() << "a too-small output was accepted";
      } catch (const ns::Error& e) {
        EXPECT_EQ(e.status(), NS_ERR_INVALID);
        EXPECT_NE(std::string(e.what()).find("wr.rig.out_bytes"), std::string::npos) << e.what();
      }
      a.next = &b;
      qp.post(a);
      ns_wc wc[2];
      std::size_t got = 0;
      while (got < 2)
        got += cq.wait(std::span<ns_wc>(wc + got, 2 - got), std::chrono::milliseconds(20000));
      for (const ns_wc& w : wc) EXPECT_EQ(w.status, NS_WC_SUCCESS);
      for (std::size_t j = 0; j < idx.size(); ++j)
        for (std::size_t k = 0; k < K; ++k)
          EXPECT_EQ(pos[j * K + k], static_cast<float>(idx[j] * 10 + k));
      for (std::uint64_t row : panel_idx)
        for (std::size_t k = 0; k < K; ++k)
          EXPECT_EQ(panel[(row - 30) * K + k], static_cast<float>(row * 10 + k));
      EXPECT_EQ(panel[(32 - 30) * K], -1.0f);  // not requested, untouched
      // An invalid work request throws netsparse::Error with its status and the reason.
      ns_send_wr bad = ns::rig_wr(3, mr, idx, std::span<float>(pos), ns::Layout::kIndexed, 0, 0);
      try {
        qp.post(bad);
        ADD_FAILURE() << "no exception";
      } catch (const ns::Error& e) {
        EXPECT_EQ(e.status(), NS_ERR_INVALID);
        EXPECT_EQ(e.code().category().name(), std::string("netsparse"));
        EXPECT_EQ(e.code(), ns::make_error_code(NS_ERR_INVALID));
        EXPECT_NE(std::string(e.what()).find("window_len"), std::string::npos) << e.what();
      }
      EXPECT_TRUE(ctx.quiesce(std::chrono::milliseconds(20000)));
      const std::string json = ctx.stats_json();
      EXPECT_TRUE(nlohmann::json::accept(json)) << json;
      sync.arrive_and_wait();
      // RAII: qp, cq, region, context are released in reverse order here.
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THROW(ns::Fabric(0), ns::Error);
}
