// Remote Indexed Scatter-Reduce (NS_WR_RIS) on in-process fabrics: every byte of every node's
// rows against a sequential reference (1, 3 and 4 nodes, every datatype and op, heavy
// duplication inside and across work requests, both progress modes); an out-of-range idx writes
// nothing anywhere; validation; dead owners (reported and silent); and the owner's handling of
// forged scatter packets (a packet with one foreign row is refused whole).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "concat/frame.hpp"
#include "concat/scatter_wire.hpp"
#include "raw_peer.hpp"
#include "rig/engine.hpp"
#include "rig/scatter_unit.hpp"
#include "rig_cluster.hpp"
#include "ris_reference.hpp"
#include "transport/transport.hpp"

using namespace rigtest;
namespace nrig = netsparse::rig;
namespace cc = netsparse::concat;
namespace tr = netsparse::transport;

namespace {

struct ScatterCase {
  const char* name;
  int nodes;
  std::uint32_t P;
  int datatype;
  int op;
  int progress;
  bool unique = false;  // NS_SEND_UNIQUE on WRs full of repeats: no combining, the same bytes
};
void PrintTo(const ScatterCase& c, std::ostream* os) {
  *os << c.name;
}
class ScatterReduce : public ::testing::TestWithParam<ScatterCase> {};

int post_ris(Node& n, std::uint64_t id, const std::vector<std::uint64_t>& idx, const void* values,
             std::uint64_t values_bytes, int op, int datatype, unsigned flags = 0) {
  ns_send_wr wr = ris_wr(id, n.mr, idx.data(), idx.size(), values, values_bytes, op, datatype);
  wr.send_flags |= flags;
  ns_send_wr* bad = nullptr;
  return ns_post_send(n.qp, &wr, &bad);
}

}  // namespace

TEST_P(ScatterReduce, EveryByteEqualsASequentialReference) {
  const ScatterCase sc = GetParam();
  constexpr int kWrs = 3;
  constexpr std::size_t kCount = 3000;
  ClusterOptions o;
  o.nodes = sc.nodes;
  o.P = sc.P;
  o.attr = make_attr(sc.progress, 0);
  run_cluster(o, [&](Node& n) {
    const std::uint64_t begin = n.offsets[static_cast<std::size_t>(n.rank)];
    const std::uint64_t rows = n.offsets[static_cast<std::size_t>(n.rank) + 1] - begin;
    auto* block = reinterpret_cast<std::byte*>(n.block.data());
    for (std::uint64_t r = 0; r < rows; ++r) fill_row(block + r * n.P, n.P, sc.datatype, begin + r);
    const std::vector<std::byte> want =
        ris_reference({block, block + rows * n.P}, begin, rows, n.nodes, kWrs, n.total, kCount, n.P,
                      sc.op, sc.datatype);
    n.sync->arrive_and_wait();  // every block initialized before anyone scatters into it
    std::vector<Updates> mine;
    for (int w = 0; w < kWrs; ++w) {
      mine.push_back(make_updates(n.rank, w, n.total, kCount, n.P, sc.datatype));
      ASSERT_EQ(post_ris(n, static_cast<std::uint64_t>(w), mine.back().idx,
                         mine.back().values.data(), mine.back().values.size(), sc.op, sc.datatype,
                         sc.unique ? unsigned{NS_SEND_UNIQUE} : 0u),
                NS_OK)
          << ns_last_error();
    }
    for (const ns_wc& wc : wait_completions(n.cq, kWrs)) {
      EXPECT_EQ(wc.status, NS_WC_SUCCESS) << ns_wc_status_str(wc.status);
      EXPECT_EQ(wc.opcode, NS_WR_RIS);
      EXPECT_EQ(wc.count, kCount);
    }
    ASSERT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();
    for (std::uint64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(std::memcmp(block + r * n.P, want.data() + r * n.P, n.P), 0)
          << "node " << n.rank << " row " << begin + r;
    }
    // Pre-combining: the hot rows repeat, so fewer rows travel than were posted -- unless the
    // WRs said their idxs were distinct (they are not here): then every record travels, and the
    // owners' in-order application gives the same bytes.
    const std::uint64_t records = ns_stat_get(n.ctx, NS_STAT_SCATTER_RECORDS);
    EXPECT_EQ(records, kWrs * kCount);
    EXPECT_EQ(records, ns_stat_get(n.ctx, NS_STAT_SCATTER_COMBINED) +
                           ns_stat_get(n.ctx, NS_STAT_SCATTER_LOCAL) +
                           ns_stat_get(n.ctx, NS_STAT_SCATTER_SENT));
    if (sc.unique) {
      EXPECT_EQ(ns_stat_get(n.ctx, NS_STAT_SCATTER_COMBINED), 0u);
    } else {
      EXPECT_GT(ns_stat_get(n.ctx, NS_STAT_SCATTER_COMBINED), kWrs * kCount / 3);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScatterReduce,
    ::testing::Values(
        ScatterCase{"one_node_f32_sum", 1, 16, NS_RIS_FLOAT32, NS_RIS_SUM, 0},
        ScatterCase{"three_f32_sum_k1", 3, 4, NS_RIS_FLOAT32, NS_RIS_SUM, 0},
        ScatterCase{"three_f64_sum_inline", 3, 64, NS_RIS_FLOAT64, NS_RIS_SUM, NS_PROGRESS_INLINE},
        ScatterCase{"four_i32_sum", 4, 12, NS_RIS_INT32, NS_RIS_SUM, 0},
        ScatterCase{"four_i64_sum_inline", 4, 24, NS_RIS_INT64, NS_RIS_SUM, NS_PROGRESS_INLINE},
        ScatterCase{"three_f32_min", 3, 8, NS_RIS_FLOAT32, NS_RIS_MIN, 0},
        ScatterCase{"three_i64_max", 3, 16, NS_RIS_INT64, NS_RIS_MAX, 0},
        ScatterCase{"four_f64_max", 4, 8, NS_RIS_FLOAT64, NS_RIS_MAX, 0},
        ScatterCase{"three_f32_sum_unique_hint", 3, 16, NS_RIS_FLOAT32, NS_RIS_SUM, 0, true},
        ScatterCase{"four_i64_max_unique_hint", 4, 8, NS_RIS_INT64, NS_RIS_MAX, NS_PROGRESS_INLINE,
                    true},
        ScatterCase{"one_node_i32_sum_unique_hint", 1, 12, NS_RIS_INT32, NS_RIS_SUM, 0, true}),
    [](const auto& info) { return std::string(info.param.name); });

// An idx beyond the region: the WR fails with its position and writes nothing on any node, even
// the rows of the valid idxs before it.
TEST(ScatterReduceErrors, OutOfRangeIdxWritesNothingAnywhere) {
  ClusterOptions o;
  o.nodes = 3;
  o.P = 8;
  o.attr = make_attr(NS_PROGRESS_THREAD, 0);
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint8_t> before = n.block;
    n.sync->arrive_and_wait();
    if (n.rank == 0) {
      std::vector<std::uint64_t> idx;
      for (std::uint64_t r = 0; r < n.total; r += 3) idx.push_back(r);  // every node's rows
      idx.push_back(n.total);                                           // one past the end
      idx.push_back(1);
      std::vector<std::int64_t> values(idx.size(), 5);
      ASSERT_EQ(post_ris(n, 9, idx, values.data(), values.size() * 8, NS_RIS_SUM, NS_RIS_INT64),
                NS_OK)
          << ns_last_error();
      const auto wc = wait_completions(n.cq, 1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, NS_WC_LOC_INV_REQ);
      EXPECT_EQ(wc[0].count, idx.size() - 2) << "the position of the offending idx";
    }
    ASSERT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    n.sync->arrive_and_wait();
    EXPECT_EQ(n.block, before) << "node " << n.rank << ": rows changed by a failed scatter";
  });
}

TEST(ScatterReduceErrors, InvalidWorkRequestsAreRefusedWithAReason) {
  ClusterOptions o;
  o.nodes = 1;
  o.P = 12;  // three int32 / float32, not a whole number of 8-byte elements
  o.attr = make_attr(NS_PROGRESS_THREAD, 0);
  run_cluster(o, [&](Node& n) {
    const std::vector<std::uint64_t> idx = {1, 2};
    std::vector<std::byte> v(2 * 12);
    auto refused = [&](int op, int dt, const void* values, std::uint64_t bytes, const char* why) {
      EXPECT_EQ(post_ris(n, 1, idx, values, bytes, op, dt), NS_ERR_INVALID) << why;
      EXPECT_NE(std::string(ns_last_error()).find(why), std::string::npos) << ns_last_error();
    };
    refused(NS_RIS_SUM, NS_RIS_INT32, nullptr, 24, "values is NULL");
    refused(NS_RIS_SUM, NS_RIS_INT32, v.data(), 23, "values_bytes");
    refused(7, NS_RIS_INT32, v.data(), 24, "wr.ris.op");
    refused(NS_RIS_SUM, -1, v.data(), 24, "wr.ris.datatype");
    refused(NS_RIS_SUM, NS_RIS_FLOAT64, v.data(), 24, "multiple of the size");
    ns_send_wr wr{};
    wr.opcode = NS_WR_RIS;
    wr.send_flags = NS_SEND_NEW_EPOCH;
    wr.wr.ris.mr = n.mr;
    ns_send_wr* bad = nullptr;
    EXPECT_EQ(ns_post_send(n.qp, &wr, &bad), NS_ERR_INVALID);
    EXPECT_EQ(bad, &wr);
    // A valid one still works and an empty one completes at once.
    EXPECT_EQ(post_ris(n, 2, idx, v.data(), 24, NS_RIS_SUM, NS_RIS_INT32), NS_OK)
        << ns_last_error();
    EXPECT_EQ(post_ris(n, 3, {}, nullptr, 0, NS_RIS_SUM, NS_RIS_INT32), NS_OK) << ns_last_error();
    for (const ns_wc& wc : wait_completions(n.cq, 2)) EXPECT_EQ(wc.status, NS_WC_SUCCESS);
  });
}

// An owner that died (reported by the transport, or silent: only the watchdog knows): a scatter
// to it fails, one to the live owner succeeds and lands; nothing hangs.
class ScatterDeadOwner : public ::testing::TestWithParam<bool> {};
TEST_P(ScatterDeadOwner, FailsWithoutHanging) {
  const bool reported = GetParam();
  ClusterOptions o;
  o.nodes = 3;
  o.P = 8;
  o.attr = make_attr(NS_PROGRESS_THREAD, 0);
  o.attr.watchdog_ms = 600;
  o.expect_local_close = true;
  ns_fabric* fabric = nullptr;
  run_cluster(
      o,
      [&](Node& n) {
        n.sync->arrive_and_wait();
        if (n.rank == 2) {
          ASSERT_EQ(
              reported ? ns_fabric_kill_node_reported(fabric, 2) : ns_fabric_kill_node(fabric, 2),
              NS_OK);
          for (int k = 0; k < 3; ++k) n.sync->arrive_and_wait();  // the survivors' phases
          return;
        }
        n.sync->arrive_and_wait();
        // Each survivor scatters into the dead node (fails), then into the other survivor's row
        // 4 (succeeds). Both meet the failure, so both tear down locally afterwards.
        const int other = 1 - n.rank;
        const std::vector<std::uint64_t> dead_rows = {n.offsets[2], n.offsets[2] + 1};
        const std::vector<std::uint64_t> live_rows = {n.offsets[other] + 4, n.offsets[other] + 4};
        const std::vector<std::int64_t> values = {3, 4};
        ASSERT_EQ(post_ris(n, 1, dead_rows, values.data(), 16, NS_RIS_SUM, NS_RIS_INT64), NS_OK);
        const auto wc = wait_completions(n.cq, 1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_TRUE(wc[0].status == NS_WC_TRANSPORT_ERR || wc[0].status == NS_WC_WATCHDOG_TIMEOUT)
            << ns_wc_status_str(wc[0].status);
        ASSERT_EQ(post_ris(n, 2, live_rows, values.data(), 16, NS_RIS_SUM, NS_RIS_INT64), NS_OK);
        const auto ok = wait_completions(n.cq, 1);
        ASSERT_EQ(ok.size(), 1u);
        EXPECT_EQ(ok[0].status, NS_WC_SUCCESS) << ns_wc_status_str(ok[0].status);
        n.sync->arrive_and_wait();
        std::uint64_t got = 0, initial = 0;
        std::memcpy(&got, n.block.data() + 4 * n.P, 8);
        const auto fresh = make_block(n.offsets[n.rank], n.offsets[n.rank + 1], n.P);
        std::memcpy(&initial, fresh.data() + 4 * n.P, 8);
        EXPECT_EQ(got, initial + 7u) << "node " << n.rank << ": 3 + 4, combined by the other";
        // The death is detected at last (as RC retries would): teardown then excludes the dead
        // node instead of waiting NETSPARSE_PRESUME_DEAD_S for it.
        if (n.rank == 0 && !reported) {
          EXPECT_EQ(ns_fabric_kill_node_reported(fabric, 2), NS_OK);
        }
        n.sync->arrive_and_wait();
      },
      &fabric);
}
INSTANTIATE_TEST_SUITE_P(Kill, ScatterDeadOwner, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "reported" : "silent"; });

// ---- the owner's validation of scatter packets, forged by a raw endpoint ---------------------
namespace {
std::vector<std::byte> update_packet(std::uint32_t dest, std::uint32_t req, std::uint32_t P,
                                     const std::vector<std::uint64_t>& rows, std::int64_t add) {
  const auto n = static_cast<std::uint32_t>(rows.size());
  const std::uint32_t rec = 8 + P;
  std::vector<std::byte> p(cc::kScatterHeaderBytes + std::size_t{n} * rec);
  cc::encode_scatter_header(p.data(), {{cc::ScatterType::kUpdate, dest, rec, n, 0},
                                       req,
                                       NS_RIS_SUM,
                                       NS_RIS_INT64,
                                       cc::ScatterStatus::kApplied});
  for (std::uint32_t k = 0; k < n; ++k) {
    std::byte* at = p.data() + cc::kScatterHeaderBytes + std::size_t{k} * rec;
    cc::wire::store<std::uint64_t>(at, rows[k]);
    for (std::uint32_t e = 0; e < P; e += 8) std::memcpy(at + 8 + e, &add, 8);
  }
  return p;
}
}  // namespace

TEST(ScatterOwner, AppliesWholePacketsAndRefusesAPacketWithAForeignRow) {
  constexpr std::uint32_t P = 16;
  tr::InprocFabric fabric(2);
  auto raw = fabric.endpoint(0);
  nrig::Config cfg;
  cfg.progress_mode = NS_PROGRESS_INLINE;
  cfg.delay_ns = 0;
  ns_context engine(fabric.endpoint(1), cfg);
  const std::vector<std::uint64_t> offsets = {0, 100, 200};
  std::vector<std::int64_t> block(100 * P / 8, 10);
  int raw_region = -1;
  std::thread peer([&] { raw_region = rigtest::join_region_registration(*raw, P, offsets); });
  nrig::Region* mr = engine.register_region(block.data(), 100, P, offsets.data());
  peer.join();
  ASSERT_NE(mr, nullptr);
  raw->send(1, update_packet(1, 5, P, {100, 150, 100}, 2));  // applied: row 0 twice, row 50
  raw->send(1, update_packet(1, 6, P, {101, 200, 102}, 7));  // row 200 is not ours: refused
  raw->send(1, update_packet(1, 7, P, {103, 99}, 7));        // row 99 neither
  auto bad_len = update_packet(1, 8, P, {104}, 1);
  cc::wire::store<std::uint32_t>(bad_len.data() + cc::kOffPropLen, 8 + P + 8);  // rec_len lies
  raw->send(1, bad_len);
  raw->send(1, update_packet(0, 9, P, {105}, 1));  // wrong destination
  std::map<std::uint32_t, cc::ScatterStatus> acks;
  rigtest::poll_packets(
      *raw, 200, [&] { engine.progress_inline(); },
      [&](std::span<const std::byte> part) {
        cc::ScatterPacket pk;
        ASSERT_EQ(cc::decode_scatter_packet(part, 0, P, &pk), cc::DecodeError::kOk);
        ASSERT_EQ(pk.header.type, cc::ScatterType::kAck);
        acks[pk.header.req_id] = pk.header.status;
      },
      [&] { return acks.size() >= 3; });
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[5], cc::ScatterStatus::kApplied);
  EXPECT_EQ(acks[6], cc::ScatterStatus::kOutOfRange);
  EXPECT_EQ(acks[7], cc::ScatterStatus::kOutOfRange);
  for (std::size_t row = 0; row < 100; ++row) {
    const std::int64_t want = row == 0 ? 14 : row == 50 ? 12 : 10;
    for (std::size_t e = 0; e < P / 8; ++e) {
      ASSERT_EQ(block[row * (P / 8) + e], want) << "row " << row << " element " << e;
    }
  }
  const auto s = engine.snapshot();
  EXPECT_EQ(s.scatters.applied, 3u);
  EXPECT_EQ(s.scatters.refused, 2u);
  EXPECT_EQ(s.scatters.malformed, 1u) << "the wrong destination";
  EXPECT_EQ(s.malformed_total(), s.malformed_packets + s.server.malformed_prs + 1u)
      << "NS_STAT_MALFORMED counts the scatter unit's refusals too";
  EXPECT_EQ(s.malformed_packets, 1u) << "the lying rec_len: its frame is refused whole";
  // Teardown: node 0 declares itself done (a control PR), then both run the collectives.
  EXPECT_TRUE(
      deregister_with_raw_peer(*raw, raw_region, P, [&] { return engine.deregister_region(mr); }));
}
