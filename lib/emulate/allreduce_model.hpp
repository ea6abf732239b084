// Allreduce on the emulator's leaf-spine fabric, message by message (Flare SC '21, Fig. 15):
// the host-based algorithms and Flare's in-switch aggregation, dense and sparse, with every
// message routed over the fabric's links as Fabric routes a packet (node uplink, ToR, the spine
// of Fabric::spine_of, ToR, node downlink), so the bytes per link, the busiest link and the
// links crossed are exact counts of the model; the time is derived from them (below), not
// simulated packet by packet (a 256 MiB allreduce over 64 nodes is ~10^8 packet hops).
//
// The vector holds n fp32 elements (`bytes` = 4 n). A sparse contribution is (uint32 index, fp32
// value) pairs, 8 B per nonzero; every host has density d of nonzeros at independent uniform
// positions, so a sum of k contributions has the expected density u_k = 1 - (1 - d)^k (its
// nonzeros counted as round(elements * u_k) per block or message: deterministic, no sampling).
// Densification rule (SparCML's switch to dense, Flare's root array): a message or block is sent
// as pairs while 8 nnz < 4 elements, else dense (4 B per element).
//
// Algorithms:
//   kRing             dense ring: reduce-scatter then all-gather, 2 (P - 1) steps, node i sends
//                     one of P chunks (elements [n c / P, n (c+1) / P)) to node i + 1 mod P.
//   kRecursiveDoubling  SparCML's recursive-doubling sparse allreduce (dense with
//                     sparse = false): log2 P rounds, node i swaps its whole current sum with
//                     i xor 2^r; in round r the sum holds 2^r contributions (u_{2^r}). P must
//                     be a power of two.
//   kHostAggregation  lib/collectives' flat allreduce: node o aggregates elements
//                     [n o / P, n (o+1) / P); every node sends that segment to o (one step,
//                     all at once), o sends the sum back to every node (a second step). Dense.
//   kInSwitch         Flare: every ToR sums its nodes' blocks and forwards one block up to the
//                     root spine (spine 0), which sums the ToRs' and sends the result down to
//                     every ToR, which copies it to its nodes (a single rack: the ToR is the
//                     root). Blocks are one MTU of fp32 (dense), or sized to hold about one
//                     MTU of pairs at density d (sparse: max(MTU / 4, MTU / 8 / d) elements, the
//                     whole vector at d = 0); an empty block is a header-only frame. Each level
//                     sends u_k of its block: nodes k = 1, a ToR its nodes', the root and
//                     everything below it P.
//
// Time model (no packet events): a host algorithm's step takes, over its messages, the largest
// of  links x link latency + switches x switch latency + (links - 1) x one frame's
// serialisation (store and forward of the first frame) + the serialisation of the busiest
// link's load on its path in that step (the links are shared by the step's messages and
// stream at the line rate); steps run back to back (no overlap, no host time). The in-switch
// allreduce is one pipeline: the latency of a node -> ToR -> root -> ToR -> node path, one
// block's serialisation per link on it (each switch waits for its children's block), and the
// busiest link's load at the line rate. Omitted: host reduction and copy time, software
// overheads, the switch handlers' throughput (Flare's PsPIN handlers; the sums run at line
// rate here), Flare's hash-table spills at high density, congestion control and packet loss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emulate/event_queue.hpp"
#include "emulate/fabric.hpp"

namespace netsparse::emulate {

enum class AllreduceAlgorithm : std::uint8_t {
  kRing,
  kRecursiveDoubling,
  kHostAggregation,
  kInSwitch
};
// "ring", "recursive_doubling", "host_aggregation", "in_switch".
const char* allreduce_algorithm_name(AllreduceAlgorithm a) noexcept;

struct AllreduceSpec {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  std::uint64_t bytes = 0;  // the dense vector: n = bytes / 4 fp32 elements (a multiple of 4)
  bool sparse = false;      // kRecursiveDoubling and kInSwitch only
  double density = 1.0;     // of every host's contribution, in [0, 1] (sparse only)
};

struct AllreduceResult {
  double time_us = 0;                    // the model's time (header comment)
  std::uint64_t steps = 0;               // host algorithms: synchronous steps; in-switch: 1
  std::uint64_t messages = 0;            // link-level transfers (a message per link it starts on)
  std::uint64_t payload_link_bytes = 0;  // payload summed over every link crossed
  std::uint64_t wire_link_bytes = 0;     // the same with frame headers: the network's traffic
  std::uint64_t busiest_link_wire_bytes = 0;
  std::size_t busiest_link = 0;  // its index (AllreduceModel::link_name)
  int max_links = 0;             // the most links one message (or block path) crosses
  std::vector<std::uint64_t> link_payload, link_wire;  // per link, AllreduceModel's indices
};

class AllreduceModel {
 public:
  // std::invalid_argument for a fabric that is not leaf-spine or fails Fabric's own checks.
  explicit AllreduceModel(const FabricConfig& config);

  // std::invalid_argument (naming the field) for a size not a positive multiple of 4, a density
  // outside [0, 1], sparse with an algorithm that has no sparse form, or recursive doubling on
  // a P that is not a power of two.
  AllreduceResult run(const AllreduceSpec& spec) const;

  int nodes() const noexcept { return fabric_.nodes(); }
  const Fabric& fabric() const noexcept { return fabric_; }

  // Link indices, Fabric's layout: node uplinks, node downlinks, ToR -> spine, spine -> ToR.
  std::size_t link_count() const noexcept;
  std::size_t uplink(int node) const noexcept { return static_cast<std::size_t>(node); }
  std::size_t downlink(int node) const noexcept { return static_cast<std::size_t>(nodes() + node); }
  std::size_t tor_up(int rack, int spine) const noexcept;
  std::size_t spine_down(int spine, int rack) const noexcept;
  std::string link_name(std::size_t link) const;

  // The sparse payload of `elements` elements holding the sum of k contributions: pairs or
  // dense, the smaller (the densification rule above).
  static std::uint64_t sparse_payload(std::uint64_t elements, double density, int k) noexcept;

 private:
  EventQueue events_;  // Fabric needs one; nothing is scheduled on it
  Fabric fabric_;
};

}  // namespace netsparse::emulate
