// The software wire of learned gather plans (docs/protocol.md, "Plan packets"). The paper's
// per-PR format (protocol.hpp: 18 B per PR) models a NIC packet; a replay of a recorded gather
// needs none of it: the client already knows which rows each owner sends and where each lands,
// so rows travel packed, in the order of the list the owner holds, behind one small header per
// packet. Plan packets share the frame with protocol packets and the first 14 bytes of their
// layout (type | dest | record length | count), so a frame is still split by its headers alone.
//
//   plan header (32 B): type 2 | dest 4 | rec_len 4 | n 4 | src_node 4 | plan 4 | version 4 |
//                       seq 2 | first 4
//   body: n records of rec_len bytes
//
//   kInstall  client -> owner: records [first, first + n) of the plan's row list, owner-local
//             row numbers of rec_len = 4 (rows < 2^32) or 8 bytes. A new version starts a new
//             list (first = 0).
//   kStart    client -> owner: send every row of the list (n = 0; `first` = the list's length,
//             which must match what the owner holds); `seq` names this start. With two 4-byte
//             records (n = 2), a push tag and the start's round: the owner pushes the list's
//             later starts without a kStart (NS_SEND_PUSHED) when its application calls
//             ns_plan_push with that tag and a later round q (start seq + (q - round)).
//   kRows     ... also pushed (unasked) for an armed list: the client lands rows of start
//             seq + 1 of its plan before it is posted.
//   kRows     owner -> client: rows [first, first + n) of the list, rec_len = the row's bytes,
//             for start `seq`.
//   kRefuse   owner -> client: the plan cannot be served (n = 0; `first` = a PlanRefusal).
//
// Like decode_packet, decode_plan_packet checks every length before it trusts one, never reads
// outside the buffer and overflows on no value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "concat/bulk_packet.hpp"
#include "concat/protocol.hpp"

namespace netsparse::concat {

enum class PlanType : std::uint16_t {
  kInstall = 0x11,
  kStart = 0x12,
  kRows = 0x13,
  kRefuse = 0x14
};

constexpr bool is_plan_type(std::uint16_t raw) noexcept {
  return raw >= static_cast<std::uint16_t>(PlanType::kInstall) &&
         raw <= static_cast<std::uint16_t>(PlanType::kRefuse);
}

// The same 32 bytes a lone PR costs (14 + 18): a row packet with one row is never larger than a
// response packet with one PR, so any property a region accepts fits a plan row packet too.
inline constexpr std::size_t kPlanHeaderBytes = 32;
static_assert(kPlanHeaderBytes == kConcatHeaderBytes + kPrHeaderBytes);

enum class PlanRefusal : std::uint32_t {
  kUnknown = 1,     // no list of this plan and version (never installed, or the region changed)
  kOutOfRange = 2,  // a row of the list is outside the owner's rows
  kBadList = 3,     // the list's chunks did not tile it, or its length differs from kStart's
};
const char* to_string(PlanRefusal r) noexcept;

struct PlanHeader : BulkHeaderStart<PlanType> {
  std::uint32_t plan;
  std::uint32_t version;
  std::uint16_t seq;
  std::uint32_t first;
};

// The family's calls (bulk_packet.hpp). Record lengths and counts by type (else
// kPropLenMismatch / kCountMismatch): kInstall 4 or 8, kRows expected_row_bytes, kStart and
// kRefuse 0 with n = 0, kStart also 4 with n = 2 (the push tag and round).
std::size_t encode_plan_header(std::byte* dst, const PlanHeader& h) noexcept;
std::size_t plan_packet_length(std::span<const std::byte> bytes) noexcept;
using PlanPacket = BulkPacket<PlanHeader>;
DecodeError decode_plan_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                               std::uint32_t expected_row_bytes, PlanPacket* out) noexcept;

}  // namespace netsparse::concat
