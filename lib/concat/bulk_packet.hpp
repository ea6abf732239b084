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

// A decoded packet of a bulk family: its header and a view of its n * rec_len bytes of records.
template <class Header>
struct BulkPacket {
  Header header;
  std::span<const std::byte> body;
};

// The first checks of every bulk family's decoder: kTruncated when `bytes` cannot hold the shared
// prefix, kUnknownType when its type is not the family's (is_type), kTruncated when it cannot
// hold the family's header of header_bytes. On kOk *prefix holds the prefix.
template <class IsType>
DecodeError check_bulk_head(std::span<const std::byte> bytes, std::size_t header_bytes,
                            IsType is_type, WirePrefix* prefix) noexcept {
  if (bytes.size() < kConcatHeaderBytes) return DecodeError::kTruncated;
  *prefix = load_prefix(bytes.data());
  if (!is_type(prefix->type)) return DecodeError::kUnknownType;
  if (bytes.size() < header_bytes) return DecodeError::kTruncated;
  return DecodeError::kOk;
}

// The last checks of every bulk family's decoder, once the rules of its types passed: the
// destination (kWrongDestination), then a body of exactly h.n records (check_bulk_body). On kOk
// *out holds h and the body; otherwise it is untouched.
template <class Header, class Packet>
DecodeError finish_bulk_decode(std::span<const std::byte> bytes, std::size_t header_bytes,
                               std::uint32_t expected_dest, const Header& h, Packet* out) noexcept {
  if (expected_dest != kAnyDestination && h.dest != expected_dest) {
    return DecodeError::kWrongDestination;
  }
  if (const DecodeError e = check_bulk_body(bytes, header_bytes, h.rec_len, h.n);
      e != DecodeError::kOk) {
    return e;
  }
  out->header = h;
  out->body = bytes.subspan(header_bytes);
  return DecodeError::kOk;
}

}  // namespace netsparse::concat
