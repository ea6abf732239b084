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

// The plan decoder on the same bytes: a packet it accepts lies exactly in the buffer, re-encodes
// to the same header, and its body is n records of a length allowed for its type; split_frame
// either refuses the bytes or tiles them exactly with packets whose lengths it proved.
void check_plan_and_frame(std::span<const std::byte> bytes, std::uint32_t dest,
                          std::uint32_t row_bytes) {
  PlanPacket pk;
  const DecodeError err = decode_plan_packet(bytes, dest, row_bytes, &pk);
  if (err == DecodeError::kOk) {
    const PlanHeader& h = pk.header;
    if (!is_plan_type(static_cast<std::uint16_t>(h.type))) fail("plan: accepted an unknown type");
    if (dest != kAnyDestination && h.dest != dest) fail("plan: accepted a foreign dest");
    if (pk.body.size() != std::size_t{h.n} * h.rec_len) fail("plan: body size");
    if (pk.body.data() != bytes.data() + kPlanHeaderBytes) fail("plan: body not in place");
    if (kPlanHeaderBytes + pk.body.size() != bytes.size()) fail("plan: not exact");
    if (h.type == PlanType::kRows && h.rec_len != row_bytes) fail("plan: rows of a foreign size");
    if (h.type == PlanType::kInstall && h.rec_len != 4 && h.rec_len != 8) fail("plan: row width");
    std::byte again[kPlanHeaderBytes];
    encode_plan_header(again, h);
    if (std::memcmp(again, bytes.data(), kPlanHeaderBytes) != 0) fail("plan: round trip");
    if (plan_packet_length(bytes) != bytes.size()) fail("plan: length disagrees");
  } else if (to_string(err) == nullptr) {
    fail("plan: error without text");
  }
  GatherPacket gk;
  const DecodeError gerr = decode_gather_packet(bytes, dest, row_bytes, &gk);
  if (gerr == DecodeError::kOk) {
    const GatherHeader& h = gk.header;
    if (!is_gather_type(static_cast<std::uint16_t>(h.type)))
      fail("gather: accepted a foreign type");
    if (dest != kAnyDestination && h.dest != dest) fail("gather: accepted a foreign dest");
    if (gk.body.size() != std::size_t{h.n} * h.rec_len) fail("gather: body size");
    if (gk.body.data() != bytes.data() + kGatherHeaderBytes) fail("gather: body not in place");
    if (kGatherHeaderBytes + gk.body.size() != bytes.size()) fail("gather: not exact");
    if (h.type == GatherType::kGatherRows &&
        (h.rec_len != row_bytes || std::uint64_t{h.first} + h.n > h.total)) {
      fail("gather: rows of a foreign size or beyond their read");
    }
    if (h.type == GatherType::kGatherRead && h.rec_len != 4 && h.rec_len != 8) {
      fail("gather: row width");
    }
    std::byte again[kGatherHeaderBytes];
    encode_gather_header(again, h);
    if (std::memcmp(again, bytes.data(), kGatherHeaderBytes) != 0) fail("gather: round trip");
    if (gather_packet_length(bytes) != bytes.size()) fail("gather: length disagrees");
  } else if (to_string(gerr) == nullptr) {
    fail("gather: error without text");
  }
  ScatterPacket sp;
  const DecodeError serr = decode_scatter_packet(bytes, dest, row_bytes, &sp);
  if (serr == DecodeError::kOk) {
    const ScatterHeader& h = sp.header;
    if (!is_scatter_type(static_cast<std::uint16_t>(h.type))) fail("scatter: unknown type");
    if (dest != kAnyDestination && h.dest != dest) fail("scatter: accepted a foreign dest");
    if (sp.body.size() != std::size_t{h.n} * h.rec_len) fail("scatter: body size");
    if (kScatterHeaderBytes + sp.body.size() != bytes.size()) fail("scatter: not exact");
    if (h.type == ScatterType::kUpdate && (h.n == 0 || h.rec_len != kScatterRowBytes + row_bytes))
      fail("scatter: records of a foreign size");
    if (h.type == ScatterType::kAck && (h.n != 0 || h.rec_len != 0)) fail("scatter: ack body");
    if (h.op >= kScatterOps || h.datatype >= kScatterDatatypes) fail("scatter: op or datatype");
    for (std::uint32_t k = 0; k < h.n; ++k) {
      if (sp.value(k) + row_bytes > bytes.data() + bytes.size()) fail("scatter: record overruns");
      (void)sp.row(k);
    }
    std::byte again[kScatterHeaderBytes];
    encode_scatter_header(again, h);
    if (std::memcmp(again, bytes.data(), kScatterHeaderBytes) != 0) fail("scatter: round trip");
    if (scatter_packet_length(bytes) != bytes.size()) fail("scatter: length disagrees");
  } else if (to_string(serr) == nullptr) {
    fail("scatter: error without text");
  }
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
