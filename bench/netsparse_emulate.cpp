// netsparse_emulate: a NetSparse cluster emulated in one process (lib/emulate), printing the
// paper's Table 4/7/8-style statistics for a matrix (docs/emulation.md).
//
//   netsparse_emulate --nodes 128 --racks 8 --matrix gen:kron:16 --K 16 --mechanisms all
//
// --matrix gen:kron:S (Kronecker, 2^S rows, edge factor 16) | gen:road:W (W x W road grid) |
//          gen:stencil:N (N^3 27-point stencil) | a Matrix Market file
// --mechanisms rig | filter | coalesce | nic | switch (cumulative, as Table 8) | all (the ladder)
// --kernel spmm (only: the gather is the same for SDDMM; SpMV is K = 1)
// --seed S (generator seed) --batch N|auto (idxs per work request) --units U --json FILE
// --grid C (engine steps start on a grid of C cycles; 0 = at every arrival)
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "emulate/cluster.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/netsparse.h"

namespace {

using namespace netsparse::emulate;

struct Options {
  int nodes = 128, racks = 8;
  std::string matrix = "gen:kron:16";
  std::string kernel = "spmm";
  std::uint32_t K = 16;
  std::string mechanisms = "switch";
  std::uint64_t seed = 1;
  std::uint32_t batch = 0;  // 0 = auto (see batch_for)
  int units = 32;
  std::uint32_t grid = 32;  // NodeModel::step_grid_cycles
  std::string json;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "netsparse_emulate: " << why
            << "\nusage: netsparse_emulate [--nodes N] [--racks R] [--matrix gen:kron:S|"
               "gen:road:W|gen:stencil:N|FILE.mtx] [--kernel spmm] [--K K] [--mechanisms "
               "rig|filter|coalesce|nic|switch|all] [--seed S] [--batch N] [--units U] "
               "[--grid CYCLES] [--json FILE]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--nodes")
        o.nodes = std::stoi(value());
      else if (a == "--racks")
        o.racks = std::stoi(value());
      else if (a == "--matrix")
        o.matrix = value();
      else if (a == "--kernel")
        o.kernel = value();
      else if (a == "--K")
        o.K = static_cast<std::uint32_t>(std::stoul(value()));
      else if (a == "--mechanisms")
        o.mechanisms = value();
      else if (a == "--seed")
        o.seed = std::stoull(value());
      else if (a == "--batch") {
        const std::string v = value();
        o.batch = v == "auto" ? 0 : static_cast<std::uint32_t>(std::stoul(v));
      } else if (a == "--units") {
        o.units = std::stoi(value());
      } else if (a == "--grid") {
        o.grid = static_cast<std::uint32_t>(std::stoul(value()));
      } else if (a == "--json")
        o.json = value();
      else
        usage("unknown option " + a);
    } catch (const std::logic_error&) {
      usage("bad value for " + a);
    }
  }
  if (o.kernel != "spmm") usage("only --kernel spmm is emulated");
  if (o.K == 0) usage("--K must be >= 1");
  return o;
}

netsparse::CsrMatrix load(const Options& o) {
  const std::string& m = o.matrix;
  auto number = [&](std::size_t from) { return std::stoll(m.substr(from)); };
  if (m.rfind("gen:kron:", 0) == 0) {
    netsparse::KroneckerParams p;
    p.scale = static_cast<int>(number(9));
    p.seed = o.seed;
    return netsparse::generate_kronecker(p, 0, netsparse::gidx_t{1} << p.scale);
  }
  if (m.rfind("gen:road:", 0) == 0) {
    netsparse::RoadParams p;
    p.width = p.height = number(9);
    p.seed = o.seed;
    return netsparse::generate_road(p, 0, p.width * p.height);
  }
  if (m.rfind("gen:stencil:", 0) == 0) {
    netsparse::StencilParams p;
    p.nx = p.ny = p.nz = number(12);
    return netsparse::generate_stencil27(p, 0, p.nx * p.ny * p.nz);
  }
  return netsparse::read_matrix_market(m);
}

// The paper's batches give every node 77..291 work requests (Table 6 nnz / 128 nodes / 8k or
// 32k idxs): 2.4..9 per RIG unit, so every unit works and none waits alone at the end. Our
// matrices are smaller; keeping the paper's batch would leave most units idle and bound a node
// by one unit's Pending PR Table. Auto: the power of two giving about 4 per unit, in [64, 32k].
std::uint32_t batch_for(std::uint64_t mean_idxs_per_node, int units) {
  const std::uint64_t want = mean_idxs_per_node / (4 * static_cast<std::uint64_t>(units));
  std::uint32_t b = 64;
  while (b < 32768 && 2 * static_cast<std::uint64_t>(b) <= want) b *= 2;
  return b;
}

// Table 8's ladder: each step adds one mechanism.
struct Step {
  const char* name;
  std::uint32_t flags;
  bool tor;
};
constexpr Step kLadder[] = {
    {"rig", NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false},
    {"filter", NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false},
    {"coalesce", NS_CTX_NO_CONCAT, false},
    {"nic", 0, false},
    {"switch", 0, true},
};

struct Derived {
  int tail = 0;
  double fc_rate = 0, read_prs_per_packet = 0, resp_prs_per_packet = 0, hit_rate = 0;
  double goodput = 0, line_util = 0, traffic_vs_su = 0, su_opt_us = 0, time_us = 0;
  double speedup_su = 0;
};

// Writes the JSON document so far (`complete` false while steps remain).
bool write_json(const std::string& path, const std::string& head, double load_s, bool complete) {
  if (path.empty()) return true;
  std::ofstream f(path);
  f << head << "],\"load_s\":" << load_s << ",\"complete\":" << (complete ? "true" : "false")
    << "}\n";
  if (!f) {
    std::cerr << "netsparse_emulate: cannot write " << path << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const auto t_load = std::chrono::steady_clock::now();
  netsparse::CsrMatrix a;
  try {
    a = load(o);
  } catch (const std::exception& e) {
    std::cerr << "netsparse_emulate: " << o.matrix << ": " << e.what() << "\n";
    return 1;
  }
  const std::uint64_t n = static_cast<std::uint64_t>(a.n_cols);
  const std::uint64_t rows = static_cast<std::uint64_t>(a.n_rows_global);
  if (rows < static_cast<std::uint64_t>(o.nodes) || n != rows) {
    std::cerr << "netsparse_emulate: need a square matrix with at least one row per node\n";
    return 1;
  }
  Workload w;
  w.prop_bytes = o.K * 4;
  w.verify = false;
  for (int p = 0; p <= o.nodes; ++p) w.row_offsets.push_back(rows * p / o.nodes);
  w.idxs.resize(static_cast<std::size_t>(o.nodes));
  // Table 4: distinct destinations among 64 consecutive remote PRs; the useful properties.
  double dest_sum = 0;
  std::uint64_t windows = 0;
  std::vector<std::uint64_t> unique_remote(static_cast<std::size_t>(o.nodes));
  std::vector<std::uint32_t> seen(n, 0xFFFFFFFFu);
  for (int p = 0; p < o.nodes; ++p) {
    const std::uint64_t b = w.row_offsets[p], e = w.row_offsets[p + 1];
    auto& list = w.idxs[static_cast<std::size_t>(p)];
    list.assign(a.col_idx.begin() + a.row_ptr[b], a.col_idx.begin() + a.row_ptr[e]);
    std::vector<int> window;
    for (std::uint64_t c : list) {
      if (c >= b && c < e) continue;
      if (seen[c] != static_cast<std::uint32_t>(p)) {
        seen[c] = static_cast<std::uint32_t>(p);
        ++unique_remote[static_cast<std::size_t>(p)];
      }
      window.push_back(static_cast<int>(c * o.nodes / rows));  // owner (equal blocks)
      if (window.size() == 64) {
        std::sort(window.begin(), window.end());
        dest_sum += static_cast<double>(std::unique(window.begin(), window.end()) - window.begin());
        ++windows;
        window.clear();
      }
    }
  }
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  std::printf("matrix %s: %llu rows, %llu nonzeros; %d nodes in %d racks; K = %u (%u B)\n",
              o.matrix.c_str(), static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(a.nnz()), o.nodes, o.racks, o.K, w.prop_bytes);
  std::printf("table 4: distinct destinations among 64 consecutive PRs: %.2f (of %d)\n",
              windows ? dest_sum / static_cast<double>(windows) : 0.0, o.nodes - 1);

  const std::uint32_t batch =
      o.batch != 0 ? o.batch : batch_for(a.nnz() / static_cast<std::uint64_t>(o.nodes), o.units);
  std::printf("batch %u idxs per work request%s\n", batch, o.batch != 0 ? "" : " (auto)");
  a = netsparse::CsrMatrix{};  // the idx lists are all the emulation needs
  std::vector<Step> steps;
  for (const Step& s : kLadder)
    if (o.mechanisms == "all" || o.mechanisms == s.name) steps.push_back(s);
  if (steps.empty()) usage("unknown --mechanisms " + o.mechanisms);

  std::ostringstream js;
  js << "{\"matrix\":\"" << o.matrix << "\",\"nodes\":" << o.nodes << ",\"racks\":" << o.racks
     << ",\"K\":" << o.K << ",\"batch\":" << batch << ",\"table4_distinct_destinations\":"
     << (windows ? dest_sum / static_cast<double>(windows) : 0.0) << ",\"runs\":[";
  std::printf("\n%-9s %9s %6s %9s %9s %7s %8s %9s %10s %11s %9s %12s\n", "mechanisms", "time_us",
              "F+C%", "PRs/rdpk", "PRs/rspk", "hit%", "goodput%", "line%", "traffic/SU",
              "speedup/SU", "wall_s", "PRs/wall_s");
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    ClusterConfig c;
    c.fabric.nodes = o.nodes;
    c.fabric.racks = o.racks;
    c.node.flags = s.flags;
    c.node.batch = batch;
    c.node.step_grid_cycles = o.grid;
    c.node.client_units = c.node.server_units = o.units;
    c.tor.enabled = s.tor;
    const auto t0 = std::chrono::steady_clock::now();
    RunResult r;
    try {
      r = Cluster(c).run(w);
    } catch (const std::exception& e) {
      std::cerr << "netsparse_emulate: " << e.what() << "\n";
      return 1;
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Derived d;
    for (int p = 0; p < o.nodes; ++p)
      if (r.nodes[p].done_ps > r.nodes[d.tail].done_ps) d.tail = p;
    const NodeResult& t = r.nodes[static_cast<std::size_t>(d.tail)];
    const double line_Bps = c.fabric.link_gbps * 1e9 / 8;
    const double time_s = static_cast<double>(t.done_ps) * 1e-12;
    const std::uint64_t remote = t.requested - t.local;
    d.time_us = time_s * 1e6;
    d.fc_rate = remote ? static_cast<double>(t.filtered + t.coalesced) / remote : 0;
    d.read_prs_per_packet = t.nic.prs_per_packet(0);
    d.resp_prs_per_packet = t.nic.prs_per_packet(1);
    std::uint64_t lookups = 0, hits = 0, failed = 0, requested = 0;
    for (const auto& cs : r.caches) lookups += cs.lookups, hits += cs.hits;
    for (const NodeResult& nr : r.nodes) failed += nr.failed_wrs, requested += nr.requested;
    d.hit_rate = lookups ? static_cast<double>(hits) / lookups : 0;
    const double useful = static_cast<double>(unique_remote[d.tail]) * w.prop_bytes;
    d.goodput = time_s > 0 ? useful / time_s / line_Bps : 0;
    d.line_util = time_s > 0 ? static_cast<double>(t.rx_wire_bytes) / time_s / line_Bps : 0;
    const double own = static_cast<double>(w.row_offsets[d.tail + 1] - w.row_offsets[d.tail]);
    const double su_bytes = (static_cast<double>(rows) - own) * w.prop_bytes;
    d.traffic_vs_su = t.rx_wire_bytes + t.tx_wire_bytes
                          ? su_bytes / static_cast<double>(t.rx_wire_bytes + t.tx_wire_bytes)
                          : 0;
    d.su_opt_us = su_bytes / line_Bps * 1e6;
    d.speedup_su = d.time_us > 0 ? d.su_opt_us / d.time_us : 0;
    std::printf("%-10s %9.2f %6.1f %9.2f %9.2f %7.1f %8.1f %9.1f %10.1f %11.2f %9.2f %12.0f\n",
                s.name, d.time_us, 100 * d.fc_rate, d.read_prs_per_packet, d.resp_prs_per_packet,
                100 * d.hit_rate, 100 * d.goodput, 100 * d.line_util, d.traffic_vs_su, d.speedup_su,
                wall, wall > 0 ? static_cast<double>(requested) / wall : 0.0);
    {
      // Where the tail node's virtual time went: its units (client walk, server answers), its
      // links (serialising, queueing) and its PRs in flight (Pending PR Tables, round trips).
      const double us = 1e-6;
      const double cyc_us = 1.0 / (c.node.clock_ghz * 1e3);
      std::uint64_t max_served = 0;
      int hub = 0;
      for (int p = 0; p < o.nodes; ++p)
        if (r.nodes[p].served > max_served) max_served = r.nodes[p].served, hub = p;
      std::printf(
          "  tail %d: wrs %llu, sent %llu, served %llu | busy %.1f us (client %.1f, server %.1f) "
          "| PRs in flight avg %.0f max %llu, stalls %llu, PR latency %.2f us | up %.0f%% "
          "(wait %.2f us/pkt) down %.0f%% (wait %.2f us/pkt) | most served: node %d, %llu, "
          "done %.1f us\n",
          d.tail, static_cast<unsigned long long>(t.wrs), static_cast<unsigned long long>(t.sent),
          static_cast<unsigned long long>(t.served), t.busy_ps * us, t.client_cycles * cyc_us,
          t.server_cycles * cyc_us,
          t.done_ps ? t.outstanding_ps / static_cast<double>(t.done_ps) : 0.0,
          static_cast<unsigned long long>(t.max_outstanding),
          static_cast<unsigned long long>(t.pending_stalls), t.mean_pr_latency_ps() * us,
          100.0 * t.tx_busy_ps / std::max<double>(1, t.done_ps),
          t.tx_packets ? t.tx_wait_ps * us / t.tx_packets : 0.0,
          100.0 * t.rx_busy_ps / std::max<double>(1, t.done_ps),
          t.rx_packets ? t.rx_wait_ps * us / t.rx_packets : 0.0, hub,
          static_cast<unsigned long long>(max_served), r.nodes[hub].done_ps * us);
    }
    if (failed != 0)
      std::printf("  warning: %llu work requests failed\n",
                  static_cast<unsigned long long>(failed));
    js << (k ? "," : "") << "{\"mechanisms\":\"" << s.name << "\",\"tail_node\":" << d.tail
       << ",\"time_us\":" << d.time_us << ",\"fc_rate\":" << d.fc_rate
       << ",\"read_prs_per_packet\":" << d.read_prs_per_packet
       << ",\"response_prs_per_packet\":" << d.resp_prs_per_packet
       << ",\"pcache_hit_rate\":" << d.hit_rate << ",\"goodput\":" << d.goodput
       << ",\"line_utilisation\":" << d.line_util << ",\"traffic_vs_su\":" << d.traffic_vs_su
       << ",\"su_opt_us\":" << d.su_opt_us << ",\"speedup_over_su_opt\":" << d.speedup_su
       << ",\"events\":" << r.events << ",\"simulated_prs\":" << requested << ",\"wall_s\":" << wall
       << ",\"failed_wrs\":" << failed << "}";
    // Each step's results are kept as soon as it ends: a long ladder loses nothing if stopped.
    std::fflush(stdout);
    if (!write_json(o.json, js.str(), load_s, k + 1 == steps.size())) return 1;
  }
  if (!write_json(o.json, js.str(), load_s, true)) return 1;
  return 0;
}
