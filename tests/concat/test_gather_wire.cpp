// The compact gather packets' strict decoder (concat/gather_wire.hpp): every type round-trips,
// its length agrees with gather_packet_length and split_frame, and truncated, forged or
// impossible headers are refused with the documented error.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "concat/frame.hpp"
#include "concat/gather_wire.hpp"
#include "two_packet_frame.hpp"

namespace cc = netsparse::concat;
using cc::DecodeError;
using cc::GatherType;

namespace {
std::vector<std::byte> packet(GatherType type, std::uint32_t dest, std::uint32_t rec_len,
                              std::uint32_t n, std::uint32_t first, std::uint32_t total,
                              std::size_t body_bytes) {
  std::vector<std::byte> p(cc::kGatherHeaderBytes + body_bytes, std::byte{0x5A});
  cc::encode_gather_header(p.data(), {{type, dest, rec_len, n, 3}, 0xABCD0007u, 9, first, total});
  return p;
}
}  // namespace

TEST(GatherWire, EveryTypeRoundTripsAndItsLengthAgrees) {
  struct Case {
    GatherType type;
    std::uint32_t rec_len, n, first, total;
  };
  for (const Case c :
       {Case{GatherType::kGatherRead, 4, 5, 0, 5}, Case{GatherType::kGatherRead, 8, 2, 0, 2},
        Case{GatherType::kGatherRows, 24, 3, 0, 3}, Case{GatherType::kGatherRows, 24, 2, 7, 9},
        Case{GatherType::kGatherRefuse, 0, 0, 4, 5}}) {
    const auto p =
        packet(c.type, 1, c.rec_len, c.n, c.first, c.total, std::size_t{c.rec_len} * c.n);
    cc::GatherPacket pk;
    ASSERT_EQ(cc::decode_gather_packet(p, 1, 24, &pk), DecodeError::kOk);
    EXPECT_EQ(pk.header.type, c.type);
    EXPECT_EQ(pk.header.src_node, 3u);
    EXPECT_EQ(pk.header.tag, 0xABCD0007u);
    EXPECT_EQ(pk.header.unit, 9);
    EXPECT_EQ(pk.header.first, c.first);
    EXPECT_EQ(pk.header.total, c.total);
    EXPECT_EQ(pk.body.size(), std::size_t{c.rec_len} * c.n);
    EXPECT_EQ(cc::gather_packet_length(p), p.size());
    EXPECT_EQ(cc::packet_length(p), p.size());
    cc::testing::expect_two_packet_frame_splits(p);
  }
}

TEST(GatherWire, ForgedAndTruncatedPacketsAreRefused) {
  using T = GatherType;
  cc::GatherPacket pk;
  const auto refused = [&](const std::vector<std::byte>& p, std::uint32_t row_bytes = 24) {
    return cc::decode_gather_packet(p, 1, row_bytes, &pk);
  };
  // Reads: rec_len 4 or 8 only, n >= 1, first 0 and total n.
  EXPECT_EQ(refused(packet(T::kGatherRead, 1, 5, 1, 0, 1, 5)), DecodeError::kPropLenMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRead, 1, 4, 0, 0, 0, 0)), DecodeError::kCountMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRead, 1, 4, 2, 1, 2, 8)), DecodeError::kCountMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRead, 1, 4, 2, 0, 3, 8)), DecodeError::kCountMismatch);
  // Rows: the configured row size (never 0), n >= 1, first + n <= total (no overflow).
  EXPECT_EQ(refused(packet(T::kGatherRows, 1, 16, 1, 0, 1, 16)), DecodeError::kPropLenMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRows, 1, 0, 1, 0, 1, 0), 0), DecodeError::kPropLenMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRows, 1, 24, 0, 0, 1, 0)), DecodeError::kCountMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRows, 1, 24, 2, 1, 2, 48)), DecodeError::kCountMismatch);
  const std::uint32_t big = std::numeric_limits<std::uint32_t>::max();
  EXPECT_EQ(refused(packet(T::kGatherRows, 1, 24, 2, big, big, 48)), DecodeError::kCountMismatch);
  // Refusals: no records, a position inside the read.
  EXPECT_EQ(refused(packet(T::kGatherRefuse, 1, 4, 0, 0, 1, 0)), DecodeError::kPropLenMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRefuse, 1, 0, 0, 3, 3, 0)), DecodeError::kCountMismatch);
  EXPECT_EQ(refused(packet(T::kGatherRefuse, 1, 0, 0, 0, 2, 4)), DecodeError::kCountMismatch);
  // Wrong destination, a body that is not n records, a header cut short, an unknown type.
  EXPECT_EQ(refused(packet(T::kGatherRead, 2, 4, 1, 0, 1, 4)), DecodeError::kWrongDestination);
  EXPECT_EQ(refused(packet(T::kGatherRead, 1, 4, 2, 0, 2, 7)), DecodeError::kTruncated);
  EXPECT_EQ(refused(packet(T::kGatherRead, 1, 4, 2, 0, 2, 12)), DecodeError::kCountMismatch);
  auto shortened = packet(T::kGatherRead, 1, 4, 1, 0, 1, 4);
  shortened.resize(20);
  EXPECT_EQ(refused(shortened), DecodeError::kTruncated);
  EXPECT_EQ(cc::gather_packet_length(shortened), shortened.size() + 1);
  auto unknown = packet(T::kGatherRead, 1, 4, 1, 0, 1, 4);
  cc::wire::store<std::uint16_t>(unknown.data(), 0x24);
  EXPECT_EQ(refused(unknown), DecodeError::kUnknownType);
  // A forged count whose product with rec_len overflows is reported as longer than the buffer.
  const auto huge = packet(T::kGatherRows, 1, 0x10000, 0x10000, 0, 0x10000, 8);
  EXPECT_EQ(cc::gather_packet_length(huge), huge.size() + 1);
  std::vector<std::span<const std::byte>> parts(4);
  EXPECT_EQ(cc::split_frame(huge, parts).error, DecodeError::kTruncated);
  // Reads and rows of zero records have no length: a frame holding one is refused.
  const auto empty = packet(T::kGatherRows, 1, 24, 0, 0, 1, 0);
  EXPECT_EQ(cc::gather_packet_length(empty), 0u);
  EXPECT_EQ(cc::split_frame(empty, parts).error, DecodeError::kCountMismatch);
}
