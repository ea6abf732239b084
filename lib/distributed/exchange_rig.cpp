// The RIG engine modes: netsparse (NS_WR_RIG per column panel, INDEXED into a panel window,
// double-buffered) and sa-vanilla (one NS_WR_RDMA_READ per remote nonzero), plus RigEngine.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/neighbours.hpp"
#include "config/settings.hpp"
#include "distributed/distinct_columns.hpp"
#include "distributed/ghosts.hpp"
#include "distributed/kernel_impl.hpp"
#include "distributed/mpi_util.hpp"
#include "distributed/panel_stream.hpp"
#include "netsparse/netsparse_mpi.h"
#include "rig/finalize_hook.hpp"
#include "sparse/csr_part.hpp"
#include "support/visibility.hpp"

namespace netsparse {

// ---- RigEngine -------------------------------------------------------------------------------

struct NETSPARSE_LOCAL RigEngine::Impl {
  static constexpr int kQpDepth = 4096;
  static constexpr int kWaitTimeoutMs = 120000;

  MPI_Comm comm = MPI_COMM_NULL;
  EngineOptions options;
  Context ctx;
  Cq cq;
  Qp qp;
  PropertyRegion region;
  const void* reg_base = nullptr;
  std::uint32_t reg_prop_bytes = 0;
  std::uint64_t reg_rows = 0;
  std::vector<std::uint64_t> reg_offsets;
  bool reg_rig_only = false;  // registered NS_MR_RIG_ONLY (begin_run), not for RDMA READs
  // A property larger than the transport carries in one message (ns_max_prop_bytes) is
  // registered as `pieces` consecutive sub-rows of piece_bytes each: row i is sub-rows
  // i*pieces .. i*pieces+pieces-1, contiguous in the row-major block, so every window layout
  // stays byte-for-byte the same and the engine's statistics count the pieces it moves.
  std::uint32_t pieces = 1;
  std::uint32_t piece_bytes = 0;

  // The property region of a run: the operand's local block. A run's start is already
  // collective (DistKernel agrees on the run's arguments: no peer posts before every rank has
  // entered the run, i.e. is done changing its operand), so what the region needs depends on who
  // reads it:
  //  - RIG runs (rig_only) register it NS_MR_RIG_ONLY, read by the engine alone: an operand that
  //    moved (ping-pong buffers) is rebound locally, and nothing here is collective unless the
  //    region's shape changes (row bytes, partition), which happens on every rank alike since
  //    every rank runs the same kernels in the same order;
  //  - sa-vanilla reads it one-sidedly (MPI window, verbs MR): a moved operand on any rank needs
  //    a collective re-registration, so the ranks agree every run whether one is stale. A rank
  //    that never joins (it died between runs) makes the others throw after `deadline`
  //    (DistKernel's node_wait_deadline) instead of hanging.
  void ensure_region(const void* base, std::uint64_t rows, std::uint32_t prop_bytes,
                     std::uint32_t elem_bytes, const RowPartition& cols, bool rig_only,
                     std::chrono::milliseconds deadline) {
    const bool same_shape = registered_as(rows, prop_bytes, cols, rig_only);
    int stale = 1;
    if (rig_only) {
      if (same_shape) {
        rebind_if_moved(base);  // bind_operand did it already before the run's start
        return;
      }
    } else {
      stale = same_shape && reg_base == base ? 0 : 1;
      agreement::allreduce_within(&stale, 1, MPI_INT, MPI_MAX, comm, deadline);
    }
    if (!stale) return;
    if (region.get() != nullptr) region.close();
    std::vector<std::uint64_t> offsets(cols.offsets().begin(), cols.offsets().end());
    // Split only when needed, into the fewest equal pieces (a divisor of the row's elements)
    // that each fit; every rank uses the smallest limit so all agree on the split.
    unsigned limit = ctx.max_prop_bytes();
    dist::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &limit, 1, MPI_UNSIGNED, MPI_MIN, comm),
                    "MPI_Allreduce");
    const std::uint32_t elems = prop_bytes / elem_bytes;
    pieces = 1;
    if (prop_bytes > limit && limit >= elem_bytes) {
      pieces = (prop_bytes + limit - 1) / limit;
      while (elems % pieces != 0) ++pieces;  // ends at pieces == elems (one element each)
    }
    piece_bytes = prop_bytes / pieces;
    std::vector<std::uint64_t> piece_offsets(offsets);
    for (std::uint64_t& o : piece_offsets) o *= pieces;
    // The engine only reads the region (peers' requests); the API takes a void*.
    region = PropertyRegion(ctx, const_cast<void*>(base), rows * pieces, piece_bytes, piece_offsets,
                            rig_only ? std::uint32_t{NS_MR_RIG_ONLY} : 0u);
    reg_base = base;
    reg_prop_bytes = prop_bytes;
    reg_rows = rows;
    reg_offsets = std::move(offsets);
    reg_rig_only = rig_only;
    ++registrations;
  }
  std::uint64_t registrations = 0;  // regions registered so far (plans record afresh after one)
  // Push tags (ns_plan_push) of the compact exchanges on this engine: every rank creates its
  // kernels in the same order (their construction is collective), so the n-th is n everywhere.
  std::uint32_t next_push_tag = 1;

  // The engine's counters when its last run ended (RigEngine::reset_stats zeroes them with the
  // engine's): the start of the next run's traffic, whichever kernel runs it.
  dist::EngineCounters last_run_end;
  bool ran = false;
  dist::EngineCounters counters_since_last_run(const RigEngine& engine) {
    if (!ran) {
      ran = true;
      last_run_end = dist::EngineCounters::read(engine);
    }
    return last_run_end;
  }

  // A RIG-only region of the same shape moves to `base` (local). Only while no peer can read it:
  // before this rank has entered the run (RigExchange::bind_operand); with a progress thread a
  // peer that entered the run may otherwise be answered from the old block.
  void rebind_if_moved(const void* base) {
    if (reg_base == base) return;
    region.rebind(const_cast<void*>(base));  // the engine only reads it (see ensure_region)
    reg_base = base;
  }
  // Whether the region is registered (rig_only or for one-sided reads) with this shape.
  bool registered_as(std::uint64_t rows, std::uint32_t prop_bytes, const RowPartition& cols,
                     bool rig_only) const {
    return region.get() != nullptr && reg_rig_only == rig_only && reg_prop_bytes == prop_bytes &&
           reg_rows == rows &&
           std::equal(reg_offsets.begin(), reg_offsets.end(), cols.offsets().begin(),
                      cols.offsets().end());
  }

  // Application-driven progress (INLINE engines): the kernels call this between tiles; it steps
  // the engine at most every progress_interval_ns so that an idle engine costs the compute
  // little (a step polls the transport) while peers still get their answers within microseconds.
  std::uint64_t progress_interval_ns = 5000;  // NETSPARSE_PROGRESS_INTERVAL_NS, read at open
  bool inline_progress = false;
  std::chrono::steady_clock::time_point last_progress{};
  double progress_seconds = 0;  // spent in progress_tick's engine steps
  // A run announces its quiesce round as soon as it will post nothing more (right after
  // posting, where every gather is posted up front; after the last panel's wait otherwise);
  // once the round is complete here (its gathers are done and every peer is done with this
  // rank), nothing of the run needs the engine any more and the ticks stop (round_complete):
  // on a fixed pattern the replays are answered early in the local part, and the rest of the
  // computation no longer pays an engine poll every progress_interval_ns. Both are reset when
  // the next run starts.
  bool round_announced = false;
  bool round_complete = false;
  // This run posts nothing more: the peers learn it as soon as its gathers are done. Once per run.
  void announce_round() {
    if (round_announced) return;
    ctx.quiesce_start();
    round_announced = true;
  }
  static void progress_tick(void* self) {
    auto& s = *static_cast<Impl*>(self);
    if (s.round_complete) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - s.last_progress < std::chrono::nanoseconds(s.progress_interval_ns)) return;
    ns_progress(s.ctx.get());
    // The C call: a hook inside a kernel must not throw (a failure shows at the run's end).
    int done = 0;
    if (s.round_announced && ns_quiesce_test(s.ctx.get(), &done) == NS_OK) {
      s.round_complete = done != 0;
    }
    s.last_progress = std::chrono::steady_clock::now();
    s.progress_seconds += std::chrono::duration<double>(s.last_progress - now).count();
  }
  ProgressHook hook() noexcept {
    return inline_progress ? ProgressHook{&Impl::progress_tick, this} : ProgressHook{};
  }

  // Releases the engine (collective): region, queue pair, completion queue, context. Run by the
  // destructor, or at the start of MPI_Finalize for an engine still alive then (finalize_hook);
  // afterwards every handle is empty and the destructor calls nothing.
  rig::FinalizeHook finalize_hook;
  void release() noexcept {
    // Destructors must not throw; a handle left open is released by its own destructor.
    try {
      if (region.get() != nullptr) region.close();
    } catch (...) {
    }
    try {
      qp.close();
      cq.close();
      ctx.close();
    } catch (...) {
    }
  }

  // Waits for every peer to be done with this rank's block, as long as the other waits of a run
  // (watchdog_wait_deadline: a peer that died mid-run must not hold the survivors here for two
  // minutes when a watchdog is set).
  void quiesce() {
    const std::chrono::milliseconds deadline = dist::watchdog_wait_deadline(options.watchdog_ms);
    if (!ctx.quiesce(deadline)) {
      throw std::runtime_error("RIG engine: ns_quiesce timed out after " +
                               std::to_string(deadline.count()) + " ms (a peer stopped serving?)");
    }
  }
};

RigEngine::RigEngine(MPI_Comm comm, const EngineOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.comm = comm;
  s.options = options;
  const ContextAttr attr = dist::engine_context_attr(options);
  // Opening is collective; a failure on one rank must not leave the others waiting.
  std::exception_ptr error;
  try {
    s.ctx = open_mpi(comm, attr);  // validates the environment (config/settings.hpp)
    s.progress_interval_ns =
        static_cast<std::uint64_t>(config::integer(config::Env::kProgressIntervalNs));
  } catch (...) {
    error = std::current_exception();
  }
  dist::agree_on_failure(comm, error);
  s.cq = Cq(s.ctx, 2 * Impl::kQpDepth);
  s.qp = Qp(s.ctx, s.cq, Impl::kQpDepth);
  s.inline_progress = s.ctx.progress_mode() == NS_PROGRESS_INLINE;
  s.finalize_hook = rig::FinalizeHook([&s] { s.release(); });
}

RigEngine::~RigEngine() {
  impl_->finalize_hook.release();
  impl_->release();
}

const EngineOptions& RigEngine::options() const noexcept {
  return impl_->options;
}
std::string RigEngine::transport_name() const {
  return impl_->ctx.transport_name();
}
std::uint64_t RigEngine::stat(int which) const {
  return impl_->ctx.stat(static_cast<ns_stat>(which));
}
double RigEngine::prs_per_packet() const {
  return impl_->ctx.prs_per_packet();
}
std::string RigEngine::stats_json() const {
  return impl_->ctx.stats_json();
}
void RigEngine::reset_stats() {
  impl_->ctx.stats_reset();
  impl_->last_run_end = dist::EngineCounters{};
}

namespace dist {

void throw_wc(const ns_wc& wc, const char* mode) {
  throw std::runtime_error(
      std::string(mode) + ": work request " + std::to_string(wc.wr_id) + " (" +
      ns_wr_opcode_str(wc.opcode) + ") failed: " + ns_wc_status_str(wc.status) +
      (wc.vendor_err != 0 ? " (vendor_err " + std::to_string(wc.vendor_err) + ")" : std::string()));
}

namespace {

template <class T>
class RigExchange final : public Exchange<T> {
 public:
  RigExchange(std::shared_ptr<RigEngine> engine, RigVariant variant)
      : engine_(std::move(engine)),
        vanilla_(variant == RigVariant::vanilla),
        direct_(variant == RigVariant::direct),
        compact_(variant == RigVariant::compact) {}

  bool needs_remote_panels() const noexcept override { return !direct_ && !compact_; }

  void bind_operand(const void* operand, const RunContext& rc) override {
    if (vanilla_) return;  // its region is read one-sidedly: re-registered collectively
    RigEngine::Impl& e = engine_->impl();
    const auto rows = static_cast<std::uint64_t>(rc.cols->size(rc.rank));
    if (e.registered_as(rows, static_cast<std::uint32_t>(rc.row_bytes()), *rc.cols, true)) {
      e.rebind_if_moved(operand);
    }
  }
  bool direct_csr() const noexcept override { return direct_; }

  void setup(const Pattern& pat, const RunContext& rc) override {
    if (direct_) {
      setup_direct(pat, rc);
      return;
    }
    if (!vanilla_) find_pattern_peers(pat, rc);
    if (compact_) {
      // A fixed pattern: gather the distinct remote columns straight into a compact buffer
      // (POSITIONAL), computed with the remote part renumbered onto it, as the
      // inspector-executor does (same kernel, same cache behaviour); the setup is paid once.
      plans_.clear();  // they gather into the window resized below
      push_tag_ = engine_->impl().next_push_tag++;
      ghosts_.build(pat.remote_csr, rc.cols->n_rows(), pat.local_part.config(), rc.scalar());
      window_[0].resize(ghosts_.ghosts().size() * static_cast<std::size_t>(rc.k));
      window_[1].clear();
      return;
    }
    // One window per panel in flight: the second only when there are several panels.
    const std::size_t window_elems = static_cast<std::size_t>(pat.window) * rc.k;
    window_[0].resize(window_elems);
    window_[1].resize(pat.remote_panels.size() > 1 ? window_elems : 0);
    nonzero_idx_.clear();
    nonzero_ptr_.assign(1, 0);
    if (!vanilla_ && rc.options->rig_idx == RigIdxSource::nonzeros) {
      // The per-nonzero idx stream of each remote panel, in tile order (what the paper's host
      // posts: the NIC filters and coalesces the repeats).
      for (int j : pat.remote_panels) {
        for (PanelIdxStream s(pat.remote_part, j, false); s.valid(); s.next()) {
          nonzero_idx_.push_back(static_cast<std::uint64_t>(s.idx()));
        }
        nonzero_ptr_.push_back(nonzero_idx_.size());
      }
    }
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    RigEngine::Impl& e = engine_->impl();
    const auto prop_bytes = static_cast<std::uint32_t>(rc.row_bytes());
    // This run's traffic: everything the engine counted since the previous run on it ended
    // (with a progress thread, a peer that entered this run first may already be answered).
    const EngineCounters before = e.counters_since_last_run(*engine_);
    e.ensure_region(ops.b, static_cast<std::uint64_t>(rc.cols->size(rc.rank)), prop_bytes,
                    sizeof(T), *rc.cols, /*rig_only=*/!vanilla_, node_wait_deadline(*rc.options));
    e.progress_seconds = 0;
    e.round_announced = e.round_complete = false;
    ++round_;  // every rank alike (runs are collective), whether the run succeeds or not
    // The run's quiesce round talks to the pattern's peers only (a fixed pattern); a pattern
    // that changes every run, or one-sided reads, keep every node.
    if (compact_ && rc.options->plans && (plans_.empty() || e.registrations != plans_region_)) {
      first_pushed_round_ = round_ + 2;  // recorded in this run, armed in the next
      plans_region_ = e.registrations;
    }
    if (compact_ && rc.options->plans && round_ >= first_pushed_round_) {
      // Every row of the run is pushed by its owner, and a pusher is done once its pushes
      // left: the round needs no control message at all.
      e.ctx.quiesce_peers({}, {});
    } else if (peers_known_ && !direct_) {
      e.ctx.quiesce_peers(owners_, requesters_);
    } else {
      e.ctx.quiesce_every_peer();
    }
    if (vanilla_) {
      run_vanilla(pat, rc, ops, compute, stats);
    } else if (direct_) {
      run_direct(pat, rc, ops, stats);
    } else if (compact_) {
      run_compact(pat, rc, ops, compute, stats);
    } else {
      run_rig(pat, rc, ops, compute, stats);
    }
    const double t0 = now_seconds();
    // Peers may still be reading this rank's block: nobody returns (and lets the caller change
    // its operand) before every rank is done.
    e.quiesce();
    stats.sync_seconds += now_seconds() - t0;
    stats.progress_seconds += e.progress_seconds;
    const EngineCounters after = EngineCounters::read(*engine_);
    e.last_run_end = after;
    if (vanilla_) {
      // RDMA READs leave the engine's packet counters alone; model each as the paper's lone PR:
      // a 78 B request packet and a 78 B + property response packet.
      const std::uint64_t reads = after.rdma_reads - before.rdma_reads;
      stats.requests += reads;
      stats.messages_sent += 2 * reads;
      stats.bytes_sent += reads * concat::lone_read_wire_bytes(e.piece_bytes);
      stats.payload_bytes_in += reads * e.piece_bytes;
    } else {
      stats.bytes_sent += after.wire - before.wire;
      stats.messages_sent += after.packets - before.packets;
      stats.requests += after.prs_sent - before.prs_sent;
      stats.payload_bytes_in +=
          (after.prs_sent - before.prs_sent + after.plan_rows - before.plan_rows) * e.piece_bytes;
    }
  }

 private:
  // The owners this rank gathers from (the remote columns' owners) and the ranks that gather
  // from it: the peers of a run's quiesce round (ns_quiesce_peers), found once per pattern with
  // one sparse exchange (agreement::sources_of, O(neighbours)), so that a run's control traffic
  // grows with the pattern's peers, not with the job (issue 34).
  void find_pattern_peers(const Pattern& pat, const RunContext& rc) {
    owners_.clear();
    for (const gidx_t c : pat.remote_csr.col_idx) {
      const int o = rc.cols->owner(c);
      if (owners_.empty() || owners_.back() != o) owners_.push_back(o);
    }
    std::sort(owners_.begin(), owners_.end());
    owners_.erase(std::unique(owners_.begin(), owners_.end()), owners_.end());
    requesters_ = agreement::sources_of(rc.comm, owners_, node_wait_deadline(*rc.options));
    peers_known_ = true;
  }

  // The idxs of the region's sub-rows for `idx` when properties travel in pieces (row i ->
  // i*pieces + c, c ascending), written to `buf`; `idx` itself when they do not.
  static std::span<const std::uint64_t> piece_idx(std::span<const std::uint64_t> idx,
                                                  std::uint64_t pieces,
                                                  std::vector<std::uint64_t>& buf) {
    if (pieces == 1) return idx;
    buf.resize(idx.size() * pieces);
    std::uint64_t* out = buf.data();
    for (const std::uint64_t i : idx) {
      for (std::uint64_t c = 0; c < pieces; ++c) *out++ = i * pieces + c;
    }
    return buf;
  }

  // Handles completions already in the CQ (or waits up to the timeout for one when `block`).
  void drain(bool block, const char* mode) {
    RigEngine::Impl& e = engine_->impl();
    ns_wc wc[64];
    const std::size_t n =
        block ? e.cq.wait(wc, std::chrono::milliseconds(RigEngine::Impl::kWaitTimeoutMs))
              : e.cq.poll(wc);
    if (block && n == 0) {
      throw std::runtime_error(std::string(mode) + ": no completion within " +
                               std::to_string(RigEngine::Impl::kWaitTimeoutMs) + " ms");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != NS_WC_SUCCESS) throw_wc(wc[i], mode);
      --pending_[wc[i].wr_id & 1];
    }
  }

  // Posts a chain, polling completions while the queue is full.
  void post_chain(ns_send_wr* first, const char* mode) {
    RigEngine::Impl& e = engine_->impl();
    ns_send_wr* next = first;
    while (next != nullptr) {
      ns_send_wr* bad = nullptr;
      const ns_status_t st = e.qp.try_post(*next, &bad);
      if (st == NS_OK) return;
      drain(true, mode);  // NS_ERR_NO_RESOURCE: the queue pair is full
      next = bad;
    }
  }

  // Ends the local computation begun at t (its time counted), waits for the gathers of slot 0
  // and tells the peers this rank needs nothing more (the wait counted); returns the time then.
  double wait_for_gathers(double t, CommStats& stats) {
    const double t0 = now_seconds();
    stats.compute_seconds += t0 - t;
    while (pending_[0] > 0) drain(true, "netsparse");
    engine_->impl().announce_round();  // everything this rank needs has arrived
    const double t1 = now_seconds();
    stats.wait_seconds += t1 - t0;
    return t1;
  }

  // Links wrs into one chain, adds them to slot's pending count and posts them.
  void post_linked(std::vector<ns_send_wr>& wrs, std::size_t slot, const char* mode) {
    if (wrs.empty()) return;
    for (std::size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
    pending_[slot] += static_cast<std::int64_t>(wrs.size());
    post_chain(wrs.data(), mode);
  }

  // The positional gathers of idx into window_[0], `batch` idxs (of piece_elems elements) each,
  // handed to take(wr) in order.
  template <class Take>
  void positional_batches(std::span<const std::uint64_t> idx, std::uint64_t batch,
                          std::size_t piece_elems, Take take) {
    RigEngine::Impl& e = engine_->impl();
    for (std::uint64_t off = 0; off < idx.size(); off += batch) {
      const std::uint64_t cnt = std::min<std::uint64_t>(batch, idx.size() - off);
      take(rig_wr(0, e.region, idx.subspan(off, cnt),
                  std::span<T>(window_[0]).subspan(off * piece_elems, cnt * piece_elems),
                  Layout::kPositional));
    }
  }

  void post_panel(const Pattern& pat, const RunContext& rc, std::size_t slot_j, int panel_pos,
                  bool new_epoch) {
    RigEngine::Impl& e = engine_->impl();
    const int panel = pat.remote_panels[panel_pos];
    std::span<const std::uint64_t> idx;
    if (rc.options->rig_idx == RigIdxSource::nonzeros) {
      idx = std::span<const std::uint64_t>(nonzero_idx_)
                .subspan(nonzero_ptr_[panel_pos],
                         nonzero_ptr_[panel_pos + 1] - nonzero_ptr_[panel_pos]);
    } else {
      const auto cols = pat.remote_part.panel_columns(panel);
      // Column ids are non-negative, so their int64 and uint64 representations agree.
      idx = {reinterpret_cast<const std::uint64_t*>(cols.data()), cols.size()};
    }
    const IndexRange w = pat.remote_part.col_panel_range(panel);
    const std::uint64_t batch = rc.options->batch;
    const std::uint64_t pieces = e.pieces;
    idx = piece_idx(idx, pieces, piece_buf_[slot_j & 1]);
    std::vector<ns_send_wr>& wrs = wrs_[slot_j & 1];
    wrs.clear();
    for (std::uint64_t off = 0; off < idx.size(); off += batch) {
      const std::uint64_t n = std::min<std::uint64_t>(batch, idx.size() - off);
      wrs.push_back(rig_wr(slot_j, e.region, idx.subspan(off, n), std::span<T>(window_[slot_j & 1]),
                           Layout::kIndexed, static_cast<std::uint64_t>(w.begin) * pieces,
                           static_cast<std::uint64_t>(w.size()) * pieces));
    }
    if (wrs.empty()) return;
    if (new_epoch) wrs.front().send_flags |= NS_SEND_NEW_EPOCH;
    post_linked(wrs, slot_j & 1, "netsparse");
  }

  void run_rig(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
               Compute<T>& compute, CommStats& stats) {
    RigEngine::Impl& e = engine_->impl();
    const auto n = pat.remote_panels.size();
    // The operand may have changed since the last run: a new Idx Filter epoch at the start.
    // With per-nonzero idxs every panel starts its own epoch, so the filter (whose entries
    // must share one output mapping) serves each panel's window; distinct panels never share
    // a column, so nothing is lost.
    const bool epoch_per_panel = rc.options->rig_idx == RigIdxSource::nonzeros;
    // Without a progress thread the kernels drive the engine between tiles (see Impl::hook).
    const ScopedProgressHook progress(engine_->impl().hook());
    pending_[0] = pending_[1] = 0;
    double t = now_seconds();
    if (n > 0) post_panel(pat, rc, 0, 0, true);
    stats.post_seconds += now_seconds() - t;
    t = now_seconds();
    compute.local(pat, rc, ops);
    stats.compute_seconds += now_seconds() - t;
    for (std::size_t j = 0; j < n; ++j) {
      t = now_seconds();
      if (j + 1 < n) post_panel(pat, rc, j + 1, static_cast<int>(j + 1), epoch_per_panel);
      const double t0 = now_seconds();
      stats.post_seconds += t0 - t;
      while (pending_[j & 1] > 0) drain(true, "netsparse");
      // Everything this rank needs has arrived: tell the peers now, so the quiesce at the end
      // of the run costs no round trip while this rank computes its last panel.
      if (j + 1 == n) e.announce_round();
      const double t1 = now_seconds();
      stats.wait_seconds += t1 - t0;
      const int panel = pat.remote_panels[j];
      const IndexRange w = pat.remote_part.col_panel_range(panel);
      compute.remote_panel(pat, rc, ops, panel,
                           BasicDenseConstView<T>{window_[j & 1].data(), w.begin, rc.k, w.size()});
      stats.compute_seconds += now_seconds() - t1;
    }
    compute.finish(pat, rc, ops);
  }

  // ---- compact mode (a fixed pattern, distinct columns) ----
  void run_compact(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                   Compute<T>& compute, CommStats& stats) {
    RigEngine::Impl& e = engine_->impl();
    const ScopedProgressHook progress(e.hook());
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const std::vector<gidx_t>& ghosts = ghosts_.ghosts();
    double t = now_seconds();
    std::vector<ns_send_wr>& wrs = wrs_[0];
    wrs.clear();
    // Column ids are non-negative, so their int64 and uint64 representations agree.
    const std::span<const std::uint64_t> idx =
        piece_idx({reinterpret_cast<const std::uint64_t*>(ghosts.data()), ghosts.size()}, e.pieces,
                  piece_buf_[0]);
    const std::size_t piece_elems = k / e.pieces;
    const std::uint64_t batch = rc.options->batch;
    // A plan per batch, created on the first run (a region must be registered): they record on
    // their first start and replay afterwards (a region registered again re-records them).
    const bool use_plans = rc.options->plans;
    if (use_plans && plans_.empty()) {
      positional_batches(idx, batch, piece_elems,
                         [&](const ns_send_wr& wr) { plans_.emplace_back(e.ctx, wr); });
    }
    if (use_plans) {
      // Owner-pushed replays (ns_plan_push): this rank's armed lists go to their requesters now
      // (the run's argument agreement is the fence: every rank has entered this run, done with
      // the previous one's output), and its own starts ask nobody once armed.
      netsparse::detail::check(ns_plan_push(e.ctx.get(), push_tag_, round_, nullptr),
                               "ns_plan_push");
      for (const GatherPlan& p : plans_) {
        ns_send_wr wr = plan_wr(0, p, NS_SEND_SIGNALED | NS_SEND_PUSHED);
        wr.wr.plan.push_tag = push_tag_;
        wr.wr.plan.push_round = round_;
        wrs.push_back(wr);
      }
    } else {
      positional_batches(idx, batch, piece_elems, [&](const ns_send_wr& wr) { wrs.push_back(wr); });
    }
    pending_[0] = 0;  // whatever a failed run left behind
    post_linked(wrs, 0, "netsparse");
    e.announce_round();
    stats.post_seconds += now_seconds() - t;
    t = now_seconds();
    compute.local(pat, rc, ops);
    const double t1 = wait_for_gathers(t, stats);
    compute.remote_all(
        ghosts_.compact(), rc, ops,
        BasicDenseConstView<T>{window_[0].data(), 0, rc.k, static_cast<gidx_t>(ghosts.size())});
    compute.finish(pat, rc, ops);
    stats.compute_seconds += now_seconds() - t1;
  }

  // ---- direct mode (DistOptions::dynamic_pattern) ----
  // Nothing is prepared per pattern: each run takes the CSR rows as they are.
  //   SpMM / SpMV: two streaming passes over the column stream find the distinct remote columns
  //     (a bitmap over the columns, DistinctColumns) and write the remote nonzeros renumbered
  //     onto them; the distinct list is
  //     gathered POSITIONAL into a compact buffer while the local columns are computed; the
  //     remote part is then computed from the compact buffer (cache-resident where a window
  //     over every column is not).
  //   SDDMM: its outputs follow the CSR's own order, so it posts the CSR's column array as it is
  //     (NS_SEND_REMOTE_ONLY, the engine's Idx Filter drops the repeats) into a window over
  //     every column.
  void setup_direct(const Pattern&, const RunContext& rc) {
    constexpr std::uint64_t kMaxBytes = std::uint64_t{2} << 30;
    const auto n_cols = static_cast<std::uint64_t>(rc.cols->n_rows());
    if (rc.kernel == KernelKind::sddmm) {
      const std::uint64_t window_bytes = n_cols * rc.row_bytes();
      if (window_bytes > kMaxBytes) {
        throw std::length_error(
            "netsparse SDDMM with a changing pattern gathers into a window over every column: " +
            std::to_string(window_bytes) +
            " bytes (n_cols x K x element size) exceeds the 2 GiB limit; use a fixed pattern "
            "(tiled, windowed) or a smaller K");
      }
      window_[0].resize(static_cast<std::size_t>(n_cols) * rc.k);
      return;
    }
    if (n_cols > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("netsparse with a changing pattern numbers columns in 32 bits: " +
                              std::to_string(n_cols) + " columns; use a fixed pattern");
    }
    if (distinct_.n_cols() != rc.cols->n_rows()) distinct_.reset(rc.cols->n_rows());
  }

  // The bulk pass: ghost_list_ = the distinct remote columns in ascending order, remote_ = the
  // remote nonzeros with their columns renumbered onto that list (DistinctColumns says why two
  // streaming passes over a bitmap and not one pass over a tag per column).
  void split_remote(const CsrMatrix& a, gidx_t cb, gidx_t ce) {
    const std::int64_t n = a.n_rows;
    remote_.n_rows_global = a.n_rows_global;
    remote_.row_begin = a.row_begin;
    remote_.n_rows = n;
    // Grown, never shrunk: a kernel reads row_ptr.back() nonzeros, the rest is spare room, and
    // growing again after a shrink would zero-fill megabytes every run.
    remote_.row_ptr.resize(static_cast<std::size_t>(n) + 1);
    if (remote_.col_idx.size() < static_cast<std::size_t>(a.nnz())) {
      remote_.col_idx.resize(static_cast<std::size_t>(a.nnz()));
      remote_.values.resize(static_cast<std::size_t>(a.nnz()));
    }
    ghost_list_.clear();
    const gidx_t* col = a.col_idx.data();
    const double* val = a.values.data();
    gidx_t* rcol = remote_.col_idx.data();
    double* rval = remote_.values.data();
    std::int64_t out = 0;
    remote_.row_ptr[0] = 0;
    // Pass 1: copy the remote nonzeros with their global columns, marking the columns. One
    // branch-free stream over every nonzero: each is written at `out` and kept by advancing
    // `out` only for a remote column (a local one is overwritten by the next), so neither a
    // per-row search for the local run nor a mispredicted branch per nonzero is paid.
    const auto local_width = static_cast<std::uint64_t>(ce - cb);
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t b = a.row_ptr[r], e = a.row_ptr[r + 1];
      for (std::int64_t j = b; j < e; ++j) {
        const gidx_t c = col[j];
        const bool remote = static_cast<std::uint64_t>(c - cb) >= local_width;
        distinct_.mark_if(c, remote);
        rcol[out] = c;
        rval[out] = val[j];
        out += remote ? 1 : 0;
      }
      remote_.row_ptr[static_cast<std::size_t>(r) + 1] = out;
    }
    // Pass 2: number the distinct columns and renumber the copied nonzeros onto them.
    distinct_.number(ghost_list_);
    for (std::int64_t j = 0; j < out; ++j) rcol[j] = distinct_.slot(rcol[j]);
    distinct_.clear();
    remote_.n_cols = static_cast<gidx_t>(ghost_list_.size());
  }

  void run_direct(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                  CommStats& stats) {
    RigEngine::Impl& e = engine_->impl();
    const CsrMatrix& a = *pat.direct;
    const ScopedProgressHook progress(e.hook());
    const int k = rc.k;
    const gidx_t cb = pat.col_begin, ce = pat.col_end;
    const gidx_t n_cols = rc.cols->n_rows();
    const bool compact = rc.kernel != KernelKind::sddmm;
    double t = now_seconds();
    const std::uint64_t batch = rc.options->batch;
    std::vector<ns_send_wr>& wrs = wrs_[0];
    wrs.clear();
    if (compact) {
      split_remote(a, cb, ce);
      const std::size_t need = ghost_list_.size() * static_cast<std::size_t>(k);
      if (window_[0].size() < need) window_[0].resize(need);
      const std::span<const std::uint64_t> idx = piece_idx(ghost_list_, e.pieces, piece_buf_[0]);
      const std::size_t piece_elems = static_cast<std::size_t>(k) / e.pieces;
      positional_batches(idx, batch, piece_elems, [&](const ns_send_wr& wr) { wrs.push_back(wr); });
    } else {
      // Column ids are non-negative, so their int64 and uint64 representations agree.
      const std::span<const std::uint64_t> idx =
          piece_idx({reinterpret_cast<const std::uint64_t*>(a.col_idx.data()), a.col_idx.size()},
                    e.pieces, piece_buf_[0]);
      for (std::uint64_t off = 0; off < idx.size(); off += batch) {
        const std::uint64_t cnt = std::min<std::uint64_t>(batch, idx.size() - off);
        wrs.push_back(rig_wr(0, e.region, idx.subspan(off, cnt), std::span<T>(window_[0]),
                             Layout::kIndexed, 0, static_cast<std::uint64_t>(n_cols) * e.pieces));
        wrs.back().send_flags |= NS_SEND_REMOTE_ONLY;
      }
      if (!wrs.empty()) wrs.front().send_flags |= NS_SEND_NEW_EPOCH;
    }
    pending_[0] = 0;  // whatever a failed run left behind
    post_linked(wrs, 0, "netsparse");
    e.announce_round();
    stats.post_seconds += now_seconds() - t;
    // The local part while the gather runs (the kernels drive the engine between row chunks).
    t = now_seconds();
    const BasicDenseConstView<T> local{ops.b, cb, k, ce - cb};
    if (rc.kernel == KernelKind::sddmm) {
      sddmm_csr_columns(a, cb, ce, true, ops.x, k, local, k, ops.out);
    } else {
      spmm_csr_columns(a, cb, ce, true, local, ops.out, k, k, false);
    }
    const double t1 = wait_for_gathers(t, stats);
    if (rc.kernel == KernelKind::sddmm) {
      const BasicDenseConstView<T> window{window_[0].data(), 0, k, n_cols};
      sddmm_csr_columns(a, cb, ce, false, ops.x, k, window, k, ops.out);
    } else {
      const auto n_ghosts = static_cast<gidx_t>(ghost_list_.size());
      const BasicDenseConstView<T> ghosts{window_[0].data(), 0, k, n_ghosts};
      spmm_csr_columns(remote_, 0, n_ghosts, true, ghosts, ops.out, k, k, true);
    }
    stats.compute_seconds += now_seconds() - t1;
  }

  void run_vanilla(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                   Compute<T>& compute, CommStats& stats) {
    RigEngine::Impl& e = engine_->impl();
    const ScopedProgressHook progress(e.hook());
    const std::int64_t max_out = rc.options->max_outstanding_reads;
    constexpr std::size_t kChain = 64;  // reads per doorbell
    std::vector<ns_send_wr>& chain = wrs_[0];
    compute.local(pat, rc, ops);
    pending_[0] = pending_[1] = 0;
    T* window = window_[0].data();
    const std::size_t k = static_cast<std::size_t>(rc.k);
    for (int panel : pat.remote_panels) {
      const gidx_t wbase = pat.remote_part.col_panel_range(panel).begin;
      const double t0 = now_seconds();
      PanelIdxStream s(pat.remote_part, panel, false);
      while (s.valid()) {
        chain.clear();
        while (s.valid() && chain.size() < kChain &&
               pending_[0] + static_cast<std::int64_t>(chain.size()) < max_out) {
          const gidx_t idx = s.idx();
          T* row = window + static_cast<std::size_t>(idx - wbase) * k;
          for (std::uint32_t c = 0; c < e.pieces; ++c) {  // one read per piece of the property
            chain.push_back(rdma_read_wr(0, e.region,
                                         static_cast<std::uint64_t>(idx) * e.pieces + c,
                                         row + c * (k / e.pieces), e.piece_bytes));
          }
          s.next();
        }
        if (chain.empty()) {
          drain(true, "sa-vanilla");  // max_out reads in flight
          continue;
        }
        post_linked(chain, 0, "sa-vanilla");
        drain(false, "sa-vanilla");
      }
      while (pending_[0] > 0) drain(true, "sa-vanilla");
      stats.wait_seconds += now_seconds() - t0;
      const IndexRange w = pat.remote_part.col_panel_range(panel);
      compute.remote_panel(pat, rc, ops, panel,
                           BasicDenseConstView<T>{window, w.begin, rc.k, w.size()});
    }
    compute.finish(pat, rc, ops);
  }

  std::vector<std::uint64_t> piece_buf_[2];  // per slot: idxs of property pieces (piece_idx)
  std::vector<int> owners_, requesters_;     // the pattern's peers (find_pattern_peers)
  bool peers_known_ = false;
  // Compact mode's pushed replays: this exchange's tag, its run counter (the same on every rank:
  // runs are collective), the first run whose plans are armed, and the region they recorded on.
  std::uint32_t push_tag_ = 0;
  std::uint32_t round_ = 0;
  std::uint32_t first_pushed_round_ = 2;
  std::uint64_t plans_region_ = 0;
  std::shared_ptr<RigEngine> engine_;
  const bool vanilla_;
  const bool direct_;
  const bool compact_;
  GhostLayout ghosts_;
  std::vector<GatherPlan> plans_;  // compact mode: one per batch of the ghost list
  std::vector<T> window_[2];
  std::vector<ns_send_wr> wrs_[2];
  std::int64_t pending_[2] = {0, 0};  // work requests in flight per window
  std::vector<std::uint64_t> nonzero_idx_;
  std::vector<std::size_t> nonzero_ptr_;
  // direct mode, SpMM / SpMV (split_remote): the set of the run's distinct remote columns, the
  // list of them (ascending), and the run's remote nonzeros renumbered onto that list.
  DistinctColumns distinct_;
  std::vector<std::uint64_t> ghost_list_;
  CsrMatrix remote_;
};

}  // namespace

template <class T>
std::unique_ptr<Exchange<T>> make_rig_exchange(std::shared_ptr<RigEngine> engine,
                                               RigVariant variant) {
  return std::make_unique<RigExchange<T>>(std::move(engine), variant);
}

ContextAttr engine_context_attr(const EngineOptions& options) {
  ContextAttr attr;
  attr.transport(static_cast<ns_transport>(options.transport));
  if (options.client_units > 0 || options.server_units > 0) {
    attr.units(options.client_units > 0 ? options.client_units : 2,
               options.server_units > 0 ? options.server_units : 2);
  }
  attr.progress(static_cast<ns_progress_mode>(options.progress));
  if (options.packet_bytes > 0) attr.packet_bytes(options.packet_bytes);
  if (options.delay_ns >= 0) attr.concat_delay(std::chrono::nanoseconds(options.delay_ns));
  if (options.pending_entries > 0) attr.pending_entries(options.pending_entries);
  if (options.idx_chunk > 0) attr.idx_chunk(options.idx_chunk);
  if (options.watchdog_ms > 0) attr.watchdog(std::chrono::milliseconds(options.watchdog_ms));
  attr.flags(options.flags);
  return attr;
}
template std::unique_ptr<Exchange<float>> make_rig_exchange<float>(std::shared_ptr<RigEngine>,
                                                                   RigVariant);
template std::unique_ptr<Exchange<double>> make_rig_exchange<double>(std::shared_ptr<RigEngine>,
                                                                     RigVariant);

}  // namespace dist
}  // namespace netsparse
