#include "emulate/tor_switch.hpp"

#include <algorithm>
#include <cmath>

namespace netsparse::emulate {

TorSwitch::TorSwitch(int tor, Fabric& fabric, const SwitchModel& model, std::uint32_t prop_bytes,
                     std::span<const std::uint64_t> row_offsets)
    : tor_(tor),
      fabric_(fabric),
      model_(model),
      row_offsets_(row_offsets.begin(), row_offsets.end()) {
  sw::TorConfig tc;
  tc.prop_bytes = prop_bytes;
  tc.queues = static_cast<std::uint32_t>(fabric.nodes());  // one queue per destination node
  tc.packet_bytes = model.packet_bytes;
  // The pipeline's clock is the fabric's: picoseconds.
  tc.delay =
      static_cast<std::uint64_t>(std::llround(model.delay_cycles * 1000.0 / model.clock_ghz));
  tc.cache = model.cache;  // the control plane's per-kernel configure
  tc.cache_config = model.cache_config;
  pipeline_ = std::make_unique<sw::TorPipeline>(
      tc, [this](std::uint64_t idx) { return owner_of(idx); },
      [](std::uint32_t node) { return node; },
      [this](std::uint32_t node) { return fabric_.rack_of(static_cast<int>(node)) == tor_; },
      *this);
}

std::uint32_t TorSwitch::owner_of(std::uint64_t idx) const noexcept {
  // Row blocks are about equal (the workloads' partition): the block an even split puts idx in
  // is almost always its owner, which saves the binary search over every node's offset (a few
  // % of the run at 1024 nodes). Anything else takes the search, which gives the same answer.
  const std::size_t blocks = row_offsets_.size() - 1;
  const std::uint64_t rows = row_offsets_.back();
  if (idx < rows) {
    const auto q = static_cast<std::size_t>(static_cast<unsigned __int128>(idx) * blocks / rows);
    if (row_offsets_[q] <= idx && idx < row_offsets_[q + 1]) return static_cast<std::uint32_t>(q);
  }
  const auto it = std::upper_bound(row_offsets_.begin(), row_offsets_.end(), idx);
  return static_cast<std::uint32_t>(it - row_offsets_.begin() - 1);
}

bool TorSwitch::on_fabric_packet(Packet& packet, bool from_node) {
  const Picos now = fabric_.events().now();
  if (!from_node) {
    (void)pipeline_->from_spine(packet.bytes, now, /*route=*/false);
    return true;  // the fabric forwards it unchanged (a malformed one too)
  }
  bool passed = false;
  if (pipeline_->from_rack(packet.bytes, now, &passed) != concat::DecodeError::kOk || passed) {
    return true;
  }
  arm_expiry();
  return false;
}

void TorSwitch::on_packet(std::uint32_t dest, concat::PrType, std::span<const std::byte> packet,
                          concat::FlushCause) {
  fabric_.send_from_tor(tor_, static_cast<int>(dest),
                        std::vector<std::byte>(packet.begin(), packet.end()));
}

void TorSwitch::arm_expiry() {
  const Picos next = pipeline_->next_expiry();
  if (next == UINT64_MAX || next >= armed_at_) return;
  armed_at_ = next;
  fabric_.events().at(std::max(next, fabric_.events().now()), [this, next] {
    if (armed_at_ != next) return;  // superseded by an earlier one
    armed_at_ = kNever;
    pipeline_->poll_expired(fabric_.events().now());
    arm_expiry();
  });
}

}  // namespace netsparse::emulate
