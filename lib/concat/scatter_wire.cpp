#include "concat/scatter_wire.hpp"

#include <array>
#include "concat/bulk_packet.hpp"
#include "support/enum_names.hpp"

namespace netsparse::concat {

namespace {
// The fields after the prefix and the sending node, at their offsets, then 2 reserved bytes (32
// bytes in all).
constexpr std::tuple kFields{
    HeaderField{18, &ScatterHeader::req_id}, HeaderField{22, &ScatterHeader::op},
    HeaderField{24, &ScatterHeader::datatype}, HeaderField{26, &ScatterHeader::status}};
constexpr std::size_t kOffReserved = 30;
}  // namespace

constexpr auto kScatterStatusNames = std::to_array<support::EnumName<ScatterStatus>>({
    {ScatterStatus::kApplied, "applied"},
    {ScatterStatus::kOutOfRange,
     "a row of the packet is outside the owner's rows (nothing applied)"},
    {ScatterStatus::kBadRow, "the owner's prop_bytes is not a multiple of the datatype's size"},
});

const char* to_string(ScatterStatus s) noexcept {
  return support::name_of<kScatterStatusNames>(s, "unknown scatter status");
}

std::size_t encode_scatter_header(std::byte* dst, const ScatterHeader& h) noexcept {
  encode_bulk_header(dst, h, kFields);
  wire::store<std::uint16_t>(dst + kOffReserved, 0);
  return kScatterHeaderBytes;
}

std::size_t scatter_packet_length(std::span<const std::byte> bytes) noexcept {
  return typed_bulk_packet_length(bytes, is_scatter_type, kScatterHeaderBytes);
}

DecodeError decode_scatter_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                                  std::uint32_t expected_prop_bytes, ScatterPacket* out) noexcept {
  const auto type_rules = [&bytes, expected_prop_bytes](const ScatterHeader& h) {
    const auto status = static_cast<std::uint32_t>(h.status);
    if (h.type == ScatterType::kUpdate) {
      // Rows of 0 bytes do not exist: refused even when the caller expects 0.
      if (expected_prop_bytes == 0 || expected_prop_bytes > UINT32_MAX - kScatterRowBytes ||
          h.rec_len != kScatterRowBytes + expected_prop_bytes) {
        return DecodeError::kPropLenMismatch;
      }
      if (h.n == 0 || status != 0) return DecodeError::kCountMismatch;
    } else {
      if (h.rec_len != 0) return DecodeError::kPropLenMismatch;
      if (h.n != 0 || status >= kScatterStatuses) return DecodeError::kCountMismatch;
    }
    if (h.op >= kScatterOps || h.datatype >= kScatterDatatypes ||
        wire::load<std::uint16_t>(bytes.data() + kOffReserved) != 0) {
      return DecodeError::kCountMismatch;
    }
    return DecodeError::kOk;
  };
  return decode_bulk_packet(bytes, kScatterHeaderBytes, is_scatter_type, kFields, type_rules,
                            expected_dest, out);
}

}  // namespace netsparse::concat
