#include "concat/plan_wire.hpp"

#include "concat/bulk_packet.hpp"

namespace netsparse::concat {

namespace {
constexpr std::size_t kOffSrc = 14, kOffPlan = 18, kOffVersion = 22, kOffSeq = 26, kOffFirst = 28;
}

const char* to_string(PlanRefusal r) noexcept {
  switch (r) {
    case PlanRefusal::kUnknown:
      return "the owner holds no list of this plan and version";
    case PlanRefusal::kOutOfRange:
      return "a row of the plan's list is outside the owner's rows";
    case PlanRefusal::kBadList:
      return "the plan's list arrived incomplete or with the wrong length";
  }
  return "unknown plan refusal";
}

std::size_t encode_plan_header(std::byte* dst, const PlanHeader& h) noexcept {
  encode_prefix(dst, {static_cast<std::uint16_t>(h.type), h.dest, h.rec_len, h.n});
  wire::store<std::uint32_t>(dst + kOffSrc, h.src_node);
  wire::store<std::uint32_t>(dst + kOffPlan, h.plan);
  wire::store<std::uint32_t>(dst + kOffVersion, h.version);
  wire::store<std::uint16_t>(dst + kOffSeq, h.seq);
  wire::store<std::uint32_t>(dst + kOffFirst, h.first);
  return kPlanHeaderBytes;
}

std::size_t plan_packet_length(std::span<const std::byte> bytes) noexcept {
  const std::byte* p = bytes.data();
  if (!is_plan_type(wire::load<std::uint16_t>(p + kOffType))) return 0;
  return bulk_packet_length(bytes, kPlanHeaderBytes);
}

DecodeError decode_plan_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                               std::uint32_t expected_row_bytes, PlanPacket* out) noexcept {
  WirePrefix pre{};
  if (const DecodeError e = check_bulk_head(bytes, kPlanHeaderBytes, is_plan_type, &pre);
      e != DecodeError::kOk) {
    return e;
  }
  const std::byte* p = bytes.data();
  PlanHeader h{static_cast<PlanType>(pre.type),
               pre.dest,
               pre.len,
               pre.n,
               wire::load<std::uint32_t>(p + kOffSrc),
               wire::load<std::uint32_t>(p + kOffPlan),
               wire::load<std::uint32_t>(p + kOffVersion),
               wire::load<std::uint16_t>(p + kOffSeq),
               wire::load<std::uint32_t>(p + kOffFirst)};
  switch (h.type) {
    case PlanType::kInstall:
      if (h.rec_len != 4 && h.rec_len != 8) return DecodeError::kPropLenMismatch;
      if (h.n == 0) return DecodeError::kCountMismatch;
      break;
    case PlanType::kRows:
      // Rows of 0 bytes do not exist (a region's prop_bytes is never 0): refused even when the
      // caller expects 0, so that no count of empty records passes as a packet.
      if (h.rec_len == 0 || h.rec_len != expected_row_bytes) return DecodeError::kPropLenMismatch;
      if (h.n == 0) return DecodeError::kCountMismatch;
      break;
    case PlanType::kStart:
    case PlanType::kRefuse:
      if (h.rec_len != 0) return DecodeError::kPropLenMismatch;
      if (h.n != 0) return DecodeError::kCountMismatch;
      break;
  }
  return finish_bulk_decode(bytes, kPlanHeaderBytes, expected_dest, h, out);
}

}  // namespace netsparse::concat
