#include "emulate/fabric.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "support/enum_names.hpp"
#include "support/hash.hpp"

namespace netsparse::emulate {

namespace {
using support::splitmix64;
// The largest divisor d of n with d * d <= n (the shorter side of the most square grid).
int square_divisor(int n) noexcept {
  int best = 1;
  for (int d = 1; d * d <= n; ++d)
    if (n % d == 0) best = d;
  return best;
}
}  // namespace

constexpr auto kTopologyNames = std::to_array<support::EnumName<Topology>>({
    {Topology::kLeafSpine, "leafspine"},
    {Topology::kHyperX, "hyperx"},
    {Topology::kDragonfly, "dragonfly"},
});

const char* topology_name(Topology t) noexcept {
  return support::name_of<kTopologyNames>(t, "leafspine");
}

bool topology_from_name(std::string_view name, Topology& out) noexcept {
  const auto t = support::value_named<kTopologyNames>(name);
  if (t) out = *t;
  return t.has_value();
}

Fabric::Fabric(EventQueue& events, const FabricConfig& config) : events_(events), config_(config) {
  if (config.nodes < 1 || config.racks < 1 || config.racks > config.nodes)
    throw std::invalid_argument("Fabric: need 1 <= racks <= nodes (got " +
                                std::to_string(config.racks) + " racks, " +
                                std::to_string(config.nodes) + " nodes)");
  if (config.link_gbps == 0 || config.mtu_bytes == 0 || config.spines < 0)
    throw std::invalid_argument("Fabric: link rate and MTU must be > 0, spines >= 0");
  per_rack_ = (config.nodes + config.racks - 1) / config.racks;
  if ((config.nodes + per_rack_ - 1) / per_rack_ != config.racks)
    throw std::invalid_argument("Fabric: " + std::to_string(config.nodes) + " nodes do not fill " +
                                std::to_string(config.racks) + " racks of " +
                                std::to_string(per_rack_));
  spines_ = config.spines != 0 ? config.spines : per_rack_;
  if (config.topology == Topology::kLeafSpine) {
    links_.resize(2 * static_cast<std::size_t>(config.nodes) +
                  2 * static_cast<std::size_t>(config.racks) * spines_);
  } else {
    build_router_links();
  }
}

void Fabric::build_router_links() {
  const int R = config_.racks;
  if (config_.topology == Topology::kHyperX) {
    hx_ = config_.hyperx_x != 0 ? config_.hyperx_x : R / square_divisor(R);
    if (hx_ < 1 || R % hx_ != 0)
      throw std::invalid_argument("Fabric: HyperX needs routers along X (" +
                                  std::to_string(config_.hyperx_x) + ") to divide the " +
                                  std::to_string(R) + " routers (racks)");
  } else {
    group_ = config_.dragonfly_groups != 0 ? R / config_.dragonfly_groups : square_divisor(R);
    if (config_.dragonfly_groups < 0 || group_ < 1 || R % group_ != 0 ||
        (config_.dragonfly_groups != 0 && R % config_.dragonfly_groups != 0))
      throw std::invalid_argument("Fabric: Dragonfly needs its groups (" +
                                  std::to_string(config_.dragonfly_groups) + ") to divide the " +
                                  std::to_string(R) + " routers (racks)");
  }
  links_.resize(first_router_link());
  router_link_.assign(static_cast<std::size_t>(R) * static_cast<std::size_t>(R), -1);
  auto add = [&](int a, int b) {
    std::int32_t& l = router_link_[static_cast<std::size_t>(a) * R + b];
    if (l >= 0) return;
    l = static_cast<std::int32_t>(links_.size());
    links_.emplace_back();
  };
  for (int a = 0; a < R; ++a) {
    for (int b = 0; b < R; ++b) {
      if (a == b) continue;
      if (config_.topology == Topology::kHyperX) {
        if (a % hx_ == b % hx_ || a / hx_ == b / hx_) add(a, b);  // same column or row
      } else if (a / group_ == b / group_) {
        add(a, b);  // local
      } else if (dragonfly_gateway(a / group_, b / group_) == a &&
                 dragonfly_gateway(b / group_, a / group_) == b) {
        add(a, b);  // the global link between their groups
      }
    }
  }
}

int Fabric::dragonfly_gateway(int group, int to_group) const noexcept {
  const int port = to_group < group ? to_group : to_group - 1;
  return group * group_ + port % group_;
}

int Fabric::next_router(int at, int dst) const noexcept {
  if (config_.topology == Topology::kHyperX) {
    if (at % hx_ != dst % hx_) return at - at % hx_ + dst % hx_;  // along X first
    return dst;                                                   // then along Y
  }
  const int ga = at / group_, gd = dst / group_;
  if (ga == gd) return dst;
  const int gateway = dragonfly_gateway(ga, gd);
  return at != gateway ? gateway : dragonfly_gateway(gd, ga);
}

int Fabric::router_links_between(int src_rack, int dst_rack) const noexcept {
  if (src_rack == dst_rack) return 0;
  if (config_.topology == Topology::kLeafSpine) return 2;
  int n = 0;
  for (int at = src_rack; at != dst_rack; at = next_router(at, dst_rack)) ++n;
  return n;
}

int Fabric::router_diameter() const noexcept {
  return config_.topology == Topology::kDragonfly ? 3 : 2;
}

int Fabric::spine_of(int src, int dst) const noexcept {
  const auto lo = static_cast<std::uint64_t>(std::min(src, dst));
  const auto hi = static_cast<std::uint64_t>(std::max(src, dst));
  return static_cast<int>(splitmix64(splitmix64(config_.route_seed ^ lo) ^ (hi << 1)) %
                          static_cast<std::uint64_t>(spines_));
}

std::uint64_t Fabric::wire_bytes(std::size_t payload) const noexcept {
  const std::uint64_t frames =
      std::max<std::uint64_t>(1, (payload + config_.mtu_bytes - 1) / config_.mtu_bytes);
  return payload + frames * config_.frame_header_bytes;
}

Picos Fabric::serialisation_ps(std::uint64_t wire) const noexcept {
  // bits * 1000 / Gbps = picoseconds
  return (wire * 8 * 1000 + config_.link_gbps - 1) / config_.link_gbps;
}

int Fabric::links_between(int src, int dst) const noexcept {
  if (src == dst) return 0;
  return 2 + router_links_between(rack_of(src), rack_of(dst));
}

Picos Fabric::one_way_ps(int src, int dst, std::size_t payload) const noexcept {
  const int links = links_between(src, dst);
  if (links == 0) return 0;
  return static_cast<Picos>(links) * (config_.link_ps + serialisation_ps(wire_bytes(payload))) +
         static_cast<Picos>(links - 1) * config_.switch_ps;
}

Picos Fabric::base_rtt_ps(int src, int dst) const noexcept {
  const int links = links_between(src, dst);
  if (links == 0) return 0;
  return 2 * (static_cast<Picos>(links) * config_.link_ps +
              static_cast<Picos>(links - 1) * config_.switch_ps);
}

std::uint32_t Fabric::new_packet(int src, int src_tor, int dst, std::vector<std::byte>&& payload) {
  if (dst < 0 || dst >= config_.nodes)
    throw std::out_of_range("Fabric: destination " + std::to_string(dst) + " is not a node");
  std::uint32_t p;
  if (!free_packets_.empty()) {
    p = free_packets_.back();
    free_packets_.pop_back();
  } else {
    p = static_cast<std::uint32_t>(packets_.size());
    packets_.emplace_back();
  }
  Packet& pk = packets_[p];
  pk.src = src;
  pk.src_tor = src_tor;
  pk.dst = dst;
  pk.wire_bytes = static_cast<std::uint32_t>(wire_bytes(payload.size()));
  pk.bytes = std::move(payload);
  pk.sent = events_.now();
  pk.id = next_id_++;
  ++in_flight_;
  return p;
}

void Fabric::release(std::uint32_t p) {
  // Small buffers stay with the pooled packet for the next send; large ones are freed.
  if (packets_[p].bytes.capacity() > 2048) {
    packets_[p].bytes = {};
  } else {
    packets_[p].bytes.clear();
  }
  free_packets_.push_back(p);
  --in_flight_;
}

std::uint64_t Fabric::send(int src, int dst, std::span<const std::byte> payload) {
  // Into a pooled packet's buffer: its capacity is kept between uses (no allocation).
  std::vector<std::byte> bytes;
  if (!free_packets_.empty()) bytes = std::move(packets_[free_packets_.back()].bytes);
  bytes.assign(payload.begin(), payload.end());
  return send(src, dst, std::move(bytes));
}

std::uint64_t Fabric::send(int src, int dst, std::vector<std::byte>&& payload) {
  if (src < 0 || src >= config_.nodes)
    throw std::out_of_range("Fabric: source " + std::to_string(src) + " is not a node");
  const std::uint32_t p = new_packet(src, -1, dst, std::move(payload));
  const std::uint64_t id = packets_[p].id;
  const Route r = route_of(p);
  if (src == dst) {  // the NIC's loopback: no link, delivered as an event now
    events_.at(events_.now(), [this, r] { arrive(r, Hop::kToNode); });
  } else {
    transmit(up_index(src), r, Hop::kToSrcTor);
  }
  return id;
}

std::uint64_t Fabric::send_from_tor(int tor, int dst, std::vector<std::byte>&& payload) {
  if (tor < 0 || tor >= config_.racks)
    throw std::out_of_range("Fabric: ToR " + std::to_string(tor) + " does not exist");
  const std::uint32_t p = new_packet(-1, tor, dst, std::move(payload));
  const std::uint64_t id = packets_[p].id;
  forward_from_tor(route_of(p));
  return id;
}

Fabric::Route Fabric::route_of(std::uint32_t p) const noexcept {
  const Packet& pk = packets_[p];
  // A switch-made packet has no source node; route it as if it came from the first node of
  // its ToR's rack (any spine works: the ToRs it passes are fixed by the racks).
  const int tor = pk.src >= 0 ? rack_of(pk.src) : pk.src_tor;
  return Route{p, pk.wire_bytes, pk.src >= 0 ? pk.src : pk.src_tor * per_rack_, pk.dst, tor};
}

void Fabric::transmit(std::size_t link_index, Route r, Hop next) {
  Link& link = links_[link_index];
  const bool router_link = link_index >= first_router_link();
  const Picos now = events_.now();
  const Picos start = std::max(now, link.free_at);
  const Picos ser = serialisation_ps(r.wire_bytes);
  link.free_at = start + ser;
  link.stats.packets += 1;
  link.stats.wire_bytes += r.wire_bytes;
  link.stats.busy_ps += ser;
  link.stats.max_wait_ps = std::max(link.stats.max_wait_ps, start - now);
  link.stats.total_wait_ps += start - now;
  if (router_link && r.router_links == 0) {  // the packet leaves its rack
    leave_rack_.packets += 1;
    leave_rack_.wire_bytes += r.wire_bytes;
    leave_rack_.busy_ps += ser;
    leave_rack_.max_wait_ps = std::max(leave_rack_.max_wait_ps, start - now);
    leave_rack_.total_wait_ps += start - now;
  }
  r.links += 1;
  r.router_links += router_link ? 1 : 0;
  // A switch hop includes the switch's latency: nothing can happen to the packet in between.
  const Picos arrival =
      link.free_at + config_.link_ps + (next == Hop::kToNode ? Picos{0} : config_.switch_ps);
  link.wire.push_back(InFlight{arrival, r, next});
  if (link.wire.size() == 1) events_.at(arrival, [this, link_index] { land(link_index); });
}

void Fabric::land(std::size_t link_index) {
  Link& link = links_[link_index];
  const InFlight f = link.wire.front();
  link.wire.pop_front();
  // The next head is scheduled before the packet moves on, so that whatever the arrival
  // causes is ordered after it at equal times, as when every packet had its own event.
  if (!link.wire.empty())
    events_.at(link.wire.front().arrival, [this, link_index] { land(link_index); });
  arrive(f.route, f.next);
}

void Fabric::arrive(const Route& r, Hop hop) {
  switch (hop) {
    case Hop::kToSrcTor:
      at_tor(r, /*from_node=*/true);
      return;
    case Hop::kToSpine: {
      const int spine = spine_of(r.route_src, r.dst);
      transmit(spine_down_index(spine, rack_of(r.dst)), r, Hop::kToDstTor);
      return;
    }
    case Hop::kToDstTor:
      at_tor(r, /*from_node=*/false);
      return;
    case Hop::kToRouter:
      if (r.at == rack_of(r.dst)) {
        at_tor(r, /*from_node=*/false);
      } else {
        Route on = r;
        on.at = next_router(r.at, rack_of(r.dst));
        transmit(static_cast<std::size_t>(
                     router_link_[static_cast<std::size_t>(r.at) * config_.racks + on.at]),
                 on, Hop::kToRouter);
      }
      return;
    case Hop::kToNode:
      ++delivered_;
      ++by_links_[std::min<int>(r.links, kMaxHops)];
      ++by_router_links_[std::min<int>(r.router_links, kMaxHops)];
      if (receiver_) receiver_(r.dst, packets_[r.packet]);
      release(r.packet);
      return;
  }
}

void Fabric::at_tor(const Route& r, bool from_node) {
  const int tor = from_node ? r.src_tor : rack_of(r.dst);
  if (tor_hook_ && !tor_hook_(tor, packets_[r.packet], from_node)) {
    release(r.packet);
    return;
  }
  if (from_node) {
    forward_from_tor(r);
  } else {
    transmit(down_index(r.dst), r, Hop::kToNode);
  }
}

void Fabric::forward_from_tor(const Route& r) {
  if (rack_of(r.dst) == r.src_tor) {
    transmit(down_index(r.dst), r, Hop::kToNode);
  } else if (config_.topology != Topology::kLeafSpine) {
    Route on = r;
    on.at = next_router(r.src_tor, rack_of(r.dst));
    transmit(static_cast<std::size_t>(
                 router_link_[static_cast<std::size_t>(r.src_tor) * config_.racks + on.at]),
             on, Hop::kToRouter);
  } else {
    transmit(tor_up_index(r.src_tor, spine_of(r.route_src, r.dst)), r, Hop::kToSpine);
  }
}

LinkStats Fabric::total() const {
  LinkStats t;
  for (const Link& l : links_) {
    t.packets += l.stats.packets;
    t.wire_bytes += l.stats.wire_bytes;
    t.busy_ps += l.stats.busy_ps;
    t.max_wait_ps = std::max(t.max_wait_ps, l.stats.max_wait_ps);
    t.total_wait_ps += l.stats.total_wait_ps;
  }
  return t;
}

LinkStats Fabric::router_links() const {
  LinkStats t;
  for (std::size_t l = first_router_link(); l < links_.size(); ++l) {
    const LinkStats& s = links_[l].stats;
    t.packets += s.packets;
    t.wire_bytes += s.wire_bytes;
    t.busy_ps += s.busy_ps;
    t.max_wait_ps = std::max(t.max_wait_ps, s.max_wait_ps);
    t.total_wait_ps += s.total_wait_ps;
  }
  return t;
}

LinkStats Fabric::busiest_router_link() const {
  LinkStats best;
  for (std::size_t l = first_router_link(); l < links_.size(); ++l)
    if (links_[l].stats.busy_ps > best.busy_ps) best = links_[l].stats;
  return best;
}

}  // namespace netsparse::emulate
