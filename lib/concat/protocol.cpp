#include "concat/protocol.hpp"
#include <array>
#include "support/enum_names.hpp"

namespace netsparse::concat {

constexpr auto kDecodeErrorNames = std::to_array<support::EnumName<DecodeError>>({
    {DecodeError::kOk, "ok"},
    {DecodeError::kTruncated, "truncated packet (shorter than the header or ends mid-record)"},
    {DecodeError::kUnknownType, "unknown PR type"},
    {DecodeError::kCountMismatch, "#PRs does not match the packet length"},
    {DecodeError::kPropLenMismatch, "property length differs from the configured one"},
    {DecodeError::kWrongDestination, "packet is addressed to another node"},
});

const char* to_string(DecodeError e) noexcept {
  return support::name_of<kDecodeErrorNames>(e, "unknown decode error");
}

DecodeError decode_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                          std::uint32_t expected_prop_len, PacketView* out) noexcept {
  if (bytes.size() < kConcatHeaderBytes) return DecodeError::kTruncated;
  const std::byte* p = bytes.data();
  const auto [raw_type, dest, prop_len, n_prs] = load_prefix(p);
  if (!is_known_type(raw_type)) return DecodeError::kUnknownType;
  const auto type = static_cast<PrType>(raw_type);
  if (prop_len != expected_prop_len) return DecodeError::kPropLenMismatch;
  if (expected_dest != kAnyDestination && dest != expected_dest) {
    return DecodeError::kWrongDestination;
  }
  // Divide instead of multiplying n_prs by the record size: the product of two attacker-chosen
  // 32-bit values may not fit, the quotient always does.
  const std::size_t record = pr_record_bytes(type, prop_len);
  const std::size_t body = bytes.size() - kConcatHeaderBytes;
  if (body % record != 0) return DecodeError::kTruncated;
  if (n_prs == 0 || body / record != n_prs) return DecodeError::kCountMismatch;

  out->header_ = ConcatHeader{type, dest, prop_len, n_prs};
  out->packet_ = p;
  out->record_bytes_ = record;
  return DecodeError::kOk;
}

}  // namespace netsparse::concat
