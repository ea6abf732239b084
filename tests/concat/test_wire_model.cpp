// The one wire-byte model (concat/wire_model.hpp): exact byte counts, and agreement with the
// bytes the real encoder writes.
#include "concat/wire_model.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace netsparse::concat {
namespace {

// Encodes a packet of n PRs of type t with the real encoder and returns its size.
std::size_t encoded_packet_bytes(PrType t, std::uint32_t prop_len, std::uint32_t n) {
  std::vector<std::byte> buf(kConcatHeaderBytes + std::size_t{n} * (kPrHeaderBytes + prop_len));
  std::vector<std::byte> payload(prop_len, std::byte{7});
  std::size_t at = encode_concat_header(buf.data(), {t, 1, prop_len, n});
  for (std::uint32_t i = 0; i < n; ++i) {
    at +=
        encode_pr(buf.data() + at, {0, 0, i, i}, payload.data(), carries_payload(t) ? prop_len : 0);
  }
  return at;
}

TEST(WireModel, PacketOfNPrsIs64Plus18NPlusPayload) {
  for (std::uint32_t n : {1u, 2u, 7u, 83u}) {
    for (std::uint32_t p : {4u, 64u, 512u}) {
      EXPECT_EQ(packet_wire_bytes(PrType::kRead, p, n), 14u + 18u * n + 50u);
      EXPECT_EQ(packet_wire_bytes(PrType::kResponse, p, n), 14u + (18u + p) * n + 50u);
      EXPECT_EQ(packet_wire_bytes(PrType::kInvalid, p, n), 14u + 18u * n + 50u);
      // The model is the encoder's output plus the 50 B of upper layers, nothing else.
      for (PrType t : {PrType::kRead, PrType::kResponse, PrType::kInvalid, PrType::kControl}) {
        EXPECT_EQ(packet_wire_bytes(t, p, n), encoded_packet_bytes(t, p, n) + kUpperLayerBytes)
            << "type " << static_cast<int>(t) << " P " << p << " N " << n;
      }
    }
  }
  // One K=16 response packet of 18 PRs: 14 + 18 * (18 + 64) + 50.
  EXPECT_EQ(packet_wire_bytes(PrType::kResponse, 64, 18), 1540u);
}

TEST(WireModel, PaperLonePrAndVanillaRead) {
  EXPECT_EQ(kPaperLonePrBytes, 78u);  // 50 + 10 + 18
  EXPECT_EQ(lone_read_wire_bytes(4), 2u * 78 + 4);
  EXPECT_EQ(lone_read_wire_bytes(64), 220u);
  EXPECT_EQ(lone_read_wire_bytes(512), 668u);
  // Our own format's lone PR carries the 4 B count the paper's header lacks.
  EXPECT_EQ(packet_wire_bytes(PrType::kRead, 64, 1), kPaperLonePrBytes + 4);
}

TEST(WireModel, MpiMessages) {
  EXPECT_EQ(mpi_message_wire_bytes(0), 50u);
  EXPECT_EQ(mpi_message_wire_bytes(10000), 10050u);
  EXPECT_EQ(mpi_messages_wire_bytes(3, 3000), 3150u);
  EXPECT_EQ(mpi_messages_wire_bytes(0, 0), 0u);
}

TEST(WireModel, MinimumTrafficFillsPacketsPerfectly) {
  // 1500 B packets: 1486 B of records. Reads of 18 B: 82 per packet. K=16 responses of 82 B: 18.
  const Traffic t = minimum_traffic(1000, 64, 1500);
  const std::uint64_t read_packets = (1000 + 81) / 82, response_packets = (1000 + 17) / 18;
  EXPECT_EQ(read_packets, 13u);
  EXPECT_EQ(response_packets, 56u);
  EXPECT_EQ(t.packets, read_packets + response_packets);
  EXPECT_EQ(t.property_bytes, 64000u);
  EXPECT_EQ(t.wire_bytes, 1000u * (64 + 2 * 18) + 64u * (13 + 56));
  // Exactly full packets: the model is the sum of its packets' wire bytes.
  const Traffic full = minimum_traffic(82 * 18, 64, 1500);
  EXPECT_EQ(full.wire_bytes, 18 * packet_wire_bytes(PrType::kRead, 64, 82) +
                                 82 * packet_wire_bytes(PrType::kResponse, 64, 18));
  EXPECT_EQ(full.packets, 18u + 82u);
  // Nothing to fetch costs nothing; one property costs one lone read and one lone response.
  EXPECT_EQ(minimum_traffic(0, 64, 1500).wire_bytes, 0u);
  EXPECT_EQ(minimum_traffic(0, 64, 1500).packets, 0u);
  EXPECT_EQ(minimum_traffic(1, 4, 1500).wire_bytes, 2u * (50 + 14 + 18) + 4);
  // A record larger than the packet still travels, one per packet.
  const Traffic big = minimum_traffic(3, 4096, 1500);
  EXPECT_EQ(big.packets, 1u + 3u);
  EXPECT_EQ(big.wire_bytes, 3u * (4096 + 36) + 64u * 4);
}

}  // namespace
}  // namespace netsparse::concat
