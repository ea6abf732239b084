// Hosts and racks (Topology), the node-aware-ie and netsparse-node modes, under mpirun with virtual
// hosts (NETSPARSE_RANKS_PER_HOST=2, and NETSPARSE_HOSTS_PER_RACK=2 at np 8; ctest sets them):
//   - the layout is the one the environment asks for (hosts, leaders, communicators, racks);
//   - every kernel (SpMM, SDDMM, SpMV; fp32 and fp64; a changing pattern) gives byte for byte
//     what inspector-executor gives (the same ghost rows in the same compact layout: any row
//     delivered wrong or to the wrong place changes bytes), which is within tolerance of the
//     single-process reference;
//   - the inter-host payload equals the node-wide minimum of a model computed here from the whole
//     matrix (each remote row crosses into a host once), one message per host pair that needs
//     one, and inspector-executor's inter-host payload equals the per-rank model;
//   - mismatched layouts are refused on every rank with the same message;
//   - netsparse-node (one Idx Filter, store and engine per host): every kernel byte for byte
//     inspector-executor's too (the same remote nonzeros in the same column order, read from the
//     host's store), with and without gather plans; its inter-host payload is the node-wide
//     minimum, only leaders send between hosts, and the host filter's lookups and landed rows
//     equal the model's (off-host remote nonzeros of the host's ranks, the host's union);
//   - netsparse-node with the rack switch (np 8: 2 racks): every kernel byte for byte
//     inspector-executor's, and the switches' lookups, cache hits, inter-rack bytes and messages
//     equal a model computed here (hosts of a rack gather in turn, so a row a host of the rack
//     fetched before is a hit); on one rack the switch stays out of the way (counters 0).
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dist_test_util.hpp"
#include "hosts/topology.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse {
namespace {

// The distributed tests' helpers (dist_test_util.hpp).
using namespace test;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : 0;
}

// The layout the test runs under (ctest's environment): ranks per host and hosts per rack.
int ranks_per_host() {
  return env_int("NETSPARSE_RANKS_PER_HOST");
}
int hosts_per_rack() {
  return env_int("NETSPARSE_HOSTS_PER_RACK");
}

TEST(Topology, VirtualHostsAsTheEnvironmentAsks) {
  const int rph = ranks_per_host(), r = world_rank(), p = world_size();
  ASSERT_GT(rph, 0) << "run with NETSPARSE_RANKS_PER_HOST set (tests/distributed/CMakeLists.txt)";
  const dist::Topology t = dist::Topology::build(MPI_COMM_WORLD);
  EXPECT_TRUE(t.virtual_hosts());
  EXPECT_EQ(t.nhosts(), p / rph);
  EXPECT_EQ(t.host(), r / rph);
  EXPECT_EQ(t.leader_of(t.host()), r - r % rph);
  EXPECT_EQ(t.is_leader(), r % rph == 0);
  int host_size = 0, host_rank = -1;
  MPI_Comm_size(t.host_comm(), &host_size);
  MPI_Comm_rank(t.host_comm(), &host_rank);
  EXPECT_EQ(host_size, rph);
  EXPECT_EQ(host_rank, r % rph);
  if (t.is_leader()) {
    ASSERT_NE(t.leaders_comm(), MPI_COMM_NULL);
    int leaders = 0, leader_rank = -1;
    MPI_Comm_size(t.leaders_comm(), &leaders);
    MPI_Comm_rank(t.leaders_comm(), &leader_rank);
    EXPECT_EQ(leaders, t.nhosts());
    EXPECT_EQ(leader_rank, t.host());
  } else {
    EXPECT_EQ(t.leaders_comm(), MPI_COMM_NULL);
  }
  const int hpr = hosts_per_rack();
  EXPECT_EQ(t.nracks(), hpr > 0 ? t.nhosts() / hpr : 1);
  EXPECT_EQ(t.rack(), hpr > 0 ? t.host() / hpr : 0);
}

// Runs `f`, which must throw std::invalid_argument on every rank with one and the same message
// containing `needle`.
template <class F>
void expect_refused_everywhere(F&& f, const std::string& needle, const std::string& what) {
  const std::string message = invalid_argument_message(f);
  EXPECT_NE(message.find(needle), std::string::npos) << what << ": got '" << message << "'";
  EXPECT_EQ(message.rfind("(wrong exception type)", 0), std::string::npos)
      << what << ": " << message;
  // The same text on every rank: rank 0's, broadcast, compared everywhere.
  std::string root = message;
  int n = static_cast<int>(root.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  root.resize(static_cast<std::size_t>(n));
  MPI_Bcast(root.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_TRUE(test::all_ranks(root == message))
      << what << ": rank " << world_rank() << " got '" << message << "', rank 0 '" << root << "'";
}

TEST(Topology, MismatchedLayoutsAreRefusedOnEveryRankWithOneMessage) {
  const int r = world_rank();
  expect_refused_everywhere(
      [] {
        (void)dist::Topology::build(MPI_COMM_WORLD, {3, 0});
      },
      "NETSPARSE_RANKS_PER_HOST=3 does not divide the job's " + std::to_string(world_size()),
      "3 ranks per host");
  // Rank 1 alone disagrees (every rank must still refuse, none may hang).
  expect_refused_everywhere(
      [r] {
        (void)dist::Topology::build(MPI_COMM_WORLD, {r == 1 ? 1 : 2, 0});
      },
      "the ranks disagree: rank 0 has NETSPARSE_RANKS_PER_HOST=2", "disagreeing ranks");
  expect_refused_everywhere(
      [] {
        (void)dist::Topology::build(MPI_COMM_WORLD, {2, 3});
      },
      "NETSPARSE_HOSTS_PER_RACK=3 does not divide", "3 hosts per rack");
  // Through the environment and a kernel: a value that is not a number on one rank only.
  ASSERT_GT(ranks_per_host(), 0);
  Fixture f = make_fixture("gen:kron:6");
  const std::string saved = std::getenv("NETSPARSE_RANKS_PER_HOST");
  if (r == world_size() - 1) setenv("NETSPARSE_RANKS_PER_HOST", "two", 1);
  DistOptions o;
  o.mode = CommMode::node_aware_ie;
  expect_refused_everywhere([&] { DistKernel k(f.dm, KernelKind::spmm, 2, o); },
                            "NETSPARSE_RANKS_PER_HOST='two' is not an integer in [1, ",
                            "a bad environment value on one rank");
  setenv("NETSPARSE_RANKS_PER_HOST", saved.c_str(), 1);
}

// Runs one kernel in `mode` twice (operand values change in place) and returns the outputs of
// both runs concatenated; `err` gets the worst error against the reference.
template <class T>
std::vector<T> run_kernel(DistKernel& kern, const Fixture& f, const CsrMatrix& rows,
                          KernelKind kernel, int k, double& err) {
  const int r = world_rank();
  const gidx_t cb = f.dm.cols().begin(r), ce = f.dm.cols().end(r);
  const gidx_t rb = f.dm.rows().begin(r), re = f.dm.rows().end(r);
  std::vector<T> all;
  for (int which : {1, 3}) {
    const std::vector<float> b32 = operand_block(which, cb, ce, k);
    const std::vector<T> b(b32.begin(), b32.end());
    std::vector<T> out;
    std::vector<double> want;
    if (kernel == KernelKind::sddmm) {
      const std::vector<float> x32 = operand_block(which + 1, rb, re, k);
      const std::vector<T> x(x32.begin(), x32.end());
      out.assign(static_cast<std::size_t>(rows.nnz()), T(-7));
      kern.sddmm(x, b, out);
      want = test::reference_sddmm(rows, k, which + 1, which);
    } else {
      out.assign(static_cast<std::size_t>(re - rb) * k, T(-7));
      if (kernel == KernelKind::spmv) {
        kern.spmv(b, out);
      } else {
        kern.spmm(b, out);
      }
      want = test::reference_spmm(rows, k, which);
    }
    err = std::max(err, max_relative_error(out, want));
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

template <class T>
void expect_equal_to_ie(const Fixture& f, KernelKind kernel, int k, bool changing,
                        CommMode mode = CommMode::node_aware_ie, bool plans = true,
                        bool rack_switch = false) {
  DistOptions o;
  o.scalar = scalar_type_of<T>;
  o.tiling.row_panel = 16;
  o.mode = CommMode::inspector_executor;
  DistKernel ie(f.dm, kernel, k, o);
  o.mode = mode;
  o.plans = plans;
  o.rack_switch = rack_switch;
  DistKernel na(f.dm, kernel, k, o);
  const double tol = std::is_same_v<T, float> ? test::kTolerance : test::kF64Tolerance;
  const std::string what = f.name + " " + to_string(kernel) + " K=" + std::to_string(k) + " " +
                           std::string(to_string(o.scalar)) + (changing ? " changing" : "");
  // A fixed pattern three times: the third run is owner-pushed in the RIG modes (the first
  // records the plans, the second arms their owners).
  for (int iteration = 0; iteration < (changing ? 2 : 3); ++iteration) {
    CsrMatrix rows = f.dm.local();
    if (changing) {
      rows = sample_rows(f.dm.local(), SamplingParams{0.5, 0}, 11 + iteration);
      ie.set_pattern(rows);
      na.set_pattern(rows);
    }
    double err_ie = 0, err_na = 0;
    const std::vector<T> want = run_kernel<T>(ie, f, rows, kernel, k, err_ie);
    const std::vector<T> got = run_kernel<T>(na, f, rows, kernel, k, err_na);
    EXPECT_LE(err_na, tol) << what;
    ASSERT_EQ(got.size(), want.size()) << what;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)), 0)
        << what << ": " << to_string(mode) << " differs from inspector-executor";
  }
}

TEST(NodeAwareIe, EveryKernelEqualsInspectorExecutorByteForByte) {
  for (const char* spec : {"gen:kron:8", "gen:stencil:6:5:4:2"}) {
    const Fixture f = make_fixture(spec);
    for (const bool changing : {false, true}) {
      expect_equal_to_ie<float>(f, KernelKind::spmm, 5, changing);
      expect_equal_to_ie<float>(f, KernelKind::sddmm, 3, changing);
      expect_equal_to_ie<float>(f, KernelKind::spmv, 1, changing);
      expect_equal_to_ie<double>(f, KernelKind::spmm, 5, changing);
      expect_equal_to_ie<double>(f, KernelKind::sddmm, 3, changing);
      expect_equal_to_ie<double>(f, KernelKind::spmv, 1, changing);
    }
  }
}

// With every rank running the host's engines for its pairs (ranks) and the leader alone; and
// the default mode, netsparse, which is netsparse-node here.
TEST(NetsparseNode, EveryKernelEqualsInspectorExecutorByteForByte) {
  for (const char* engines : {"ranks", "leader"}) {
    ASSERT_EQ(setenv("NETSPARSE_NODE_ENGINES", engines, 1), 0);
    for (const char* spec : {"gen:kron:8", "gen:stencil:6:5:4:2"}) {
      const Fixture f = make_fixture(spec);
      for (const bool changing : {false, true}) {
        const CommMode m = engines[0] == 'r' ? CommMode::netsparse : CommMode::netsparse_node;
        expect_equal_to_ie<float>(f, KernelKind::spmm, 5, changing, m);
        expect_equal_to_ie<float>(f, KernelKind::sddmm, 3, changing, m);
        expect_equal_to_ie<float>(f, KernelKind::spmv, 1, changing, m);
        expect_equal_to_ie<double>(f, KernelKind::spmm, 5, changing, m);
        expect_equal_to_ie<double>(f, KernelKind::sddmm, 3, changing, m);
        expect_equal_to_ie<double>(f, KernelKind::spmv, 1, changing, m);
      }
      expect_equal_to_ie<float>(f, KernelKind::spmm, 5, false, CommMode::netsparse_node, false);
    }
  }
  unsetenv("NETSPARSE_NODE_ENGINES");
}

std::uint64_t sum_over_ranks(std::uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

TEST(NetsparseNode, RackSwitchEveryKernelEqualsInspectorExecutorByteForByte) {
  const CommMode m = CommMode::netsparse_node;
  for (const char* spec : {"gen:kron:8", "gen:stencil:6:5:4:2"}) {
    const Fixture f = make_fixture(spec);
    for (const bool changing : {false, true}) {
      expect_equal_to_ie<float>(f, KernelKind::spmm, 5, changing, m, true, true);
      expect_equal_to_ie<float>(f, KernelKind::sddmm, 3, changing, m, true, true);
      expect_equal_to_ie<double>(f, KernelKind::spmm, 5, changing, m, true, true);
      expect_equal_to_ie<double>(f, KernelKind::spmv, 1, changing, m, true, true);
    }
    expect_equal_to_ie<float>(f, KernelKind::spmm, 5, false, m, false, true);  // no plans
  }
  // A property larger than a 1500 B switch packet travels alone in its packet.
  expect_equal_to_ie<float>(make_fixture("gen:kron:8"), KernelKind::spmm, 400, false, m, true,
                            true);
}

// Wire bytes of n PRs of `record` bytes concatenated into 1500 B packets (the switch's), with
// the 50 B model per packet; and how many packets.
std::uint64_t switch_wire(std::uint64_t n, std::uint64_t record, std::uint64_t* packets) {
  const std::uint64_t per = std::max<std::uint64_t>(1, (1500 - 14) / record);
  const std::uint64_t pk = (n + per - 1) / per;
  *packets += pk;
  return pk * (14 + 50) + n * record;
}

// The model, from the whole matrix and the layout: per host, the distinct columns its ranks'
// rows touch that another rack owns. In wave w the w-th host of every rack asks; its switch
// answers from the cache what an earlier host of the rack fetched (hits), and sends the rest
// per destination rack (read packets), which come back as response packets.
TEST(NetsparseNode, RackSwitchCountersFollowTheModel) {
  const Fixture f = make_fixture("gen:kron:9");
  const int rph = ranks_per_host(), p = world_size(), nhosts = p / rph;
  const int per_rack = hosts_per_rack() > 0 ? hosts_per_rack() : nhosts;
  const int racks = nhosts / per_rack;
  const int k = 4;
  const std::uint64_t row_bytes = k * sizeof(float);
  const RowPartition& rows = f.dm.rows();
  const RowPartition& cols = f.dm.cols();
  const auto rack_of_rank = [&](int q) { return q / rph / per_rack; };
  std::vector<std::set<gidx_t>> off_rack(static_cast<std::size_t>(nhosts));
  std::vector<std::set<gidx_t>> off_host(static_cast<std::size_t>(nhosts));
  for (int q = 0; q < p; ++q) {
    const int h = q / rph;
    for (gidx_t row = rows.begin(q); row < rows.end(q); ++row) {
      for (std::int64_t i = f.whole.row_ptr[row]; i < f.whole.row_ptr[row + 1]; ++i) {
        const gidx_t c = f.whole.col_idx[i];
        const int owner = cols.owner(c);
        if (owner / rph != h) off_host[h].insert(c);
        if (rack_of_rank(owner) != rack_of_rank(q)) off_rack[h].insert(c);
      }
    }
  }
  std::uint64_t lookups = 0, hits = 0, wire = 0, packets = 0, messages = 0, landed = 0;
  for (const auto& s : off_host) landed += s.size();
  for (int r = 0; r < racks && racks > 1; ++r) {
    std::set<gidx_t> in_rack;  // what crossed into rack r so far this run (the cache)
    for (int w = 0; w < per_rack; ++w) {
      const auto& want = off_rack[static_cast<std::size_t>(r * per_rack + w)];
      std::vector<std::uint64_t> misses(static_cast<std::size_t>(racks), 0);
      for (const gidx_t c : want) {
        ++lookups;
        if (in_rack.count(c) != 0) {
          ++hits;
        } else {
          ++misses[static_cast<std::size_t>(rack_of_rank(cols.owner(c)))];
        }
      }
      in_rack.insert(want.begin(), want.end());
      for (const std::uint64_t n : misses) {
        if (n == 0) continue;
        wire += switch_wire(n, 18, &packets) + switch_wire(n, 18 + row_bytes, &packets);
        messages += 2;  // the reads there, the answers back
      }
    }
  }
  if (racks > 1) {
    ASSERT_GT(hits, 0u) << "the fixture must share rows among a rack's hosts";
  }

  DistOptions o;
  o.mode = CommMode::netsparse_node;
  o.rack_switch = true;
  DistKernel kern(f.dm, KernelKind::spmm, k, o);
  for (int run = 0; run < 2; ++run) {  // the second run starts a new epoch: the same counts
    double err = 0;
    (void)run_kernel<float>(kern, f, f.dm.local(), KernelKind::spmm, k, err);
    EXPECT_LE(err, test::kTolerance);
    const CommStats& s = kern.last_run_stats();
    EXPECT_EQ(sum_over_ranks(s.switch_lookups), lookups);
    EXPECT_EQ(sum_over_ranks(s.switch_hits), hits);
    EXPECT_EQ(sum_over_ranks(s.inter_rack_bytes), wire);
    EXPECT_EQ(sum_over_ranks(s.inter_rack_messages), messages);
    // Each remote row still lands once per host, whichever way it came.
    EXPECT_EQ(sum_over_ranks(s.host_rows_landed), landed);
    EXPECT_EQ(sum_over_ranks(s.inter_host_payload_bytes), landed * row_bytes);
    const bool is_switch = world_rank() % (rph * per_rack) == 0;
    if (!is_switch) {
      EXPECT_EQ(s.switch_lookups, 0u);
      EXPECT_EQ(s.inter_rack_bytes, 0u);
    }
  }
  // The totals over the four runs (two per run_kernel) carry the switch's counters too (what
  // netsparse_bench reports).
  const CommStats& t = kern.total_stats();
  EXPECT_EQ(t.runs, 4u);
  EXPECT_EQ(sum_over_ranks(t.switch_lookups), 4 * lookups);
  EXPECT_EQ(sum_over_ranks(t.switch_hits), 4 * hits);
  EXPECT_EQ(sum_over_ranks(t.inter_rack_bytes), 4 * wire);
  EXPECT_EQ(sum_over_ranks(t.inter_rack_messages), 4 * messages);
}

// The model, from the whole matrix and the layout alone: per host, the distinct columns its
// ranks' rows touch that ranks of other hosts own; per rank, the same per rank.
TEST(NodeAwareIe, InterHostPayloadIsTheNodeWideMinimum) {
  const Fixture f = make_fixture("gen:kron:9");
  const int rph = ranks_per_host(), p = world_size(), nhosts = p / rph;
  const int k = 4;
  const RowPartition& rows = f.dm.rows();
  const RowPartition& cols = f.dm.cols();
  std::vector<std::set<gidx_t>> per_host(static_cast<std::size_t>(nhosts));
  std::set<std::pair<int, int>> host_pairs;  // (from, to) with rows to carry
  std::uint64_t per_rank_total = 0;
  std::uint64_t off_host_nonzeros = 0;  // what the hosts' Idx Filters look up
  for (int q = 0; q < p; ++q) {
    std::set<gidx_t> mine;
    const int h = q / rph;
    for (gidx_t row = rows.begin(q); row < rows.end(q); ++row) {
      for (std::int64_t i = f.whole.row_ptr[row]; i < f.whole.row_ptr[row + 1]; ++i) {
        const gidx_t c = f.whole.col_idx[i];
        const int owner_host = cols.owner(c) / rph;
        if (owner_host == h) continue;
        ++off_host_nonzeros;
        mine.insert(c);
        per_host[h].insert(c);
        host_pairs.insert({owner_host, h});
      }
    }
    per_rank_total += mine.size();
  }
  std::uint64_t node_wide = 0;
  for (const auto& s : per_host) node_wide += s.size();
  ASSERT_LT(node_wide, per_rank_total) << "the fixture must have rows shared by a host's ranks";

  const std::uint64_t row_bytes = k * sizeof(float);
  const HostVolume v = host_volume(DistKernel(f.dm, KernelKind::spmm, k, DistOptions{}));
  EXPECT_EQ(v.hosts, nhosts);
  EXPECT_TRUE(v.virtual_hosts);
  EXPECT_EQ(v.host_rows_total, node_wide);
  EXPECT_EQ(v.rank_rows_total, per_rank_total);
  EXPECT_EQ(v.row_bytes, row_bytes);

  // CommMode::netsparse, the default, is the node-wide engine on these hosts of several ranks
  // (resolve_comm_mode), and counts exactly as netsparse-node does.
  // netsparse-node once more with the leader alone running the host's engine.
  // NETSPARSE_NODE_ENGINES: every rank's engine (ranks), the leader's alone, and auto, which is
  // ranks where every rank of the machine has a core of its own, else leader (all ranks of this
  // test run on one machine).
  const std::pair<CommMode, std::string> cases[] = {
      {CommMode::node_aware_ie, ""},        {CommMode::inspector_executor, ""},
      {CommMode::netsparse_node, "ranks"},  {CommMode::netsparse, "ranks"},
      {CommMode::netsparse_node, "leader"}, {CommMode::netsparse, ""}};
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const bool auto_is_leader = CPU_COUNT(&mask) < world_size();
  for (const auto& [mode, engines] : cases) {
    DistOptions o;
    o.mode = mode;
    if (!engines.empty()) setenv("NETSPARSE_NODE_ENGINES", engines.c_str(), 1);
    DistKernel kern(f.dm, KernelKind::spmm, k, o);
    unsetenv("NETSPARSE_NODE_ENGINES");
    if (mode == CommMode::netsparse) {
      EXPECT_EQ(kern.mode(), CommMode::netsparse_node);
    }
    double err = 0;
    (void)run_kernel<float>(kern, f, f.dm.local(), KernelKind::spmm, k, err);
    EXPECT_LE(err, test::kTolerance);
    const CommStats& s = kern.last_run_stats();
    const std::uint64_t payload = sum_over_ranks(s.inter_host_payload_bytes);
    const std::uint64_t messages = sum_over_ranks(s.inter_host_messages);
    const std::uint64_t wire = sum_over_ranks(s.inter_host_bytes);
    EXPECT_GT(sum_over_ranks(s.intra_host_bytes), 0u) << to_string(mode);
    if (kern.mode() == CommMode::netsparse_node) {
      // Each remote row lands once per host; the leader's engine alone crosses hosts. Its wire
      // bytes are the engine's packets (requests, concatenation headers), so only bounded here.
      EXPECT_EQ(payload, node_wide * row_bytes);
      EXPECT_EQ(sum_over_ranks(s.host_rows_landed), node_wide);
      EXPECT_EQ(sum_over_ranks(s.host_filter_lookups), off_host_nonzeros);
      EXPECT_GT(wire, payload);
      EXPECT_GE(messages, host_pairs.size());
      // The host's engines (NETSPARSE_NODE_ENGINES): by default every rank runs one for the
      // host pairs dealt to it, pair (h, g) to host rank (h + g) mod R; with "leader" only the
      // leaders cross hosts.
      const bool leader_only = engines == "leader" || (engines.empty() && auto_is_leader);
      const int host = world_rank() / rph, hrank = world_rank() % rph;
      bool dealt_a_pair = false;
      for (int g = 0; g < nhosts; ++g) dealt_a_pair |= g != host && (host + g) % rph == hrank;
      if (leader_only && hrank != 0) {
        EXPECT_EQ(s.inter_host_messages, 0u);
        EXPECT_EQ(s.inter_host_bytes, 0u);
      }
      // The steady state: the first run recorded the plans, the second armed their owners;
      // from the third on the owners push (no plan start, no quiesce round) and a host pair's
      // rows travel in one frame, as node-aware IE's one message per host pair.
      for (int run = 2; run <= 4; ++run) {
        (void)run_kernel<float>(kern, f, f.dm.local(), KernelKind::spmm, k, err);
        EXPECT_LE(err, test::kTolerance) << "run " << run;
      }
      const CommStats& steady = kern.last_run_stats();
      EXPECT_EQ(sum_over_ranks(steady.inter_host_payload_bytes), node_wide * row_bytes);
      EXPECT_EQ(sum_over_ranks(steady.inter_host_messages), host_pairs.size())
          << "one frame per host pair with rows to carry";
      // Steady: a rank sends between hosts iff it runs the host's engine for some pair (in the
      // first two runs every plane member also takes part in the plane's quiesce rounds).
      if (leader_only ? hrank == 0 : dealt_a_pair) {
        EXPECT_GT(steady.inter_host_messages, 0u) << "this rank's engine gathers for its pairs";
      } else {
        EXPECT_EQ(steady.inter_host_messages, 0u);
        EXPECT_EQ(steady.inter_host_bytes, 0u);
      }
      continue;
    }
    if (mode == CommMode::node_aware_ie) {
      EXPECT_EQ(payload, node_wide * row_bytes);
      EXPECT_EQ(messages, host_pairs.size());  // one per host pair with rows to carry
      // Only leaders talk across hosts.
      if (world_rank() % rph != 0) {
        EXPECT_EQ(s.inter_host_messages, 0u);
      }
    } else {
      EXPECT_EQ(payload, per_rank_total * row_bytes);
      EXPECT_GT(messages, host_pairs.size());
    }
    EXPECT_EQ(wire, payload + 50 * messages) << to_string(mode);  // the wire model's 50 B
  }
}

}  // namespace
}  // namespace netsparse
