// What the software packet families behind the shared 14-byte prefix have in common (plan
// packets, compact gather packets, scatter packets): a fixed header, then `n` records of
// `rec_len` bytes. Their lengths and bodies are checked here once; each family adds the rules
// of its own types (which record lengths and counts a type allows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "concat/protocol.hpp"

namespace netsparse::concat {

// Length of a packet starting at `bytes` with a header of header_bytes: the header alone when
// n == 0, 0 (impossible) for records of 0 bytes, bytes.size() + 1 when it runs past the buffer.
// Never overflows: n * rec_len is compared by division first.
inline std::size_t bulk_packet_length(std::span<const std::byte> bytes,
                                      std::size_t header_bytes) noexcept {
  if (bytes.size() < header_bytes) return bytes.size() + 1;
  const auto rec = wire::load<std::uint32_t>(bytes.data() + kOffPropLen);
  const auto n = wire::load<std::uint32_t>(bytes.data() + kOffNumPrs);
  if (n == 0) return header_bytes;
  if (rec == 0) return 0;
  if (n > (bytes.size() - header_bytes) / rec) return bytes.size() + 1;
  return header_bytes + std::size_t{n} * rec;
}

// The body of a packet that is exactly `bytes`: n records of rec_len (none when rec_len is 0).
// kTruncated when it ends mid-record, kCountMismatch when it holds another number of records.
inline DecodeError check_bulk_body(std::span<const std::byte> bytes, std::size_t header_bytes,
                                   std::uint32_t rec_len, std::uint32_t n) noexcept {
  const std::size_t body = bytes.size() - header_bytes;
  if (rec_len == 0) return body == 0 ? DecodeError::kOk : DecodeError::kCountMismatch;
  if (body % rec_len != 0) return DecodeError::kTruncated;
  return body / rec_len == n ? DecodeError::kOk : DecodeError::kCountMismatch;
}

}  // namespace netsparse::concat
