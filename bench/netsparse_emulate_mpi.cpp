// netsparse_emulate_mpi: the work netsparse_emulate emulates, run on real ranks over the MPI
// transport, writing the same per-node engine counters (--traffic) so that the emulator can be
// checked against a real run of the engine (docs/emulation.md, "Emulator against MPI").
//
//   mpirun -np 4 netsparse_emulate_mpi --matrix gen:kron:11 --K 16 --mechanisms rig,coalesce
//       --traffic mpi.txt
//   netsparse_emulate --nodes 4 --racks 1 --matrix gen:kron:11 --K 16 --mechanisms rig,coalesce
//       --traffic emulated.txt
//
// Each rank is one node: it builds the same workload (lib/emulate/workload.hpp: equal row
// blocks, the column of every nonzero of its rows), opens an engine with the emulated node's
// attributes (units, packet size, concatenation delay, Pending PR Table, idx chunk, ladder
// flags) but the transport's own progress and watchdog, registers the same properties, posts the
// same work requests with the same depth, checks every gathered property, and rank 0 writes the
// counters. The ToR switch step does not exist here (there is no switch).
//
// Virtual hosts (NETSPARSE_RANKS_PER_HOST=R): R consecutive ranks form one node with one NIC,
// as in netsparse-node. Each rank builds its own list (its equal row block's columns), the
// host's leader gathers them over the host's communicator in rank order, and only the leaders
// open engines, over a communicator of the leaders with the MPI transport's shared-memory rings
// off (leaders are different hosts; the bytes go through MPI). The counters are per host and
// compare with netsparse_emulate --nodes H --ranks-per-node R.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "config/settings.hpp"
#include "emulate/workload.hpp"
#include "netsparse/netsparse_mpi.h"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using namespace netsparse::emulate;

struct Options {
  std::string matrix = "gen:kron:11";
  std::uint64_t seed = 1;
  std::vector<std::uint32_t> Ks = {16};
  std::string mechanisms = "rig,coalesce";
  std::uint32_t batch = 0;  // 0 = auto, as netsparse_emulate
  int units = 32;
  std::string traffic;
};

constexpr const char* kHelp =
    R"(netsparse_emulate_mpi: runs the RIG gather netsparse_emulate emulates on real MPI ranks (one
rank = one node) and writes every node's engine counters in the format of netsparse_emulate
--traffic, to compare the emulator with a real run of the engine.

usage: mpirun -np N netsparse_emulate_mpi [options]
  --matrix SPEC        gen:kron:S (default gen:kron:11), gen:road:W, gen:stencil:N or a Matrix
                       Market file
  --K LIST             dense widths, comma-separated (default 16)
  --mechanisms STEPS   comma-separated steps of the ladder without the switch: rig, filter,
                       coalesce, nic (default rig,coalesce)
  --seed S             seed of the generators (default 1)
  --batch N|auto       idxs per work request (default auto, as netsparse_emulate)
  --units U            RIG client and server units per node (default 32)
  --traffic FILE       where rank 0 writes the counters (default: standard output)
  --help               this text
Exit codes: 0 done, 1 a run failed (error, failed work request or wrong property), 2 bad options.
)";

[[noreturn]] void bad_usage(const std::string& why, int rank) {
  if (rank == 0) std::cerr << "netsparse_emulate_mpi: " << why << " (--help lists the options)\n";
  MPI_Finalize();
  std::exit(2);
}

Options parse(int argc, char** argv, int rank) {
  namespace nb = netsparse::bench;
  Options o;
  cli::App app{"netsparse_emulate_mpi"};
  app.add_option("--matrix", o.matrix);
  app.add_option_function<std::string>("--K", [&](const std::string& v) {
    o.Ks.clear();
    for (long long k : nb::int_list("--K", v, 1, 4096))
      o.Ks.push_back(static_cast<std::uint32_t>(k));
  });
  app.add_option("--mechanisms", o.mechanisms);
  app.add_option("--seed", o.seed);
  app.add_option_function<std::string>("--batch", [&](const std::string& v) {
    o.batch =
        v == "auto" ? 0 : static_cast<std::uint32_t>(nb::int_list("--batch", v, 1, 1LL << 31)[0]);
  });
  app.add_option("--units", o.units)->check(cli::Range(1, 1 << 20));
  app.add_option("--traffic", o.traffic);
  const nb::CliResult r = nb::parse_command_line(app, argc, argv);
  if (r.kind == nb::CliResult::Kind::error) bad_usage(r.error, rank);
  if (r.kind == nb::CliResult::Kind::help) {
    if (rank == 0) std::cout << kHelp;
    MPI_Finalize();
    std::exit(0);
  }
  return o;
}

// Fails the run on every rank of `comm` with the reason (a collective error path: every rank of
// it calls it).
bool check(bool ok, const std::string& what, int rank, MPI_Comm comm = MPI_COMM_WORLD) {
  if (!ok) std::cerr << "netsparse_emulate_mpi: rank " << rank << ": " << what << "\n";
  int bad = ok ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
  return bad == 0;
}

// One ladder step at one K: every rank gathers its idxs; returns this rank's counters, or
// nothing when something failed (reported on stderr).
// `comm`: one rank per node (the leaders); `rank`: this node's number in it. `virtual_hosts`:
// the nodes are virtual hosts on one machine, so their frames must go through MPI, never
// through the transport's intra-host rings (NS_CTX_NO_HOST_RINGS).
bool run_step(const Workload& w, const LadderStep& step, std::uint32_t batch, int units, int rank,
              MPI_Comm comm, bool virtual_hosts, NodeTraffic& traffic) {
  NodeModel model;
  model.flags = step.flags;
  model.batch = batch;
  model.client_units = model.server_units = units;
  ns_context_attr attr = node_attr(model);
  // The real transport's own progress (a thread when MPI allows it) and watchdog.
  attr.comp_mask &= ~static_cast<std::uint64_t>(NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_WATCHDOG);
  if (virtual_hosts) {
    attr.comp_mask |= NS_CTX_ATTR_FLAGS;
    attr.flags |= NS_CTX_NO_HOST_RINGS;
  }
  ns_context* ctx = nullptr;
  if (!check(ns_open_mpi(comm, &attr, &ctx) == NS_OK,
             std::string("ns_open_mpi: ") + ns_last_error(), rank, comm))
    return false;
  const auto me = static_cast<std::size_t>(rank);
  const std::uint64_t begin = w.row_offsets[me], rows = w.row_offsets[me + 1] - begin;
  const std::uint64_t total_rows = w.row_offsets.back();
  std::vector<std::byte> props(rows * w.prop_bytes), out(total_rows * w.prop_bytes);
  for (std::uint64_t i = 0; i < rows; ++i)
    fill_property(begin + i, {props.data() + i * w.prop_bytes, w.prop_bytes});
  ns_mr* mr = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  bool ok =
      check(ns_reg_props(ctx, props.data(), rows, w.prop_bytes, w.row_offsets.data(), &mr) == NS_OK,
            std::string("ns_reg_props: ") + ns_last_error(), rank, comm);
  if (ok) {
    ok = check(ns_create_cq(ctx, static_cast<int>(model.qp_depth) * 2, &cq) == NS_OK &&
                   ns_create_qp(ctx, cq, static_cast<int>(model.qp_depth), &qp) == NS_OK,
               std::string("queue creation: ") + ns_last_error(), rank, comm);
  }
  std::string error;
  if (ok) {
    const std::vector<std::uint64_t>& idxs = w.idxs[me];
    const std::uint64_t wrs = (idxs.size() + batch - 1) / batch;
    std::uint64_t posted = 0, done = 0;
    while (done < wrs && error.empty()) {
      while (posted < wrs && posted - done < model.qp_depth) {
        ns_send_wr wr = gather_wr(posted, idxs, batch, mr, out.data(), total_rows, w.prop_bytes);
        ns_send_wr* bad = nullptr;
        const ns_status_t s = ns_post_send(qp, &wr, &bad);
        if (s == NS_ERR_NO_RESOURCE) break;
        if (s != NS_OK) {
          error = std::string("ns_post_send: ") + ns_last_error();
          break;
        }
        ++posted;
      }
      ns_wc wc[64];
      const int got = ns_cq_wait(cq, 64, wc, 60000);
      if (got <= 0) {
        error = got == 0 ? "no completion within 60 s"
                         : std::string("ns_cq_wait: ") + ns_status_str(got);
        break;
      }
      for (int i = 0; i < got; ++i) {
        if (wc[i].status != NS_WC_SUCCESS && error.empty())
          error = "work request " + std::to_string(wc[i].wr_id) + " completed with " +
                  ns_wc_status_str(wc[i].status);
      }
      done += static_cast<std::uint64_t>(got);
    }
    // Every property this node asked for (remote rows: REMOTE_ONLY skips its own).
    std::vector<std::byte> expected(w.prop_bytes);
    std::uint64_t wrong = 0;
    for (std::uint64_t idx : idxs) {
      if (idx >= begin && idx < begin + rows) continue;
      fill_property(idx, expected);
      if (std::memcmp(out.data() + idx * w.prop_bytes, expected.data(), w.prop_bytes) != 0) ++wrong;
    }
    if (error.empty() && wrong != 0)
      error = std::to_string(wrong) + " gathered properties differ from the owner's";
    // Serve the peers until every node has its answers (with INLINE progress nobody else
    // answers them) before any blocking MPI call, then read the counters.
    const ns_status_t q = ns_quiesce(ctx, 60000);
    if (q != NS_OK && error.empty()) error = std::string("ns_quiesce: ") + ns_last_error();
    if (!error.empty()) {
      char stats[4096];
      if (ns_stats_json(ctx, stats, sizeof stats) > 0) error += std::string("; engine: ") + stats;
    }
    ok = check(error.empty(), error, rank, comm);
    if (ok) traffic = traffic_of(ctx);
  }
  if (qp != nullptr) ns_destroy_qp(qp);
  if (cq != nullptr) ns_destroy_cq(cq);
  if (mr != nullptr) ns_dereg_props(mr);
  ns_close(ctx);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const netsparse::bench::World world = netsparse::bench::init_world(argc, argv);
  const int rank = world.rank, size = world.size;
  const Options o = parse(argc, argv, rank);
  std::vector<LadderStep> steps;
  for (const std::string& name : netsparse::bench::split(o.mechanisms)) {
    const LadderStep* s = find_step(name);
    if (s == nullptr || s->tor)
      bad_usage("--mechanisms " + name + ": one of rig, filter, coalesce, nic", rank);
    steps.push_back(*s);
  }
  // Virtual hosts: R consecutive ranks per node (the configuration table validated the value).
  const int per_host =
      netsparse::config::is_set(netsparse::config::Env::kRanksPerHost)
          ? static_cast<int>(netsparse::config::integer(netsparse::config::Env::kRanksPerHost))
          : 1;
  if (size % per_host != 0)
    bad_usage("NETSPARSE_RANKS_PER_HOST=" + std::to_string(per_host) + " does not divide " +
                  std::to_string(size) + " ranks",
              rank);
  const int hosts = size / per_host, host = rank / per_host;
  const bool leader = rank % per_host == 0;
  MPI_Comm host_comm = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, host, rank, &host_comm);
  MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, rank, &leaders);
  Workload w;
  std::uint32_t batch = o.batch;
  std::string error;
  try {
    const netsparse::CsrMatrix a = load_matrix_spec(o.matrix, o.seed);
    w = gather_workload(a, hosts, 4, per_host);
    if (batch == 0) batch = auto_batch(static_cast<std::uint64_t>(a.nnz()) / hosts, o.units);
    if (per_host > 1) {
      // The host's list is its ranks' lists, gathered at the leader in rank order.
      const std::vector<std::uint64_t> mine =
          gather_workload(a, size, 4).idxs[static_cast<std::size_t>(rank)];
      int n = static_cast<int>(mine.size());
      std::vector<int> counts(static_cast<std::size_t>(per_host)), displs(counts.size(), 0);
      MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, host_comm);
      for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
      std::vector<std::uint64_t> node_list(
          leader ? static_cast<std::size_t>(displs.back() + counts.back()) : 0);
      MPI_Gatherv(mine.data(), n, MPI_UINT64_T, node_list.data(), counts.data(), displs.data(),
                  MPI_UINT64_T, 0, host_comm);
      if (leader && node_list != w.idxs[static_cast<std::size_t>(host)])
        throw std::logic_error("the host's gathered list differs from the node's");
      if (leader) w.idxs[static_cast<std::size_t>(host)] = std::move(node_list);
    }
  } catch (const std::exception& e) {
    error = o.matrix + ": " + e.what();
  }
  if (!check(error.empty(), error, rank)) {
    MPI_Finalize();
    return 1;
  }
  std::ostringstream text;
  bool ok = true;
  for (std::size_t ki = 0; ki < o.Ks.size() && ok; ++ki) {
    w.prop_bytes = o.Ks[ki] * 4;
    for (std::size_t k = 0; k < steps.size() && ok; ++k) {
      NodeTraffic mine;
      if (leader) ok = run_step(w, steps[k], batch, o.units, host, leaders, per_host > 1, mine);
      ok = check(ok, "a host's gather failed", rank);
      if (!ok) break;
      if (!leader) continue;
      std::vector<NodeTraffic> all(static_cast<std::size_t>(hosts));
      static_assert(sizeof(NodeTraffic) % sizeof(std::uint64_t) == 0);
      constexpr int kWords = sizeof(NodeTraffic) / sizeof(std::uint64_t);
      MPI_Gather(&mine, kWords, MPI_UINT64_T, all.data(), kWords, MPI_UINT64_T, 0, leaders);
      text << "K " << o.Ks[ki] << " mechanisms " << steps[k].name << "\n";
      write_traffic(text, all);
    }
  }
  if (ok && rank == 0) {
    std::printf("netsparse_emulate_mpi: %s on %d ranks (%d per node), batch %u\n", o.matrix.c_str(),
                size, per_host, batch);
    if (o.traffic.empty()) {
      std::cout << text.str();
    } else {
      std::ofstream f(o.traffic);
      f << text.str();
      if (!f) {
        std::cerr << "netsparse_emulate_mpi: cannot write " << o.traffic << "\n";
        ok = false;
      }
    }
  }
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  MPI_Comm_free(&host_comm);
  MPI_Finalize();
  return ok ? 0 : 1;
}
