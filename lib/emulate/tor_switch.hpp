// A ToR switch's NetSparse pipeline (MICRO '25 §6.1-6.2) on the emulated fabric: the switch
// code the real rack switch runs too (sw::TorPipeline: the same concat::ConcatPoint the NIC
// engine uses, and the Property Cache), with one concatenation queue per node.
//
// Packets coming up from a node of the rack (ingress):
//   read     each PR is looked up in the cache; a hit becomes a response PR to the requester
//            (into the (response, requester) queue), a miss goes into the (read, owner) queue;
//   response each PR fills the cache and goes into the (response, requester) queue;
// so PRs from different nodes of the rack to the same destination share packets. Packets coming
// down from a spine (egress) only fill the cache with their responses and pass unchanged: the
// rack's own nodes then hit on what their neighbours fetched. Other types pass unchanged.
// Queues flush when full or expired (delay_cycles at the switch clock, 125 at 2.2 GHz by
// default); expiry is driven by events in virtual time (times in picoseconds).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "concat/concat_point.hpp"
#include "emulate/fabric.hpp"
#include "switch/property_cache.hpp"
#include "switch/tor_pipeline.hpp"

namespace netsparse::emulate {

struct SwitchModel {
  bool enabled = true;  // false: the ToRs only forward (no deconcatenation, no cache)
  bool cache = true;    // the Property Cache (when enabled)
  std::uint32_t delay_cycles = 125;
  double clock_ghz = 2.2;
  std::uint32_t packet_bytes = 1500;
  sw::PropertyCacheConfig cache_config;
};

using TorStats = sw::TorStats;

class TorSwitch final : public concat::PacketSink {
 public:
  // row_offsets: the kernel's 1D partition (nodes + 1 entries), from the control plane: the
  // owner of an idx, so that a cached property is only ever returned for reads to its owner.
  TorSwitch(int tor, Fabric& fabric, const SwitchModel& model, std::uint32_t prop_bytes,
            std::span<const std::uint64_t> row_offsets);

  // The fabric's ToR hook for this switch.
  bool on_fabric_packet(Packet& packet, bool from_node);
  void on_packet(std::uint32_t dest, concat::PrType type, std::span<const std::byte> packet,
                 concat::FlushCause cause) override;

  const TorStats& stats() const noexcept { return pipeline_->stats(); }
  const concat::ConcatStats& concat_stats() const noexcept { return pipeline_->concat_stats(); }
  const sw::PropertyCache& cache() const noexcept { return pipeline_->cache(); }
  std::size_t buffered_prs() const noexcept { return pipeline_->buffered_prs(); }

 private:
  std::uint32_t owner_of(std::uint64_t idx) const noexcept;
  void arm_expiry();  // schedules a flush at the earliest expiry (if any and not yet armed)

  int tor_;
  Fabric& fabric_;
  SwitchModel model_;
  std::vector<std::uint64_t> row_offsets_;
  std::unique_ptr<sw::TorPipeline> pipeline_;
  Picos armed_at_ = kNever;
};

}  // namespace netsparse::emulate
