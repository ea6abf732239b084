// netsparse_bench: distributed SpMM / SDDMM / SpMV with NetSparse's RIG engine and every
// baseline, measured side by side in one run, with the NetSparse paper's Table 7 columns.
//
//   mpirun -np 2 netsparse_bench                       # the default comparison (1-3 minutes)
//   mpirun -np 4 netsparse_bench --matrix gen:kron:18 --K 16,128 --json out.json
//   netsparse_bench --help
//
// For every (kernel, K) it runs each mode for --warmup + --iters iterations (a barrier before
// each; an iteration's time is the slowest rank's), checks each mode's result against the
// ideal mode's, and prints time per iteration, speedup over su, fraction of ideal and the
// traffic statistics. Exit codes (also in --help): 0 every mode agreed with ideal, 1 a mode
// disagreed or failed, 2 an input error (bad option, matrix file or specification, unwritable
// --json path; one line from rank 0, every rank exits 2 without MPI_Abort) or an internal failure,
// 3 no progress for 120 s (a dead peer; stall_guard.hpp), 4 a peer died (the library or the
// stall guard saw it): the rank leaves without MPI_Finalize (ns_finalize_or_exit), which would
// wait for ever on the dead rank.
#include <mpi.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agreement/mpi.hpp"
#include "cli.hpp"
#include "config/settings.hpp"
#include "mpi_calls.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/graph_partition.hpp"
#include "netsparse/netsparse_mpi.h"
#include "petsc_mode.hpp"
#include "report.hpp"
#include "stall_guard.hpp"
#include "stats.hpp"
#include "tpetra_mode.hpp"
#include "uncertainty.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using namespace netsparse;

// ---- options ---------------------------------------------------------------------------------

struct Options {
  std::string matrix = "gen:kron:16";
  PartitionKind partition = PartitionKind::equal_rows;
  bool metis = false;  // --partition metis / metis-vol: equal rows, then partition_with_metis
  PartitionObjective metis_objective = PartitionObjective::edge_cut;  // metis-vol: volume
  std::vector<KernelKind> kernels = {KernelKind::spmm};
  std::vector<int> ks = {16, 128};
  std::vector<std::string> modes;  // empty = all (+ ablation variants with --ablation)
  bool ablation = false;
  bool no_plans_row = false;  // --no-plans: also netsparse on the per-request RIG path
  bool fixed_row = false;     // --fixed-row: with --changing-sparsity, netsparse on A itself
  // 5 rounds of 10 timed iterations, a fast mode more, until its timed iterations of the round
  // add up to min_time (at most kMinTimeIterationFactor x iters): 5 setups per mode, and on a
  // quiet machine the cheap modes of the main job (np 2, kron:16, K = 16: ~2 ms an iteration)
  // pool ~250 iterations, enough for 5 % at K = 16 (docs/benchmarks.md, "Verdicts and their
  // uncertainty"; under load the spread, not the count, decides).
  int iters = 10;
  int warmup = 1;
  int rounds = 5;
  double min_time = 0.1;
  // A slow baseline (sa-vanilla ~1 s an iteration on the main job) stops its round's timed
  // iterations once they add up to max_time: the main job's time was theirs.
  double max_time = 2.0;
  bool changing = false;
  SamplingParams sampling{0.5, 0};
  DistOptions dist;
  double tolerance = 1e-4;
  std::string json;
  std::size_t line_rate_bytes = std::size_t{8} << 20;
  bool progress = true;
};

const char* kHelp =
    R"(netsparse_bench: distributed SpMM / SDDMM / SpMV, NetSparse's Remote Indexed Gather
against every baseline, side by side in one run.

usage: mpirun -np P netsparse_bench [options]

Workload
  --matrix SPEC          the sparse matrix A (default gen:kron:16). SPEC is one of
{forms}  --partition equal|balanced|metis|metis-vol
                         1D row partition: equal row blocks (default), ~nnz/P per rank, or
                         the parts of a METIS k-way partition of A's graph (A renumbered
                         so each part's rows are one block; its time shown apart) that
                         minimizes the edge cut (metis) or the communication volume
                         (metis-vol: the remote rows fetched, summed over the ranks)
  --kernel LIST          spmm, sddmm, spmv, comma-separated (default spmm). SpMV always runs
                         with K = 1.
  --dtype f32|f64        precision of the operands, the matrix values and the properties
                         (default f32); results are checked against ideal in the same
                         precision
  --K LIST               dense widths K (properties of 4K bytes in f32, 8K in f64),
                         comma-separated (default 16,128). Over MPI a property travels in
                         one transport message when it fits (K up to 16376 in f32, 8188 in
                         f64 by default), else in pieces
  --iters N              timed iterations per mode and round (default 10; more or fewer
                         with --min-time, --max-time)
  --min-time S           after --iters, a mode keeps iterating in the round until its timed
                         iterations add up to S seconds, at most 20 x --iters (default 0.1;
                         0: no more than --iters). A fast mode pools more iterations, so its
                         interval narrows, at a cost of about S per mode and round. Not with
                         --changing-sparsity (one pattern per iteration, the same list for
                         every mode)
  --max-time S           a mode stops its round's timed iterations once they add up to S
                         seconds, even before --iters (at least one per round; default 2;
                         0: no limit). Slow modes (sa-vanilla, sa-conveyors) then pool fewer
                         iterations; their medians stay, their intervals widen. Not with
                         --changing-sparsity
  --warmup N             untimed iterations before them (default 1)
  --rounds N             run the whole list of modes N times, one after another, and pool
                         each mode's iterations (default 5): on a busy machine, load drifts
                         then hit every mode alike
  --changing-sparsity    A's pattern changes every iteration (GNN-style neighbour sampling,
                         seed = iteration): every mode redoes its setup inside the timed
                         iteration (inspector-executor: its whole exchange plan; the tiled
                         modes: the split and tiling). netsparse and ideal lay each pattern
                         out in one pass (DistOptions::dynamic_pattern,
                         TiledMatrix::split_columns) and compute it with the tiled kernels
  --sample-fraction F    fraction of each row's nonzeros kept per iteration (default 0.5)
  --sample-max N         at most N nonzeros per row per iteration (default 0: no cap)

Modes
  --modes LIST           comma-separated, or all (the default: node-aware-ie only when the job spans
                         several hosts, real or NETSPARSE_RANKS_PER_HOST virtual ones;
                         netsparse-rank only when netsparse is the node-wide engine):
                           netsparse          NetSparse as the job's layout calls for it: the
                                              node-wide engine (netsparse-node) where the job
                                              has several hosts and a host several ranks,
                                              else the per-rank engine (netsparse-rank)
                           netsparse-rank     RIG gathers through a per-rank engine: the
                                              distinct remote rows into a compact buffer by
                                              gather plans (a fixed pattern), or per run from
                                              the CSR (--sample: a changing pattern)
                           su                 MPI_Allgatherv of the whole operand
                           su-panel           MPI_Iallgatherv per column panel, pipelined
                           sa-vanilla         one NS_WR_RDMA_READ per remote nonzero
                           sa-conveyors       Conveyors-style aggregation, one request per
                                              remote nonzero
                           sa-opt             the same with a free perfect prefilter (SAOpt)
                           inspector-executor precomputed ghost exchange
                                              (MPI_Ineighbor_alltoallv), setup separate
                           node-aware-ie      the same, node-aware: rows from another host
                                              go through the hosts' leaders, one message per
                                              host pair, each row once per host (hosts:
                                              shared memory, or NETSPARSE_RANKS_PER_HOST)
                           netsparse-node     node-wide NetSparse: one Idx Filter, property
                                              store and RIG engine per host (its leader);
                                              each remote row lands once per host
                           task-packets       per owner, the sparse work sent to the owner
                                              (triples) and partial sums back where that
                                              moves fewer bytes than fetching its rows, else
                                              the rows (not in the default list)
                           task-packets-measured
                                              task-packets with each owner's way (rows, whole
                                              block, tasks) picked by trial runs, run in the
                                              setup (DistOptions::tune_owners; not in the
                                              default list)
                           auto               chosen while the kernel runs: its first runs
                                              are trials of netsparse, inspector-executor, su
                                              and task-packets with its ways by measurement
                                              (one warm-up + DistOptions::tune_runs timed
                                              runs each), the fastest kept (not in the
                                              default list). Its setup column includes the
                                              trials; its time/it is the steady state after
                                              them; a line under the table says what it
                                              chose and what tuning cost
                           ideal              no communication (the compute-only bound)
                           petsc              PETSc's MatMult / MatMatMult (MPIDENSE B), fp64;
                                              built with PETSc, in the default list with
                                              --dtype f64, a fixed pattern and no SDDMM
                           tpetra             Trilinos Tpetra's CrsMatrix::apply (its Import,
                                              then the local product), fp64; built with
                                              Tpetra, in the default list like petsc
                         and the ablation variants below. ideal always runs (it is the
                         reference every result is checked against).
  --fixed-row            with --changing-sparsity, also run netsparse-fixed: netsparse on A's own
                         (unsampled, fixed) pattern in the same rounds, so the changing path's
                         time is compared with the fixed path's inside one run (its output is
                         not checked: ideal ran the sampled patterns; err prints -)
  --no-plans             also run netsparse-noplan: netsparse on a fixed pattern without gather
                         plans (every run takes the per-request RIG path: the ablation of
                         plans; netsparse itself records its gathers once and replays them)
  --ablation             also run the paper's Table 8 ladder on the per-nonzero idx stream:
                           rig          no filter, no coalescing, no concatenation
                           rig+filter   + Idx Filter
                           rig+filter+coalesce
                           rig+all      + concatenation (everything on)

NetSparse engine (RIG) knobs
  --batch N              idxs per RIG work request (default 8192)
  --rig-idx unique|nonzeros
                         what a netsparse work request carries: the distinct remote columns
                         of the panel (default), or one idx per remote nonzero (the engine's
                         filter and coalescing then remove the repeats, as in the paper)
  --window COLS          column panel (gather window) width; 0 = automatic (default)
  --row-panel N          row panel height of the local tiles (default 256)
  --autotune-tiles S     SPADE's tile search on each rank's local block, at most about S
                         seconds per pattern (cached per pattern, kernel and K); its choice
                         replaces --row-panel (0 = off, the default)
  --delay-ns N           concatenation delay (expiration time) in ns (engine default {concat_delay_ns})
  --packet-bytes N       concatenation queue capacity = packet size (engine default {packet_bytes})
  --client-units N       RIG client units (engine default {num_client_units})
  --server-units N       RIG server units (engine default {num_server_units})
  --pending N            Pending PR Table entries per client unit (engine default {pending_entries})
  --idx-chunk N          idxs a client unit takes at once (engine default {idx_chunk})
  --progress auto|thread|inline
                         a progress thread per rank (the emulated NIC), or progress driven
                         by the application (waits, and the kernels between tiles); auto
                         (default): a thread only where a core is free for it
  --transport auto|mpi|verbs|inproc
                         the engine's transport. auto (default): NETSPARSE_TRANSPORT if set
                         ({transport_now}), else verbs if an RDMA port is ACTIVE, else mpi. inproc connects
                         threads of one process: a single rank only (-np 1)
  --no-filter            switch the Idx Filter off
  --no-coalesce          switch coalescing off
  --no-concat            one PR per packet
  --max-outstanding N    sa-vanilla: RDMA READs in flight (default 4096)

Baseline knobs
  --conveyor-buffer N    bytes per Conveyors link buffer (default 10000)
  --conveyor-buffers N   buffers per link (default 2)
  --ie-p2p               inspector-executor with Isend/Irecv instead of the neighbourhood
                         collective

Output
  --json FILE            also write every measurement as JSON (rank 0). FILE is checked
                         before the run (opened for appending, an existing file is kept until
                         the results replace it): an unwritable path fails at once, exit 2
  --tolerance X          max relative error against ideal still counted correct (default 1e-4)
  --line-rate-bytes N    bytes each rank streams to measure the line rate (default 8388608)
  --no-progress          no progress line on a terminal
  --spin / --yield       keep Open MPI's busy polling / make idle MPI polls yield the core
                         (OMPI_MCA_mpi_yield_when_idle=1). Default: yield only when the
                         ranks' OpenMP and progress threads outnumber the cores, where a
                         spinning wait starves the thread it waits for
  --help                 this text

Columns
  time/it    median over the timed iterations (of all rounds) of the slowest rank's time per
             iteration
  95% CI     the bootstrap 95 % interval of that median (every round's iterations pooled,
             2000 resamples, fixed seed), relative to it; in the JSON also the quartiles
  setup      setup of the mode (max over ranks; with --changing-sparsity per iteration and
             already included in time/it)
  vs su      su's time / this mode's time;  of ideal: ideal's time / this mode's time
  err        max |x - ideal| / max |ideal| over every rank's result ('correct' if <= tolerance)
  F+C        fraction of the remote nonzeros' property requests that were not sent
             (filtered, coalesced or never generated)
  PR/pkt     property requests (and responses) per packet / message
  goodput    useful bytes (distinct remote properties of the tail rank) per second / line rate
  util       wire bytes the tail rank sent per second / line rate
  bytes vs su  this mode's total bytes against su's: "2.7x less" or "2.7x more" ("none": the
             mode sent nothing); in the JSON, traffic_vs_su = su's bytes / this mode's bytes
  PRs vs SA  sa-vanilla's requests (one per remote nonzero) / this mode's requests
  The line rate is measured in the same run (measure_line_rate): every rank streams
  --line-rate-bytes to rank r + P/2 while receiving from r - P/2, all at once; bytes per second
  of the slowest rank. Wire bytes follow the paper (concat/wire_model.hpp): payload + 50 B per
  MPI message; for the RIG modes the engine's own counters (concatenation and PR headers
  included); a vanilla read is the paper's lone PR, 2 x 78 B + property.
  Two minimums head each table: the payload (every distinct remote property once; no mode
  moves less) and the RIG wire minimum (that payload requested and answered once in full
  packets with NetSparse's headers: the floor of the RIG modes; modes counted per MPI message
  carry no per-property headers and can go below it).
  Verdicts (the lines under each table, "verdicts" in the JSON): netsparse is "faster" or
  "slower" than the best other mode (or inspector-executor, in time to solution) only when the
  bootstrap 95 % interval of the ratio of their times lies wholly below or above 1 (each mode's
  pooled iterations, and per-round setups, resampled on their own); else it is within noise
  (+-x %), x the interval's farthest reach from 1. Fewer than 6 timed iterations per mode, or
  fewer than 3 rounds for time to solution: "not resolved".
  A mode faster than ideal (of ideal > 100 %) is most often timing noise: a warning says so
  and suggests --rounds, which pools every mode's iterations over several rounds.

Exit codes
  0  every mode ran and agreed with ideal
  1  a mode's result disagreed with ideal (beyond --tolerance) or the mode failed
  2  an input error, reported in one line by rank 0 with no MPI_Abort: a bad option, an
     unreadable or malformed matrix file, a bad matrix specification, a --json path that
     cannot be written, ranks given different options ("the ranks disagree on --K: rank 0
     has 4, rank 1 has 8"; all but --matrix, --no-progress, --spin / --yield must match, and
     a --matrix file's content must); or an internal failure (then MPI_Abort). mpirun adds its own note
     about the non-zero exit status.
  3  no progress for {stall_s} s (NETSPARSE_BENCH_STALL_S{stall_how}): a peer died and MPI cannot report it;
     the message says which step was running
  4  a peer died or stopped answering: a work request of the library timed out or found it
     dead (the engine's watchdog, {watchdog_ms} ms), or a rank of this host vanished (checked every 0.2 s:
     ns_watch_host_peers).
     The run stops at once, the rank says why on stderr and leaves without MPI_Finalize
     (which would wait for ever on the dead rank; ns_finalize_or_exit). Under mpirun
     --enable-recovery every survivor exits 4; without it mpirun ends the job itself.
)";

[[noreturn]] void usage_error(const std::string& what) {
  throw std::invalid_argument(what + " (see --help)");
}

const std::vector<std::string>& ablation_labels() {
  static const std::vector<std::string> labels = {"rig", "rig+filter", "rig+filter+coalesce",
                                                  "rig+all"};
  return labels;
}

// netsparse without gather plans (DistOptions::plans = false).
constexpr const char* kNoPlanLabel = "netsparse-noplan";
constexpr const char* kFixedRowLabel = "netsparse-fixed";
// task-packets with each owner pair's way chosen by trial runs (DistOptions::tune_owners).
constexpr const char* kTaskMeasuredLabel = "task-packets-measured";

bool is_known_mode(const std::string& m) {
  if (m == "petsc") return bench::kPetscMode;    // PETSc's own products (bench/petsc_mode.cpp)
  if (m == "tpetra") return bench::kTpetraMode;  // Tpetra's (bench/tpetra_mode.cpp)
  if (std::find(ablation_labels().begin(), ablation_labels().end(), m) != ablation_labels().end()) {
    return true;
  }
  if (m == kNoPlanLabel || m == kFixedRowLabel || m == kTaskMeasuredLabel) return true;
  try {
    (void)parse_comm_mode(m);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

const char* metis_name(const Options& o) {
  return o.metis_objective == PartitionObjective::volume ? "metis-vol" : "metis";
}

// Every rank parses its argv. Throws std::invalid_argument with the message for a bad option
// (reported once for the job, exit 2); std::nullopt when --help was asked for. `command_line`:
// what was given for each option, which the ranks agree on (agreed_command_line).
std::optional<Options> parse_args(int argc, char** argv, bench::CliResult& command_line) {
  Options o;
  cli::App app{"netsparse_bench"};
  const auto member = [&](const char* name, std::vector<std::string> allowed, auto apply) {
    app.add_option_function<std::string>(name, apply)->check(cli::IsMember(std::move(allowed)));
  };
  // Workload
  app.add_option("--matrix", o.matrix);
  member("--partition", {"equal", "balanced", "metis", "metis-vol"}, [&](const std::string& v) {
    o.partition = v == "balanced" ? PartitionKind::balanced_nnz : PartitionKind::equal_rows;
    o.metis = v == "metis" || v == "metis-vol";
    o.metis_objective =
        v == "metis-vol" ? PartitionObjective::volume : PartitionObjective::edge_cut;
  });
  app.add_option_function<std::string>("--kernel", [&](const std::string& v) {
    static const std::map<std::string, KernelKind> kinds = {
        {"spmm", KernelKind::spmm}, {"sddmm", KernelKind::sddmm}, {"spmv", KernelKind::spmv}};
    o.kernels.clear();
    for (const std::string& k : bench::member_list("--kernel", v, {"spmm", "sddmm", "spmv"}))
      o.kernels.push_back(kinds.at(k));
  });
  app.add_option_function<std::string>("--dtype", [&](const std::string& t) {
    if (!parse_scalar_type(t, o.dist.scalar))
      throw cli::ValidationError("--dtype", "takes f32 or f64, not '" + t + "'");
  });
  app.add_option_function<std::string>("--K", [&](const std::string& v) {
    o.ks.clear();
    for (long long k : bench::int_list("--K", v, 1, 1 << 20)) o.ks.push_back(static_cast<int>(k));
  });
  app.add_option("--iters", o.iters)->check(cli::Range(1, 1000000));
  app.add_option("--warmup", o.warmup)->check(cli::Range(0, 1000000));
  app.add_option("--rounds", o.rounds)->check(cli::Range(1, 1000));
  app.add_option("--min-time", o.min_time)->check(cli::Range(0.0, 3600.0));
  app.add_option("--max-time", o.max_time)->check(cli::Range(0.0, 1e6));
  app.add_flag_callback("--changing-sparsity", [&] {
    o.changing = true;
    o.dist.dynamic_pattern = true;  // netsparse computes on the sampled CSR, no inspector
  });
  app.add_option("--sample-fraction", o.sampling.keep_fraction)->check(cli::Range(0.0, 1.0));
  app.add_option("--sample-max", o.sampling.max_per_row)->check(cli::Range(0, 1 << 30));
  // Modes
  app.add_option_function<std::string>("--modes", [&](const std::string& v) {
    o.modes = bench::split(v);
    if (o.modes == std::vector<std::string>{"all"}) {  // what --help calls the default
      o.modes.clear();
      return;
    }
    for (const std::string& m : o.modes) {
      if (!is_known_mode(m)) throw cli::ValidationError("--modes", "unknown mode '" + m + "'");
    }
  });
  app.add_flag("--ablation", o.ablation);
  app.add_flag("--no-plans", o.no_plans_row);
  app.add_flag("--fixed-row", o.fixed_row);
  // NetSparse engine (RIG) knobs
  app.add_option("--batch", o.dist.batch)->check(cli::Range(1LL, 1LL << 40));
  member("--rig-idx", {"unique", "nonzeros"}, [&](const std::string& v) {
    o.dist.rig_idx = v == "unique" ? RigIdxSource::unique_columns : RigIdxSource::nonzeros;
  });
  app.add_option("--window", o.dist.tiling.col_panel)->check(cli::Range(0LL, 1LL << 32));
  app.add_option("--row-panel", o.dist.tiling.row_panel)->check(cli::Range(1, 1 << 30));
  app.add_option_function<double>("--autotune-tiles",
                                  [&o](double seconds) {
                                    o.dist.autotune_tiles = seconds > 0;
                                    if (seconds > 0) o.dist.autotune_budget_seconds = seconds;
                                  })
      ->check(cli::Range(0.0, 3600.0));
  app.add_option("--delay-ns", o.dist.engine.delay_ns)->check(cli::Range(0LL, 1LL << 40));
  app.add_option("--packet-bytes", o.dist.engine.packet_bytes)->check(cli::Range(64, 1 << 24));
  app.add_option("--client-units", o.dist.engine.client_units)->check(cli::Range(1, 1024));
  app.add_option("--server-units", o.dist.engine.server_units)->check(cli::Range(1, 1024));
  app.add_option("--pending", o.dist.engine.pending_entries)->check(cli::Range(1, 1 << 24));
  app.add_option("--idx-chunk", o.dist.engine.idx_chunk)->check(cli::Range(1, 1 << 24));
  member("--progress", {"auto", "thread", "inline"}, [&](const std::string& v) {
    o.dist.engine.progress = v == "thread"   ? NS_PROGRESS_THREAD
                             : v == "inline" ? NS_PROGRESS_INLINE
                                             : NS_PROGRESS_AUTO;
  });
  member("--transport", {"auto", "mpi", "verbs", "inproc"}, [&](const std::string& v) {
    o.dist.engine.transport = v == "mpi"      ? NS_TRANSPORT_MPI
                              : v == "verbs"  ? NS_TRANSPORT_VERBS
                              : v == "inproc" ? NS_TRANSPORT_INPROC
                                              : NS_TRANSPORT_AUTO;
  });
  app.add_flag_callback("--no-filter", [&] { o.dist.engine.flags |= NS_CTX_NO_FILTER; });
  app.add_flag_callback("--no-coalesce", [&] { o.dist.engine.flags |= NS_CTX_NO_COALESCE; });
  app.add_flag_callback("--no-concat", [&] { o.dist.engine.flags |= NS_CTX_NO_CONCAT; });
  app.add_option("--max-outstanding", o.dist.max_outstanding_reads)->check(cli::Range(1, 1 << 20));
  // Baseline knobs
  app.add_option("--conveyor-buffer", o.dist.conveyor_buffer_bytes)->check(cli::Range(16, 1 << 26));
  app.add_option("--conveyor-buffers", o.dist.conveyor_buffers_per_link)
      ->check(cli::Range(1, 1024));
  app.add_flag("--ie-p2p", o.dist.ie_point_to_point);
  app.add_flag("--rack-switch", o.dist.rack_switch,
               "netsparse-node on several racks: inter-rack gathers through a software ToR per "
               "rack with the Property Cache (also NETSPARSE_RACK_SWITCH=1)");
  // Output
  app.add_option("--json", o.json);
  app.add_option("--tolerance", o.tolerance)->check(cli::Range(0.0, 1.0));
  app.add_option("--line-rate-bytes", o.line_rate_bytes)->check(cli::Range(1LL, 1LL << 30));
  app.add_flag_callback("--no-progress", [&] { o.progress = false; });
  app.add_flag("--spin,--yield");  // read before MPI_Init (choose_mpi_yield)
  command_line = bench::parse_command_line(app, argc, argv);
  const bench::CliResult& r = command_line;
  if (r.kind == bench::CliResult::Kind::help) return std::nullopt;
  if (r.kind == bench::CliResult::Kind::error) usage_error(r.error);
  return o;
}

// ---- variants: a library mode plus the engine options it runs with --------------------------

struct Variant {
  std::string label;
  DistOptions options;
};

// `hosts`: the job's hosts (host_layout): node-aware-ie joins the default list only when there
// are several -- on one host it is inspector-executor with extra steps, and the main job (np 2 on
// one machine) keeps its list and its time. `netsparse` is resolved as DistKernel resolves it
// (resolve_comm_mode, collective); where it is the node-wide engine, the per-rank engine joins
// as an ablation row (netsparse-rank), and netsparse-node is not listed twice.
std::vector<Variant> make_variants(const Options& o, int hosts) {
  std::vector<std::string> labels = o.modes;
  DistOptions netsparse_options = o.dist;
  netsparse_options.mode = CommMode::netsparse;
  const CommMode netsparse_is = resolve_comm_mode(MPI_COMM_WORLD, netsparse_options);
  if (labels.empty()) {
    for (CommMode m : all_comm_modes()) {
      // task-packets only when asked: it is inspector-executor wherever no owner is cheaper to
      // send the work to, and the main job keeps its list and its time.
      // auto only when asked too: it runs what the other rows already measure.
      if (m == CommMode::task_packets || m == CommMode::netsparse_node ||
          m == CommMode::automatic) {
        continue;
      }
      if (m == CommMode::node_aware_ie && hosts < 2) continue;
      if (m == CommMode::netsparse_rank && netsparse_is != CommMode::netsparse_node) continue;
      labels.emplace_back(to_string(m));
    }
    // PETSc and Tpetra multiply in double, by a fixed matrix, and have no SDDMM.
    const bool baselines_apply =
        o.dist.scalar == ScalarType::f64 && !o.changing &&
        std::count(o.kernels.begin(), o.kernels.end(), KernelKind::sddmm) == 0;
    if (bench::kPetscMode && baselines_apply) labels.emplace_back("petsc");
    if (bench::kTpetraMode && baselines_apply) labels.emplace_back("tpetra");
  }
  if (o.ablation) {
    for (const std::string& l : ablation_labels()) {
      if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
    }
  }
  if (o.fixed_row && o.changing &&
      std::find(labels.begin(), labels.end(), kFixedRowLabel) == labels.end()) {
    const auto ns = std::find(labels.begin(), labels.end(), std::string("netsparse"));
    labels.insert(ns == labels.end() ? labels.end() : ns + 1, kFixedRowLabel);
  }
  if (o.no_plans_row && std::find(labels.begin(), labels.end(), kNoPlanLabel) == labels.end()) {
    const auto ns = std::find(labels.begin(), labels.end(), std::string("netsparse"));
    labels.insert(ns == labels.end() ? labels.end() : ns + 1, kNoPlanLabel);
  }
  // ideal runs first: it is the reference.
  labels.erase(std::remove(labels.begin(), labels.end(), std::string("ideal")), labels.end());
  labels.insert(labels.begin(), "ideal");
  std::vector<Variant> out;
  for (const std::string& l : labels) {
    Variant v{l, o.dist};
    const auto ladder = std::find(ablation_labels().begin(), ablation_labels().end(), l);
    if (ladder != ablation_labels().end()) {
      v.options.mode = CommMode::netsparse_rank;  // the per-rank engine's mechanisms
      v.options.rig_idx = RigIdxSource::nonzeros;
      const std::uint32_t all_off = NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT;
      const std::uint32_t flags[] = {all_off, NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT,
                                     NS_CTX_NO_CONCAT, 0};
      v.options.engine.flags = flags[ladder - ablation_labels().begin()];
    } else if (l == kFixedRowLabel) {
      v.options.mode = CommMode::netsparse;
      v.options.dynamic_pattern = false;  // the fixed pattern's path: tiled once, gather plans
    } else if (l == kNoPlanLabel) {
      v.options.mode = CommMode::netsparse_rank;
      v.options.plans = false;
    } else if (l == kTaskMeasuredLabel) {
      v.options.mode = CommMode::task_packets;
      v.options.tune_owners = true;
    } else if (l == "petsc" || l == "tpetra") {
      v.options.mode = CommMode::inspector_executor;  // their class: VecScatter's / Import's plan
    } else {
      v.options.mode = parse_comm_mode(l);
      if (v.options.mode == CommMode::netsparse) v.options.mode = netsparse_is;
    }
    out.push_back(std::move(v));
  }
  return out;
}

// ---- measurement -----------------------------------------------------------------------------

bool counts_host_traffic(CommMode m) {
  return m == CommMode::inspector_executor || m == CommMode::node_aware_ie ||
         m == CommMode::netsparse_node;
}

// Per host (host order, on every rank): inter-host bytes, inter-host messages, intra-host bytes and
// rows landed per iteration, summed over the host's ranks. Collective.
std::vector<double> per_host_totals(const CommStats& s, double iters) {
  const HostLayout l = host_layout(MPI_COMM_WORLD);
  std::vector<double> mine(static_cast<std::size_t>(4 * l.hosts), 0.0);
  const std::size_t h = static_cast<std::size_t>(4 * l.host);
  mine[h] = static_cast<double>(s.inter_host_bytes) / iters;
  mine[h + 1] = static_cast<double>(s.inter_host_messages) / iters;
  mine[h + 2] = static_cast<double>(s.intra_host_bytes) / iters;
  mine[h + 3] = static_cast<double>(s.host_rows_landed) / iters;
  MPI_Allreduce(MPI_IN_PLACE, mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  return mine;
}

struct Result {
  std::string label;
  CommMode mode{};
  std::vector<double> times;          // per timed iteration, slowest rank
  std::vector<int> round_iterations;  // how many of `times` each round ran (--min-time)
  std::vector<double> setup_times;    // changing sparsity: per iteration; else one entry
  std::vector<double> first_times;    // the first run after the setup (plans record there)
  std::vector<double> engine_times;   // the part of the setup that opened the RIG engine
  // Opening the engine and constructing the kernel, once (with --changing-sparsity not part of
  // setup_times, which are then per iteration).
  std::vector<double> construct_times;
  std::vector<double> plan_times;  // the mode's own part of the setup (DistKernel::plan_seconds)
  // Changing sparsity: time per iteration without the setup every mode shares (splitting the
  // rows and tiling the local part), i.e. the mode's communication plan + its run.
  std::vector<double> own_times;
  double err = 0;
  bool correct = true;
  // Sums over ranks (per iteration) and tail (max over ranks) of the per-rank values.
  double bytes_total = 0, bytes_tail = 0, requests_total = 0, messages_total = 0;
  // Host-level traffic (inspector-executor, node-aware-ie), sums over ranks per iteration.
  double inter_bytes_total = 0, inter_payload_total = 0, inter_messages_total = 0;
  double intra_bytes_total = 0;
  // netsparse-node: the host Idx Filter's lookups and the rows landed in the hosts' stores (sums
  // per iteration), and per host inter-host bytes, frames, intra-host bytes, rows.
  double host_lookups_total = 0, host_landed_total = 0;
  // task-packets: (rank, owner) pairs that sent task packets / fetched rows, summed over ranks.
  double task_owners_total = 0, row_owners_total = 0, block_owners_total = 0;
  // netsparse-node with the rack switch: read PRs looked up at the switches, cache hits, and
  // the wire bytes / messages between switches (per run, summed over the switches).
  double switch_lookups_total = 0, switch_hits_total = 0;
  double inter_rack_bytes_total = 0, inter_rack_messages_total = 0;
  std::vector<double> per_host;  // 4 values per host, in host order
  double useful_tail = 0, wait_tail = 0, sync_tail = 0;
  double compute_tail = 0, post_tail = 0, progress_tail = 0;
  double engine_fc = -1;  // engine's own (filtered + coalesced) / requested, RIG modes
  double engine_prs_per_packet = -1;
  // Scale counters (issue 34; exact, whatever the machine): messages per iteration of the rank
  // that sent most, MPI collective calls per run (the kernel's runs only, max over ranks:
  // bench/common/mpi_calls.hpp), and the resident set of the process with the mode's objects
  // alive (MiB: max and mean over ranks).
  double messages_tail = 0, collectives_per_run = 0, rss_max_mib = 0, rss_mean_mib = 0;
  double open_collectives = 0;   // MPI collective calls of the engine's open (rank 0's)
  double setup_collectives = 0;  // ... of the setup: engine open + the kernel's construction
  std::string engine_json;
  std::string error;
  // auto, per round: the mode it chose, its tuning cost (the slowest rank's: construction with
  // the first candidate's setup, the later candidates' setups and the trial runs, until the
  // choice), and the kernel's auto_tuning_json (rank 0's).
  std::vector<std::string> auto_chosen;
  std::vector<double> auto_tuning_times;
  std::vector<std::string> auto_json;
};

// [{"inter_host_bytes": .., "inter_host_messages": .., "intra_host_bytes": .., "rows_landed": ..}]
bench::Json per_host_json(const std::vector<double>& v) {
  bench::Json out = bench::Json::array();
  for (std::size_t h = 0; h + 3 < v.size(); h += 4) {
    out.push_back({{"inter_host_bytes", v[h]},
                   {"inter_host_messages", v[h + 1]},
                   {"intra_host_bytes", v[h + 2]},
                   {"rows_landed", v[h + 3]}});
  }
  return out;
}

using bench::median;

// This process's resident set now, MiB (/proc/self/statm), 0 where it cannot be read.
double resident_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1048576.0;
}

double allreduce(double v, MPI_Op op) {
  return bench::reduce_over_ranks(v, op);
}

// Pattern-wide numbers of one (matrix, kernel, K), summed over ranks or max over ranks.
struct Volume {
  double nnz_total = 0, remote_nnz_total = 0, unique_total = 0, unique_tail = 0;
  // The minimums (minimum_traffic): the payload (each distinct remote property once) and the
  // RIG wire bytes (that payload requested and answered in full packets of packet_bytes).
  double min_wire_total = 0, min_wire_tail = 0, min_property_total = 0, min_property_tail = 0;
  unsigned packet_bytes = 0;
  // Between hosts (host_volume): the node-wide minimum payload (each remote row into a host
  // once) and the per-rank one (each rank's own rows from other hosts).
  HostVolume hosts;
  double host_min_payload = 0, rank_host_payload = 0;
};

bool stderr_is_tty() {
  return isatty(fileno(stderr)) != 0;
}

// The progress line on a terminal, and the stall guard's heartbeat (stall_guard.hpp): every
// step shown is progress; none for 120 s (a dead peer: MPI cannot report it) ends the run with
// exit code 3 and a message saying what was being measured.
class Progress {
 public:
  Progress(bool on, int rank)
      : on_(on && rank == 0 && stderr_is_tty()),
        guard_("netsparse_bench", rank, std::chrono::seconds(120)) {}
  // Before MPI_Finalize: the guard's limit holds for it too.
  void finishing() { guard_.beat("finalizing MPI"); }
  void show(const std::string& what) {
    guard_.beat(what);
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K%s", what.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (on_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
  bench::StallGuard guard_;
};

// Operand blocks and output in one precision.
template <class T>
struct Blocks {
  std::vector<T> b, x, out;
};

struct Workload {
  const DistMatrix* a = nullptr;
  KernelKind kernel{};
  int k = 1;
  int rank = 0;
  ScalarType scalar = ScalarType::f32;  // --dtype: which of the two sets below is used
  Blocks<float> f32;
  Blocks<double> f64;
  std::vector<CsrMatrix> patterns;       // changing sparsity: one per timed iteration
  std::vector<CsrMatrix> warm_patterns;  // ... and per warm-up iteration

  // Calls f(blocks) with the blocks of the run's precision.
  template <class F>
  decltype(auto) with_blocks(F&& f) {
    if (scalar == ScalarType::f32) return f(f32);
    return f(f64);
  }
  void set_operands(const std::vector<double>& b, const std::vector<double>& x) {
    with_blocks([&](auto& blk) {
      blk.b.assign(b.begin(), b.end());
      blk.x.assign(x.begin(), x.end());
    });
  }
  void clear_out(std::size_t n) {
    with_blocks([&](auto& blk) { blk.out.assign(n, 0); });
  }
  [[nodiscard]] std::vector<double> out_as_double() {
    return with_blocks(
        [](auto& blk) { return std::vector<double>(blk.out.begin(), blk.out.end()); });
  }
};

// Operand values: 24-bit fractions in [-1, 1), exact in float and double alike, so both
// precisions compute on the same inputs.
std::vector<double> make_block(int which, gidx_t begin, gidx_t end, int k) {
  std::vector<double> v(static_cast<std::size_t>(end - begin) * k);
  for (gidx_t r = begin; r < end; ++r) {
    for (int j = 0; j < k; ++j) {
      std::uint64_t z = static_cast<std::uint64_t>(r) * 0x9e3779b97f4a7c15ULL +
                        static_cast<std::uint64_t>(j + 1) * 0xc2b2ae3d27d4eb4fULL +
                        static_cast<std::uint64_t>(which) * 0x165667b19e3779f9ULL;
      z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
      z ^= z >> 29;
      v[(r - begin) * k + j] = static_cast<double>(z >> 40) / (1 << 23) - 1.0;
    }
  }
  return v;
}

void run_once(DistKernel& kern, Workload& w) {
  w.with_blocks([&](auto& blk) {
    switch (w.kernel) {
      case KernelKind::spmm:
        kern.spmm(blk.b, blk.out);
        break;
      case KernelKind::sddmm:
        kern.sddmm(blk.x, blk.b, blk.out);
        break;
      case KernelKind::spmv:
        kern.spmv(blk.b, blk.out);
        break;
    }
  });
}

std::size_t out_size(const Workload& w, const CsrMatrix& pattern) {
  return w.kernel == KernelKind::sddmm ? static_cast<std::size_t>(pattern.nnz())
                                       : static_cast<std::size_t>(w.a->rows().size(w.rank)) * w.k;
}

// The configuration the engine actually runs (defaults and AUTO resolved), as the engine
// reports it: printed the first time an engine is opened.
void print_engine_config_once(const RigEngine& engine, int rank) {
  static bool printed = false;
  if (printed || rank != 0) return;
  printed = true;
  const bench::Json stats = bench::parse_json(engine.stats_json(), "the engine's stats_json");
  std::printf("  engine config (%s transport): %s\n", engine.transport_name().c_str(),
              stats["config"].dump().c_str());
  const std::string detail = stats.value("transport_detail", "");
  if (!detail.empty()) std::printf("  transport: %s\n", detail.c_str());
}

// The most timed iterations a mode runs per round: --iters, or up to kMinTimeIterationFactor x
// --iters while --min-time is not used up. A changing pattern has one pattern per iteration,
// the same list for every mode (the result check compares the last one's products): --iters.
constexpr int kMinTimeIterationFactor = 20;
int timed_iterations_cap(const Options& o) {
  return o.min_time > 0 && !o.changing ? o.iters * kMinTimeIterationFactor : o.iters;
}

Result measure(const Variant& v, Workload& w, const Options& o, const std::vector<double>* ref,
               Progress& progress, const std::string& tag) {
  Result res;
  res.label = v.label;
  res.mode = v.options.mode;
  const double t_setup0 = MPI_Wtime();
  std::shared_ptr<RigEngine> engine;
  if (uses_rig_engine(v.options.mode)) {
    const std::uint64_t calls_before = bench::mpi_collective_calls();
    engine = std::make_shared<RigEngine>(MPI_COMM_WORLD, v.options.engine);
    const double opened = MPI_Wtime() - t_setup0;
    res.open_collectives = static_cast<double>(bench::mpi_collective_calls() - calls_before);
    res.setup_collectives = res.open_collectives;
    res.engine_times.push_back(allreduce(opened, MPI_MAX));
    print_engine_config_once(*engine, w.rank);
  }
  const std::uint64_t construct_calls_before = bench::mpi_collective_calls();
  DistKernel kern(*w.a, w.kernel, w.k, v.options, engine);
  res.setup_collectives +=
      static_cast<double>(bench::mpi_collective_calls() - construct_calls_before);
  res.construct_times.push_back(allreduce(MPI_Wtime() - t_setup0, MPI_MAX));
  // --fixed-row: netsparse-fixed runs A's own pattern in a changing run.
  const bool changing = o.changing && v.label != kFixedRowLabel;
  // Its SDDMM output follows A's nonzeros, not the last sampled pattern's.
  if (o.changing && !changing) w.clear_out(out_size(w, w.a->local()));
  // auto: the trials run now, as part of the setup: the timed iterations below are its steady
  // state. On A's pattern; with --changing-sparsity (dynamic patterns) each trial run on a
  // pattern of its own set just before it, as the timed iterations and a GNN's epochs do, so
  // that a candidate's per-pattern setup counts in its trial times.
  if (v.options.mode == CommMode::automatic) {
    std::size_t trial = 0;
    while (!kern.auto_tuning().tuned) {
      progress.show(tag + " " + v.label + ": trial run " +
                    std::to_string(kern.auto_tuning().trial_runs + 1));
      MPI_Barrier(MPI_COMM_WORLD);
      if (changing && v.options.dynamic_pattern && !w.patterns.empty()) {
        const CsrMatrix& p = w.patterns[trial++ % w.patterns.size()];
        w.clear_out(out_size(w, p));
        kern.set_pattern(p);
      }
      run_once(kern, w);
    }
    res.auto_tuning_times.push_back(allreduce(MPI_Wtime() - t_setup0, MPI_MAX));
    const std::string& knobs = kern.auto_tuning().chosen_knobs;
    res.auto_chosen.emplace_back(std::string(to_string(kern.chosen_mode())) +
                                 (knobs.empty() ? "" : " (" + knobs + ")"));
    res.auto_json.push_back(kern.auto_tuning_json());
  }
  // task-packets choosing its owner pairs' ways by measurement (NETSPARSE_TASK_PACKETS=measure):
  // its trials run now too, so the timed iterations are its steady state (the setup column
  // includes them).
  if (v.options.mode == CommMode::task_packets && !changing &&
      (v.options.tune_owners ||
       netsparse::config::choice(netsparse::config::Env::kTaskPackets) == "measure")) {
    int trial = 0;
    do {
      progress.show(tag + " " + v.label + ": owner-way trial run " + std::to_string(++trial));
      MPI_Barrier(MPI_COMM_WORLD);
      run_once(kern, w);
    } while (kern.last_run_stats().owner_trial_runs > 0);
  }
  if (!changing) {
    res.setup_times.push_back(allreduce(MPI_Wtime() - t_setup0, MPI_MAX));
    res.plan_times.push_back(allreduce(kern.plan_seconds(), MPI_MAX));
  }
  // --autotune-tiles: what rank 0's search chose, once per mode and K (its time is in the setup).
  static std::set<std::string> tiles_reported;
  if (const TileTuning& tt = kern.tile_tuning();
      tt.tuned && w.rank == 0 &&
      tiles_reported.insert(tag.substr(0, tag.find(" round ")) + " " + v.label).second) {
    progress.clear();
    std::printf(
        "   %s: tiles autotuned on rank 0: row panel %d, column panels %s, %s; %s, "
        "base %.3f ms -> best %.3f ms (%d candidates)\n",
        v.label.c_str(), tt.local.row_panel,
        tt.local.col_panel > 0 ? std::to_string(tt.local.col_panel).c_str() : "all",
        tt.local.barriers ? "barriers" : "no barriers",
        tt.from_cache ? "the cached choice"
                      : ("search " + std::to_string(tt.search_seconds) + " s").c_str(),
        1e3 * tt.base_seconds, 1e3 * tt.best_seconds, tt.candidates_timed);
    std::fflush(stdout);
  }
  if (v.options.mode == CommMode::ideal) w.with_blocks([&](auto& blk) { kern.replicate(blk.b); });

  std::uint64_t run_collectives = 0;  // during the kernel's runs (reset with the statistics)
  const auto iteration = [&](const CsrMatrix* pattern) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    double setup = 0, shared = 0;
    if (pattern != nullptr) {
      kern.set_pattern(*pattern);
      setup = MPI_Wtime() - t0;
      shared = setup - kern.plan_seconds();
    }
    const std::uint64_t calls_before = bench::mpi_collective_calls();
    run_once(kern, w);
    const double t = MPI_Wtime() - t0;
    run_collectives += bench::mpi_collective_calls() - calls_before;
    struct Times {
      double t, setup, plan, own;
    };
    return Times{allreduce(t, MPI_MAX), allreduce(setup, MPI_MAX),
                 allreduce(setup - shared, MPI_MAX), allreduce(t - shared, MPI_MAX)};
  };
  for (int i = 0; i < o.warmup; ++i) {
    progress.show(tag + " " + v.label + ": warm-up " + std::to_string(i + 1));
    const CsrMatrix* p = changing ? &w.warm_patterns[i] : nullptr;
    if (p != nullptr) w.clear_out(out_size(w, *p));
    const auto times = iteration(p);
    if (i == 0) res.first_times.push_back(times.t);
  }
  kern.reset_stats();
  if (engine) engine->reset_stats();
  run_collectives = 0;
  // --min-time: every rank sums the same slowest-rank times, so all stop after the same
  // iteration without a further collective.
  const int most = timed_iterations_cap(o);
  double timed_seconds = 0;
  int timed = 0;
  const bool may_stop_early = o.max_time > 0 && !o.changing;
  for (int i = 0; i < most && (i < o.iters || timed_seconds < o.min_time); ++i) {
    if (i > 0 && may_stop_early && timed_seconds >= o.max_time) break;
    progress.show(tag + " " + v.label + ": iteration " + std::to_string(i + 1) + "/" +
                  std::to_string(i < o.iters ? o.iters : most));
    const CsrMatrix* p = changing ? &w.patterns[i] : nullptr;
    if (p != nullptr) w.clear_out(out_size(w, *p));
    const auto times = iteration(p);
    timed_seconds += times.t;
    ++timed;
    if (i == 0 && o.warmup == 0) res.first_times.push_back(times.t);
    res.times.push_back(times.t);
    if (changing) {
      res.setup_times.push_back(times.setup);
      res.plan_times.push_back(times.plan);
      res.own_times.push_back(times.own);
    }
  }
  // Result check against ideal (the last iteration's pattern is the same for every mode).
  if (ref != nullptr && !changing && o.changing) {
    res.err = NAN;  // netsparse-fixed computed A, ideal the last sampled pattern: not compared
  } else if (ref != nullptr) {
    double scale = 0, err = 0;
    for (double r : *ref) scale = std::max(scale, std::abs(r));
    const std::vector<double> out = w.out_as_double();
    const bool same_size = ref->size() == out.size();
    for (std::size_t i = 0; same_size && i < ref->size(); ++i) {
      const double d = std::abs(out[i] - (*ref)[i]);
      err = std::isnan(d) ? INFINITY : std::max(err, d);
    }
    if (!same_size) err = INFINITY;
    scale = allreduce(scale, MPI_MAX);
    err = allreduce(err, MPI_MAX);
    res.err = scale > 0 ? err / scale : err;
    res.correct = res.err <= o.tolerance;
  }
  const CommStats& s = kern.total_stats();
  res.round_iterations = {timed};
  const double iters = timed;
  const double bytes = static_cast<double>(s.bytes_sent) / iters;
  res.bytes_total = allreduce(bytes, MPI_SUM);
  res.bytes_tail = allreduce(bytes, MPI_MAX);
  res.requests_total = allreduce(static_cast<double>(s.requests) / iters, MPI_SUM);
  res.messages_total = allreduce(static_cast<double>(s.messages_sent) / iters, MPI_SUM);
  res.messages_tail = allreduce(static_cast<double>(s.messages_sent) / iters, MPI_MAX);
  res.collectives_per_run = allreduce(static_cast<double>(run_collectives) / iters, MPI_MAX);
  const double rss = resident_mib();
  res.rss_max_mib = allreduce(rss, MPI_MAX);
  res.rss_mean_mib = allreduce(rss, MPI_SUM) / allreduce(1.0, MPI_SUM);
  res.inter_bytes_total = allreduce(static_cast<double>(s.inter_host_bytes) / iters, MPI_SUM);
  res.inter_payload_total =
      allreduce(static_cast<double>(s.inter_host_payload_bytes) / iters, MPI_SUM);
  res.inter_messages_total = allreduce(static_cast<double>(s.inter_host_messages) / iters, MPI_SUM);
  res.intra_bytes_total = allreduce(static_cast<double>(s.intra_host_bytes) / iters, MPI_SUM);
  res.host_lookups_total = allreduce(static_cast<double>(s.host_filter_lookups) / iters, MPI_SUM);
  res.host_landed_total = allreduce(static_cast<double>(s.host_rows_landed) / iters, MPI_SUM);
  res.task_owners_total = allreduce(static_cast<double>(s.task_owners) / iters, MPI_SUM);
  res.row_owners_total = allreduce(static_cast<double>(s.row_owners) / iters, MPI_SUM);
  res.block_owners_total = allreduce(static_cast<double>(s.block_owners) / iters, MPI_SUM);
  res.switch_lookups_total = allreduce(static_cast<double>(s.switch_lookups) / iters, MPI_SUM);
  res.switch_hits_total = allreduce(static_cast<double>(s.switch_hits) / iters, MPI_SUM);
  res.inter_rack_bytes_total = allreduce(static_cast<double>(s.inter_rack_bytes) / iters, MPI_SUM);
  res.inter_rack_messages_total =
      allreduce(static_cast<double>(s.inter_rack_messages) / iters, MPI_SUM);
  if (counts_host_traffic(kern.mode())) res.per_host = per_host_totals(s, iters);
  res.wait_tail = allreduce(s.wait_seconds / iters, MPI_MAX);
  res.sync_tail = allreduce(s.sync_seconds / iters, MPI_MAX);
  res.compute_tail = allreduce(s.compute_seconds / iters, MPI_MAX);
  res.post_tail = allreduce(s.post_seconds / iters, MPI_MAX);
  res.progress_tail = allreduce(s.progress_seconds / iters, MPI_MAX);
  if (engine) {
    const double requested = allreduce(double(engine->stat(NS_STAT_PRS_REQUESTED)), MPI_SUM);
    const double dropped = allreduce(
        double(engine->stat(NS_STAT_PRS_FILTERED) + engine->stat(NS_STAT_PRS_COALESCED)), MPI_SUM);
    res.engine_fc = requested > 0 ? dropped / requested : 0;
    res.engine_prs_per_packet = allreduce(engine->prs_per_packet(), MPI_MAX);
    if (w.rank == 0) res.engine_json = engine->stats_json();
  }
  return res;
}

// The petsc and tpetra modes: PETSc's MatMult / MatMatMult or Tpetra's CrsMatrix::apply on the
// same matrix and operands, fp64 (Debian's Tpetra is instantiated for double only).
bool is_external_baseline(const std::string& label) {
  return label == "petsc" || label == "tpetra";
}

Result measure_baseline(const Variant& v, Workload& w, const Options& o,
                        const std::vector<double>& ref) {
  if (o.dist.scalar != ScalarType::f64) {
    throw std::invalid_argument(
        "the " + v.label + " mode computes in double only (" +
        (v.label == "tpetra" ? "Tpetra is instantiated for double" : "PETSc's scalar is double") +
        "): run it with --dtype f64");
  }
  if (o.changing) {
    throw std::invalid_argument("the " + v.label +
                                " mode multiplies by a fixed matrix: not with --changing-sparsity");
  }
  Result res;
  res.label = v.label;
  res.mode = v.options.mode;
  bench::BaselineRun run;
  // Each runner is named only when built with its library (no definition otherwise).
  if (v.label == "petsc") {
    if constexpr (bench::kPetscMode) {
      run = bench::run_petsc(*w.a, w.kernel, w.k, w.f64.b, o.warmup, o.iters);
    }
  } else {
    if constexpr (bench::kTpetraMode) {
      run = bench::run_tpetra(*w.a, w.kernel, w.k, w.f64.b, o.warmup, o.iters);
    }
  }
  res.times = run.times;
  res.round_iterations = {static_cast<int>(run.times.size())};
  res.setup_times = res.plan_times = {run.setup_seconds};
  const double bytes = run.ghost_bytes + 50 * run.ghost_messages;  // as inspector-executor's
  res.bytes_total = allreduce(bytes, MPI_SUM);
  res.bytes_tail = allreduce(bytes, MPI_MAX);
  res.messages_total = allreduce(run.ghost_messages, MPI_SUM);
  double err = ref.size() == run.out.size() ? 0 : INFINITY, scale = 0;
  for (std::size_t i = 0; i < ref.size() && i < run.out.size(); ++i) {
    err = std::max(err, std::abs(run.out[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  err = allreduce(err, MPI_MAX);
  scale = allreduce(scale, MPI_MAX);
  res.err = scale > 0 ? err / scale : err;
  res.correct = res.err <= o.tolerance;
  return res;
}

// ---- output ----------------------------------------------------------------------------------

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// v in the largest of the decimal units (powers of 1000, up to the fifth) that keeps it >= 1.
std::string with_decimal_unit(double v, const std::array<const char*, 5>& units) {
  std::size_t u = 0;
  while (v >= 1000 && u + 1 < units.size()) {
    v /= 1000;
    ++u;
  }
  return fmt(u == 0 ? "%.0f" : "%.1f", v) + units[u];
}

std::string human_bytes(double b) {
  return with_decimal_unit(b, {"B", "KB", "MB", "GB", "TB"});
}

std::string human_count(double n) {
  return with_decimal_unit(n, {"", "K", "M", "G", "T"});
}

struct Derived {
  double t = 0, setup = 0, plan = 0, own = 0, vs_su = 0, of_ideal = 0, fc = -1, prs_per_packet = -1,
         goodput = 0, util = 0, traffic_vs_su = 0, prs_vs_sa = 0;
  // The spread of the pooled per-iteration times: the bootstrap 95 % interval of their median
  // (t) and their quartiles.
  bench::Interval t_ci, t_iqr;
};

bool request_based(CommMode m) {
  return m == CommMode::netsparse || m == CommMode::netsparse_rank || m == CommMode::sa_vanilla ||
         m == CommMode::sa_conveyors || m == CommMode::sa_opt;
}

bool is_ablation(const std::string& label) {
  return label == kNoPlanLabel || label == kFixedRowLabel ||
         std::find(ablation_labels().begin(), ablation_labels().end(), label) !=
             ablation_labels().end();
}

// Time to solution: setup + the first run + (n - 1) runs at the median (fixed pattern; with
// --changing-sparsity every iteration already includes its pattern's setup: the one-time
// construction (engine open, kernel) + n runs at the median).
double time_to_solution(const Result& r, int n, bool changing) {
  const double t = median(r.times);
  if (changing) return (r.construct_times.empty() ? 0.0 : median(r.construct_times)) + n * t;
  const double first = r.first_times.empty() ? t : median(r.first_times);
  return median(r.setup_times) + first + (n - 1) * t;
}
constexpr int kSolutionRuns[] = {1, 10, 100};

// time_to_solution's inputs as sample groups, for the bootstrap: {the one-off part (setup, or
// with --changing-sparsity the construction), the first run (the timed iterations when none was
// kept apart), the per-iteration times}.
bench::SampleGroups solution_samples(const Result& r, bool changing) {
  std::vector<double> once = changing ? r.construct_times : r.setup_times;
  if (once.empty()) once = {0.0};
  return {once, changing || r.first_times.empty() ? r.times : r.first_times, r.times};
}

// time_to_solution over groups [at, at + 3) of solution_samples' layout.
double solution_of(const bench::SampleGroups& g, std::size_t at, int n, bool changing) {
  const double t = bench::quantile(g[at + 2], 0.5);
  if (changing) return bench::quantile(g[at], 0.5) + n * t;
  return bench::quantile(g[at], 0.5) + bench::quantile(g[at + 1], 0.5) + (n - 1) * t;
}

// A's time to solution after n runs against B's, bootstrapped over every part's samples (the
// one-off parts have one sample per round): a verdict needs kMinIterations timed iterations and
// kMinOnceSamples rounds on each side.
bench::RatioVerdict compare_solution(const Result& a, const Result& b, int n, bool changing) {
  bench::SampleGroups g = solution_samples(a, changing);
  for (auto& part : solution_samples(b, changing)) g.push_back(std::move(part));
  const auto enough = [&](const Result& r) {
    const auto& once = changing ? r.construct_times : r.setup_times;
    return r.times.size() >= bench::kMinIterations && once.size() >= bench::kMinOnceSamples;
  };
  return bench::compare_ratio(
      g,
      [n, changing](const bench::SampleGroups& s) {
        return solution_of(s, 0, n, changing) / solution_of(s, 3, n, changing);
      },
      enough(a) && enough(b));
}

// One verdict of the run, for the JSON's "verdicts".
bench::Json verdict_json(KernelKind kernel, int k, const std::string& what, const Result& a,
                         const Result& b, const bench::RatioVerdict& v) {
  bench::Json j;
  j["kernel"] = to_string(kernel);
  j["K"] = k;
  j["what"] = what;
  j["mode"] = a.label;
  j["against"] = b.label;
  j["ratio"] = v.ratio;
  j["ratio_ci95"] = {v.ci.lo, v.ci.hi};
  j["verdict"] = bench::to_string(v.verdict);
  j["noise_pct"] = v.verdict == bench::Verdict::within_noise ? bench::noise_percent(v) : 0.0;
  j["samples"] = {a.times.size(), b.times.size()};
  return j;
}

// The time-to-solution table: when a mode's setup pays off, and when it never does.
void print_time_to_solution(const std::vector<Result>& results, const Options& o) {
  std::printf("   time to solution (setup + first run + (n-1) x time/it%s):\n",
              o.changing ? "; changing sparsity: construction + n x time/it" : "");
  std::printf("   %-20s %10s %12s %10s %10s %10s %10s\n", "mode",
              o.changing ? "construct" : "setup", "engine open", "first run", "n = 1", "n = 10",
              "n = 100");
  for (const Result& r : results) {
    if (!r.error.empty() || r.mode == CommMode::ideal) continue;
    const double first = r.first_times.empty() ? median(r.times) : median(r.first_times);
    const double once = o.changing ? (r.construct_times.empty() ? 0.0 : median(r.construct_times))
                                   : median(r.setup_times);
    std::printf("   %-20s %8.3fms %12s %8.3fms", r.label.c_str(), once * 1e3,
                r.engine_times.empty() ? "-" : fmt("%.3fms", median(r.engine_times) * 1e3).c_str(),
                first * 1e3);
    for (int n : kSolutionRuns) std::printf(" %8.2fms", time_to_solution(r, n, o.changing) * 1e3);
    std::printf("\n");
  }
}

Derived derive(const Result& r, const std::map<std::string, const Result*>& by_label,
               const Volume& vol, double line_rate) {
  Derived d;
  d.t = median(r.times);
  d.t_ci = bench::median_interval(r.times);
  d.t_iqr = {bench::quantile(r.times, 0.25), bench::quantile(r.times, 0.75)};
  d.setup = median(r.setup_times);
  d.plan = median(r.plan_times);
  d.own = median(r.own_times);
  const auto time_of = [&](const char* label) {
    const auto it = by_label.find(label);
    return it == by_label.end() ? 0.0 : median(it->second->times);
  };
  if (const double su = time_of("su"); su > 0 && d.t > 0) d.vs_su = su / d.t;
  if (const double ideal = time_of("ideal"); ideal > 0 && d.t > 0) d.of_ideal = ideal / d.t;
  if (request_based(r.mode) && vol.remote_nnz_total > 0) {
    d.fc = 1.0 - r.requests_total / vol.remote_nnz_total;
    if (r.messages_total > 0) d.prs_per_packet = 2.0 * r.requests_total / r.messages_total;
  }
  if (r.mode != CommMode::ideal && line_rate > 0 && d.t > 0) {
    d.goodput = vol.min_property_tail / d.t / line_rate;
    d.util = r.bytes_tail / d.t / line_rate;
  }
  if (const auto su = by_label.find("su"); su != by_label.end() && r.bytes_total > 0) {
    d.traffic_vs_su = su->second->bytes_total / r.bytes_total;
  }
  if (request_based(r.mode) && r.requests_total > 0)
    d.prs_vs_sa = vol.remote_nnz_total / r.requests_total;
  return d;
}

// How `value` compares with `reference`, always as a factor >= 1: "2.70x more" / "2.70x less"
// (with the words given), "same" within 0.5 %.
std::string compare(double value, double reference, const char* more, const char* less) {
  const double r = value / reference;
  if (std::abs(r - 1) < 0.005) return "same";
  const double f = r > 1 ? r : 1 / r;
  return fmt(f < 10 ? "%.2fx " : "%.1fx ", f) + (r > 1 ? more : less);
}

// compare()'s words before a comparison's object: "1.10x slower than", or "as fast as".
std::string than(const std::string& compared, const char* same = "as fast as") {
  return compared == "same" ? same : compared + " than";
}

// The "bytes vs su" column: this mode's bytes against su's, never a factor below 1.
std::string bytes_vs_su(const Result& r, const Result* su) {
  if (r.mode == CommMode::ideal || su == nullptr || !su->error.empty()) return "-";
  if (r.bytes_total <= 0) return su->bytes_total > 0 ? "none" : "-";
  if (su->bytes_total <= 0) return "-";
  return compare(r.bytes_total, su->bytes_total, "more", "less");
}

// Speedups and fractions: two decimals, three below 0.1 (a 0.004x speedup is not "0.00x").
std::string factor(double v) {
  return fmt(v > 0 && v < 0.1 ? "%.3fx" : "%.2fx", v);
}

// The "95% CI" column: the bootstrap interval of the median time per iteration, relative to it
// ("-1.2/+3.4%"); "-" for a single iteration.
std::string ci_column(const Derived& d) {
  if (d.t <= 0 || d.t_ci.hi <= d.t_ci.lo) return "-";
  return fmt("-%.1f", 100 * (1 - d.t_ci.lo / d.t)) + fmt("/+%.1f%%", 100 * (d.t_ci.hi / d.t - 1));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// auto's line under the table: what it chose (each round tunes its own kernel), its steady time
// against the best fixed mode of the table, its tuning cost, and the times it compared.
void print_auto_line(const Result& r, const std::vector<Result>& results) {
  std::map<std::string, int> chosen;
  for (const std::string& c : r.auto_chosen) ++chosen[c];
  std::string choices;
  for (const auto& [mode, n] : chosen) {
    choices += (choices.empty() ? "" : ", ") + mode + " in " + std::to_string(n) + "/" +
               std::to_string(r.auto_chosen.size()) + " rounds";
  }
  const Result* best = nullptr;
  for (const Result& o : results) {
    if (!o.error.empty() || o.times.empty() || o.mode == CommMode::ideal ||
        o.mode == CommMode::automatic || is_ablation(o.label) || o.label == "petsc") {
      continue;
    }
    if (best == nullptr || median(o.times) < median(best->times)) best = &o;
  }
  const double t = r.times.empty() ? 0.0 : median(r.times);
  std::printf("   auto: chose %s; steady %.3f ms/it", choices.c_str(), t * 1e3);
  if (best != nullptr) {
    std::printf(" = %.3fx the best fixed mode (%s %.3f ms/it)", t / median(best->times),
                best->label.c_str(), median(best->times) * 1e3);
  }
  std::printf(
      "; tuning cost %.1f ms (median over rounds: construction, candidates' setups and "
      "trial runs until the choice)\n",
      median(r.auto_tuning_times) * 1e3);
  if (!r.auto_json.empty()) {
    const bench::Json j = bench::parse_json(r.auto_json.front(), "DistKernel::auto_tuning_json");
    std::string compared;
    for (const bench::Json& c : j["candidates"]) {
      const std::string knobs = c.value("knobs", "");
      compared += (compared.empty() ? "" : ", ") + c["mode"].get<std::string>() +
                  (knobs.empty() ? "" : " (" + knobs + ")") + " " +
                  (c["skipped"].get<bool>() ? std::string("skipped")
                                            : fmt("%.3f ms", c["seconds"].get<double>() * 1e3));
    }
    std::printf("         round 1 compared (median of %d timed runs, max over ranks): %s\n",
                j["tune_runs"].get<int>(), compared.c_str());
  }
}

void print_table(const std::string& title, KernelKind kernel, int k,
                 const std::vector<Result>& results, const Volume& vol, double line_rate,
                 const Options& o, bench::Json& verdicts) {
  std::map<std::string, const Result*> by_label;
  for (const Result& r : results) by_label[r.label] = &r;
  const Result* su = by_label.count("su") ? by_label.at("su") : nullptr;
  const bool empty = vol.nnz_total <= 0;
  const bool nothing_remote = vol.remote_nnz_total <= 0;
  std::printf("\n== %s\n", title.c_str());
  if (empty) {
    std::printf(
        "   the matrix has no nonzeros: nothing to compute or fetch; the times below are fixed "
        "overheads, so no ratios are given\n");
  } else if (nothing_remote) {
    std::printf(
        "   no remote nonzeros (every rank's nonzeros lie in its own columns): nothing to fetch; "
        "the modes differ only in their overheads\n");
  } else {
    std::printf("   remote nonzeros %s, distinct remote properties %s (tail rank %s)\n",
                human_count(vol.remote_nnz_total).c_str(), human_count(vol.unique_total).c_str(),
                human_count(vol.unique_tail).c_str());
    std::printf(
        "   minimum traffic: payload %s (tail %s) = each distinct remote property once; no mode "
        "moves less\n",
        human_bytes(vol.min_property_total).c_str(), human_bytes(vol.min_property_tail).c_str());
    std::printf(
        "                    RIG wire %s (tail %s) = that payload requested and answered in full "
        "%u B packets with NetSparse's headers\n",
        human_bytes(vol.min_wire_total).c_str(), human_bytes(vol.min_wire_tail).c_str(),
        vol.packet_bytes);
    if (vol.hosts.hosts > 1) {
      std::printf(
          "   between hosts (%d hosts%s, %d rack%s): node-wide minimum payload %s = each remote "
          "row into a host once; per-rank %s = each rank's own (%.2fx)\n",
          vol.hosts.hosts, vol.hosts.virtual_hosts ? ", virtual" : "", vol.hosts.racks,
          vol.hosts.racks == 1 ? "" : "s", human_bytes(vol.host_min_payload).c_str(),
          human_bytes(vol.rank_host_payload).c_str(),
          vol.rank_host_payload > 0 ? vol.host_min_payload / vol.rank_host_payload : 0.0);
    }
  }
  std::printf("%-20s %10s %12s %10s %7s %8s %9s %6s %7s %8s %7s %11s %9s %10s\n", "mode", "time/it",
              "95% CI", o.changing ? "setup/it" : "setup", "vs su", "of ideal", "err", "F+C",
              "PR/pkt", "goodput", "util", "bytes vs su", "PRs vs SA", "bytes/it");
  std::vector<std::string> beat_ideal, below_wire, below_payload;
  for (const Result& r : results) {
    if (!r.error.empty()) {
      std::printf("%-20s FAILED: %s\n", r.label.c_str(), r.error.c_str());
      continue;
    }
    const Derived d = derive(r, by_label, vol, line_rate);
    const auto opt = [](double v, const char* f) { return v < 0 ? std::string("-") : fmt(f, v); };
    std::printf("%-20s %8.3fms %12s %8.3fms %7s %8s %9s %6s %7s %7.1f%% %6.1f%% %11s %9s %10s%s\n",
                r.label.c_str(), d.t * 1e3, ci_column(d).c_str(), d.setup * 1e3,
                empty || d.vs_su <= 0 ? "-" : factor(d.vs_su).c_str(),
                empty || d.of_ideal <= 0 ? "-" : fmt("%.1f%%", 100 * d.of_ideal).c_str(),
                std::isnan(r.err) ? "-" : fmt("%.1e", r.err).c_str(),
                opt(d.fc * 100, "%.0f%%").c_str(), opt(d.prs_per_packet, "%.1f").c_str(),
                100 * d.goodput, 100 * d.util, empty ? "-" : bytes_vs_su(r, su).c_str(),
                d.prs_vs_sa > 0 ? fmt("%.1fx", d.prs_vs_sa).c_str() : "-",
                human_bytes(r.bytes_total).c_str(), r.correct ? "" : "   *** WRONG RESULT ***");
    if (r.mode == CommMode::ideal) continue;
    if (d.of_ideal > 1) beat_ideal.push_back(r.label + " " + fmt("%.0f%%", 100 * d.of_ideal));
    if (nothing_remote) continue;
    // netsparse-node's minimum is the node-wide one (each remote row into a host once).
    const bool node_wide = r.mode == CommMode::netsparse_node;
    if (r.bytes_total < (node_wide ? vol.host_min_payload : vol.min_property_total)) {
      below_payload.push_back(r.label);
    } else if (!node_wide && r.bytes_total < vol.min_wire_total) {
      below_wire.push_back(r.label);
    }
  }
  for (const Result& r : results) {
    if (r.mode == CommMode::automatic && r.error.empty()) print_auto_line(r, results);
  }
  if (empty) return;
  // Between hosts: the modes that count host-level traffic (inspector-executor, node-aware-ie).
  if (vol.hosts.hosts > 1 && !nothing_remote) {
    for (const Result& r : results) {
      if (!r.error.empty() || (r.inter_bytes_total <= 0 && r.intra_bytes_total <= 0)) continue;
      std::printf(
          "   between hosts: %-18s payload %s = %.2fx the node-wide minimum, wire %s in %.0f "
          "messages; within hosts %s%s\n",
          r.label.c_str(), human_bytes(r.inter_payload_total).c_str(),
          vol.host_min_payload > 0 ? r.inter_payload_total / vol.host_min_payload : 0.0,
          human_bytes(r.inter_bytes_total).c_str(), r.inter_messages_total,
          human_bytes(r.intra_bytes_total).c_str(),
          r.host_lookups_total > 0 ? fmt("; node-wide F+C %.1f%%",
                                         100 * (1 - r.host_landed_total / r.host_lookups_total))
                                         .c_str()
                                   : "");
      if (r.switch_lookups_total > 0) {
        std::printf(
            "   rack switch:   %-18s cache hit rate %.1f%% (%.0f of %.0f reads), between racks "
            "%s in %.0f messages\n",
            r.label.c_str(), 100 * r.switch_hits_total / r.switch_lookups_total,
            r.switch_hits_total, r.switch_lookups_total,
            human_bytes(r.inter_rack_bytes_total).c_str(), r.inter_rack_messages_total);
      }
    }
  }
  for (const Result& r : results) {
    if (!r.error.empty() || r.mode != CommMode::task_packets) continue;
    std::printf(
        "   %s: (rank, owner) pairs sending task packets %.0f, fetching rows %.0f, fetching whole "
        "blocks %.0f; %.0f messages, %s per iteration (all ranks)\n",
        r.label.c_str(), r.task_owners_total, r.row_owners_total, r.block_owners_total,
        r.messages_total, human_bytes(r.bytes_total).c_str());
  }
  if (!below_wire.empty()) {
    std::printf(
        "   note: %s moved less than the RIG wire minimum but not less than the payload: counted "
        "as MPI payload + 50 B per message, without NetSparse's packet and per-property headers\n",
        join(below_wire).c_str());
  }
  if (!below_payload.empty()) {
    std::printf("   note: %s moved less than the payload minimum: %s\n",
                join(below_payload).c_str(),
                o.changing ? "with --changing-sparsity the minimums are those of the last "
                             "iteration's pattern, the bytes an average over every iteration's"
                           : "the byte counts of these modes are incomplete");
  }
  if (!beat_ideal.empty()) {
    const std::string advice =
        o.rounds == 1 ? "rerun with --rounds 3 (or more) to pool every mode's iterations over "
                        "rounds run one after another"
                      : "even pooled over " + std::to_string(o.rounds) +
                            " rounds; try more --rounds or --iters. If it persists, the mode's "
                            "local compute beats ideal's on its replicated operand";
    std::printf(
        "   warning: %s of ideal: faster than ideal (no communication), so ideal is no bound "
        "here. Most often timing noise (the machine's load drifting between modes): %s\n",
        join(beat_ideal).c_str(), advice.c_str());
  }
  print_time_to_solution(results, o);
  // The goals of the benchmark, for the netsparse mode.
  const auto ns = by_label.find("netsparse");
  if (ns == by_label.end() || !ns->second->error.empty()) return;
  const Result& n = *ns->second;
  const double t_ns = median(n.times);
  if (!nothing_remote && n.mode == CommMode::netsparse_node) {
    // The node-wide engine's bar is the node-wide minimum: each remote row into a host once.
    std::printf(
        "   netsparse (node-wide engine): payload between hosts %s = %.2fx the node-wide minimum\n",
        human_bytes(n.inter_payload_total).c_str(),
        vol.host_min_payload > 0 ? n.inter_payload_total / vol.host_min_payload : 0.0);
  } else if (!nothing_remote) {
    std::printf(
        "   netsparse: traffic %s = %.2fx the RIG wire minimum, %.2fx the payload%s\n",
        human_bytes(n.bytes_total).c_str(), n.bytes_total / vol.min_wire_total,
        n.bytes_total / vol.min_property_total,
        su != nullptr && su->error.empty() && n.bytes_total > 0 && su->bytes_total > 0
            ? ("; " + than(compare(n.bytes_total, su->bytes_total, "more", "less"), "as much as") +
               " su")
                  .c_str()
            : "");
    if (by_label.count("ideal") && line_rate > 0) {
      const double ideal = median(by_label.at("ideal")->times);
      const double wire = vol.min_wire_tail / line_rate;
      std::printf(
          "   netsparse: %.3f ms = %.2fx max(ideal %.3f ms, the tail rank's RIG wire minimum / "
          "line rate %.3f ms)\n",
          t_ns * 1e3, t_ns / std::max(ideal, wire), ideal * 1e3, wire * 1e3);
    }
  }
  double best_other = 0;
  std::string best_label;
  const Result* best = nullptr;
  bool unresolved = false;  // a verdict lacked samples: say how many it needs, once
  for (const Result& r : results) {
    // Baselines only: our own engines' other rows (netsparse-rank, -node, -noplan) are no bar,
    // nor is auto (it runs one of the rows).
    if (r.label.rfind("netsparse", 0) == 0 || r.mode == CommMode::ideal || !r.error.empty() ||
        r.mode == CommMode::automatic) {
      continue;
    }
    if (is_ablation(r.label)) continue;
    const double t = median(r.times);
    if (best_label.empty() || t < best_other) {
      best_other = t;
      best_label = r.label;
      best = &r;
    }
  }
  // The verdicts: "faster" / "slower" only when the 95 % interval of the ratio of the two
  // modes' times lies wholly below / above 1 (bench/common/uncertainty.hpp; docs/benchmarks.md).
  if (best != nullptr && t_ns > 0 && best_other > 0) {
    const bench::RatioVerdict v = bench::compare_medians(n.times, best->times);
    unresolved = unresolved || v.verdict == bench::Verdict::too_few_samples;
    // Within noise: the ratio and its interval too (faster / slower carry the interval).
    const std::string ratio =
        v.verdict != bench::Verdict::within_noise
            ? ""
            : fmt("; ratio %.3f", v.ratio) + fmt(", 95%% CI %.3f", v.ci.lo) + fmt("-%.3f", v.ci.hi);
    std::printf("   netsparse is %s the best other mode (%s: %.3f ms, netsparse %.3f ms%s)\n",
                bench::describe(v).c_str(), best_label.c_str(), best_other * 1e3, t_ns * 1e3,
                ratio.c_str());
    verdicts.push_back(verdict_json(kernel, k, "time_per_iteration", n, *best, v));
  }
  if (const auto ie = by_label.find("inspector-executor");
      ie != by_label.end() && ie->second->error.empty()) {
    std::string line;
    for (int runs : kSolutionRuns) {
      const bench::RatioVerdict v = compare_solution(n, *ie->second, runs, o.changing);
      unresolved = unresolved || v.verdict == bench::Verdict::too_few_samples;
      line += (line.empty() ? "" : ", ") + std::string("n = ") + std::to_string(runs) + ": " +
              bench::describe_short(v);
      verdicts.push_back(
          verdict_json(kernel, k, "time_to_solution_" + std::to_string(runs), n, *ie->second, v));
    }
    std::printf("   time to solution, netsparse against inspector-executor: %s\n", line.c_str());
  }
  if (o.changing && by_label.count("inspector-executor") &&
      by_label.at("inspector-executor")->error.empty() && t_ns > 0) {
    const Result& ie = *by_label.at("inspector-executor");
    const bench::RatioVerdict incl = bench::compare_medians(n.times, ie.times);
    const bench::RatioVerdict own = bench::compare_medians(n.own_times, ie.own_times);
    unresolved = unresolved || incl.verdict == bench::Verdict::too_few_samples ||
                 own.verdict == bench::Verdict::too_few_samples;
    std::printf(
        "   changing sparsity: netsparse is %s inspector-executor incl. its setup; %s "
        "without the re-tiling every mode shares (plan + run only)\n",
        bench::describe(incl).c_str(),
        median(n.own_times) > 0 && median(ie.own_times) > 0 ? bench::describe_short(own).c_str()
                                                            : "-");
    verdicts.push_back(verdict_json(kernel, k, "changing_incl_setup", n, ie, incl));
  }
  if (o.changing && by_label.count(kFixedRowLabel) && by_label.at(kFixedRowLabel)->error.empty() &&
      t_ns > 0) {
    const Result& fixed = *by_label.at(kFixedRowLabel);
    const bench::RatioVerdict v = bench::compare_medians(n.times, fixed.times);
    unresolved = unresolved || v.verdict == bench::Verdict::too_few_samples;
    std::printf(
        "   changing sparsity: netsparse on the sampled patterns is %.2fx its own time on A's "
        "fixed pattern (netsparse-fixed; %s)\n",
        median(fixed.times) > 0 ? median(n.times) / median(fixed.times) : 0.0,
        bench::describe(v).c_str());
    verdicts.push_back(verdict_json(kernel, k, "changing_vs_fixed", n, fixed, v));
  }
  if (unresolved) {
    std::printf(
        "   note: a verdict needs %zu timed iterations per mode (--iters x --rounds) and, for time "
        "to solution, %zu rounds (one setup per round): 'not resolved' above\n",
        bench::kMinIterations, bench::kMinOnceSamples);
  }
}

// ---- errors every rank sees alike ----------------------------------------------------------

// Exit codes: 0 every mode agreed with ideal, 1 a mode disagreed or failed, 2 an error (input
// errors and an unwritable --json below; anything else through MPI_Abort).
constexpr int kExitError = 2;

// An error every rank meets at the same point (bad option, matrix file or specification, --json
// path): collective over MPI_COMM_WORLD. If any rank passes a non-empty error, the lowest such
// rank prints it as ONE line (a library message's further lines, such as the list of matrix
// specification forms, are left to --help) and every rank returns true, to finalize MPI and exit
// 2: no MPI_Abort, so no abort boilerplate and no rank killed mid-write.
bool agreed_error(int rank, const std::string& error) {
  int lowest = error.empty() ? INT_MAX : rank;
  MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (lowest == INT_MAX) return false;
  if (rank == lowest) {
    std::string line = error.substr(0, error.find('\n'));
    if (line.size() < error.size() && line.find("--help") == std::string::npos) {
      line += " (see --help)";
    }
    std::fprintf(stderr, "netsparse_bench: %s\n", line.c_str());
    std::fflush(stderr);
  }
  return true;
}

// Before MPI_Init: do this host's ranks (mpirun's OMPI_COMM_WORLD_LOCAL_SIZE) with their OpenMP
// threads (OMP_NUM_THREADS, else one per core share as main() sets) and progress threads
// outnumber the cores?
bool threads_outnumber_cores(bool thread_progress) {
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const char* local = netsparse::config::foreign("OMPI_COMM_WORLD_LOCAL_SIZE");
  const long ranks = local != nullptr ? std::max(1L, std::atol(local)) : 1;
  const char* omp = netsparse::config::foreign("OMP_NUM_THREADS");
  const long per_rank = omp != nullptr ? std::max(1L, std::atol(omp)) : std::max(1L, cores / ranks);
  return ranks * (per_rank + (thread_progress ? 1 : 0)) > cores;
}

// ---- the run ---------------------------------------------------------------------------------

// Before MPI_Init: when the ranks' threads (OpenMP, and progress threads if asked for) outnumber
// the cores, a rank waiting in MPI must give its core to the thread it waits for, or every wait
// costs a scheduler time slice: then Open MPI yields when idle. When they do not (the default:
// one OpenMP thread per core share, AUTO progress without a thread), a yield per idle poll only
// costs system calls. --spin / --yield force either. Every mode runs under the same setting.
void choose_mpi_yield(int argc, char** argv) {
  bool spin = false, yield = false, thread_progress = false;
  for (int i = 1; i < argc; ++i) {
    spin = spin || std::strcmp(argv[i], "--spin") == 0;
    yield = yield || std::strcmp(argv[i], "--yield") == 0;
    if (std::strcmp(argv[i], "--progress") == 0 && i + 1 < argc) {
      thread_progress = std::strcmp(argv[i + 1], "thread") == 0;
    }
  }
  if (!spin && (yield || threads_outnumber_cores(thread_progress))) {
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  }
}

// One OpenMP thread per core share unless the user chose: ranks on one node split its cores.
void choose_omp_threads(int rank) {
  if (netsparse::config::foreign("OMP_NUM_THREADS") == nullptr) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int local = 1;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    omp_set_num_threads(std::max(1, cores / local));
  }
}

// Input errors every rank meets before the run: a bad option (`parse_error`), inproc over
// several ranks, an unwritable --json path, a bad NETSPARSE_* variable. "" when there is none.
std::string input_problem(const std::optional<Options>& parsed, std::string parse_error, int rank,
                          int nranks) {
  if (!parse_error.empty()) return parse_error;
  if (parsed && parsed->dist.engine.transport == NS_TRANSPORT_INPROC && nranks != 1) {
    return "--transport inproc connects threads of one process: it needs exactly one rank, not " +
           std::to_string(nranks) + " (use mpi or verbs)";
  }
  // Before the run, not after it: a --json path that cannot be written.
  if (parsed && rank == 0 && !parsed->json.empty()) {
    if (std::string p = bench::json_path_problem(parsed->json); !p.empty()) return p;
  }
  for (const auto scope :
       {netsparse::config::Scope::kBenchmark, netsparse::config::Scope::kLibrary}) {
    if (std::string e = netsparse::config::first_error(scope); !e.empty()) return e;  // NETSPARSE_*
  }
  return "";
}

// The ranks must run the same benchmark: mpirun may hand ranks different argv (an MPMD
// command line, a wrapper script), and a rank with another --K, --dtype, --kernel, --modes,
// --partition, --iters, ... would enter other collectives than the rest (a stall, a truncated
// message, a corrupted heap). Every option's given value is agreed -- but --no-progress and
// --spin / --yield, which only concern the rank's own display and waiting, and --matrix, which
// the loader agrees on (a generator's text; a file's content, which ranks may read from their
// own copies under other paths) -- together with the
// input problems, in one small allreduce (agreement::settle_over_mpi; the records are gathered
// only on a mismatch). "" when every rank may go on; otherwise the message, on every rank: a
// rank's own problem, the lowest refusing rank's, or "the ranks disagree on --K: rank 0 has 4,
// rank 1 has 8 (...)".
std::string agreed_command_line(const bench::CliResult& command_line, const std::string& problem) {
  agreement::Agreement agreed;
  for (const auto& [name, value] : command_line.given) {
    if (name == "--no-progress" || name == "--spin" || name == "--yield" || name == "--matrix") {
      continue;
    }
    agreed.field(name, value);
  }
  if (!problem.empty()) agreed.refuse(1, problem);
  const agreement::Verdict v = agreement::settle_over_mpi(agreed, MPI_COMM_WORLD);
  if (v.ok()) return "";
  if (v.refused) return problem.empty() ? v.what : problem;
  return "the " + v.reason;
}

void print_help() {
  // The library's list of specification forms, indented under --matrix.
  std::string forms;
  std::istringstream lines(matrix_spec_help());
  for (std::string line; std::getline(lines, line);) forms += "                   " + line + "\n";
  // The engine defaults from the configuration table ({attribute} -> its default), so the text
  // cannot drift from what the engine uses, and the environment's values in effect where they
  // change what a run does ({stall_s}, {transport_now}).
  namespace cfg = netsparse::config;
  std::string help = kHelp;
  const auto substitute = [&help](const std::string& key, const std::string& value) {
    for (std::size_t at; (at = help.find(key)) != std::string::npos;) {
      help.replace(at, key.size(), value);
    }
  };
  for (const cfg::Attribute& a : cfg::kAttributes) {
    substitute(std::string("{") + a.name + "}", a.default_text);
  }
  // A malformed value is refused when the run starts (naming it); --help shows the default then.
  const auto in_effect = [](cfg::Env e) {
    try {
      return cfg::effective(e);
    } catch (const std::invalid_argument&) {
      return std::string(cfg::setting(e).default_text);
    }
  };
  substitute("{stall_s}", in_effect(cfg::Env::kBenchStallS));
  substitute("{stall_how}", cfg::is_set(cfg::Env::kBenchStallS) ? " is set" : ", default");
  substitute("{transport_now}", cfg::is_set(cfg::Env::kTransport)
                                    ? "now " + in_effect(cfg::Env::kTransport)
                                    : "it is not set");
  // Not a printf format: the text's "95% CI" and "(+-x %)" would be conversions (they printed
  // a NUL byte and read a missing argument before).
  substitute("{forms}", forms);
  std::fputs(help.c_str(), stdout);
}

void print_run_header(const DistMatrix& a, const Options& o, int nranks, double load_s,
                      double line_rate) {
  std::printf("netsparse_bench: %s (%lld x %lld, %lld nonzeros, %s partition, loaded in %.2f s)\n",
              a.name().c_str(), static_cast<long long>(a.n_rows()),
              static_cast<long long>(a.n_cols()), static_cast<long long>(a.nnz_global()),
              o.metis ? metis_name(o) : to_string(o.partition), load_s);
  std::printf(
      "  %d ranks x %d OpenMP threads; line rate %.2f GB/s (all ranks streaming %s); "
      "%d timed iterations%s%s after %d warm-up, %d round(s)%s\n",
      nranks, omp_get_max_threads(), line_rate / 1e9,
      human_bytes(static_cast<double>(o.line_rate_bytes)).c_str(), o.iters,
      timed_iterations_cap(o) > o.iters
          ? (" (more, up to " + std::to_string(timed_iterations_cap(o)) + ", until " +
             fmt("%.2f", o.min_time) + " s per mode and round)")
                .c_str()
          : "",
      o.max_time > 0 && !o.changing
          ? (", fewer once a mode's round took " + fmt("%.1f", o.max_time) + " s").c_str()
          : "",
      o.warmup, o.rounds, o.changing ? "; CHANGING SPARSITY (setup inside every iteration)" : "");
  std::printf(
      "  engine: batch %llu idxs, %s idxs, window %s, progress %s%s%s%s\n",
      static_cast<unsigned long long>(o.dist.batch),
      o.dist.rig_idx == RigIdxSource::unique_columns ? "unique" : "per-nonzero",
      o.dist.tiling.col_panel > 0 ? std::to_string(o.dist.tiling.col_panel).c_str() : "auto",
      o.dist.engine.progress == NS_PROGRESS_INLINE   ? "inline"
      : o.dist.engine.progress == NS_PROGRESS_THREAD ? "thread"
                                                     : "auto",
      (o.dist.engine.flags & NS_CTX_NO_FILTER) ? ", no filter" : "",
      (o.dist.engine.flags & NS_CTX_NO_COALESCE) ? ", no coalescing" : "",
      (o.dist.engine.flags & NS_CTX_NO_CONCAT) ? ", no concatenation" : "");
}

Workload make_workload(const DistMatrix& a, KernelKind kernel, int k, int rank, const Options& o) {
  Workload w;
  w.a = &a;
  w.kernel = kernel;
  w.k = k;
  w.rank = rank;
  w.scalar = o.dist.scalar;
  w.set_operands(make_block(1, a.cols().begin(rank), a.cols().end(rank), k),
                 kernel == KernelKind::sddmm
                     ? make_block(2, a.rows().begin(rank), a.rows().end(rank), k)
                     : std::vector<double>{});
  if (o.changing) {
    for (int i = 0; i < o.warmup; ++i) {
      w.warm_patterns.push_back(sample_rows(a.local(), o.sampling, 1000003u + i));
    }
    for (int i = 0; i < o.iters; ++i) {
      w.patterns.push_back(sample_rows(a.local(), o.sampling, static_cast<std::uint64_t>(i)));
    }
  }
  w.clear_out(out_size(w, a.local()));
  return w;
}

// The pattern's volume (of the last timed pattern when it changes).
Volume measure_volume(const DistMatrix& a, const Workload& w, KernelKind kernel, int k,
                      const Options& o) {
  Volume vol;
  DistOptions su;
  su.mode = CommMode::su;
  su.scalar = o.dist.scalar;  // properties of K elements of the run's precision
  DistKernel probe(a, kernel, k, su);
  if (o.changing) probe.set_pattern(w.patterns.back());
  const PatternVolume pv = probe.volume();
  vol.packet_bytes = o.dist.engine.packet_bytes > 0 ? o.dist.engine.packet_bytes : 1500;
  const MinimumTraffic mt = minimum_traffic(probe, vol.packet_bytes);
  vol.nnz_total = static_cast<double>(a.nnz_global());
  vol.remote_nnz_total = allreduce(double(pv.remote_nonzeros), MPI_SUM);
  vol.unique_total = allreduce(double(pv.unique_remote_cols), MPI_SUM);
  vol.unique_tail = allreduce(double(pv.unique_remote_cols), MPI_MAX);
  vol.min_wire_total = allreduce(double(mt.wire_bytes), MPI_SUM);
  vol.min_wire_tail = allreduce(double(mt.wire_bytes), MPI_MAX);
  vol.min_property_total = allreduce(double(mt.property_bytes), MPI_SUM);
  vol.min_property_tail = allreduce(double(mt.property_bytes), MPI_MAX);
  vol.hosts = host_volume(probe);
  vol.host_min_payload = double(vol.hosts.host_rows_total * vol.hosts.row_bytes);
  vol.rank_host_payload = double(vol.hosts.rank_rows_total * vol.hosts.row_bytes);
  return vol;
}

// A later round of the same variant: same pattern, same traffic, so the timings pool.
void merge_round(Result& acc, const Result& r, int round) {
  acc.times.insert(acc.times.end(), r.times.begin(), r.times.end());
  acc.round_iterations.insert(acc.round_iterations.end(), r.round_iterations.begin(),
                              r.round_iterations.end());
  acc.setup_times.insert(acc.setup_times.end(), r.setup_times.begin(), r.setup_times.end());
  acc.first_times.insert(acc.first_times.end(), r.first_times.begin(), r.first_times.end());
  acc.engine_times.insert(acc.engine_times.end(), r.engine_times.begin(), r.engine_times.end());
  acc.construct_times.insert(acc.construct_times.end(), r.construct_times.begin(),
                             r.construct_times.end());
  acc.plan_times.insert(acc.plan_times.end(), r.plan_times.begin(), r.plan_times.end());
  acc.own_times.insert(acc.own_times.end(), r.own_times.begin(), r.own_times.end());
  acc.err = std::isnan(r.err) ? r.err : std::max(acc.err, r.err);  // NaN: not checked
  acc.correct = acc.correct && r.correct;
  if (acc.error.empty()) acc.error = r.error;
  acc.wait_tail = (acc.wait_tail * round + r.wait_tail) / (round + 1);
  acc.sync_tail = (acc.sync_tail * round + r.sync_tail) / (round + 1);
  acc.compute_tail = (acc.compute_tail * round + r.compute_tail) / (round + 1);
  acc.post_tail = (acc.post_tail * round + r.post_tail) / (round + 1);
  acc.progress_tail = (acc.progress_tail * round + r.progress_tail) / (round + 1);
  acc.auto_chosen.insert(acc.auto_chosen.end(), r.auto_chosen.begin(), r.auto_chosen.end());
  acc.auto_tuning_times.insert(acc.auto_tuning_times.end(), r.auto_tuning_times.begin(),
                               r.auto_tuning_times.end());
  acc.auto_json.insert(acc.auto_json.end(), r.auto_json.begin(), r.auto_json.end());
}

// Every variant on one (kernel, K), --rounds times over: every mode once per round, so slow
// drifts of the machine's load (other jobs) spread over all modes instead of biasing the ones
// measured last. `exit_code` becomes 1 when a mode fails or disagrees with ideal.
// A mode failed because a peer died or stopped answering (ns_peer_failed): the run stops.
struct PeerFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<Result> run_variants(const std::vector<Variant>& variants, Workload& w,
                                 const Options& o, Progress& progress, const std::string& tag,
                                 int& exit_code) {
  std::vector<Result> results;
  std::vector<double> reference;
  for (int round = 0; round < o.rounds; ++round) {
    for (std::size_t vi = 0; vi < variants.size(); ++vi) {
      const Variant& v = variants[vi];
      Result r;
      try {
        if (is_external_baseline(v.label)) {
          r = measure_baseline(v, w, o, reference);
        } else {
          r = measure(v, w, o, v.options.mode == CommMode::ideal ? nullptr : &reference, progress,
                      o.rounds > 1 ? tag + " round " + std::to_string(round + 1) : tag);
        }
      } catch (const std::exception& e) {
        // A peer that died or stopped answering: the next collective would wait for ever on it.
        if (ns_peer_failed() != 0) throw PeerFailed(v.label + ": " + e.what());
        // A failure is collective in the library (every rank throws); report and go on.
        r.label = v.label;
        r.mode = v.options.mode;
        r.error = e.what();
        r.correct = false;
      }
      if (v.options.mode == CommMode::ideal) reference = w.out_as_double();
      if (!r.correct) exit_code = 1;
      if (round == 0) {
        results.push_back(std::move(r));
      } else {
        merge_round(results[vi], r, round);
      }
    }
  }
  return results;
}

// The cost of one bare MPI_Allreduce of three integers on `comm`, the slowest rank's, median of
// 7 barrier-separated calls: the floor of anything collective in this job (an engine open is a
// few of them). Oversubscribed, it is the scheduling of every rank (~30 ms at np 128 on 2
// cores), which is why the scale table prints the open beside it.
double measure_allreduce(MPI_Comm comm) {
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    long long in[3] = {1, 2, 3}, out[3];
    MPI_Allreduce(in, out, 3, MPI_LONG_LONG, MPI_MAX, comm);
    t.push_back(allreduce(MPI_Wtime() - t0, MPI_MAX));
  }
  std::nth_element(t.begin(), t.begin() + 3, t.end());
  return t[3];
}

// The run's settings: the head of the --json document ("results" follows).
bench::Json run_json(const DistMatrix& a, const Options& o, int nranks, double line_rate,
                     double allreduce_s) {
  bench::Json j;
  j["matrix"] = a.name();
  j["spec"] = o.matrix;
  j["rows"] = a.n_rows();
  j["cols"] = a.n_cols();
  j["nnz"] = a.nnz_global();
  j["ranks"] = nranks;
  j["omp_threads"] = omp_get_max_threads();
  j["line_rate"] = line_rate;
  j["allreduce_s"] = allreduce_s;
  j["partition"] = o.metis ? metis_name(o) : to_string(o.partition);
  j["iters"] = o.iters;  // per mode and round as asked; round_iterations: what ran (--min-time,
                         // --max-time)
  j["min_time_s"] = o.min_time;
  j["max_time_s"] = o.changing ? 0.0 : o.max_time;
  j["max_iters"] = timed_iterations_cap(o);
  j["warmup"] = o.warmup;
  j["rounds"] = o.rounds;
  j["changing_sparsity"] = o.changing;
  j["sample_fraction"] = o.sampling.keep_fraction;
  j["sample_max"] = o.sampling.max_per_row;
  j["batch"] = o.dist.batch;
  j["delay_ns"] = o.dist.engine.delay_ns;
  j["packet_bytes"] = o.dist.engine.packet_bytes;
  j["rig_idx"] = o.dist.rig_idx == RigIdxSource::unique_columns ? "unique" : "nonzeros";
  j["dtype"] = to_string(o.dist.scalar);
  j["time"] = static_cast<long long>(std::time(nullptr));
  j["results"] = bench::Json::array();
  // netsparse against the best other mode and inspector-executor, decided from the interval of
  // the ratio of their times (print_table's verdict lines).
  j["verdicts"] = bench::Json::array();
  return j;
}

// One mode's record of one (kernel, K): the table's columns and the raw figures behind them.
bench::Json result_json(KernelKind kernel, int k, const Result& r, const Derived& d,
                        const Volume& vol, const Options& o) {
  const auto median_or = [](const std::vector<double>& v, double none) {
    return v.empty() ? none : median(v);
  };
  bench::Json j;
  j["kernel"] = to_string(kernel);
  j["K"] = k;
  j["mode"] = r.label;
  j["comm_mode"] = to_string(r.mode);
  j["error"] = r.error;
  j["time_s"] = d.t;
  j["times_s"] = r.times;
  j["round_iterations"] = r.round_iterations;  // times_s, round by round
  // The spread of times_s (every round's iterations pooled): the bootstrap 95 % interval of the
  // median and the quartiles.
  j["time_ci95_s"] = {d.t_ci.lo, d.t_ci.hi};
  j["time_iqr_s"] = {d.t_iqr.lo, d.t_iqr.hi};
  j["setup_s"] = d.setup;
  j["plan_s"] = d.plan;
  j["construct_s"] = median_or(r.construct_times, 0.0);
  j["engine_open_s"] = median_or(r.engine_times, 0.0);
  j["first_run_s"] = median_or(r.first_times, d.t);
  j["time_to_solution_s"] = {{"1", time_to_solution(r, 1, o.changing)},
                             {"10", time_to_solution(r, 10, o.changing)},
                             {"100", time_to_solution(r, 100, o.changing)}};
  j["time_without_shared_setup_s"] = d.own;
  j["speedup_vs_su"] = d.vs_su;
  j["fraction_of_ideal"] = d.of_ideal;
  j["max_rel_err"] = std::isnan(r.err)      ? bench::Json(nullptr)  // not checked (netsparse-fixed)
                     : std::isfinite(r.err) ? bench::Json(r.err)
                                            : bench::Json(1e300);
  j["correct"] = r.correct;
  j["bytes_total"] = r.bytes_total;
  j["bytes_tail"] = r.bytes_tail;
  j["requests_total"] = r.requests_total;
  j["messages_total"] = r.messages_total;
  j["messages_tail"] = r.messages_tail;
  j["collectives_per_run"] = r.collectives_per_run;
  j["open_collectives"] = r.open_collectives;
  j["setup_collectives"] = r.setup_collectives;
  j["rss_max_mib"] = r.rss_max_mib;
  j["rss_mean_mib"] = r.rss_mean_mib;
  j["inter_host_bytes_total"] = r.inter_bytes_total;
  j["inter_host_payload_total"] = r.inter_payload_total;
  j["inter_host_messages_total"] = r.inter_messages_total;
  j["intra_host_bytes_total"] = r.intra_bytes_total;
  j["host_filter_lookups_total"] = r.host_lookups_total;
  j["host_rows_landed_total"] = r.host_landed_total;
  j["host_fc_rate"] =
      r.host_lookups_total > 0 ? 1 - r.host_landed_total / r.host_lookups_total : -1.0;
  j["per_host"] = per_host_json(r.per_host);
  j["task_owners_total"] = r.task_owners_total;
  j["row_owners_total"] = r.row_owners_total;
  j["block_owners_total"] = r.block_owners_total;
  j["switch_lookups_total"] = r.switch_lookups_total;
  j["switch_hits_total"] = r.switch_hits_total;
  j["switch_hit_rate"] =
      r.switch_lookups_total > 0 ? r.switch_hits_total / r.switch_lookups_total : -1.0;
  j["inter_rack_bytes_total"] = r.inter_rack_bytes_total;
  j["inter_rack_messages_total"] = r.inter_rack_messages_total;
  j["wait_tail_s"] = r.wait_tail;
  j["sync_tail_s"] = r.sync_tail;
  j["compute_tail_s"] = r.compute_tail;
  j["post_tail_s"] = r.post_tail;
  j["progress_tail_s"] = r.progress_tail;
  j["fc_rate"] = d.fc;
  j["prs_per_packet"] = d.prs_per_packet;
  j["goodput"] = d.goodput;
  j["line_util"] = d.util;
  j["traffic_vs_su"] = d.traffic_vs_su;
  j["prs_vs_sa"] = d.prs_vs_sa;
  j["engine_fc_rate"] = r.engine_fc;
  j["engine_prs_per_packet"] = r.engine_prs_per_packet;
  j["remote_nnz_total"] = vol.remote_nnz_total;
  j["unique_remote_total"] = vol.unique_total;
  j["min_wire_total"] = vol.min_wire_total;
  j["min_wire_tail"] = vol.min_wire_tail;
  j["min_property_total"] = vol.min_property_total;
  j["min_property_tail"] = vol.min_property_tail;
  j["hosts"] = vol.hosts.hosts;
  j["host_min_payload_total"] = vol.host_min_payload;
  j["rank_host_payload_total"] = vol.rank_host_payload;
  j["engine_stats"] = bench::parse_json(r.engine_json, "the engine's stats_json");
  if (r.mode == CommMode::automatic) {
    j["auto_chosen"] = r.auto_chosen;  // per round
    j["auto_tuning_s"] = r.auto_tuning_times;
    bench::Json tunings = bench::Json::array();
    for (const std::string& t : r.auto_json) {
      tunings.push_back(bench::parse_json(t, "DistKernel::auto_tuning_json"));
    }
    j["auto_tuning"] = std::move(tunings);
  }
  return j;
}

// Rank 0: the table of one (kernel, K), its records appended to doc's "results" and its verdicts
// to doc's "verdicts".
void report_width(const DistMatrix& a, const std::string& tag, KernelKind kernel, int k,
                  const std::vector<Result>& results, const Volume& vol, double line_rate,
                  const Options& o, bench::Json& doc) {
  print_table(a.name() + ": " + tag + (o.changing ? " (changing sparsity)" : ""), kernel, k,
              results, vol, line_rate, o, doc["verdicts"]);
  bench::Json& records = doc["results"];
  std::map<std::string, const Result*> by_label;
  for (const Result& r : results) by_label[r.label] = &r;
  const auto su = by_label.find("su");
  for (const Result& r : results) {
    bench::Json record = result_json(kernel, k, r, derive(r, by_label, vol, line_rate), vol, o);
    // The speedup's own interval (su's median / this mode's, both sides resampled), for error
    // bars (bench/plot.py): absent without su or without times on either side.
    if (su != by_label.end() && su->second->error.empty() && r.error.empty() &&
        !su->second->times.empty() && !r.times.empty()) {
      const bench::RatioVerdict v = bench::compare_medians(su->second->times, r.times);
      if (std::isfinite(v.ci.lo) && std::isfinite(v.ci.hi)) {
        record["speedup_vs_su_ci95"] = {v.ci.lo, v.ci.hi};
      }
    }
    records.push_back(std::move(record));
  }
  std::fflush(stdout);
}

// Rank 0 writes the document; every rank learns whether it failed (exit 2 then).
int write_report(const Options& o, const bench::Json& doc, int rank) {
  std::string write_error;
  if (rank == 0) {
    write_error = bench::write_json(o.json, doc);
    if (write_error.empty()) std::printf("\nwrote %s\n", o.json.c_str());
  }
  std::fflush(stdout);
  return agreed_error(rank, write_error) ? kExitError : 0;
}

}  // namespace

int main(int argc, char** argv) {
  choose_mpi_yield(argc, argv);  // read by Open MPI in MPI_Init
  const netsparse::bench::World world = netsparse::bench::init_world(argc, argv);
  const int rank = world.rank, nranks = world.size;
  // A rank of this host that dies ends this one at once with exit code 4 (netsparse_mpi.h);
  // collective, so before anything that may fail on one rank.
  if (ns_watch_host_peers(MPI_COMM_WORLD, netsparse::bench::kExitPeerDied) != NS_OK) {
    std::fprintf(stderr, "netsparse_bench (rank %d): %s\n", rank, ns_last_error());
  }
  std::optional<Progress> progress;  // outlives the run: its guard watches MPI_Finalize too
  int exit_code = 0;
  try {
    std::optional<Options> parsed;
    std::string parse_error;
    bench::CliResult command_line;
    try {
      parsed = parse_args(argc, argv, command_line);
    } catch (const std::invalid_argument& e) {
      parse_error = e.what();
    }
    // Before anything collective: the ranks agree on their command lines and input problems.
    if (agreed_error(rank, agreed_command_line(command_line,
                                               input_problem(parsed, parse_error, rank, nranks)))) {
      MPI_Finalize();
      return kExitError;
    }
    if (!parsed) {
      if (rank == 0) print_help();
      MPI_Finalize();
      return 0;
    }
    const Options& o = *parsed;
    choose_omp_threads(rank);
    progress.emplace(o.progress, rank);
    const double t_load = MPI_Wtime();
    progress->show("loading " + o.matrix);
    // A bad matrix file or specification fails on every rank alike (the library agrees on
    // reading errors): one line, exit 2.
    DistMatrix a;
    std::string input_error;
    try {
      a = load_distributed_matrix(MPI_COMM_WORLD, o.matrix, o.partition);
      if (o.metis) {
        GraphPartitionOptions po;
        po.objective = o.metis_objective;
        PartitionedMatrix parts = partition_with_metis(a, po);
        if (rank == 0) {
          std::printf(
              "netsparse_bench: METIS k-way partition (%s) of %s in %.2f s (edge cut %lld)\n",
              po.objective == PartitionObjective::volume ? "communication volume" : "edge cut",
              a.name().c_str(), parts.partition_seconds, static_cast<long long>(parts.edge_cut));
        }
        a = std::move(parts.matrix);
      }
    } catch (const std::exception& e) {
      input_error = e.what();
    }
    progress->clear();
    if (agreed_error(rank, input_error)) {
      MPI_Finalize();
      return kExitError;
    }
    const double load_s = allreduce(MPI_Wtime() - t_load, MPI_MAX);
    progress->show("measuring the line rate");
    const double line_rate = measure_line_rate(MPI_COMM_WORLD, o.line_rate_bytes);
    const double allreduce_s = measure_allreduce(MPI_COMM_WORLD);
    progress->clear();
    const std::vector<Variant> variants = make_variants(o, host_layout(MPI_COMM_WORLD).hosts);
    if (rank == 0) print_run_header(a, o, nranks, load_s, line_rate);
    bench::Json doc = run_json(a, o, nranks, line_rate, allreduce_s);
    for (KernelKind kernel : o.kernels) {
      for (int k : kernel == KernelKind::spmv ? std::vector<int>{1} : o.ks) {
        Workload w = make_workload(a, kernel, k, rank, o);
        const std::string tag = std::string(to_string(kernel)) + " K=" + std::to_string(k) +
                                (o.dist.scalar == ScalarType::f64 ? " f64" : "");
        const Volume vol = measure_volume(a, w, kernel, k, o);
        const std::vector<Result> results = run_variants(variants, w, o, *progress, tag, exit_code);
        progress->clear();
        if (rank == 0) report_width(a, tag, kernel, k, results, vol, line_rate, o, doc);
      }
    }
    if (rank == 0 && exit_code != 0) {
      std::printf("\n*** SOME MODES DISAGREE WITH ideal OR FAILED (see above) ***\n");
    }
    if (!o.json.empty() && write_report(o, doc, rank) != 0) exit_code = kExitError;
  } catch (const PeerFailed& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "netsparse_bench (rank %d): %s\n", rank, e.what());
    exit_code = netsparse::bench::kExitPeerDied;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "netsparse_bench (rank %d): %s\n", rank, e.what());
    if (ns_peer_failed() != 0) {
      exit_code = netsparse::bench::kExitPeerDied;  // MPI_Abort too may wait on the dead
    } else {
      exit_code = kExitError;
      MPI_Abort(MPI_COMM_WORLD, exit_code);
    }
  }
  if (progress) progress->finishing();
  if (ns_peer_failed() != 0) exit_code = netsparse::bench::kExitPeerDied;
  // After a peer failure: _exit(exit_code) without MPI_Finalize (netsparse_mpi.h).
  return ns_finalize_or_exit(exit_code);
}
