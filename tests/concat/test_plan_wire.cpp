// The plan packets' strict decoder (concat/plan_wire.hpp): every type round-trips, lengths agree
// with plan_packet_length, and truncated, forged or impossible headers are refused with the
// documented error, including the input the fuzzer found (kRows with 0-byte records).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "concat/frame.hpp"
#include "concat/plan_wire.hpp"
#include "two_packet_frame.hpp"

namespace cc = netsparse::concat;
using cc::DecodeError;
using cc::PlanType;

namespace {
std::vector<std::byte> packet(PlanType type, std::uint32_t dest, std::uint32_t rec_len,
                              std::uint32_t n, std::size_t body_bytes) {
  std::vector<std::byte> p(cc::kPlanHeaderBytes + body_bytes, std::byte{0x5A});
  cc::encode_plan_header(p.data(), {{type, dest, rec_len, n, 3}, 7, 9, 11, 13});
  return p;
}
}  // namespace

TEST(PlanWire, EveryTypeRoundTripsAndItsLengthAgrees) {
  struct Case {
    PlanType type;
    std::uint32_t rec_len, n;
  };
  for (const Case c : {Case{PlanType::kInstall, 4, 5}, Case{PlanType::kInstall, 8, 2},
                       Case{PlanType::kStart, 0, 0}, Case{PlanType::kRows, 24, 3},
                       Case{PlanType::kRefuse, 0, 0}}) {
    const auto p = packet(c.type, 1, c.rec_len, c.n, std::size_t{c.rec_len} * c.n);
    cc::PlanPacket pk;
    ASSERT_EQ(cc::decode_plan_packet(p, 1, 24, &pk), DecodeError::kOk);
    EXPECT_EQ(pk.header.type, c.type);
    EXPECT_EQ(pk.header.src_node, 3u);
    EXPECT_EQ(pk.header.plan, 7u);
    EXPECT_EQ(pk.header.version, 9u);
    EXPECT_EQ(pk.header.seq, 11);
    EXPECT_EQ(pk.header.first, 13u);
    EXPECT_EQ(pk.body.size(), std::size_t{c.rec_len} * c.n);
    EXPECT_EQ(cc::plan_packet_length(p), p.size());
    cc::testing::expect_two_packet_frame_splits(p);
  }
}

TEST(PlanWire, MalformedPacketsAreRefused) {
  cc::PlanPacket pk;
  // Truncated: shorter than the header, and a body one byte short.
  auto p = packet(PlanType::kRows, 1, 24, 2, 48);
  EXPECT_EQ(cc::decode_plan_packet(std::span(p).first(20), 1, 24, &pk), DecodeError::kTruncated);
  EXPECT_EQ(cc::decode_plan_packet(std::span(p).first(p.size() - 1), 1, 24, &pk),
            DecodeError::kTruncated);
  // Forged counts: n says 3, the body holds 2 rows.
  p = packet(PlanType::kRows, 1, 24, 3, 48);
  EXPECT_EQ(cc::decode_plan_packet(p, 1, 24, &pk), DecodeError::kCountMismatch);
  EXPECT_GT(cc::plan_packet_length(p), p.size()) << "the frame splitter sees it cut short";
  // Rows of a foreign size, and rows of 0 bytes even when 0 is what the caller expects (the
  // fuzzer's find: n records of nothing must not pass as a packet).
  p = packet(PlanType::kRows, 1, 16, 3, 48);
  EXPECT_EQ(cc::decode_plan_packet(p, 1, 24, &pk), DecodeError::kPropLenMismatch);
  p = packet(PlanType::kRows, 1, 0, 28418, 0);
  EXPECT_EQ(cc::decode_plan_packet(p, 1, 0, &pk), DecodeError::kPropLenMismatch);
  EXPECT_EQ(cc::plan_packet_length(p), 0u);
  // Install rows of 5 bytes; a start or refusal that carries records; an empty install.
  EXPECT_EQ(cc::decode_plan_packet(packet(PlanType::kInstall, 1, 5, 1, 5), 1, 24, &pk),
            DecodeError::kPropLenMismatch);
  EXPECT_EQ(cc::decode_plan_packet(packet(PlanType::kStart, 1, 4, 1, 4), 1, 24, &pk),
            DecodeError::kPropLenMismatch);
  // A start that arms pushes carries exactly two 4-byte records (tag, round); nothing else.
  EXPECT_EQ(cc::decode_plan_packet(packet(PlanType::kStart, 1, 4, 2, 8), 1, 24, &pk),
            DecodeError::kOk);
  EXPECT_EQ(pk.body.size(), 8u);
  EXPECT_NE(cc::decode_plan_packet(packet(PlanType::kStart, 1, 4, 3, 12), 1, 24, &pk),
            DecodeError::kOk);
  EXPECT_NE(cc::decode_plan_packet(packet(PlanType::kStart, 1, 8, 2, 16), 1, 24, &pk),
            DecodeError::kOk);
  EXPECT_NE(cc::decode_plan_packet(packet(PlanType::kStart, 1, 4, 2, 4), 1, 24, &pk),
            DecodeError::kOk);
  EXPECT_EQ(cc::decode_plan_packet(packet(PlanType::kRefuse, 1, 0, 1, 0), 1, 24, &pk),
            DecodeError::kCountMismatch);
  EXPECT_EQ(cc::decode_plan_packet(packet(PlanType::kInstall, 1, 4, 0, 0), 1, 24, &pk),
            DecodeError::kCountMismatch);
  // Another node's packet, and a type that is not a plan type.
  EXPECT_EQ(cc::decode_plan_packet(packet(PlanType::kStart, 2, 0, 0, 0), 1, 24, &pk),
            DecodeError::kWrongDestination);
  p = packet(PlanType::kStart, 1, 0, 0, 0);
  p[0] = std::byte{0x15};
  EXPECT_EQ(cc::decode_plan_packet(p, 1, 24, &pk), DecodeError::kUnknownType);
  // A huge forged n never overflows the length computation.
  p = packet(PlanType::kRows, 1, 0xFFFFFFFFu, 0xFFFFFFFFu, 8);
  EXPECT_EQ(cc::plan_packet_length(p), p.size() + 1);
  EXPECT_NE(cc::decode_plan_packet(p, 1, 0xFFFFFFFFu, &pk), DecodeError::kOk);
}
