// What the software packet families behind the shared 14-byte prefix have in common (plan
// packets, compact gather packets, scatter packets): a fixed header, then `n` records of
// `rec_len` bytes. Their lengths and bodies are checked here once; each family adds the rules
// of its own types (which record lengths and counts a type allows).
//
// Every family declares the same three calls over its header (gather_wire.hpp, plan_wire.hpp,
// scatter_wire.hpp), documented here once:
//   encode_<family>_header(dst, h): writes the 32-byte header at dst (any reserved bytes 0) and
//     returns its size;
//   <family>_packet_length(bytes): the length of the packet starting at `bytes` (at least
//     kConcatHeaderBytes long), header and records; bytes.size() + 1 when that exceeds the
//     buffer (never overflows); 0 when the type is not the family's or its counts are
//     impossible for it;
//   decode_<family>_packet(bytes, expected_dest, expected_row_bytes, out): validates
//     everything (decode_bulk_packet below: length, type, destination, a body of exactly n
//     records) and the family's rules for record lengths and counts by type; `bytes` must be
//     exactly one packet; on error *out is untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>

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

// bulk_packet_length of a family whose packet types is_type accepts: 0 for any other type.
template <class IsType>
std::size_t typed_bulk_packet_length(std::span<const std::byte> bytes, IsType is_type,
                                     std::size_t header_bytes) noexcept {
  if (!is_type(wire::load<std::uint16_t>(bytes.data() + kOffType))) return 0;
  return bulk_packet_length(bytes, header_bytes);
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

// Where every bulk family's header puts the sending node: right after the 14-byte prefix.
inline constexpr std::size_t kOffBulkSrcNode = kConcatHeaderBytes;

// The fields every bulk family's header begins with (Type: the family's packet types): the
// prefix's type, destination, record length and count, and the sending node. A family's header
// derives from it and adds its own fields (listed as HeaderField below).
template <class Type>
struct BulkHeaderStart {
  Type type;
  std::uint32_t dest;
  std::uint32_t rec_len;
  std::uint32_t n;
  std::uint32_t src_node;
};

// A decoded packet of a bulk family: its header and a view of its n * rec_len bytes of records.
template <class Header>
struct BulkPacket {
  Header header;
  std::span<const std::byte> body;
};

// One field of a bulk family's header after the shared prefix: where it sits on the wire and
// which member of the family's header it fills. A family lists its fields once (a std::tuple of
// these); encode_bulk_header and load_bulk_header both read that list, so the encoder and the
// decoder cannot disagree on an offset. Enumerations travel as their underlying integer.
template <class Header, class T>
struct HeaderField {
  std::size_t offset;
  T Header::*member;
};
// Spelled out: clang 14 (Debian 12's, which builds the fuzz targets) has no class template
// argument deduction for aggregates.
template <class Header, class T>
HeaderField(std::size_t, T Header::*) -> HeaderField<Header, T>;

namespace detail {
template <class T>
void store_field(std::byte* dst, T v) noexcept {
  if constexpr (std::is_enum_v<T>) {
    wire::store(dst, static_cast<std::underlying_type_t<T>>(v));
  } else {
    wire::store(dst, v);
  }
}
template <class T>
T load_field(const std::byte* src) noexcept {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<T>(wire::load<std::underlying_type_t<T>>(src));
  } else {
    return wire::load<T>(src);
  }
}
}  // namespace detail

// Writes a bulk family's header at dst: the shared prefix (type, dest, rec_len, n), the sending
// node, then every field of `fields`.
template <class Header, class Fields>
void encode_bulk_header(std::byte* dst, const Header& h, const Fields& fields) noexcept {
  encode_prefix(dst, {static_cast<std::uint16_t>(h.type), h.dest, h.rec_len, h.n});
  wire::store(dst + kOffBulkSrcNode, h.src_node);
  std::apply([&](const auto&... f) { (detail::store_field(dst + f.offset, h.*f.member), ...); },
             fields);
}

// A bulk family's header read from `src`, whose prefix has been read into `pre`.
template <class Header, class Fields>
Header load_bulk_header(const std::byte* src, const WirePrefix& pre,
                        const Fields& fields) noexcept {
  Header h{};
  h.type = static_cast<decltype(h.type)>(pre.type);
  h.dest = pre.dest;
  h.rec_len = pre.len;
  h.n = pre.n;
  h.src_node = wire::load<std::uint32_t>(src + kOffBulkSrcNode);
  std::apply(
      [&](const auto&... f) {
        ((h.*f.member =
              detail::load_field<std::remove_reference_t<decltype(h.*f.member)>>(src + f.offset)),
         ...);
      },
      fields);
  return h;
}

// Every bulk family's decoder, around the rules of its own types: kTruncated when `bytes`
// cannot hold the shared prefix, kUnknownType when its type is not the family's (is_type),
// kTruncated when it cannot hold the family's header of header_bytes; then the header, read with
// `fields`, must pass type_rules(header) (the family's rules for its type: an error, or kOk to go
// on); then the destination (kWrongDestination) and a body of exactly h.n records
// (check_bulk_body). On kOk *out holds the header and the body; otherwise it is untouched.
template <class Packet, class IsType, class Fields, class TypeRules>
DecodeError decode_bulk_packet(std::span<const std::byte> bytes, std::size_t header_bytes,
                               IsType is_type, const Fields& fields, TypeRules type_rules,
                               std::uint32_t expected_dest, Packet* out) noexcept {
  using Header = decltype(out->header);
  if (bytes.size() < kConcatHeaderBytes) return DecodeError::kTruncated;
  const WirePrefix pre = load_prefix(bytes.data());
  if (!is_type(pre.type)) return DecodeError::kUnknownType;
  if (bytes.size() < header_bytes) return DecodeError::kTruncated;
  const auto h = load_bulk_header<Header>(bytes.data(), pre, fields);
  if (const DecodeError e = type_rules(h); e != DecodeError::kOk) return e;
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
