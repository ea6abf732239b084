// The compact software wire (concat/gather_wire.hpp): gathers over it write exactly what the
// paper's wire writes (every byte, every layout, every ablation, 2..5 nodes, properties of 4 B
// to 1000 B, reads split over several answer packets), the Table 7 counters keep pricing the
// traffic in the paper's format while NS_STAT_MOVED_BYTES counts what really moved, and both
// halves refuse forged packets from a raw endpoint: an owner never reads a row outside its
// region (a read with one such row is refused whole), a client never lands an answer that is
// not the next one of a read it has in flight.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "concat/frame.hpp"
#include "concat/gather_wire.hpp"
#include "raw_peer.hpp"
#include "rig/engine.hpp"
#include "rig/handles.hpp"
#include "rig_cluster.hpp"
#include "transport/transport.hpp"

using namespace rigtest;
namespace nrig = netsparse::rig;
namespace cc = netsparse::concat;
namespace tr = netsparse::transport;

namespace {

struct WireCase {
  const char* name;
  int nodes;
  std::uint32_t P;
  int layout;
  std::uint32_t flags;
  std::uint32_t pending;  // 0: default; small values make the client stall and resume
};
void PrintTo(const WireCase& c, std::ostream* os) {
  *os << c.name;
}

// Runs three dup-heavy gathers per node on one wire; returns every node's outputs.
struct WireRun {
  std::vector<std::vector<std::vector<std::uint8_t>>> out;  // [node][wr]
  std::vector<std::uint64_t> requested, compact_packets, moved, wire;
};
WireRun run_wire(const WireCase& wc, int wire) {
  ClusterOptions o;
  o.nodes = wc.nodes;
  o.P = wc.P;
  o.attr = make_attr(NS_PROGRESS_THREAD, wc.flags);
  o.attr.comp_mask |= NS_CTX_ATTR_WIRE;
  o.attr.wire = wire;
  if (wc.pending != 0) {
    o.attr.comp_mask |= NS_CTX_ATTR_PENDING;
    o.attr.pending_entries = wc.pending;
  }
  const std::uint64_t total = 211ull * static_cast<std::uint64_t>(wc.nodes) + 5;
  o.offsets = uneven_offsets(wc.nodes, total, 7);
  constexpr int kWrs = 3;
  constexpr std::size_t kCount = 1200;
  WireRun res;
  const auto N = static_cast<std::size_t>(wc.nodes);
  res.out.resize(N);
  res.requested.resize(N);
  res.compact_packets.resize(N);
  res.moved.resize(N);
  res.wire.resize(N);
  run_cluster(o, [&](Node& n) {
    const auto me = static_cast<std::size_t>(n.rank);
    std::vector<std::vector<std::uint64_t>> idx(kWrs);
    auto& out = res.out[me];
    out.resize(kWrs);
    std::vector<ns_send_wr> wrs;
    for (int k = 0; k < kWrs; ++k) {
      idx[k] = dup_heavy_idx(n.total, kCount, 24, 77u * me + static_cast<std::uint64_t>(k));
      wrs.push_back(gather_into(n, static_cast<std::uint64_t>(k), idx[k], out[k], wc.layout));
    }
    chain(wrs);
    ns_send_wr* bad = nullptr;
    ASSERT_EQ(ns_post_send(n.qp, wrs.data(), &bad), NS_OK) << ns_last_error();
    for (const ns_wc& c : wait_completions(n.cq, kWrs)) {
      EXPECT_EQ(c.status, NS_WC_SUCCESS) << ns_wc_status_str(c.status);
    }
    for (int k = 0; k < kWrs; ++k) check_gathered(n, out[k], idx[k], wc.layout);
    EXPECT_EQ(ns_quiesce(n.ctx, 20000), NS_OK) << ns_last_error();
    res.requested[me] = stat(n.ctx, NS_STAT_PRS_REQUESTED);
    res.compact_packets[me] = stat(n.ctx, NS_STAT_COMPACT_PACKETS);
    res.moved[me] = stat(n.ctx, NS_STAT_MOVED_BYTES);
    res.wire[me] = stat(n.ctx, NS_STAT_WIRE_BYTES);
    n.sync->arrive_and_wait();
  });
  return res;
}

class Wire : public ::testing::TestWithParam<WireCase> {};

}  // namespace

TEST_P(Wire, CompactAndPaperWiresWriteTheSameBytes) {
  const WireCase wc = GetParam();
  const WireRun compact = run_wire(wc, NS_WIRE_COMPACT);
  const WireRun paper = run_wire(wc, NS_WIRE_PAPER);
  ASSERT_EQ(compact.out, paper.out);
  for (std::size_t r = 0; r < compact.out.size(); ++r) {
    EXPECT_EQ(compact.requested[r], paper.requested[r]);
    EXPECT_EQ(paper.compact_packets[r], 0u) << "the paper's wire sends no compact packet";
    EXPECT_GT(compact.compact_packets[r], 0u) << "node " << r;
    // Both wires are priced in the paper's format, and both count what moved.
    EXPECT_GT(compact.wire[r], 0u);
    EXPECT_GT(compact.moved[r], 0u);
    EXPECT_GT(paper.moved[r], 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Inproc, Wire,
    ::testing::Values(
        WireCase{"n2_K1_pos", 2, 4, NS_RIG_LAYOUT_POSITIONAL, 0, 0},
        WireCase{"n3_K16_idx", 3, 64, NS_RIG_LAYOUT_INDEXED, 0, 0},
        WireCase{"n4_odd_pos_nofilter", 4, 100, NS_RIG_LAYOUT_POSITIONAL, NS_CTX_NO_FILTER, 0},
        WireCase{"n5_idx_nocoalesce_pending7", 5, 12, NS_RIG_LAYOUT_INDEXED, NS_CTX_NO_COALESCE, 7},
        WireCase{"n3_pos_noconcat", 3, 16, NS_RIG_LAYOUT_POSITIONAL, NS_CTX_NO_CONCAT, 0},
        WireCase{"n2_big_rows_pos_pending64", 2, 1000, NS_RIG_LAYOUT_POSITIONAL, 0, 64}),
    [](const ::testing::TestParamInfo<WireCase>& i) { return std::string(i.param.name); });

// At K = 1 the compact wire moves a fraction of the paper's bytes: 4 B per request and 4 B per
// answer instead of 18 + 18 + 4 (plus headers per packet on both).
TEST(Wire, CompactMovesFewerBytesThanThePapersFormatPrices) {
  const WireRun r =
      run_wire({"n2", 2, 4, NS_RIG_LAYOUT_POSITIONAL, NS_CTX_NO_FILTER, 0}, NS_WIRE_COMPACT);
  for (std::size_t k = 0; k < r.moved.size(); ++k) {
    EXPECT_LT(3 * r.moved[k], r.wire[k]) << "node " << k;
  }
}

// ---- forged compact packets against a raw endpoint ------------------------------------------
namespace {
constexpr std::uint32_t kP = 24;

std::vector<std::byte> gather_packet(cc::GatherType type, std::uint32_t dest, std::uint32_t rec,
                                     std::uint32_t src, std::uint32_t tag, std::uint16_t unit,
                                     std::uint32_t first, std::uint32_t total,
                                     const std::vector<std::uint64_t>& rows,
                                     std::size_t n_records) {
  std::vector<std::byte> p(cc::kGatherHeaderBytes + n_records * rec);
  cc::encode_gather_header(
      p.data(),
      {{type, dest, rec, static_cast<std::uint32_t>(n_records), src}, tag, unit, first, total});
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::byte* at = p.data() + cc::kGatherHeaderBytes + k * rec;
    if (rec == 8) {
      cc::wire::store<std::uint64_t>(at, rows[k]);
    } else {
      cc::wire::store<std::uint32_t>(at, static_cast<std::uint32_t>(rows[k]));
    }
  }
  return p;
}
std::vector<std::byte> read_of(std::uint32_t tag, const std::vector<std::uint64_t>& rows,
                               std::uint32_t rec = 4, std::uint32_t src = 0,
                               std::uint16_t unit = 0) {
  const auto n = static_cast<std::uint32_t>(rows.size());
  return gather_packet(cc::GatherType::kGatherRead, 1, rec, src, tag, unit, 0, n, rows, n);
}

// Node 1 is a real engine owning rows [100, 200); node 0 is a raw endpoint.
struct RawPair {
  tr::InprocFabric fabric{2};
  std::unique_ptr<tr::Transport> raw = fabric.endpoint(0);
  std::unique_ptr<ns_context> engine;
  std::vector<std::uint64_t> offsets = {0, 100, 200};
  std::vector<std::uint8_t> block = make_block(100, 200, kP);
  nrig::Region* mr = nullptr;
  int raw_region = -1;

  RawPair() {
    nrig::Config cfg;
    cfg.progress_mode = NS_PROGRESS_INLINE;
    cfg.delay_ns = 0;
    engine = std::make_unique<ns_context>(fabric.endpoint(1), cfg);
    nrig::register_handle(engine.get(), nrig::HandleKind::kContext);
    std::thread peer([&] { raw_region = rigtest::join_region_registration(*raw, kP, offsets); });
    mr = engine->register_region(block.data(), 100, kP, offsets.data());
    peer.join();
  }
  ~RawPair() {
    if (engine) nrig::unregister_handle(engine.get());
  }
  RawPair(const RawPair&) = delete;
  RawPair& operator=(const RawPair&) = delete;
  ns_mr* c_mr() const { return static_cast<ns_mr*>(mr); }
  // Steps the engine and collects the compact packets it sends node 0 until `want` arrived.
  std::vector<std::pair<cc::GatherHeader, std::vector<std::byte>>> collect(std::size_t want) {
    std::vector<std::pair<cc::GatherHeader, std::vector<std::byte>>> got;
    rigtest::poll_packets(
        *raw, 400, [&] { engine->progress_inline(); },
        [&](std::span<const std::byte> part) {
          cc::GatherPacket pk;
          if (cc::decode_gather_packet(part, 0, kP, &pk) != cc::DecodeError::kOk) return;
          got.emplace_back(pk.header, std::vector<std::byte>(pk.body.begin(), pk.body.end()));
        },
        [&] { return got.size() >= want; });
    return got;
  }
  // Steps the engine until node 0 receives a compact read with rows (at most 400 steps): the
  // last read's header (n 0 when none came) and the rows (4-byte) of every read received.
  std::pair<cc::GatherHeader, std::vector<std::uint64_t>> next_read() {
    cc::GatherHeader read{};
    std::vector<std::uint64_t> rows;
    rigtest::poll_packets(
        *raw, 400, [&] { engine->progress_inline(); },
        [&](std::span<const std::byte> part) {
          cc::GatherPacket pk;
          if (cc::decode_gather_packet(part, 0, kP, &pk) != cc::DecodeError::kOk) return;
          read = pk.header;
          for (std::uint32_t r = 0; r < pk.header.n; ++r) {
            rows.push_back(cc::wire::load<std::uint32_t>(pk.body.data() + 4 * r));
          }
        },
        [&] { return read.n != 0; });
    return {read, rows};
  }
  // Teardown: node 0 declares itself done (a control PR), then both run the collectives.
  void teardown() {
    EXPECT_TRUE(deregister_with_raw_peer(*raw, raw_region, kP,
                                         [&] { return engine->deregister_region(mr); }));
  }
};
}  // namespace

TEST(CompactServer, AnswersReadsInOrderAndRefusesAnyReadWithARowOutside) {
  RawPair t;
  ASSERT_NE(t.mr, nullptr);
  using T = cc::GatherType;
  t.raw->send(1, read_of(5, {3, 99, 3, 0, 50}));               // valid, 4 B rows, a repeat
  t.raw->send(1, read_of(6, {7, 1}, 8));                       // valid, 8 B rows
  t.raw->send(1, read_of(7, {1, 2, 100, 4}));                  // row 100 is outside: refused whole
  t.raw->send(1, read_of(8, {1, std::uint64_t{1} << 40}, 8));  // far outside (8 B)
  t.raw->send(1, read_of(9, {1}, 4, /*src=*/1));               // claims to come from node 1 itself
  t.raw->send(1, read_of(10, {1}, 4, 0, /*unit=*/60000));      // no engine has such a unit
  auto cut = read_of(11, {1, 2});
  cut.pop_back();
  t.raw->send(1, cut);                                                          // truncated frame
  t.raw->send(1, gather_packet(T::kGatherRead, 1, 4, 0, 12, 0, 0, 3, {1}, 1));  // total != n
  t.raw->send(1, gather_packet(T::kGatherRead, 0, 4, 0, 13, 0, 0, 1, {1}, 1));  // wrong dest
  const auto got = t.collect(4);
  ASSERT_EQ(got.size(), 4u);
  std::map<std::uint32_t, std::pair<cc::GatherHeader, std::vector<std::byte>>> by_tag;
  for (const auto& g : got) by_tag[g.first.tag] = g;
  ASSERT_EQ(by_tag.count(5), 1u);
  EXPECT_EQ(by_tag[5].first.type, T::kGatherRows);
  EXPECT_EQ(by_tag[5].first.first, 0u);
  EXPECT_EQ(by_tag[5].first.total, 5u);
  const std::vector<std::uint64_t> want5 = {103, 199, 103, 100, 150};
  ASSERT_EQ(by_tag[5].second.size(), want5.size() * kP);
  for (std::size_t k = 0; k < want5.size(); ++k) {
    EXPECT_EQ(check_prop(reinterpret_cast<const std::uint8_t*>(by_tag[5].second.data()) + k * kP,
                         want5[k], kP),
              "")
        << k;
  }
  ASSERT_EQ(by_tag.count(6), 1u);
  EXPECT_EQ(check_prop(reinterpret_cast<const std::uint8_t*>(by_tag[6].second.data()), 107, kP),
            "");
  ASSERT_EQ(by_tag.count(7), 1u);
  EXPECT_EQ(by_tag[7].first.type, T::kGatherRefuse);
  EXPECT_EQ(by_tag[7].first.first, 2u) << "position of the first row outside";
  EXPECT_EQ(by_tag[7].first.total, 4u);
  EXPECT_EQ(by_tag[8].first.type, T::kGatherRefuse);
  EXPECT_EQ(by_tag[8].first.first, 1u);
  const auto s = t.engine->snapshot();
  EXPECT_EQ(s.server.invalid, 6u) << "the two refused reads, every row of them";
  EXPECT_EQ(s.server.malformed_prs, 2u) << "from itself, unit 60000";
  EXPECT_EQ(s.malformed_packets, 3u) << "truncated frame, total != n, wrong destination";
  t.teardown();
}

// The engine gathers from a raw owner that answers out of order, for reads it never sent, with
// the wrong count, and finally right: only the right answers land; a refusal fails the gather.
TEST(CompactClient, LandsOnlyTheNextAnswerOfAReadInFlight) {
  RawPair t;
  ASSERT_NE(t.mr, nullptr);
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ASSERT_EQ(ns_create_cq(t.engine.get(), 16, &cq), NS_OK);
  ASSERT_EQ(ns_create_qp(t.engine.get(), cq, 16, &qp), NS_OK);
  const std::vector<std::uint64_t> idx = {5, 150, 7, 160, 7};  // 5 and 7 (twice) are node 0's
  std::vector<std::uint8_t> out(idx.size() * kP, kSentinel);
  ns_send_wr wr = rig(1, t.c_mr(), idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
  ns_send_wr* bad = nullptr;
  ASSERT_EQ(ns_post_send(qp, &wr, &bad), NS_OK) << ns_last_error();
  // The engine's read to node 0 (rows 5 and 7, once each: the repeat is filtered).
  // Named variables, not a structured binding: Clang before 16 cannot capture bindings in a
  // lambda (the sanitizer tree is built with Clang).
  const auto read_and_rows = t.next_read();
  const cc::GatherHeader& read = read_and_rows.first;
  const std::vector<std::uint64_t>& rows = read_and_rows.second;
  ASSERT_EQ(read.type, cc::GatherType::kGatherRead);
  ASSERT_EQ(rows, (std::vector<std::uint64_t>{5, 7}));
  const auto answer = [&](std::uint32_t tag, std::uint32_t first, std::uint32_t total,
                          std::vector<std::uint64_t> global, std::uint8_t salt) {
    std::vector<std::byte> p(cc::kGatherHeaderBytes + global.size() * kP);
    cc::encode_gather_header(p.data(), {{cc::GatherType::kGatherRows, 1, kP,
                                         static_cast<std::uint32_t>(global.size()), 0},
                                        tag,
                                        read.unit,
                                        first,
                                        total});
    for (std::size_t k = 0; k < global.size(); ++k) {
      for (std::uint32_t b = 0; b < kP; ++b) {
        p[cc::kGatherHeaderBytes + k * kP + b] =
            static_cast<std::byte>(prop_byte(global[k], b) + salt);
      }
    }
    t.raw->send(1, p);
  };
  answer(read.tag, 1, 2, {7}, 1);            // out of order: row 1 before row 0
  answer(read.tag ^ 0x10000, 0, 2, {5}, 2);  // another generation of the same read slot
  answer(read.tag, 0, 3, {5}, 3);            // wrong total
  answer(read.tag + 1, 0, 2, {5}, 4);        // a read never sent
  for (int k = 0; k < 50; ++k) t.engine->progress_inline();
  EXPECT_EQ(t.engine->snapshot().client.stale_responses, 4u);
  answer(read.tag, 0, 2, {5}, 0);
  answer(read.tag, 1, 2, {7}, 0);
  const auto wcs = wait_completions(cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, NS_WC_SUCCESS) << ns_wc_status_str(wcs[0].status);
  check_positional(out, idx, kP, 1);

  // A refusal fails the gather with NS_WC_REM_INV_REQ.
  std::vector<std::uint8_t> out2(2 * kP, kSentinel);
  const std::vector<std::uint64_t> idx2 = {9, 11};
  ns_send_wr wr2 = rig(2, t.c_mr(), idx2, out2.data(), NS_RIG_LAYOUT_POSITIONAL);
  ASSERT_EQ(ns_post_send(qp, &wr2, &bad), NS_OK) << ns_last_error();
  const cc::GatherHeader read2 = t.next_read().first;
  ASSERT_EQ(read2.n, 2u);
  std::vector<std::byte> refuse(cc::kGatherHeaderBytes);
  cc::encode_gather_header(
      refuse.data(), {{cc::GatherType::kGatherRefuse, 1, 0, 0, 0}, read2.tag, read2.unit, 1, 2});
  t.raw->send(1, refuse);
  const auto wcs2 = wait_completions(cq, 1);
  ASSERT_EQ(wcs2.size(), 1u);
  EXPECT_EQ(wcs2[0].status, NS_WC_REM_INV_REQ);
  ASSERT_EQ(ns_destroy_qp(qp), NS_OK);
  ASSERT_EQ(ns_destroy_cq(cq), NS_OK);
  t.teardown();
}
