// netsparse-node: node-wide NetSparse (issue 22 item 2). The ranks of a host share one NIC, as in
// the paper: one Idx Filter, one store of arrived remote properties, and one RIG engine whose
// packets to another host are that host pair's frames.
//
// Who runs the host's RIG units (NETSPARSE_NODE_ENGINES): by default every rank of the host
// (issue 34 item 3, the paper's parallel RIG units): the host pairs are dealt over the host's
// ranks, pair (h, g) to host rank (h + g) mod R on both sides, and each rank opens a RIG engine
// over its "plane", the ranks of the same host rank on every host (MPI_Comm_split). A plane
// holds one rank per host, so the rank of host h that gathers from host g talks to the rank of
// host g that serves host h, and every rank gathers and serves its share of the host's pairs
// while it computes. Every plane member registers the host's whole row range (the store's
// middle part, shared memory), so any of them can serve any of the host's rows. This needs hosts
// of equal size and no rack switch; otherwise (or with NETSPARSE_NODE_ENGINES=leader) the host's
// leader (its lowest rank) alone opens one RIG engine over the leaders' communicator. Either way
// inter-host traffic goes through the engine's real transport (MPI or verbs; never the
// intra-host shared-memory rings, which NS_CTX_NO_HOST_RINGS switches off for these contexts:
// their members are on different hosts, and on one machine with virtual hosts the rings would be
// a shortcut no cluster has).
//
// Host-shared memory (host_shared.hpp), per host:
//   control: the host barrier and the Idx Filter, one bit per column of B (row state "wanted by
//            this host"), set with an atomic test-and-set by every rank of the host;
//   store:   [off-host rows below the host's columns | the host's own rows of B | off-host rows
//            above], in column order. The middle part is the leader's registered property region
//            (a remote leader gathers any row of the host from it); the other two are where the
//            gathered rows land, each remote row once per host.
// Setup (per pattern): every rank marks the off-host columns of its remote nonzeros in the
// filter; the filter's set bits are the host's union, in column order. Each rank renumbers its
// remote nonzeros onto store positions (own host's columns point into the middle part: other
// ranks' rows of the same host are read in place, never copied) and tiles them once. The leader
// turns the union into gather plans (GatherPlan: recorded on the first run, replayed after).
// Run: each rank copies its block of B into the store; host barrier; the leader waits for every
// other host (ns_quiesce as a barrier with a deadline: their rows are in place), replays the
// plans, computes its local block while its engine serves and gathers, drains, quiesces (nobody
// reads this host's rows any more); host barrier; every rank computes its remote part reading the
// store in place. The other ranks compute their local block meanwhile.
// Owner-pushed replays (issue 34 item 3, as the per-rank compact exchange): from the third run
// of a pattern on (the first records the plans, the second arms their owners), a leader pushes
// its armed lists (ns_plan_push) as soon as its host's rows are in place, its own starts ask
// nobody (NS_SEND_PUSHED), and neither quiesce round is needed: an owner sends only when its
// rows are in place, and DistKernel's argument agreement at the start of every run is the fence
// that every rank is done with the previous run's store. The run ends with a quiesce with
// nobody (local: this leader's pushes have left, so its host may overwrite its rows). Between
// hosts a steady run then moves only rows. Not with the rack switch (its rows take the switch).
//
// Failure: every wait has a deadline. A rank that fails or dies marks (or leaves unmarked) the
// host barrier; its host's ranks throw within the deadline, the leader stops serving, and the
// other hosts' leaders get error completions (watchdog) or a quiesce timeout and throw: nothing
// waits forever. There is no MPI collective in a run.
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "config/settings.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/engine_counters.hpp"
#include "distributed/exchange.hpp"
#include "distributed/rig_engine.hpp"
#include "hosts/host_shared.hpp"
#include "hosts/rack_switch.hpp"
#include "hosts/topology.hpp"
#include "netsparse/netsparse_mpi.h"

namespace netsparse::dist {

namespace {

constexpr int kQpDepth = 4096;

// The control segment's head; the filter's words follow it at kControlHead bytes.
struct HostControl {
  HostBarrier barrier;
  explicit HostControl(int ranks) noexcept : barrier(ranks) {}
};
constexpr std::size_t kControlHead = (sizeof(HostControl) + 63) / 64 * 64;

template <class T>
class NodeRigExchange final : public Exchange<T> {
 public:
  NodeRigExchange() = default;
  ~NodeRigExchange() override { release_engine(); }
  NodeRigExchange(const NodeRigExchange&) = delete;
  NodeRigExchange& operator=(const NodeRigExchange&) = delete;

  bool needs_remote_panels() const noexcept override { return false; }

  void setup(const Pattern& pat, const RunContext& rc) override {
    if (topo_ == nullptr) first_setup(rc);
    const MPI_Comm hc = topo_->host_comm();
    const RowPartition& cols = *rc.cols;
    const int my_host = topo_->host();
    // The old plans point into the old store: gone before anything moves. The region stays
    // registered (NS_MR_RIG_ONLY): leader_setup rebinds it to the new store, no collective.
    if (ctx_) {
      plans_.clear();
      wrs_.clear();
    }
    // The host's steps below wait at the host barrier in the control segment, not an MPI
    // barrier (issue 34: every collective of a setup is a round over ranks sharing two cores
    // here, or a host's cores on a cluster). The first setup's final agreement over the job
    // (first_setup) ordered the control block's construction before any rank uses it.
    HostBarrier& barrier = control()->barrier;

    // 1. The host's Idx Filter: cleared by the leader, then every rank's test-and-sets. The
    // host's own columns that a host mate reads go into the export bits (the rows a run must
    // put into the store).
    std::atomic<std::uint64_t>* filter = filter_words();
    std::atomic<std::uint64_t>* exported = filter + words_;
    if (hrank_ == 0) {
      for (std::size_t w = 0; w < 2 * words_; ++w) filter[w].store(0, std::memory_order_relaxed);
    }
    // Each rank sets its bits in a private bitmap first and ORs only its nonzero words into
    // the host's: an atomic OR per remote nonzero was half of this setup's samples at 8 ranks
    // per host (perf, np 16: every rank's `lock or` on the same shared lines).
    local_bits_.assign(2 * words_, 0);
    std::uint64_t* const mine_filter = local_bits_.data();
    std::uint64_t* const mine_exported = mine_filter + words_;
    const auto host_end = static_cast<gidx_t>(host_first_col_ + host_rows_);
    std::uint64_t lookups = 0;
    for (const gidx_t c : pat.remote_csr.col_idx) {
      const std::uint64_t bit = std::uint64_t{1} << (c & 63);
      const bool on_host = consecutive_ ? c >= host_first_col_ && c < host_end
                                        : topo_->host_of(cols.owner(c)) == my_host;
      if (on_host) {
        mine_exported[c >> 6] |= bit;
        continue;
      }
      ++lookups;
      mine_filter[c >> 6] |= bit;
    }
    filter_lookups_ = lookups;
    barrier.wait(barrier_deadline_, "the host's Idx Filter cleared (setup)");
    for (std::size_t w = 0; w < 2 * words_; ++w) {
      if (local_bits_[w] != 0) filter[w].fetch_or(local_bits_[w], std::memory_order_relaxed);
    }
    barrier.wait(barrier_deadline_, "the host's Idx Filter set (setup)");

    // 2. The host's union in column order, and the store's layout.
    bits_.resize(words_);
    prefix_.resize(words_ + 1);
    prefix_[0] = 0;
    for (std::size_t w = 0; w < words_; ++w) {
      bits_[w] = filter[w].load(std::memory_order_relaxed);
      prefix_[w + 1] = prefix_[w] + static_cast<std::uint64_t>(std::popcount(bits_[w]));
    }
    n_union_ = prefix_[words_];
    n_low_ = union_before(host_first_col_);
    n_total_ = n_union_ + host_rows_;
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const std::size_t need = std::max<std::size_t>(64, n_total_ * k * sizeof(T));
    if (need > store_.size()) store_ = HostSegment(hc, need);  // same decision on every rank

    // The rows other hosts gather from this one: the leaders swap their unions once per
    // pattern and mark the host's columns among them; then each rank lists its exported rows.
    if (topo_->is_leader() && topo_->nhosts() > 1) mark_other_hosts_unions(cols, exported);
    barrier.wait(barrier_deadline_, "the other hosts' unions marked (setup)");
    const gidx_t cb = cols.begin(rc.rank), ce = cols.end(rc.rank);
    export_rows_.clear();
    for (gidx_t c = cb; c < ce; ++c) {
      if ((exported[c >> 6].load(std::memory_order_relaxed) >> (c & 63)) & 1) {
        export_rows_.push_back(static_cast<std::int64_t>(c - cb));
      }
    }

    // 3. This rank's remote nonzeros renumbered onto store positions, tiled once.
    CsrMatrix compact = pat.remote_csr;
    compact.n_cols = static_cast<gidx_t>(n_total_);
    for (gidx_t& c : compact.col_idx) c = static_cast<gidx_t>(store_position(c, cols));
    if (!consecutive_) sort_rows(compact);
    TileConfig cfg = pat.local_part.config();
    cfg.col_panel = 0;
    compact_ = TiledMatrix(compact, cfg, rc.scalar());

    // 4. The leader: region over the host's rows, and the union as gather plans.
    std::exception_ptr error;
    if (ctx_) {
      try {
        leader_setup(rc);
      } catch (...) {
        error = std::current_exception();
      }
    }
    agree_on_failure(rc.comm, error);
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const std::uint64_t row_bytes = rc.row_bytes();
    HostBarrier& barrier = control()->barrier;
    T* store = store_data();
    const double tp = now_seconds();
    // This rank's rows into the host's store (the region other hosts read, and the rows this
    // host's other ranks read in place).
    // Only the rows someone reads from the store (a host mate, or another host); all of them
    // in one copy when that is most of the block.
    const auto my_rows = static_cast<std::size_t>(rc.cols->size(rc.rank));
    T* mine = store + (n_low_ + hoff_[hrank_]) * k;
    if (2 * export_rows_.size() > my_rows) {
      std::copy_n(ops.b, my_rows * k, mine);
    } else {
      for (const std::int64_t r : export_rows_) {
        std::copy_n(ops.b + static_cast<std::size_t>(r) * k, k,
                    mine + static_cast<std::size_t>(r) * k);
      }
    }
    const std::uint64_t copied = 2 * export_rows_.size() > my_rows ? my_rows : export_rows_.size();
    EngineCounters before;
    double waited = 0;
    try {
      barrier.wait(barrier_deadline_, "the host's rows in place");
      if (ctx_) {
        // The run's traffic starts where the last run's ended, not here: a standby or progress
        // thread may take this run's first frames (other hosts' pushes) while this rank is
        // still in the argument agreement or the host barrier.
        before = counted_ctx_ == ctx_.get() ? last_run_end_ : EngineCounters::read(ctx_);
        const double w0 = now_seconds();
        if (!pushed_round()) {
          // Every other host's rows are in place too before anyone gathers.
          ctx_.quiesce_every_peer();
          if (!ctx_.quiesce(deadline_)) {
            throw std::runtime_error("netsparse-node: the other hosts were not ready within " +
                                     std::to_string(deadline_.count()) + " ms");
          }
        }
        if (pushing()) {
          // This host's rows are in place: its armed lists go to their requesters now (every
          // run, as a peer's start may arm its owners from its first start on).
          netsparse::detail::check(ns_plan_push(ctx_.get(), kPushTag, round_, nullptr),
                                   "ns_plan_push");
        }
        waited += now_seconds() - w0;
        post_gathers();
      }
    } catch (...) {
      barrier.fail();
      throw;
    }
    const double tc = now_seconds();
    stats.post_seconds += tc - tp - waited;
    {
      const ScopedProgressHook progress(hook());
      compute.local(pat, rc, ops);
    }
    const double t0 = now_seconds();
    std::uint64_t switch_rows = 0;
    try {
      if (rack_) {
        // The inter-rack rows through the rack switches (the engine keeps serving meanwhile).
        const RackSwitchCounters sc =
            rack_->run(reinterpret_cast<std::byte*>(store), [this] { progress_tick(this); });
        switch_rows = sc.rows_landed;
        stats.switch_lookups += sc.lookups;
        stats.switch_hits += sc.hits;
        stats.inter_rack_bytes += sc.inter_rack_bytes;
        stats.inter_rack_messages += sc.inter_rack_messages;
        stats.inter_host_bytes += sc.inter_host_bytes;
        stats.inter_host_messages += sc.inter_host_messages;
        stats.bytes_sent += sc.inter_host_bytes;
        stats.messages_sent += sc.inter_host_messages;
      }
      if (ctx_) {
        while (pending_ > 0) drain();
        // This host's rows may still be read by the others: the next run overwrites them only
        // after everyone is done (pushed: only this leader's own pushes read them).
        if (pushed_round()) ctx_.quiesce_peers({}, {});
        if (!ctx_.quiesce(deadline_)) {
          throw std::runtime_error("netsparse-node: the other hosts did not finish within " +
                                   std::to_string(deadline_.count()) + " ms");
        }
      }
      barrier.wait(barrier_deadline_, "the remote rows landed");
    } catch (...) {
      barrier.fail();
      throw;
    }
    ++round_;
    const double t1 = now_seconds();
    stats.wait_seconds += waited + (t1 - t0);
    compute.remote_all(compact_, rc, ops,
                       BasicDenseConstView<T>{store, 0, rc.k, static_cast<gidx_t>(n_total_)});
    compute.finish(pat, rc, ops);
    stats.compute_seconds += (t0 - tc) + (now_seconds() - t1);

    stats.intra_host_bytes += copied * row_bytes;
    stats.host_filter_lookups += filter_lookups_;
    if (ctx_) {
      const EngineCounters after = EngineCounters::read(ctx_);
      last_run_end_ = after;
      counted_ctx_ = ctx_.get();
      const std::uint64_t pieces_in =
          after.prs_sent - before.prs_sent + after.plan_rows - before.plan_rows;
      stats.bytes_sent += after.wire - before.wire;
      stats.messages_sent += after.frames - before.frames;  // transport messages
      stats.requests += after.prs_sent - before.prs_sent;
      stats.payload_bytes_in += pieces_in * piece_bytes_;
      stats.inter_host_bytes += after.wire - before.wire;
      stats.inter_host_payload_bytes += pieces_in * piece_bytes_;
      stats.inter_host_messages += after.frames - before.frames;
      stats.host_rows_landed += pieces_in / pieces_;
    }
    stats.inter_host_payload_bytes += switch_rows * row_bytes;
    stats.payload_bytes_in += switch_rows * row_bytes;
    stats.host_rows_landed += switch_rows;
  }

 private:
  void first_setup(const RunContext& rc) {
    topo_ = &rc.hosts();
    const MPI_Comm hc = topo_->host_comm();
    hrank_ = comm_rank(hc);
    const RowPartition& cols = *rc.cols;
    const std::vector<int>& mine = topo_->ranks_of(topo_->host());
    // Row offsets of each host rank's block in the host's part of the store, the host's first
    // column, and whether the host's columns are one contiguous range (virtual hosts always).
    hoff_.assign(mine.size() + 1, 0);
    consecutive_ = true;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      hoff_[i + 1] = hoff_[i] + static_cast<std::uint64_t>(cols.size(mine[i]));
      if (i > 0 && cols.begin(mine[i]) != cols.end(mine[i - 1])) consecutive_ = false;
    }
    host_rows_ = hoff_.back();
    host_first_col_ = cols.begin(mine.front());
    // The engine's row numbering: host h's rows (its ranks' blocks in rank order) are rows
    // [leader_off_[h], leader_off_[h + 1]); a rank's first column is row engine_base_[rank].
    const int nhosts = topo_->nhosts();
    leader_off_.assign(static_cast<std::size_t>(nhosts) + 1, 0);
    engine_base_.assign(static_cast<std::size_t>(rc.nranks), 0);
    for (int h = 0; h < nhosts; ++h) {
      std::uint64_t off = leader_off_[h];
      for (const int q : topo_->ranks_of(h)) {
        engine_base_[q] = off;
        off += static_cast<std::uint64_t>(cols.size(q));
      }
      leader_off_[h + 1] = off;
    }
    deadline_ = node_wait_deadline(*rc.options);
    words_ = static_cast<std::size_t>((cols.n_rows() + 63) / 64);
    control_ = HostSegment(hc, kControlHead + 2 * words_ * sizeof(std::uint64_t));
    if (hrank_ == 0) new (control_.data()) HostControl(comm_size(hc));
    // One engine per rank (planes) or per host (its leader); a single host has nobody to
    // gather from.
    std::exception_ptr error;
    const EngineChoice choice = engine_choice(rc, *topo_);
    use_switch_ = choice.rack_switch && topo_->nracks() > 1;
    bool equal_hosts = true;
    for (int h = 1; h < nhosts; ++h) {
      equal_hosts = equal_hosts && topo_->ranks_of(h).size() == topo_->ranks_of(0).size();
    }
    host_ranks_ = static_cast<int>(topo_->ranks_of(topo_->host()).size());
    planes_ = choice.rank_engines && equal_hosts && !use_switch_ && nhosts > 1 && host_ranks_ > 1;
    if (planes_) {
      check_mpi(MPI_Comm_split(rc.comm, hrank_, topo_->host(), &plane_comm_),
                "MPI_Comm_split (netsparse-node planes)");
    }
    engine_comm_ = planes_ ? plane_comm_ : topo_->leaders_comm();
    // A rank waits at the host barrier for its mates, one of which may wait its own engine's
    // deadline twice (other hosts at the start, completions and quiesce at the end): a rank
    // without an engine (a leader's mate) gives up later, so that the engine's error, naming
    // the cause, comes first and reaches it through the failed flag.
    barrier_deadline_ = topo_->is_leader() && !planes_ ? deadline_ : 3 * deadline_;
    if ((planes_ || topo_->is_leader()) && nhosts > 1) {
      try {
        open_engine(rc.options->engine);
        if (use_switch_) open_rack_switch(rc);
      } catch (...) {
        error = std::current_exception();
      }
    }
    agree_on_failure(rc.comm, error);
  }

  // Whether every rank runs an engine (NETSPARSE_NODE_ENGINES) and whether the rack switch is
  // on (DistOptions::rack_switch or NETSPARSE_RACK_SWITCH=1): both the same on every rank, as
  // DistKernel's argument agreement holds both variables (a disagreement is refused there, on
  // every rank with one message), and the cores from the topology's records: no collective
  // (issue 34: at scale every collective of the setup costs a round over all ranks). Rank
  // engines, auto: where every rank of every machine has a core of its own (its affinity mask
  // holds as many cores as the machine has ranks), as the parallel units then run in parallel;
  // measured on 2 cores with 4 ranks per core, the leader alone was faster
  // (docs/architecture.md).
  struct EngineChoice {
    bool rank_engines = false;
    bool rack_switch = false;
  };
  static EngineChoice engine_choice(const RunContext& rc, const Topology& topo) {
    const std::string choice = config::choice(config::Env::kNodeEngines);
    const bool on = rc.options->rack_switch || config::choice(config::Env::kRackSwitch) == "1";
    return {choice == "ranks" || (choice == "auto" && topo.cores_for_every_rank()), on};
  }

  void open_rack_switch(const RunContext& rc) {
    const RowPartition* cols = rc.cols;
    rack_ = std::make_unique<RackSwitchPath>(
        *topo_, cols->n_rows(), static_cast<std::uint32_t>(rc.row_bytes()),
        [this, cols](gidx_t c) {
          return static_cast<std::uint32_t>(topo_->host_of(cols->owner(c)));
        },
        [this, cols](gidx_t c) {
          return topo_->host_of(cols->owner(c)) == topo_->host()
                     ? store_position(c, *cols)
                     : std::numeric_limits<std::uint64_t>::max();
        },
        deadline_);
  }

  // Leader: every other host's union (its filter's set bits, from all leaders), and the columns
  // of this host among them set in `exported`.
  void mark_other_hosts_unions(const RowPartition& cols, std::atomic<std::uint64_t>* exported) {
    std::vector<gidx_t> mine;
    mine.reserve(static_cast<std::size_t>(n_union_));
    for (std::size_t w = 0; w < words_; ++w) {
      for (std::uint64_t m = bits_[w]; m != 0; m &= m - 1) {
        mine.push_back(static_cast<gidx_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(m))));
      }
    }
    const MPI_Comm lc = topo_->leaders_comm();
    const int nhosts = topo_->nhosts();
    const int n = to_mpi_count(mine.size(), "netsparse-node host union");
    std::vector<int> counts(static_cast<std::size_t>(nhosts)), displs(nhosts + 1, 0);
    check_mpi(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, lc), "MPI_Allgather");
    for (int h = 0; h < nhosts; ++h) {
      displs[h + 1] = to_mpi_count(std::uint64_t(displs[h]) + std::uint64_t(counts[h]),
                                   "netsparse-node host unions");
    }
    std::vector<gidx_t> all(static_cast<std::size_t>(displs.back()));
    ByteBlockType item(sizeof(gidx_t));
    check_mpi(MPI_Allgatherv(mine.data(), n, item.get(), all.data(), counts.data(), displs.data(),
                             item.get(), lc),
              "MPI_Allgatherv");
    // Into a private bitmap, then one OR per word (no atomic per column: see setup).
    std::vector<std::uint64_t> marks(words_, 0);
    const auto host_end = static_cast<gidx_t>(host_first_col_ + host_rows_);
    for (const gidx_t c : all) {
      const bool on_host = consecutive_ ? c >= host_first_col_ && c < host_end
                                        : topo_->host_of(cols.owner(c)) == topo_->host();
      if (on_host) marks[static_cast<std::size_t>(c >> 6)] |= std::uint64_t{1} << (c & 63);
    }
    for (std::size_t w = 0; w < words_; ++w) {
      if (marks[w] != 0) exported[w].fetch_or(marks[w], std::memory_order_relaxed);
    }
  }

  void open_engine(const EngineOptions& options) {
    // Leaders are different hosts: their frames go through MPI (or verbs), never through the
    // MPI transport's intra-host rings (see the top of the file).
    ContextAttr attr = engine_context_attr(options);
    attr.flags(options.flags | NS_CTX_NO_HOST_RINGS);
    // Over MPI a host pair's rows leave in as few messages as node-aware IE's one per pair: the
    // transport concatenates the packets to a peer off the host into frames of up to
    // NETSPARSE_MPI_FRAME_BYTES (issue 34: 64 KiB frames made 339 inter-host messages against
    // node-aware IE's 56 at np 64 = 8 hosts x 8; the leaders' context used to be opened a second
    // time with 512 KiB packets for it, and still sent 10 against 2 on kron:16 at 2 hosts).
    ctx_ = open_mpi(engine_comm_, attr);
    counted_ctx_ = nullptr;  // a new engine counts from zero
    cq_ = Cq(ctx_, 2 * kQpDepth);
    qp_ = Qp(ctx_, cq_, kQpDepth);
    inline_progress_ = ctx_.progress_mode() == NS_PROGRESS_INLINE;
  }

  void release_engine() noexcept {
    // Destructors must not throw; a handle left open is released by its own destructor.
    try {
      plans_.clear();
      rack_.reset();
      if (region_.get() != nullptr) region_.close();
      qp_.close();
      cq_.close();
      ctx_.close();
    } catch (...) {
    }
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && plane_comm_ != MPI_COMM_NULL) MPI_Comm_free(&plane_comm_);
  }

  void leader_setup(const RunContext& rc) {
    const RowPartition& cols = *rc.cols;
    // Properties larger than the transport carries travel as equal pieces (as in netsparse):
    // every leader uses the smallest limit so all agree on the split.
    T* store = store_data();
    const std::size_t k = static_cast<std::size_t>(rc.k);
    if (region_.get() == nullptr) {
      // Once per kernel (K and the host's rows do not change): the split, and the region over
      // the host's rows, read by the engine alone (no window, no MR: the RIG units serve it).
      const std::uint32_t prop_bytes = static_cast<std::uint32_t>(rc.row_bytes());
      unsigned limit = ctx_.max_prop_bytes();
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, &limit, 1, MPI_UNSIGNED, MPI_MIN, engine_comm_),
                "MPI_Allreduce");
      const std::uint32_t elems = static_cast<std::uint32_t>(rc.k);
      pieces_ = 1;
      if (prop_bytes > limit && limit >= sizeof(T)) {
        pieces_ = (prop_bytes + limit - 1) / limit;
        while (elems % pieces_ != 0) ++pieces_;
      }
      piece_bytes_ = prop_bytes / pieces_;
      std::vector<std::uint64_t> offsets(leader_off_);
      for (std::uint64_t& o : offsets) o *= pieces_;
      region_ = PropertyRegion(ctx_, store + n_low_ * k, host_rows_ * pieces_, piece_bytes_,
                               offsets, NS_MR_RIG_ONLY);
    } else {
      // A new pattern moves the host's rows in the store (n_low_) or the store itself: the
      // same rows at a new base, locally (the previous run's quiesce left nothing in flight).
      region_.rebind(store + n_low_ * k);
    }

    // The union's engine rows (pieces expanded), in store order: [low | high], as runs of
    // consecutive store rows. With the rack switch, rows of other racks go to it instead.
    idx_.clear();
    std::vector<std::array<std::uint64_t, 3>> parts;  // (first idx, idx count, first store row)
    std::vector<std::pair<gidx_t, std::uint64_t>> via_switch;
    std::uint64_t u = 0;
    for (std::size_t w = 0; w < words_; ++w) {
      for (std::uint64_t m = bits_[w]; m != 0; m &= m - 1, ++u) {
        const auto c = static_cast<gidx_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(m)));
        const int q = cols.owner(c);
        const std::uint64_t srow = u < n_low_ ? u : u + host_rows_;
        // Planes: this rank gathers only from the hosts dealt to it.
        if (planes_ && (topo_->host() + topo_->host_of(q)) % host_ranks_ != hrank_) continue;
        if (rack_ && topo_->rack_of_host(topo_->host_of(q)) != topo_->rack()) {
          via_switch.emplace_back(c, srow);
          continue;
        }
        if (parts.empty() || parts.back()[2] + parts.back()[1] / pieces_ != srow) {
          parts.push_back({idx_.size(), 0, srow});
        }
        parts.back()[1] += pieces_;
        const std::uint64_t row = engine_base_[q] + static_cast<std::uint64_t>(c - cols.begin(q));
        for (std::uint32_t p = 0; p < pieces_; ++p) idx_.push_back(row * pieces_ + p);
      }
    }
    if (rack_) rack_->set_wanted(std::move(via_switch));
    const std::size_t piece_elems = k / pieces_;
    const std::uint64_t batch = rc.options->batch;
    const std::span<const std::uint64_t> all(idx_);
    for (const auto& part : parts) {
      T* out = store + part[2] * k;
      for (std::uint64_t off = 0; off < part[1]; off += batch) {
        const std::uint64_t cnt = std::min<std::uint64_t>(batch, part[1] - off);
        wrs_.push_back(rig_wr(0, region_, all.subspan(part[0] + off, cnt),
                              std::span<T>(out + off * piece_elems, cnt * piece_elems),
                              Layout::kPositional));
      }
    }
    use_plans_ = rc.options->plans;
    if (use_plans_) {
      for (const ns_send_wr& wr : wrs_) plans_.emplace_back(ctx_, wr);
      first_pushed_round_ = round_ + 2;  // recorded in the next run, armed in the one after
    }
  }

  // Whether the plans' starts carry NS_SEND_PUSHED, and whether this run's are armed (pushed by
  // their owners; see the top of the file).
  // (A rank with nothing to gather may still serve armed lists: it pushes and quiesces alike.)
  [[nodiscard]] bool pushing() const noexcept { return use_plans_ && !rack_; }
  [[nodiscard]] bool pushed_round() const noexcept {
    return pushing() && round_ >= first_pushed_round_;
  }

  void post_gathers() {
    std::vector<ns_send_wr> chain;
    if (!plans_.empty()) {
      const std::uint32_t flags = pushing() ? NS_SEND_SIGNALED | NS_SEND_PUSHED : NS_SEND_SIGNALED;
      for (const GatherPlan& p : plans_) {
        ns_send_wr wr = plan_wr(0, p, flags);
        wr.wr.plan.push_tag = kPushTag;
        wr.wr.plan.push_round = round_;
        chain.push_back(wr);
      }
    } else {
      chain = wrs_;
    }
    pending_ = static_cast<std::int64_t>(chain.size());
    if (chain.empty()) return;
    for (std::size_t i = 0; i + 1 < chain.size(); ++i) chain[i].next = &chain[i + 1];
    ns_send_wr* next = chain.data();
    while (next != nullptr) {
      ns_send_wr* bad = nullptr;
      if (qp_.try_post(*next, &bad) == NS_OK) break;
      drain();  // the queue pair is full
      next = bad;
    }
  }

  void drain() {
    ns_wc wc[64];
    const std::size_t n = cq_.wait(wc, deadline_);
    if (n == 0) {
      throw std::runtime_error("netsparse-node: no completion within " +
                               std::to_string(deadline_.count()) + " ms");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != NS_WC_SUCCESS) throw_wc(wc[i], "netsparse-node");
      --pending_;
    }
  }

  // Application-driven progress of an INLINE engine while the leader computes (at most every
  // 5 us: a step polls the transport, the compute must not pay for it per tile).
  static void progress_tick(void* self) {
    auto& s = *static_cast<NodeRigExchange*>(self);
    if (!s.inline_progress_) return;  // the engine's own thread progresses it
    const auto now = std::chrono::steady_clock::now();
    if (now - s.last_progress_ < std::chrono::microseconds(5)) return;
    ns_progress(s.ctx_.get());
    s.last_progress_ = std::chrono::steady_clock::now();
  }
  ProgressHook hook() noexcept {
    return ctx_ && inline_progress_ ? ProgressHook{&NodeRigExchange::progress_tick, this}
                                    : ProgressHook{};
  }

  // Set filter bits before column c (the union's columns below it).
  [[nodiscard]] std::uint64_t union_before(gidx_t c) const {
    const auto w = static_cast<std::size_t>(c >> 6);
    if (w >= words_) return n_union_;
    return prefix_[w] + static_cast<std::uint64_t>(
                            std::popcount(bits_[w] & ((std::uint64_t{1} << (c & 63)) - 1)));
  }
  // Store row of a remote column of this rank.
  [[nodiscard]] std::uint64_t store_position(gidx_t c, const RowPartition& cols) const {
    const int q = cols.owner(c);
    if (topo_->host_of(q) == topo_->host()) {
      const std::vector<int>& mine = topo_->ranks_of(topo_->host());
      const auto i =
          static_cast<std::size_t>(std::find(mine.begin(), mine.end(), q) - mine.begin());
      return n_low_ + hoff_[i] + static_cast<std::uint64_t>(c - cols.begin(q));
    }
    const std::uint64_t u = union_before(c);
    return u < n_low_ ? u : u + host_rows_;
  }
  // Rows sorted by column again (only a host whose ranks' columns are not one range needs it).
  static void sort_rows(CsrMatrix& m) {
    std::vector<std::pair<gidx_t, double>> row;
    for (std::int64_t r = 0; r < m.n_rows; ++r) {
      const std::int64_t b = m.row_ptr[r], e = m.row_ptr[r + 1];
      row.clear();
      for (std::int64_t j = b; j < e; ++j) row.emplace_back(m.col_idx[j], m.values[j]);
      std::sort(row.begin(), row.end());
      for (std::int64_t j = b; j < e; ++j) {
        m.col_idx[j] = row[static_cast<std::size_t>(j - b)].first;
        m.values[j] = row[static_cast<std::size_t>(j - b)].second;
      }
    }
  }

  [[nodiscard]] HostControl* control() const noexcept {
    return std::launder(reinterpret_cast<HostControl*>(control_.data()));
  }
  [[nodiscard]] std::atomic<std::uint64_t>* filter_words() const noexcept {
    return reinterpret_cast<std::atomic<std::uint64_t>*>(control_.data() + kControlHead);
  }
  [[nodiscard]] T* store_data() const noexcept { return reinterpret_cast<T*>(store_.data()); }

  const Topology* topo_ = nullptr;  // the kernel's (RunContext::hosts)
  int hrank_ = 0;
  bool consecutive_ = true;
  std::vector<std::uint64_t> hoff_;         // host rank i's block starts at host row hoff_[i]
  std::uint64_t host_rows_ = 0;             // rows of B this host owns
  gidx_t host_first_col_ = 0;               // the host's first column
  std::vector<std::uint64_t> leader_off_;   // engine rows of each host (region offsets)
  std::vector<std::uint64_t> engine_base_;  // engine row of each rank's first column
  std::chrono::milliseconds deadline_{120000}, barrier_deadline_{120000};
  // Host-shared memory.
  // HostControl + the Idx Filter (words_ words) + the export bits (words_ words: the host's rows
  // that a host mate or another host reads)
  HostSegment control_;
  HostSegment store_;  // [low | the host's rows | high], n_total_ rows of K
  std::size_t words_ = 0;
  // The filter as this rank read it after setup, and its per-word prefix counts.
  std::vector<std::uint64_t> bits_, prefix_;
  std::uint64_t n_union_ = 0, n_low_ = 0, n_total_ = 0;
  std::vector<std::int64_t> export_rows_;  // this rank's local rows someone reads from the store
  std::uint64_t filter_lookups_ = 0;       // this rank's off-host remote nonzeros (filter lookups)
  TiledMatrix compact_;                    // this rank's remote nonzeros on store positions
  // The leader's engine (empty on the other ranks, and with a single host).
  Context ctx_;
  Cq cq_;
  Qp qp_;
  PropertyRegion region_;
  std::vector<std::uint64_t> local_bits_;  // this rank's filter and export bits, before the OR
  bool inline_progress_ = false;
  // The engine's counters when the last run ended, and the context they belong to.
  EngineCounters last_run_end_;
  const void* counted_ctx_ = nullptr;
  std::chrono::steady_clock::time_point last_progress_{};
  std::uint32_t pieces_ = 1, piece_bytes_ = 0;
  std::vector<std::uint64_t> idx_;  // the union's engine rows, in store order
  std::vector<ns_send_wr> wrs_;     // the gathers (POSITIONAL into the store)
  std::vector<GatherPlan> plans_;   // the same as plans (DistOptions::plans)
  std::int64_t pending_ = 0;
  // Pushed replays: the leaders' run counter (every leader runs every run: they agree), and the
  // first run whose plans are armed. One exchange per context: one tag.
  static constexpr std::uint32_t kPushTag = 1;
  bool use_plans_ = false;
  std::uint32_t round_ = 0;
  std::uint32_t first_pushed_round_ = std::numeric_limits<std::uint32_t>::max();
  bool use_switch_ = false;
  // Planes (the default): every rank runs an engine over the ranks of its host rank on every
  // host; else the leaders' communicator. Both set at the first setup, agreed on every rank.
  bool planes_ = false;
  int host_ranks_ = 1;
  MPI_Comm plane_comm_ = MPI_COMM_NULL;
  MPI_Comm engine_comm_ = MPI_COMM_NULL;
  std::unique_ptr<RackSwitchPath> rack_;  // leaders, with the rack switch on
};

}  // namespace

NETSPARSE_EXCHANGE_FACTORY(make_node_rig_exchange, NodeRigExchange);

}  // namespace netsparse::dist
