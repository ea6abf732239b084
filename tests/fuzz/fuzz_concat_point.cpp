// libFuzzer target for the concatenation point: the input picks a configuration (dedicated or
// virtualized queues, packet and chunk sizes, delay) and then a stream of pushes (all four PR
// types), polls and explicit flushes. Every packet must decode, stay within the packet size,
// keep PRs of its queue in FIFO order, and never leave before its ET on expiry; kInvalid and
// kControl PRs leave alone and at once (kUnqueued), nothing else does; at the end every PR has
// been delivered exactly once and the chunk pool is whole again. Violations abort.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "concat/concat_point.hpp"

using namespace netsparse::concat;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_concat_point: %s\n", what);
  std::abort();
}

struct Input {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

struct CheckingSink final : PacketSink {
  ConcatConfig cfg;
  std::vector<std::uint64_t> arrival;   // per PR id
  std::vector<std::uint8_t> delivered;  // per PR id
  std::vector<std::int64_t> last_id;    // per queue (type * nodes + dest), -1 = none
  std::uint64_t now = 0;
  void on_packet(std::uint32_t dest, PrType type, std::span<const std::byte> packet,
                 FlushCause cause) override {
    if (packet.size() > cfg.packet_bytes && packet.size() != packet_bytes(type, cfg.prop_len, 1)) {
      fail("packet larger than packet_bytes");
    }
    PacketView v;
    if (decode_packet(packet, dest, cfg.prop_len, &v) != DecodeError::kOk) fail("undecodable");
    if (v.header().type != type) fail("type mismatch");
    const bool unqueued_type = type == PrType::kInvalid || type == PrType::kControl;
    if (unqueued_type != (cause == FlushCause::kUnqueued)) fail("wrong cause for the type");
    if (unqueued_type && v.size() != 1) fail("an unqueued PR shared its packet");
    std::int64_t& last = last_id[type_index(type) * cfg.num_nodes + dest];
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const PrHeader h = v.pr(i);
      if (h.idx >= delivered.size()) fail("unknown PR");
      if (delivered[h.idx]++ != 0) fail("PR delivered twice");
      if (static_cast<std::int64_t>(h.idx) <= last) fail("PRs reordered within a queue");
      last = static_cast<std::int64_t>(h.idx);
      if (h.src_node != dest || h.req_id != static_cast<std::uint32_t>(h.idx * 7)) {
        fail("PR header corrupted");
      }
      if ((v.payload(i) != nullptr) != (type == PrType::kResponse)) fail("payload presence");
      if (type == PrType::kResponse) {
        for (std::uint32_t j = 0; j < cfg.prop_len; ++j) {
          if (v.payload(i)[j] != std::byte((h.idx + j) & 0xFF)) fail("payload corrupted");
        }
      }
    }
    if (cause == FlushCause::kExpired && cfg.delay_ns != 0 &&
        arrival[v.pr(0).idx] + cfg.delay_ns > now) {
      fail("flushed before its expiration time");
    }
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  CheckingSink sink;
  ConcatConfig& cfg = sink.cfg;
  cfg.num_nodes = 1 + in.next() % 8;
  cfg.prop_len = in.next() % 97;
  cfg.packet_bytes = 32 + in.next() * 4u;
  cfg.delay_ns = in.next() % 64;
  cfg.virtualized = (in.next() & 1) != 0;
  cfg.chunk_bytes = 16 + in.next() % 64;
  const std::size_t max_record = 14 + 18 + std::size_t{cfg.prop_len};
  const std::size_t per_packet =
      (std::max<std::size_t>(cfg.packet_bytes, max_record) + cfg.chunk_bytes - 1) / cfg.chunk_bytes;
  cfg.pool_chunks = static_cast<std::uint32_t>(per_packet + in.next() % 16);
  ConcatPoint point(cfg, sink);
  sink.last_id.assign(std::size_t{kNumPrTypes} * cfg.num_nodes, -1);

  std::vector<std::byte> payload(cfg.prop_len);
  std::uint64_t id = 0;
  while (in.n != 0 && id < 4096) {
    const std::uint8_t op = in.next();
    if (op < 200) {  // push
      // Low 3 bits: 0-2 read, 3-5 response, 6 invalid, 7 control.
      const std::uint8_t kind = op & 7;
      const PrType type = kind < 3    ? PrType::kRead
                          : kind < 6  ? PrType::kResponse
                          : kind == 6 ? PrType::kInvalid
                                      : PrType::kControl;
      const std::uint32_t dest = (op >> 3) % cfg.num_nodes;
      for (std::uint32_t j = 0; j < cfg.prop_len; ++j) payload[j] = std::byte((id + j) & 0xFF);
      sink.arrival.push_back(sink.now);
      sink.delivered.push_back(0);
      point.push(type, dest, {dest, 0, id, static_cast<std::uint32_t>(id * 7)}, payload.data(),
                 sink.now);
      ++id;
    } else if (op < 250) {  // time passes, then poll
      sink.now += in.next() % 32;
      point.poll_expired(sink.now);
      if (point.next_expiry_ns() <= sink.now) fail("expired queue left after poll");
    } else {
      point.flush_all();
      if (!point.empty()) fail("not empty after flush_all");
    }
  }
  point.flush_all();
  for (std::uint8_t d : sink.delivered) {
    if (d != 1) fail("PR lost");
  }
  if (cfg.virtualized && point.free_chunks() != cfg.pool_chunks) fail("chunks leaked");
  const ConcatStats& s = point.stats();
  std::uint64_t counted = 0;
  for (int t = 0; t < kNumPrTypes; ++t) counted += s.prs[t];
  if (counted != id) fail("statistics disagree");
  return 0;
}
