// The 2-PR response packet shown byte by byte in docs/protocol.md, built by a real
// ConcatPoint. Shared by the protocol test (which pins its bytes) and protocol_example (which
// prints the hex dump for the document).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "concat/concat_point.hpp"

namespace netsparse::concat::example {

inline constexpr std::uint32_t kDest = 3;
inline constexpr std::uint32_t kPropLen = 8;  // K = 2 fp32 values
inline constexpr PrHeader kPr0{1, 2, 0x12345678ull, 7};
inline constexpr float kPayload0[2] = {1.0f, 2.0f};
inline constexpr PrHeader kPr1{1, 5, 40000000000ull, 8};
inline constexpr float kPayload1[2] = {0.5f, -1.0f};

inline std::vector<std::byte> build_packet() {
  struct Capture final : PacketSink {
    std::vector<std::byte> bytes;
    void on_packet(std::uint32_t, PrType, std::span<const std::byte> p, FlushCause) override {
      bytes.assign(p.begin(), p.end());
    }
  } sink;
  ConcatConfig cfg;
  cfg.num_nodes = 4;
  cfg.prop_len = kPropLen;
  cfg.delay_ns = 1000;
  ConcatPoint point(cfg, sink);
  point.push(PrType::kResponse, kDest, kPr0, kPayload0, 0);
  point.push(PrType::kResponse, kDest, kPr1, kPayload1, 10);
  point.flush_all();
  return sink.bytes;
}

}  // namespace netsparse::concat::example
