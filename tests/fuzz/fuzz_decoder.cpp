// libFuzzer target for the packet decoders: the paper's protocol packets (decode_packet), the
// gather plans' packets (decode_plan_packet), the compact wire's gather packets
// (decode_gather_packet), scatter-reduce packets (decode_scatter_packet) and frames of any of
// them (split_frame). Input
// layout: 4 bytes expected_dest, 4 bytes expected_prop_len (both little-endian), then the
// packet. Checks, under ASan/UBSan:
//  * decode_packet never reads outside the packet (the packet is copied into an exactly sized
//    heap buffer, so one byte past it is a heap-buffer-overflow);
//  * whatever decodes re-encodes, through the public encoders, to the very same bytes, and the
//    view agrees with the expectations it was validated against;
//  * whatever fails reports one of the documented errors.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "concat/frame.hpp"
#include "concat/gather_wire.hpp"
#include "concat/plan_wire.hpp"
#include "concat/protocol.hpp"
#include "concat/scatter_wire.hpp"

using namespace netsparse::concat;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_decoder: %s\n", what);
  std::abort();
}
std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
         std::uint32_t{p[3]} << 24;
}

[[noreturn]] void fail(const char* family, const char* what) {
  std::fprintf(stderr, "fuzz_decoder: %s: %s\n", family, what);
  std::abort();
}

// One bulk family: its name (in failure messages), header size, decoder, type test, header
// encoder, length function, and the rules of its types an accepted packet must meet (the name
// of the broken one, or nullptr).
template <class Packet>
struct Family {
  const char* name;
  std::size_t header_bytes;
  DecodeError (*decode)(std::span<const std::byte>, std::uint32_t, std::uint32_t, Packet*);
  bool (*is_type)(std::uint16_t);
  std::size_t (*encode)(std::byte*, const decltype(Packet::header)&);
  std::size_t (*length)(std::span<const std::byte>);
  const char* (*broken_rule)(const Packet&, std::span<const std::byte>, std::uint32_t row_bytes);
};

// A bulk family's decoder on the bytes: a packet it accepts is of one of its types and for the
// expected destination, lies exactly in the buffer (n records right after the header), meets the
// rules of its type, re-encodes to the same header and has the length the family's length
// function gives; a refusal has a text.
template <class Packet>
void check_family(const Family<Packet>& f, std::span<const std::byte> bytes, std::uint32_t dest,
                  std::uint32_t row_bytes) {
  Packet pk;
  const DecodeError err = f.decode(bytes, dest, row_bytes, &pk);
  if (err != DecodeError::kOk) {
    if (to_string(err) == nullptr) fail(f.name, "error without text");
    return;
  }
  const auto& h = pk.header;
  if (!f.is_type(static_cast<std::uint16_t>(h.type))) fail(f.name, "accepted a foreign type");
  if (dest != kAnyDestination && h.dest != dest) fail(f.name, "accepted a foreign dest");
  if (pk.body.size() != std::size_t{h.n} * h.rec_len) fail(f.name, "body size");
  if (pk.body.data() != bytes.data() + f.header_bytes) fail(f.name, "body not in place");
  if (f.header_bytes + pk.body.size() != bytes.size()) fail(f.name, "not exact");
  if (const char* broken = f.broken_rule(pk, bytes, row_bytes)) fail(f.name, broken);
  std::vector<std::byte> again(f.header_bytes);
  f.encode(again.data(), h);
  if (std::memcmp(again.data(), bytes.data(), f.header_bytes) != 0) fail(f.name, "round trip");
  if (f.length(bytes) != bytes.size()) fail(f.name, "length disagrees");
}

const char* broken_plan_rule(const PlanPacket& pk, std::span<const std::byte>,
                             std::uint32_t row_bytes) {
  const PlanHeader& h = pk.header;
  if (h.type == PlanType::kRows && h.rec_len != row_bytes) return "rows of a foreign size";
  if (h.type == PlanType::kInstall && h.rec_len != 4 && h.rec_len != 8) return "row width";
  return nullptr;
}

const char* broken_gather_rule(const GatherPacket& pk, std::span<const std::byte>,
                               std::uint32_t row_bytes) {
  const GatherHeader& h = pk.header;
  if (h.type == GatherType::kGatherRows &&
      (h.rec_len != row_bytes || std::uint64_t{h.first} + h.n > h.total)) {
    return "rows of a foreign size or beyond their read";
  }
  if (h.type == GatherType::kGatherRead && h.rec_len != 4 && h.rec_len != 8) return "row width";
  return nullptr;
}

const char* broken_scatter_rule(const ScatterPacket& pk, std::span<const std::byte> bytes,
                                std::uint32_t row_bytes) {
  const ScatterHeader& h = pk.header;
  if (h.type == ScatterType::kUpdate && (h.n == 0 || h.rec_len != kScatterRowBytes + row_bytes))
    return "records of a foreign size";
  if (h.type == ScatterType::kAck && (h.n != 0 || h.rec_len != 0)) return "ack body";
  if (h.op >= kScatterOps || h.datatype >= kScatterDatatypes) return "op or datatype";
  for (std::uint32_t k = 0; k < h.n; ++k) {
    if (pk.value(k) + row_bytes > bytes.data() + bytes.size()) return "record overruns";
    (void)pk.row(k);
  }
  return nullptr;
}

// The bulk families' decoders on the same bytes (check_family); split_frame either refuses the
// bytes or tiles them exactly with packets whose lengths it proved.
void check_plan_and_frame(std::span<const std::byte> bytes, std::uint32_t dest,
                          std::uint32_t row_bytes) {
  check_family(Family<PlanPacket>{"plan", kPlanHeaderBytes, decode_plan_packet, is_plan_type,
                                  encode_plan_header, plan_packet_length, broken_plan_rule},
               bytes, dest, row_bytes);
  check_family(
      Family<GatherPacket>{"gather", kGatherHeaderBytes, decode_gather_packet, is_gather_type,
                           encode_gather_header, gather_packet_length, broken_gather_rule},
      bytes, dest, row_bytes);
  check_family(
      Family<ScatterPacket>{"scatter", kScatterHeaderBytes, decode_scatter_packet, is_scatter_type,
                            encode_scatter_header, scatter_packet_length, broken_scatter_rule},
      bytes, dest, row_bytes);
  std::span<const std::byte> parts[16];
  const FrameSplit split = split_frame(bytes, parts);
  if (split.error == DecodeError::kOk) {
    std::size_t covered = 0;
    for (std::size_t k = 0; k < split.packets; ++k) {
      if (parts[k].data() != bytes.data() + covered) fail("frame: packets not in order");
      covered += parts[k].size();
    }
    if (covered != bytes.size()) fail("frame: packets do not tile it");
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  const std::uint32_t expected_dest = le32(data);
  const std::uint32_t expected_prop_len = le32(data + 4);
  const std::size_t len = size - 8;
  // Exactly sized copy (new[] of 0 is valid): any read past the end trips ASan.
  std::unique_ptr<std::byte[]> packet(new std::byte[len]);
  if (len != 0) std::memcpy(packet.get(), data + 8, len);

  check_plan_and_frame(std::span<const std::byte>(packet.get(), len), expected_dest,
                       expected_prop_len);
  PacketView view;
  const DecodeError err = decode_packet(std::span<const std::byte>(packet.get(), len),
                                        expected_dest, expected_prop_len, &view);
  if (to_string(err) == nullptr) fail("error without text");
  if (err != DecodeError::kOk) {
    switch (err) {
      case DecodeError::kTruncated:
      case DecodeError::kUnknownType:
      case DecodeError::kCountMismatch:
      case DecodeError::kPropLenMismatch:
      case DecodeError::kWrongDestination:
        return 0;
      default:
        fail("undocumented error");
    }
  }
  const ConcatHeader& h = view.header();
  if (h.prop_len != expected_prop_len) fail("accepted a foreign prop_len");
  if (expected_dest != kAnyDestination && h.dest != expected_dest) fail("accepted a foreign dest");
  if (h.n_prs == 0 || view.size() != h.n_prs) fail("bad count");
  if (view.bytes().size() != len || view.bytes().data() != packet.get()) fail("view not exact");

  // Re-encode from the decoded fields only.
  std::vector<std::byte> again(len);
  std::size_t off = encode_concat_header(again.data(), h);
  if (!is_known_type(static_cast<std::uint16_t>(h.type))) fail("accepted an unknown type");
  // Only responses carry a payload; kRead, kInvalid and kControl records are 18 B headers.
  const std::uint32_t payload_len = h.type == PrType::kResponse ? h.prop_len : 0;
  if (view.record_bytes() != kPrHeaderBytes + payload_len) fail("record size");
  for (std::uint32_t i = 0; i < view.size(); ++i) {
    if ((view.payload(i) == nullptr) != (h.type != PrType::kResponse)) fail("payload presence");
    if (off + kPrHeaderBytes + payload_len > len) fail("records overrun the packet");
    off += encode_pr(again.data() + off, view.pr(i), view.payload(i), payload_len);
  }
  if (off != len) fail("records do not cover the packet");
  if (std::memcmp(again.data(), packet.get(), len) != 0) fail("round trip changed bytes");
  return 0;
}
