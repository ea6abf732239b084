#include "concat/protocol.hpp"

namespace netsparse::concat {

const char* to_string(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated packet (shorter than the header or ends mid-record)";
    case DecodeError::kUnknownType:
      return "unknown PR type";
    case DecodeError::kCountMismatch:
      return "#PRs does not match the packet length";
    case DecodeError::kPropLenMismatch:
      return "property length differs from the configured one";
    case DecodeError::kWrongDestination:
      return "packet is addressed to another node";
  }
  return "unknown decode error";
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
