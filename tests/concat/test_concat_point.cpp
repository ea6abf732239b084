// Concatenation point: flush on full / expiry / explicit / pool pressure, unqueued (invalid and
// control) PRs, expiration ordering,
// the EQ's tombstones, statistics, and the virtualized (chunk pool) mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "concat/concat_point.hpp"

namespace netsparse::concat {
namespace {

struct Packet {
  std::uint32_t dest;
  PrType type;
  FlushCause cause;
  std::vector<std::byte> bytes;
};

// Keeps every packet and checks, per packet, that it decodes and matches its (dest, type).
struct RecordingSink final : PacketSink {
  explicit RecordingSink(std::uint32_t len = 0) : prop_len(len) {}
  std::uint32_t prop_len;
  std::vector<Packet> packets;
  void on_packet(std::uint32_t dest, PrType type, std::span<const std::byte> p,
                 FlushCause cause) override {
    packets.push_back({dest, type, cause, {p.begin(), p.end()}});
    PacketView v;
    const DecodeError e = decode_packet(p, dest, prop_len, &v);
    EXPECT_EQ(e, DecodeError::kOk) << to_string(e);
    if (e == DecodeError::kOk) {
      EXPECT_EQ(v.header().type, type);
    }
  }
  PacketView view(std::size_t i) const {
    PacketView v;
    EXPECT_EQ(decode_packet(packets.at(i).bytes, kAnyDestination, prop_len, &v), DecodeError::kOk);
    return v;
  }
  std::size_t count(FlushCause c) const {
    return static_cast<std::size_t>(std::count_if(packets.begin(), packets.end(),
                                                  [c](const Packet& p) { return p.cause == c; }));
  }
};

ConcatConfig config(std::uint32_t nodes, std::uint32_t prop_len, std::uint64_t delay,
                    bool virtualized = false) {
  ConcatConfig c;
  c.num_nodes = nodes;
  c.prop_len = prop_len;
  c.delay_ns = delay;
  c.virtualized = virtualized;
  return c;
}

std::vector<std::byte> payload_for(std::uint64_t idx, std::uint32_t prop_len) {
  std::vector<std::byte> p(prop_len);
  for (std::uint32_t j = 0; j < prop_len; ++j) p[j] = std::byte((idx * 7 + j) & 0xFF);
  return p;
}

bool payload_is(const std::byte* p, std::uint64_t idx, std::uint32_t prop_len) {
  const auto want = payload_for(idx, prop_len);
  return prop_len == 0 || std::memcmp(p, want.data(), prop_len) == 0;
}

TEST(ConcatPoint, RejectsBadConfigurations) {
  RecordingSink sink;
  EXPECT_THROW(ConcatPoint(config(0, 8, 0), sink), std::invalid_argument);
  auto small = config(2, 8, 0);
  small.packet_bytes = 31;
  EXPECT_THROW(ConcatPoint(small, sink), std::invalid_argument);
  auto tiny_pool = config(2, 8, 10, true);
  tiny_pool.pool_chunks = 3;  // 1500 B packets need 12 chunks of 128 B
  EXPECT_THROW(ConcatPoint(tiny_pool, sink), std::invalid_argument);
  auto tiny_chunk = config(2, 8, 10, true);
  tiny_chunk.chunk_bytes = 8;
  EXPECT_THROW(ConcatPoint(tiny_chunk, sink), std::invalid_argument);
}

TEST(ConcatPoint, RejectsBadPushes) {
  RecordingSink sink(8);
  ConcatPoint point(config(4, 8, 100), sink);
  const std::byte payload[8] = {};
  EXPECT_THROW(point.push(PrType::kRead, 4, {}, nullptr, 0), std::out_of_range);
  EXPECT_THROW(point.push(PrType::kResponse, 1, {}, nullptr, 0), std::invalid_argument);
  EXPECT_THROW(point.push(static_cast<PrType>(9), 1, {}, payload, 0), std::invalid_argument);
  EXPECT_TRUE(point.empty());
  EXPECT_TRUE(sink.packets.empty());
}

TEST(ConcatPoint, ZeroDelaySendsEveryPrAtOnce) {
  RecordingSink sink;
  sink.prop_len = 8;
  ConcatPoint point(config(4, 8, 0), sink);
  for (std::uint64_t i = 0; i < 5; ++i) {
    point.push(PrType::kRead, 2, {1, 0, i, 0}, nullptr, i);
    ASSERT_EQ(sink.packets.size(), i + 1);
    EXPECT_TRUE(point.empty());
  }
  for (const auto& p : sink.packets) EXPECT_EQ(p.cause, FlushCause::kExpired);
  EXPECT_EQ(sink.view(3).pr(0).idx, 3u);
  EXPECT_EQ(point.next_expiry_ns(), UINT64_MAX);
  EXPECT_EQ(point.stats().prs_per_packet_hist[1], 5u);
}

// kInvalid and kControl PRs never wait: each leaves at once in its own 32-byte packet, in both
// modes, without touching the queues, the expiration queue or the chunk pool.
TEST(ConcatPoint, InvalidAndControlPrsLeaveAloneAtOnce) {
  for (bool virtualized : {false, true}) {
    RecordingSink sink(8);
    ConcatPoint point(config(4, 8, 100, virtualized), sink);
    const std::size_t memory = point.memory_bytes();
    const std::uint32_t free_chunks = point.free_chunks();
    EXPECT_EQ(point.max_prs_per_packet(PrType::kInvalid), 1u);
    EXPECT_EQ(point.max_prs_per_packet(PrType::kControl), 1u);
    point.push(PrType::kRead, 2, {0, 1, 40, 9}, nullptr, 0);  // waits until 100
    const std::byte ignored[8] = {std::byte{0x77}};
    point.push(PrType::kInvalid, 2, {3, 5, 41, 10}, ignored, 1);  // payload is not sent
    point.push(PrType::kControl, 1, {3, 0, 7, 0}, nullptr, 2);
    ASSERT_EQ(sink.packets.size(), 2u) << "virtualized " << virtualized;
    EXPECT_EQ(point.buffered_prs(), 1u);
    EXPECT_EQ(point.next_expiry_ns(), 100u) << "the read's ET is untouched";
    if (virtualized) {
      EXPECT_EQ(point.free_chunks(), free_chunks - 1);  // the read's chunk only
    }
    EXPECT_EQ(point.memory_bytes(), memory);
    const PrType types[2] = {PrType::kInvalid, PrType::kControl};
    const std::uint32_t dests[2] = {2, 1};
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(sink.packets[k].type, types[k]);
      EXPECT_EQ(sink.packets[k].dest, dests[k]);
      EXPECT_EQ(sink.packets[k].cause, FlushCause::kUnqueued);
      EXPECT_EQ(sink.packets[k].bytes.size(), 14u + 18);
      const PacketView v = sink.view(k);
      EXPECT_EQ(v.header().type, types[k]);
      ASSERT_EQ(v.size(), 1u);
      EXPECT_EQ(v.payload(0), nullptr);
    }
    const PacketView inv = sink.view(0);
    EXPECT_EQ(inv.pr(0).src_node, 3u);
    EXPECT_EQ(inv.pr(0).src_unit, 5u);
    EXPECT_EQ(inv.pr(0).idx, 41u);
    EXPECT_EQ(inv.pr(0).req_id, 10u);
    EXPECT_EQ(sink.view(1).pr(0).idx, 7u);
    point.flush_all();
    ASSERT_EQ(sink.packets.size(), 3u);
    EXPECT_EQ(sink.packets[2].type, PrType::kRead);

    const ConcatStats& s = point.stats();
    for (PrType t : types) {
      const int ti = type_index(t);
      EXPECT_EQ(s.packets[ti], 1u);
      EXPECT_EQ(s.prs[ti], 1u);
      EXPECT_EQ(s.header_bytes[ti], 14u + 18);
      EXPECT_EQ(s.payload_bytes[ti], 0u);
      EXPECT_EQ(s.wire_bytes[ti], 50u + 14 + 18);
      EXPECT_DOUBLE_EQ(s.prs_per_packet(ti), 1.0);
    }
    // Read and response counts (the paper's Table 7) see only property traffic.
    EXPECT_EQ(s.packets[type_index(PrType::kRead)], 1u);
    EXPECT_EQ(s.packets[type_index(PrType::kResponse)], 0u);
    EXPECT_EQ(s.flushes[static_cast<int>(FlushCause::kUnqueued)], 2u);
    EXPECT_EQ(s.flushes[static_cast<int>(FlushCause::kExplicit)], 1u);
    ConcatStats twice = s;
    twice.merge(s);
    EXPECT_EQ(twice.packets[type_index(PrType::kControl)], 2u);
    EXPECT_EQ(twice.flushes[static_cast<int>(FlushCause::kUnqueued)], 4u);
  }
}

TEST(ConcatPoint, FullQueueFlushesExactlyAtCapacity) {
  RecordingSink sink;
  sink.prop_len = 64;
  ConcatPoint point(config(3, 64, 1'000'000), sink);
  const std::uint32_t max_n = point.max_prs_per_packet(PrType::kResponse);
  EXPECT_EQ(max_n, (1500u - 14) / (18 + 64));  // 18 PRs in a 1500 B packet at K = 16
  EXPECT_EQ(point.max_prs_per_packet(PrType::kRead), (1500u - 14) / 18);
  for (std::uint32_t i = 0; i < max_n; ++i) {
    EXPECT_TRUE(sink.packets.empty()) << i;
    const auto pl = payload_for(i, 64);
    point.push(PrType::kResponse, 1, {0, 3, i, i}, pl.data(), i);
  }
  ASSERT_EQ(sink.packets.size(), 1u);
  EXPECT_EQ(sink.packets[0].cause, FlushCause::kFull);
  EXPECT_LE(sink.packets[0].bytes.size(), 1500u);
  const PacketView v = sink.view(0);
  ASSERT_EQ(v.size(), max_n);
  for (std::uint32_t i = 0; i < max_n; ++i) {  // FIFO order, payload intact
    EXPECT_EQ(v.pr(i).idx, i);
    EXPECT_TRUE(payload_is(v.payload(i), i, 64)) << i;
  }
  // The full queue cleared its expiration entry: nothing is waiting any more.
  EXPECT_TRUE(point.empty());
  EXPECT_EQ(point.next_expiry_ns(), UINT64_MAX);
}

TEST(ConcatPoint, FullQueueClearsItsExpirationEntry) {
  RecordingSink sink;
  ConcatPoint point(config(3, 0, 100), sink);
  const std::uint32_t max_n = point.max_prs_per_packet(PrType::kRead);
  point.push(PrType::kRead, 1, {0, 0, 0, 0}, nullptr, 0);   // ET 100, head of the EQ
  point.push(PrType::kRead, 0, {0, 0, 1, 0}, nullptr, 10);  // ET 110
  EXPECT_EQ(point.next_expiry_ns(), 100u);
  for (std::uint32_t i = 1; i < max_n; ++i) point.push(PrType::kRead, 1, {0, 0, i, 0}, nullptr, 20);
  ASSERT_EQ(sink.packets.size(), 1u);
  EXPECT_EQ(sink.packets[0].cause, FlushCause::kFull);
  EXPECT_EQ(point.next_expiry_ns(), 110u);                   // dest 1's entry is gone from the head
  point.push(PrType::kRead, 1, {0, 0, 99, 0}, nullptr, 20);  // a new ET 120 for dest 1
  point.poll_expired(100);  // dest 1's old ET must not flush its new PR
  EXPECT_EQ(sink.packets.size(), 1u);
  point.poll_expired(115);
  ASSERT_EQ(sink.packets.size(), 2u);
  EXPECT_EQ(sink.packets[1].dest, 0u);
  point.poll_expired(120);
  ASSERT_EQ(sink.packets.size(), 3u);
  EXPECT_EQ(sink.packets[2].dest, 1u);
  EXPECT_EQ(sink.packets[2].cause, FlushCause::kExpired);
  EXPECT_TRUE(point.empty());
}

TEST(ConcatPoint, ExpiryFollowsArrivalOfFirstPr) {
  RecordingSink sink(4);
  ConcatPoint point(config(8, 4, 10), sink);
  const std::byte pl[4] = {};
  point.push(PrType::kRead, 3, {0, 0, 30, 0}, nullptr, 0);  // ET 10
  point.push(PrType::kResponse, 1, {0, 0, 10, 0}, pl, 1);   // ET 11
  point.push(PrType::kRead, 2, {0, 0, 20, 0}, nullptr, 2);  // ET 12
  point.push(PrType::kRead, 3, {0, 0, 31, 0}, nullptr, 5);  // joins dest 3, ET stays 10
  point.push(PrType::kResponse, 3, {0, 0, 32, 0}, pl, 6);   // other type: own queue, ET 16
  EXPECT_EQ(point.next_expiry_ns(), 10u);
  point.poll_expired(9);
  EXPECT_TRUE(sink.packets.empty());
  point.poll_expired(11);  // ET <= now is expired (inclusive)
  ASSERT_EQ(sink.packets.size(), 2u);
  EXPECT_EQ(sink.packets[0].dest, 3u);
  EXPECT_EQ(sink.packets[0].type, PrType::kRead);
  EXPECT_EQ(sink.view(0).size(), 2u);
  EXPECT_EQ(sink.packets[1].dest, 1u);
  EXPECT_EQ(sink.packets[1].type, PrType::kResponse);
  EXPECT_EQ(point.next_expiry_ns(), 12u);
  point.poll_expired(100);
  ASSERT_EQ(sink.packets.size(), 4u);
  EXPECT_EQ(sink.packets[2].dest, 2u);
  EXPECT_EQ(sink.packets[3].dest, 3u);
  EXPECT_EQ(sink.packets[3].type, PrType::kResponse);
  EXPECT_EQ(sink.count(FlushCause::kExpired), 4u);
  EXPECT_EQ(point.next_expiry_ns(), UINT64_MAX);
}

TEST(ConcatPoint, FlushAllSendsEverythingOldestFirst) {
  RecordingSink sink(4);
  ConcatPoint point(config(5, 4, 1'000'000), sink);
  const std::byte pl[4] = {};
  for (std::uint32_t d : {4u, 0u, 2u}) point.push(PrType::kRead, d, {0, 0, d, 0}, nullptr, d);
  point.push(PrType::kResponse, 0, {0, 0, 7, 0}, pl, 9);
  EXPECT_FALSE(point.empty());
  EXPECT_EQ(point.buffered_prs(), 4u);
  point.flush_all();
  EXPECT_TRUE(point.empty());
  ASSERT_EQ(sink.packets.size(), 4u);
  EXPECT_EQ(sink.packets[0].dest, 4u);
  EXPECT_EQ(sink.packets[1].dest, 0u);
  EXPECT_EQ(sink.packets[2].dest, 2u);
  EXPECT_EQ(sink.packets[3].type, PrType::kResponse);
  EXPECT_EQ(sink.count(FlushCause::kExplicit), 4u);
  point.flush_all();  // nothing left: no empty packets
  EXPECT_EQ(sink.packets.size(), 4u);
  EXPECT_EQ(point.next_expiry_ns(), UINT64_MAX);
}

TEST(ConcatPoint, RecordLargerThanPacketTravelsAlone) {
  RecordingSink sink;
  sink.prop_len = 2000;
  ConcatPoint point(config(2, 2000, 1000), sink);
  EXPECT_EQ(point.max_prs_per_packet(PrType::kResponse), 1u);
  const auto pl = payload_for(5, 2000);
  point.push(PrType::kResponse, 1, {0, 0, 5, 0}, pl.data(), 0);
  ASSERT_EQ(sink.packets.size(), 1u);
  EXPECT_EQ(sink.packets[0].cause, FlushCause::kFull);
  EXPECT_EQ(sink.packets[0].bytes.size(), 14u + 18 + 2000);
  point.push(PrType::kRead, 1, {0, 0, 6, 0}, nullptr, 0);  // reads still concatenate
  EXPECT_EQ(sink.packets.size(), 1u);
}

TEST(ConcatPoint, StatisticsCountPacketsBytesAndCauses) {
  RecordingSink sink(16);
  ConcatPoint point(config(4, 16, 50), sink);
  const std::byte pl[16] = {};
  for (int i = 0; i < 3; ++i) point.push(PrType::kResponse, 1, {}, pl, 0);
  point.push(PrType::kRead, 2, {}, nullptr, 0);
  point.poll_expired(50);  // both expire
  for (std::uint32_t i = 0; i < point.max_prs_per_packet(PrType::kRead); ++i) {
    point.push(PrType::kRead, 3, {}, nullptr, 60);  // one full read packet
  }
  point.push(PrType::kRead, 0, {}, nullptr, 60);
  point.flush_all();
  const ConcatStats& s = point.stats();
  const std::uint64_t full_n = point.max_prs_per_packet(PrType::kRead);
  EXPECT_EQ(s.packets[0], 3u);
  EXPECT_EQ(s.packets[1], 1u);
  EXPECT_EQ(s.prs[0], 1 + full_n + 1);
  EXPECT_EQ(s.prs[1], 3u);
  EXPECT_EQ(s.header_bytes[1], 14u + 3 * 18);
  EXPECT_EQ(s.payload_bytes[1], 3u * 16);
  EXPECT_EQ(s.payload_bytes[0], 0u);
  EXPECT_EQ(s.wire_bytes[1], 50u + 14 + 3 * 34);
  EXPECT_EQ(s.header_bytes[0], 3 * 14 + 18 * s.prs[0]);
  EXPECT_EQ(s.wire_bytes[0], s.header_bytes[0] + 3 * 50);
  EXPECT_EQ(s.flushes[static_cast<int>(FlushCause::kExpired)], 2u);
  EXPECT_EQ(s.flushes[static_cast<int>(FlushCause::kFull)], 1u);
  EXPECT_EQ(s.flushes[static_cast<int>(FlushCause::kExplicit)], 1u);
  EXPECT_EQ(s.prs_per_packet_hist[1], 2u);
  EXPECT_EQ(s.prs_per_packet_hist[3], 1u);
  EXPECT_EQ(s.prs_per_packet_hist[64], 1u);  // 82 PRs land in the "64 or more" bucket
  EXPECT_DOUBLE_EQ(s.prs_per_packet(1), 3.0);
  ConcatStats twice = s;
  twice.merge(s);
  EXPECT_EQ(twice.prs[0], 2 * s.prs[0]);
  EXPECT_EQ(twice.prs_per_packet_hist[64], 2u);
  point.reset_stats();
  EXPECT_EQ(point.stats().packets[0], 0u);
  EXPECT_EQ(point.stats().prs_per_packet(0), 0.0);
}

TEST(ConcatPoint, TombstonesNeverOverflowTheExpirationQueue) {
  // One long-lived head entry while another queue fills over and over: every fill leaves a
  // tombstone behind the head, far more than the ring holds, so the ring must compact.
  RecordingSink sink;
  ConcatPoint point(config(2, 0, 1'000'000'000), sink);
  point.push(PrType::kRead, 0, {0, 0, 12345, 0}, nullptr, 0);
  const std::uint32_t max_n = point.max_prs_per_packet(PrType::kRead);
  std::uint64_t t = 1;
  for (int packet = 0; packet < 1000; ++packet) {
    for (std::uint32_t i = 0; i < max_n; ++i) point.push(PrType::kRead, 1, {}, nullptr, t++);
  }
  point.push(PrType::kRead, 1, {0, 0, 777, 0}, nullptr, t);
  EXPECT_EQ(sink.packets.size(), 1000u);
  EXPECT_EQ(point.next_expiry_ns(), 1'000'000'000u);
  point.poll_expired(1'000'000'000);
  ASSERT_EQ(sink.packets.size(), 1001u);
  EXPECT_EQ(sink.view(1000).pr(0).idx, 12345u);
  point.poll_expired(1'000'000'000 + t);
  ASSERT_EQ(sink.packets.size(), 1002u);
  EXPECT_EQ(sink.view(1001).pr(0).idx, 777u);
  EXPECT_TRUE(point.empty());
}

// Drives a ConcatPoint with a random stream and checks every delivery invariant: every PR
// exactly once, FIFO per (type, dest), packets within capacity, expiry never early, and after
// poll_expired(now) nothing waiting has ET <= now.
struct Op {
  PrType type;
  std::uint32_t dest;
  std::uint64_t idx;
  std::uint64_t now;
  bool poll;
  bool flush;
};
std::vector<Op> random_ops(std::uint32_t nodes, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Op> ops;
  std::uint64_t now = 0;
  for (int i = 0; i < n; ++i) {
    now += rng() % 7;
    // Mostly reads and responses; now and then a PR of the two unqueued types.
    const std::uint64_t pick = rng() % 60;
    const PrType type = pick < 20    ? PrType::kResponse
                        : pick == 20 ? PrType::kInvalid
                        : pick == 21 ? PrType::kControl
                                     : PrType::kRead;
    Op op{type,
          static_cast<std::uint32_t>(rng() % nodes),
          static_cast<std::uint64_t>(i),
          now,
          rng() % 5 == 0,
          rng() % 997 == 0};
    ops.push_back(op);
  }
  return ops;
}

void check_stream(const ConcatConfig& cfg, const std::vector<Op>& ops, RecordingSink& sink) {
  sink.prop_len = cfg.prop_len;
  ConcatPoint point(cfg, sink);
  std::map<std::uint64_t, std::uint64_t> arrival;  // idx -> push time
  for (const Op& op : ops) {
    const auto pl = payload_for(op.idx, cfg.prop_len);
    point.push(op.type, op.dest, {op.dest, 1, op.idx, static_cast<std::uint32_t>(op.idx)},
               pl.data(), op.now);
    arrival[op.idx] = op.now;
    if (op.poll) {
      const std::size_t before = sink.packets.size();
      point.poll_expired(op.now);
      for (std::size_t k = before; k < sink.packets.size(); ++k) {
        if (sink.packets[k].cause != FlushCause::kExpired) continue;
        const PacketView v = sink.view(k);
        EXPECT_LE(arrival.at(v.pr(0).idx) + cfg.delay_ns, op.now) << "flushed before its ET";
      }
      EXPECT_GT(point.next_expiry_ns(), op.now);
    }
    if (op.flush) point.flush_all();
  }
  point.flush_all();
  EXPECT_TRUE(point.empty());
  if (cfg.virtualized) {
    EXPECT_EQ(point.free_chunks(), cfg.pool_chunks);
  }

  std::map<std::pair<int, std::uint32_t>, std::uint64_t> last_idx;  // FIFO per queue
  std::vector<int> seen(ops.size(), 0);
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < sink.packets.size(); ++k) {
    EXPECT_LE(sink.packets[k].bytes.size(), cfg.packet_bytes);
    const PacketView v = sink.view(k);
    const auto key = std::make_pair(type_index(v.header().type), v.header().dest);
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const PrHeader h = v.pr(i);
      ASSERT_LT(h.idx, ops.size());
      ++seen[h.idx];
      EXPECT_EQ(ops[h.idx].dest, h.src_node);
      EXPECT_EQ(ops[h.idx].dest, v.header().dest);
      EXPECT_EQ(ops[h.idx].type, v.header().type);
      if (v.header().type == PrType::kInvalid || v.header().type == PrType::kControl) {
        EXPECT_EQ(sink.packets[k].cause, FlushCause::kUnqueued);
        EXPECT_EQ(v.size(), 1u);
      }
      if (v.header().type == PrType::kResponse) {
        EXPECT_TRUE(payload_is(v.payload(i), h.idx, cfg.prop_len)) << h.idx;
      }
      auto it = last_idx.find(key);
      if (it != last_idx.end()) {
        EXPECT_LT(it->second, h.idx) << "reordered";
      }
      last_idx[key] = h.idx;
      ++total;
    }
  }
  EXPECT_EQ(total, ops.size());
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  std::uint64_t counted = 0;
  for (int t = 0; t < kNumPrTypes; ++t) counted += point.stats().prs[t];
  EXPECT_EQ(counted, ops.size());
}

TEST(ConcatPoint, RandomStreamKeepsEveryInvariant) {
  for (std::uint32_t prop_len : {0u, 4u, 64u, 300u}) {
    RecordingSink sink;
    check_stream(config(7, prop_len, 40), random_ops(7, 20000, prop_len + 1), sink);
  }
}

TEST(ConcatPointVirtualized, MatchesDedicatedQueuesWhenThePoolSuffices) {
  // With a pool big enough that it never runs dry, virtualization is invisible: the same PR
  // stream yields the same packets, byte for byte, in the same order, for the same causes.
  for (std::uint32_t prop_len : {4u, 64u, 200u}) {
    const auto ops = random_ops(6, 20000, 99 + prop_len);
    RecordingSink plain, virt;
    check_stream(config(6, prop_len, 40), ops, plain);
    auto vcfg = config(6, prop_len, 40, true);
    vcfg.pool_chunks = 12 * 12 * 4;  // 12 queues x a full packet, several times over
    check_stream(vcfg, ops, virt);
    ASSERT_EQ(plain.packets.size(), virt.packets.size());
    for (std::size_t k = 0; k < plain.packets.size(); ++k) {
      EXPECT_EQ(plain.packets[k].bytes, virt.packets[k].bytes) << k;
      EXPECT_EQ(plain.packets[k].cause, virt.packets[k].cause) << k;
    }
  }
}

TEST(ConcatPointVirtualized, SmallPoolFlushesOldestQueueUnderPressure) {
  for (std::uint32_t chunk : {16u, 40u, 128u}) {
    auto cfg = config(50, 24, 1000, true);
    cfg.chunk_bytes = chunk;
    cfg.pool_chunks = static_cast<std::uint32_t>((1500 + chunk - 1) / chunk) + 3;
    RecordingSink sink;
    check_stream(cfg, random_ops(50, 20000, chunk), sink);
    EXPECT_GT(sink.count(FlushCause::kPoolPressure), 0u) << chunk;
  }
}

TEST(ConcatPointVirtualized, RecordsStraddlingChunksSurviveIntact) {
  auto cfg = config(3, 100, 1000, true);  // 118 B records across 48 B chunks
  cfg.chunk_bytes = 48;
  cfg.pool_chunks = 64;
  RecordingSink sink;
  check_stream(cfg, random_ops(3, 5000, 5), sink);
}

TEST(ConcatPointVirtualized, MemoryIsBoundedByThePoolWith100kDestinations) {
  constexpr std::uint32_t kNodes = 100'000;
  auto cfg = config(kNodes, 64, 1'000'000, true);  // K = 16, a delay long enough to pile up
  RecordingSink sink;
  sink.prop_len = 64;
  ConcatPoint point(cfg, sink);
  auto small = cfg;
  small.num_nodes = 10'000;  // already more queues than chunks: same EQ ring size
  RecordingSink unused;
  ConcatPoint small_point(small, unused);
  // Growth with the node count is exactly the per-queue heads; the rest is the fixed pool
  // (the EQ ring is sized by min(queues, pool chunks)).
  EXPECT_EQ(point.memory_bytes() - small_point.memory_bytes(),
            2 * std::size_t{kNodes - 10'000} * ConcatPoint::kHeadBytesPerQueue);
  const std::size_t pool = std::size_t{cfg.pool_chunks} * (cfg.chunk_bytes + 4);
  const std::size_t heads = 2 * std::size_t{kNodes} * ConcatPoint::kHeadBytesPerQueue;
  EXPECT_LE(point.memory_bytes(), pool + heads + 4 * cfg.pool_chunks * 16 + 2 * 1500);
  // Dedicated 1500 B queues would need 2 * 100k * 1500 B = 300 MB.
  EXPECT_LT(point.memory_bytes() * 20, 2 * std::size_t{kNodes} * 1500);

  // Every destination gets PRs while all are still waiting: the pool is the limit, not N.
  const std::byte pl[64] = {};
  std::uint64_t pushed = 0;
  for (int round = 0; round < 2; ++round) {
    for (std::uint32_t d = 0; d < kNodes; ++d) {
      point.push(PrType::kResponse, d, {0, 0, d, 0}, pl, round);
      ++pushed;
      EXPECT_LE(point.free_chunks(), cfg.pool_chunks);
    }
  }
  EXPECT_GT(sink.count(FlushCause::kPoolPressure), 0u);
  point.flush_all();
  std::uint64_t delivered = 0;
  for (std::size_t k = 0; k < sink.packets.size(); ++k) delivered += sink.view(k).size();
  EXPECT_EQ(delivered, pushed);
  EXPECT_EQ(point.free_chunks(), cfg.pool_chunks);
}

}  // namespace
}  // namespace netsparse::concat
