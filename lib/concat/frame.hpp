// Transport framing: several NetSparse packets to the same peer leave as one transport message
// (a *frame*) when they are ready together, so per-message costs of MPI or verbs are paid per
// frame, not per 1500-byte protocol packet.
//
//   frame = packet | packet | ... (at least one, no padding, no extra header)
//
// A packet's length follows from its own concatenation header (type, prop_len, n_prs), so a
// frame needs no header of its own and adds no byte to the wire model: statistics keep counting
// protocol packets and count frames apart. split_frame walks the headers and checks that the
// packets tile the frame exactly *before* anything is handed on: a truncated frame, or one whose
// tail is not a whole packet, is rejected as a whole. Each packet is then decoded (and fully
// validated) by decode_packet as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "concat/protocol.hpp"

namespace netsparse::concat {

// The most packets one frame may carry (bounds the splitter's output array).
inline constexpr std::size_t kMaxPacketsPerFrame = 4096;

struct FrameSplit {
  DecodeError error = DecodeError::kOk;  // kTruncated, kUnknownType or kCountMismatch
  std::size_t packets = 0;               // packets found (all of them, when error == kOk)
};

// Length of the packet whose header starts at `bytes` (bytes.size() >= 14), or 0 when its type
// is unknown or its n_prs is 0 (no protocol packet has zero records; plan packets, plan_wire.hpp,
// have their own rule). Never overflows: a length beyond
// bytes.size() is reported as bytes.size() + 1.
std::size_t packet_length(std::span<const std::byte> bytes) noexcept;

// Splits `frame` into packets, writing at most `max` spans to `out`. error != kOk (and nothing
// usable in out) when the frame is empty, ends inside a header or a packet (kTruncated), holds a
// header of unknown type (kUnknownType), a header with n_prs == 0 (kCountMismatch), or more than
// `max` packets (kCountMismatch).
FrameSplit split_frame(std::span<const std::byte> frame,
                       std::span<std::span<const std::byte>> out) noexcept;

}  // namespace netsparse::concat
