#include "concat/frame.hpp"

#include "concat/gather_wire.hpp"
#include "concat/plan_wire.hpp"
#include "concat/scatter_wire.hpp"

namespace netsparse::concat {

std::size_t packet_length(std::span<const std::byte> bytes) noexcept {
  const std::byte* p = bytes.data();
  const auto raw_type = wire::load<std::uint16_t>(p + kOffType);
  if (is_plan_type(raw_type)) return plan_packet_length(bytes);
  if (is_gather_type(raw_type)) return gather_packet_length(bytes);
  if (is_scatter_type(raw_type)) return scatter_packet_length(bytes);
  if (!is_known_type(raw_type)) return 0;
  const auto n_prs = wire::load<std::uint32_t>(p + kOffNumPrs);
  if (n_prs == 0) return 0;
  const std::size_t record =
      pr_record_bytes(static_cast<PrType>(raw_type), wire::load<std::uint32_t>(p + kOffPropLen));
  // n_prs * record may exceed 64 bits for forged values: compare by division first.
  const std::size_t room = bytes.size() - kConcatHeaderBytes;
  if (n_prs > room / record) return bytes.size() + 1;
  return kConcatHeaderBytes + std::size_t{n_prs} * record;
}

FrameSplit split_frame(std::span<const std::byte> frame,
                       std::span<std::span<const std::byte>> out) noexcept {
  FrameSplit s;
  if (frame.empty()) {
    s.error = DecodeError::kTruncated;
    return s;
  }
  std::size_t at = 0;
  while (at < frame.size()) {
    const std::span<const std::byte> rest = frame.subspan(at);
    if (rest.size() < kConcatHeaderBytes) {
      s.error = DecodeError::kTruncated;
      return s;
    }
    const std::size_t len = packet_length(rest);
    if (len == 0) {
      const auto raw = wire::load<std::uint16_t>(rest.data() + kOffType);
      s.error =
          is_known_type(raw) || is_plan_type(raw) || is_gather_type(raw) || is_scatter_type(raw)
              ? DecodeError::kCountMismatch
              : DecodeError::kUnknownType;
      return s;
    }
    if (len > rest.size()) {
      s.error = DecodeError::kTruncated;
      return s;
    }
    if (s.packets == out.size()) {
      s.error = DecodeError::kCountMismatch;
      return s;
    }
    out[s.packets++] = rest.first(len);
    at += len;
  }
  return s;
}

}  // namespace netsparse::concat
