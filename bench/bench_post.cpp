// bench_post: the host's cost of ns_post_send + ns_poll_cq for many small work requests, on the
// checked default and on NS_CTX_UNCHECKED (no handle registry, no work-request validation),
// side by side in one process. One in-process node: every idx is local, so the engine's share
// is a row copy and what differs is the API's own work.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"
#include "netsparse/netsparse.h"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

constexpr const char* kHelp =
    R"(bench_post: ns_post_send / ns_poll_cq per small work request, checked vs NS_CTX_UNCHECKED

usage: bench_post [--wrs N] [--count C] [--chain L] [--rounds R] [--progress inline|thread]

  --wrs N        work requests per variant and round (default 200000)
  --count C      idxs per work request (default 1), POSITIONAL, rows of 8 bytes
  --chain L      work requests per ns_post_send call (default 1)
  --rounds R     rounds; each runs both variants, alternating which goes first (default 3)
  --progress P   inline (default: ns_post_send and ns_poll_cq step the engine) or thread

output: one line per round and variant (ns per work request), then the medians and
checked / unchecked (> 1: the unchecked path is faster).
exit: 0, 1 when a gathered row is wrong, 2 on a bad option.
)";

struct Options {
  long long wrs = 200000;
  long long count = 1;
  long long chain = 1;
  long long rounds = 3;
  std::string progress = "inline";
};

constexpr std::uint32_t kP = 8;        // bytes per row
constexpr std::uint64_t kRows = 4096;  // rows of the one node's region

// Runs opts.wrs work requests on a fresh context; returns ns per work request, or -1 when a
// call failed or a row came back wrong.
double run_variant(const Options& opts, std::uint32_t flags) {
  ns_fabric* fabric = nullptr;
  if (ns_fabric_create(1, &fabric) != NS_OK) return -1;
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_FLAGS;
  attr.progress_mode = opts.progress == "thread" ? NS_PROGRESS_THREAD : NS_PROGRESS_INLINE;
  attr.flags = flags;
  ns_context* ctx = nullptr;
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  std::vector<std::uint64_t> table(kRows);
  for (std::uint64_t r = 0; r < kRows; ++r) table[r] = r * 0x9E3779B97F4A7C15ull;
  const std::uint64_t offsets[2] = {0, kRows};
  constexpr int kDepth = 256;
  if (ns_open_inproc(fabric, 0, &attr, &ctx) != NS_OK ||
      ns_reg_props(ctx, table.data(), kRows, kP, offsets, &mr) != NS_OK ||
      ns_create_cq(ctx, 4 * kDepth, &cq) != NS_OK || ns_create_qp(ctx, cq, kDepth, &qp) != NS_OK) {
    std::fprintf(stderr, "bench_post: setup: %s\n", ns_last_error());
    return -1;
  }
  const auto count = static_cast<std::uint64_t>(opts.count);
  const auto chain = static_cast<std::size_t>(opts.chain);
  std::vector<std::uint64_t> idx(kDepth * count);
  for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = (k * 2654435761u) % kRows;
  std::vector<std::uint64_t> out(kDepth * count);
  std::vector<ns_send_wr> wrs(kDepth);
  for (std::size_t s = 0; s < wrs.size(); ++s) {
    ns_send_wr& w = wrs[s];
    w = ns_send_wr{};
    w.wr_id = s;
    w.opcode = NS_WR_RIG;
    w.send_flags = NS_SEND_SIGNALED;
    w.wr.rig.mr = mr;
    w.wr.rig.idx = idx.data() + s * count;
    w.wr.rig.count = count;
    w.wr.rig.out = out.data() + s * count;
    w.wr.rig.out_bytes = count * kP;
    w.wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
  }
  // Slots free for a new post (a completion frees its slot); posted in chains of `chain`.
  std::vector<std::uint32_t> free_slots;
  std::vector<bool> used(kDepth, false);
  for (std::uint32_t s = 0; s < kDepth; ++s) free_slots.push_back(s);
  const auto total = static_cast<std::uint64_t>(opts.wrs);
  std::uint64_t posted = 0, done = 0;
  bool ok = true;
  ns_wc wc[64];
  const auto t0 = std::chrono::steady_clock::now();
  while (done < total && ok) {
    while (posted < total && free_slots.size() >= chain) {
      const std::size_t n = std::min<std::uint64_t>(chain, total - posted);
      ns_send_wr* head = nullptr;
      for (std::size_t k = 0; k < n; ++k) {
        ns_send_wr& w = wrs[free_slots.back()];
        used[free_slots.back()] = true;
        free_slots.pop_back();
        w.next = head;
        head = &w;
      }
      ns_send_wr* bad = nullptr;
      if (ns_post_send(qp, head, &bad) != NS_OK) {
        std::fprintf(stderr, "bench_post: ns_post_send: %s\n", ns_last_error());
        ok = false;
        break;
      }
      posted += n;
    }
    const int got = ns_poll_cq(cq, 64, wc);
    if (got < 0) {
      std::fprintf(stderr, "bench_post: ns_poll_cq: %s\n", ns_last_error());
      ok = false;
    }
    for (int k = 0; k < got; ++k) {
      if (wc[k].status != NS_WC_SUCCESS) ok = false;
      free_slots.push_back(static_cast<std::uint32_t>(wc[k].wr_id));
    }
    done += static_cast<std::uint64_t>(got > 0 ? got : 0);
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  for (std::size_t k = 0; ok && k < idx.size(); ++k) {
    ok = !used[k / count] || out[k] == table[idx[k]];
  }
  ns_destroy_qp(qp);
  ns_destroy_cq(cq);
  ns_close(ctx);
  ns_fabric_destroy(fabric);
  if (!ok) {
    std::fprintf(stderr, "bench_post: a work request failed or gathered a wrong row\n");
    return -1;
  }
  return ns / static_cast<double>(total);
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  cli::App app("bench_post");
  app.set_help_flag("-h,--help");
  app.add_option("--wrs", opts.wrs)->check(cli::Range(1LL, 1LL << 40));
  app.add_option("--count", opts.count)->check(cli::Range(1LL, 1LL << 20));
  app.add_option("--chain", opts.chain)->check(cli::Range(1LL, 256LL));
  app.add_option("--rounds", opts.rounds)->check(cli::Range(1LL, 1000LL));
  app.add_option("--progress", opts.progress)->check(cli::IsMember({"inline", "thread"}));
  const int rc = netsparse::bench::finish_command_line(
      netsparse::bench::parse_command_line(app, argc, argv), "bench_post", kHelp, true);
  if (rc >= 0) return rc;

  std::printf("# bench_post: %lld WRs of %lld idx(s), chains of %lld, progress %s, %lld rounds\n",
              opts.wrs, opts.count, opts.chain, opts.progress.c_str(), opts.rounds);
  std::printf("%-6s %-10s %12s\n", "round", "variant", "ns/WR");
  std::vector<double> checked, unchecked;
  for (long long r = 0; r < opts.rounds; ++r) {
    for (int v = 0; v < 2; ++v) {
      const bool is_unchecked = (v == 1) != (r % 2 == 1);  // alternate which runs first
      const double ns = run_variant(opts, is_unchecked ? NS_CTX_UNCHECKED : 0);
      if (ns < 0) return 1;
      (is_unchecked ? unchecked : checked).push_back(ns);
      std::printf("%-6lld %-10s %12.1f\n", r, is_unchecked ? "unchecked" : "checked", ns);
    }
  }
  const double mc = netsparse::bench::median(checked);
  const double mu = netsparse::bench::median(unchecked);
  std::printf("median checked %.1f ns/WR, unchecked %.1f ns/WR, checked/unchecked %.3f\n", mc, mu,
              mc / mu);
  return 0;
}
