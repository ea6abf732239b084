// Transport frames (concat/frame.hpp): a frame splits back into exactly the packets it was built
// from, whatever their types; anything that is not a whole number of packets is refused as a
// whole, with the decoder's error names.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "concat/frame.hpp"
#include "concat/protocol.hpp"

namespace netsparse::concat {
namespace {

std::vector<std::byte> packet(PrType type, std::uint32_t prop_len, std::uint32_t n,
                              std::uint8_t fill) {
  std::vector<std::byte> b(packet_bytes(type, prop_len, n));
  std::size_t off = encode_concat_header(b.data(), ConcatHeader{type, 1, prop_len, n});
  std::vector<std::byte> payload(prop_len, std::byte{fill});
  for (std::uint32_t i = 0; i < n; ++i) {
    const bool resp = carries_payload(type);
    off += encode_pr(b.data() + off, PrHeader{0, 1, 1000 + i, i}, resp ? payload.data() : nullptr,
                     resp ? prop_len : 0);
  }
  return b;
}

std::vector<std::byte> concat_all(const std::vector<std::vector<std::byte>>& packets) {
  std::vector<std::byte> f;
  for (const auto& p : packets) f.insert(f.end(), p.begin(), p.end());
  return f;
}

FrameSplit split(const std::vector<std::byte>& frame, std::vector<std::span<const std::byte>>& out,
                 std::size_t max = kMaxPacketsPerFrame) {
  out.assign(max, {});
  return split_frame(frame, out);
}

TEST(Frame, SplitsIntoTheSamePacketsWhateverTheirTypes) {
  const std::vector<std::vector<std::byte>> packets = {
      packet(PrType::kRead, 24, 3, 0), packet(PrType::kResponse, 24, 2, 0xAB),
      packet(PrType::kInvalid, 24, 1, 0), packet(PrType::kControl, 24, 1, 0),
      packet(PrType::kResponse, 24, 5, 0xCD)};
  const auto frame = concat_all(packets);
  std::vector<std::span<const std::byte>> out;
  const FrameSplit s = split(frame, out);
  ASSERT_EQ(s.error, DecodeError::kOk);
  ASSERT_EQ(s.packets, packets.size());
  for (std::size_t k = 0; k < packets.size(); ++k) {
    ASSERT_EQ(out[k].size(), packets[k].size()) << k;
    EXPECT_EQ(std::memcmp(out[k].data(), packets[k].data(), packets[k].size()), 0) << k;
    PacketView v;
    EXPECT_EQ(decode_packet(out[k], 1, 24, &v), DecodeError::kOk) << k;
  }
}

TEST(Frame, OnePacketIsAFrame) {
  const auto p = packet(PrType::kResponse, 64, 17, 1);
  std::vector<std::span<const std::byte>> out;
  const FrameSplit s = split(p, out);
  ASSERT_EQ(s.error, DecodeError::kOk);
  ASSERT_EQ(s.packets, 1u);
  EXPECT_EQ(out[0].size(), p.size());
}

TEST(Frame, TruncatedFramesAreRefusedAsAWhole) {
  const auto frame =
      concat_all({packet(PrType::kRead, 8, 4, 0), packet(PrType::kResponse, 8, 3, 7)});
  std::vector<std::span<const std::byte>> out;
  // Cut at every length: only the full frame and the cut right after the first packet split.
  const std::size_t first = packet_bytes(PrType::kRead, 8, 4);
  for (std::size_t len = 0; len < frame.size(); ++len) {
    const std::vector<std::byte> cut(frame.begin(), frame.begin() + static_cast<long>(len));
    const FrameSplit s = split(cut, out);
    if (len == first) {
      EXPECT_EQ(s.error, DecodeError::kOk);
      EXPECT_EQ(s.packets, 1u);
    } else {
      EXPECT_EQ(s.error, DecodeError::kTruncated) << "length " << len;
    }
  }
}

TEST(Frame, TrailingBytesUnknownTypesAndEmptyPacketsAreRefused) {
  std::vector<std::span<const std::byte>> out;
  auto frame = concat_all({packet(PrType::kRead, 8, 2, 0), packet(PrType::kRead, 8, 1, 0)});
  // A second header claiming an unknown type.
  auto unknown = frame;
  unknown[packet_bytes(PrType::kRead, 8, 2)] = std::byte{9};
  EXPECT_EQ(split(unknown, out).error, DecodeError::kUnknownType);
  // A header with zero PRs (never sent): its length cannot be trusted.
  auto empty = frame;
  std::memset(empty.data() + packet_bytes(PrType::kRead, 8, 2) + kOffNumPrs, 0, 4);
  EXPECT_EQ(split(empty, out).error, DecodeError::kCountMismatch);
  // A header claiming more PRs than the frame holds (and one claiming 2^32 - 1 of them).
  auto more = frame;
  more[packet_bytes(PrType::kRead, 8, 2) + kOffNumPrs] = std::byte{3};
  EXPECT_EQ(split(more, out).error, DecodeError::kTruncated);
  auto huge = frame;
  std::memset(huge.data() + kOffNumPrs, 0xFF, 4);
  EXPECT_EQ(split(huge, out).error, DecodeError::kTruncated);
  // A forged prop_len making one response record enormous.
  auto resp = packet(PrType::kResponse, 8, 1, 0);
  std::memset(resp.data() + kOffPropLen, 0xFF, 4);
  EXPECT_EQ(split(resp, out).error, DecodeError::kTruncated);
  // Fewer than 14 bytes after a whole packet.
  auto tail = frame;
  tail.insert(tail.end(), 5, std::byte{1});
  EXPECT_EQ(split(tail, out).error, DecodeError::kTruncated);
  EXPECT_EQ(split({}, out).error, DecodeError::kTruncated);
}

TEST(Frame, MorePacketsThanTheCallerCanTakeIsRefused) {
  const auto frame = concat_all({packet(PrType::kRead, 8, 1, 0), packet(PrType::kRead, 8, 1, 0),
                                 packet(PrType::kRead, 8, 1, 0)});
  std::vector<std::span<const std::byte>> out;
  EXPECT_EQ(split(frame, out, 2).error, DecodeError::kCountMismatch);
  EXPECT_EQ(split(frame, out, 3).error, DecodeError::kOk);
}

}  // namespace
}  // namespace netsparse::concat
