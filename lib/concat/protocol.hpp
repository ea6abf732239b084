// The NetSparse wire protocol (MICRO '25, Fig. 6): a concatenation header shared by every PR of
// a packet, followed by one PR record per Property Request.
//
//   concatenation header (14 B): type 2 | dest 4 | prop_len 4 | n_prs 4
//   PR record (18 B [+ prop_len]): src_node 4 | src_unit 2 | idx 8 | req_id 4 | payload (responses)
//
// Four PR types (docs/protocol.md): the paper's read and response, plus two header-only types
// the RIG engine needs and that used to be smuggled into src_unit: kInvalid (the owner refused
// the idx) and kControl (engine control messages, e.g. quiesce).
//
// Every multi-byte field is little-endian (docs/protocol.md). On little-endian hosts encoding
// and decoding are plain memcpy; big-endian hosts byte-swap. Nothing here allocates, and the
// decoder never reads a byte it has not first proven to be inside the buffer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace netsparse::concat {

// Every packet carries PRs of one type. Only kResponse records carry a payload.
//   kRead      ask the owner (dest) for property `idx`; req_id is echoed in the answer
//   kResponse  the property of `idx` (prop_len bytes), answering a kRead
//   kInvalid   answers a kRead whose idx the owner refused (outside its rows); no payload
//   kControl   a message between engines, not about a property; idx and req_id are defined by
//              the control message (quiesce: idx = round, req_id = 0; docs/protocol.md)
enum class PrType : std::uint16_t { kRead = 1, kResponse = 2, kInvalid = 3, kControl = 4 };
inline constexpr int kNumPrTypes = 4;

inline constexpr std::size_t kConcatHeaderBytes = 14;  // type 2 | dest 4 | prop_len 4 | n_prs 4
inline constexpr std::size_t kPrHeaderBytes = 18;      // src_node 4 | src_unit 2 | idx 8 | req_id 4
inline constexpr std::size_t kUpperLayerBytes = 50;    // the paper's stand-in for RDMA/UDP/IP/Eth

// Byte offsets inside the concatenation header and inside one PR record.
inline constexpr std::size_t kOffType = 0;
inline constexpr std::size_t kOffDest = 2;
inline constexpr std::size_t kOffPropLen = 6;
inline constexpr std::size_t kOffNumPrs = 10;
inline constexpr std::size_t kOffSrcNode = 0;
inline constexpr std::size_t kOffSrcUnit = 4;
inline constexpr std::size_t kOffIdx = 6;
inline constexpr std::size_t kOffReqId = 14;

// decode_packet's expected_dest that accepts any destination (a switch deconcatenates packets
// addressed to other nodes).
inline constexpr std::uint32_t kAnyDestination = 0xFFFFFFFFu;

struct ConcatHeader {
  PrType type;
  std::uint32_t dest;
  std::uint32_t prop_len;
  std::uint32_t n_prs;
};

struct PrHeader {
  std::uint32_t src_node;
  std::uint16_t src_unit;
  std::uint64_t idx;
  std::uint32_t req_id;
};

constexpr bool is_known_type(std::uint16_t raw) noexcept {
  return raw >= static_cast<std::uint16_t>(PrType::kRead) &&
         raw <= static_cast<std::uint16_t>(PrType::kControl);
}
// The index used by every per-type array (statistics, queues): 0 read, 1 response, 2 invalid,
// 3 control. Defined for known types only.
constexpr int type_index(PrType t) noexcept {
  return static_cast<int>(t) - 1;
}
constexpr PrType type_at(int index) noexcept {
  return static_cast<PrType>(index + 1);
}
constexpr bool carries_payload(PrType t) noexcept {
  return t == PrType::kResponse;
}

// Bytes of one PR record: its 18 B header plus, in responses only, the property.
constexpr std::size_t pr_record_bytes(PrType t, std::uint32_t prop_len) {
  return kPrHeaderBytes + (carries_payload(t) ? std::size_t{prop_len} : 0);
}
// Bytes of a NetSparse packet (concatenation header + records); the RDMA payload.
constexpr std::size_t packet_bytes(PrType t, std::uint32_t prop_len, std::uint32_t n_prs) {
  return kConcatHeaderBytes + std::size_t{n_prs} * pr_record_bytes(t, prop_len);
}
// Bytes on the wire under the paper's accounting model (adds 50 B of upper-layer headers).
constexpr std::size_t wire_bytes(PrType t, std::uint32_t prop_len, std::uint32_t n_prs) {
  return packet_bytes(t, prop_len, n_prs) + kUpperLayerBytes;
}

// ---- little-endian loads and stores through memcpy (no alignment or aliasing UB) ----------
namespace wire {
template <class T>
constexpr T byte_swap(T v) noexcept {
  T out = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out = static_cast<T>((out << 8) | (v & 0xFF));
    v = static_cast<T>(v >> 8);
  }
  return out;
}
template <class T>
inline void store(std::byte* dst, T v) noexcept {
  if constexpr (std::endian::native == std::endian::big) v = byte_swap(v);
  std::memcpy(dst, &v, sizeof(T));
}
template <class T>
inline T load(const std::byte* src) noexcept {
  T v;
  std::memcpy(&v, src, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) v = byte_swap(v);
  return v;
}
}  // namespace wire

// The 14-byte prefix every packet family shares (the concatenation header's fields; the bulk
// families of bulk_packet.hpp read prop_len and n_prs as their record length and count), as raw
// wire values.
struct WirePrefix {
  std::uint16_t type;
  std::uint32_t dest;
  std::uint32_t len;
  std::uint32_t n;
};

inline void encode_prefix(std::byte* dst, const WirePrefix& w) noexcept {
  wire::store<std::uint16_t>(dst + kOffType, w.type);
  wire::store<std::uint32_t>(dst + kOffDest, w.dest);
  wire::store<std::uint32_t>(dst + kOffPropLen, w.len);
  wire::store<std::uint32_t>(dst + kOffNumPrs, w.n);
}

// `src` must hold kConcatHeaderBytes.
inline WirePrefix load_prefix(const std::byte* src) noexcept {
  return {wire::load<std::uint16_t>(src + kOffType), wire::load<std::uint32_t>(src + kOffDest),
          wire::load<std::uint32_t>(src + kOffPropLen),
          wire::load<std::uint32_t>(src + kOffNumPrs)};
}

// Writes the 14-byte concatenation header at dst; returns kConcatHeaderBytes.
inline std::size_t encode_concat_header(std::byte* dst, const ConcatHeader& h) noexcept {
  encode_prefix(dst, {static_cast<std::uint16_t>(h.type), h.dest, h.prop_len, h.n_prs});
  return kConcatHeaderBytes;
}

// Writes one PR record at dst: the 18-byte PR header, then payload_len bytes of payload
// (payload may be null only when payload_len == 0: every type but kResponse). Returns the bytes
// written.
inline std::size_t encode_pr(std::byte* dst, const PrHeader& h, const void* payload,
                             std::uint32_t payload_len) noexcept {
  wire::store<std::uint32_t>(dst + kOffSrcNode, h.src_node);
  wire::store<std::uint16_t>(dst + kOffSrcUnit, h.src_unit);
  wire::store<std::uint64_t>(dst + kOffIdx, h.idx);
  wire::store<std::uint32_t>(dst + kOffReqId, h.req_id);
  if (payload_len != 0) std::memcpy(dst + kPrHeaderBytes, payload, payload_len);
  return kPrHeaderBytes + payload_len;
}

inline PrHeader decode_pr_header(const std::byte* src) noexcept {
  return PrHeader{
      wire::load<std::uint32_t>(src + kOffSrcNode), wire::load<std::uint16_t>(src + kOffSrcUnit),
      wire::load<std::uint64_t>(src + kOffIdx), wire::load<std::uint32_t>(src + kOffReqId)};
}

// Why a packet was rejected. Checked in this order, so each malformed packet maps to one error:
//   kTruncated        shorter than the 14-byte header, or the records after it end mid-record
//   kUnknownType      type is not one of the four PrType values (1..4)
//   kPropLenMismatch  prop_len differs from the one configured for this kernel
//   kWrongDestination dest is not this node
//   kCountMismatch    the buffer holds a whole number of records, but not n_prs of them
//                     (n_prs == 0 is also a mismatch: an empty packet is never sent)
enum class DecodeError : int {
  kOk = 0,
  kTruncated,
  kUnknownType,
  kCountMismatch,
  kPropLenMismatch,
  kWrongDestination
};
const char* to_string(DecodeError e) noexcept;

class PacketView;
DecodeError decode_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                          std::uint32_t expected_prop_len, PacketView* out) noexcept;

// Zero-copy view over a validated packet; it points into the caller's buffer, which must
// outlive it. Obtainable only through decode_packet, so every accessor may trust the sizes.
class PacketView {
 public:
  PacketView() = default;  // an empty view (size() == 0); decode_packet fills it

  const ConcatHeader& header() const noexcept { return header_; }
  std::uint32_t size() const noexcept { return header_.n_prs; }
  std::size_t record_bytes() const noexcept { return record_bytes_; }
  // The whole validated packet.
  std::span<const std::byte> bytes() const noexcept {
    if (packet_ == nullptr) return {};
    return {packet_, kConcatHeaderBytes + std::size_t{header_.n_prs} * record_bytes_};
  }
  // PR header i (i < size()).
  PrHeader pr(std::uint32_t i) const noexcept { return decode_pr_header(record(i)); }
  // Payload of PR i: prop_len bytes for responses, nullptr for every other type.
  const std::byte* payload(std::uint32_t i) const noexcept {
    return carries_payload(header_.type) ? record(i) + kPrHeaderBytes : nullptr;
  }
  // Start of PR record i (its header, then its payload).
  const std::byte* record(std::uint32_t i) const noexcept {
    return packet_ + kConcatHeaderBytes + std::size_t{i} * record_bytes_;
  }

 private:
  friend DecodeError decode_packet(std::span<const std::byte>, std::uint32_t, std::uint32_t,
                                   PacketView*) noexcept;
  ConcatHeader header_{PrType::kRead, 0, 0, 0};
  const std::byte* packet_ = nullptr;  // first byte of the concatenation header
  std::size_t record_bytes_ = 0;
};

// Validates everything before trusting anything (see DecodeError for the order). On kOk *out
// views the packet; on any error *out is left untouched. expected_dest == kAnyDestination
// skips the destination check. Never reads outside `bytes`; no overflow on any length.
DecodeError decode_packet(std::span<const std::byte> bytes, std::uint32_t expected_dest,
                          std::uint32_t expected_prop_len, PacketView* out) noexcept;

}  // namespace netsparse::concat
