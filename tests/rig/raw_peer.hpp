// A raw transport endpoint that takes an engine's peer role in tests that forge packets: it
// joins the engine's collective region registration (Engine::register_region) the way another
// engine would.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "concat/frame.hpp"
#include "concat/protocol.hpp"
#include "rig/engine.hpp"
#include "rig/region.hpp"
#include "rig_test_util.hpp"
#include "transport/transport.hpp"

namespace rigtest {

// The argument agreement, the collective memory registration and the barrier; returns the
// raw endpoint's transport region id. Call on the raw endpoint's thread while the engine
// registers.
inline int join_region_registration(netsparse::transport::Transport& raw, std::uint32_t prop_bytes,
                                    const std::vector<std::uint64_t>& offsets) {
  const int size = static_cast<int>(offsets.size()) - 1;
  const std::vector<std::byte> mine =
      netsparse::rig::region_agreement(prop_bytes, offsets.data(), size, /*flags=*/0).record();
  std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size));
  raw.allgather(mine.data(), mine.size(), all.data());
  const int region = raw.register_memory(nullptr, 0);
  raw.barrier();
  return region;
}

// The packets of one received frame (concat/frame.hpp), pointing into it, and the split's
// verdict (the packets found before a bad one, when it is not kOk).
struct ReceivedFrame {
  std::vector<std::span<const std::byte>> packets;
  netsparse::concat::DecodeError error;
};

inline ReceivedFrame split_received(std::span<const std::byte> frame) {
  namespace cc = netsparse::concat;
  std::vector<std::span<const std::byte>> parts(cc::kMaxPacketsPerFrame);
  const cc::FrameSplit split = cc::split_frame(frame, parts);
  parts.resize(split.packets);
  return {std::move(parts), split.error};
}

// Up to `steps` times while !done(): step() (the engine's side), then every packet of every
// frame the raw endpoint received goes to on_packet(span) (each frame must split cleanly).
template <class Step, class OnPacket, class Done>
void poll_packets(netsparse::transport::Transport& raw, int steps, Step&& step,
                  OnPacket&& on_packet, Done&& done) {
  for (int k = 0; k < steps && !done(); ++k) {
    step();
    raw.poll(
        [&](const netsparse::transport::ReceivedPacket& m) {
          const ReceivedFrame frame = split_received(m.bytes);
          ASSERT_EQ(frame.error, netsparse::concat::DecodeError::kOk);
          for (const auto part : frame.packets) on_packet(part);
        },
        16);
  }
}

// Node 0's "quiesce done" for the first deregistration round: one control PR to node 1.
inline std::vector<std::byte> quiesce_done_packet(std::uint32_t prop_bytes) {
  namespace cc = netsparse::concat;
  std::vector<std::byte> done(cc::packet_bytes(cc::PrType::kControl, prop_bytes, 1));
  const std::size_t at =
      cc::encode_concat_header(done.data(), {cc::PrType::kControl, 1, prop_bytes, 1});
  cc::encode_pr(done.data() + at, {0, 0, 1, netsparse::rig::kControlQuiesceDone}, nullptr, 0);
  return done;
}

// Deregisters the region shared by the engine (node 1) and the raw endpoint (node 0): the raw
// side declares itself done, waits for the engine's own "done" for round 1, then joins the
// collectives of the deregistration while `deregister` runs the engine's side. Returns what
// `deregister` returned.
template <class Deregister>
bool deregister_with_raw_peer(netsparse::transport::Transport& raw, int raw_region,
                              std::uint32_t prop_bytes, Deregister&& deregister) {
  namespace cc = netsparse::concat;
  raw.send(1, quiesce_done_packet(prop_bytes));
  std::thread peer_down([&] {
    bool got_done = false;
    while (!got_done) {
      poll_packets(
          raw, 1, [] {},
          [&](std::span<const std::byte> part) {
            cc::PacketView v;
            if (cc::decode_packet(part, 0, prop_bytes, &v) != cc::DecodeError::kOk) return;
            if (v.header().type != cc::PrType::kControl) return;
            for (std::uint32_t i = 0; i < v.size(); ++i) {
              const auto h = v.pr(i);
              if (h.src_node == 1 && h.req_id == netsparse::rig::kControlQuiesceDone && h.idx == 1)
                got_done = true;
            }
          },
          [] { return false; });
      std::this_thread::yield();
    }
    raw.barrier();
    raw.deregister_memory(raw_region);
  });
  const bool ok = deregister();
  peer_down.join();
  return ok;
}

// Node 1 a real engine owning rows [100, 200) of prop_bytes-byte properties (inline progress,
// responses sent at once), node 0 a raw endpoint that forges packets; the region is registered
// on both.
// `standby_us` > 0: INLINE with a standby thread (Config::standby_us).
struct EngineWithRawPeer {
  explicit EngineWithRawPeer(std::uint32_t prop_bytes, std::uint32_t standby_us = 0)
      : raw(fabric.endpoint(0)), engine(fabric.endpoint(1), inline_config(standby_us)) {
    block = make_block(100, 200, prop_bytes);
    std::thread peer([&] { raw_region = join_region_registration(*raw, prop_bytes, offsets); });
    mr = engine.register_region(block.data(), 100, prop_bytes, offsets.data());
    peer.join();
  }
  static netsparse::rig::Config inline_config(std::uint32_t standby_us) {
    netsparse::rig::Config cfg;
    cfg.progress_mode = NS_PROGRESS_INLINE;
    cfg.standby_us = standby_us;
    cfg.delay_ns = 0;  // answer at once
    return cfg;
  }

  netsparse::transport::InprocFabric fabric{2};
  std::unique_ptr<netsparse::transport::Transport> raw;
  ns_context engine;
  const std::vector<std::uint64_t> offsets = {0, 100, 200};
  std::vector<std::uint8_t> block;
  int raw_region = -1;
  netsparse::rig::Region* mr = nullptr;
};

}  // namespace rigtest
