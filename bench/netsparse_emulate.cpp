// netsparse_emulate: a NetSparse cluster emulated in one process (lib/emulate), printing the
// paper's Table 4/7/8-style statistics for a matrix (docs/emulation.md).
//
//   netsparse_emulate --nodes 128 --racks 8 --matrix gen:kron:16 --K 16 --mechanisms all
//
// --matrix gen:kron:S (Kronecker, 2^S rows, edge factor 16) | gen:road:W (W x W road grid) |
//          gen:stencil:N (N^3 27-point stencil) | a Matrix Market file
// --mechanisms rig | filter | coalesce | nic | switch (cumulative, as Table 8) | all (the ladder)
// --kernel spmm (only: the gather is the same for SDDMM; SpMV is K = 1)
// --seed S (generator seed) --batch N|auto (idxs per work request) --units U,.. (Fig. 16)
// --delay CYCLES,.. (NIC concatenation delay, Fig. 17) --json FILE
// --grid C (engine steps start on a grid of C cycles; 0 = at every arrival)
// --K 1,16,128 runs every K (Fig. 12); --sa-cores / --sa-item-ns: the SAOpt model; --verify
// Checks (exit status 3 when one fails): the rig step sends exactly one PR per remote nonzero
// (SA's analytic count), steps with coalescing exactly one per distinct remote column, every
// node receives at least its useful bytes, no gathered property differs (--verify).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "emulate/cluster.hpp"
#include "emulate/workload.hpp"
#include "netsparse/netsparse.h"
#include "report.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using namespace netsparse::emulate;

struct Options {
  int nodes = 128, racks = 8;
  int ranks_per_node = 1;  // ranks sharing a node's NIC (their equal row blocks form its rows)
  std::string matrix = "gen:kron:16";
  std::string kernel = "spmm";
  std::vector<std::uint32_t> Ks = {16};
  int sa_cores = 64;      // SAOpt: host cores per node (the paper's 64)
  double sa_item_ns = 0;  // SAOpt: software cost per item per core; 0 = calibrated (sa_item_ns_for)
  bool verify = false;    // check every gathered property (memory: nodes x rows x K x 4 B)
  std::string mechanisms = "switch";
  std::uint64_t seed = 1;
  std::uint32_t batch = 0;                    // 0 = auto (see batch_for)
  std::vector<int> units = {32};              // a list sweeps them (Fig. 16)
  std::vector<std::uint32_t> delays = {500};  // NIC concatenation delay, cycles (Fig. 17)
  std::uint32_t grid = 32;                    // NodeModel::step_grid_cycles
  bool rack_waves = false;                    // ClusterConfig::rack_waves
  std::string json;
  std::string traffic;  // per-node engine counters, the text netsparse_emulate_mpi writes
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "netsparse_emulate: " << why << " (see --help)\n";
  std::exit(2);
}

constexpr const char* kHelp =
    R"(netsparse_emulate: a NetSparse cluster (leaf-spine, ToR switches with concatenation and the
Property Cache) in one process, in virtual time, on the library's own RIG engines; prints the
paper's Table 1, Table 4 and, per step of Table 8's ladder, the tail node's Table 7 columns and
the speedups over SUOpt and SAOpt (docs/emulation.md). Results depend only on the options.

usage: netsparse_emulate [options]
  --nodes N            nodes (default 128)
  --racks R            racks, nodes split evenly (default 8)
  --ranks-per-node R   the rows are cut into equal blocks per rank, R consecutive ranks per
                       node sharing its NIC (netsparse-node's hosts; default 1)
  --matrix SPEC        gen:kron:S (default gen:kron:16), gen:road:W, gen:stencil:N or a Matrix
                       Market file
  --kernel spmm        the kernel emulated (SpMM only)
  --K LIST             dense widths, comma-separated (default 16); a list gives Fig. 12
  --mechanisms STEPS   rig, filter, coalesce, nic, switch (each adds one mechanism to the
                       previous; default switch = all of them), a comma-separated list of
                       them, or all (the whole ladder)
  --seed S             seed of the generators (default 1)
  --batch N|auto       idxs per work request (default auto: about 4 requests per unit)
  --units LIST         RIG client and server units per NIC (default 32); a list sweeps
                       them (Fig. 16)
  --delay LIST         NIC concatenation delay in cycles at 2.2 GHz (default 500); a list
                       sweeps it (Fig. 17)
  --grid CYCLES        engine steps start on a grid of this many cycles (default 32; 0 = off)
  --rack-waves         the nodes of a rack gather one after another (wave w = the w-th node of
                       every rack), as the software rack switch of a real job schedules its
                       hosts (netsparse_bench --rack-switch); default: all at once, as NICs do
  --sa-cores C         SAOpt: host cores per node (default 64)
  --sa-item-ns NS      SAOpt: software cost per item per core (default: calibrated per K)
  --verify             check every gathered property against its owner's bytes (slower)
  --json FILE          also write the results as JSON (step by step, as they finish)
  --traffic FILE       write every node's engine counters per K and step (the format
                       netsparse_emulate_mpi writes for a real MPI run of the same work)
  --help               this text
Exit codes: 0 done, 2 bad options, 3 a check failed ("checks: FAILED").
)";

Options parse(int argc, char** argv) {
  namespace nb = netsparse::bench;
  Options o;
  cli::App app{"netsparse_emulate"};
  app.add_option("--nodes", o.nodes)->check(cli::Range(1, 1 << 20));
  app.add_option("--racks", o.racks)->check(cli::Range(1, 1 << 20));
  app.add_option("--ranks-per-node", o.ranks_per_node)->check(cli::Range(1, 1 << 20));
  app.add_option("--matrix", o.matrix);
  app.add_option("--kernel", o.kernel);
  app.add_option_function<std::string>("--K", [&](const std::string& v) {
    o.Ks.clear();
    for (long long k : nb::int_list("--K", v, 1, 1 << 20))
      o.Ks.push_back(static_cast<std::uint32_t>(k));
  });
  app.add_option("--sa-cores", o.sa_cores)->check(cli::Range(1, 1 << 20));
  app.add_option("--sa-item-ns", o.sa_item_ns)->check(cli::Range(0.0, 1e9));
  app.add_flag("--verify", o.verify);
  app.add_option("--mechanisms", o.mechanisms);
  app.add_option("--seed", o.seed);
  app.add_option_function<std::string>("--batch", [&](const std::string& v) {
    o.batch =
        v == "auto" ? 0 : static_cast<std::uint32_t>(nb::int_list("--batch", v, 1, 1LL << 31)[0]);
  });
  app.add_option_function<std::string>("--units", [&](const std::string& v) {
    o.units.clear();
    for (long long u : nb::int_list("--units", v, 1, 64)) o.units.push_back(static_cast<int>(u));
  });
  app.add_option_function<std::string>("--delay", [&](const std::string& v) {
    o.delays.clear();
    for (long long d : nb::int_list("--delay", v, 0, 1LL << 31))
      o.delays.push_back(static_cast<std::uint32_t>(d));
  });
  app.add_option("--grid", o.grid);
  app.add_flag("--rack-waves", o.rack_waves);
  app.add_option("--json", o.json);
  app.add_option("--traffic", o.traffic);
  const int code = nb::finish_command_line(nb::parse_command_line(app, argc, argv),
                                           "netsparse_emulate", kHelp, true);
  if (code >= 0) std::exit(code);
  if (o.kernel != "spmm") usage("only --kernel spmm is emulated");
  for (std::uint32_t k : o.Ks)
    if (k == 0) usage("--K must be >= 1");
  if (o.Ks.empty() || o.sa_cores < 1) usage("--K needs values, --sa-cores >= 1");
  for (int u : o.units)
    if (u < 1 || u > 64) usage("--units values must be in [1, 64]");
  if (o.units.empty() || o.delays.empty()) usage("--units and --delay need values");
  return o;
}

// SAOpt's software cost per item per core (ns), calibrated from the library's own Conveyors
// baseline on our machines: docs/benchmarks.md, `bench_index_gather --unique --modes
// conveyors` (request and reply conveyors, the best buffer configuration, one rank per core,
// balanced): 58.8 / 12.6 / 3.07 M rows/s per rank at K = 1 / 16 / 128, i.e. 17.0 / 79.4 /
// 325.7 ns per item with its request and its reply. Linear in K between those points.
double sa_item_ns_for(std::uint32_t K) {
  constexpr double k[3] = {1, 16, 128}, ns[3] = {1e3 / 58.8, 1e3 / 12.6, 1e3 / 3.07};
  if (K <= 16) return ns[0] + (ns[1] - ns[0]) * (K - k[0]) / (k[1] - k[0]);
  return ns[1] + (ns[2] - ns[1]) * (K - k[1]) / (k[2] - k[1]);
}

// What the matrix alone says, per node: Table 4 (distinct destinations among 64 consecutive
// remote PRs), the useful properties (distinct remote columns), SA's PRs (one per remote
// nonzero), SAOpt's PRs (Conveyors: each core is a rank that prefilters its own rows' columns
// only) and what each owner serves under SAOpt.
struct MatrixFacts {
  std::uint64_t rows = 0;  // of the whole matrix
  double table4 = 0;
  std::vector<std::uint64_t> unique_remote, remote_nnz, sa_opt_prs, sa_opt_served;
};

MatrixFacts analyse(const netsparse::CsrMatrix& a, const Workload& w, const Options& o) {
  const std::uint64_t n = static_cast<std::uint64_t>(a.n_cols);
  const auto N = static_cast<std::size_t>(o.nodes);
  MatrixFacts f;
  f.rows = static_cast<std::uint64_t>(a.n_rows_global);
  auto owner_of = [&](std::uint64_t c) {  // equal blocks: the partition of gather_workload
    std::size_t q = static_cast<std::size_t>(c * static_cast<std::uint64_t>(o.nodes) / f.rows);
    while (q + 1 < N && c >= w.row_offsets[q + 1]) ++q;
    while (c < w.row_offsets[q]) --q;
    return q;
  };
  double dest_sum = 0;
  std::uint64_t windows = 0;
  f.unique_remote.assign(N, 0);
  f.remote_nnz.assign(N, 0);
  f.sa_opt_prs.assign(N, 0);
  f.sa_opt_served.assign(N, 0);
  std::vector<std::uint32_t> seen(n, 0xFFFFFFFFu), seen_core(n, 0xFFFFFFFFu);
  const auto cores = static_cast<std::uint64_t>(o.sa_cores);
  for (std::size_t p = 0; p < N; ++p) {
    const std::uint64_t b = w.row_offsets[p], e = w.row_offsets[p + 1];
    std::vector<int> window;
    for (std::uint64_t r = b; r < e; ++r) {
      const std::uint64_t core = (r - b) * cores / std::max<std::uint64_t>(1, e - b);
      const auto stamp = static_cast<std::uint32_t>(p * cores + core);
      for (auto j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
        const std::uint64_t c = static_cast<std::uint64_t>(a.col_idx[j]);
        if (c >= b && c < e) continue;
        ++f.remote_nnz[p];
        if (seen[c] != static_cast<std::uint32_t>(p)) {
          seen[c] = static_cast<std::uint32_t>(p);
          ++f.unique_remote[p];
        }
        const std::size_t q = owner_of(c);
        if (seen_core[c] != stamp) {
          seen_core[c] = stamp;
          ++f.sa_opt_prs[p];
          ++f.sa_opt_served[q];
        }
        window.push_back(static_cast<int>(q));
        if (window.size() == 64) {
          std::sort(window.begin(), window.end());
          dest_sum +=
              static_cast<double>(std::unique(window.begin(), window.end()) - window.begin());
          ++windows;
          window.clear();
        }
      }
    }
  }
  f.table4 = windows ? dest_sum / static_cast<double>(windows) : 0.0;
  return f;
}

// Table 1: per node, useful properties (distinct remote columns) against the redundant ones
// SU moves (every remote row) and SA moves (one per remote nonzero, repeats included).
struct Table1 {
  double useful = 0, su_redundant = 0, sa_redundant = 0;  // means per node
};

Table1 table1(const MatrixFacts& f, const Workload& w, int nodes) {
  Table1 t;
  for (std::size_t p = 0; p < static_cast<std::size_t>(nodes); ++p) {
    const double own = static_cast<double>(w.row_offsets[p + 1] - w.row_offsets[p]);
    t.useful += static_cast<double>(f.unique_remote[p]);
    t.su_redundant += static_cast<double>(f.rows) - own - static_cast<double>(f.unique_remote[p]);
    t.sa_redundant += static_cast<double>(f.remote_nnz[p] - f.unique_remote[p]);
  }
  t.useful /= nodes;
  t.su_redundant /= nodes;
  t.sa_redundant /= nodes;
  return t;
}

void print_matrix_tables(const Options& o, const netsparse::CsrMatrix& a, const MatrixFacts& f,
                         const Table1& t1) {
  std::printf("matrix %s: %llu rows, %llu nonzeros; %d nodes in %d racks%s\n", o.matrix.c_str(),
              static_cast<unsigned long long>(f.rows), static_cast<unsigned long long>(a.nnz()),
              o.nodes, o.racks, o.rack_waves ? ", a rack's nodes in waves" : "");
  std::printf("table 4: distinct destinations among 64 consecutive PRs: %.2f (of %d)\n", f.table4,
              o.nodes - 1);
  std::printf(
      "table 1 (mean per node): useful %.0f; SU redundant %.0f (%.1f per useful); SA redundant "
      "%.0f (%.2f per useful)\n",
      t1.useful, t1.su_redundant, t1.useful > 0 ? t1.su_redundant / t1.useful : 0.0,
      t1.sa_redundant, t1.useful > 0 ? t1.sa_redundant / t1.useful : 0.0);
}

// The steps of Table 8's ladder that --mechanisms names (all: the whole ladder).
std::vector<LadderStep> chosen_steps(const Options& o) {
  if (o.mechanisms == "all") return {ladder().begin(), ladder().end()};
  std::vector<LadderStep> steps;
  for (const std::string& name : netsparse::bench::split(o.mechanisms)) {
    const LadderStep* s = find_step(name);
    if (s == nullptr) usage("unknown --mechanisms " + name);
    steps.push_back(*s);
  }
  return steps;
}

// The software baselines at one K, in microseconds: SUOpt and SAOpt (and SAOpt's tail node).
struct Baselines {
  double su_opt_us = 0, sa_opt_us = 0, item_ns = 0;
  std::size_t sa_tail = 0;
};

Baselines baselines(const MatrixFacts& f, const Workload& w, const Options& o, std::uint32_t K,
                    double line_Bps) {
  const auto N = static_cast<std::size_t>(o.nodes);
  Baselines b;
  // SUOpt: the node with the most remote rows receives them all at line rate, no headers.
  std::uint64_t most_remote_rows = 0;
  for (std::size_t p = 0; p < N; ++p)
    most_remote_rows =
        std::max(most_remote_rows, f.rows - (w.row_offsets[p + 1] - w.row_offsets[p]));
  b.su_opt_us = static_cast<double>(most_remote_rows) * w.prop_bytes / line_Bps * 1e6;
  // SAOpt: only software time, each item's request and reply at sa_item_ns on one of the
  // node's cores, all cores busy; the slowest node (what it asks or serves, the larger) ends it.
  b.item_ns = o.sa_item_ns > 0 ? o.sa_item_ns : sa_item_ns_for(K);
  for (std::size_t p = 0; p < N; ++p) {
    // Never faster than its useful bytes at line rate (no headers): software time alone
    // gives goodputs above 100 % for small per-node loads at large K.
    const double software = static_cast<double>(std::max(f.sa_opt_prs[p], f.sa_opt_served[p])) *
                            b.item_ns / o.sa_cores * 1e-3;
    const double wire = static_cast<double>(std::max(f.unique_remote[p], f.sa_opt_served[p])) *
                        w.prop_bytes / line_Bps * 1e6;
    const double t = std::max(software, wire);
    if (t > b.sa_opt_us) b.sa_opt_us = t, b.sa_tail = p;
  }
  return b;
}

void print_k_header(const Baselines& b, const MatrixFacts& f, const Workload& w, const Options& o,
                    std::uint32_t K, double line_Bps) {
  std::printf(
      "\nK = %u (%u B): SUOpt %.2f us; SAOpt %.2f us (%.1f ns per item per core, %d cores; "
      "SAOpt/SUOpt speedup %.2f, SA goodput %.1f%% at its tail node %zu)\n",
      K, w.prop_bytes, b.su_opt_us, b.sa_opt_us, b.item_ns, o.sa_cores,
      b.sa_opt_us > 0 ? b.su_opt_us / b.sa_opt_us : 0.0,
      b.sa_opt_us > 0 ? 100.0 * static_cast<double>(f.unique_remote[b.sa_tail]) * w.prop_bytes /
                            (b.sa_opt_us * 1e-6) / line_Bps
                      : 0.0,
      b.sa_tail);
  std::printf("%-9s %9s %6s %9s %9s %7s %8s %9s %10s %11s %11s %9s %12s\n", "mechanisms", "time_us",
              "F+C%", "PRs/rdpk", "PRs/rspk", "hit%", "goodput%", "line%", "traffic/SU",
              "speedup/SU", "speedup/SA", "wall_s", "PRs/wall_s");
}

struct RunSpec {
  LadderStep step;
  int units;
  std::uint32_t delay;
};

// Every (units, delay, ladder step) of the run, in the order they run.
std::vector<RunSpec> run_specs(const Options& o, const std::vector<LadderStep>& steps) {
  std::vector<RunSpec> runs;
  for (int u : o.units)
    for (std::uint32_t d : o.delays)
      for (const LadderStep& st : steps) runs.push_back({st, u, d});
  return runs;
}

ClusterConfig cluster_config(const Options& o, const RunSpec& spec, std::uint32_t batch) {
  ClusterConfig c;
  c.fabric.nodes = o.nodes;
  c.fabric.racks = o.racks;
  c.node.flags = spec.step.flags;
  c.node.batch = batch;
  c.node.step_grid_cycles = o.grid;
  c.node.client_units = c.node.server_units = spec.units;
  c.node.delay_cycles = spec.delay;
  c.tor.enabled = spec.step.tor;
  c.rack_waves = o.rack_waves;
  return c;
}

// One run's Table 7 columns, at its tail node (the last to finish).
struct Derived {
  int tail = 0;
  double fc_rate = 0, read_prs_per_packet = 0, resp_prs_per_packet = 0, hit_rate = 0;
  double goodput = 0, line_util = 0, traffic_vs_su = 0, su_opt_us = 0, time_us = 0;
  double speedup_su = 0, speedup_sa = 0, prs_vs_sa = 0;
  std::uint64_t failed_wrs = 0, requested = 0;  // over every node
  std::uint64_t ir_reads = 0, ir_hits = 0;      // reads to owners in other racks, at the ToRs
};

Derived derive(const RunResult& r, const MatrixFacts& f, const Workload& w, const Baselines& b,
               double line_Bps) {
  Derived d;
  for (std::size_t p = 0; p < r.nodes.size(); ++p)
    if (r.nodes[p].done_ps > r.nodes[static_cast<std::size_t>(d.tail)].done_ps)
      d.tail = static_cast<int>(p);
  const NodeResult& t = r.nodes[static_cast<std::size_t>(d.tail)];
  const double time_s = static_cast<double>(t.done_ps) * 1e-12;
  const std::uint64_t remote = t.requested - t.local;
  d.time_us = time_s * 1e6;
  d.fc_rate = remote ? static_cast<double>(t.filtered + t.coalesced) / remote : 0;
  d.read_prs_per_packet = t.nic.prs_per_packet(0);
  d.resp_prs_per_packet = t.nic.prs_per_packet(1);
  std::uint64_t lookups = 0, hits = 0;
  for (const auto& cs : r.caches) lookups += cs.lookups, hits += cs.hits;
  for (const TorStats& ts : r.tors)
    d.ir_reads += ts.inter_rack_reads, d.ir_hits += ts.inter_rack_hits;
  for (const NodeResult& nr : r.nodes) d.failed_wrs += nr.failed_wrs, d.requested += nr.requested;
  d.hit_rate = lookups ? static_cast<double>(hits) / lookups : 0;
  const double useful = static_cast<double>(f.unique_remote[d.tail]) * w.prop_bytes;
  d.goodput = time_s > 0 ? useful / time_s / line_Bps : 0;
  d.line_util = time_s > 0 ? static_cast<double>(t.rx_wire_bytes) / time_s / line_Bps : 0;
  const double own = static_cast<double>(w.row_offsets[d.tail + 1] - w.row_offsets[d.tail]);
  const double su_bytes = (static_cast<double>(f.rows) - own) * w.prop_bytes;
  d.traffic_vs_su = t.rx_wire_bytes + t.tx_wire_bytes
                        ? su_bytes / static_cast<double>(t.rx_wire_bytes + t.tx_wire_bytes)
                        : 0;
  d.su_opt_us = b.su_opt_us;
  d.speedup_su = d.time_us > 0 ? b.su_opt_us / d.time_us : 0;
  d.speedup_sa = d.time_us > 0 ? b.sa_opt_us / d.time_us : 0;
  d.prs_vs_sa =
      t.sent ? static_cast<double>(f.sa_opt_prs[static_cast<std::size_t>(d.tail)]) / t.sent : 0;
  return d;
}

// Checks against what the matrix alone says (analytic), per node; empty when all hold.
std::vector<std::string> check_run(const RunResult& r, const Derived& d, const MatrixFacts& f,
                                   const Workload& w, const LadderStep& s) {
  std::vector<std::string> failures;
  const bool filter_on = (s.flags & NS_CTX_NO_FILTER) == 0;
  const bool coalesce_on = (s.flags & NS_CTX_NO_COALESCE) == 0;
  for (std::size_t p = 0; p < r.nodes.size(); ++p) {
    const NodeResult& nr = r.nodes[p];
    const std::string at = " at node " + std::to_string(p);
    if (nr.requested - nr.local != f.remote_nnz[p])
      failures.push_back("remote idxs walked " + std::to_string(nr.requested - nr.local) +
                         " != remote nonzeros " + std::to_string(f.remote_nnz[p]) + at);
    if (!filter_on && !coalesce_on && nr.sent != f.remote_nnz[p])
      failures.push_back("SA PRs " + std::to_string(nr.sent) + " != analytic " +
                         std::to_string(f.remote_nnz[p]) + at);
    if (coalesce_on && nr.sent != f.unique_remote[p])
      failures.push_back("PRs " + std::to_string(nr.sent) + " != distinct remote columns " +
                         std::to_string(f.unique_remote[p]) + at);
    if (nr.sent < f.unique_remote[p] || nr.sent > f.remote_nnz[p])
      failures.push_back("PRs " + std::to_string(nr.sent) + " outside [distinct, nonzeros]" + at);
    if (nr.rx_wire_bytes < f.unique_remote[p] * w.prop_bytes)
      failures.push_back("received " + std::to_string(nr.rx_wire_bytes) + " B < the useful bytes " +
                         std::to_string(f.unique_remote[p] * w.prop_bytes) + at);
  }
  if (r.wrong_properties != 0 || r.wrong_at_completion != 0)
    failures.push_back(std::to_string(r.wrong_properties + r.wrong_at_completion) +
                       " gathered properties differ from the owner's");
  if (d.failed_wrs != 0) failures.push_back(std::to_string(d.failed_wrs) + " work requests failed");
  // The fabric carries what the engines say they sent (one 50 B upper-layer header per
  // packet while a packet fits one MTU).
  for (std::size_t p = 0; p < r.nodes.size() && w.prop_bytes <= 1024; ++p) {
    const NodeResult& nr = r.nodes[p];
    if (nr.tx_wire_bytes != nr.nic.wire_bytes[0] + nr.nic.wire_bytes[1])
      failures.push_back("uplink carried " + std::to_string(nr.tx_wire_bytes) +
                         " B, the engine counted " +
                         std::to_string(nr.nic.wire_bytes[0] + nr.nic.wire_bytes[1]) + " at node " +
                         std::to_string(p));
  }
  return failures;
}

void print_run(const LadderStep& s, const Derived& d, double wall) {
  std::printf("%-10s %9.2f %6.1f %9.2f %9.2f %7.1f %8.1f %9.1f %10.1f %11.2f %11.2f %9.2f %12.0f\n",
              s.name, d.time_us, 100 * d.fc_rate, d.read_prs_per_packet, d.resp_prs_per_packet,
              100 * d.hit_rate, 100 * d.goodput, 100 * d.line_util, d.traffic_vs_su, d.speedup_su,
              d.speedup_sa, wall, wall > 0 ? static_cast<double>(d.requested) / wall : 0.0);
}

// The switches' view when there are several racks: the Property Cache on reads to other racks
// and what crossed between racks.
void print_switches(const RunResult& r, const Derived& d) {
  std::uint64_t lookups = 0, hits = 0;
  for (const auto& cs : r.caches) lookups += cs.lookups, hits += cs.hits;
  std::printf(
      "  switches: cache hits %llu of %llu reads to other racks (%.1f%%), %llu of %llu "
      "in all; inter-rack %llu B in %llu packets\n",
      static_cast<unsigned long long>(d.ir_hits), static_cast<unsigned long long>(d.ir_reads),
      d.ir_reads ? 100.0 * d.ir_hits / d.ir_reads : 0.0, static_cast<unsigned long long>(hits),
      static_cast<unsigned long long>(lookups),
      static_cast<unsigned long long>(r.inter_rack.wire_bytes),
      static_cast<unsigned long long>(r.inter_rack.packets));
}

void print_checks(const std::vector<std::string>& failures, bool verify) {
  std::printf("  checks: %s", failures.empty() ? "ok (PR counts, useful-bytes minimum" : "FAILED");
  if (failures.empty())
    std::printf("%s)\n", verify ? ", every property" : "");
  else
    std::printf(" (%zu), first: %s\n", failures.size(), failures.front().c_str());
}

// Where the tail node's virtual time went: its units (client walk, server answers), its
// links (serialising, queueing) and its PRs in flight (Pending PR Tables, round trips).
void print_tail(const RunResult& r, const Derived& d, const ClusterConfig& c) {
  const NodeResult& t = r.nodes[static_cast<std::size_t>(d.tail)];
  const double us = 1e-6;
  const double cyc_us = 1.0 / (c.node.clock_ghz * 1e3);
  std::uint64_t max_served = 0;
  std::size_t hub = 0;
  for (std::size_t p = 0; p < r.nodes.size(); ++p)
    if (r.nodes[p].served > max_served) max_served = r.nodes[p].served, hub = p;
  std::printf(
      "  tail %d: wrs %llu, sent %llu, served %llu | busy %.1f us (client %.1f, server %.1f) "
      "| PRs in flight avg %.0f max %llu, stalls %llu, PR latency %.2f us | up %.0f%% "
      "(wait %.2f us/pkt) down %.0f%% (wait %.2f us/pkt) | most served: node %d, %llu, "
      "done %.1f us\n",
      d.tail, static_cast<unsigned long long>(t.wrs), static_cast<unsigned long long>(t.sent),
      static_cast<unsigned long long>(t.served), t.busy_ps * us, t.client_cycles * cyc_us,
      t.server_cycles * cyc_us, t.done_ps ? t.outstanding_ps / static_cast<double>(t.done_ps) : 0.0,
      static_cast<unsigned long long>(t.max_outstanding),
      static_cast<unsigned long long>(t.pending_stalls), t.mean_pr_latency_ps() * us,
      100.0 * t.tx_busy_ps / std::max<double>(1, t.done_ps),
      t.tx_packets ? t.tx_wait_ps * us / t.tx_packets : 0.0,
      100.0 * t.rx_busy_ps / std::max<double>(1, t.done_ps),
      t.rx_packets ? t.rx_wait_ps * us / t.rx_packets : 0.0, static_cast<int>(hub),
      static_cast<unsigned long long>(max_served), r.nodes[hub].done_ps * us);
}

netsparse::bench::Json run_json(const RunSpec& spec, const Derived& d, const RunResult& r,
                                bool checks_ok, double wall) {
  return {{"mechanisms", spec.step.name},
          {"units", spec.units},
          {"nic_delay_cycles", spec.delay},
          {"tail_node", d.tail},
          {"time_us", d.time_us},
          {"fc_rate", d.fc_rate},
          {"read_prs_per_packet", d.read_prs_per_packet},
          {"response_prs_per_packet", d.resp_prs_per_packet},
          {"pcache_hit_rate", d.hit_rate},
          {"pcache_inter_rack_reads", d.ir_reads},
          {"pcache_inter_rack_hits", d.ir_hits},
          {"inter_rack_bytes", r.inter_rack.wire_bytes},
          {"inter_rack_packets", r.inter_rack.packets},
          {"goodput", d.goodput},
          {"line_utilisation", d.line_util},
          {"traffic_vs_su", d.traffic_vs_su},
          {"su_opt_us", d.su_opt_us},
          {"speedup_over_su_opt", d.speedup_su},
          {"speedup_over_sa_opt", d.speedup_sa},
          {"prs_vs_sa", d.prs_vs_sa},
          {"checks_ok", checks_ok},
          {"events", r.events},
          {"simulated_prs", d.requested},
          {"wall_s", wall},
          {"failed_wrs", d.failed_wrs}};
}

// The per-node engine counters of one run, in the text netsparse_emulate_mpi writes.
void write_run_traffic(std::ofstream& traffic, const RunResult& r, std::uint32_t K,
                       const LadderStep& s) {
  std::vector<NodeTraffic> per_node;
  for (const NodeResult& nr : r.nodes) per_node.push_back(traffic_of(nr));
  traffic << "K " << K << " mechanisms " << s.name << "\n";
  write_traffic(traffic, per_node);
  traffic.flush();
}

// Writes the JSON document so far (`complete` false while steps remain).
bool write_json(const std::string& path, netsparse::bench::Json doc, double load_s, bool complete) {
  if (path.empty()) return true;
  doc["load_s"] = load_s;
  doc["complete"] = complete;
  const std::string problem = netsparse::bench::write_json(path, doc, -1);
  if (!problem.empty()) {
    std::cerr << "netsparse_emulate: " << problem << "\n";
    return false;
  }
  return true;
}

netsparse::bench::Json document(const Options& o, std::uint32_t batch, const MatrixFacts& f,
                                const Table1& t1) {
  netsparse::bench::Json doc;
  doc["matrix"] = o.matrix;
  doc["nodes"] = o.nodes;
  doc["racks"] = o.racks;
  doc["ranks_per_node"] = o.ranks_per_node;
  doc["rack_waves"] = o.rack_waves;
  doc["batch"] = batch;
  doc["table4_distinct_destinations"] = f.table4;
  doc["table1"] = {{"useful_per_node", t1.useful},
                   {"su_redundant_per_node", t1.su_redundant},
                   {"sa_redundant_per_node", t1.sa_redundant}};
  doc["experiments"] = netsparse::bench::Json::array();
  return doc;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const auto t_load = std::chrono::steady_clock::now();
  netsparse::CsrMatrix a;
  Workload w;
  try {
    a = load_matrix_spec(o.matrix, o.seed);
    w = gather_workload(a, o.nodes, 4, o.ranks_per_node);
  } catch (const std::exception& e) {
    std::cerr << "netsparse_emulate: " << o.matrix << ": " << e.what() << "\n";
    return 1;
  }
  w.verify = o.verify;
  const MatrixFacts facts = analyse(a, w, o);
  const double load_s = seconds_since(t_load);
  const Table1 t1 = table1(facts, w, o.nodes);
  print_matrix_tables(o, a, facts, t1);
  const std::uint32_t batch = o.batch != 0
                                  ? o.batch
                                  : auto_batch(a.nnz() / static_cast<std::uint64_t>(o.nodes),
                                               *std::max_element(o.units.begin(), o.units.end()));
  std::printf("batch %u idxs per work request%s\n", batch, o.batch != 0 ? "" : " (auto)");
  a = netsparse::CsrMatrix{};  // the idx lists are all the emulation needs
  const std::vector<RunSpec> runs = run_specs(o, chosen_steps(o));
  std::ofstream traffic;
  if (!o.traffic.empty()) {
    traffic.open(o.traffic);
    if (!traffic) {
      std::cerr << "netsparse_emulate: cannot write " << o.traffic << "\n";
      return 1;
    }
  }
  netsparse::bench::Json doc = document(o, batch, facts, t1);
  const double line_Bps = FabricConfig{}.link_gbps * 1e9 / 8;
  const bool sweep = o.units.size() > 1 || o.delays.size() > 1;
  int failed_checks = 0;
  for (std::size_t ki = 0; ki < o.Ks.size(); ++ki) {
    const std::uint32_t K = o.Ks[ki];
    w.prop_bytes = K * 4;
    const Baselines base = baselines(facts, w, o, K, line_Bps);
    print_k_header(base, facts, w, o, K, line_Bps);
    doc["experiments"].push_back({{"K", K},
                                  {"su_opt_us", base.su_opt_us},
                                  {"sa_opt_us", base.sa_opt_us},
                                  {"sa_item_ns", base.item_ns},
                                  {"sa_cores", o.sa_cores},
                                  {"runs", netsparse::bench::Json::array()}});
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const RunSpec& spec = runs[k];
      if (sweep) std::printf("units %d, NIC delay %u cycles:\n", spec.units, spec.delay);
      const ClusterConfig c = cluster_config(o, spec, batch);
      const auto t0 = std::chrono::steady_clock::now();
      RunResult r;
      try {
        r = Cluster(c).run(w);
      } catch (const std::exception& e) {
        std::cerr << "netsparse_emulate: " << e.what() << "\n";
        return 1;
      }
      const double wall = seconds_since(t0);
      const Derived d = derive(r, facts, w, base, line_Bps);
      print_run(spec.step, d, wall);
      if (spec.step.tor && o.racks > 1) print_switches(r, d);
      const std::vector<std::string> failures = check_run(r, d, facts, w, spec.step);
      if (traffic.is_open()) write_run_traffic(traffic, r, K, spec.step);
      print_checks(failures, o.verify);
      failed_checks += failures.empty() ? 0 : 1;
      print_tail(r, d, c);
      doc["experiments"].back()["runs"].push_back(run_json(spec, d, r, failures.empty(), wall));
      // Each step's results are kept as soon as it ends: a long ladder loses nothing if stopped.
      std::fflush(stdout);
      const bool last = k + 1 == runs.size() && ki + 1 == o.Ks.size();
      if (!write_json(o.json, doc, load_s, last)) return 1;
    }
  }
  return failed_checks != 0 ? 3 : 0;
}
