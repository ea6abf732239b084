// A raw transport endpoint that takes an engine's peer role in tests that forge packets: it
// joins the engine's collective region registration (Engine::register_region) the way another
// engine would.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

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
      netsparse::rig::region_agreement(prop_bytes, offsets.data(), size).record();
  std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size));
  raw.allgather(mine.data(), mine.size(), all.data());
  const int region = raw.register_memory(nullptr, 0);
  raw.barrier();
  return region;
}

// Node 1 a real engine owning rows [100, 200) of prop_bytes-byte properties (inline progress,
// responses sent at once), node 0 a raw endpoint that forges packets; the region is registered
// on both.
struct EngineWithRawPeer {
  explicit EngineWithRawPeer(std::uint32_t prop_bytes)
      : raw(fabric.endpoint(0)), engine(fabric.endpoint(1), inline_config()) {
    block = make_block(100, 200, prop_bytes);
    std::thread peer([&] { raw_region = join_region_registration(*raw, prop_bytes, offsets); });
    mr = engine.register_region(block.data(), 100, prop_bytes, offsets.data());
    peer.join();
  }
  static netsparse::rig::Config inline_config() {
    netsparse::rig::Config cfg;
    cfg.progress_mode = NS_PROGRESS_INLINE;
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
