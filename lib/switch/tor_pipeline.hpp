// A ToR switch's NetSparse pipeline (MICRO '25 §6.1-6.2): deconcatenation, the Property Cache
// and a Concatenation Point. One code for the two places a ToR runs: the cluster emulator's
// switches (lib/emulate/tor_switch) and the rack switch process of a real mpirun job
// (lib/hosts/rack_switch).
//
// Packets coming up from a node of the rack (from_rack):
//   read     each PR is looked up in the cache; a hit becomes a response PR to the requester,
//            a miss is queued towards the owner (the packet's dest);
//   response each PR fills the cache and is queued towards the requester (the packet's dest);
// packets coming down from the spines (from_spine) fill the cache with their responses; the
// emulator's fabric then passes them on unchanged, a real switch re-routes each PR (reads to
// the owner of the idx, responses to the PR's src_node, which a response echoes from its read).
// Where a PR to node n queues is the caller's choice (`queue_of`): per node in the emulator, per
// destination rack (and per host of its own rack) in the real switch. Other PR types pass.
//
// Correctness of the cache: an entry is only returned to a read addressed to the owner whose
// response filled it (sw::PropertyCache), and new_epoch() drops every entry: the control plane
// calls it before each kernel, as the paper invalidates per kernel.
//
// Single-threaded. The caller owns the clock (any unit, non-decreasing) and the sink.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "switch/property_cache.hpp"

namespace netsparse::sw {

struct TorConfig {
  std::uint32_t prop_bytes = 0;  // bytes of one property (the kernel's)
  std::uint32_t queues = 0;      // concatenation destinations 0..queues-1
  std::uint32_t packet_bytes = 1500;
  std::uint64_t delay = 0;  // concatenation delay in the caller's clock unit
  bool cache = true;        // the Property Cache on
  PropertyCacheConfig cache_config;
};

struct TorStats {
  std::uint64_t read_prs_in = 0;      // read PRs that came up from the rack
  std::uint64_t response_prs_in = 0;  // response PRs that came up from the rack
  std::uint64_t egress_fills = 0;     // response PRs from other racks that filled the cache
  std::uint64_t hits = 0;             // read PRs answered by the cache
  std::uint64_t malformed = 0;        // packets that did not decode
  // The part of read_prs_in / hits addressed to an owner outside the rack (in_rack is false):
  // what the real rack switch sees, whose rack-local reads never reach it.
  std::uint64_t inter_rack_reads = 0;
  std::uint64_t inter_rack_hits = 0;
};

class TorPipeline {
 public:
  // owner_of(idx): the node that owns a property (from the control plane's partition);
  // queue_of(node): the concatenation queue of PRs bound for `node` (< config.queues).
  using OwnerOf = std::function<std::uint32_t(std::uint64_t idx)>;
  using QueueOf = std::function<std::uint32_t(std::uint32_t node)>;
  // in_rack(node): the node sits in this switch's rack (only for the inter_rack statistics).
  using InRack = std::function<bool(std::uint32_t node)>;
  TorPipeline(const TorConfig& config, OwnerOf owner_of, QueueOf queue_of, InRack in_rack,
              concat::PacketSink& sink);

  // A packet from a node of the rack. kOk: consumed (its PRs queued); kOk with *passed = true:
  // a type the pipeline does not touch (pass it unchanged); an error: malformed, nothing done.
  concat::DecodeError from_rack(std::span<const std::byte> packet, std::uint64_t now, bool* passed);
  // A packet from the spines: responses fill the cache; with `route` every PR is queued (a
  // real switch), without it the caller forwards the packet unchanged (the emulator's fabric).
  concat::DecodeError from_spine(std::span<const std::byte> packet, std::uint64_t now, bool route);

  // The control plane's per-kernel call: drops every cached property.
  void new_epoch() noexcept { cache_->invalidate(); }
  void poll_expired(std::uint64_t now) { concat_->poll_expired(now); }
  std::uint64_t next_expiry() const noexcept { return concat_->next_expiry_ns(); }
  void flush_all() { concat_->flush_all(); }

  const TorStats& stats() const noexcept { return stats_; }
  const concat::ConcatStats& concat_stats() const noexcept { return concat_->stats(); }
  const PropertyCache& cache() const noexcept { return *cache_; }
  std::size_t buffered_prs() const noexcept { return concat_->buffered_prs(); }

 private:
  // Decodes a packet from either side; a malformed one is counted (stats_.malformed).
  concat::DecodeError decode(std::span<const std::byte> packet, concat::PacketView* v);
  TorConfig config_;
  OwnerOf owner_of_;
  QueueOf queue_of_;
  InRack in_rack_;
  std::unique_ptr<concat::ConcatPoint> concat_;
  std::unique_ptr<PropertyCache> cache_;
  std::vector<std::byte> hit_buffer_;
  TorStats stats_;
};

}  // namespace netsparse::sw
