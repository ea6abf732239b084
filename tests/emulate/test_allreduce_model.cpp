// The allreduce model on the leaf-spine fabric (lib/emulate/allreduce_model.hpp): its byte
// counts per link against closed forms, written here independently of the model's arithmetic
// (1500 B MTU, 50 B of headers per started frame, a header-only frame for an empty payload).
#include <gtest/gtest.h>

#include <stdexcept>

#include "emulate/allreduce_model.hpp"

namespace {

using namespace netsparse::emulate;

// Wire bytes of one message of `payload` bytes at the default 1500 B MTU.
std::uint64_t wire(std::uint64_t payload) {
  const std::uint64_t frames = payload == 0 ? 1 : (payload + 1499) / 1500;
  return payload + 50 * frames;
}

FabricConfig layout(int nodes, int racks) {
  FabricConfig c;
  c.nodes = nodes;
  c.racks = racks;
  return c;
}

AllreduceSpec spec(AllreduceAlgorithm a, std::uint64_t bytes, bool sparse = false,
                   double density = 1.0) {
  AllreduceSpec s;
  s.algorithm = a;
  s.bytes = bytes;
  s.sparse = sparse;
  s.density = density;
  return s;
}

TEST(AllreduceModel, RingSendsTwoPMinusOneOverPOfTheVectorPerNode) {
  for (auto [P, R] : {std::pair{8, 2}, std::pair{4, 1}, std::pair{16, 4}}) {
    const AllreduceModel m(layout(P, R));
    const std::uint64_t bytes = 4ull * 1000 * static_cast<std::uint64_t>(P);  // n / P = 1000
    const AllreduceResult r = m.run(spec(AllreduceAlgorithm::kRing, bytes));
    const std::uint64_t chunk = bytes / static_cast<std::uint64_t>(P);
    const std::uint64_t steps = 2 * static_cast<std::uint64_t>(P - 1);
    EXPECT_EQ(r.steps, steps);
    for (int i = 0; i < P; ++i) {
      EXPECT_EQ(r.link_payload[m.uplink(i)], 2 * (P - 1) * bytes / P) << "node " << i;
      EXPECT_EQ(r.link_payload[m.downlink(i)], steps * chunk);
      EXPECT_EQ(r.link_wire[m.uplink(i)], steps * wire(chunk));
    }
    // Only the messages from a rack's last node to the next rack's first leave a rack.
    EXPECT_EQ(r.payload_link_bytes, steps * chunk * (2 * P + 2 * (R > 1 ? R : 0)));
    EXPECT_EQ(r.max_links, R > 1 ? 4 : 2);
  }
}

TEST(AllreduceModel, InSwitchCarriesTheVectorOnceUpAndOnceDownEveryTreeLink) {
  const AllreduceModel m(layout(8, 2));  // 4 nodes per ToR, 4 spines, spine 0 the root
  const std::uint64_t bytes = 32000;     // 8000 fp32: 21 blocks of 375 and one of 125
  const AllreduceResult r = m.run(spec(AllreduceAlgorithm::kInSwitch, bytes));
  const std::uint64_t w = 21 * wire(1500) + wire(500);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r.link_payload[m.uplink(i)], bytes);
    EXPECT_EQ(r.link_payload[m.downlink(i)], bytes);
    EXPECT_EQ(r.link_wire[m.uplink(i)], w);
  }
  for (int rack = 0; rack < 2; ++rack) {
    EXPECT_EQ(r.link_payload[m.tor_up(rack, 0)], bytes);
    EXPECT_EQ(r.link_payload[m.spine_down(0, rack)], bytes);
    EXPECT_EQ(r.link_wire[m.spine_down(0, rack)], w);
    for (int s = 1; s < 4; ++s) EXPECT_EQ(r.link_wire[m.tor_up(rack, s)], 0u);
  }
  EXPECT_EQ(r.payload_link_bytes, bytes * (2 * 8 + 2 * 2));
  EXPECT_EQ(r.busiest_link_wire_bytes, w);
  EXPECT_EQ(r.max_links, 4);
}

TEST(AllreduceModel, HostAggregationIsLibCollectivesFlatBytes) {
  const AllreduceModel m(layout(8, 2));
  const std::uint64_t bytes = 8 * 4 * 1000;
  const AllreduceResult r = m.run(spec(AllreduceAlgorithm::kHostAggregation, bytes));
  EXPECT_EQ(r.steps, 2u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r.link_payload[m.uplink(i)], 2 * 7 * bytes / 8);
    EXPECT_EQ(r.link_wire[m.downlink(i)], 2 * 7 * wire(bytes / 8));
  }
  // Each rack sends 4 x 4 segments to the other rack per phase, through some spine.
  std::uint64_t up = 0;
  for (int rack = 0; rack < 2; ++rack)
    for (int s = 0; s < 4; ++s) up += r.link_payload[m.tor_up(rack, s)];
  EXPECT_EQ(up, 2 * 2 * 16 * bytes / 8);
}

TEST(AllreduceModel, SparseAtZeroDensitySendsHeadersOnly) {
  const AllreduceModel m(layout(8, 2));
  const std::uint64_t bytes = 1 << 20;
  const AllreduceResult rd = m.run(spec(AllreduceAlgorithm::kRecursiveDoubling, bytes, true, 0.0));
  const AllreduceResult sw = m.run(spec(AllreduceAlgorithm::kInSwitch, bytes, true, 0.0));
  EXPECT_EQ(rd.payload_link_bytes, 0u);
  EXPECT_EQ(sw.payload_link_bytes, 0u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(rd.link_wire[m.uplink(i)], 3 * wire(0)) << "three rounds, one empty message each";
    EXPECT_EQ(sw.link_wire[m.uplink(i)], wire(0)) << "one block, one header-only frame";
    EXPECT_EQ(sw.link_wire[m.downlink(i)], wire(0));
  }
  EXPECT_EQ(sw.link_wire[m.tor_up(1, 0)], wire(0));
}

TEST(AllreduceModel, SparseAtFullDensityIsTheDenseAllreduce) {
  const AllreduceModel m(layout(8, 2));
  for (std::uint64_t bytes : {std::uint64_t{4}, std::uint64_t{32000}, std::uint64_t{1} << 22}) {
    for (auto a : {AllreduceAlgorithm::kRecursiveDoubling, AllreduceAlgorithm::kInSwitch}) {
      const AllreduceResult sparse = m.run(spec(a, bytes, true, 1.0));
      const AllreduceResult dense = m.run(spec(a, bytes));
      EXPECT_EQ(sparse.link_payload, dense.link_payload) << allreduce_algorithm_name(a);
      EXPECT_EQ(sparse.link_wire, dense.link_wire) << allreduce_algorithm_name(a);
      EXPECT_EQ(sparse.time_us, dense.time_us);
    }
    const AllreduceResult rd = m.run(spec(AllreduceAlgorithm::kRecursiveDoubling, bytes, true, 1));
    EXPECT_EQ(rd.link_payload[m.uplink(5)], 3 * bytes);
  }
}

TEST(AllreduceModel, LeafUplinkCarriesItsNodesUnionOfNonzeros) {
  // One block per vector (density 1/1000 of 40000 elements: blocks of 187500 elements), 4 nodes
  // per ToR: the ToR forwards round(n (1 - (1 - d)^4)) pairs, the root sends down the 8 nodes'.
  const AllreduceModel m(layout(8, 2));
  const double d = 0.001;
  const AllreduceResult r = m.run(spec(AllreduceAlgorithm::kInSwitch, 160000, true, d));
  EXPECT_EQ(r.link_payload[m.uplink(0)], 8u * 40);          // 40 nonzeros
  EXPECT_EQ(r.link_payload[m.tor_up(0, 0)], 8u * 160);      // 159.76 -> 160
  EXPECT_EQ(r.link_payload[m.spine_down(0, 1)], 8u * 319);  // 318.88 -> 319
  EXPECT_EQ(r.link_payload[m.downlink(7)], 8u * 319);
  EXPECT_EQ(r.link_wire[m.tor_up(0, 0)], wire(8 * 160));
}

TEST(AllreduceModel, InSwitchBusiestLinkIsNoHeavierThanTheHostAlgorithms) {
  for (auto [P, R] : {std::pair{8, 2}, std::pair{64, 8}, std::pair{16, 1}}) {
    const AllreduceModel m(layout(P, R));
    for (std::uint64_t bytes :
         {std::uint64_t{4096}, std::uint64_t{1} << 20, std::uint64_t{3} << 22}) {
      const auto sw = m.run(spec(AllreduceAlgorithm::kInSwitch, bytes)).busiest_link_wire_bytes;
      EXPECT_LE(sw,
                m.run(spec(AllreduceAlgorithm::kHostAggregation, bytes)).busiest_link_wire_bytes)
          << P << " nodes, " << bytes << " B";
      EXPECT_LE(sw, m.run(spec(AllreduceAlgorithm::kRing, bytes)).busiest_link_wire_bytes);
      for (double d : {0.001, 0.01, 0.1, 0.5})
        EXPECT_LE(
            m.run(spec(AllreduceAlgorithm::kInSwitch, bytes, true, d)).wire_link_bytes,
            m.run(spec(AllreduceAlgorithm::kRecursiveDoubling, bytes, true, d)).wire_link_bytes)
            << P << " nodes, " << bytes << " B, density " << d;
    }
  }
}

TEST(AllreduceModel, RefusesWhatItCannotModel) {
  FabricConfig hx = layout(8, 4);
  hx.topology = Topology::kHyperX;
  EXPECT_THROW(AllreduceModel{hx}, std::invalid_argument);
  const AllreduceModel m(layout(6, 2));
  EXPECT_THROW(m.run(spec(AllreduceAlgorithm::kRing, 6)), std::invalid_argument);
  EXPECT_THROW(m.run(spec(AllreduceAlgorithm::kRing, 0)), std::invalid_argument);
  EXPECT_THROW(m.run(spec(AllreduceAlgorithm::kInSwitch, 64, true, 1.5)), std::invalid_argument);
  EXPECT_THROW(m.run(spec(AllreduceAlgorithm::kRing, 64, true, 0.1)), std::invalid_argument);
  EXPECT_THROW(m.run(spec(AllreduceAlgorithm::kRecursiveDoubling, 64)), std::invalid_argument);
  EXPECT_NO_THROW(m.run(spec(AllreduceAlgorithm::kHostAggregation, 64)));
}

}  // namespace
