// sw::TorPipeline, the ToR code the emulator and the real rack switch share: reads from the
// rack miss and queue toward their owner's queue; responses fill the cache and queue toward the
// requester; a later read of the same row (to the same owner) is answered by the switch with the
// owner's bytes; from the spines, responses fill and (routed) reads go to the owner's queue and
// responses to their src_node's; a new epoch forgets everything; malformed packets are refused.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "switch/tor_pipeline.hpp"

namespace netsparse::sw {
namespace {

constexpr std::uint32_t kProp = 8;
constexpr std::uint32_t kNodes = 4;  // nodes 0, 1 in this rack; 2, 3 in the other

struct Out {
  std::uint32_t queue;
  concat::PrType type;
  std::vector<std::byte> bytes;
};

struct Sink final : concat::PacketSink {
  std::vector<Out> out;
  void on_packet(std::uint32_t dest, concat::PrType type, std::span<const std::byte> packet,
                 concat::FlushCause) override {
    out.push_back({dest, type, {packet.begin(), packet.end()}});
  }
};

std::vector<std::byte> packet(concat::PrType type, std::uint32_t dest,
                              const std::vector<concat::PrHeader>& prs, std::byte fill = {}) {
  const std::uint32_t payload = type == concat::PrType::kResponse ? kProp : 0;
  std::vector<std::byte> b(
      concat::packet_bytes(type, kProp, static_cast<std::uint32_t>(prs.size())));
  std::size_t off = concat::encode_concat_header(
      b.data(), {type, dest, kProp, static_cast<std::uint32_t>(prs.size())});
  const std::vector<std::byte> prop(kProp, fill);
  for (const auto& pr : prs) off += concat::encode_pr(b.data() + off, pr, prop.data(), payload);
  return b;
}

struct Fixture {
  Sink sink;
  TorPipeline tor;
  Fixture()
      : tor(
            TorConfig{kProp, kNodes, 1500, 1, true, {}},
            [](std::uint64_t idx) { return static_cast<std::uint32_t>(idx / 100); },  // owner
            [](std::uint32_t node) { return node < 2 ? node : 2u; },  // other rack: one queue
            [](std::uint32_t node) { return node < 2; }, sink) {}
};

concat::PacketView view(const Out& o) {
  concat::PacketView v;
  EXPECT_EQ(concat::decode_packet(o.bytes, concat::kAnyDestination, kProp, &v),
            concat::DecodeError::kOk);
  return v;
}

TEST(TorPipeline, MissFillThenHitWithTheOwnersBytes) {
  Fixture f;
  bool passed = true;
  // Node 0 reads rows 205 and 310 (owners 2 and 3, the other rack): both miss, one packet to
  // the other rack's queue.
  ASSERT_EQ(f.tor.from_rack(packet(concat::PrType::kRead, 2, {{0, 0, 205, 7}}), 0, &passed),
            concat::DecodeError::kOk);
  EXPECT_FALSE(passed);
  ASSERT_EQ(f.tor.from_rack(packet(concat::PrType::kRead, 3, {{0, 0, 310, 8}}), 0, &passed),
            concat::DecodeError::kOk);
  f.tor.flush_all();
  ASSERT_EQ(f.sink.out.size(), 1u);
  EXPECT_EQ(f.sink.out[0].queue, 2u);
  EXPECT_EQ(f.sink.out[0].type, concat::PrType::kRead);
  EXPECT_EQ(view(f.sink.out[0]).size(), 2u);
  EXPECT_EQ(f.tor.stats().hits, 0u);
  EXPECT_EQ(f.tor.stats().inter_rack_reads, 2u);
  // The answer for 205 comes down from a spine (routed): fills, goes to node 0's queue.
  f.sink.out.clear();
  ASSERT_EQ(f.tor.from_spine(
                packet(concat::PrType::kResponse, 2, {{0, 0, 205, 7}}, std::byte{0x5A}), 0, true),
            concat::DecodeError::kOk);
  f.tor.flush_all();
  ASSERT_EQ(f.sink.out.size(), 1u);
  EXPECT_EQ(f.sink.out[0].queue, 0u);
  // Node 1 reads 205 from its owner 2: a hit, answered to node 1 with the owner's bytes; the
  // same row asked of the wrong owner (3) is not answered from the cache.
  f.sink.out.clear();
  ASSERT_EQ(f.tor.from_rack(packet(concat::PrType::kRead, 2, {{1, 0, 205, 9}}), 0, &passed),
            concat::DecodeError::kOk);
  ASSERT_EQ(f.tor.from_rack(packet(concat::PrType::kRead, 3, {{1, 0, 205, 10}}), 0, &passed),
            concat::DecodeError::kOk);
  f.tor.flush_all();
  EXPECT_EQ(f.tor.stats().hits, 1u);
  EXPECT_EQ(f.tor.stats().inter_rack_hits, 1u);
  ASSERT_EQ(f.sink.out.size(), 2u);
  for (const Out& o : f.sink.out) {
    const concat::PacketView v = view(o);
    if (o.type == concat::PrType::kResponse) {
      EXPECT_EQ(o.queue, 1u);
      EXPECT_EQ(v.pr(0).idx, 205u);
      EXPECT_EQ(v.pr(0).req_id, 9u);
      EXPECT_EQ(v.payload(0)[0], std::byte{0x5A});
    } else {
      EXPECT_EQ(o.queue, 2u);
      EXPECT_EQ(v.pr(0).req_id, 10u);
    }
  }
  // A new epoch (kernel) forgets the row.
  f.tor.new_epoch();
  f.sink.out.clear();
  ASSERT_EQ(f.tor.from_rack(packet(concat::PrType::kRead, 2, {{1, 0, 205, 11}}), 0, &passed),
            concat::DecodeError::kOk);
  f.tor.flush_all();
  EXPECT_EQ(f.tor.stats().hits, 1u);
  ASSERT_EQ(f.sink.out.size(), 1u);
  EXPECT_EQ(f.sink.out[0].type, concat::PrType::kRead);
}

TEST(TorPipeline, RoutesSpineReadsToTheOwnerAndRefusesMalformedPackets) {
  Fixture f;
  ASSERT_EQ(
      f.tor.from_spine(packet(concat::PrType::kRead, 0, {{2, 0, 150, 1}, {3, 0, 20, 2}}), 0, true),
      concat::DecodeError::kOk);
  f.tor.flush_all();
  ASSERT_EQ(f.sink.out.size(), 2u);  // row 150 to owner 1, row 20 to owner 0
  EXPECT_EQ(f.sink.out[0].queue + f.sink.out[1].queue, 1u);
  std::vector<std::byte> bad = packet(concat::PrType::kRead, 2, {{0, 0, 205, 7}});
  bad.pop_back();
  bool passed = false;
  EXPECT_EQ(f.tor.from_rack(bad, 0, &passed), concat::DecodeError::kTruncated);
  EXPECT_EQ(f.tor.stats().malformed, 1u);
  EXPECT_EQ(f.tor.stats().read_prs_in, 0u);
}

}  // namespace
}  // namespace netsparse::sw
