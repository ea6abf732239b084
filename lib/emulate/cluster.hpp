// A cluster of NetSparse nodes emulated in one process, in virtual time.
//
// Every node is the library's own RIG engine (rig::Engine: client and server units, Idx Filter,
// Pending PR Table, NIC concatenation point, protocol encode/decode, outbox), opened in INLINE
// progress mode over an EmulatedTransport whose packets travel on the virtual-time Fabric
// (leaf-spine, HyperX or Dragonfly); every ToR runs a TorSwitch (concatenation point + Property
// Cache). One thread steps everything from one event queue, with the engine's clock replaced by
// the virtual clock (rig::ScopedClockOverride), so results depend on the configuration and the
// workload only.
//
// Hardware speed of the RIG units (the paper's SNIC, §8 Table 5): a node's engine step takes
// virtual time max(idxs walked / client units, PRs served / server units) cycles at clock_ghz,
// at least one cycle; packets the step produced enter the fabric when it ends, and the node
// steps again then if it did work, else when a packet arrives, the host posts, or a
// concatenation queue expires. Each unit walks at most idx_chunk idxs per step, so a step
// stays short and the units interleave with arrivals.
//
// The host of each node posts its idx list as RIG work requests of `batch` idxs (INDEXED, the
// whole column range as the window, NS_SEND_REMOTE_ONLY, the first with NS_SEND_NEW_EPOCH),
// keeping up to qp_depth in flight, for free (the host's own time is not modelled).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "concat/concat_point.hpp"
#include "emulate/event_queue.hpp"
#include "emulate/fabric.hpp"
#include "emulate/tor_switch.hpp"
#include "switch/property_cache.hpp"

namespace netsparse::emulate {

struct NodeModel {
  int client_units = 32;
  int server_units = 32;
  double clock_ghz = 2.2;
  std::uint32_t pending_entries = 256;  // Pending PR Table entries per client unit
  std::uint32_t idx_chunk = 64;         // idxs a client unit walks per engine step
  std::uint32_t delay_cycles = 500;     // NIC concatenation delay
  std::uint32_t packet_bytes = 1500;
  std::uint32_t flags = 0;      // NS_CTX_NO_FILTER / NO_COALESCE / NO_CONCAT (ablations)
  std::uint32_t batch = 8192;   // idxs per RIG work request
  std::uint32_t qp_depth = 64;  // work requests in flight per node
  // Host <-> NIC over PCIe (Table 5: 200 ns one way): the host sees a completion one crossing
  // after the NIC wrote it, and the work requests it posts then reach the NIC one crossing
  // later; its own posting time is not modelled.
  std::uint32_t pcie_ns = 200;
  // A node's engine steps start on a grid of this many cycles (0 = whenever work arrives):
  // what arrives within one period is handled by one step, as a pipelined NIC takes a burst.
  // It bounds the steps (the emulator's main cost) by time instead of by packets, and adds at
  // most one period (a few ns) to a PR's round trip of microseconds (docs/emulation.md).
  std::uint32_t step_grid_cycles = 0;
};

struct ClusterConfig {
  FabricConfig fabric;
  NodeModel node;
  SwitchModel tor;
  // The hosts of a rack gather one after another: wave w is the w-th node of every rack, and it
  // posts its first work request once every node of wave w - 1 has completed. This is the
  // schedule of the software rack switch of a real job (lib/hosts/rack_switch.hpp), which
  // serialises a rack's hosts so that what one host fetched is in the switch's cache when the
  // next asks; the paper's NICs (false) all gather at once and a read that overlaps the
  // response it could hit misses. Nodes serve their peers in every wave.
  bool rack_waves = false;
};

// What the nodes gather: node p owns global rows [row_offsets[p], row_offsets[p+1]) of a
// property array of prop_bytes per row, and asks for the rows in idxs[p] (any order, repeats
// and its own rows allowed: the engine filters, coalesces and skips them).
struct Workload {
  std::vector<std::uint64_t> row_offsets;
  std::uint32_t prop_bytes = 64;
  std::vector<std::vector<std::uint64_t>> idxs;
  // Check every gathered property against the owner's bytes (memory: nodes x rows x prop_bytes
  // for the outputs; off for large runs, which then share one output array).
  bool verify = true;
};

struct NodeResult {
  std::uint64_t requested = 0, filtered = 0, coalesced = 0, local = 0, sent = 0, responses = 0;
  std::uint64_t served = 0;                            // read PRs this node answered as an owner
  concat::ConcatStats nic;                             // the NIC concatenation point
  std::uint64_t tx_wire_bytes = 0, rx_wire_bytes = 0;  // on its uplink / downlink
  std::uint64_t tx_packets = 0, rx_packets = 0;
  Picos tx_busy_ps = 0, rx_busy_ps = 0;  // serialising on its uplink / downlink
  Picos tx_wait_ps = 0, rx_wait_ps = 0;  // packets' total queueing before its uplink / downlink
  Picos done_ps = 0;                     // when its last work request completed
  // When its last engine step that sent packets (requests or answers) ended: after both this
  // and done_ps the node has nothing left to do for the gather (Fig. 19's active nodes).
  Picos last_send_ps = 0;
  Picos finish_ps() const noexcept { return std::max(done_ps, last_send_ps); }
  std::uint64_t steps = 0;
  // Where the node's virtual time went (what bounds the tail node):
  Picos busy_ps = 0;                // engine steps (the units' hardware time)
  std::uint64_t client_cycles = 0;  // sum over steps of idxs walked / client units
  std::uint64_t server_cycles = 0;  // sum over steps of PRs served / server units
  double outstanding_ps = 0;        // integral over time of PRs in flight (sent - answered)
  std::uint64_t max_outstanding = 0;
  std::uint64_t pending_stalls = 0;  // times a client unit found its Pending PR Table full
  std::uint64_t wrs = 0;             // work requests the host posted
  // Mean PR round trip (Little's law): outstanding_ps / responses.
  double mean_pr_latency_ps() const {
    return responses ? outstanding_ps / static_cast<double>(responses) : 0;
  }
  std::uint64_t failed_wrs = 0;
};

struct RunResult {
  Picos makespan_ps = 0;  // the last node's completion
  std::vector<NodeResult> nodes;
  std::vector<TorStats> tors;
  std::vector<sw::PropertyCacheStats> caches;
  std::vector<concat::ConcatStats> tor_concat;
  LinkStats links;         // over every link
  LinkStats inter_rack;    // over each packet's first router-to-router link (what left a rack)
  LinkStats router_links;  // over every router-to-router link, per link crossed
  LinkStats busiest_router_link;  // the router-to-router link busiest serialising
  std::uint64_t router_link_count = 0;
  int router_diameter = 0;  // the topology's bound on router-to-router links per packet
  // Delivered packets by links crossed, and by router-to-router links crossed (index = count).
  std::vector<std::uint64_t> delivered_by_links, delivered_by_router_links;
  std::uint64_t events = 0;
  std::uint64_t wrong_properties = 0;  // verify: gathered bytes that differ from the owner's
  std::uint64_t checked_properties = 0;
  // verify: properties of a work request not in place when it completed successfully
  std::uint64_t wrong_at_completion = 0;
};

class Cluster {
 public:
  explicit Cluster(const ClusterConfig& config);
  // Runs one kernel's gather: opens an engine per node, registers the properties, runs the
  // hosts' work requests to completion in virtual time, collects statistics, closes everything.
  // std::invalid_argument when the workload does not match the fabric.
  RunResult run(const Workload& workload);
  const ClusterConfig& config() const noexcept { return config_; }

 private:
  ClusterConfig config_;
};

// The bytes of global row `row` (every byte depends on the row), as owners register them.
void fill_property(std::uint64_t row, std::span<std::byte> out) noexcept;

}  // namespace netsparse::emulate
