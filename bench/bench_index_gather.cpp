// Index gather (the pattern of bale's `ig`): every rank holds n_per_rank rows of K floats of a
// distributed table and fetches `requests` rows at uniformly random global indices into a dense
// output (out[j] = table[idx[j]]). One run measures, side by side on the same data:
//   rig            NS_WR_RIG with every mechanism (filter, coalesce, concatenation)
//   rig-nofilter / rig-nocoalesce / rig-noconcat   ablations
//   rig-nohint (with --unique)   rig without NS_SEND_UNIQUE (the rig rows state their idxs unique)
//   rig-paperwire  rig with the paper's Fig. 6 packets (18 B per PR each way) instead of the
//                  compact software wire (docs/protocol.md)
//   vanilla        one NS_WR_RDMA_READ per index (sparsity-aware without aggregation)
//   conveyors      the library's Conveyors-style software aggregation baseline (lib/distributed
//                  RequestReply: request and reply conveyors with per-destination buffers, the
//                  MPI porter's MPI_Isend/Irecv/Testsome, a non-blocking push refused when the
//                  link's buffers are busy); the same code as netsparse_bench's sa-conveyors
//   line           re-measure the line rate every round (netsparse::measure_line_rate, as
//                  netsparse_bench: every rank streaming 8 MiB to rank r + P/2 at once)
// Figures per rank: rows/s, goodput (distinct remote property bytes / s / line rate) and line
// utilization (bytes on the wire / s / line rate, priced by the one wire model,
// concat/wire_model.hpp: engine counters for RIG, 2 x 78 B + P per vanilla read, 16 B buffer
// header + items + 50 B per conveyor buffer), and `moved`: the same for the bytes the transport
// really carried (NS_STAT_MOVED_BYTES for RIG: on the compact wire far fewer than the paper's
// format prices; the model's bytes for the others). Run with mpirun; --help lists the options.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "concat/wire_model.hpp"
#include "conveyor/request_reply.hpp"
#include "engine_stats.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/netsparse_mpi.h"
#include "report.hpp"
#include "stall_guard.hpp"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

// ---- options -------------------------------------------------------------------------------
struct Options {
  std::vector<int> K = {1, 16, 128, 256};
  std::uint64_t n_per_rank = 1u << 18;
  std::uint64_t requests = 1u << 19;
  std::uint64_t max_out_bytes = 128ull << 20;  // caps requests for large K (memory)
  std::uint64_t vanilla_requests = 1u << 17;
  bool unique = false;
  std::vector<std::string> modes = {"rig",          "rig-nofilter",  "rig-nocoalesce",
                                    "rig-noconcat", "rig-paperwire", "vanilla",
                                    "conveyors",    "line"};
  std::vector<int> progress = {NS_PROGRESS_THREAD, NS_PROGRESS_INLINE};
  bool indexed = false;        // RIG output: positional (bale ig) or a replica of the whole table
  std::uint64_t batch = 8192;  // idxs per RIG work request
  int inflight = 8;            // RIG work requests in flight
  std::uint32_t packet_bytes = 0;          // 0: engine default
  std::int64_t delay_ns = -1;              // -1: engine default
  int client_units = 0, server_units = 0;  // 0: engine default
  std::uint32_t pending = 0;               // 0: engine default
  // Conveyor configurations, all measured; the ratios use the fastest. bale's default link
  // buffer is 10000 B (above Open MPI's 4 KiB shared-memory eager limit); 4000 B stays eager.
  std::vector<std::size_t> conveyor_buffers = {10000, 4000};
  std::vector<int> conveyor_nbufs = {2, 8};  // buffers per link (bale's default: 2)
  int reps = 1;
  std::string json;
  std::uint64_t seed = 12345;
};

const char* const kHelp =
    "usage: mpirun -np N bench_index_gather [options]\n"
    "  --K LIST              properties of K floats, comma separated (default 1,16,128,256)\n"
    "  --n-per-rank N        table rows per rank (default 262144)\n"
    "  --requests N          indices gathered per rank (default 524288; capped so the output\n"
    "                        stays <= --max-out-mb)\n"
    "  --max-out-mb N        output buffer cap per mode in MiB (default 128)\n"
    "  --vanilla-requests N  indices for the vanilla mode (default 131072; it is slow)\n"
    "  --unique              draw each rank's indices without repetition (no filtering help);\n"
    "                        the RIG rows then say so (NS_SEND_UNIQUE: no filter word per idx),\n"
    "                        rig-nohint is the same gather without the hint\n"
    "  --modes LIST          "
    "rig,rig-nohint,rig-nofilter,rig-nocoalesce,rig-noconcat,rig-paperwire,\n"
    "                        vanilla,conveyors,line\n"
    "  --progress MODE       thread | inline | both (default both)\n"
    "  --batch N             idxs per RIG work request (default 8192)\n"
    "  --layout L            RIG output: positional (out[j] = row idx[j], default) or indexed\n"
    "                        (a replica of the whole table, row i at out[i]: repeats across\n"
    "                        work requests are dropped by the Idx Filter)\n"
    "  --inflight N          RIG work requests in flight (default 8)\n"
    "  --packet-bytes N      NetSparse packet size (default: engine default, 1500)\n"
    "  --delay-ns N          concatenation delay (default: engine default)\n"
    "  --units C,S           client and server units (default: engine default 2,2)\n"
    "  --pending N           Pending PR Table entries per client unit (default: engine's 256)\n"
    "  --conveyor-buffer L   bytes per conveyor link buffer, list (default 10000,4000)\n"
    "  --conveyor-nbuf L     buffers per conveyor link, list (default 2,8); every combination\n"
    "                        is measured and the fastest is the baseline of the ratios\n"
    "  --reps N              repetitions per mode, best time reported (default 1)\n"
    "  --seed N              index seed (default 12345)\n"
    "  --json FILE           also write every row as JSON\n"
    "  --help\n";

const std::vector<std::string> kModes = {
    "rig",     "rig-nohint", "rig-nofilter", "rig-nocoalesce", "rig-noconcat", "rig-paperwire",
    "vanilla", "conveyors",  "line"};

// Variant::flags bit of the rig-paperwire mode (beside the NS_CTX_* ablation bits).
constexpr std::uint32_t kPaperWire = 1u << 30;
// Variant::flags bit: post the RIG work requests with NS_SEND_UNIQUE (with --unique, the rig
// rows state that their idxs are distinct; rig-nohint is the same gather without the hint).
constexpr std::uint32_t kUniqueHint = 1u << 29;

// Every rank parses the same argv; rank 0 prints. -1: go on, else the exit code (2: bad option).
int parse(int argc, char** argv, int rank, Options& o) {
  namespace nb = netsparse::bench;
  constexpr long long kMax = 1LL << 40;
  cli::App app{"bench_index_gather"};
  app.add_option_function<std::string>("--K", [&](const std::string& v) {
    o.K.clear();
    for (long long k : nb::int_list("--K", v, 1, 1 << 20)) o.K.push_back(static_cast<int>(k));
  });
  app.add_option("--n-per-rank", o.n_per_rank)->check(cli::Range(1LL, kMax));
  app.add_option("--requests", o.requests)->check(cli::Range(1LL, kMax));
  app.add_option_function<std::uint64_t>("--max-out-mb",
                                         [&](std::uint64_t mb) { o.max_out_bytes = mb << 20; })
      ->check(cli::Range(1LL, 1LL << 30));
  app.add_option("--vanilla-requests", o.vanilla_requests)->check(cli::Range(0LL, kMax));
  app.add_flag("--unique", o.unique);
  app.add_option_function<std::string>(
      "--modes", [&](const std::string& v) { o.modes = nb::member_list("--modes", v, kModes); });
  const std::map<std::string, std::vector<int>> progress = {
      {"thread", {NS_PROGRESS_THREAD}},
      {"inline", {NS_PROGRESS_INLINE}},
      {"both", {NS_PROGRESS_THREAD, NS_PROGRESS_INLINE}}};
  app.add_option_function<std::string>("--progress",
                                       [&](const std::string& v) { o.progress = progress.at(v); })
      ->check(cli::IsMember({"thread", "inline", "both"}));
  app.add_option_function<std::string>("--layout",
                                       [&](const std::string& v) { o.indexed = v == "indexed"; })
      ->check(cli::IsMember({"positional", "indexed"}));
  app.add_option("--batch", o.batch)->check(cli::Range(1LL, kMax));
  app.add_option("--inflight", o.inflight)->check(cli::Range(1, 1 << 20));
  app.add_option("--packet-bytes", o.packet_bytes)->check(cli::Range(0, 1 << 24));
  app.add_option("--delay-ns", o.delay_ns)->check(cli::Range(0LL, kMax));
  app.add_option_function<std::string>("--units", [&](const std::string& v) {
    const std::vector<long long> u = nb::int_list("--units", v, 1, 1024);
    if (u.size() != 2)
      throw cli::ValidationError("--units", "needs C,S (two counts), got '" + v + "'");
    o.client_units = static_cast<int>(u[0]);
    o.server_units = static_cast<int>(u[1]);
  });
  app.add_option("--pending", o.pending)->check(cli::Range(1, 1 << 24));
  app.add_option_function<std::string>("--conveyor-buffer", [&](const std::string& v) {
    o.conveyor_buffers.clear();
    for (long long b : nb::int_list("--conveyor-buffer", v, 16, 1 << 26))
      o.conveyor_buffers.push_back(static_cast<std::size_t>(b));
  });
  app.add_option_function<std::string>("--conveyor-nbuf", [&](const std::string& v) {
    o.conveyor_nbufs.clear();
    for (long long b : nb::int_list("--conveyor-nbuf", v, 1, 1024))
      o.conveyor_nbufs.push_back(static_cast<int>(b));
  });
  app.add_option("--reps", o.reps)->check(cli::Range(1, 1000000));
  app.add_option("--seed", o.seed);
  app.add_option("--json", o.json);
  return nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_index_gather",
                                 kHelp, rank == 0);
}

bool has_mode(const Options& o, const char* m) {
  return std::find(o.modes.begin(), o.modes.end(), m) != o.modes.end();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const char* what, int status) {
  std::fprintf(stderr, "bench_index_gather: %s: %s (%s)\n", what, ns_status_str(status),
               ns_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

// ---- the data ------------------------------------------------------------------------------
inline float table_value(std::uint64_t row, int k) {
  return static_cast<float>((row * 31 + static_cast<std::uint64_t>(k)) % 16777213u);
}

struct Data {
  int rank = 0, size = 1, K = 1;
  std::uint32_t P = 4;
  std::uint64_t n_total = 0, row_begin = 0, n_local = 0;
  std::vector<std::uint64_t> offsets;
  std::vector<float> table;        // local rows
  std::vector<std::uint64_t> idx;  // this rank's requests
  std::uint64_t distinct_remote = 0;
};

Data make_data(const Options& o, int K, std::uint64_t requests, int rank, int size) {
  Data d;
  d.rank = rank;
  d.size = size;
  d.K = K;
  d.P = static_cast<std::uint32_t>(K) * 4;
  d.n_local = o.n_per_rank;
  d.n_total = o.n_per_rank * static_cast<std::uint64_t>(size);
  d.row_begin = o.n_per_rank * static_cast<std::uint64_t>(rank);
  d.offsets.resize(static_cast<std::size_t>(size) + 1);
  for (int p = 0; p <= size; ++p)
    d.offsets[static_cast<std::size_t>(p)] = o.n_per_rank * static_cast<std::uint64_t>(p);
  d.table.resize(d.n_local * static_cast<std::uint64_t>(K));
  for (std::uint64_t r = 0; r < d.n_local; ++r) {
    for (int k = 0; k < K; ++k)
      d.table[r * static_cast<std::uint64_t>(K) + static_cast<std::uint64_t>(k)] =
          table_value(d.row_begin + r, k);
  }
  std::mt19937_64 rng(o.seed * 7919 + static_cast<std::uint64_t>(rank));
  d.idx.resize(requests);
  if (o.unique) {
    // Partial Fisher-Yates over [0, n_total): `requests` distinct rows in random order.
    std::vector<std::uint64_t> all(d.n_total);
    std::iota(all.begin(), all.end(), 0);
    for (std::uint64_t j = 0; j < requests; ++j) {
      const std::uint64_t pick = j + rng() % (d.n_total - j);
      std::swap(all[j], all[pick]);
      d.idx[j] = all[j];
    }
  } else {
    for (auto& i : d.idx) i = rng() % d.n_total;
  }
  std::vector<std::uint64_t> remote;
  for (std::uint64_t i : d.idx) {
    if (i < d.row_begin || i >= d.row_begin + d.n_local) remote.push_back(i);
  }
  std::sort(remote.begin(), remote.end());
  d.distinct_remote =
      static_cast<std::uint64_t>(std::unique(remote.begin(), remote.end()) - remote.begin());
  return d;
}

// Every byte of the output against the table formula.
std::uint64_t count_errors(const Data& d, const std::vector<std::uint64_t>& idx, const float* out) {
  std::uint64_t bad = 0;
  for (std::size_t j = 0; j < idx.size(); ++j) {
    for (int k = 0; k < d.K; ++k) {
      const float want = table_value(idx[j], k);
      if (std::memcmp(&out[j * static_cast<std::size_t>(d.K) + static_cast<std::size_t>(k)], &want,
                      4) != 0) {
        ++bad;
        break;
      }
    }
  }
  return bad;
}

// INDEXED replica: row idx[j] at out[idx[j]].
std::uint64_t count_errors_indexed(const Data& d, const float* out) {
  std::uint64_t bad = 0;
  for (std::uint64_t i : d.idx) {
    for (int k = 0; k < d.K; ++k) {
      const float want = table_value(i, k);
      if (std::memcmp(&out[i * static_cast<std::uint64_t>(d.K) + static_cast<std::uint64_t>(k)],
                      &want, 4) != 0) {
        ++bad;
        break;
      }
    }
  }
  return bad;
}

// ---- results -------------------------------------------------------------------------------
struct Row {
  int K = 0;
  std::string mode, progress;
  std::uint64_t requests = 0;
  double seconds = 0;     // max over ranks
  double rows_per_s = 0;  // per rank
  double goodput = 0;     // fraction of line rate, mean over ranks
  double line_util = 0;   // fraction of line rate, mean over ranks (the paper's bytes)
  double moved_util = 0;  // the same for the bytes the transport really moved
  double prs_per_packet = 0;
  double fc_rate = 0;
  std::uint64_t errors = 0;  // summed over ranks
};

using netsparse::bench::max_over_ranks;

double mean_over_ranks(double v) {
  double s = 0;
  int n = 1;
  MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return s / n;
}
std::uint64_t sum_over_ranks(std::uint64_t v) {
  std::uint64_t s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

// ---- RIG and vanilla through the public API ------------------------------------------------
ns_context_attr rig_attr(const Options& o, int progress, std::uint32_t flags) {
  ns_context_attr a{};
  a.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_FLAGS | NS_CTX_ATTR_WATCHDOG;
  a.progress_mode = progress;
  a.flags = flags & ~(kPaperWire | kUniqueHint);
  if ((flags & kPaperWire) != 0) {
    a.comp_mask |= NS_CTX_ATTR_WIRE;
    a.wire = NS_WIRE_PAPER;
  }
  a.watchdog_ms = 60000;
  if (o.packet_bytes != 0) {
    a.comp_mask |= NS_CTX_ATTR_PACKET;
    a.packet_bytes = o.packet_bytes;
  }
  if (o.delay_ns >= 0) {
    a.comp_mask |= NS_CTX_ATTR_DELAY;
    a.concat_delay_ns = static_cast<std::uint64_t>(o.delay_ns);
  }
  if (o.pending > 0) {
    a.comp_mask |= NS_CTX_ATTR_PENDING;
    a.pending_entries = o.pending;
  }
  if (o.client_units > 0) {
    a.comp_mask |= NS_CTX_ATTR_UNITS;
    a.num_client_units = o.client_units;
    a.num_server_units = o.server_units;
  }
  return a;
}

struct Engine {
  ns_context* ctx = nullptr;
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  Engine(const ns_context_attr& attr, Data& d, int depth) {
    ns_status_t s = ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx);
    if (s != NS_OK) die("ns_open_mpi", s);
    s = ns_reg_props(ctx, d.table.data(), d.n_local, d.P, d.offsets.data(), &mr);
    if (s != NS_OK) die("ns_reg_props", s);
    if ((s = ns_create_cq(ctx, depth * 2, &cq)) != NS_OK) die("ns_create_cq", s);
    if ((s = ns_create_qp(ctx, cq, depth, &qp)) != NS_OK) die("ns_create_qp", s);
    print_config_once();
  }
  // The configuration the engine runs (defaults and AUTO resolved), from ns_stats_json: once
  // per distinct configuration.
  void print_config_once() const {
    static std::vector<std::string> seen;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) return;
    const netsparse::bench::Json stats = netsparse::bench::engine_stats_json(ctx);
    if (stats.is_null()) return;
    const std::string config = stats["config"].dump();
    if (std::find(seen.begin(), seen.end(), config) != seen.end()) return;
    seen.push_back(config);
    std::printf("engine config (%s transport): %s\n", ns_transport_name(ctx), config.c_str());
  }
  ~Engine() {
    ns_destroy_qp(qp);
    ns_destroy_cq(cq);
    const ns_status_t s = ns_close(ctx);
    if (s != NS_OK) die("ns_close", s);
  }
};

// Posts RIG work requests of `batch` idxs, `inflight` at a time; returns seconds until all done.
// The untimed warm-up of a measurement: the whole gather once (a ring's pages are allocated as
// frames first reach them, so a shorter warm-up left the first lap of each ring to the timed
// gather: 1 ms of page faults at K = 1; the conveyors get the same).
constexpr std::uint64_t kWarmupIdxs = UINT64_MAX;

double run_rig(Engine& e, const Data& d, const Options& o, float* out, unsigned hint,
               std::uint64_t limit = UINT64_MAX) {
  const std::uint64_t n = std::min<std::uint64_t>(d.idx.size(), limit);
  const std::uint64_t nwr = (n + o.batch - 1) / o.batch;
  std::uint64_t posted = 0, done = 0;
  ns_wc wc[16];
  const double t0 = now_s();
  while (done < nwr) {
    while (posted < nwr && posted - done < static_cast<std::uint64_t>(o.inflight)) {
      ns_send_wr w{};
      const std::uint64_t begin = posted * o.batch;
      w.wr_id = posted;
      w.opcode = NS_WR_RIG;
      w.send_flags = NS_SEND_SIGNALED | hint;
      w.wr.rig.mr = e.mr;
      w.wr.rig.idx = d.idx.data() + begin;
      w.wr.rig.count = std::min(o.batch, n - begin);
      if (o.indexed) {  // `out` is a replica of the whole table
        w.wr.rig.out = out;
        w.wr.rig.layout = NS_RIG_LAYOUT_INDEXED;
        w.wr.rig.window_base = 0;
        w.wr.rig.window_len = d.n_total;
        w.wr.rig.out_bytes = d.n_total * static_cast<std::uint64_t>(d.K) * sizeof(float);
      } else {
        w.wr.rig.out = out + begin * static_cast<std::uint64_t>(d.K);
        w.wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
        w.wr.rig.out_bytes = w.wr.rig.count * static_cast<std::uint64_t>(d.K) * sizeof(float);
      }
      ns_send_wr* bad = nullptr;
      const ns_status_t s = ns_post_send(e.qp, &w, &bad);
      if (s == NS_ERR_NO_RESOURCE) break;
      if (s != NS_OK) die("ns_post_send", s);
      ++posted;
    }
    const int got = ns_cq_wait(e.cq, 16, wc, 60000);
    if (got <= 0) die("ns_cq_wait (no completion in 60 s)", got == 0 ? NS_ERR_TIMEOUT : got);
    for (int k = 0; k < got; ++k) {
      if (wc[k].status != NS_WC_SUCCESS) {
        std::fprintf(stderr, "RIG completion: %s\n", ns_wc_status_str(wc[k].status));
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    done += static_cast<std::uint64_t>(got);
  }
  return now_s() - t0;
}

// One NS_WR_RDMA_READ per index, posted in chains of 64 (one doorbell per chain).
double run_vanilla(Engine& e, const Data& d, const std::vector<std::uint64_t>& idx, int depth,
                   float* out) {
  constexpr int kChain = 64;
  std::vector<ns_send_wr> w(kChain);
  const std::uint64_t n = idx.size();
  std::uint64_t posted = 0, done = 0;
  std::vector<ns_wc> wc(256);
  const double t0 = now_s();
  while (done < n) {
    while (posted < n && posted - done + kChain <= static_cast<std::uint64_t>(depth)) {
      const int c = static_cast<int>(std::min<std::uint64_t>(kChain, n - posted));
      for (int k = 0; k < c; ++k) {
        const std::uint64_t j = posted + static_cast<std::uint64_t>(k);
        w[k] = ns_send_wr{};
        w[k].wr_id = j;
        w[k].opcode = NS_WR_RDMA_READ;
        w[k].send_flags = NS_SEND_SIGNALED;
        w[k].wr.rdma_read.mr = e.mr;
        w[k].wr.rdma_read.idx = idx[j];
        w[k].wr.rdma_read.out = out + j * static_cast<std::uint64_t>(d.K);
        w[k].wr.rdma_read.out_bytes = static_cast<std::uint64_t>(d.K) * sizeof(float);
        w[k].next = k + 1 < c ? &w[k + 1] : nullptr;
      }
      ns_send_wr* bad = nullptr;
      const ns_status_t s = ns_post_send(e.qp, w.data(), &bad);
      if (s != NS_OK) die("ns_post_send (vanilla)", s);
      posted += static_cast<std::uint64_t>(c);
    }
    const int got = ns_cq_wait(e.cq, static_cast<int>(wc.size()), wc.data(), 60000);
    if (got <= 0) die("ns_cq_wait (vanilla)", got == 0 ? NS_ERR_TIMEOUT : got);
    for (int k = 0; k < got; ++k) {
      if (wc[static_cast<std::size_t>(k)].status != NS_WC_SUCCESS) {
        std::fprintf(stderr, "RDMA_READ completion: %s\n",
                     ns_wc_status_str(wc[static_cast<std::size_t>(k)].status));
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    done += static_cast<std::uint64_t>(got);
  }
  return now_s() - t0;
}

// ---- Conveyors-style aggregation baseline --------------------------------------------------
// The library's Conveyors baseline (lib/distributed: RequestReply over two Conveyors with the
// MPI porter, the same code as netsparse_bench's sa-conveyors): a request (local row u32,
// position u32) goes to the row's owner, which answers (position u32, the row) straight into
// its reply buffer. Local rows are copied directly. Per-destination buffers of `buffer_bytes`,
// `buffers_per_link` per link and direction, non-blocking pushes refused when a link's buffers
// are all in flight, END-counting termination. Returns seconds from begin to completion.
double run_conveyors(netsparse::dist::RequestReply& rr, const Data& d, float* out,
                     std::uint64_t limit = UINT64_MAX) {
  const std::uint64_t K = static_cast<std::uint64_t>(d.K);
  const std::uint64_t n = std::min<std::uint64_t>(d.idx.size(), limit);
  const std::uint32_t P = d.P;
  const float* table = d.table.data();
  const auto answer = [table, K, P](const std::byte* request, int, std::byte* reply) {
    std::uint32_t local = 0;
    std::memcpy(&local, request, 4);
    std::memcpy(reply, request + 4, 4);  // the position, echoed
    std::memcpy(reply + 4, table + std::uint64_t{local} * K, P);
  };
  const double t0 = now_s();
  rr.begin(8, 4 + std::size_t{P});
  std::uint64_t next = 0;
  while (rr.advance(next == n, answer)) {
    for (; next < n; ++next) {
      const std::uint64_t i = d.idx[next];
      const int owner = static_cast<int>(i / d.n_local);
      if (owner == d.rank) {
        std::memcpy(out + next * K, table + (i - d.row_begin) * K, P);
        continue;
      }
      std::byte* request = rr.reserve(owner);
      if (request == nullptr) break;  // the link's buffers are all in flight
      const auto local = static_cast<std::uint32_t>(i - d.offsets[static_cast<std::size_t>(owner)]);
      const auto pos = static_cast<std::uint32_t>(next);
      std::memcpy(request, &local, 4);
      std::memcpy(request + 4, &pos, 4);
    }
    int from = 0;
    while (const std::byte* reply = rr.pull(&from)) {
      std::uint32_t pos = 0;
      std::memcpy(&pos, reply, 4);
      std::memcpy(out + std::uint64_t{pos} * K, reply + 4, P);
    }
  }
  return now_s() - t0;
}

// ---- driver --------------------------------------------------------------------------------
const char* progress_name(int p) {
  return p == NS_PROGRESS_INLINE ? "inline" : "thread";
}

void print_row(const Row& r) {
  std::printf("%-15s %-8s %9" PRIu64 " %10.2f %13.3f %8.2f%% %8.2f%% %8.2f%% %8.2f %6.1f%% %s\n",
              r.mode.c_str(), r.progress.c_str(), r.requests, r.seconds * 1e3, r.rows_per_s / 1e6,
              r.goodput * 100, r.line_util * 100, r.moved_util * 100, r.prs_per_packet,
              r.fc_rate * 100, r.errors == 0 ? "ok" : "WRONG");
}

// ---- one run ---------------------------------------------------------------------------------
enum class VariantKind { rig, vanilla, conveyors };

// One measured configuration: a mode with its progress (or conveyor buffers), best of --reps.
struct Variant {
  std::string mode, progress;
  VariantKind kind = VariantKind::rig;
  int progress_mode = NS_PROGRESS_THREAD;
  std::uint32_t flags = 0;
  std::size_t conveyor_buffer = 0;
  int conveyor_nbuf = 0;
  std::uint64_t requests = 0;
  double best = 1e300, wire = 0, moved = 0, ppp = 0, fc = 0;
  std::uint64_t errors = 0, remote = 0;
};

// The data of one K, its output buffers and the indices vanilla reads (a prefix: it is slow).
struct Workload {
  Data d;
  std::uint64_t requests = 0;
  std::vector<std::uint64_t> vidx;
  std::vector<float> out, replica;
};

Workload make_workload(const Options& o, int K, int rank, int size) {
  Workload w;
  w.requests = std::max<std::uint64_t>(
      1, std::min<std::uint64_t>(o.requests,
                                 o.max_out_bytes / (4ull * static_cast<std::uint64_t>(K))));
  if (o.unique && w.requests > o.n_per_rank * static_cast<std::uint64_t>(size)) {
    if (rank == 0) std::fprintf(stderr, "--unique needs --requests <= n_per_rank * np\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  w.d = make_data(o, K, w.requests, rank, size);
  w.out.resize(w.requests * static_cast<std::uint64_t>(K));
  w.replica.resize(o.indexed ? w.d.n_total * static_cast<std::uint64_t>(K) : 0);
  const std::uint64_t nv = std::min<std::uint64_t>(o.vanilla_requests, w.requests);
  w.vidx.assign(w.d.idx.begin(), w.d.idx.begin() + static_cast<std::ptrdiff_t>(nv));
  return w;
}

std::vector<Variant> make_variants(const Options& o, const std::vector<int>& progress,
                                   const Workload& w) {
  std::vector<Variant> variants;
  // With --unique the caller knows its idxs are distinct and says so (NS_SEND_UNIQUE) on every
  // RIG row; rig-nohint, the same gather without the hint, shows what the hint saves.
  const std::uint32_t hint = o.unique ? kUniqueHint : 0;
  const std::pair<const char*, std::uint32_t> rig_modes[] = {
      {"rig", hint},
      {"rig-nohint", 0},
      {"rig-nofilter", NS_CTX_NO_FILTER | hint},
      {"rig-nocoalesce", NS_CTX_NO_COALESCE | hint},
      {"rig-noconcat", NS_CTX_NO_CONCAT | hint},
      {"rig-paperwire", kPaperWire | hint}};
  for (const auto& [name, flags] : rig_modes) {
    if (!has_mode(o, name)) continue;
    if (!o.unique && std::string_view(name) == "rig-nohint") continue;  // the same as rig
    for (int p : progress) {
      Variant v;
      v.mode = name;
      v.progress = progress_name(p);
      v.progress_mode = p;
      v.flags = flags;
      v.requests = w.requests;
      variants.push_back(v);
    }
  }
  if (has_mode(o, "vanilla")) {
    for (int p : progress) {
      Variant v;
      v.mode = "vanilla";
      v.progress = progress_name(p);
      v.kind = VariantKind::vanilla;
      v.progress_mode = p;
      v.requests = w.vidx.size();
      for (std::uint64_t i : w.vidx)
        v.remote += (i < w.d.row_begin || i >= w.d.row_begin + w.d.n_local) ? 1 : 0;
      variants.push_back(v);
    }
  }
  if (has_mode(o, "conveyors")) {
    for (std::size_t cb : o.conveyor_buffers) {
      for (int nb : o.conveyor_nbufs) {
        Variant v;
        v.mode = "conveyors";
        v.progress = std::to_string(cb) + "x" + std::to_string(nb);
        v.kind = VariantKind::conveyors;
        v.conveyor_buffer = cb;
        v.conveyor_nbuf = nb;
        v.requests = w.requests;
        variants.push_back(v);
      }
    }
  }
  return variants;
}

// One round of one variant: the slowest rank's time, wire bytes, PRs per packet, F+C rate.
struct Measurement {
  double t = 0, wire = 0, moved = 0, ppp = 0, fc = 0;
};

Measurement measure_rig(Variant& v, const Options& o, Workload& w) {
  Measurement m;
  Data& d = w.d;
  Engine e(rig_attr(o, v.progress_mode, v.flags), d, 2 * o.inflight);
  float* target = o.indexed ? w.replica.data() : w.out.data();
  // An untimed warm-up gather (kWarmupIdxs idxs), as the conveyors get one: the engine's lazy
  // first-use costs (its shared-memory rings, created and mapped when a peer is first sent to,
  // their pages allocated as frames first reach them) are its open's, not the gather's; without
  // it every rep of --reps paid them on a fresh engine while the conveyors' MPI links stayed
  // warm across reps.
  (void)run_rig(e, d, o, target, (v.flags & kUniqueHint) != 0 ? unsigned{NS_SEND_UNIQUE} : 0u,
                kWarmupIdxs);
  if (ns_quiesce(e.ctx, 60000) != NS_OK) die("ns_quiesce (warm-up)", NS_ERR_TIMEOUT);
  MPI_Barrier(MPI_COMM_WORLD);
  if (o.indexed) std::fill(w.replica.begin(), w.replica.end(), -1.0f);
  const double mine =
      run_rig(e, d, o, target, (v.flags & kUniqueHint) != 0 ? unsigned{NS_SEND_UNIQUE} : 0u);
  // Serve the peers until they are done too (INLINE mode: nobody else would), and only
  // then block in an MPI collective.
  if (ns_quiesce(e.ctx, 60000) != NS_OK) die("ns_quiesce", NS_ERR_TIMEOUT);
  m.t = max_over_ranks(mine);
  m.wire = static_cast<double>(ns_stat_get(e.ctx, NS_STAT_WIRE_BYTES));
  m.moved = static_cast<double>(ns_stat_get(e.ctx, NS_STAT_MOVED_BYTES));
  m.ppp = ns_stat_prs_per_packet(e.ctx);
  const double req = static_cast<double>(ns_stat_get(e.ctx, NS_STAT_PRS_REQUESTED));
  m.fc = req == 0 ? 0
                  : static_cast<double>(ns_stat_get(e.ctx, NS_STAT_PRS_FILTERED) +
                                        ns_stat_get(e.ctx, NS_STAT_PRS_COALESCED)) /
                        req;
  v.errors +=
      o.indexed ? count_errors_indexed(d, w.replica.data()) : count_errors(d, d.idx, w.out.data());
  return m;
}

Measurement measure_vanilla(Variant& v, const Options& o, Workload& w) {
  Measurement m;
  const int depth = 1024;
  Engine e(rig_attr(o, v.progress_mode, 0), w.d, depth);
  MPI_Barrier(MPI_COMM_WORLD);
  const double mine = run_vanilla(e, w.d, w.vidx, depth, w.out.data());
  if (ns_quiesce(e.ctx, 60000) != NS_OK) die("ns_quiesce", NS_ERR_TIMEOUT);
  m.t = max_over_ranks(mine);
  // Each remote read is the paper's lone PR both ways (2 x 78 B + P), as netsparse_bench
  // prices sa-vanilla: the one wire model.
  m.wire = static_cast<double>(v.remote) *
           static_cast<double>(netsparse::concat::lone_read_wire_bytes(w.d.P));
  m.moved = m.wire;  // priced by the model only (its reads are one-sided)
  m.ppp = 1;
  v.errors += count_errors(w.d, w.vidx, w.out.data());
  return m;
}

Measurement measure_conveyors(Variant& v, Workload& w) {
  Measurement m;
  netsparse::dist::ConveyorOptions req, rep;
  req.buffer_bytes = v.conveyor_buffer;
  req.buffers_per_link = v.conveyor_nbuf;
  rep = req;
  rep.buffer_bytes = std::max<std::size_t>(v.conveyor_buffer, 4 + w.d.P);  // >= 1 reply
  netsparse::dist::RequestReply rr(MPI_COMM_WORLD, req, rep);
  (void)run_conveyors(rr, w.d, w.out.data(), kWarmupIdxs);  // the same warm-up as RIG's
  MPI_Barrier(MPI_COMM_WORLD);
  m.t = max_over_ranks(run_conveyors(rr, w.d, w.out.data()));
  const auto& q = rr.requests().stats();
  const auto& r = rr.replies().stats();
  m.wire = static_cast<double>(netsparse::dist::wire_bytes(q) + netsparse::dist::wire_bytes(r));
  m.moved = m.wire;  // its buffers as sent (+ the model's 50 B per message)
  // Items (requests + replies) per message.
  const double messages = static_cast<double>(q.buffers_sent + r.buffers_sent);
  m.ppp = messages == 0 ? 0 : static_cast<double>(q.pushed + r.pushed) / messages;
  v.errors += count_errors(w.d, w.d.idx, w.out.data());
  return m;
}

void measure(Variant& v, const Options& o, Workload& w) {
  std::fill(w.out.begin(), w.out.end(), -1.0f);
  Measurement m;
  switch (v.kind) {
    case VariantKind::rig:
      m = measure_rig(v, o, w);
      break;
    case VariantKind::vanilla:
      m = measure_vanilla(v, o, w);
      break;
    case VariantKind::conveyors:
      m = measure_conveyors(v, w);
      break;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (m.t < v.best) {
    v.best = m.t;
    v.wire = m.wire;
    v.moved = m.moved;
    v.ppp = m.ppp;
    v.fc = m.fc;
  }
}

// The variants' rows of one K (collective), printed by rank 0.
std::vector<Row> summarize(const std::vector<Variant>& variants, int K, const Workload& w,
                           std::uint64_t requests, double line, int rank) {
  const Data& d = w.d;
  if (rank == 0) {
    std::printf("\nK=%d (%u B properties), %" PRIu64
                " requests per rank; line rate %.2f GB/s per rank\n",
                K, d.P, requests, line / 1e9);
    std::printf("%-15s %-8s %9s %10s %13s %9s %9s %9s %8s %7s %s\n", "mode", "progress", "requests",
                "time_ms", "Mrows/s/rank", "goodput", "line_util", "moved", "PRs/pkt", "F+C",
                "check");
  }
  std::vector<Row> rows;
  for (const Variant& v : variants) {
    Row r;
    r.K = K;
    r.mode = v.mode;
    r.progress = v.progress;
    r.requests = v.requests;
    r.seconds = v.best;
    r.rows_per_s = static_cast<double>(v.requests) / v.best;
    const double useful = v.kind == VariantKind::vanilla ? static_cast<double>(v.remote)
                                                         : static_cast<double>(d.distinct_remote);
    r.goodput = mean_over_ranks(useful * d.P / v.best / line);
    r.line_util = mean_over_ranks(v.wire / v.best / line);
    r.moved_util = mean_over_ranks(v.moved / v.best / line);
    r.prs_per_packet = mean_over_ranks(v.ppp);
    r.fc_rate = mean_over_ranks(v.fc);
    r.errors = sum_over_ranks(v.errors);
    if (rank == 0) print_row(r);
    rows.push_back(r);
  }
  return rows;
}

// rig against the strongest conveyor configuration and against vanilla, per progress mode.
void print_ratios(const std::vector<Row>& rows, const std::vector<int>& progress) {
  const Row* conv = nullptr;
  for (const Row& r : rows) {
    if (r.mode == "conveyors" && (conv == nullptr || r.rows_per_s > conv->rows_per_s)) conv = &r;
  }
  auto find = [&](const char* mode, const char* prog) -> const Row* {
    for (const Row& r : rows) {
      if (r.mode == mode && r.progress == prog) return &r;
    }
    return nullptr;
  };
  for (int p : progress) {
    const Row* rig = find("rig", progress_name(p));
    const Row* van = find("vanilla", progress_name(p));
    if (rig == nullptr) continue;
    if (conv != nullptr) {
      std::printf("ratio rig(%s) / conveyors(best: %s) = %.2f\n", progress_name(p),
                  conv->progress.c_str(), rig->rows_per_s / conv->rows_per_s);
    }
    if (van != nullptr) {
      std::printf("ratio rig(%s) / vanilla(%s)         = %.2f\n", progress_name(p),
                  progress_name(p), rig->rows_per_s / van->rows_per_s);
    }
  }
}

// Every variant of one K: --reps interleaved rounds (a noisy neighbour on a shared machine hits
// all variants alike), the best round of each. `line` rises to the best line rate measured.
std::vector<Row> run_width(int K, const Options& o, const std::vector<int>& progress, double& line,
                           netsparse::bench::StallGuard& stall, int rank, int size) {
  Workload w = make_workload(o, K, rank, size);
  std::vector<Variant> variants = make_variants(o, progress, w);
  for (int rep = 0; rep < o.reps; ++rep) {
    if (has_mode(o, "line")) line = std::max(line, netsparse::measure_line_rate(MPI_COMM_WORLD));
    for (Variant& v : variants) {
      stall.beat("K=" + std::to_string(K) + " " + v.mode + " (" + v.progress + ") round " +
                 std::to_string(rep + 1));
      measure(v, o, w);
    }
  }
  std::vector<Row> rows = summarize(variants, K, w, w.requests, line, rank);
  if (rank == 0) print_ratios(rows, progress);
  return rows;
}

void print_header(const Options& o, int size) {
  std::printf("index gather: np=%d, n_per_rank=%" PRIu64
              ", %s indices, RIG layout %s, batch=%" PRIu64 ", inflight=%d\n",
              size, o.n_per_rank, o.unique ? "unique" : "uniform random",
              o.indexed ? "indexed (replica)" : "positional", o.batch, o.inflight);
  std::printf(
      "engine knobs given: packet_bytes %s, pending entries/unit %s, units %s "
      "(the configuration each engine runs is printed when it opens)\n",
      o.packet_bytes ? std::to_string(o.packet_bytes).c_str() : "default",
      o.pending ? std::to_string(o.pending).c_str() : "default",
      o.client_units
          ? (std::to_string(o.client_units) + "," + std::to_string(o.server_units)).c_str()
          : "default");
  std::printf("%d interleaved round(s) per K; each figure is the best round\n", o.reps);
}

netsparse::bench::Json report(const Options& o, int size, double line,
                              const std::vector<Row>& rows) {
  netsparse::bench::Json doc;
  doc["np"] = size;
  doc["n_per_rank"] = o.n_per_rank;
  doc["unique"] = o.unique;
  doc["batch"] = o.batch;
  doc["reps"] = o.reps;
  doc["line_rate_bytes_per_s"] = line;
  netsparse::bench::Json& out = doc["rows"] = netsparse::bench::Json::array();
  for (const Row& r : rows) {
    out.push_back({{"K", r.K},
                   {"mode", r.mode},
                   {"progress", r.progress},
                   {"requests", r.requests},
                   {"seconds", r.seconds},
                   {"rows_per_s_per_rank", r.rows_per_s},
                   {"goodput", r.goodput},
                   {"line_util", r.line_util},
                   {"moved_util", r.moved_util},
                   {"prs_per_packet", r.prs_per_packet},
                   {"fc_rate", r.fc_rate},
                   {"errors", r.errors}});
  }
  return doc;
}

int run_benchmark(Options& o, const netsparse::bench::World& world) {
  const int rank = world.rank, size = world.size;
  std::vector<int> progress = o.progress;
  if (world.provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0)
      std::printf("note: MPI lacks MPI_THREAD_MULTIPLE; only inline progress is measured\n");
    progress = {NS_PROGRESS_INLINE};
  }
  // The library's one line-rate definition (netsparse_bench's too): every rank streaming to
  // rank r + P/2 at once.
  double line = netsparse::measure_line_rate(MPI_COMM_WORLD);
  if (rank == 0) print_header(o, size);
  // A dead peer must not keep the survivors waiting forever in MPI (stall_guard.hpp): exit 3
  // after 120 s without progress, saying which measurement was running.
  netsparse::bench::StallGuard stall("bench_index_gather", rank, std::chrono::seconds(120));
  std::vector<Row> rows;
  for (int K : o.K) {
    const std::vector<Row> k_rows = run_width(K, o, progress, line, stall, rank, size);
    rows.insert(rows.end(), k_rows.begin(), k_rows.end());
  }
  if (rank == 0 && !o.json.empty()) {
    const std::string problem = netsparse::bench::write_json(o.json, report(o, size, line, rows));
    if (!problem.empty()) std::fprintf(stderr, "bench_index_gather: %s\n", problem.c_str());
  }
  std::uint64_t wrong = 0;
  for (const Row& r : rows) wrong += r.errors;
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return netsparse::bench::run_job(argc, argv, parse, run_benchmark);
}
