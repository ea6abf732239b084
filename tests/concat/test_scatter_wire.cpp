// The scatter packets' strict decoder (concat/scatter_wire.hpp): both types round-trip, lengths
// agree with scatter_packet_length and split_frame, and truncated, forged or impossible headers
// (a lying record length, 0-byte rows, an unknown op, datatype or status, reserved bytes set)
// are refused with the documented error.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "concat/frame.hpp"
#include "concat/scatter_wire.hpp"
#include "two_packet_frame.hpp"

namespace cc = netsparse::concat;
using cc::DecodeError;
using cc::ScatterStatus;
using cc::ScatterType;

namespace {
std::vector<std::byte> packet(ScatterType type, std::uint32_t dest, std::uint32_t rec_len,
                              std::uint32_t n, std::size_t body_bytes,
                              ScatterStatus status = ScatterStatus::kApplied) {
  std::vector<std::byte> p(cc::kScatterHeaderBytes + body_bytes, std::byte{0x5A});
  cc::encode_scatter_header(p.data(), {{type, dest, rec_len, n, 3}, 7, 1, 2, status});
  return p;
}
}  // namespace

TEST(ScatterWire, BothTypesRoundTripAndTheirLengthAgrees) {
  constexpr std::uint32_t P = 24;
  struct Case {
    ScatterType type;
    std::uint32_t rec_len, n;
    ScatterStatus status;
  };
  for (const Case c : {Case{ScatterType::kUpdate, 8 + P, 3, ScatterStatus::kApplied},
                       Case{ScatterType::kAck, 0, 0, ScatterStatus::kApplied},
                       Case{ScatterType::kAck, 0, 0, ScatterStatus::kOutOfRange},
                       Case{ScatterType::kAck, 0, 0, ScatterStatus::kBadRow}}) {
    auto p = packet(c.type, 1, c.rec_len, c.n, std::size_t{c.rec_len} * c.n, c.status);
    if (c.n > 0) cc::wire::store<std::uint64_t>(p.data() + cc::kScatterHeaderBytes, 4242);
    cc::ScatterPacket pk;
    ASSERT_EQ(cc::decode_scatter_packet(p, 1, P, &pk), DecodeError::kOk);
    EXPECT_EQ(pk.header.type, c.type);
    EXPECT_EQ(pk.header.src_node, 3u);
    EXPECT_EQ(pk.header.req_id, 7u);
    EXPECT_EQ(pk.header.op, 1);
    EXPECT_EQ(pk.header.datatype, 2);
    EXPECT_EQ(pk.header.status, c.status);
    EXPECT_EQ(pk.body.size(), std::size_t{c.rec_len} * c.n);
    if (c.n > 0) {
      EXPECT_EQ(pk.row(0), 4242u);
      EXPECT_EQ(pk.value(0), p.data() + cc::kScatterHeaderBytes + 8);
    }
    EXPECT_EQ(cc::scatter_packet_length(p), p.size());
    cc::testing::expect_two_packet_frame_splits(p);
  }
}

namespace {
constexpr std::uint32_t kP = 16;
}

TEST(ScatterWire, ForgedHeadersAreRefusedWithTheDocumentedError) {
  constexpr std::uint32_t P = kP;
  cc::ScatterPacket pk;
  auto decode = [&](const std::vector<std::byte>& p, std::uint32_t prop = kP) {
    return cc::decode_scatter_packet(p, 1, prop, &pk);
  };
  const auto good = packet(ScatterType::kUpdate, 1, 8 + P, 2, 2 * (8 + P));
  ASSERT_EQ(decode(good), DecodeError::kOk);
  // Truncated: inside the header, or mid-record.
  EXPECT_EQ(decode({good.begin(), good.begin() + 20}), DecodeError::kTruncated);
  EXPECT_EQ(decode({good.begin(), good.end() - 1}), DecodeError::kTruncated);
  // The record length must be 8 + prop_bytes, and prop_bytes 0 is never valid.
  EXPECT_EQ(decode(good, P + 8), DecodeError::kPropLenMismatch);
  const auto zero_rows = packet(ScatterType::kUpdate, 1, 8, 3, 24);
  EXPECT_EQ(decode(zero_rows, 0), DecodeError::kPropLenMismatch);
  // n disagrees with the body; an update with no record; an ack with a body.
  EXPECT_EQ(decode(packet(ScatterType::kUpdate, 1, 8 + P, 3, 2 * (8 + P))),
            DecodeError::kCountMismatch);
  EXPECT_EQ(decode(packet(ScatterType::kUpdate, 1, 8 + P, 0, 0)), DecodeError::kCountMismatch);
  EXPECT_EQ(decode(packet(ScatterType::kAck, 1, 0, 0, 4)), DecodeError::kCountMismatch);
  EXPECT_EQ(decode(packet(ScatterType::kAck, 1, 8 + P, 0, 0)), DecodeError::kPropLenMismatch);
  // Field ranges: op, datatype, an update's status, an ack's status, the reserved bytes.
  auto forged = good;
  cc::wire::store<std::uint16_t>(forged.data() + 22, 3);
  EXPECT_EQ(decode(forged), DecodeError::kCountMismatch) << "op 3";
  forged = good;
  cc::wire::store<std::uint16_t>(forged.data() + 24, 4);
  EXPECT_EQ(decode(forged), DecodeError::kCountMismatch) << "datatype 4";
  forged = good;
  cc::wire::store<std::uint32_t>(forged.data() + 26, 1);
  EXPECT_EQ(decode(forged), DecodeError::kCountMismatch) << "an update with a status";
  auto ack = packet(ScatterType::kAck, 1, 0, 0, 0);
  cc::wire::store<std::uint32_t>(ack.data() + 26, cc::kScatterStatuses);
  EXPECT_EQ(decode(ack), DecodeError::kCountMismatch) << "unknown status";
  forged = good;
  cc::wire::store<std::uint16_t>(forged.data() + 30, 1);
  EXPECT_EQ(decode(forged), DecodeError::kCountMismatch) << "reserved bytes";
  // Destination and type.
  EXPECT_EQ(decode(packet(ScatterType::kUpdate, 2, 8 + P, 2, 2 * (8 + P))),
            DecodeError::kWrongDestination);
  forged = good;
  cc::wire::store<std::uint16_t>(forged.data(), 0x33);
  EXPECT_EQ(decode(forged), DecodeError::kUnknownType);
  // A count that would overflow n * rec_len is refused by the length function too.
  auto huge = packet(ScatterType::kUpdate, 1, 0xFFFFFFF0u, 0xFFFFFFF0u, 0);
  EXPECT_EQ(cc::scatter_packet_length(huge), huge.size() + 1);
  EXPECT_EQ(decode(huge), DecodeError::kPropLenMismatch);
}
