// Scatter-reduce benchmark: NS_WR_RIS (Remote Indexed Scatter-Reduce) against a Conveyors-style
// aggregated push of (idx, value) pairs, side by side in one run, medians over --rounds.
//
//   mpirun -np P bench_scatter_reduce [--K 1,16] [--rows N] [--updates N] [--hot N]
//                                     [--hot-fraction F] [--chunk N] [--rounds 3] [--json PATH]
//
// Every rank owns --rows rows of K fp32 and adds --updates (row, value) pairs into the whole
// array: --hot-fraction of them into --hot rows spread over every rank (heavy duplication, as
// the gradients of a skewed embedding table), the rest uniform. Variants:
//   ris                 NS_WR_RIS work requests of --chunk updates (0: one WR), then ns_quiesce
//                       (the engine combines repeats locally and concatenates per owner)
//   conveyors           the library's Conveyors baseline (lib/distributed Conveyor over MPI):
//                       every pair (local row u32 + K floats) pushed to its owner, which adds it
//   conveyors-combined  the same after combining repeated rows locally (what RIS does first):
//                       separates the gain of pre-combining from the engine's
// Values are small integers, so every variant's result must be bit-identical (checked). Time =
// the slowest rank's; bytes = what a rank sent, averaged (RIS: its scatter packets; conveyors:
// buffers). Exit 0 when every variant agreed, 1 otherwise, 2 on a bad option.
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "conveyor/conveyor.hpp"
#include "netsparse/netsparse_mpi.h"
#include "report.hpp"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using netsparse::bench::median;

struct Args {
  std::vector<std::uint32_t> K = {1, 16};
  std::uint64_t rows = 1u << 16;     // per rank
  std::uint64_t updates = 1u << 19;  // per rank
  std::uint64_t hot = 4096;          // hot rows, global
  double hot_fraction = 0.9;
  std::uint64_t chunk = 0;  // updates per RIS WR; 0 = all in one
  int rounds = 3;
  std::string json;
};

const char* const kHelp =
    R"help(bench_scatter_reduce: NS_WR_RIS (Remote Indexed Scatter-Reduce) against a Conveyors-style
aggregated push of (idx, value) pairs, side by side in one run, medians over --rounds.

usage: mpirun -np P bench_scatter_reduce [options]

  --K LIST             row widths in fp32 values, comma-separated, each in 1..1024 (default 1,16)
  --rows N             rows per rank (default 65536, at most 2^32-1)
  --updates N          (row, value) pairs each rank adds (default 524288)
  --hot N              hot rows, spread over every rank (default 4096)
  --hot-fraction F     fraction of the updates that go to the hot rows, in [0, 1] (default 0.9)
  --chunk N            updates per NS_WR_RIS work request (0: one work request; default 0)
  --rounds N           rounds of every variant; times are medians over them (default 3)
  --json PATH          also write every record as JSON (rank 0)
  --help               this text

Exit codes: 0 every variant agreed, 1 a variant disagreed, 2 a bad option.
)help";

// Every rank parses the same argv; rank 0 prints. -1: go on, else the exit code.
int parse(int argc, char** argv, int rank, Args& a) {
  namespace nb = netsparse::bench;
  cli::App app{"bench_scatter_reduce"};
  app.add_option_function<std::string>("--K", [&](const std::string& v) {
    a.K.clear();
    for (const long long k : nb::int_list("--K", v, 1, 1024)) {
      a.K.push_back(static_cast<std::uint32_t>(k));
    }
  });
  app.add_option("--rows", a.rows)->check(cli::Range(std::uint64_t{1}, std::uint64_t{UINT32_MAX}));
  app.add_option("--updates", a.updates);
  app.add_option("--hot", a.hot)->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("--hot-fraction", a.hot_fraction)->check(cli::Range(0.0, 1.0));
  app.add_option("--chunk", a.chunk);
  app.add_option("--rounds", a.rounds)->check(cli::Range(1, 1000000));
  app.add_option("--json", a.json);
  return nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_scatter_reduce",
                                 kHelp, rank == 0);
}

void check(ns_status_t s, const char* what) {
  if (s != NS_OK) {
    std::fprintf(stderr, "bench_scatter_reduce: %s: %s\n", what, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

struct Workload {
  std::vector<std::uint64_t> idx;
  std::vector<float> values;  // idx.size() x K
};

Workload make_workload(const Args& a, std::uint32_t K, int rank, int P) {
  const std::uint64_t total = a.rows * static_cast<std::uint64_t>(P);
  std::mt19937_64 hot_rng(12345);  // the same hot rows on every rank
  std::vector<std::uint64_t> hot(std::min(a.hot, total));
  for (auto& h : hot) h = hot_rng() % total;
  std::mt19937_64 rng(777 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<double> coin(0, 1);
  Workload w;
  w.idx.resize(a.updates);
  w.values.resize(a.updates * K);
  for (std::uint64_t j = 0; j < a.updates; ++j) {
    w.idx[j] = coin(rng) < a.hot_fraction ? hot[rng() % hot.size()] : rng() % total;
    for (std::uint32_t e = 0; e < K; ++e) {
      w.values[j * K + e] = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    }
  }
  return w;
}

// Repeated rows folded (first-appearance order), for conveyors-combined.
// The table holds at most every row of the array (a bound the caller knows; load <= 1/2).
Workload combine_locally(const Workload& w, std::uint32_t K, std::uint64_t total_rows) {
  const std::size_t cap = std::bit_ceil(
      std::max<std::size_t>(16, 2 * std::min<std::uint64_t>(w.idx.size(), total_rows)));
  std::vector<std::uint64_t> key(cap, UINT64_MAX);
  std::vector<std::uint32_t> at(cap);
  Workload c;
  for (std::size_t j = 0; j < w.idx.size(); ++j) {
    std::size_t h = (w.idx[j] * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(cap));
    while (key[h] != UINT64_MAX && key[h] != w.idx[j]) h = (h + 1) & (cap - 1);
    if (key[h] == UINT64_MAX) {
      key[h] = w.idx[j];
      at[h] = static_cast<std::uint32_t>(c.idx.size());
      c.idx.push_back(w.idx[j]);
      c.values.insert(c.values.end(), w.values.begin() + j * K, w.values.begin() + (j + 1) * K);
    } else {
      float* dst = c.values.data() + std::size_t{at[h]} * K;
      for (std::uint32_t e = 0; e < K; ++e) dst[e] += w.values[j * K + e];
    }
  }
  return c;
}

// Conveyors push: item = local row (u32) + K floats; the owner adds it into its rows.
void push_conveyors(netsparse::dist::Conveyor& conv, const Workload& w, std::uint32_t K,
                    std::uint64_t rows, std::vector<float>& mine) {
  const std::size_t item_bytes = 4 + std::size_t{K} * 4;
  conv.begin(item_bytes);
  std::vector<std::byte> item(item_bytes);
  std::size_t i = 0;
  const std::size_t n = w.idx.size();
  auto drain = [&] {
    int from = 0;
    while (const std::byte* it = conv.pull(&from)) {
      std::uint32_t row = 0;
      std::memcpy(&row, it, 4);
      float v[1024];
      std::memcpy(v, it + 4, std::size_t{K} * 4);
      float* dst = mine.data() + std::size_t{row} * K;
      for (std::uint32_t e = 0; e < K; ++e) dst[e] += v[e];
    }
  };
  while (conv.advance(i == n)) {
    for (; i < n; ++i) {
      const std::uint64_t g = w.idx[i];
      std::byte* slot = conv.reserve(static_cast<int>(g / rows));
      if (slot == nullptr) break;
      const auto row = static_cast<std::uint32_t>(g % rows);
      std::memcpy(slot, &row, 4);
      std::memcpy(slot + 4, w.values.data() + i * K, std::size_t{K} * 4);
    }
    drain();
  }
  drain();
}

struct Result {
  std::uint32_t K = 0;
  std::string variant;
  std::vector<double> times;
  double bytes_per_rank = 0, packets_per_rank = 0;
  std::uint64_t sent_rows = 0;
  bool agrees = true;
};

int run_benchmark(Args& args, const netsparse::bench::World& world) {
  const int rank = world.rank, P = world.size;
  ns_context* ctx = nullptr;
  check(ns_open_mpi(MPI_COMM_WORLD, nullptr, &ctx), "ns_open_mpi");
  std::vector<Result> results;
  bool all_agree = true;
  for (const std::uint32_t K : args.K) {
    const Workload w = make_workload(args, K, rank, P);
    std::vector<float> rows(args.rows * K, 0.0f);
    std::vector<std::uint64_t> offsets(static_cast<std::size_t>(P) + 1);
    for (int p = 0; p <= P; ++p) offsets[static_cast<std::size_t>(p)] = args.rows * p;
    ns_mr* mr = nullptr;
    check(ns_reg_props(ctx, rows.data(), args.rows, K * 4, offsets.data(), &mr), "ns_reg_props");
    const std::uint64_t chunk = args.chunk == 0 ? args.updates : args.chunk;
    const std::uint64_t n_wr = (args.updates + chunk - 1) / chunk;
    ns_cq* cq = nullptr;
    ns_qp* qp = nullptr;
    check(ns_create_cq(ctx, static_cast<int>(n_wr + 1), &cq), "ns_create_cq");
    check(ns_create_qp(ctx, cq, static_cast<int>(n_wr + 1), &qp), "ns_create_qp");
    netsparse::dist::Conveyor conv(MPI_COMM_WORLD);
    std::vector<float> reference;
    for (const char* variant : {"ris", "conveyors", "conveyors-combined"}) {
      Result r;
      r.K = K;
      r.variant = variant;
      const std::string v = variant;
      double bytes = 0, packets = 0;
      for (int round = 0; round < args.rounds; ++round) {
        std::fill(rows.begin(), rows.end(), 0.0f);
        ns_stats_reset(ctx);
        conv.reset_stats();
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (v == "ris") {
          std::vector<ns_send_wr> wrs(n_wr);
          for (std::uint64_t k = 0; k < n_wr; ++k) {
            const std::uint64_t first = k * chunk;
            const std::uint64_t n = std::min(chunk, args.updates - first);
            ns_send_wr& wr = wrs[k];
            wr.wr_id = k;
            wr.opcode = NS_WR_RIS;
            wr.send_flags = NS_SEND_SIGNALED;
            wr.wr.ris.mr = mr;
            wr.wr.ris.idx = w.idx.data() + first;
            wr.wr.ris.count = n;
            wr.wr.ris.values = w.values.data() + first * K;
            wr.wr.ris.values_bytes = n * K * 4;
            wr.wr.ris.op = NS_RIS_SUM;
            wr.wr.ris.datatype = NS_RIS_FLOAT32;
            wr.next = k + 1 < n_wr ? &wrs[k + 1] : nullptr;
          }
          ns_send_wr* bad = nullptr;
          check(ns_post_send(qp, wrs.data(), &bad), "ns_post_send");
          for (std::uint64_t got = 0; got < n_wr;) {
            ns_wc wc[16];
            const int k = ns_cq_wait(cq, 16, wc, 60000);
            if (k <= 0) check(NS_ERR_TIMEOUT, "ns_cq_wait");
            for (int j = 0; j < k; ++j) {
              if (wc[j].status != NS_WC_SUCCESS) {
                std::fprintf(stderr, "bench_scatter_reduce: RIS failed: %s\n",
                             ns_wc_status_str(wc[j].status));
                MPI_Abort(MPI_COMM_WORLD, 1);
              }
            }
            got += static_cast<std::uint64_t>(k);
          }
          check(ns_quiesce(ctx, 60000), "ns_quiesce");  // every peer's updates are in
        } else {
          // conveyors-combined pays for its local combining inside the timed region, as RIS does.
          push_conveyors(conv, v == "conveyors" ? w : combine_locally(w, K, args.rows * P), K,
                         args.rows, rows);
        }
        double t = MPI_Wtime() - t0, worst = 0;
        MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        r.times.push_back(worst);
        if (v == "ris") {
          bytes = static_cast<double>(ns_stat_get(ctx, NS_STAT_SCATTER_BYTES));
          packets = static_cast<double>(ns_stat_get(ctx, NS_STAT_SCATTER_PACKETS));
          r.sent_rows = ns_stat_get(ctx, NS_STAT_SCATTER_SENT);
        } else {
          bytes = static_cast<double>(conv.stats().bytes_sent);
          packets = static_cast<double>(conv.stats().buffers_sent);
        }
        if (reference.empty()) reference = rows;
        int differs = reference != rows ? 1 : 0, any = 0;
        MPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any != 0) r.agrees = false;
      }
      double sums[2] = {bytes, packets}, avg[2] = {0, 0};
      MPI_Allreduce(sums, avg, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      r.bytes_per_rank = avg[0] / P;
      r.packets_per_rank = avg[1] / P;
      all_agree = all_agree && r.agrees;
      results.push_back(r);
    }
    check(ns_destroy_qp(qp), "ns_destroy_qp");
    check(ns_destroy_cq(cq), "ns_destroy_cq");
    check(ns_dereg_props(mr), "ns_dereg_props");
    if (rank == 0) {
      const Result* ris = nullptr;
      for (const Result& r : results) {
        if (r.K == K && r.variant == "ris") ris = &r;
      }
      std::printf("K %u  np %d  updates/rank %llu  rows/rank %llu  hot %llu (%.2f)  chunk %llu\n",
                  K, P, static_cast<unsigned long long>(args.updates),
                  static_cast<unsigned long long>(args.rows),
                  static_cast<unsigned long long>(args.hot), args.hot_fraction,
                  static_cast<unsigned long long>(chunk));
      for (const Result& r : results) {
        if (r.K != K) continue;
        std::printf("    %-19s %9.3f ms  %5.2fx vs ris  %10.0f B/rank  %8.0f msgs/rank  %s\n",
                    r.variant.c_str(), 1e3 * median(r.times), median(r.times) / median(ris->times),
                    r.bytes_per_rank, r.packets_per_rank, r.agrees ? "agrees" : "DIFFERS");
      }
    }
  }
  if (rank == 0 && !args.json.empty()) {
    netsparse::bench::Json doc = {{"bench", "scatter_reduce"},
                                  {"transport", ns_transport_name(ctx)},
                                  {"loadavg_1min", netsparse::bench::load_average_1min()},
                                  {"np", P},
                                  {"updates", args.updates},
                                  {"rows", args.rows},
                                  {"hot", args.hot},
                                  {"hot_fraction", args.hot_fraction},
                                  {"rounds", args.rounds},
                                  {"records", netsparse::bench::Json::array()}};
    for (const Result& r : results) {
      doc["records"].push_back({{"K", r.K},
                                {"variant", r.variant},
                                {"median_s", median(r.times)},
                                {"times_s", r.times},
                                {"bytes_per_rank", r.bytes_per_rank},
                                {"messages_per_rank", r.packets_per_rank},
                                {"agrees", r.agrees}});
    }
    const std::string problem = netsparse::bench::write_json(args.json, doc);
    if (!problem.empty()) std::fprintf(stderr, "bench_scatter_reduce: %s\n", problem.c_str());
  }
  check(ns_close(ctx), "ns_close");
  return all_agree ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return netsparse::bench::run_job(argc, argv, parse, run_benchmark);
}
