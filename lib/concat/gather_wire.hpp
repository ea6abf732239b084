// The compact software wire of the RIG verb (docs/protocol.md, "Compact gather packets"). The
// paper's format (protocol.hpp: 18 B per PR on requests and responses) models a NIC packet; a
// software transport need not carry it. A compact read names its rows packed (4 B each where the
// owner's rows fit), and the answer carries the rows in request order with no per-row header:
// the client keeps, per read it sent, where each row goes, and matches per packet, not per PR.
// Compact packets share the frame with protocol and plan packets and the first 14 bytes of
// their layout (type | dest | record length | count), so a frame is still split by its headers.
//
//   gather header (32 B): type 2 | dest 4 | rec_len 4 | n 4 | src_node 4 | tag 4 | unit 2 |
//                         first 4 | total 4
//   body: n records of rec_len bytes
//
//   kGatherRead    client -> owner: n owner-local rows of rec_len 4 (rows < 2^32) or 8;
//                  first = 0, total = n. `tag` and `unit` name the read at the client.
//   kGatherRows    owner -> client: rows [first, first + n) of read `tag` (total rows), in the
//                  read's order, rec_len = the property's bytes. A read's rows may span packets.
//   kGatherRefuse  owner -> client: read `tag` was refused as a whole, nothing was read (n = 0,
//                  rec_len = 0; first = position of the first row outside the owner's rows).
//
// Like decode_packet, decode_gather_packet checks every length before it trusts one, never reads
// outside the buffer and overflows on no value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "concat/bulk_packet.hpp"
#include "concat/protocol.hpp"

namespace netsparse::concat {

enum class GatherType : std::uint16_t {
  kGatherRead = 0x21,
  kGatherRows = 0x22,
  kGatherRefuse = 0x23
};

constexpr bool is_gather_type(std::uint16_t raw) noexcept {
  return raw >= static_cast<std::uint16_t>(GatherType::kGatherRead) &&
         raw <= static_cast<std::uint16_t>(GatherType::kGatherRefuse);
}

// The same 32 bytes as a plan header and as a lone PR (14 + 18): one row in a compact packet
// never costs more than one PR in a paper response packet.
inline constexpr std::size_t kGatherHeaderBytes = 32;
static_assert(kGatherHeaderBytes == kConcatHeaderBytes + kPrHeaderBytes);

struct GatherHeader : BulkHeaderStart<GatherType> {
  std::uint32_t tag;
  std::uint16_t unit;
  std::uint32_t first;
  std::uint32_t total;
};

// The family's calls (bulk_packet.hpp). Record lengths and counts by type (else
// kPropLenMismatch / kCountMismatch): kGatherRead 4 or 8, n >= 1, first 0, total n; kGatherRows
// expected_row_bytes, n >= 1 and first + n <= total; kGatherRefuse 0, n 0 and first < total.
std::size_t encode_gather_header(std::byte* dst, const GatherHeader& h) noexcept;
std::size_t gather_packet_length(std::span<const std::byte> bytes) noexcept;
using GatherPacket = BulkPacket<GatherHeader>;
DecodeError decode_gather_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                                 std::uint32_t expected_row_bytes, GatherPacket* out) noexcept;

}  // namespace netsparse::concat
