#include "concat/gather_wire.hpp"

#include "concat/bulk_packet.hpp"

namespace netsparse::concat {

namespace {
// The fields after the prefix and the sending node, at their offsets (32 bytes in all).
constexpr std::tuple kFields{
    HeaderField{18, &GatherHeader::tag}, HeaderField{22, &GatherHeader::unit},
    HeaderField{24, &GatherHeader::first}, HeaderField{28, &GatherHeader::total}};
}  // namespace

std::size_t encode_gather_header(std::byte* dst, const GatherHeader& h) noexcept {
  encode_bulk_header(dst, h, kFields);
  return kGatherHeaderBytes;
}

std::size_t gather_packet_length(std::span<const std::byte> bytes) noexcept {
  const std::byte* p = bytes.data();
  const auto raw = wire::load<std::uint16_t>(p + kOffType);
  if (!is_gather_type(raw)) return 0;
  if (bytes.size() < kGatherHeaderBytes) return bytes.size() + 1;
  const auto rec = wire::load<std::uint32_t>(p + kOffPropLen);
  const auto n = wire::load<std::uint32_t>(p + kOffNumPrs);
  if (static_cast<GatherType>(raw) == GatherType::kGatherRefuse) {
    return n == 0 && rec == 0 ? kGatherHeaderBytes : 0;
  }
  if (n == 0) return 0;  // reads and rows always carry records
  return bulk_packet_length(bytes, kGatherHeaderBytes);
}

DecodeError decode_gather_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                                 std::uint32_t expected_row_bytes, GatherPacket* out) noexcept {
  const auto type_rules = [expected_row_bytes](const GatherHeader& h) {
    switch (h.type) {
      case GatherType::kGatherRead:
        if (h.rec_len != 4 && h.rec_len != 8) return DecodeError::kPropLenMismatch;
        if (h.n == 0 || h.first != 0 || h.total != h.n) return DecodeError::kCountMismatch;
        break;
      case GatherType::kGatherRows:
        // Rows of 0 bytes do not exist (a region's prop_bytes is never 0): refused even when the
        // caller expects 0, so that no count of empty records passes as a packet.
        if (h.rec_len == 0 || h.rec_len != expected_row_bytes) return DecodeError::kPropLenMismatch;
        // first + n <= total, written so that no sum can overflow.
        if (h.n == 0 || h.n > h.total || h.first > h.total - h.n) {
          return DecodeError::kCountMismatch;
        }
        break;
      case GatherType::kGatherRefuse:
        if (h.rec_len != 0) return DecodeError::kPropLenMismatch;
        if (h.n != 0 || h.first >= h.total) return DecodeError::kCountMismatch;
        break;
    }
    return DecodeError::kOk;
  };
  return decode_bulk_packet(bytes, kGatherHeaderBytes, is_gather_type, kFields, type_rules,
                            expected_dest, out);
}

}  // namespace netsparse::concat
