// Wire format: every field at its offset in little-endian order, every decoder error, and the
// byte-exact example of docs/protocol.md.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "example_packet.hpp"

namespace netsparse::concat {
namespace {

// Reads an unsigned little-endian value byte by byte, independent of the code under test.
std::uint64_t le_at(const std::vector<std::byte>& b, std::size_t off, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    v |= std::uint64_t{static_cast<std::uint8_t>(b.at(off + i))} << (8 * i);
  }
  return v;
}

// A packet of n PRs built with the public encoders; PR i has fields derived from i and a payload
// whose bytes are (i * 31 + j).
std::vector<std::byte> make_packet(PrType type, std::uint32_t dest, std::uint32_t prop_len,
                                   std::uint32_t n) {
  std::vector<std::byte> b(packet_bytes(type, prop_len, n));
  std::size_t off = encode_concat_header(b.data(), ConcatHeader{type, dest, prop_len, n});
  std::vector<std::byte> payload(prop_len);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t j = 0; j < prop_len; ++j) payload[j] = std::byte(i * 31 + j);
    const PrHeader h{100 + i, static_cast<std::uint16_t>(7 + i), 1000000007ull * (i + 1), 50 + i};
    const bool resp = carries_payload(type);
    off += encode_pr(b.data() + off, h, resp ? payload.data() : nullptr, resp ? prop_len : 0);
  }
  EXPECT_EQ(off, b.size());
  return b;
}

DecodeError decode(const std::vector<std::byte>& b, std::uint32_t dest, std::uint32_t prop_len,
                   PacketView* v = nullptr) {
  PacketView scratch;
  return decode_packet(std::span<const std::byte>(b.data(), b.size()), dest, prop_len,
                       v ? v : &scratch);
}

void put_u32(std::vector<std::byte>& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = std::byte((v >> (8 * i)) & 0xFF);
}

TEST(Protocol, SizesFollowFigure6) {
  EXPECT_EQ(kConcatHeaderBytes, 2u + 4 + 4 + 4);
  EXPECT_EQ(kPrHeaderBytes, 4u + 2 + 8 + 4);
  EXPECT_EQ(pr_record_bytes(PrType::kRead, 64), 18u);
  EXPECT_EQ(pr_record_bytes(PrType::kResponse, 64), 18u + 64);
  EXPECT_EQ(packet_bytes(PrType::kRead, 64, 3), 14u + 3 * 18);
  EXPECT_EQ(packet_bytes(PrType::kResponse, 64, 3), 14u + 3 * 82);
  EXPECT_EQ(wire_bytes(PrType::kResponse, 4, 2), 50u + 14 + 2 * 22);
}

TEST(Protocol, InvalidAndControlAreHeaderOnlyTypes3And4) {
  EXPECT_EQ(static_cast<std::uint16_t>(PrType::kInvalid), 3u);
  EXPECT_EQ(static_cast<std::uint16_t>(PrType::kControl), 4u);
  for (PrType t : {PrType::kInvalid, PrType::kControl}) {
    EXPECT_EQ(pr_record_bytes(t, 64), 18u);
    EXPECT_EQ(packet_bytes(t, 64, 3), 14u + 3 * 18);
    EXPECT_EQ(wire_bytes(t, 64, 1), 50u + 14 + 18);
  }
  // Per-type arrays are indexed 0..3, one slot per type, read and response keeping 0 and 1.
  std::set<int> indices;
  for (int i = 0; i < kNumPrTypes; ++i) {
    EXPECT_EQ(type_index(type_at(i)), i);
    EXPECT_TRUE(is_known_type(static_cast<std::uint16_t>(type_at(i))));
    indices.insert(type_index(type_at(i)));
  }
  EXPECT_EQ(indices.size(), 4u);
  EXPECT_EQ(type_index(PrType::kRead), 0);
  EXPECT_EQ(type_index(PrType::kResponse), 1);
}

TEST(Protocol, ConcatHeaderFieldsAreLittleEndianAtTheirOffsets) {
  std::vector<std::byte> b(kConcatHeaderBytes, std::byte{0xEE});
  EXPECT_EQ(encode_concat_header(b.data(), {PrType::kResponse, 0x0A0B0C0D, 0x11223344, 0x55667788}),
            kConcatHeaderBytes);
  EXPECT_EQ(le_at(b, 0, 2), 2u);  // type
  EXPECT_EQ(le_at(b, 2, 4), 0x0A0B0C0Du);
  EXPECT_EQ(le_at(b, 6, 4), 0x11223344u);
  EXPECT_EQ(le_at(b, 10, 4), 0x55667788u);
  EXPECT_EQ(b[2], std::byte{0x0D});  // least significant byte first
}

TEST(Protocol, PrFieldsAreLittleEndianAtTheirOffsets) {
  std::vector<std::byte> b(kPrHeaderBytes + 4, std::byte{0xEE});
  const std::uint8_t payload[4] = {0xDE, 0xAD, 0xBE, 0xEF};
  EXPECT_EQ(
      encode_pr(b.data(), {0xA1A2A3A4, 0xB1B2, 0xC1C2C3C4C5C6C7C8ull, 0xD1D2D3D4}, payload, 4),
      kPrHeaderBytes + 4);
  EXPECT_EQ(le_at(b, 0, 4), 0xA1A2A3A4u);
  EXPECT_EQ(le_at(b, 4, 2), 0xB1B2u);
  EXPECT_EQ(le_at(b, 6, 8), 0xC1C2C3C4C5C6C7C8ull);
  EXPECT_EQ(le_at(b, 14, 4), 0xD1D2D3D4u);
  EXPECT_EQ(std::memcmp(b.data() + 18, payload, 4), 0);
}

TEST(Protocol, ReadRecordHasNoPayload) {
  std::vector<std::byte> b(kPrHeaderBytes + 1, std::byte{0x5A});
  EXPECT_EQ(encode_pr(b.data(), {1, 2, 3, 4}, nullptr, 0), kPrHeaderBytes);
  EXPECT_EQ(b[kPrHeaderBytes], std::byte{0x5A});  // nothing written past the header
}

TEST(Protocol, DecodeRoundTripsEveryField) {
  for (PrType type : {PrType::kRead, PrType::kResponse, PrType::kInvalid, PrType::kControl}) {
    const auto b = make_packet(type, 9, 12, 5);
    PacketView v;
    ASSERT_EQ(decode(b, 9, 12, &v), DecodeError::kOk);
    EXPECT_EQ(v.header().type, type);
    EXPECT_EQ(v.header().dest, 9u);
    EXPECT_EQ(v.header().prop_len, 12u);
    ASSERT_EQ(v.size(), 5u);
    EXPECT_EQ(v.bytes().size(), b.size());
    for (std::uint32_t i = 0; i < 5; ++i) {
      const PrHeader h = v.pr(i);
      EXPECT_EQ(h.src_node, 100 + i);
      EXPECT_EQ(h.src_unit, 7 + i);
      EXPECT_EQ(h.idx, 1000000007ull * (i + 1));
      EXPECT_EQ(h.req_id, 50 + i);
      EXPECT_EQ(v.record(i), b.data() + 14 + i * pr_record_bytes(type, 12));
      if (type != PrType::kResponse) {
        EXPECT_EQ(v.payload(i), nullptr) << "only responses carry a payload";
      } else {
        ASSERT_NE(v.payload(i), nullptr);
        for (std::uint32_t j = 0; j < 12; ++j) EXPECT_EQ(v.payload(i)[j], std::byte(i * 31 + j));
      }
    }
  }
}

TEST(Protocol, DecodeIsZeroCopyAndWorksOnMisalignedBuffers) {
  const auto packet = make_packet(PrType::kResponse, 2, 4, 3);
  std::vector<std::byte> shifted(packet.size() + 1);
  std::memcpy(shifted.data() + 1, packet.data(), packet.size());
  PacketView v;
  ASSERT_EQ(decode_packet(std::span<const std::byte>(shifted.data() + 1, packet.size()), 2, 4, &v),
            DecodeError::kOk);
  EXPECT_EQ(v.payload(1), shifted.data() + 1 + 14 + 22 + 18);  // points into the caller's buffer
  EXPECT_EQ(v.pr(2).idx, 3000000021ull);
}

TEST(Protocol, TruncatedBelowHeader) {
  const auto b = make_packet(PrType::kRead, 1, 8, 1);
  for (std::size_t len = 0; len < kConcatHeaderBytes; ++len) {
    PacketView v;
    EXPECT_EQ(decode_packet(std::span<const std::byte>(b.data(), len), 1, 8, &v),
              DecodeError::kTruncated)
        << "len " << len;
  }
  PacketView v;
  EXPECT_EQ(decode_packet({}, 1, 8, &v), DecodeError::kTruncated);
}

TEST(Protocol, TruncatedMidRecord) {
  const auto b = make_packet(PrType::kResponse, 1, 8, 3);  // records of 26 B
  for (std::size_t cut = 1; cut < 26; ++cut) {
    PacketView v;
    EXPECT_EQ(decode_packet(std::span<const std::byte>(b.data(), b.size() - cut), 1, 8, &v),
              DecodeError::kTruncated)
        << "cut " << cut;
  }
}

TEST(Protocol, CountThatDoesNotFitTheLength) {
  auto b = make_packet(PrType::kRead, 1, 8, 3);
  put_u32(b, kOffNumPrs, 4);  // claims more than the buffer holds
  EXPECT_EQ(decode(b, 1, 8), DecodeError::kCountMismatch);
  put_u32(b, kOffNumPrs, 2);  // claims fewer
  EXPECT_EQ(decode(b, 1, 8), DecodeError::kCountMismatch);
  put_u32(b, kOffNumPrs, 0);  // empty packets are never sent
  EXPECT_EQ(decode(b, 1, 8), DecodeError::kCountMismatch);
  put_u32(b, kOffNumPrs, 0xFFFFFFFF);
  EXPECT_EQ(decode(b, 1, 8), DecodeError::kCountMismatch);
  // A whole-record prefix of a longer packet: the cut fell on a record boundary.
  const auto full = make_packet(PrType::kRead, 1, 8, 3);
  PacketView v;
  EXPECT_EQ(decode_packet(std::span<const std::byte>(full.data(), full.size() - 18), 1, 8, &v),
            DecodeError::kCountMismatch);
}

// A kInvalid or kControl packet whose length is that of payload-bearing records: the decoder
// sizes its records as 18 B, so the length is either not a whole number of them (kTruncated)
// or a different count of them (kCountMismatch). Never accepted as n_prs records.
TEST(Protocol, HeaderOnlyTypeWithPayloadBearingLength) {
  for (PrType t : {PrType::kInvalid, PrType::kControl}) {
    // prop_len 18: one 36 B response record = exactly two 18 B records, but n_prs says 1.
    auto b = make_packet(PrType::kResponse, 1, 18, 1);
    b[kOffType] = std::byte(static_cast<std::uint16_t>(t));
    EXPECT_EQ(decode(b, 1, 18), DecodeError::kCountMismatch) << static_cast<int>(t);
    // prop_len 8: 9 response records of 26 B = 13 records of 18 B.
    b = make_packet(PrType::kResponse, 1, 8, 9);
    b[kOffType] = std::byte(static_cast<std::uint16_t>(t));
    EXPECT_EQ(decode(b, 1, 8), DecodeError::kCountMismatch) << static_cast<int>(t);
    // prop_len 8, 2 records: 52 B is not a multiple of 18.
    b = make_packet(PrType::kResponse, 1, 8, 2);
    b[kOffType] = std::byte(static_cast<std::uint16_t>(t));
    EXPECT_EQ(decode(b, 1, 8), DecodeError::kTruncated) << static_cast<int>(t);
  }
  // And the reverse: a header-only packet relabelled as a response is never read past its end.
  auto b = make_packet(PrType::kInvalid, 1, 8, 4);
  b[kOffType] = std::byte(static_cast<std::uint16_t>(PrType::kResponse));
  EXPECT_EQ(decode(b, 1, 8), DecodeError::kTruncated);  // 72 B is not a multiple of 26
}

TEST(Protocol, HugeCountTimesHugePropLenDoesNotOverflow) {
  // n_prs * record would be ~2^64 and could wrap to the real body length if multiplied.
  std::vector<std::byte> b(kConcatHeaderBytes + 18);
  encode_concat_header(b.data(), {PrType::kResponse, 1, 0xFFFFFFFF, 0xFFFFFFFF});
  EXPECT_EQ(decode(b, 1, 0xFFFFFFFF), DecodeError::kTruncated);
}

TEST(Protocol, UnknownType) {
  auto b = make_packet(PrType::kRead, 1, 8, 1);
  for (std::uint16_t t : {0, 5, 6, 0x100, 0x103, 0xFFFF}) {
    b[0] = std::byte(t & 0xFF);
    b[1] = std::byte(t >> 8);
    EXPECT_EQ(decode(b, 1, 8), DecodeError::kUnknownType) << t;
  }
}

TEST(Protocol, PropLenDifferentFromConfigured) {
  const auto b = make_packet(PrType::kRead, 1, 8, 2);
  EXPECT_EQ(decode(b, 1, 8), DecodeError::kOk);
  EXPECT_EQ(decode(b, 1, 4), DecodeError::kPropLenMismatch);
  EXPECT_EQ(decode(b, 1, 0), DecodeError::kPropLenMismatch);
}

TEST(Protocol, DestinationNotThisNode) {
  const auto b = make_packet(PrType::kResponse, 6, 8, 2);
  EXPECT_EQ(decode(b, 5, 8), DecodeError::kWrongDestination);
  EXPECT_EQ(decode(b, kAnyDestination, 8), DecodeError::kOk);  // a switch accepts any
}

TEST(Protocol, ErrorLeavesViewUntouched) {
  const auto good = make_packet(PrType::kRead, 1, 8, 2);
  PacketView v;
  ASSERT_EQ(decode(good, 1, 8, &v), DecodeError::kOk);
  const auto bad = make_packet(PrType::kResponse, 2, 8, 4);
  EXPECT_EQ(decode(bad, 1, 8, &v), DecodeError::kWrongDestination);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_EQ(v.header().type, PrType::kRead);
}

TEST(Protocol, ErrorsHaveDistinctMessages) {
  std::set<std::string> seen;
  for (auto e : {DecodeError::kOk, DecodeError::kTruncated, DecodeError::kUnknownType,
                 DecodeError::kCountMismatch, DecodeError::kPropLenMismatch,
                 DecodeError::kWrongDestination}) {
    seen.insert(to_string(e));
  }
  EXPECT_EQ(seen.size(), 6u);
}

// The document's example, byte for byte (docs/protocol.md, "A 2-PR response packet").
TEST(Protocol, DocumentedExamplePacketBytes) {
  const std::vector<std::uint8_t> expected = {
      0x02, 0x00,                                      // type = response
      0x03, 0x00, 0x00, 0x00,                          // dest = 3
      0x08, 0x00, 0x00, 0x00,                          // prop_len = 8
      0x02, 0x00, 0x00, 0x00,                          // n_prs = 2
      0x01, 0x00, 0x00, 0x00,                          // PR 0: src_node = 1
      0x02, 0x00,                                      //       src_unit = 2
      0x78, 0x56, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00,  //       idx = 0x12345678
      0x07, 0x00, 0x00, 0x00,                          //       req_id = 7
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40,  //       payload = {1.0f, 2.0f}
      0x01, 0x00, 0x00, 0x00,                          // PR 1: src_node = 1
      0x05, 0x00,                                      //       src_unit = 5
      0x00, 0x90, 0x2f, 0x50, 0x09, 0x00, 0x00, 0x00,  //       idx = 40000000000
      0x08, 0x00, 0x00, 0x00,                          //       req_id = 8
      0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0xbf,  //       payload = {0.5f, -1.0f}
  };
  const auto bytes = example::build_packet();
  ASSERT_EQ(bytes.size(), expected.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(static_cast<std::uint8_t>(bytes[i]), expected[i]) << "byte " << i;
  }
  PacketView v;
  ASSERT_EQ(decode(bytes, example::kDest, example::kPropLen, &v), DecodeError::kOk);
  EXPECT_EQ(v.pr(1).idx, example::kPr1.idx);
  float got[2];
  std::memcpy(got, v.payload(1), sizeof got);
  EXPECT_EQ(got[1], -1.0f);
}

// The paper's header model, measured on real encoder output: a packet of N PRs costs
// 50 + 14 + 18 N header bytes on the wire (§6.1.1).
TEST(Protocol, HeaderBytesPerPacketAre64Plus18N) {
  struct Sizes final : PacketSink {
    std::vector<std::size_t> packet_sizes;
    void on_packet(std::uint32_t, PrType, std::span<const std::byte> p, FlushCause) override {
      packet_sizes.push_back(p.size());
    }
  };
  for (std::uint32_t prop_len : {4u, 64u, 512u}) {
    ConcatConfig cfg;
    cfg.num_nodes = 2;
    cfg.prop_len = prop_len;
    cfg.delay_ns = 1;
    Sizes sink;
    ConcatPoint point(cfg, sink);
    const std::uint32_t max_n = point.max_prs_per_packet(PrType::kResponse);
    std::vector<std::byte> payload(prop_len, std::byte{1});
    for (std::uint32_t n = 1; n <= max_n; ++n) {
      for (std::uint32_t i = 0; i < n; ++i) {
        point.push(PrType::kResponse, 1, {0, 0, i, i}, payload.data(), 0);
      }
      point.flush_all();
      ASSERT_EQ(sink.packet_sizes.size(), n);
      const std::size_t wire = sink.packet_sizes.back() + kUpperLayerBytes;
      EXPECT_EQ(wire - std::size_t{n} * prop_len, 50u + 14 + 18 * n) << "N " << n;
    }
    EXPECT_EQ(point.stats().header_bytes[1], 14 * max_n + 18 * (max_n * (max_n + 1) / 2));
  }
}

}  // namespace
}  // namespace netsparse::concat
