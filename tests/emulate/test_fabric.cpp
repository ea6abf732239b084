// The virtual-time fabrics (leaf-spine; HyperX and Dragonfly at the end) against the timing it
// promises: the paper's Table 5 latencies, serialisation at the line rate, FIFO queueing, symmetric
// routing, determinism.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "emulate/event_queue.hpp"
#include "emulate/fabric.hpp"

namespace {

using namespace netsparse::emulate;

constexpr Picos kNs = 1000;
// Independent of the fabric's own arithmetic: at 400 Gbps a byte takes 20 ps.
constexpr Picos ser400(std::uint64_t wire_bytes) {
  return wire_bytes * 20;
}

struct Arrival {
  int node;
  std::uint64_t id;
  Picos time;
  bool operator==(const Arrival&) const = default;
};

struct Harness {
  EventQueue events;
  Fabric fabric;
  std::vector<Arrival> arrivals;
  explicit Harness(const FabricConfig& c = {}) : fabric(events, c) {
    fabric.set_receiver([this](int node, Packet& p) {
      arrivals.push_back({node, p.id, events.now()});
    });
  }
};

std::vector<std::byte> payload(std::size_t n) {
  return std::vector<std::byte>(n);
}

TEST(Fabric, PaperTopologyAndRoundTrips) {
  Harness h;
  EXPECT_EQ(h.fabric.nodes(), 128);
  EXPECT_EQ(h.fabric.racks(), 8);
  EXPECT_EQ(h.fabric.nodes_per_rack(), 16);
  EXPECT_EQ(h.fabric.rack_of(15), 0);
  EXPECT_EQ(h.fabric.rack_of(16), 1);
  // Table 5: RTT 2.4 us in a rack, 5.4 us between racks.
  EXPECT_EQ(h.fabric.base_rtt_ps(0, 15), 2400 * kNs);
  EXPECT_EQ(h.fabric.base_rtt_ps(0, 16), 5400 * kNs);
  EXPECT_EQ(h.fabric.base_rtt_ps(127, 3), 5400 * kNs);
}

// A ping-pong of one packet each way on an idle fabric takes the analytic RTT plus the
// serialisation of the packet on every link it crosses (store and forward).
TEST(Fabric, PingPongTakesTheAnalyticRoundTrip) {
  // Not a structured binding: Clang before 16 cannot capture bindings in a lambda.
  for (const auto& ends : {std::tuple{0, 1, 2}, std::tuple{5, 100, 4}}) {
    const int a = std::get<0>(ends), b = std::get<1>(ends), links = std::get<2>(ends);
    Harness h;
    Picos back = 0;
    h.fabric.set_receiver([&](int node, Packet&) {
      if (node == b)
        h.fabric.send(b, a, payload(64));
      else
        back = h.events.now();
    });
    h.fabric.send(a, b, payload(64));
    h.events.run();
    const Picos base = links == 2 ? 2400 * kNs : 5400 * kNs;
    EXPECT_EQ(back, base + 2 * links * ser400(64 + 50)) << a << "->" << b;
    EXPECT_EQ(h.fabric.one_way_ps(a, b, 64), base / 2 + links * ser400(64 + 50));
    EXPECT_EQ(h.fabric.packets_in_flight(), 0u);
  }
}

TEST(Fabric, BackToBackPacketsAreSpacedBySerialisation) {
  Harness h;
  for (int i = 0; i < 10; ++i) h.fabric.send(0, 17, payload(1450));  // 1500 B on the wire
  h.events.run();
  ASSERT_EQ(h.arrivals.size(), 10u);
  EXPECT_EQ(h.arrivals[0].time, 2700 * kNs + 4 * ser400(1500));
  for (std::size_t i = 1; i < 10; ++i) {
    EXPECT_EQ(h.arrivals[i].time - h.arrivals[i - 1].time, ser400(1500)) << i;
    EXPECT_EQ(h.arrivals[i].id, h.arrivals[i - 1].id + 1);  // FIFO
  }
  EXPECT_EQ(h.fabric.uplink(0).wire_bytes, 15000u);
  EXPECT_EQ(h.fabric.uplink(0).busy_ps, 10 * ser400(1500));
  EXPECT_EQ(h.fabric.uplink(0).max_wait_ps, 9 * ser400(1500));
}

TEST(Fabric, IncastQueuesAtTheDownlink) {
  Harness h;
  for (int src = 1; src < 16; ++src) h.fabric.send(src, 0, payload(1450));
  h.events.run();
  ASSERT_EQ(h.arrivals.size(), 15u);
  // All reach the ToR together; the downlink to node 0 sends them one after the other in the
  // order they were sent.
  const Picos first = 1200 * kNs + 2 * ser400(1500);
  for (std::size_t k = 0; k < 15; ++k) {
    EXPECT_EQ(h.arrivals[k].time, first + k * ser400(1500)) << k;
    EXPECT_EQ(h.arrivals[k].id, k);
  }
  EXPECT_EQ(h.fabric.downlink(0).max_wait_ps, 14 * ser400(1500));
  for (int src = 1; src < 16; ++src) EXPECT_EQ(h.fabric.uplink(src).max_wait_ps, 0u);
}

TEST(Fabric, LargePayloadsPayAHeaderPerFrame) {
  Harness h;
  EXPECT_EQ(h.fabric.wire_bytes(0), 50u);
  EXPECT_EQ(h.fabric.wire_bytes(1500), 1550u);
  EXPECT_EQ(h.fabric.wire_bytes(1501), 1601u);
  EXPECT_EQ(h.fabric.serialisation_ps(1601), ser400(1601));
}

// A request and its answer pass the same ToR switches, and the same spine.
TEST(Fabric, RequestAndAnswerPassTheSameSwitches) {
  Harness h;
  std::vector<std::tuple<int, int, bool>> seen;  // (packet src, tor, from_node)
  h.fabric.set_tor_hook([&](int tor, Packet& p, bool from_node) {
    seen.emplace_back(p.src, tor, from_node);
    return true;
  });
  h.fabric.set_receiver([&](int node, Packet& p) {
    if (node == 77) h.fabric.send(77, p.src, payload(100));
  });
  h.fabric.send(3, 77, payload(20));
  h.events.run();
  const int ra = h.fabric.rack_of(3), rb = h.fabric.rack_of(77);
  EXPECT_EQ(seen, (std::vector<std::tuple<int, int, bool>>{
                      {3, ra, true}, {3, rb, false}, {77, rb, true}, {77, ra, false}}));
  for (int a = 0; a < 128; a += 7)
    for (int b = 0; b < 128; b += 5) ASSERT_EQ(h.fabric.spine_of(a, b), h.fabric.spine_of(b, a));
}

TEST(Fabric, HookCanTakeAPacketAndEmitItsOwn) {
  Harness h;
  h.fabric.set_tor_hook([&](int tor, Packet& p, bool from_node) {
    if (p.src == 2 && from_node) {  // answer on behalf of the destination, from the ToR
      h.fabric.send_from_tor(tor, 2, payload(30));
      return false;
    }
    return true;
  });
  h.fabric.send(2, 40, payload(30));
  h.events.run();
  ASSERT_EQ(h.arrivals.size(), 1u);
  EXPECT_EQ(h.arrivals[0].node, 2);
  // Up to the ToR and straight back down: 2 links, 1 switch, serialised twice.
  EXPECT_EQ(h.arrivals[0].time, 2 * 450 * kNs + 300 * kNs + 2 * ser400(80));
}

// Random traffic: the same configuration and sends give the same arrivals; everything sent
// arrives; another route seed gives the same arrivals for intra-rack traffic.
TEST(Fabric, DeterministicForASeed) {
  auto run = [](std::uint64_t route_seed, std::uint64_t traffic_seed) {
    FabricConfig c;
    c.nodes = 32;
    c.racks = 4;
    c.spines = 3;  // blocking: spine choice matters
    c.route_seed = route_seed;
    Harness h(c);
    std::mt19937_64 rng(traffic_seed);
    for (int i = 0; i < 3000; ++i) {
      const Picos t = rng() % (50'000 * kNs);
      const int src = static_cast<int>(rng() % 32), dst = static_cast<int>(rng() % 32);
      const std::size_t bytes = 14 + rng() % 1486;
      h.events.at(t, [&h, src, dst, bytes] { h.fabric.send(src, dst, payload(bytes)); });
    }
    h.events.run();
    EXPECT_EQ(h.fabric.packets_delivered(), 3000u);
    return h.arrivals;
  };
  const auto a = run(1, 42);
  EXPECT_EQ(a, run(1, 42));
  EXPECT_NE(a, run(1, 43));
  EXPECT_NE(a, run(2, 42));  // another spine hash changes the queueing between racks
}

TEST(Fabric, RejectsBadShapes) {
  EventQueue q;
  FabricConfig c;
  c.racks = 0;
  EXPECT_THROW(Fabric(q, c), std::invalid_argument);
  c = FabricConfig{};
  c.nodes = 4;
  c.racks = 8;
  EXPECT_THROW(Fabric(q, c), std::invalid_argument);
  c = FabricConfig{};
  c.nodes = 10;
  c.racks = 4;  // 3 per rack fills 4 racks as 3+3+3+1: allowed
  EXPECT_NO_THROW(Fabric(q, c));
  c.nodes = 9;
  c.racks = 6;  // 2 per rack would need only 5 racks
  EXPECT_THROW(Fabric(q, c), std::invalid_argument);
  Fabric f(q, FabricConfig{});
  EXPECT_THROW(f.send(0, 128, payload(1)), std::out_of_range);
  EXPECT_THROW(f.send(-1, 0, payload(1)), std::out_of_range);
}

}  // namespace

// HyperX (4 x 4 routers) and Dragonfly (4 groups of 4 routers), 4 nodes per router: every
// node sends to every other at once; each packet arrives, crosses exactly the router-to-router
// links of its minimal route (never more than the topology's bound), and a lone packet takes
// the analytic one-way latency of that route.
TEST(Fabric, HyperXAndDragonflyMinimalRoutes) {
  for (Topology t : {Topology::kHyperX, Topology::kDragonfly}) {
    SCOPED_TRACE(topology_name(t));
    FabricConfig c;
    c.nodes = 64;
    c.racks = 16;
    c.topology = t;
    Harness h(c);
    EXPECT_EQ(h.fabric.router_link_count(), t == Topology::kHyperX ? 16u * 6 : 4u * 12 + 12);
    std::uint64_t want[Fabric::kMaxHops + 1] = {};
    for (int a = 0; a < 16; ++a) {
      for (int b = 0; b < 16; ++b) {
        const int links = h.fabric.router_links_between(a, b);
        if (t == Topology::kHyperX) {
          EXPECT_EQ(links, (a % 4 != b % 4) + (a / 4 != b / 4)) << a << " -> " << b;
        } else if (a != b) {
          // One local link inside a group; between groups a global one, and local ones to
          // and from the routers holding it (one link when both ends hold it).
          if (a / 4 == b / 4) {
            EXPECT_EQ(links, 1) << a << " -> " << b;
          }
          EXPECT_GE(links, 1);
        }
        EXPECT_LE(links, h.fabric.router_diameter());
      }
    }
    for (int s = 0; s < 64; ++s) {
      for (int d = 0; d < 64; ++d) {
        if (s == d) continue;
        h.fabric.send(s, d, payload(64));
        ++want[h.fabric.router_links_between(h.fabric.rack_of(s), h.fabric.rack_of(d))];
      }
    }
    h.events.run();
    EXPECT_EQ(h.arrivals.size(), 64u * 63);
    for (int k = 0; k <= Fabric::kMaxHops; ++k) {
      EXPECT_EQ(h.fabric.delivered_by_router_links()[k], want[k]) << k << " router links";
      // Two node links besides.
      EXPECT_EQ(h.fabric.delivered_by_links()[k], k >= 2 ? want[k - 2] : 0u) << k << " links";
    }
    EXPECT_EQ(want[h.fabric.router_diameter()] != 0, true);  // the bound is reached
    // What left a rack: each packet between racks once, on its first router-to-router link.
    EXPECT_EQ(h.fabric.inter_rack().packets, 64u * 63 - 16u * 4 * 3);
    Harness lone(c);
    lone.fabric.send(0, 63, payload(100));
    lone.events.run();
    ASSERT_EQ(lone.arrivals.size(), 1u);
    EXPECT_EQ(lone.arrivals[0].time, lone.fabric.one_way_ps(0, 63, 100));
  }
}

TEST(Fabric, TopologyNamesAndShapesRefused) {
  Topology t{};
  EXPECT_TRUE(topology_from_name("dragonfly", t));
  EXPECT_EQ(t, Topology::kDragonfly);
  EXPECT_FALSE(topology_from_name("torus", t));
  EventQueue q;
  FabricConfig c;
  c.nodes = 64;
  c.racks = 16;
  c.topology = Topology::kDragonfly;
  c.dragonfly_groups = 3;  // 16 routers do not split into 3 groups
  EXPECT_THROW(Fabric(q, c), std::invalid_argument);
  c.topology = Topology::kHyperX;
  c.hyperx_x = 3;
  EXPECT_THROW(Fabric(q, c), std::invalid_argument);
  c.hyperx_x = 8;
  EXPECT_NO_THROW(Fabric(q, c));
}
