// The wire of Remote Indexed Scatter-Reduce (NS_WR_RIS; docs/protocol.md, "Scatter packets").
// The dual of a read: the client sends (row, value) records to the row's owner, which combines
// each value into its row and acknowledges the packet. Like plan packets, scatter packets share
// the frame with protocol packets and the first 14 bytes of their layout (type | dest | record
// length | count), so a frame is still split by its headers alone.
//
//   scatter header (32 B): type 2 | dest 4 | rec_len 4 | n 4 | src_node 4 | req_id 4 | op 2 |
//                          datatype 2 | status 4 | reserved 2 (0)
//   kUpdate  client -> owner: n >= 1 records of rec_len = 8 + prop_bytes bytes: the global row
//            (8 B) and the value row (prop_bytes B). status 0.
//   kAck     owner -> client: header only (n = 0, rec_len = 0): the kUpdate of req_id was
//            applied (status kApplied) or refused as a whole (any other ScatterStatus).
//
// decode_scatter_packet checks every field before it trusts one (lengths by division, op and
// datatype in range, reserved bytes zero), never reads outside the buffer, overflows on nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "concat/bulk_packet.hpp"
#include "concat/protocol.hpp"

namespace netsparse::concat {

enum class ScatterType : std::uint16_t { kUpdate = 0x31, kAck = 0x32 };

constexpr bool is_scatter_type(std::uint16_t raw) noexcept {
  return raw == static_cast<std::uint16_t>(ScatterType::kUpdate) ||
         raw == static_cast<std::uint16_t>(ScatterType::kAck);
}

inline constexpr std::size_t kScatterHeaderBytes = 32;
inline constexpr std::size_t kScatterRowBytes = 8;  // the global row of a record
static_assert(kScatterHeaderBytes == kConcatHeaderBytes + kPrHeaderBytes);

// ns_ris_op and ns_ris_datatype values (netsparse.h); the wire keeps them as they are.
inline constexpr std::uint16_t kScatterOps = 3;
inline constexpr std::uint16_t kScatterDatatypes = 4;

enum class ScatterStatus : std::uint32_t {
  kApplied = 0,
  kOutOfRange = 1,  // some row of the packet is not the owner's: nothing of it was applied
  kBadRow = 2,      // the owner's prop_bytes is not a multiple of the datatype's size
};
inline constexpr std::uint32_t kScatterStatuses = 3;
const char* to_string(ScatterStatus s) noexcept;

struct ScatterHeader : BulkHeaderStart<ScatterType> {
  std::uint32_t req_id;
  std::uint16_t op;
  std::uint16_t datatype;
  ScatterStatus status;
};

// The family's calls (bulk_packet.hpp; decode_scatter_packet below).
std::size_t encode_scatter_header(std::byte* dst, const ScatterHeader& h) noexcept;
std::size_t scatter_packet_length(std::span<const std::byte> bytes) noexcept;

struct ScatterPacket {
  ScatterHeader header;
  std::span<const std::byte> body;  // n * rec_len bytes
  std::uint64_t row(std::uint32_t k) const noexcept {
    return wire::load<std::uint64_t>(body.data() + std::size_t{k} * header.rec_len);
  }
  const std::byte* value(std::uint32_t k) const noexcept {
    return body.data() + std::size_t{k} * header.rec_len + kScatterRowBytes;
  }
};

// Record lengths and counts by type (else kPropLenMismatch / kCountMismatch): kUpdate
// 8 + expected_prop_bytes with n >= 1, kAck 0 with n = 0; op, datatype, status and the reserved
// bytes must be in range (kCountMismatch).
DecodeError decode_scatter_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                                  std::uint32_t expected_prop_bytes, ScatterPacket* out) noexcept;

}  // namespace netsparse::concat
