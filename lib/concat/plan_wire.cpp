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
  wire::store<std::uint16_t>(dst + kOffType, static_cast<std::uint16_t>(h.type));
  wire::store<std::uint32_t>(dst + kOffDest, h.dest);
  wire::store<std::uint32_t>(dst + kOffPropLen, h.rec_len);
  wire::store<std::uint32_t>(dst + kOffNumPrs, h.n);
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
  if (bytes.size() < kConcatHeaderBytes) return DecodeError::kTruncated;
  const std::byte* p = bytes.data();
  const auto raw = wire::load<std::uint16_t>(p + kOffType);
  if (!is_plan_type(raw)) return DecodeError::kUnknownType;
  if (bytes.size() < kPlanHeaderBytes) return DecodeError::kTruncated;
  PlanHeader h{static_cast<PlanType>(raw),
               wire::load<std::uint32_t>(p + kOffDest),
               wire::load<std::uint32_t>(p + kOffPropLen),
               wire::load<std::uint32_t>(p + kOffNumPrs),
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
  if (expected_dest != kAnyDestination && h.dest != expected_dest) {
    return DecodeError::kWrongDestination;
  }
  if (const DecodeError e = check_bulk_body(bytes, kPlanHeaderBytes, h.rec_len, h.n);
      e != DecodeError::kOk) {
    return e;
  }
  out->header = h;
  out->body = bytes.subspan(kPlanHeaderBytes);
  return DecodeError::kOk;
}

}  // namespace netsparse::concat
