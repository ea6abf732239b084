// Soak: every rank keeps gathering random rows of a distributed table through NS_WR_RIG (the
// public C API, positional layout, K floats per row, `inflight` work requests of `batch` idxs in
// flight) for --seconds, and reports per interval of --interval seconds:
//   throughput   idxs gathered per second (every rank, and their sum)
//   memory       resident set size per rank (/proc/self/statm)
//   queues       the engine's gauges at the end of the interval (NS_STAT_COMMANDS_ACTIVE,
//                FILTER_COMMANDS, WC_BACKLOG, PRS_IN_FLIGHT, PRS_BUFFERED, FRAMES_QUEUED) and
//                the interval's stalls and send retries (NS_STAT_STALLS, "frames.retries")
// Every completed work request's output is checked against the table formula. A soak holds
// when the last interval's throughput stays near the first's and memory and queues stay flat;
// the summary prints last / first for throughput and RSS. Run with mpirun; --help lists the
// options.
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cli.hpp"
#include "engine_stats.hpp"
#include "netsparse/netsparse_mpi.h"
#include "report.hpp"
#include "stall_guard.hpp"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

struct Options {
  double seconds = 60;
  double interval = 10;
  int K = 16;
  std::uint64_t n_per_rank = 1u << 18;
  std::uint64_t requests = 1u << 20;  // distinct idx lists cycled through
  std::uint64_t batch = 8192;
  int inflight = 8;
  int progress = NS_PROGRESS_AUTO;
  std::uint64_t seed = 12345;
  std::string json;
  int cqe = 0;                   // 0: 2 x inflight (room for every completion)
  bool check = false;            // --check: assert the bounds and the counters' identities (ctest)
  bool post_until_full = false;  // --posting queue: post while the queue pair takes them
};

const char* const kHelp =
    R"help(bench_soak: RIG gathers of random rows through the public C API for --seconds; per
interval: throughput, CPU share, RSS and the engine's queue gauges.

usage: mpirun -np N bench_soak [options]
  --seconds S       how long every rank gathers (default 60)
  --interval S      report every S seconds (default 10)
  --K N             floats per row (default 16)
  --n-per-rank N    table rows per rank (default 262144)
  --requests N      random idxs per rank, gathered over and over (default 1048576)
  --batch N         idxs per work request (default 8192)
  --inflight N      work requests in flight (default 8)
  --progress MODE   auto | thread | inline (default auto: the library chooses)
  --seed N          idx seed (default 12345)
  --json FILE       also write every interval of every rank as JSON
  --cqe N           completion queue entries (default 2 x inflight; smaller makes the
                    engine hold completions back: NS_STAT_WC_BACKLOG)
  --posting MODE    app: a work request per free output buffer, rows checked (default);
                    queue: post whenever the queue pair (depth = inflight) takes one,
                    as a verbs program does; outputs overlap, rows are not checked
  --check           fail (exit 1) unless every gauge stayed within what the work in
                    flight allows, every queue is empty after ns_quiesce and the
                    counters add up (no speed is judged)
  --help

Exit codes: 0 every checked row was right (and --check passed), 1 a wrong row or a failed
--check, 2 a bad option or an unwritable --json file.
)help";

// Every rank parses the same argv; rank 0 prints. -1: go on, else the exit code.
int parse(int argc, char** argv, int rank, Options& o) {
  namespace nb = netsparse::bench;
  cli::App app{"bench_soak"};
  const double forever = 1e12;
  app.add_option("--seconds", o.seconds)->check(cli::Range(0.001, forever));
  app.add_option("--interval", o.interval)->check(cli::Range(0.001, forever));
  app.add_option("--K", o.K)->check(cli::Range(1, 16384));
  app.add_option("--n-per-rank", o.n_per_rank)
      ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000'000}));
  app.add_option("--requests", o.requests)
      ->check(cli::Range(std::uint64_t{1}, std::uint64_t{10'000'000'000}));
  app.add_option("--batch", o.batch)
      ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  app.add_option("--inflight", o.inflight)->check(cli::Range(1, 1024));
  std::string progress = "auto", posting = "app";
  app.add_option("--progress", progress)->check(cli::IsMember({"auto", "thread", "inline"}));
  app.add_option("--seed", o.seed);
  app.add_option("--json", o.json);
  app.add_option("--cqe", o.cqe)->check(cli::Range(1, 1 << 24));
  app.add_option("--posting", posting)->check(cli::IsMember({"app", "queue"}));
  app.add_flag("--check", o.check);
  const int code = nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_soak",
                                           kHelp, rank == 0);
  o.progress = progress == "thread"   ? NS_PROGRESS_THREAD
               : progress == "inline" ? NS_PROGRESS_INLINE
                                      : NS_PROGRESS_AUTO;
  o.post_until_full = posting == "queue";
  o.batch = std::min(o.batch, o.requests);
  return code;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const char* what, int status) {
  std::fprintf(stderr, "bench_soak: %s: %s (%s)\n", what, ns_status_str(status), ns_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

std::uint64_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// CPU seconds this process used (every thread: the application's and the progress thread's).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

inline float table_value(std::uint64_t row, int k) {
  return static_cast<float>((row * 31 + static_cast<std::uint64_t>(k)) % 16777213u);
}

// What one rank saw in one interval. Plain integers and doubles, gathered to rank 0 as bytes.
struct Interval {
  double seconds = 0;            // length of the interval
  double idxs_per_s = 0;         // idxs of completed work requests
  double cpu_share = 0;          // CPU seconds of this process / seconds (1 = one core all along)
  double load = 0;               // 1-minute load average at the end
  std::uint64_t rss = 0;         // bytes at the end
  std::uint64_t gauges[6] = {};  // NS_STAT_COMMANDS_ACTIVE .. NS_STAT_FRAMES_QUEUED at the end
  std::uint64_t stalls = 0;      // NS_STAT_STALLS during the interval
  std::uint64_t retries = 0;     // frames.retries during the interval
  std::uint64_t errors = 0;      // wrong rows in checked outputs
};
constexpr int kGauges[6] = {NS_STAT_COMMANDS_ACTIVE, NS_STAT_FILTER_COMMANDS,
                            NS_STAT_WC_BACKLOG,      NS_STAT_PRS_IN_FLIGHT,
                            NS_STAT_PRS_BUFFERED,    NS_STAT_FRAMES_QUEUED};

// "frames.retries" of ns_stats_json (sends the transport refused for lack of room): no NS_STAT
// of its own.
std::uint64_t frame_retries(const ns_context* ctx) {
  const netsparse::bench::Json stats = netsparse::bench::engine_stats_json(ctx);
  return stats.is_null() ? 0 : stats["frames"]["retries"].get<std::uint64_t>();
}

// --check: what a soak must keep, whatever its speed. Collective (sums over ranks); returns
// this rank's first violation, empty if none.
std::string check_soak(ns_context* ctx, const Options& o, const std::vector<Interval>& mine,
                       std::uint64_t done) {
  const std::uint64_t inflight = static_cast<std::uint64_t>(o.inflight);
  // Bounds of the gauges during the run: each is made of the work requests in flight (this
  // rank's, and for what it holds for its peers, theirs), never of the run's length.
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::uint64_t all_prs = static_cast<std::uint64_t>(size) * inflight * o.batch;
  const std::uint64_t bound[6] = {inflight,           inflight, inflight,
                                  inflight * o.batch, all_prs,  all_prs};
  std::string bad;
  for (std::size_t k = 0; k < mine.size() && bad.empty(); ++k) {
    for (int g = 0; g < 6; ++g) {
      if (mine[k].gauges[g] > bound[g]) {
        bad = std::string(ns_stat_name(kGauges[g])) + " was " + std::to_string(mine[k].gauges[g]) +
              " at interval " + std::to_string(k + 1) + ", above its bound " +
              std::to_string(bound[g]);
        break;
      }
    }
    if (bad.empty() && mine[k].errors != 0) {
      bad = "wrong rows in interval " + std::to_string(k + 1);
    }
  }
  // After ns_quiesce on every rank: nothing left in any queue.
  for (int g = 0; g < 6 && bad.empty(); ++g) {
    const std::uint64_t v = ns_stat_get(ctx, kGauges[g]);
    if (v != 0) {
      bad = std::string(ns_stat_name(kGauges[g])) + " is " + std::to_string(v) +
            " after ns_quiesce, not 0";
    }
  }
  // The counters add up: every idx of every completed work request was classified once.
  const std::uint64_t requested = ns_stat_get(ctx, NS_STAT_PRS_REQUESTED);
  const std::uint64_t parts =
      ns_stat_get(ctx, NS_STAT_PRS_FILTERED) + ns_stat_get(ctx, NS_STAT_PRS_COALESCED) +
      ns_stat_get(ctx, NS_STAT_PRS_LOCAL) + ns_stat_get(ctx, NS_STAT_PRS_SENT);
  if (bad.empty() && requested != done * o.batch) {
    bad = "prs_requested " + std::to_string(requested) + " != idxs of completed work requests " +
          std::to_string(done * o.batch);
  }
  if (bad.empty() && requested != parts) {
    bad = "prs_requested " + std::to_string(requested) +
          " != filtered + coalesced + local + sent = " + std::to_string(parts);
  }
  for (int st : {NS_STAT_TIMEOUTS, NS_STAT_MALFORMED, NS_STAT_STALE_RESPONSES}) {
    if (bad.empty() && ns_stat_get(ctx, st) != 0) {
      bad = std::string(ns_stat_name(st)) + " is " + std::to_string(ns_stat_get(ctx, st));
    }
  }
  // Every read PR sent was answered by a peer's server units.
  std::uint64_t mine_sums[2] = {ns_stat_get(ctx, NS_STAT_PRS_SENT),
                                ns_stat_get(ctx, NS_STAT_SERVER_PRS)};
  std::uint64_t sums[2] = {0, 0};
  MPI_Allreduce(mine_sums, sums, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (bad.empty() && sums[0] != sums[1]) {
    bad = "sum of prs_sent " + std::to_string(sums[0]) + " != sum of server_prs " +
          std::to_string(sums[1]);
  }
  return bad;
}

// The results would be lost at the end of the run: an unwritable --json fails before it (rank 0
// checks and says why; every rank gets the verdict). Collective.
bool json_path_ok(const std::string& path, int rank) {
  int ok = 1;
  if (rank == 0 && !path.empty()) {
    if (const std::string p = netsparse::bench::json_path_problem(path); !p.empty()) {
      std::fprintf(stderr, "bench_soak: %s\n", p.c_str());
      ok = 0;
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok != 0;
}

// Every rank's intervals on rank 0 (the counts may differ by one: clocks of their own).
struct Gathered {
  std::vector<Interval> all;  // rank 0: rank p's intervals from all[first[p]], counts[p] of them
  std::vector<int> counts, first;
  const Interval& at(int p, std::size_t k) const {
    return all[static_cast<std::size_t>(first[static_cast<std::size_t>(p)]) + k];
  }
};

Gathered gather_intervals(const std::vector<Interval>& mine, int rank, int size) {
  Gathered g;
  int count = static_cast<int>(mine.size());
  g.counts.resize(static_cast<std::size_t>(size));
  MPI_Gather(&count, 1, MPI_INT, g.counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> bytes(static_cast<std::size_t>(size)), displ(static_cast<std::size_t>(size));
  g.first.resize(static_cast<std::size_t>(size));
  int total = 0;
  for (std::size_t p = 0; p < static_cast<std::size_t>(size); ++p) {
    bytes[p] = g.counts[p] * static_cast<int>(sizeof(Interval));
    displ[p] = total;
    g.first[p] = total / static_cast<int>(sizeof(Interval));
    total += bytes[p];
  }
  g.all.resize(rank == 0 ? static_cast<std::size_t>(total) / sizeof(Interval) : 0);
  MPI_Gatherv(mine.data(), count * static_cast<int>(sizeof(Interval)), MPI_BYTE, g.all.data(),
              bytes.data(), displ.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
  return g;
}

// Rank 0: the table of every interval of every rank, the sums per interval and the first / last
// comparison. Returns the number of wrong rows seen.
std::uint64_t print_summary(const Gathered& g, const Options& o, int size) {
  const std::size_t n =
      static_cast<std::size_t>(*std::min_element(g.counts.begin(), g.counts.end()));
  std::printf("\n%-4s %-5s %7s %12s %6s %5s %7s %6s %6s %7s %9s %8s %5s %7s %7s %5s\n", "int",
              "rank", "t_end_s", "M_idxs_per_s", "cpu", "load", "RSS_MB", "active", "filter",
              "wc_blog", "in_flight", "buffered", "fr_q", "stalls", "retries", "check");
  std::uint64_t wrong = 0;
  // Per interval: the ranks' sum, and per CPU-second (a rank that got less of a core on a
  // shared machine gathers less; per CPU-second it does not, unless the engine itself slowed).
  std::vector<double> sum(n, 0), cpu(n, 0), t_end(static_cast<std::size_t>(size), 0);
  for (std::size_t k = 0; k < n; ++k) {
    for (int p = 0; p < size; ++p) {
      const Interval& iv = g.at(p, k);
      sum[k] += iv.idxs_per_s;
      cpu[k] += iv.cpu_share;
      wrong += iv.errors;
      std::printf("%-4zu %-5d %7.1f %12.3f %6.2f %5.2f %7.1f %6" PRIu64 " %6" PRIu64 " %7" PRIu64
                  " %9" PRIu64 " %8" PRIu64 " %5" PRIu64 " %7" PRIu64 " %7" PRIu64 " %5s\n",
                  k + 1, p, t_end[static_cast<std::size_t>(p)] += iv.seconds, iv.idxs_per_s / 1e6,
                  iv.cpu_share, iv.load, static_cast<double>(iv.rss) / 1e6, iv.gauges[0],
                  iv.gauges[1], iv.gauges[2], iv.gauges[3], iv.gauges[4], iv.gauges[5], iv.stalls,
                  iv.retries, iv.errors == 0 ? "ok" : "WRONG");
    }
    std::printf("%-4zu %-5s %7s %12.3f %6.2f  (%.3f M idxs per CPU-second)\n", k + 1, "sum", "",
                sum[k] / 1e6, cpu[k], cpu[k] > 0 ? sum[k] / cpu[k] / 1e6 : 0.0);
  }
  if (n > 0) {
    // The last interval may be a short remainder: the last full one is compared.
    std::size_t last = n - 1;
    if (last > 0 && g.at(0, last).seconds < 0.5 * o.interval) --last;
    auto per_cpu = [&](std::size_t k) { return cpu[k] > 0 ? sum[k] / cpu[k] : 0.0; };
    std::printf(
        "\nthroughput: first interval %.3f M idxs/s, last full interval %.3f M idxs/s, "
        "last / first = %.3f\n",
        sum[0] / 1e6, sum[last] / 1e6, sum[0] > 0 ? sum[last] / sum[0] : 0.0);
    std::printf("per CPU-second: first %.3f M, last full %.3f M, last / first = %.3f\n",
                per_cpu(0) / 1e6, per_cpu(last) / 1e6,
                per_cpu(0) > 0 ? per_cpu(last) / per_cpu(0) : 0.0);
    for (int p = 0; p < size; ++p) {
      std::printf("RSS rank %d: first %.1f MB, last %.1f MB\n", p,
                  static_cast<double>(g.at(p, 0).rss) / 1e6,
                  static_cast<double>(g.at(p, n - 1).rss) / 1e6);
    }
  }
  std::printf("check: %s\n", wrong == 0 ? "ok" : "WRONG rows");
  return wrong;
}

// Rank 0: the --json document, every interval of every rank (gauges under their ns_stat_name).
netsparse::bench::Json soak_json(const Gathered& g, const Options& o, int size) {
  netsparse::bench::Json doc = {{"np", size},
                                {"K", o.K},
                                {"seconds", o.seconds},
                                {"interval", o.interval},
                                {"batch", o.batch},
                                {"inflight", o.inflight},
                                {"intervals", netsparse::bench::Json::array()}};
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < g.counts[static_cast<std::size_t>(p)]; ++k) {
      const Interval& iv = g.at(p, static_cast<std::size_t>(k));
      netsparse::bench::Json j = {{"rank", p},
                                  {"interval", k + 1},
                                  {"seconds", iv.seconds},
                                  {"idxs_per_s", iv.idxs_per_s},
                                  {"cpu_share", iv.cpu_share},
                                  {"load", iv.load},
                                  {"rss_bytes", iv.rss}};
      for (int s = 0; s < 6; ++s) j[ns_stat_name(kGauges[s])] = iv.gauges[s];
      j["stalls"] = iv.stalls;
      j["retries"] = iv.retries;
      j["errors"] = iv.errors;
      doc["intervals"].push_back(std::move(j));
    }
  }
  return doc;
}

int run_benchmark(Options& o, const netsparse::bench::World& world) {
  const int rank = world.rank, size = world.size;
  if (!json_path_ok(o.json, rank)) return 2;
  const std::uint64_t K = static_cast<std::uint64_t>(o.K);
  const std::uint32_t P = static_cast<std::uint32_t>(K * sizeof(float));

  // The table: n_per_rank rows per rank, row r holds table_value(r, k).
  const std::uint64_t n_total = o.n_per_rank * static_cast<std::uint64_t>(size);
  const std::uint64_t row_begin = o.n_per_rank * static_cast<std::uint64_t>(rank);
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(size) + 1);
  for (int p = 0; p <= size; ++p) offsets[static_cast<std::size_t>(p)] = o.n_per_rank * p;
  std::vector<float> table(o.n_per_rank * K);
  for (std::uint64_t r = 0; r < o.n_per_rank; ++r) {
    for (std::uint64_t k = 0; k < K; ++k) table[r * K + k] = table_value(row_begin + r, int(k));
  }
  std::mt19937_64 rng(o.seed * 7919 + static_cast<std::uint64_t>(rank));
  std::vector<std::uint64_t> idx(o.requests);
  for (auto& i : idx) i = rng() % n_total;
  const std::uint64_t lists = o.requests / o.batch;  // whole batches only

  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_WATCHDOG;
  attr.progress_mode = o.progress;
  attr.watchdog_ms = 60000;
  ns_context* ctx = nullptr;
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ns_status_t s = ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx);
  if (s != NS_OK) die("ns_open_mpi", s);
  if ((s = ns_reg_props(ctx, table.data(), o.n_per_rank, P, offsets.data(), &mr)) != NS_OK)
    die("ns_reg_props", s);
  if ((s = ns_create_cq(ctx, o.cqe > 0 ? o.cqe : 2 * o.inflight, &cq)) != NS_OK)
    die("ns_create_cq", s);
  const int depth = o.post_until_full ? o.inflight : 2 * o.inflight;
  if ((s = ns_create_qp(ctx, cq, depth, &qp)) != NS_OK) die("ns_create_qp", s);
  if (rank == 0) {
    std::printf("soak: np=%d, K=%d, %" PRIu64 " rows per rank, %" PRIu64
                " idxs per work request, %d in flight, %s transport, %.0f s in %.0f s intervals\n",
                size, o.K, o.n_per_rank, o.batch, o.inflight, ns_transport_name(ctx), o.seconds,
                o.interval);
    std::fflush(stdout);
  }

  // One output buffer per in-flight work request (its wr_id is the slot); completions may come
  // out of post order, so a slot is free again only once its own completion is seen.
  const std::uint64_t slots = static_cast<std::uint64_t>(o.inflight);
  std::vector<float> out(slots * o.batch * K);
  std::vector<std::uint64_t> slot_list(slots);  // which idx list each slot gathers
  std::vector<std::uint64_t> free_slots;
  for (std::uint64_t k = slots; k-- > 0;) free_slots.push_back(k);
  std::vector<Interval> mine;
  netsparse::bench::StallGuard stall("bench_soak", rank, std::chrono::seconds(120));
  MPI_Barrier(MPI_COMM_WORLD);

  const double t0 = now_s();
  const double end = t0 + o.seconds;
  double mark = t0;
  std::uint64_t posted = 0, done = 0, done_at_mark = 0, errors = 0;
  std::uint64_t stalls_at_mark = ns_stat_get(ctx, NS_STAT_STALLS);
  std::uint64_t retries_at_mark = frame_retries(ctx);
  std::uint64_t next_list = 0;
  double cpu_at_mark = cpu_seconds();
  ns_wc wc[16];
  for (;;) {
    const double now = now_s();
    const bool stop = now >= end;
    if (now >= mark + o.interval || (stop && now > mark && posted == done)) {
      Interval iv;
      iv.seconds = now - mark;
      iv.idxs_per_s = static_cast<double>((done - done_at_mark) * o.batch) / iv.seconds;
      iv.rss = rss_bytes();
      const double cpu = cpu_seconds();
      iv.cpu_share = (cpu - cpu_at_mark) / iv.seconds;
      cpu_at_mark = cpu;
      iv.load = netsparse::bench::load_average_1min();
      for (int g = 0; g < 6; ++g) iv.gauges[g] = ns_stat_get(ctx, kGauges[g]);
      const std::uint64_t st = ns_stat_get(ctx, NS_STAT_STALLS), rt = frame_retries(ctx);
      iv.stalls = st - stalls_at_mark;
      iv.retries = rt - retries_at_mark;
      iv.errors = errors;
      stalls_at_mark = st;
      retries_at_mark = rt;
      errors = 0;
      mine.push_back(iv);
      if (rank == 0) {
        std::printf(
            "rank 0 t=%6.1f s: %8.3f M idxs/s, cpu %.2f, load %.2f, RSS %6.1f MB, active %" PRIu64
            " filter %" PRIu64 " wc_backlog %" PRIu64 " in_flight %" PRIu64 " buffered %" PRIu64
            " frames_queued %" PRIu64 "\n",
            now - t0, iv.idxs_per_s / 1e6, iv.cpu_share, iv.load, static_cast<double>(iv.rss) / 1e6,
            iv.gauges[0], iv.gauges[1], iv.gauges[2], iv.gauges[3], iv.gauges[4], iv.gauges[5]);
        std::fflush(stdout);
      }
      mark = now;
      done_at_mark = done;
      stall.beat("interval " + std::to_string(mine.size()));
    }
    if (stop && posted == done) break;
    while (!stop && (o.post_until_full || !free_slots.empty())) {
      const std::uint64_t slot = o.post_until_full ? posted % slots : free_slots.back();
      const std::uint64_t list = next_list;
      ns_send_wr w{};
      w.wr_id = slot;
      w.opcode = NS_WR_RIG;
      w.send_flags = NS_SEND_SIGNALED;
      w.wr.rig.mr = mr;
      w.wr.rig.idx = idx.data() + list * o.batch;
      w.wr.rig.count = o.batch;
      w.wr.rig.out = out.data() + slot * o.batch * K;
      w.wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
      w.wr.rig.out_bytes = o.batch * P;
      ns_send_wr* bad = nullptr;
      s = ns_post_send(qp, &w, &bad);
      if (s == NS_ERR_NO_RESOURCE) break;
      if (s != NS_OK) die("ns_post_send", s);
      if (!o.post_until_full) free_slots.pop_back();
      slot_list[slot] = list;
      next_list = (next_list + 1) % lists;
      ++posted;
    }
    const int got = ns_cq_wait(cq, 16, wc, 60000);
    if (got < 0) die("ns_cq_wait", got);
    if (got == 0) die("ns_cq_wait (no completion in 60 s)", NS_ERR_TIMEOUT);
    for (int k = 0; k < got; ++k) {
      if (wc[k].status != NS_WC_SUCCESS) {
        std::fprintf(stderr, "bench_soak: rank %d: completion %s (%s)\n", rank,
                     ns_wc_status_str(wc[k].status), ns_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      // Check the rows of every 16th completion (the check would otherwise cost as much as the
      // gather); the slot is not reposted before this, so its rows are stable.
      const std::uint64_t slot = wc[k].wr_id;
      if (o.post_until_full) continue;  // no buffer of its own: nothing to check
      if ((done + static_cast<std::uint64_t>(k)) % 16 == 0) {
        const float* o_rows = out.data() + slot * o.batch * K;
        const std::uint64_t* list = idx.data() + slot_list[slot] * o.batch;
        for (std::uint64_t j = 0; j < o.batch; ++j) {
          for (std::uint64_t c = 0; c < K; ++c) {
            const float want = table_value(list[j], int(c));
            if (std::memcmp(&o_rows[j * K + c], &want, sizeof want) != 0) {
              ++errors;
              break;
            }
          }
        }
      }
      free_slots.push_back(slot);
    }
    done += static_cast<std::uint64_t>(got);
  }
  // Serve the peers until they are done too, and only then block in MPI collectives.
  if ((s = ns_quiesce(ctx, 120000)) != NS_OK) die("ns_quiesce", s);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string bad = o.check ? check_soak(ctx, o, mine, done) : std::string();

  const Gathered all = gather_intervals(mine, rank, size);
  int code = 0;
  if (rank == 0) {
    code = print_summary(all, o, size) == 0 ? 0 : 1;
    if (!o.json.empty()) {
      const std::string problem = netsparse::bench::write_json(o.json, soak_json(all, o, size), -1);
      if (!problem.empty()) std::fprintf(stderr, "bench_soak: %s\n", problem.c_str());
    }
  }
  if (o.check) {
    // Every rank's verdict, printed by rank 0 (one line per failing rank).
    int ok = bad.empty() ? 1 : 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!bad.empty()) std::fprintf(stderr, "bench_soak: rank %d: %s\n", rank, bad.c_str());
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::printf("soak check: %s\n", all_ok ? "PASS" : "FAIL");
    if (!all_ok) code = 1;
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  ns_destroy_qp(qp);
  ns_destroy_cq(cq);
  if ((s = ns_dereg_props(mr)) != NS_OK) die("ns_dereg_props", s);
  if ((s = ns_close(ctx)) != NS_OK) die("ns_close", s);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  return netsparse::bench::run_job(argc, argv, parse, run_benchmark);
}
