#include "concat/plan_wire.hpp"

#include <array>
#include "concat/bulk_packet.hpp"
#include "support/enum_names.hpp"

namespace netsparse::concat {

namespace {
// The fields after the prefix and the sending node, at their offsets (32 bytes in all).
constexpr std::tuple kFields{
    HeaderField{18, &PlanHeader::plan}, HeaderField{22, &PlanHeader::version},
    HeaderField{26, &PlanHeader::seq}, HeaderField{28, &PlanHeader::first}};
}  // namespace

constexpr auto kPlanRefusalNames = std::to_array<support::EnumName<PlanRefusal>>({
    {PlanRefusal::kUnknown, "the owner holds no list of this plan and version"},
    {PlanRefusal::kOutOfRange, "a row of the plan's list is outside the owner's rows"},
    {PlanRefusal::kBadList, "the plan's list arrived incomplete or with the wrong length"},
});

const char* to_string(PlanRefusal r) noexcept {
  return support::name_of<kPlanRefusalNames>(r, "unknown plan refusal");
}

std::size_t encode_plan_header(std::byte* dst, const PlanHeader& h) noexcept {
  encode_bulk_header(dst, h, kFields);
  return kPlanHeaderBytes;
}

std::size_t plan_packet_length(std::span<const std::byte> bytes) noexcept {
  return typed_bulk_packet_length(bytes, is_plan_type, kPlanHeaderBytes);
}

DecodeError decode_plan_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                               std::uint32_t expected_row_bytes, PlanPacket* out) noexcept {
  const auto type_rules = [expected_row_bytes](const PlanHeader& h) {
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
        // n = 0: a plain start; n = 2 records of 4 bytes: a start that arms pushes (tag, round).
        if (h.n == 2 && h.rec_len == 4) break;
        if (h.rec_len != 0) return DecodeError::kPropLenMismatch;
        if (h.n != 0) return DecodeError::kCountMismatch;
        break;
      case PlanType::kRefuse:
        if (h.rec_len != 0) return DecodeError::kPropLenMismatch;
        if (h.n != 0) return DecodeError::kCountMismatch;
        break;
    }
    return DecodeError::kOk;
  };
  return decode_bulk_packet(bytes, kPlanHeaderBytes, is_plan_type, kFields, type_rules,
                            expected_dest, out);
}

}  // namespace netsparse::concat
