// A leaf-spine fabric in virtual time (the paper's evaluation network, MICRO '25 Table 5), or a
// HyperX or Dragonfly of the same links (below).
//
//   N nodes in R racks (rack r = nodes r*per_rack .. (r+1)*per_rack - 1, per_rack = ceil(N/R));
//   each node has one link up to its rack's ToR switch and one down from it; each ToR has one
//   link up to every spine switch and one down from it (S spines; by default S = per_rack, so
//   the fabric is non-blocking). Every link is one direction of a full-duplex cable.
//
// Timing, per packet (store and forward):
//   a link: the packet waits in its FIFO until the link is free, takes wire_bytes * 8 / rate to
//   serialise, and arrives link_ps later (propagation); a switch: switch_ps from its last bit in
//   to its egress FIFO. Defaults are Table 5's: 400 Gbps, 1500 B MTU, 300 ns per switch, 450 ns
//   per link one way, so the round trip of an empty packet is 2 x (2 x 450 + 300) = 2.4 us in a
//   rack and 2 x (4 x 450 + 3 x 300) = 5.4 us between racks, the paper's RTTs.
// Wire bytes: the payload plus the paper's 50 B of upper-layer headers per MTU-sized frame
// (a payload above the MTU is sent as several frames, back to back, serialised as one unit).
//
// Routing is deterministic: the spine of a packet between two racks is a hash of the unordered
// pair {src, dst} and a seed, so a request and its answer take the same path (and in any case
// the same two ToR switches, which are fixed by the racks). A hook sees every packet at each
// ToR it passes (after the switch latency) and may let it pass or take it: the in-switch
// mechanisms (concatenation, Property Cache) are built on that hook, and emit their own packets
// with send_from_tor().
//
// Other topologies (FabricConfig::topology; the racks' ToRs are then the routers, each with its
// rack's nodes attached, and the ToR hook runs at the first and the last router as before):
//   HyperX 2-D: the R routers on an X x Y grid (router = x + X y), a link each way between every
//     two routers of a row and of a column; minimal dimension-order routing (X first, then Y):
//     at most 2 router-to-router links, 3 routers.
//   Dragonfly: G groups of R / G routers, a link each way between every two routers of a group
//     (local) and exactly one between every two groups (global; group g's link to group h is on
//     its router (h < g ? h : h - 1) mod (R / G)); minimal routing: local to the router holding
//     the global link, global, local to the destination: at most 3 router-to-router links.
// Every link, node or router, has the same rate and latency; every router the same latency.
// The fabric counts per delivered packet the links and the router-to-router links it crossed.
//
// Deterministic for a given configuration and sequence of calls: events are ordered by (time,
// sequence); no wall clock, no hash of pointers.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "emulate/event_queue.hpp"

namespace netsparse::emulate {

enum class Topology : std::uint8_t { kLeafSpine, kHyperX, kDragonfly };
// "leafspine", "hyperx", "dragonfly"; topology_from_name: false for any other name.
const char* topology_name(Topology t) noexcept;
bool topology_from_name(std::string_view name, Topology& out) noexcept;

struct FabricConfig {
  Topology topology = Topology::kLeafSpine;
  int hyperx_x = 0;          // HyperX: routers along X (must divide racks; 0 = the most square)
  int dragonfly_groups = 0;  // Dragonfly: groups (must divide racks; 0 = routers per group is
                             // the largest divisor a of racks with a * a <= racks)
  int nodes = 128;
  int racks = 8;
  int spines = 0;                         // 0 = nodes per rack (a non-blocking leaf-spine)
  std::uint32_t link_gbps = 400;          // every link, each direction
  std::uint32_t mtu_bytes = 1500;         // RDMA payload per frame
  std::uint32_t frame_header_bytes = 50;  // the paper's upper layers (RDMA/UDP/IP/Ethernet)
  Picos switch_ps = 300 * kPicosPerNano;
  Picos link_ps = 450 * kPicosPerNano;
  std::uint64_t route_seed = 0;  // salt of the spine hash
};

// A packet on the fabric. `bytes` is opaque to the fabric (the NetSparse packet).
struct Packet {
  int src = -1;      // the node that sent it; -1 when a switch made it (src_tor is then set)
  int src_tor = -1;  // the ToR that made it, or -1
  int dst = -1;
  std::uint32_t wire_bytes = 0;
  std::vector<std::byte> bytes;
  Picos sent = 0;        // when it entered the fabric
  std::uint64_t id = 0;  // sequence number of the fabric (unique, increasing)
};

struct LinkStats {
  std::uint64_t packets = 0;
  std::uint64_t wire_bytes = 0;
  Picos busy_ps = 0;        // time spent serialising
  Picos max_wait_ps = 0;    // longest a packet waited for the link (queueing)
  Picos total_wait_ps = 0;  // sum over packets of the time waited for the link
};

class Fabric {
 public:
  // What a ToR does with a packet that reached it (after the switch latency): true = forward
  // it on its way, false = the hook took it (and may emit others with send_from_tor).
  // `from_node` is true when the packet came up from a node of this rack.
  using TorHook = std::function<bool(int tor, Packet& packet, bool from_node)>;
  // A packet reached its destination node at events().now().
  using Receiver = std::function<void(int node, Packet& packet)>;

  Fabric(EventQueue& events, const FabricConfig& config);  // std::invalid_argument on bad sizes

  const FabricConfig& config() const noexcept { return config_; }
  EventQueue& events() noexcept { return events_; }
  int nodes() const noexcept { return config_.nodes; }
  int racks() const noexcept { return config_.racks; }
  int spines() const noexcept { return spines_; }
  int nodes_per_rack() const noexcept { return per_rack_; }
  int rack_of(int node) const noexcept { return node / per_rack_; }
  // The spine a packet between src and dst (different racks) crosses; symmetric.
  int spine_of(int src, int dst) const noexcept;
  Topology topology() const noexcept { return config_.topology; }
  int hyperx_x() const noexcept { return hx_; }                 // HyperX: routers along X
  int dragonfly_group_size() const noexcept { return group_; }  // Dragonfly: routers per group
  // Router-to-router links a packet between the routers of two racks crosses (minimal route).
  int router_links_between(int src_rack, int dst_rack) const noexcept;
  // The topology's bound on router_links_between (2 leaf-spine, 2 HyperX, 3 Dragonfly).
  int router_diameter() const noexcept;

  void set_receiver(Receiver r) { receiver_ = std::move(r); }
  void set_tor_hook(TorHook h) { tor_hook_ = std::move(h); }

  // Wire bytes of a payload: payload + frame_header_bytes per started MTU.
  std::uint64_t wire_bytes(std::size_t payload) const noexcept;
  // Serialisation time of wire_bytes on one link (rounded up to a picosecond).
  Picos serialisation_ps(std::uint64_t wire_bytes) const noexcept;
  // Links and switches between two nodes (2 and 1 in a rack; leaf-spine 4 and 3 across racks;
  // HyperX and Dragonfly 2 + the router-to-router links).
  int links_between(int src, int dst) const noexcept;
  int switches_between(int src, int dst) const noexcept { return links_between(src, dst) - 1; }
  // Analytic one-way latency of a lone payload on an idle fabric.
  Picos one_way_ps(int src, int dst, std::size_t payload) const noexcept;
  // Analytic round trip of an empty packet (propagation and switches only): the paper's RTT.
  Picos base_rtt_ps(int src, int dst) const noexcept;

  // Node `src` puts a payload on its uplink now (queued behind what it already sends).
  // Returns the packet id. std::out_of_range for a bad node.
  std::uint64_t send(int src, int dst, std::span<const std::byte> payload);
  std::uint64_t send(int src, int dst, std::vector<std::byte>&& payload);
  // ToR `tor` emits a packet of its own now (switch latency already paid by the caller's
  // packet), toward node dst.
  std::uint64_t send_from_tor(int tor, int dst, std::vector<std::byte>&& payload);

  // ---- statistics ----
  const LinkStats& uplink(int node) const { return links_[up_index(node)].stats; }
  const LinkStats& downlink(int node) const { return links_[down_index(node)].stats; }
  std::uint64_t packets_delivered() const noexcept { return delivered_; }
  std::uint64_t packets_in_flight() const noexcept { return in_flight_; }
  LinkStats total() const;  // over every link
  // Over the first router-to-router link of every packet (leaf-spine: the ToRs' links up to
  // the spines): everything that left a rack, once.
  LinkStats inter_rack() const { return leave_rack_; }
  // Over every router-to-router link (a packet counted on each it crosses), and the busiest.
  LinkStats router_links() const;
  LinkStats busiest_router_link() const;
  std::size_t router_link_count() const noexcept { return links_.size() - first_router_link(); }
  // Delivered packets by the number of links they crossed (index 0..kMaxHops) and by the number
  // of router-to-router links among them.
  static constexpr int kMaxHops = 7;
  const std::uint64_t* delivered_by_links() const noexcept { return by_links_; }
  const std::uint64_t* delivered_by_router_links() const noexcept { return by_router_links_; }

 private:
  // Where a packet goes after the hop it is on.
  // kToRouter: a HyperX or Dragonfly router the packet passes or ends at (Route::at).
  enum class Hop : std::uint8_t { kToSrcTor, kToSpine, kToDstTor, kToNode, kToRouter };
  // What routing needs of a packet, carried with it from hop to hop so that the hops do not
  // touch the pooled Packet (a cache miss each with a million packets in flight).
  struct Route {
    std::uint32_t packet;
    std::uint32_t wire_bytes;
    std::int32_t route_src;  // the node whose pair with dst picks the spine
    std::int32_t dst;
    std::int32_t src_tor;  // the ToR it came up through
    std::int32_t at = -1;  // HyperX / Dragonfly: the router the current link leads to
    std::uint8_t links = 0, router_links = 0;  // crossed so far
  };
  struct InFlight {
    Picos arrival;
    Route route;
    Hop next;
  };
  struct Link {
    Picos free_at = 0;
    LinkStats stats;
    // Packets on the wire, in arrival order: a link is FIFO with a fixed latency, so arrivals
    // leave in the order they entered, and only the head needs an event in the agenda (keeps
    // the agenda as small as the number of busy links, not of packets in flight).
    std::deque<InFlight> wire;
  };

  std::size_t up_index(int node) const noexcept { return static_cast<std::size_t>(node); }
  std::size_t down_index(int node) const noexcept {
    return static_cast<std::size_t>(config_.nodes + node);
  }
  std::size_t tor_up_index(int rack, int spine) const noexcept {
    return static_cast<std::size_t>(2 * config_.nodes + rack * spines_ + spine);
  }
  std::size_t spine_down_index(int spine, int rack) const noexcept {
    return static_cast<std::size_t>(2 * config_.nodes + config_.racks * spines_ +
                                    spine * config_.racks + rack);
  }

  std::size_t first_router_link() const noexcept {
    return 2 * static_cast<std::size_t>(config_.nodes);
  }
  // HyperX / Dragonfly: the next router on the minimal route from router `at` to `dst`.
  int next_router(int at, int dst) const noexcept;
  int dragonfly_gateway(int group, int to_group) const noexcept;  // holds group's global link
  void build_router_links();
  std::uint32_t new_packet(int src, int src_tor, int dst, std::vector<std::byte>&& payload);
  Route route_of(std::uint32_t p) const noexcept;
  // Puts the packet on link `link` now; it arrives at the next hop (`next`) after the link.
  void transmit(std::size_t link, Route r, Hop next);
  void arrive(const Route& r, Hop hop);         // the packet's last bit reached `hop`
  void land(std::size_t link);                  // the head packet of `link` arrives now
  void at_tor(const Route& r, bool from_node);  // after the ToR's switch latency
  void forward_from_tor(const Route& r);
  void release(std::uint32_t p);
  int packet_src_for_route(const Packet& pk) const noexcept;

  EventQueue& events_;
  FabricConfig config_;
  int per_rack_ = 0;
  int spines_ = 0;
  int hx_ = 0, group_ = 0;
  std::vector<Link> links_;
  std::vector<std::int32_t> router_link_;  // HyperX / Dragonfly: [a * racks + b] -> link, or -1
  LinkStats leave_rack_;
  std::uint64_t by_links_[kMaxHops + 1] = {}, by_router_links_[kMaxHops + 1] = {};
  std::deque<Packet> packets_;  // pool; a deque keeps references stable while it grows
  std::vector<std::uint32_t> free_packets_;
  std::uint64_t next_id_ = 0, delivered_ = 0, in_flight_ = 0;
  Receiver receiver_;
  TorHook tor_hook_;
};

}  // namespace netsparse::emulate
