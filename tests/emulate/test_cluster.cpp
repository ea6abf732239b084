// Engines on the emulated fabric: every property arrives and is the owner's, the mechanisms
// show in the counters where they must, the in-switch cache answers, and a run is reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "emulate/cluster.hpp"
#include "netsparse/netsparse.h"

namespace {

using namespace netsparse::emulate;

// A skewed random gather: `nodes` nodes with `rows_per_node` rows each; every node asks for
// `per_node` idxs drawn with a power-law bias toward low rows (so nodes share hot rows, as in
// web graphs), repeats included.
Workload skewed(int nodes, std::uint64_t rows_per_node, std::size_t per_node, std::uint32_t prop,
                std::uint64_t seed) {
  Workload w;
  w.prop_bytes = prop;
  for (int p = 0; p <= nodes; ++p) w.row_offsets.push_back(rows_per_node * p);
  const std::uint64_t total = w.row_offsets.back();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  w.idxs.resize(static_cast<std::size_t>(nodes));
  for (auto& list : w.idxs)
    for (std::size_t i = 0; i < per_node; ++i) {
      const double x = u(rng);
      list.push_back(static_cast<std::uint64_t>(x * x * x * static_cast<double>(total)) % total);
    }
  return w;
}

ClusterConfig small_cluster(int nodes, int racks) {
  ClusterConfig c;
  c.fabric.nodes = nodes;
  c.fabric.racks = racks;
  c.node.batch = 512;
  return c;
}

std::uint64_t sum(const RunResult& r, std::uint64_t NodeResult::*field) {
  std::uint64_t s = 0;
  for (const NodeResult& n : r.nodes) s += n.*field;
  return s;
}

TEST(Cluster, EveryPropertyArrivesAndIsTheOwners) {
  const Workload w = skewed(16, 256, 3000, 64, 1);
  Cluster cluster(small_cluster(16, 4));
  const RunResult r = cluster.run(w);
  EXPECT_EQ(r.wrong_properties, 0u);
  EXPECT_GT(r.checked_properties, 40000u);
  for (const NodeResult& n : r.nodes) {
    EXPECT_EQ(n.failed_wrs, 0u);
    EXPECT_GT(n.done_ps, 0u);
    EXPECT_EQ(n.requested, 3000u);
    // Every idx was filtered, coalesced, local or sent; every PR sent was answered once,
    // by its owner or by a switch.
    EXPECT_EQ(n.filtered + n.coalesced + n.local + n.sent, n.requested);
    EXPECT_EQ(n.responses, n.sent);
  }
  EXPECT_GT(sum(r, &NodeResult::filtered), 0u);
  std::uint64_t hits = 0;
  for (const TorStats& t : r.tors) hits += t.hits;
  EXPECT_GT(hits, 0u);  // hot rows are fetched by several nodes of a rack
  // Reads the owners served + reads the switches answered = PRs sent.
  EXPECT_EQ(sum(r, &NodeResult::served) + hits, sum(r, &NodeResult::sent));
  EXPECT_GT(r.makespan_ps, 0u);
}

TEST(Cluster, SameInputSameResult) {
  const Workload w = skewed(8, 128, 1500, 16, 7);
  Cluster cluster(small_cluster(8, 2));
  const RunResult a = cluster.run(w);
  const RunResult b = cluster.run(w);
  EXPECT_EQ(a.makespan_ps, b.makespan_ps);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.links.wire_bytes, b.links.wire_bytes);
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].done_ps, b.nodes[i].done_ps) << i;
    EXPECT_EQ(a.nodes[i].sent, b.nodes[i].sent) << i;
    EXPECT_EQ(a.nodes[i].steps, b.nodes[i].steps) << i;
  }
  for (std::size_t t = 0; t < a.tors.size(); ++t) EXPECT_EQ(a.tors[t].hits, b.tors[t].hits);
}

TEST(Cluster, WithoutTheSwitchOwnersServeEveryRead) {
  const Workload w = skewed(8, 128, 1500, 16, 3);
  ClusterConfig c = small_cluster(8, 2);
  c.tor.enabled = false;
  const RunResult r = Cluster(c).run(w);
  EXPECT_EQ(r.wrong_properties, 0u);
  EXPECT_EQ(sum(r, &NodeResult::served), sum(r, &NodeResult::sent));
  for (const TorStats& t : r.tors) EXPECT_EQ(t.read_prs_in, 0u);
  // Every packet a node sent crossed its uplink; nothing else did.
  std::uint64_t nic_packets = 0;
  for (const NodeResult& n : r.nodes)
    for (std::uint64_t p : n.nic.packets) nic_packets += p;
  EXPECT_EQ(sum(r, &NodeResult::tx_packets), nic_packets);
}

// rack_waves (the real rack switch's schedule): the w-th node of every rack gathers only after
// every node of wave w - 1 completed, the data stays right, and the later nodes of a rack find
// what the earlier ones fetched in the cache: inter-rack hits only grow against all at once,
// while the reads looked up are the same.
TEST(Cluster, RackWavesSerialiseARacksNodesAndTheCacheServesTheLaterOnes) {
  const Workload w = skewed(8, 128, 1500, 16, 5);
  ClusterConfig c = small_cluster(8, 2);  // 4 nodes per rack: waves 0-3
  const RunResult together = Cluster(c).run(w);
  c.rack_waves = true;
  const RunResult waves = Cluster(c).run(w);
  EXPECT_EQ(waves.wrong_properties, 0u);
  const int per_rack = 4;
  for (int wave = 1; wave < per_rack; ++wave) {
    Picos previous_done = 0, first_done = kNever;
    for (int n = 0; n < 8; ++n) {
      const Picos done = waves.nodes[static_cast<std::size_t>(n)].done_ps;
      EXPECT_GT(done, 0u) << n;
      if (n % per_rack == wave - 1) previous_done = std::max(previous_done, done);
      if (n % per_rack == wave) first_done = std::min(first_done, done);
    }
    EXPECT_LT(previous_done, first_done) << "wave " << wave;
  }
  std::uint64_t reads[2] = {0, 0}, hits[2] = {0, 0};
  for (const TorStats& t : together.tors)
    reads[0] += t.inter_rack_reads, hits[0] += t.inter_rack_hits;
  for (const TorStats& t : waves.tors) reads[1] += t.inter_rack_reads, hits[1] += t.inter_rack_hits;
  EXPECT_EQ(reads[0], reads[1]);
  EXPECT_GT(hits[1], hits[0]);
  EXPECT_EQ(
      sum(waves, &NodeResult::served) +
          [&] {
            std::uint64_t h = 0;
            for (const TorStats& t : waves.tors) h += t.hits;
            return h;
          }(),
      sum(waves, &NodeResult::sent));
}

// The ablations change what the engine does, and the data stays right.
TEST(Cluster, AblationsAddTraffic) {
  const Workload w = skewed(8, 128, 2000, 16, 5);
  auto run = [&](std::uint32_t flags, bool tor) {
    ClusterConfig c = small_cluster(8, 2);
    c.node.flags = flags;
    c.tor.enabled = tor;
    const RunResult r = Cluster(c).run(w);
    EXPECT_EQ(r.wrong_properties, 0u) << flags;
    return r;
  };
  const RunResult rig = run(NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false);
  const RunResult filt = run(NS_CTX_NO_CONCAT, false);
  const RunResult concat = run(0, false);
  EXPECT_EQ(sum(rig, &NodeResult::filtered) + sum(rig, &NodeResult::coalesced), 0u);
  EXPECT_LT(sum(filt, &NodeResult::sent), sum(rig, &NodeResult::sent));
  EXPECT_LT(filt.links.wire_bytes, rig.links.wire_bytes);
  EXPECT_LT(concat.links.packets, filt.links.packets);
  EXPECT_LT(concat.links.wire_bytes, filt.links.wire_bytes);
}

// Work requests on the Idx Filter generate in several client units at once (the paper's units
// walk their own commands concurrently), so a node keeps more PRs in flight than one unit's
// Pending PR Table holds; and a request that coalesced onto another's PR completes only once
// that PR's answer is in place, checked at each completion, not at the end.
TEST(Cluster, FilteredRequestsGenerateInParallelAndCompleteWithTheirData) {
  const Workload w = skewed(8, 256, 6000, 32, 11);
  for (std::uint32_t flags : {0u, unsigned{NS_CTX_NO_CONCAT}, unsigned{NS_CTX_NO_COALESCE}}) {
    ClusterConfig c = small_cluster(8, 2);
    c.node.flags = flags;
    c.node.batch = 256;
    c.node.pending_entries = 16;  // small tables: one unit alone could keep 16 PRs in flight
    const RunResult r = Cluster(c).run(w);
    EXPECT_EQ(r.wrong_properties, 0u) << flags;
    EXPECT_EQ(r.wrong_at_completion, 0u) << flags;
    std::uint64_t most_in_flight = 0, coalesced = 0;
    for (const NodeResult& n : r.nodes) {
      EXPECT_EQ(n.failed_wrs, 0u);
      most_in_flight = std::max(most_in_flight, n.max_outstanding);
      coalesced += n.coalesced;
    }
    EXPECT_GT(most_in_flight, 2u * c.node.pending_entries) << flags;
    if ((flags & NS_CTX_NO_COALESCE) == 0) {
      EXPECT_GT(coalesced, 0u) << flags;
    }
  }
}

}  // namespace
