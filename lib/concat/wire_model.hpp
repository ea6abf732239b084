// The wire-byte (traffic) model every benchmark and baseline prices its bytes with: the paper's
// accounting (MICRO '25), spelled once. Everything here is built from the protocol's own
// constants (protocol.hpp):
//
//   kConcatHeaderBytes 14   concatenation header of every NetSparse packet
//   kPrHeaderBytes     18   PR record header (responses add the property)
//   kUpperLayerBytes   50   the paper's stand-in for RDMA/UDP/IP/Ethernet, per packet or message
//
//   a NetSparse packet of N PRs            50 + 14 + 18 N (+ P per PR of a response packet)
//   the paper's lone PR (no concatenation) 50 + 10 + 18 = 78 B (its 10 B header has no count)
//   a fine-grained read (vanilla SA)       a lone request PR + a lone response PR = 2 * 78 + P
//   an MPI message of N payload bytes      N + 50 (SU, inspector-executor, conveyor buffers)
//   minimum traffic for U distinct properties of P bytes between two nodes, at a packet size:
//     U * (P + 2 * 18) + 64 * (read packets + response packets), packets perfectly filled
//
// Header-only, constexpr, no allocation: usable from the engine, the distributed baselines and
// the benchmarks alike.
#pragma once

#include <algorithm>
#include <cstdint>

#include "concat/protocol.hpp"

namespace netsparse::concat {

// The concatenation header of the paper's Fig. 6 cost figure (type, dest, prop_len: no PR count).
inline constexpr std::uint64_t kPaperConcatHeaderBytes = 10;
// What one PR sent on its own costs in the paper: 50 + 10 + 18 = 78 B.
inline constexpr std::uint64_t kPaperLonePrBytes =
    kUpperLayerBytes + kPaperConcatHeaderBytes + kPrHeaderBytes;
static_assert(kPaperLonePrBytes == 78);

// Bytes on the wire of one NetSparse packet of n_prs PRs of type t (50 B upper layers + 14 B
// header + 18 B per PR, + prop_len per PR of a response packet). Same as wire_bytes().
constexpr std::uint64_t packet_wire_bytes(PrType t, std::uint32_t prop_len, std::uint32_t n_prs) {
  return wire_bytes(t, prop_len, n_prs);
}

// A fine-grained one-property read (sa-vanilla, one RDMA READ per remote nonzero) priced as the
// paper prices a lone PR: a 78 B request packet and a 78 B + property response packet.
constexpr std::uint64_t lone_read_wire_bytes(std::uint32_t prop_len) {
  return 2 * kPaperLonePrBytes + prop_len;
}

// Bytes on the wire of one MPI message carrying `payload` bytes (the paper's 50 B per message).
constexpr std::uint64_t mpi_message_wire_bytes(std::uint64_t payload) {
  return payload + kUpperLayerBytes;
}
// `messages` MPI messages carrying `payload` bytes in all.
constexpr std::uint64_t mpi_messages_wire_bytes(std::uint64_t messages, std::uint64_t payload) {
  return payload + messages * kUpperLayerBytes;
}

struct Traffic {
  std::uint64_t property_bytes = 0;  // the useful bytes: distinct properties * prop_len
  std::uint64_t wire_bytes = 0;      // with every header, both directions
  std::uint64_t packets = 0;         // read packets + response packets
};

// The minimum traffic for `unique` distinct properties of prop_len bytes fetched by one node
// from one other: each requested once and answered once, in perfectly concatenated packets of
// packet_bytes (RDMA payload: the 14 B header + records; at least one PR per packet even when a
// record does not fit).
constexpr Traffic minimum_traffic(std::uint64_t unique, std::uint32_t prop_len,
                                  std::uint32_t packet_bytes) {
  Traffic t;
  if (unique == 0) return t;
  const std::uint64_t room =
      packet_bytes > kConcatHeaderBytes ? std::uint64_t{packet_bytes} - kConcatHeaderBytes : 1;
  const std::uint64_t reads_per_packet =
      std::max<std::uint64_t>(1, room / pr_record_bytes(PrType::kRead, prop_len));
  const std::uint64_t responses_per_packet =
      std::max<std::uint64_t>(1, room / pr_record_bytes(PrType::kResponse, prop_len));
  const std::uint64_t read_packets = (unique + reads_per_packet - 1) / reads_per_packet;
  const std::uint64_t response_packets = (unique + responses_per_packet - 1) / responses_per_packet;
  t.property_bytes = unique * prop_len;
  t.packets = read_packets + response_packets;
  t.wire_bytes = unique * (pr_record_bytes(PrType::kRead, prop_len) +
                           pr_record_bytes(PrType::kResponse, prop_len)) +
                 t.packets * (kConcatHeaderBytes + kUpperLayerBytes);
  return t;
}

}  // namespace netsparse::concat
