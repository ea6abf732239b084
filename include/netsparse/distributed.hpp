// Distributed SpMM, SDDMM and SpMV over a 1D row-distributed sparse matrix (dist_matrix.hpp),
// with NetSparse's Remote Indexed Gather and every baseline it is measured against, in one
// library so that one run compares them side by side.
//
//   DistMatrix a = load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:16");
//   DistOptions opt;  opt.mode = CommMode::netsparse;
//   DistKernel spmm(a, KernelKind::spmm, /*k=*/16, opt);       // collective: setup
//   spmm.spmm(b_local, c_local);                               // collective: C = A * B
//
// Operands are this rank's blocks, row-major, leading dimension K (see dist_matrix.hpp):
//   b_local / y_local / x_local : a.cols().size(rank) x K   (column-indexed operand)
//   c_local / x_local(SDDMM)    : a.rows().size(rank) x K   (row-indexed operand)
//   SDDMM output                : one value per local nonzero, in CSR order of a.local()
// Results equal a single-process run of the same kernel up to floating-point summation order.
//
// Communication modes (CommMode):
//   netsparse          NetSparse, the engine that fits the job (resolve_comm_mode): the
//                      node-wide engine (netsparse-node) where the job has several hosts and
//                      some host several ranks, as the paper builds it (one NIC's RIG units
//                      serve every core of the node); the per-rank engine (netsparse-rank)
//                      everywhere else -- one rank per host, or one host (a single machine
//                      standing in for a cluster, as the main benchmark's two ranks do).
//   netsparse-rank     the per-rank engine: every rank opens its own RIG engine.
//                      A fixed pattern (the default):
//                      the distinct remote columns of A are gathered (NS_WR_RIG, POSITIONAL) into
//                      a compact buffer by gather plans, recorded on the first run and replayed
//                      afterwards, while the local rows of B are used in place; the remote part
//                      is computed renumbered onto the buffer. A changing pattern
//                      (DistOptions::dynamic_pattern): each run finds the CSR's distinct remote
//                      columns (SpMM / SpMV) or posts its column array with the engine's Idx
//                      Filter dropping repeats (SDDMM), no tiling. RigIdxSource::nonzeros: the
//                      paper's setting, one idx per remote nonzero per column panel (INDEXED
//                      into a panel window, the next panel's gather in flight).
//   su                 MPI_Allgatherv of the whole column-indexed operand, then compute.
//   su-panel           MPI_Iallgatherv of one column panel of it at a time, the next panel's
//                      collective in flight while the current panel computes.
//   sa-vanilla         one NS_WR_RDMA_READ through the RIG engine per remote NONZERO (no
//                      de-duplication, no aggregation): vanilla sparsity-aware.
//   sa-conveyors       Conveyors-style aggregation (request and reply conveyors, MPI
//                      Isend/Irecv/Testsome): one request per remote nonzero.
//   sa-opt             sa-conveyors with a free perfect prefilter: each remote column once.
//   inspector-executor PETSc/Tpetra-style: a setup computes the ghost rows and builds a
//                      distributed-graph communicator; each run packs and exchanges them with
//                      MPI_Ineighbor_alltoallv, overlapped with the local block's compute.
//   node-aware-ie      inspector-executor made node-aware (Bienz, Gropp, Olson; JPDC 2019):
//                      rows owned on the rank's host come straight from their owner; rows from
//                      other hosts take three steps: the owners' ranks send them to their host
//                      leader, one message per host pair carries each row once per host
//                      (de-duplicated host-wide), the receiving leader scatters them to the ranks
//                      of its host that need them. Hosts: MPI_COMM_TYPE_SHARED, or virtual hosts
//                      of NETSPARSE_RANKS_PER_HOST consecutive ranks (docs/node-aware.md).
//   netsparse-node     node-wide NetSparse: the ranks of a host share one Idx Filter and one
//                      store of arrived rows (shared memory: every remote row lands once per host,
//                      ranks read it and their host's rows in place), and one RIG engine run by
//                      the host leader, whose packets to another host are that host pair's frames
//                      (gather plans for the host's union of remote rows; docs/node-aware.md).
//   task-packets       data-centric task packets (the SmartNIC dissertation, ch. 4), chosen per
//                      owner by bytes: where (local row, column, value) triples to the owner plus
//                      its partial sums (K values per local row touched) are fewer bytes than
//                      the distinct rows of B fetched from it, the rank sends the owner its sparse
//                      work and adds the returned partial sums into C; elsewhere it fetches the
//                      rows as inspector-executor does. MPI point-to-point; SDDMM always fetches.
//   ideal              no communication: every rank holds all of the operand (replicate()).
//   auto               chosen by measurement while the kernel runs (CommMode::automatic): the
//                      kernel's first runs are trials of the candidates -- netsparse (resolved as
//                      above), inspector-executor, su -- each built when its turn comes, one
//                      warm-up then DistOptions::tune_runs timed runs of the real kernel (their
//                      results are the caller's); then one allreduce of the per-candidate median
//                      times (max over ranks) and every rank keeps the same fastest, the others
//                      are destroyed. A new fixed pattern (set_pattern) or retune() tunes again.
//                      chosen_mode() and auto_tuning() say what was chosen and why.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "netsparse/autotune.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/netsparse.h"
#include "netsparse/scalar.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse {

enum class CommMode {
  netsparse,
  su,
  su_panel,
  sa_vanilla,
  sa_conveyors,
  sa_opt,
  inspector_executor,
  node_aware_ie,
  netsparse_node,
  task_packets,
  ideal,
  netsparse_rank,  // appended: the enumerators keep their values
  automatic,       // "auto": chosen by measurement while the kernel runs (DistKernel, below)
};
[[nodiscard]] const char* to_string(CommMode mode) noexcept;  // "netsparse", "su-panel", ...
// Throws std::invalid_argument naming the accepted names.
[[nodiscard]] CommMode parse_comm_mode(std::string_view name);
[[nodiscard]] std::span<const CommMode> all_comm_modes() noexcept;
// True for the modes that need a per-rank RIG engine (netsparse-rank, sa-vanilla; and netsparse
// before it is resolved, which may not need one: see resolve_comm_mode).
[[nodiscard]] bool uses_rig_engine(CommMode mode) noexcept;

// The RIG engine's knobs (ns_context_attr); 0 / defaults mean "the engine's default".
struct EngineOptions {
  int transport = NS_TRANSPORT_AUTO;
  int client_units = 0;               // 0: engine default
  int server_units = 0;               // 0: engine default
  int progress = NS_PROGRESS_AUTO;    // ns_progress_mode
  std::uint32_t packet_bytes = 0;     // 0: engine default (1500)
  std::int64_t delay_ns = -1;         // < 0: engine default
  std::uint32_t pending_entries = 0;  // 0: engine default
  std::uint32_t idx_chunk = 0;        // 0: engine default
  std::uint32_t flags = 0;            // NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT
  std::uint32_t watchdog_ms = 0;      // 0: engine default
};

namespace dist {
class RigEngineAccess;
class AutoAccess;
}  // namespace dist

// One open RIG engine (ns_context over MPI) with a completion queue and a queue pair, shared
// by the DistKernels that use it. Collective to create and to destroy (every rank of the
// communicator). The property region is registered on demand by the kernels: collectively when
// its shape (K, precision, partition) changes; an operand that only moved (another buffer of the
// same shape) is rebound locally (ns_rebind_props) before the rank enters the run. sa-vanilla's
// region, read one-sidedly, is registered again collectively when its operand moves. THREAD
// progress needs MPI_THREAD_MULTIPLE.
class RigEngine {
 public:
  RigEngine(MPI_Comm comm, const EngineOptions& options);
  ~RigEngine();
  RigEngine(const RigEngine&) = delete;
  RigEngine& operator=(const RigEngine&) = delete;

  [[nodiscard]] const EngineOptions& options() const noexcept;
  [[nodiscard]] std::string transport_name() const;
  // Engine counters (ns_stat_get), and all of them as JSON (ns_stats_json).
  [[nodiscard]] std::uint64_t stat(int which) const;
  [[nodiscard]] double prs_per_packet() const;
  [[nodiscard]] std::string stats_json() const;
  void reset_stats();

  struct Impl;  // lib/distributed/rig_engine.hpp

 private:
  friend class dist::RigEngineAccess;  // the RIG modes' door to Impl (rig_engine.hpp)
  std::unique_ptr<Impl> impl_;
};

// Which idxs a netsparse RIG work request carries.
enum class RigIdxSource {
  unique_columns,  // the distinct remote columns of the panel (TiledMatrix::panel_columns)
  nonzeros         // one idx per remote nonzero, in tile order: the NIC's Idx Filter and
                   // coalescing remove the repeats (the paper's setting; for ablations)
};

struct DistOptions {
  CommMode mode = CommMode::netsparse;
  // The precision of the operands, of the matrix values the kernels read and of the properties
  // moved (K * 4 or K * 8 bytes per row). The run calls take spans of float for f32 and of
  // double for f64; the other type is refused with std::invalid_argument.
  ScalarType scalar = ScalarType::f32;
  // Tiling of the local computation (row panel, barriers). Its col_panel is the width of the
  // column panels of the remote part (the gather window); 0 = automatic: the widest window of
  // at most 64 MiB (one panel whenever the remote part fits).
  TileConfig tiling{};
  // netsparse: idxs per RIG work request (the paper's batch size).
  std::uint64_t batch = 8192;
  // The pattern changes every run (GNN neighbour sampling: set_pattern before each run).
  // netsparse then prepares nothing in set_pattern: each SpMM / SpMV run splits the CSR rows in
  // one streaming pass into the tiled kernels' local and remote parts, the remote one renumbered
  // onto its distinct columns, which are gathered into a compact buffer
  // (TiledMatrix::split_columns); SDDMM posts the remote column of every nonzero, the engine's
  // Idx Filter dropping the repeats, into a window over every column (n_cols x K elements).
  // ideal splits its pattern the same way in set_pattern (its floor pays the same layout cost).
  // For both the rows are BORROWED: they must stay alive and unchanged until the next
  // set_pattern or the kernel's destruction. Other modes ignore it (they redo their setup,
  // which is what a changing pattern costs them).
  bool dynamic_pattern = false;
  RigIdxSource rig_idx = RigIdxSource::unique_columns;
  // netsparse on a fixed pattern (unique_columns): each gather is a learned plan (ns_plan_create):
  // the first run records it through the RIG path, later runs replay it in bulk. false: every
  // run takes the per-request RIG path (the ablation the benchmark prints as netsparse-noplan).
  bool plans = true;
  // sa-vanilla: RDMA READ work requests in flight at most.
  int max_outstanding_reads = 4096;
  // Engine used when no RigEngine is passed to the kernel (netsparse, sa-vanilla).
  EngineOptions engine{};
  // sa-conveyors / sa-opt: bytes per link buffer and buffers per link (bale's defaults).
  std::size_t conveyor_buffer_bytes = 10000;
  int conveyor_buffers_per_link = 2;
  // inspector-executor: point-to-point Isend/Irecv instead of the neighbourhood collective.
  bool ie_point_to_point = false;
  // netsparse-node on several racks: the inter-rack gathers pass through a software ToR switch
  // per rack (the leader of the rack's first host), which concatenates per destination rack and
  // answers from its Property Cache what crossed into the rack before in the same kernel
  // (docs/node-aware.md). Also on with NETSPARSE_RACK_SWITCH=1. Must be the same on every rank.
  bool rack_switch = false;
  // auto: timed runs per candidate, each candidate's after one untimed warm-up (>= 1, <= 100).
  int tune_runs = 2;
  // auto: when a NetSparse engine wins the modes' trials, its knobs are tuned next the same way
  // (the paper's future work: batch size, concatenation delay, packet size and units chosen
  // while the kernel runs): variants of the winner's options -- batch / 8 and x 8, no
  // concatenation delay, 4 KiB packets, one client and one server unit -- each tried for a
  // warm-up and tune_runs runs, the fastest kept (the winner itself when none is faster). The
  // engine knobs are tried only on an engine the kernel opens (not a RigEngine passed in).
  bool tune_engine = true;
  // task-packets: choose each owner pair's way (its rows, its whole block, or task packets) by
  // measurement instead of by the bytes model: over the kernel's first runs, each way is tried
  // on every pair of the job at once (a warm-up and tune_runs measured runs), each pair's cost
  // (its data's arrival plus the work it leaves this rank) taken per owner, the cheapest way kept
  // per pair, and the mixed choice kept only if it beats every uniform one (docs/architecture.md,
  // "Per owner pair"); CommStats::owner_trial_runs counts those runs. Set by auto on
  // its task-packets candidate; also NETSPARSE_TASK_PACKETS=measure. Fixed patterns only (a
  // dynamic pattern keeps the bytes model: it would never finish its trials).
  bool tune_owners = false;
  // SPADE's exhaustive tile search (netsparse/autotune.hpp) on this rank's local block (the
  // columns it owns) when a fixed pattern is set: the best row panel is used for both parts and
  // the best column panels and barriers for the local part, instead of `tiling`'s. The choice is
  // cached per (pattern, kernel, K) in the process, so another kernel on the same pattern, or
  // the same pattern set again, does not search again (DistKernel::tile_tuning). A search costs
  // up to about autotune_budget_seconds (> 0) of setup; every candidate runs the f32 kernel.
  // Local to each rank (ranks may choose differently); ignored with dynamic_pattern.
  bool autotune_tiles = false;
  double autotune_budget_seconds = 2.0;
};

// What DistOptions::autotune_tiles chose on this rank (DistKernel::tile_tuning).
struct TileTuning {
  bool tuned = false;         // a search ran or a cached choice was used
  bool from_cache = false;    // the choice was this process's earlier one for the same pattern
  TileConfig local{};         // the local part's tiling (the remote part takes its row panel)
  double search_seconds = 0;  // this kernel's search (0 from the cache)
  double best_seconds = 0;    // the chosen candidate's kernel time, and SPADE Base's
  double base_seconds = 0;
  int candidates_timed = 0;
};

// What CommMode::automatic measured and chose (DistKernel::auto_tuning). Times in seconds.
struct AutoTuning {
  struct Candidate {
    CommMode mode = CommMode::netsparse;  // resolved once built (netsparse -> netsparse-rank ...)
    bool skipped = false;             // could not run here (its operand rows do not fit in memory)
    std::vector<double> run_seconds;  // this rank's timed runs (the warm-up not included)
    double seconds = 0;               // the max over ranks of the ranks' medians: what was compared
    double setup_seconds = 0;         // this rank: constructing it (its setup)
    // The engine knobs it changes from the options ("batch 1024", "concat delay 0 ns", ...);
    // empty for the modes' candidates (DistOptions::tune_engine's variants otherwise).
    std::string knobs;
  };
  bool tuned = false;                     // false while the trials run
  CommMode chosen = CommMode::automatic;  // the winner once tuned
  std::string chosen_knobs;               // its Candidate::knobs (empty: the options' own)
  int tune_runs = 2;                      // DistOptions::tune_runs
  int tunings = 0;                        // choices made so far (the first, then one per re-tune)
  std::vector<Candidate> candidates;      // in trial order
  // This rank's tuning cost of the current tuning: the candidates' setups, and the trial runs
  // (warm-ups included) with the choice's allreduce. Both also while the trials run.
  double setup_seconds = 0;
  double trial_seconds = 0;
  int trial_runs = 0;
};

// Communication counters of one rank (run_stats) or summed over calls (total_stats).
// "Wire" bytes follow the NetSparse paper's accounting: message payload plus 50 B of
// upper-layer headers per message; for the RIG modes they are the engine's own counters
// (concatenation and PR headers included).
struct CommStats {
  std::uint64_t runs = 0;
  std::uint64_t bytes_sent = 0;        // wire bytes this rank sent
  std::uint64_t payload_bytes_in = 0;  // property bytes this rank received (useful or not)
  std::uint64_t messages_sent = 0;     // messages this rank sent (RIG modes: transport frames)
  std::uint64_t requests = 0;          // property requests this rank issued (SA-style modes)
  double wait_seconds = 0;             // time blocked waiting for data (gathers, exchanges)
  double sync_seconds = 0;             // end-of-run synchronization (RIG modes: ns_quiesce)
  // Where the rest of a run's time goes (the profile in docs/benchmarks.md):
  double compute_seconds = 0;   // local kernels (RIG modes: including the progress they drive)
  double post_seconds = 0;      // RIG modes: ns_post_send of the gather work requests
  double progress_seconds = 0;  // RIG modes, INLINE: engine steps run from inside the kernels
  // Host-level traffic (inspector-executor, node-aware-ie, netsparse-node; 0 in the other modes;
  // netsparse-node: the leaders' engine counters, messages = transport frames, and intra-host
  // bytes = the rows each rank writes into its host's shared store). Hosts as
  // node-aware-ie sees them (docs/node-aware.md): discovered, or virtual hosts.
  std::uint64_t inter_host_bytes = 0;          // wire bytes this rank sent to other hosts
  std::uint64_t inter_host_payload_bytes = 0;  // the property bytes in them
  std::uint64_t inter_host_messages = 0;       // messages this rank sent to other hosts
  std::uint64_t intra_host_bytes = 0;          // wire bytes sent to other ranks of its host
  // netsparse-node: the off-host remote nonzeros this rank put through its host's Idx Filter
  // (the requests a per-rank NIC would see), and (leaders) the remote rows that landed in the
  // host's store. Node-wide F+C rate = 1 - landed / lookups, summed over the host's ranks.
  std::uint64_t host_filter_lookups = 0;
  std::uint64_t host_rows_landed = 0;
  // task-packets: the owners this rank sent its sparse work to (task packets), the owners it
  // fetched rows from, and those whose whole block it fetched (per run; summed over runs in
  // total_stats); and whether the run was one of the per-owner trials (DistOptions::tune_owners:
  // 1 per trial run, 0 once the ways are fixed).
  std::uint64_t task_owners = 0;
  std::uint64_t row_owners = 0;
  std::uint64_t block_owners = 0;
  std::uint64_t owner_trial_runs = 0;
  // netsparse-node with the rack switch (DistOptions::rack_switch): at a rack's switch process,
  // the read PRs from its rack it looked up in its Property Cache and those the cache answered;
  // and the wire bytes / messages it sent to other racks' switches (packets with the 50 B model).
  std::uint64_t switch_lookups = 0;
  std::uint64_t switch_hits = 0;
  std::uint64_t inter_rack_bytes = 0;
  std::uint64_t inter_rack_messages = 0;

  // Every field summed (DistKernel::total_stats is the sum of its runs' last_stats), from the
  // one list of the fields in its definition below.
  CommStats& operator+=(const CommStats& o) noexcept;
};

inline CommStats& CommStats::operator+=(const CommStats& o) noexcept {
  // Every field of CommStats, once. A field missing here does not compile: the fields are 8
  // bytes each with no padding, so the list's size must be the struct's.
  constexpr std::tuple fields{
      &CommStats::runs,
      &CommStats::bytes_sent,
      &CommStats::payload_bytes_in,
      &CommStats::messages_sent,
      &CommStats::requests,
      &CommStats::wait_seconds,
      &CommStats::sync_seconds,
      &CommStats::compute_seconds,
      &CommStats::post_seconds,
      &CommStats::progress_seconds,
      &CommStats::inter_host_bytes,
      &CommStats::inter_host_payload_bytes,
      &CommStats::inter_host_messages,
      &CommStats::intra_host_bytes,
      &CommStats::host_filter_lookups,
      &CommStats::host_rows_landed,
      &CommStats::task_owners,
      &CommStats::row_owners,
      &CommStats::block_owners,
      &CommStats::owner_trial_runs,
      &CommStats::switch_lookups,
      &CommStats::switch_hits,
      &CommStats::inter_rack_bytes,
      &CommStats::inter_rack_messages,
  };
  static_assert(sizeof(CommStats) == 8 * std::tuple_size_v<decltype(fields)>,
                "a CommStats field is missing from operator+='s list");
  std::apply([&](auto... field) { ((this->*field += o.*field), ...); }, fields);
  return *this;
}

// The communication volume a pattern needs, independent of the mode (collective to compute).
struct PatternVolume {
  std::uint64_t remote_nonzeros = 0;     // nonzeros of this rank in columns it does not own
  std::uint64_t unique_remote_cols = 0;  // distinct such columns
  std::uint64_t remote_rows_total = 0;   // columns owned by other ranks (what SU receives)
  std::vector<std::uint64_t> unique_remote_per_owner;  // distinct remote columns per owner rank
};

struct HostVolume;

class DistKernel {
 public:
  // Collective. Builds the tiled local structures and runs the mode's setup (inspector-executor:
  // its exchange plan; netsparse / sa-vanilla: the panel idx lists). k >= 1; SpMV needs k == 1.
  // `engine` may be null for the RIG modes: one is then created from options.engine.
  DistKernel(const DistMatrix& a, KernelKind kernel, int k, const DistOptions& options,
             std::shared_ptr<RigEngine> engine = {});
  ~DistKernel();
  DistKernel(DistKernel&&) noexcept;
  DistKernel& operator=(DistKernel&&) noexcept;

  // Changing sparsity: the rows of this rank get a new pattern (same rows, same partition, e.g.
  // sample_rows of the original). Collective; redoes the setup, whose time is setup_seconds().
  void set_pattern(const CsrMatrix& local_rows);

  // C = A * B. Collective. float operands for DistOptions::scalar f32, double for f64.
  void spmm(std::span<const float> b_local, std::span<float> c_local);
  void spmm(std::span<const double> b_local, std::span<double> c_local);
  // out[i] = a_i * dot(X[r_i], Y[c_i]) for the local nonzeros i, CSR order. Collective.
  void sddmm(std::span<const float> x_local, std::span<const float> y_local, std::span<float> out);
  void sddmm(std::span<const double> x_local, std::span<const double> y_local,
             std::span<double> out);
  // y = A * x. Collective.
  void spmv(std::span<const float> x_local, std::span<float> y_local);
  void spmv(std::span<const double> x_local, std::span<double> y_local);

  // ideal mode: every rank receives the whole column-indexed operand now (MPI_Allgatherv),
  // outside of any timed run; runs then use that copy and communicate nothing. Collective.
  // Calling it in another mode is an error (std::logic_error).
  void replicate(std::span<const float> operand_local);
  void replicate(std::span<const double> operand_local);

  // The mode: CommMode::automatic for an auto kernel, else the resolved mode (netsparse ->
  // netsparse-rank or netsparse-node).
  [[nodiscard]] CommMode mode() const noexcept;
  // The mode the runs use: mode(), or for auto the winner once chosen (CommMode::automatic while
  // the trials run).
  [[nodiscard]] CommMode chosen_mode() const noexcept;
  // auto: the trials, their times and the choice (empty for the other modes), and the same as
  // JSON ({"tuned", "chosen", "tune_runs", "tunings", "setup_seconds", "trial_seconds",
  // "trial_runs", "candidates": [{"mode", "skipped", "seconds", "setup_seconds",
  // "run_seconds"}]}).
  [[nodiscard]] const AutoTuning& auto_tuning() const noexcept;
  [[nodiscard]] std::string auto_tuning_json() const;
  // auto: tune again from the next run on (the winner is kept as a candidate, the others are
  // rebuilt). Collective. std::logic_error in the other modes.
  void retune();
  [[nodiscard]] KernelKind kernel() const noexcept;
  [[nodiscard]] int k() const noexcept;
  [[nodiscard]] ScalarType scalar() const noexcept;  // DistOptions::scalar
  // auto: setup_seconds() is the wall time of the last constructor or set_pattern call (the
  // candidates built in it); the later candidates' setups and the trials are auto's tuning cost,
  // in auto_tuning(). plan_seconds() is the plan of the candidate in use.
  // Seconds of the last setup (constructor or set_pattern) on this rank, and the part of it that
  // is the mode's own communication plan: tiling the remote part its way plus the exchange
  // setup (inspector-executor: ghosts, index exchange, graph communicator, compact matrix). The
  // rest -- splitting the rows and tiling the local part -- is the same for every mode.
  [[nodiscard]] double setup_seconds() const noexcept;
  [[nodiscard]] double plan_seconds() const noexcept;
  // DistOptions::autotune_tiles: what the search chose (tuned false without it).
  [[nodiscard]] const TileTuning& tile_tuning() const noexcept;
  [[nodiscard]] const CommStats& last_run_stats() const noexcept;
  [[nodiscard]] const CommStats& total_stats() const noexcept;
  void reset_stats() noexcept;
  // The current pattern's communication volume (local; computed on first use, no
  // communication).
  [[nodiscard]] PatternVolume volume() const;
  // Width of the remote part's column panels (the gather window), in columns.
  [[nodiscard]] gidx_t window_columns() const noexcept;
  [[nodiscard]] const std::shared_ptr<RigEngine>& engine() const noexcept;

  struct Impl;

 private:
  friend HostVolume host_volume(const DistKernel& kernel);
  friend class dist::AutoAccess;  // auto's test hook (lib/distributed/auto_mode.hpp)
  std::unique_ptr<Impl> impl_;
};

// The paper's minimum traffic for a pattern: every unique remote property once, requested and
// answered with perfectly concatenated NetSparse packets of `packet_bytes`:
//   per (requester, owner) pair with u unique properties of prop_bytes:
//     u * (prop_bytes + 2 * 18) + 64 * (read packets + response packets)
// (18 B per PR record, 14 B concatenation header + 50 B upper layers per packet: the wire model
// of concat/wire_model.hpp). Local, computed from this rank's pattern (u per owner); sum it
// over ranks for the total.
struct MinimumTraffic {
  std::uint64_t property_bytes = 0;  // unique remote properties * prop_bytes
  std::uint64_t wire_bytes = 0;      // with the concatenated headers, both directions
  std::uint64_t packets = 0;
};
[[nodiscard]] MinimumTraffic minimum_traffic(const DistKernel& kernel,
                                             std::uint32_t packet_bytes = 1500);

// The job's hosts and racks as the node-aware modes see them: ranks sharing memory
// (MPI_COMM_TYPE_SHARED), or virtual hosts of NETSPARSE_RANKS_PER_HOST consecutive ranks, in
// racks of NETSPARSE_HOSTS_PER_RACK hosts (docs/node-aware.md). Collective; a layout the ranks
// disagree on or that does not divide the job is refused on every rank with the same
// std::invalid_argument.
struct HostLayout {
  int hosts = 1;
  int racks = 1;
  bool virtual_hosts = false;
  int host = 0;  // this rank's host, rack, and whether it leads its host (its lowest rank)
  int rack = 0;
  bool leader = true;
  int max_ranks_per_host = 1;  // the most ranks any host of the job has
};
[[nodiscard]] HostLayout host_layout(MPI_Comm comm);

// The engine CommMode::netsparse runs on this job (collective over `comm`, agreed on every rank):
// netsparse_node where the job has several hosts and some host has several ranks, netsparse_rank
// otherwise, or when the caller brings its own per-rank engine (`engine_given`) or asks for the
// per-rank engine's own setting (RigIdxSource::nonzeros, the paper's per-nonzero idx). Any other
// mode is returned as is, without communicating. DistKernel resolves its mode with it (mode()
// says which); a layout that cannot work is refused as host_layout refuses it.
[[nodiscard]] CommMode resolve_comm_mode(MPI_Comm comm, const DistOptions& options,
                                         bool engine_given = false);

// The inter-host volume of the kernel's current pattern on the job's hosts, as node-aware-ie sees
// them (MPI_COMM_TYPE_SHARED, or virtual hosts of NETSPARSE_RANKS_PER_HOST consecutive ranks;
// docs/node-aware.md). Collective; every rank gets the same values.
struct HostVolume {
  int hosts = 1;
  int racks = 1;
  bool virtual_hosts = false;
  std::uint64_t row_bytes = 0;  // one property (K x scalar)
  // Sum over ranks of the distinct rows each rank needs from other hosts: what per-rank modes
  // (inspector-executor) carry between hosts.
  std::uint64_t rank_rows_total = 0;
  // Sum over hosts of the distinct rows each host needs from other hosts: the node-wide minimum
  // (each remote row crosses into a host once per gather); and the largest host's share.
  std::uint64_t host_rows_total = 0;
  std::uint64_t host_rows_tail = 0;
};
[[nodiscard]] HostVolume host_volume(const DistKernel& kernel);

// The line rate goodput and line utilization are divided by (bytes / second per rank): every
// rank streams `bytes` to rank (r + P/2) mod P while receiving as much from (r - P/2) mod P, all
// ranks at once -- the load under which the kernels' per-rank rates are measured -- and the
// rate is `bytes` over the slowest rank's time, best of `reps` after a warm-up. Collective;
// every rank gets the value (0 for a single rank). Used by netsparse_bench and
// bench_index_gather alike.
[[nodiscard]] double measure_line_rate(MPI_Comm comm, std::size_t bytes = std::size_t{8} << 20,
                                       int reps = 10);

}  // namespace netsparse
