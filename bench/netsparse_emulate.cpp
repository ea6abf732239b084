// netsparse_emulate: a NetSparse cluster emulated in one process (lib/emulate), printing the
// paper's Table 4/7/8-style statistics for a matrix (docs/emulation.md).
//
//   netsparse_emulate --nodes 128 --racks 8 --matrix gen:kron:16 --K 16 --mechanisms all
//
// --matrix gen:kron:... | gen:road:... | gen:stencil:... | gen:web:... (the library's generator
//          forms, netsparse/generator_spec.hpp) | a Matrix Market file | paper:arabic,
//          paper:arabic-kron, paper:europe, paper:queen (Table 6's matrices by shape)
// --mechanisms rig | filter | coalesce | nic | switch (cumulative, as Table 8) | all (the ladder)
// --kernel spmm (only: the gather is the same for SDDMM; SpMV is K = 1)
// --seed S (generator seed) --batch N|auto (idxs per work request) --units U,.. (Fig. 16)
// --delay CYCLES,.. (NIC concatenation delay, Fig. 17) --json FILE
// --grid C (engine steps start on a grid of C cycles; 0 = at every arrival)
// --pcache SIZE,.. (Property Cache bytes per switch, 0 = none, inf = every row; Fig. 18)
// --scaling (Fig. 13: SpMM strong scaling 1, 2, 4, .. nodes with --compute-gflops G or --calibrate)
// --tables (Tables 2 and 3: SA on 2 nodes)
// --fig19 (active nodes over time under the equal-rows, nnz-balanced and METIS partitions)
// --topology leafspine|hyperx|dragonfly,.. --fig22 (the three topologies side by side)
// --fig15 [--link-gbps G] (Flare SC '21 Fig. 15: allreduce algorithms on the fabric's links, by
//          size and density; no matrix)
// --K 1,16,128 runs every K (Fig. 12); --sa-cores / --sa-item-ns: the SAOpt model; --verify
// Checks (exit status 3 when one fails): the rig step sends exactly one PR per remote nonzero
// (SA's analytic count), steps with coalescing exactly one per distinct remote column, every
// node receives at least its useful bytes, no gathered property differs (--verify).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "emulate/allreduce_model.hpp"
#include "emulate/cluster.hpp"
#include "emulate/workload.hpp"
#include "netsparse/autotune.hpp"
#include "netsparse/local_kernels.hpp"
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
  // Property Cache bytes per switch, ascending (0 = no cache, kInfiniteCache = every row; the
  // paper's 32 MB by default); pcache_sweep when --pcache gave them (Fig. 18).
  std::vector<std::uint64_t> pcache = {std::uint64_t{32} << 20};
  bool pcache_sweep = false;
  // Fig. 13: strong scaling 1, 2, 4, .. nodes with the compute model (GFLOP/s per node, from
  // --compute-gflops or measured by --calibrate), instead of the ladder.
  bool scaling = false, calibrate = false;
  bool tables = false;  // Tables 2 and 3 (SA at 2 nodes) instead of the ladder
  double compute_gflops = 0;
  std::uint32_t grid = 32;  // NodeModel::step_grid_cycles
  bool rack_waves = false;  // ClusterConfig::rack_waves
  // The fabrics each run is made on (a list sweeps them: Fig. 22 with --fig22).
  std::vector<Topology> topologies = {Topology::kLeafSpine};
  bool topology_sweep = false;
  bool fig19 = false;  // Fig. 19: active nodes over time per row partition, instead of the ladder
  // Flare's Fig. 15: the allreduce model (lib/emulate/allreduce_model.hpp) instead of a gather;
  // 64 nodes in 8 racks and 100 Gbps links unless --nodes / --racks / --link-gbps say otherwise.
  bool fig15 = false;
  std::uint32_t link_gbps = 0;  // 0 = the fabric's default (--fig15: Flare's 100)
  bool nodes_given = false, racks_given = false;
  std::string json;
  std::string traffic;  // per-node engine counters, the text netsparse_emulate_mpi writes
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "netsparse_emulate: " << why << " (see --help)\n";
  std::exit(2);
}

constexpr std::uint64_t kInfiniteCache = ~std::uint64_t{0};
// The smallest Property Cache: one set of 16 lines of 512 B (sw::PropertyCacheConfig).
constexpr std::uint64_t kSmallestCache = 16 * 512;

// --pcache: sizes per switch, each 0, inf or a number of bytes with an optional K, M or G
// (binary) suffix; sorted ascending with 0 added (the no-cache run is every speedup's base).
std::vector<std::uint64_t> pcache_list(const std::string& value) {
  std::vector<std::uint64_t> sizes{0};
  for (const std::string& item : netsparse::bench::split(value)) {
    if (item == "inf") {
      sizes.push_back(kInfiniteCache);
      continue;
    }
    std::size_t used = 0;
    unsigned long long n = 0;
    try {
      n = std::stoull(item, &used);
    } catch (const std::exception&) {
      usage("--pcache: '" + item + "' is not a size (0, inf, or bytes with K, M or G)");
    }
    const std::string suffix = item.substr(used);
    const int shift = suffix.empty()  ? 0
                      : suffix == "K" ? 10
                      : suffix == "M" ? 20
                      : suffix == "G" ? 30
                                      : -1;
    if (shift < 0 || item[0] == '-' || n > (std::uint64_t{1} << 40) >> shift)
      usage("--pcache: '" + item + "' is not a size (0, inf, or bytes with K, M or G up to 1T)");
    const std::uint64_t bytes = std::uint64_t{n} << shift;
    if (bytes != 0 && bytes < kSmallestCache)
      usage("--pcache: " + item + " is below the smallest cache (" +
            std::to_string(kSmallestCache) + " B: one set of 16 lines of 512 B)");
    sizes.push_back(bytes);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// --topology: names, comma-separated, each once.
std::vector<Topology> topology_list(const std::string& value) {
  std::vector<Topology> out;
  for (const std::string& item : netsparse::bench::split(value)) {
    Topology t{};
    if (!topology_from_name(item, t))
      usage("--topology: '" + item + "' is not a topology (leafspine, hyperx or dragonfly)");
    if (std::find(out.begin(), out.end(), t) != out.end())
      usage("--topology: '" + item + "' is given twice");
    out.push_back(t);
  }
  if (out.empty()) usage("--topology needs a value (leafspine, hyperx or dragonfly)");
  return out;
}

std::string size_text(std::uint64_t bytes) {
  if (bytes == kInfiniteCache) return "inf";
  if (bytes != 0 && bytes % (std::uint64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KB";
  return std::to_string(bytes) + " B";
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
  --matrix SPEC        the library's generators (gen:kron:S[:EDGE_FACTOR[:SEED]], default
                       gen:kron:16; gen:road:W or gen:road:W:H[:LONG_FRACTION[:SEED[:GRID]]];
                       gen:stencil:N or gen:stencil:NX:NY:NZ[:DOF];
                       gen:web:ROWS[:MEAN_DEGREE[:LOCAL_FRACTION[:SEED]]]; SEED: --seed when
                       left out), a Matrix Market file, or the paper's Table 6 matrices by
                       shape (rows, nonzeros per row): paper:arabic (gen:web:22744080:32:0.9),
                       paper:arabic-kron (gen:kron:24:40), paper:europe
                       (gen:road:7150:7150:0.01:SEED:0.53), paper:queen
                       (gen:stencil:111:111:111:3); generated a node's rows at a time, only
                       the idx lists kept (8 B a nonzero)
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
  --pcache LIST        Property Cache bytes per switch (default 32M; K, M, G suffixes, 0 = no
                       cache, inf = room for every row); a list sweeps it in ascending order
                       with the no-cache run added (Fig. 18: hit rate, inter-rack bytes and
                       the speedup over no cache per size)
  --scaling            Fig. 13 instead of the ladder: end-to-end SpMM strong scaling on 1, 2,
                       4, .. --nodes nodes (racks of --nodes / --racks nodes), the compute
                       model below overlapped with each node's gather; SUOpt, SAOpt,
                       NetSparse (every mechanism, emulated) and ideal (no communication)
                       over one node
  --compute-gflops G   the compute model: a node's SpMM rate, GFLOP/s (2 nnz K flops)
  --calibrate          the compute model measured here: the library's tiled SpMM (SPADE-Base
                       tiling, OpenMP threads as set) timed on the whole matrix per K
  --topology LIST      the fabric: leafspine (default: racks of nodes under ToRs, a
                       non-blocking layer of spines), hyperx (the racks' routers on a 2-D
                       grid, all-to-all links in each dimension) or dragonfly (groups of
                       routers all-to-all inside, one global link between every two groups);
                       minimal routing, every link as leaf-spine's; a list sweeps them
  --fig22              Fig. 22: --topology leafspine,hyperx,dragonfly (time, speedups, packets
                       by router-to-router links crossed, link loads per topology)
  --fig15              Flare (SC '21) Fig. 15 instead of a gather, no matrix: the allreduce of
                       4 KiB .. 256 MiB of fp32 (and Flare's 100 MiB) on --nodes (default 64)
                       in --racks (default 8) of a leaf-spine, modelled message by message on
                       its links: ring, lib/collectives' host aggregation, recursive doubling,
                       Flare's in-switch aggregation, and the sparse SparCML recursive doubling
                       and in-switch at densities 0.1, 0.2, 1, 10 and 50 %; time, traffic
                       (bytes summed over links) and the busiest link's bytes
  --link-gbps G        --fig15: every link's rate (default 100, Flare's)
  --fig19              Fig. 19 instead of the ladder: one gather (the first --mechanisms step)
                       under the equal-rows, nnz-balanced and METIS (k-way, serial) row
                       partitions; prints the active nodes (not yet done with their own
                       requests and answers) per time bucket, each partition's tail finish
                       time and the tail's remote bytes
  --tables             Tables 2 and 3 instead of the ladder: SA (the rig step: no filter,
                       coalescing or concatenation) emulated on 2 nodes of one rack; Table 2
                       its transfer rate, line utilisation and goodput at K = 32 with SAOpt's
                       software time, Table 3 the headers' share of SA's bytes per K
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
  app.add_option_function<std::string>("--pcache", [&](const std::string& v) {
    o.pcache = pcache_list(v);
    o.pcache_sweep = true;
  });
  app.add_flag("--scaling", o.scaling);
  app.add_flag("--calibrate", o.calibrate);
  app.add_flag("--tables", o.tables);
  app.add_flag("--fig19", o.fig19);
  app.add_flag("--fig15", o.fig15);
  app.add_option("--link-gbps", o.link_gbps)->check(cli::Range(1, 1 << 20));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    o.nodes_given = o.nodes_given || arg == "--nodes" || arg.rfind("--nodes=", 0) == 0;
    o.racks_given = o.racks_given || arg == "--racks" || arg.rfind("--racks=", 0) == 0;
  }
  bool fig22 = false;
  std::string topology;
  app.add_flag("--fig22", fig22);
  app.add_option("--topology", topology);
  app.add_option("--compute-gflops", o.compute_gflops)->check(cli::Range(0.0, 1e9));
  app.add_option("--grid", o.grid);
  app.add_flag("--rack-waves", o.rack_waves);
  app.add_option("--json", o.json);
  app.add_option("--traffic", o.traffic);
  const int code = nb::finish_command_line(nb::parse_command_line(app, argc, argv),
                                           "netsparse_emulate", kHelp, true);
  if (code >= 0) std::exit(code);
  if (o.kernel != "spmm") usage("only --kernel spmm is emulated");
  if (fig22 && !topology.empty()) usage("--fig22 is --topology leafspine,hyperx,dragonfly");
  if (fig22)
    o.topologies = {Topology::kLeafSpine, Topology::kHyperX, Topology::kDragonfly};
  else if (!topology.empty())
    o.topologies = topology_list(topology);
  o.topology_sweep = o.topologies.size() > 1;
  if (o.fig19 && (o.scaling || o.tables || o.topology_sweep || o.units.size() > 1 ||
                  o.delays.size() > 1 || o.pcache_sweep || o.Ks.size() > 1))
    usage(
        "--fig19 runs one K, --units, --delay, --pcache and --topology (and not with "
        "--scaling or --tables)");
  if (o.fig15 && (o.scaling || o.tables || o.fig19 || fig22 || o.topology_sweep ||
                  o.topologies[0] != Topology::kLeafSpine))
    usage("--fig15 runs alone (no --scaling, --tables, --fig19, --fig22) on the leaf-spine fabric");
  if (o.link_gbps != 0 && !o.fig15) usage("--link-gbps is --fig15's link rate");
  if (o.fig15) {
    if (!o.nodes_given) o.nodes = 64;
    if (!o.racks_given) o.racks = 8;
    if (o.link_gbps == 0) o.link_gbps = 100;
  }
  if (o.fig19 && o.ranks_per_node != 1)
    usage("--fig19 partitions the rows over the nodes itself: no --ranks-per-node");
  if ((o.scaling || o.tables) && (o.topology_sweep || o.topologies[0] != Topology::kLeafSpine))
    usage("--scaling and --tables run on the leaf-spine fabric");
  for (std::uint32_t k : o.Ks)
    if (k == 0) usage("--K must be >= 1");
  if (o.Ks.empty() || o.sa_cores < 1) usage("--K needs values, --sa-cores >= 1");
  for (int u : o.units)
    if (u < 1 || u > 64) usage("--units values must be in [1, 64]");
  if (o.units.empty() || o.delays.empty()) usage("--units and --delay need values");
  if (o.scaling && o.tables) usage("--scaling and --tables are separate runs");
  if (o.scaling && (o.calibrate == (o.compute_gflops > 0)))
    usage("--scaling needs its compute model: either --calibrate or --compute-gflops G > 0");
  if (!o.scaling && (o.calibrate || o.compute_gflops > 0))
    usage("--calibrate and --compute-gflops are the compute model of --scaling");
  if (o.scaling &&
      (o.units.size() > 1 || o.delays.size() > 1 || o.pcache_sweep || o.mechanisms != "switch"))
    usage("--scaling runs NetSparse with every mechanism at one --units, --delay and --pcache");
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

// Reads the columns from the idx lists (node p's nonzeros in CSR order from row_ptr[first row of
// p]), so that it runs without the matrix (pattern_workload).
MatrixFacts analyse(std::span<const std::int64_t> row_ptr, const Workload& w, const Options& o) {
  const std::uint64_t n = w.row_offsets.back();  // square
  const auto N = static_cast<std::size_t>(o.nodes);
  MatrixFacts f;
  f.rows = n;
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
    const std::uint64_t* cols = w.idxs[p].data() - row_ptr[b];
    for (std::uint64_t r = b; r < e; ++r) {
      const std::uint64_t core = (r - b) * cores / std::max<std::uint64_t>(1, e - b);
      const auto stamp = static_cast<std::uint32_t>(p * cores + core);
      for (auto j = row_ptr[r]; j < row_ptr[r + 1]; ++j) {
        const std::uint64_t c = cols[j];
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

void print_matrix_tables(const Options& o, std::uint64_t nnz, const MatrixFacts& f,
                         const Table1& t1) {
  std::printf("matrix %s: %llu rows, %llu nonzeros; %d nodes in %d racks%s\n", o.matrix.c_str(),
              static_cast<unsigned long long>(f.rows), static_cast<unsigned long long>(nnz),
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
  std::vector<double> su_node_us, sa_node_us;  // every node's (Fig. 13 needs them all)
};

Baselines baselines(const MatrixFacts& f, const Workload& w, const Options& o, std::uint32_t K,
                    double line_Bps) {
  const auto N = static_cast<std::size_t>(o.nodes);
  Baselines b;
  // SUOpt: every node receives all its remote rows at line rate, no headers; the node with the
  // most ends it.
  for (std::size_t p = 0; p < N; ++p) {
    const std::uint64_t remote_rows = f.rows - (w.row_offsets[p + 1] - w.row_offsets[p]);
    b.su_node_us.push_back(static_cast<double>(remote_rows) * w.prop_bytes / line_Bps * 1e6);
    b.su_opt_us = std::max(b.su_opt_us, b.su_node_us.back());
  }
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
    b.sa_node_us.push_back(t);
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
  std::uint64_t pcache;  // Property Cache bytes per switch (0 = none)
  Topology topology = Topology::kLeafSpine;
};

// Every (units, delay, ladder step) of the run, in the order they run.
std::vector<RunSpec> run_specs(const Options& o, const std::vector<LadderStep>& steps) {
  std::vector<RunSpec> runs;
  for (Topology t : o.topologies)
    for (int u : o.units)
      for (std::uint32_t d : o.delays)
        for (std::uint64_t pc : o.pcache)
          for (const LadderStep& st : steps) runs.push_back({st, u, d, pc, t});
  return runs;
}

// An "infinite" Property Cache: four times the bytes of every row (at least one 512 B slot per
// row), so that only the rare conflict misses of a 16-way cache remain.
std::uint64_t infinite_cache_bytes(const Workload& w) {
  const std::uint64_t rows = w.row_offsets.back();
  const std::uint64_t slot = std::max<std::uint64_t>(16, w.prop_bytes);
  return std::max(kSmallestCache,
                  (4 * rows * slot + kSmallestCache - 1) / kSmallestCache * kSmallestCache);
}

ClusterConfig cluster_config(const Options& o, const RunSpec& spec, std::uint32_t batch,
                             const Workload& w) {
  ClusterConfig c;
  c.fabric.nodes = o.nodes;
  c.fabric.racks = o.racks;
  c.fabric.topology = spec.topology;
  c.node.flags = spec.step.flags;
  c.node.batch = batch;
  c.node.step_grid_cycles = o.grid;
  c.node.client_units = c.node.server_units = spec.units;
  c.node.delay_cycles = spec.delay;
  c.tor.enabled = spec.step.tor;
  c.tor.cache = spec.pcache != 0;
  if (spec.pcache != 0)
    c.tor.cache_config.capacity_bytes =
        spec.pcache == kInfiniteCache ? infinite_cache_bytes(w) : spec.pcache;
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
  // Minimal routing: no packet crosses more router-to-router links than the topology's bound.
  for (std::size_t h = static_cast<std::size_t>(r.router_diameter) + 1;
       h < r.delivered_by_router_links.size(); ++h)
    if (r.delivered_by_router_links[h] != 0)
      failures.push_back(std::to_string(r.delivered_by_router_links[h]) + " packets crossed " +
                         std::to_string(h) + " router-to-router links (bound " +
                         std::to_string(r.router_diameter) + ")");
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

// Fig. 22: the fabric's view of one run: packets by router-to-router links crossed (minimal
// routing: never above the topology's bound) and the load of the router-to-router links.
void print_fig22(const RunSpec& spec, const RunResult& r, const Derived& d,
                 const ClusterConfig& c) {
  EventQueue probe;
  const Fabric shape(probe, c.fabric);
  std::string layout;
  if (spec.topology == Topology::kHyperX)
    layout = std::to_string(shape.hyperx_x()) + " x " +
             std::to_string(c.fabric.racks / shape.hyperx_x()) + " routers";
  else if (spec.topology == Topology::kDragonfly)
    layout = std::to_string(c.fabric.racks / shape.dragonfly_group_size()) + " groups of " +
             std::to_string(shape.dragonfly_group_size()) + " routers";
  else
    layout =
        std::to_string(c.fabric.racks) + " ToRs, " + std::to_string(shape.spines()) + " spines";
  std::string hops;
  int max_hops = 0;
  std::uint64_t delivered = 0;
  for (std::size_t h = 0; h < r.delivered_by_router_links.size(); ++h) {
    delivered += r.delivered_by_router_links[h];
    if (r.delivered_by_router_links[h] != 0) max_hops = static_cast<int>(h);
  }
  for (int h = 0; h <= std::max(max_hops, r.router_diameter); ++h) {
    if (h != 0) hops += '/';
    hops += std::to_string(r.delivered_by_router_links[static_cast<std::size_t>(h)]);
  }
  const double time_ps = d.time_us * 1e6;
  std::printf(
      "  fig 22: %s (%s, %d nodes): time %.2f us, speedup over SUOpt %.2f, over SAOpt %.2f; "
      "%llu packets delivered, by router-to-router links 0..%d: %s (max %d, bound %d); %llu "
      "router-to-router links carried %llu B in %llu packet-hops, busiest %llu B (%.0f%% busy), "
      "inter-rack %llu B\n",
      topology_name(spec.topology), layout.c_str(), c.fabric.nodes, d.time_us, d.speedup_su,
      d.speedup_sa, static_cast<unsigned long long>(delivered),
      std::max(max_hops, r.router_diameter), hops.c_str(), max_hops, r.router_diameter,
      static_cast<unsigned long long>(r.router_link_count),
      static_cast<unsigned long long>(r.router_links.wire_bytes),
      static_cast<unsigned long long>(r.router_links.packets),
      static_cast<unsigned long long>(r.busiest_router_link.wire_bytes),
      time_ps > 0 ? 100.0 * static_cast<double>(r.busiest_router_link.busy_ps) / time_ps : 0.0,
      static_cast<unsigned long long>(r.inter_rack.wire_bytes));
}

netsparse::bench::Json run_json(const RunSpec& spec, const Derived& d, const RunResult& r,
                                bool checks_ok, double wall) {
  std::uint64_t prs_sent = 0, prs_answered = 0;
  for (const NodeResult& n : r.nodes) prs_sent += n.sent, prs_answered += n.responses;
  return {
      {"mechanisms", spec.step.name},
      {"topology", topology_name(spec.topology)},
      {"prs_sent", prs_sent},
      {"prs_answered", prs_answered},
      {"delivered_by_links", r.delivered_by_links},
      {"delivered_by_router_links", r.delivered_by_router_links},
      {"router_diameter", r.router_diameter},
      {"router_link_count", r.router_link_count},
      {"router_link_bytes", r.router_links.wire_bytes},
      {"router_link_packets", r.router_links.packets},
      {"busiest_router_link_bytes", r.busiest_router_link.wire_bytes},
      {"busiest_router_link_busy",
       d.time_us > 0 ? static_cast<double>(r.busiest_router_link.busy_ps) * 1e-6 / d.time_us : 0.0},
      {"units", spec.units},
      {"pcache_bytes",
       spec.pcache == kInfiniteCache ? std::int64_t{-1} : static_cast<std::int64_t>(spec.pcache)},
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

// --calibrate: this machine's SpMM rate with the library's own kernel (SPADE-Base tiling, fp32),
// on the whole matrix: the best of 3 timed runs after a warm-up, in GFLOP/s (2 nnz K flops).
double measured_gflops(const netsparse::CsrMatrix& a, std::uint32_t K) {
  const netsparse::TiledMatrix tiled(a, netsparse::base_config());
  const auto k = static_cast<int>(K);
  std::vector<float> b(static_cast<std::size_t>(a.n_cols) * K, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(a.n_rows) * K);
  const netsparse::DenseConstView view{b.data(), 0, k, a.n_cols};
  double best = 1e300;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    netsparse::spmm(tiled, view, c.data(), k, k, false);
    if (rep > 0) best = std::min(best, seconds_since(t0));
  }
  return 2.0 * static_cast<double>(a.nnz()) * K / best * 1e-9;
}

// Fig. 13 at one node count: the gather's time per node for each scheme and the end-to-end
// time under the compute model.
struct ScalingPoint {
  int nodes = 0, racks = 0;
  double su_us = 0, sa_us = 0, ns_us = 0, ideal_us = 0;  // end-to-end, the slowest node
  double ns_comm_us = 0;                                 // NetSparse's gather, its tail node
  std::uint64_t useful_bytes = 0, rx_wire_bytes = 0, remote_nnz = 0, prs = 0;
  bool checks_ok = true;
  std::string first_failure;
  double wall_s = 0;
};

// Each node computes the nonzeros with local columns while its gather runs, then those with
// remote columns (their properties are all there only when the gather ends):
//   T_p = max(local_p, gather_p) + remote_p, T = max_p T_p; ideal = max_p (local_p + remote_p).
// A node computes at `gflops` (2 K flops per nonzero).
ScalingPoint scaling_point(const Options& o, const netsparse::CsrMatrix& a, int nodes, int racks,
                           std::uint32_t K, double gflops) {
  Options on = o;
  on.nodes = nodes;
  on.racks = racks;
  Workload w = gather_workload(a, nodes, K * 4, o.ranks_per_node);
  w.verify = false;
  const MatrixFacts f = analyse(a.row_ptr, w, on);
  const double line_Bps = FabricConfig{}.link_gbps * 1e9 / 8;
  const Baselines base = baselines(f, w, on, K, line_Bps);
  ScalingPoint pt;
  pt.nodes = nodes;
  pt.racks = racks;
  std::vector<double> ns_comm_us(static_cast<std::size_t>(nodes), 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  if (nodes > 1) {
    const LadderStep& all = *find_step("switch");
    const RunSpec spec{all, o.units[0], o.delays[0], o.pcache[0]};
    const std::uint32_t batch =
        o.batch != 0 ? o.batch
                     : auto_batch(static_cast<std::uint64_t>(a.nnz()) / nodes, o.units[0]);
    const RunResult r = Cluster(cluster_config(on, spec, batch, w)).run(w);
    const Derived d = derive(r, f, w, base, line_Bps);
    const std::vector<std::string> failures = check_run(r, d, f, w, all);
    pt.checks_ok = failures.empty();
    if (!failures.empty()) pt.first_failure = failures.front();
    for (std::size_t p = 0; p < r.nodes.size(); ++p) {
      ns_comm_us[p] = static_cast<double>(r.nodes[p].done_ps) * 1e-6;
      pt.rx_wire_bytes += r.nodes[p].rx_wire_bytes;
      pt.prs += r.nodes[p].sent;
    }
    pt.ns_comm_us = d.time_us;
  }
  pt.wall_s = seconds_since(t0);
  const double us_per_nonzero = 2.0 * K / (gflops * 1e3);
  std::int64_t nnz_sum = 0;
  for (std::size_t p = 0; p < static_cast<std::size_t>(nodes); ++p) {
    const std::int64_t nnz_p = a.row_ptr[w.row_offsets[p + 1]] - a.row_ptr[w.row_offsets[p]];
    nnz_sum += nnz_p;
    const double remote_us = static_cast<double>(f.remote_nnz[p]) * us_per_nonzero;
    const double local_us = static_cast<double>(nnz_p) * us_per_nonzero - remote_us;
    const auto end_to_end = [&](double gather_us) {
      return std::max(local_us, gather_us) + remote_us;
    };
    // One node gathers nothing: every scheme is the single node's compute.
    pt.su_us = std::max(pt.su_us, end_to_end(nodes > 1 ? base.su_node_us[p] : 0.0));
    pt.sa_us = std::max(pt.sa_us, end_to_end(nodes > 1 ? base.sa_node_us[p] : 0.0));
    pt.ns_us = std::max(pt.ns_us, end_to_end(ns_comm_us[p]));
    pt.ideal_us = std::max(pt.ideal_us, local_us + remote_us);
    pt.useful_bytes += f.unique_remote[p] * w.prop_bytes;
    pt.remote_nnz += f.remote_nnz[p];
  }
  if (nnz_sum != a.nnz()) {
    pt.checks_ok = false;
    pt.first_failure = "the nodes' nonzeros add up to " + std::to_string(nnz_sum) + ", not " +
                       std::to_string(a.nnz());
  }
  return pt;
}

// One SA run (the rig step) of the matrix on 2 nodes of one rack at K.
struct SaRun {
  Workload w;
  MatrixFacts f;
  Baselines base;
  RunResult r;
  std::vector<std::string> failures;
};

SaRun sa_run(const Options& o, const netsparse::CsrMatrix& a, std::uint32_t K) {
  Options on = o;
  on.nodes = 2;
  on.racks = 1;
  SaRun s;
  s.w = gather_workload(a, 2, K * 4, 1);
  s.w.verify = false;
  s.f = analyse(a.row_ptr, s.w, on);
  const double line_Bps = FabricConfig{}.link_gbps * 1e9 / 8;
  s.base = baselines(s.f, s.w, on, K, line_Bps);
  const LadderStep& rig = *find_step("rig");
  const RunSpec spec{rig, o.units[0], o.delays[0], o.pcache[0]};
  const std::uint32_t batch =
      o.batch != 0 ? o.batch : auto_batch(static_cast<std::uint64_t>(a.nnz()) / 2, o.units[0]);
  s.r = Cluster(cluster_config(on, spec, batch, s.w)).run(s.w);
  s.failures = check_run(s.r, derive(s.r, s.f, s.w, s.base, line_Bps), s.f, s.w, rig);
  return s;
}

// --tables: the paper's Table 2 (SA's transfer rate on 2 nodes at K = 32) and Table 3 (the
// headers' share of SA's bytes per K), from SA runs of the emulator (the rig step sends one PR
// per remote nonzero, one PR per packet: the wire bytes of SA's packets) and SAOpt's software
// time (its per-item cost, --sa-item-ns or calibrated).
int run_tables(const Options& o, const netsparse::CsrMatrix& a, double load_s) {
  const FabricConfig fabric;
  const double line_Bps = fabric.link_gbps * 1e9 / 8;
  netsparse::bench::Json doc;
  doc["matrix"] = o.matrix;
  doc["nodes"] = 2;
  doc["racks"] = 1;
  doc["experiments"] = netsparse::bench::Json::array();
  int failed = 0;
  {
    const SaRun s = sa_run(o, a, 32);
    failed += s.failures.empty() ? 0 : 1;
    const std::size_t t = s.base.sa_tail;
    const NodeResult& n = s.r.nodes[t];
    // The bytes one PR brings in, read or response, on SA's packets; SAOpt moves its own
    // (prefiltered per core) PRs, each as one.
    const double rx_per_pr = static_cast<double>(n.rx_wire_bytes) /
                             static_cast<double>(std::max<std::uint64_t>(1, n.sent + n.served));
    const double rx_bytes =
        rx_per_pr * static_cast<double>(s.f.sa_opt_prs[t] + s.f.sa_opt_served[t]);
    const double payload = static_cast<double>(s.f.sa_opt_prs[t]) * s.w.prop_bytes;
    // SAOpt's software time for its items (each PR's request and reply at item_ns on one of the
    // cores), never below those bytes at line rate: the paper measured software-bound SA.
    const double items = static_cast<double>(std::max(s.f.sa_opt_prs[t], s.f.sa_opt_served[t]));
    const double software_s = items * s.base.item_ns * 1e-9 / o.sa_cores;
    const double time_s = std::max(software_s, rx_bytes / line_Bps);
    const double rate_Bps = time_s > 0 ? rx_bytes / time_s : 0.0;
    const double goodput = time_s > 0 ? payload / time_s / line_Bps : 0.0;
    const double one_core_Bps = items > 0 ? rx_bytes / (items * s.base.item_ns * 1e-9) : 0.0;
    std::printf(
        "table 2 (SA, 2 nodes of one rack, K = 32, %s; node %zu): transfer rate %.2f Gbps, line "
        "util %.2f%%, goodput %.2f%% of the %.0f Gbps line with %d cores at %.1f ns per item "
        "(%.2f Gbps, %.3f%% line util with one core; %.1f wire B per PR received); paper, Delta, "
        "2 nodes: 0.2-0.7 Gbps, line util 0.09-0.36%%, goodput 0.04-0.16%%; checks %s\n",
        o.matrix.c_str(), t, rate_Bps * 8e-9, 100.0 * rate_Bps / line_Bps, 100.0 * goodput,
        static_cast<double>(fabric.link_gbps), o.sa_cores, s.base.item_ns, one_core_Bps * 8e-9,
        100.0 * one_core_Bps / line_Bps, rx_per_pr,
        s.failures.empty() ? "ok" : s.failures.front().c_str());
    doc["table2"] = {{"K", 32},
                     {"transfer_rate_gbps", rate_Bps * 8e-9},
                     {"line_utilisation", rate_Bps / line_Bps},
                     {"goodput", goodput},
                     {"one_core_transfer_rate_gbps", one_core_Bps * 8e-9},
                     {"sa_cores", o.sa_cores},
                     {"sa_item_ns", s.base.item_ns},
                     {"checks_ok", s.failures.empty()}};
  }
  constexpr double kPaperTable3[] = {97.6, 95.2, 90.9, 83.3, 71.4, 55.6, 38.5, 23.8, 13.5};
  std::printf("table 3 (headers' share of SA's bytes, 2 nodes, %s):\n%6s %9s %9s %12s %12s\n",
              o.matrix.c_str(), "K", "header%", "paper%", "wire_B", "payload_B");
  doc["table3"] = netsparse::bench::Json::array();
  for (int i = 0; i < 9; ++i) {
    const std::uint32_t K = 1u << i;
    const SaRun s = sa_run(o, a, K);
    failed += s.failures.empty() ? 0 : 1;
    std::uint64_t wire = 0, payload = 0;
    for (const NodeResult& n : s.r.nodes) {
      wire += n.tx_wire_bytes;
      payload += n.served * s.w.prop_bytes;  // every read served went back as one response
    }
    const double share = wire ? 100.0 * (1.0 - static_cast<double>(payload) / wire) : 0.0;
    std::printf("%6u %9.1f %9.1f %12llu %12llu%s\n", K, share, kPaperTable3[i],
                static_cast<unsigned long long>(wire), static_cast<unsigned long long>(payload),
                s.failures.empty() ? "" : ("  checks FAILED: " + s.failures.front()).c_str());
    doc["table3"].push_back({{"K", K},
                             {"header_percent", share},
                             {"paper_percent", kPaperTable3[i]},
                             {"wire_bytes", wire},
                             {"payload_bytes", payload},
                             {"checks_ok", s.failures.empty()}});
  }
  if (!write_json(o.json, doc, load_s, true)) return 1;
  return failed != 0 ? 3 : 0;
}

// --scaling: Fig. 13 for every K, printed and written to the JSON's "scaling" list.
int run_scaling(const Options& o, const netsparse::CsrMatrix& a, double load_s) {
  const int per_rack = std::max(1, o.nodes / o.racks);
  std::vector<int> counts;
  for (int n = 1; n < o.nodes; n *= 2) counts.push_back(n);
  counts.push_back(o.nodes);
  netsparse::bench::Json doc;
  doc["matrix"] = o.matrix;
  doc["nodes"] = o.nodes;
  doc["racks"] = o.racks;
  doc["ranks_per_node"] = o.ranks_per_node;
  doc["experiments"] = netsparse::bench::Json::array();
  doc["scaling"] = netsparse::bench::Json::array();
  int failed = 0;
  for (std::uint32_t K : o.Ks) {
    const double gflops = o.calibrate ? measured_gflops(a, K) : o.compute_gflops;
    const double one_node_us = 2.0 * static_cast<double>(a.nnz()) * K / (gflops * 1e3);
    std::printf(
        "\nfig 13, K = %u: compute %.3f GFLOP/s per node (%s); one node %.1f us\n"
        "%6s %5s %11s %11s %11s %11s %11s | %8s %8s %9s %8s %9s | %12s %12s %6s %7s\n",
        K, gflops,
        o.calibrate ? ("measured here: tiled SpMM, SPADE-Base, " +
                       std::to_string(omp_get_max_threads()) + " thread(s)")
                          .c_str()
                    : "--compute-gflops",
        one_node_us, "nodes", "racks", "ideal_us", "SUOpt_us", "SAOpt_us", "NetSp_us", "gather_us",
        "SUOpt", "SAOpt", "NetSparse", "ideal", "NetSp/id", "useful_B", "received_B", "checks",
        "wall_s");
    netsparse::bench::Json points = netsparse::bench::Json::array();
    ScalingPoint last;
    for (int n : counts) {
      const int racks = (n + per_rack - 1) / per_rack;
      ScalingPoint pt;
      try {
        pt = scaling_point(o, a, n, racks, K, gflops);
      } catch (const std::exception& e) {
        std::cerr << "netsparse_emulate: " << e.what() << "\n";
        return 1;
      }
      const auto speedup = [&](double us) { return us > 0 ? one_node_us / us : 0.0; };
      std::printf(
          "%6d %5d %11.1f %11.1f %11.1f %11.1f %11.1f | %8.2f %8.2f %9.2f %8.2f %9.3f | %12llu "
          "%12llu %6s %7.2f\n",
          n, racks, pt.ideal_us, pt.su_us, pt.sa_us, pt.ns_us, pt.ns_comm_us, speedup(pt.su_us),
          speedup(pt.sa_us), speedup(pt.ns_us), speedup(pt.ideal_us),
          pt.ns_us > 0 ? pt.ideal_us / pt.ns_us : 0.0,
          static_cast<unsigned long long>(pt.useful_bytes),
          static_cast<unsigned long long>(pt.rx_wire_bytes), pt.checks_ok ? "ok" : "FAILED",
          pt.wall_s);
      if (!pt.checks_ok) {
        std::printf("  checks FAILED at %d nodes: %s\n", n, pt.first_failure.c_str());
        ++failed;
      }
      std::fflush(stdout);
      points.push_back({{"nodes", n},
                        {"racks", racks},
                        {"time_us",
                         {{"su_opt", pt.su_us},
                          {"sa_opt", pt.sa_us},
                          {"netsparse", pt.ns_us},
                          {"ideal", pt.ideal_us}}},
                        {"speedup",
                         {{"su_opt", speedup(pt.su_us)},
                          {"sa_opt", speedup(pt.sa_us)},
                          {"netsparse", speedup(pt.ns_us)},
                          {"ideal", speedup(pt.ideal_us)}}},
                        {"netsparse_gather_us", pt.ns_comm_us},
                        {"useful_bytes", pt.useful_bytes},
                        {"received_wire_bytes", pt.rx_wire_bytes},
                        {"remote_nonzeros", pt.remote_nnz},
                        {"prs", pt.prs},
                        {"checks_ok", pt.checks_ok},
                        {"wall_s", pt.wall_s}});
      last = pt;
    }
    const double ns_x = last.ns_us > 0 ? one_node_us / last.ns_us : 0.0;
    const double ideal_x = last.ideal_us > 0 ? one_node_us / last.ideal_us : 0.0;
    std::printf(
        "fig 13 at %d nodes, K = %u: SUOpt %.2fx, SAOpt %.2fx, NetSparse %.2fx, ideal %.2fx; "
        "NetSparse/ideal %.2f (paper, 128 nodes with SPADE compute, mean of its matrices: "
        "SUOpt 0.7x, SAOpt 3x, NetSparse 38x, ideal 72x; NetSparse/ideal 0.53)\n",
        last.nodes, K, last.su_us > 0 ? one_node_us / last.su_us : 0.0,
        last.sa_us > 0 ? one_node_us / last.sa_us : 0.0, ns_x, ideal_x,
        ideal_x > 0 ? ns_x / ideal_x : 0.0);
    doc["scaling"].push_back({{"K", K},
                              {"compute_gflops", gflops},
                              {"calibrated", o.calibrate},
                              {"one_node_us", one_node_us},
                              {"points", points}});
    if (!write_json(o.json, doc, load_s, false)) return 1;
  }
  if (!write_json(o.json, doc, load_s, true)) return 1;
  return failed != 0 ? 3 : 0;
}

// --fig19: the paper's Fig. 19 (inter-node imbalance): one gather under each row partition, and
// how many nodes are still active (their own requests not all answered, or answers of theirs
// still to leave: NodeResult::finish_ps) per bucket of virtual time. A node is active from 0 to
// its finish, so the counts never grow; the tail is the last node to finish.
int run_fig19(const Options& o, const netsparse::CsrMatrix& a, double load_s) {
  constexpr int kBuckets = 40;
  const std::vector<LadderStep> steps = chosen_steps(o);
  const std::uint32_t K = o.Ks[0];
  const double line_Bps = FabricConfig{}.link_gbps * 1e9 / 8;
  const std::uint32_t batch =
      o.batch != 0 ? o.batch
                   : auto_batch(a.nnz() / static_cast<std::uint64_t>(o.nodes), o.units[0]);
  const RunSpec spec{steps.front(), o.units[0], o.delays[0], o.pcache[0], o.topologies[0]};
  struct PartRun {
    RowPartition how;
    std::vector<Picos> finish;
    int tail = 0;
    std::uint64_t tail_remote_bytes = 0, tail_rx_bytes = 0, tail_nnz = 0;
    std::uint64_t max_remote_bytes = 0, max_nnz = 0;
    int max_remote_node = 0;
    double time_us = 0, mean_finish_us = 0, wall = 0;
    bool checks_ok = true;
  };
  std::vector<PartRun> runs;
  netsparse::bench::Json doc;
  doc["matrix"] = o.matrix;
  doc["nodes"] = o.nodes;
  doc["racks"] = o.racks;
  doc["K"] = K;
  doc["batch"] = batch;
  doc["mechanisms"] = spec.step.name;
  doc["topology"] = topology_name(spec.topology);
  doc["experiments"] = netsparse::bench::Json::array();
  netsparse::bench::Json parts = netsparse::bench::Json::array();
  std::printf("fig 19 (%s, %d nodes in %d racks, K = %u, %s, batch %u, %s):\n", o.matrix.c_str(),
              o.nodes, o.racks, K, spec.step.name, batch, topology_name(spec.topology));
  int failed = 0;
  for (RowPartition how :
       {RowPartition::kEqualRows, RowPartition::kBalancedNnz, RowPartition::kMetis}) {
    PartRun pr;
    pr.how = how;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      std::vector<std::uint64_t> offsets;
      const netsparse::CsrMatrix b =
          renumber_by_parts(a, row_parts(a, o.nodes, how, o.seed), o.nodes, offsets);
      Workload w = block_workload(b, offsets, K * 4);
      w.verify = o.verify;
      const MatrixFacts f = analyse(b.row_ptr, w, o);
      const Baselines base = baselines(f, w, o, K, line_Bps);
      const ClusterConfig c = cluster_config(o, spec, batch, w);
      const RunResult r = Cluster(c).run(w);
      const Derived d = derive(r, f, w, base, line_Bps);
      const std::vector<std::string> failures = check_run(r, d, f, w, spec.step);
      pr.checks_ok = failures.empty();
      if (!pr.checks_ok) {
        std::printf("  checks FAILED (%s): %s\n", partition_name(how), failures.front().c_str());
        ++failed;
      }
      double sum = 0;
      for (std::size_t p = 0; p < r.nodes.size(); ++p) {
        pr.finish.push_back(r.nodes[p].finish_ps());
        sum += static_cast<double>(pr.finish.back());
        if (pr.finish[p] > pr.finish[static_cast<std::size_t>(pr.tail)])
          pr.tail = static_cast<int>(p);
        const std::uint64_t remote = f.unique_remote[p] * w.prop_bytes;
        const auto nnz =
            static_cast<std::uint64_t>(b.row_ptr[offsets[p + 1]] - b.row_ptr[offsets[p]]);
        if (remote > pr.max_remote_bytes)
          pr.max_remote_bytes = remote, pr.max_remote_node = static_cast<int>(p);
        pr.max_nnz = std::max(pr.max_nnz, nnz);
      }
      const auto t = static_cast<std::size_t>(pr.tail);
      pr.tail_remote_bytes = f.unique_remote[t] * w.prop_bytes;
      pr.tail_rx_bytes = r.nodes[t].rx_wire_bytes;
      pr.tail_nnz = static_cast<std::uint64_t>(b.row_ptr[offsets[t + 1]] - b.row_ptr[offsets[t]]);
      pr.time_us = static_cast<double>(pr.finish[t]) * 1e-6;
      pr.mean_finish_us = sum / static_cast<double>(pr.finish.size()) * 1e-6;
    } catch (const std::exception& e) {
      std::cerr << "netsparse_emulate: --fig19 " << partition_name(how) << ": " << e.what() << "\n";
      return 1;
    }
    pr.wall = seconds_since(t0);
    std::printf(
        "  partition %-5s: tail node %d finishes at %.2f us (mean node %.2f us, tail/mean "
        "%.2f); tail's remote bytes %llu (distinct remote rows x %u B), received %llu wire B, "
        "%llu nonzeros; max remote bytes %llu (node %d), max nonzeros %llu; checks %s; wall "
        "%.2f s\n",
        partition_name(how), pr.tail, pr.time_us, pr.mean_finish_us,
        pr.mean_finish_us > 0 ? pr.time_us / pr.mean_finish_us : 0.0,
        static_cast<unsigned long long>(pr.tail_remote_bytes), K * 4,
        static_cast<unsigned long long>(pr.tail_rx_bytes),
        static_cast<unsigned long long>(pr.tail_nnz),
        static_cast<unsigned long long>(pr.max_remote_bytes), pr.max_remote_node,
        static_cast<unsigned long long>(pr.max_nnz), pr.checks_ok ? "ok" : "FAILED", pr.wall);
    std::fflush(stdout);
    runs.push_back(std::move(pr));
  }
  // The timeline: bucket b starts at b / kBuckets of the latest finish over the partitions.
  Picos end = 0;
  for (const PartRun& pr : runs)
    for (Picos f : pr.finish) end = std::max(end, f);
  std::printf("  %9s", "t_us");
  for (const PartRun& pr : runs) std::printf(" %7s", partition_name(pr.how));
  std::printf("   (active nodes at the bucket's start)\n");
  netsparse::bench::Json t_us = netsparse::bench::Json::array();
  std::vector<netsparse::bench::Json> active(runs.size(), netsparse::bench::Json::array());
  for (int b = 0; b <= kBuckets; ++b) {
    const Picos at =
        end / kBuckets * static_cast<Picos>(b) + end % kBuckets * static_cast<Picos>(b) / kBuckets;
    std::printf("  %9.2f", static_cast<double>(at) * 1e-6);
    t_us.push_back(static_cast<double>(at) * 1e-6);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto n = std::count_if(runs[i].finish.begin(), runs[i].finish.end(),
                                   [at](Picos f) { return f > at; });
      std::printf(" %7lld", static_cast<long long>(n));
      active[i].push_back(static_cast<std::int64_t>(n));
    }
    std::printf("\n");
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const PartRun& pr = runs[i];
    netsparse::bench::Json finish_us = netsparse::bench::Json::array();
    for (Picos f : pr.finish) finish_us.push_back(static_cast<double>(f) * 1e-6);
    parts.push_back({{"partition", partition_name(pr.how)},
                     {"tail_node", pr.tail},
                     {"tail_finish_us", pr.time_us},
                     {"mean_finish_us", pr.mean_finish_us},
                     {"tail_remote_bytes", pr.tail_remote_bytes},
                     {"tail_received_wire_bytes", pr.tail_rx_bytes},
                     {"tail_nonzeros", pr.tail_nnz},
                     {"max_remote_bytes", pr.max_remote_bytes},
                     {"max_nonzeros", pr.max_nnz},
                     {"finish_us", finish_us},
                     {"active", active[i]},
                     {"checks_ok", pr.checks_ok},
                     {"wall_s", pr.wall}});
  }
  doc["fig19"] = {{"t_us", t_us}, {"partitions", parts}};
  if (!write_json(o.json, doc, load_s, true)) return 1;
  return failed != 0 ? 3 : 0;
}

}  // namespace

// --fig15: Flare (SC '21) Fig. 15 on the emulator's fabric: the allreduce algorithms of
// lib/emulate/allreduce_model.hpp per size and density, their model time, the network's traffic
// (wire bytes summed over every link) and the busiest link. Analytic per message: milliseconds.
int run_fig15(const Options& o) {
  FabricConfig fc;
  fc.nodes = o.nodes;
  fc.racks = o.racks;
  fc.link_gbps = o.link_gbps;
  std::unique_ptr<AllreduceModel> model;
  try {
    model = std::make_unique<AllreduceModel>(fc);
  } catch (const std::exception& e) {
    usage(std::string("--fig15: ") + e.what());
  }
  const AllreduceModel& m = *model;
  const int P = o.nodes;
  const bool power_of_two = (P & (P - 1)) == 0;
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = 4 << 10; b <= (std::uint64_t{256} << 20); b *= 4) sizes.push_back(b);
  sizes.insert(std::upper_bound(sizes.begin(), sizes.end(), std::uint64_t{100} << 20),
               std::uint64_t{100} << 20);  // Flare's ResNet-50 vector
  const std::vector<double> densities = {0.001, 0.002, 0.01, 0.1, 0.5};
  netsparse::bench::Json doc;
  doc["nodes"] = P;
  doc["racks"] = o.racks;
  doc["experiments"] = netsparse::bench::Json::array();
  netsparse::bench::Json rows = netsparse::bench::Json::array();
  const auto t0 = std::chrono::steady_clock::now();
  using A = AllreduceAlgorithm;
  const auto run = [&](A a, std::uint64_t bytes, bool sparse, double d) {
    AllreduceSpec s;
    s.algorithm = a;
    s.bytes = bytes;
    s.sparse = sparse;
    s.density = d;
    const AllreduceResult r = m.run(s);
    netsparse::bench::Json row = {{"bytes", bytes},
                                  {"algorithm", allreduce_algorithm_name(a)},
                                  {"sparse", sparse},
                                  {"time_us", r.time_us},
                                  {"wire_link_bytes", r.wire_link_bytes},
                                  {"payload_link_bytes", r.payload_link_bytes},
                                  {"busiest_link_wire_bytes", r.busiest_link_wire_bytes},
                                  {"busiest_link", m.link_name(r.busiest_link)},
                                  {"max_links", r.max_links},
                                  {"steps", r.steps},
                                  {"messages", r.messages}};
    if (sparse) row["density"] = d;
    rows.push_back(row);
    return r;
  };
  const auto size_name = [](std::uint64_t b) {
    char buf[32];
    if (b >= (1u << 20))
      std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(b >> 20));
    else
      std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(b >> 10));
    return std::string(buf);
  };
  const double MB = 1e6;
  std::printf(
      "fig 15 (Flare SC '21): allreduce of fp32 on %d nodes, leaf-spine of %d racks x %d nodes, "
      "%d spines, %u Gbps links, %u B MTU + %u B headers, %.0f ns per link, %.0f ns per switch; "
      "model times (lib/emulate/allreduce_model.hpp), traffic = wire bytes summed over links\n",
      P, o.racks, m.fabric().nodes_per_rack(), m.fabric().spines(), fc.link_gbps, fc.mtu_bytes,
      fc.frame_header_bytes, static_cast<double>(fc.link_ps) / 1e3,
      static_cast<double>(fc.switch_ps) / 1e3);
  std::printf(
      "dense:\n  %-8s %12s %12s %12s %12s %9s | traffic MB: %9s %9s %9s | busiest MB: %8s %8s\n",
      "size", "ring us", "host agg us", "rec dbl us", "in-switch us", "ring/isw", "ring",
      "host agg", "in-switch", "host agg", "in-switch");
  for (std::uint64_t b : sizes) {
    const AllreduceResult ring = run(A::kRing, b, false, 1),
                          host = run(A::kHostAggregation, b, false, 1),
                          isw = run(A::kInSwitch, b, false, 1);
    double rd_us = 0;
    if (power_of_two) rd_us = run(A::kRecursiveDoubling, b, false, 1).time_us;
    std::printf("  %-8s %12.1f %12.1f %12.1f %12.1f %8.2fx | %20.2f %9.2f %9.2f | %19.2f %8.2f\n",
                size_name(b).c_str(), ring.time_us, host.time_us, rd_us, isw.time_us,
                ring.time_us / isw.time_us, ring.wire_link_bytes / MB, host.wire_link_bytes / MB,
                isw.wire_link_bytes / MB, host.busiest_link_wire_bytes / MB,
                isw.busiest_link_wire_bytes / MB);
  }
  for (double d : densities) {
    std::printf("sparse, density %g %%:\n  %-8s %12s %12s %12s %12s | traffic MB: %9s %9s %9s\n",
                d * 100, "size", "SparCML us", "isw sp us", "isw dense us", "SparCML/isw",
                "SparCML", "isw sp", "isw dense");
    for (std::uint64_t b : sizes) {
      const AllreduceResult isw = run(A::kInSwitch, b, true, d);
      const AllreduceResult dense = m.run({A::kInSwitch, b, false, 1.0});
      AllreduceResult rd;
      if (power_of_two) rd = run(A::kRecursiveDoubling, b, true, d);
      std::printf("  %-8s %12.1f %12.1f %12.1f %11.2fx | %20.2f %9.2f %9.2f\n",
                  size_name(b).c_str(), rd.time_us, isw.time_us, dense.time_us,
                  power_of_two ? rd.time_us / isw.time_us : 0.0, rd.wire_link_bytes / MB,
                  isw.wire_link_bytes / MB, dense.wire_link_bytes / MB);
    }
  }
  // Flare's own point: 100 MiB at about 0.2 % (one value per bucket of 512).
  {
    const std::uint64_t b = std::uint64_t{100} << 20;
    const AllreduceResult ring = m.run({A::kRing, b, false, 1.0}),
                          isw = m.run({A::kInSwitch, b, false, 1.0}),
                          isw_sp = m.run({A::kInSwitch, b, true, 0.002});
    std::printf(
        "flare point (100 MiB, 0.2 %%): in-switch dense %.2fx faster than ring, %.2fx less "
        "traffic; in-switch sparse %.2fx faster than in-switch dense, %.1fx less traffic",
        ring.time_us / isw.time_us,
        static_cast<double>(ring.wire_link_bytes) / static_cast<double>(isw.wire_link_bytes),
        isw.time_us / isw_sp.time_us,
        static_cast<double>(isw.wire_link_bytes) / static_cast<double>(isw_sp.wire_link_bytes));
    if (power_of_two) {
      const AllreduceResult rd = m.run({A::kRecursiveDoubling, b, true, 0.002});
      std::printf(
          "; than SparCML %.2fx faster, %.1fx less traffic", rd.time_us / isw_sp.time_us,
          static_cast<double>(rd.wire_link_bytes) / static_cast<double>(isw_sp.wire_link_bytes));
    }
    std::printf("\n");
  }
  if (!power_of_two)
    std::printf("(recursive doubling needs a power-of-two node count: its columns are 0)\n");
  const double wall = seconds_since(t0);
  std::printf("fig 15: %zu allreduces modelled in %.2f s\n", rows.size(), wall);
  doc["fig15"] = {{"link_gbps", fc.link_gbps},
                  {"spines", m.fabric().spines()},
                  {"nodes_per_rack", m.fabric().nodes_per_rack()},
                  {"mtu_bytes", fc.mtu_bytes},
                  {"frame_header_bytes", fc.frame_header_bytes},
                  {"link_ns", static_cast<double>(fc.link_ps) / 1e3},
                  {"switch_ns", static_cast<double>(fc.switch_ps) / 1e3},
                  {"rows", rows}};
  return write_json(o.json, doc, wall, true) ? 0 : 1;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.fig15) return run_fig15(o);
  const auto t_load = std::chrono::steady_clock::now();
  if (o.scaling || o.fig19 || o.tables) {
    // These take the whole matrix (the compute model's SpMM, partitions, 2-node runs).
    netsparse::CsrMatrix a;
    try {
      a = load_matrix_spec(o.matrix, o.seed);
    } catch (const std::exception& e) {
      std::cerr << "netsparse_emulate: " << o.matrix << ": " << e.what() << "\n";
      return 1;
    }
    if (o.scaling) return run_scaling(o, a, seconds_since(t_load));
    if (o.fig19) return run_fig19(o, a, seconds_since(t_load));
    try {
      return run_tables(o, a, seconds_since(t_load));
    } catch (const std::exception& e) {
      std::cerr << "netsparse_emulate: " << e.what() << "\n";
      return 1;
    }
  }
  // The ladder needs only every node's idx list (and the row pointers for the analysis): a
  // generated matrix is made a node's block at a time and never held whole (paper-sized inputs).
  Workload w;
  std::uint64_t nnz = 0;
  MatrixFacts facts;
  try {
    PatternWorkload pw = pattern_workload(o.matrix, o.seed, o.nodes, 4, o.ranks_per_node);
    w = std::move(pw.w);
    nnz = static_cast<std::uint64_t>(pw.row_ptr.back());
    facts = analyse(pw.row_ptr, w, o);
  } catch (const std::exception& e) {
    std::cerr << "netsparse_emulate: " << o.matrix << ": " << e.what() << "\n";
    return 1;
  }
  w.verify = o.verify;
  const double load_s = seconds_since(t_load);
  const Table1 t1 = table1(facts, w, o.nodes);
  print_matrix_tables(o, nnz, facts, t1);
  const std::uint32_t batch = o.batch != 0
                                  ? o.batch
                                  : auto_batch(nnz / static_cast<std::uint64_t>(o.nodes),
                                               *std::max_element(o.units.begin(), o.units.end()));
  std::printf("batch %u idxs per work request%s\n", batch, o.batch != 0 ? "" : " (auto)");
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
  std::map<std::string, double> no_cache_us;  // Fig. 18's base, per units/delay/step
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
      if (o.topology_sweep) std::printf("topology %s:\n", topology_name(spec.topology));
      if (sweep) std::printf("units %d, NIC delay %u cycles:\n", spec.units, spec.delay);
      if (o.pcache_sweep)
        std::printf("Property Cache %s per switch:\n", size_text(spec.pcache).c_str());
      const ClusterConfig c = cluster_config(o, spec, batch, w);
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
      netsparse::bench::Json run = run_json(spec, d, r, failures.empty(), wall);
      if (o.topology_sweep || spec.topology != Topology::kLeafSpine) print_fig22(spec, r, d, c);
      if (o.pcache_sweep) {
        // Fig. 18: against the no-cache run of the same units, delay and step (sizes ascend,
        // so it ran first).
        const std::string key =
            std::to_string(spec.units) + "/" + std::to_string(spec.delay) + "/" + spec.step.name;
        if (spec.pcache == 0) no_cache_us[key] = d.time_us;
        const double speedup = d.time_us > 0 ? no_cache_us[key] / d.time_us : 0.0;
        std::printf(
            "  fig 18: Property Cache %s: hit rate %.1f%% of %llu reads to other racks, "
            "inter-rack %llu B, speedup over no cache %.3f\n",
            size_text(spec.pcache).c_str(), d.ir_reads ? 100.0 * d.ir_hits / d.ir_reads : 0.0,
            static_cast<unsigned long long>(d.ir_reads),
            static_cast<unsigned long long>(r.inter_rack.wire_bytes), speedup);
        run["speedup_over_no_cache"] = speedup;
      }
      doc["experiments"].back()["runs"].push_back(run);
      // Each step's results are kept as soon as it ends: a long ladder loses nothing if stopped.
      std::fflush(stdout);
      const bool last = k + 1 == runs.size() && ki + 1 == o.Ks.size();
      if (!write_json(o.json, doc, load_s, last)) return 1;
    }
  }
  return failed_checks != 0 ? 3 : 0;
}
