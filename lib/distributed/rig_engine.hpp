// RigEngine's implementation (include/netsparse/distributed.hpp): one open RIG engine (context,
// completion queue, queue pair over MPI) and the state of the run on it (the property region,
// the application-driven progress ticks, the run's quiesce round), behind the verbs the RIG modes
// (modes/exchange_rig*.cpp) call: bind_operand, begin_run, post, completions, announce_round,
// hook, end_run. The modes reach it through RigEngineAccess; nothing outside lib/distributed
// does.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/engine_counters.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/netsparse.hpp"
#include "rig/finalize_hook.hpp"
#include "support/visibility.hpp"

namespace netsparse {

struct NETSPARSE_LOCAL RigEngine::Impl {
 public:
  static constexpr int kQpDepth = 4096;
  static constexpr int kWaitTimeoutMs = 120000;

  // Opens the engine over `comm` (collective: a failure on one rank fails every rank).
  Impl(MPI_Comm comm, const EngineOptions& options);

  // ---- the verbs of a run ----
  // Local, before this rank enters a run (ExchangeBase::bind_operand): a RIG-only region
  // registered with this shape moves to `operand` (see rebind_if_moved); otherwise nothing.
  void bind_operand(const void* operand, std::uint64_t rows, std::uint32_t prop_bytes,
                    const RowPartition& cols);
  // Starts a run on the operand block `base` (rows x prop_bytes, elements of elem_bytes): the
  // region as the run needs it (ensure_region), the progress time and the quiesce round reset.
  // Returns the engine's counters where this run's traffic starts (the previous run's end).
  dist::EngineCounters begin_run(const void* base, std::uint64_t rows, std::uint32_t prop_bytes,
                                 std::uint32_t elem_bytes, const RowPartition& cols, bool rig_only,
                                 std::chrono::milliseconds deadline);
  // Posts a chain of work requests (Qp::try_post: NS_ERR_NO_RESOURCE with *bad when the queue
  // pair is full).
  ns_status_t post(ns_send_wr& first, ns_send_wr** bad) { return qp.try_post(first, bad); }
  // The completions already in the CQ, or, when `block`, waits up to kWaitTimeoutMs for one
  // (none in that time throws, naming `mode`). Returns how many were written to `wc`.
  std::size_t completions(std::span<ns_wc> wc, bool block, const char* mode);
  // This run posts nothing more: the peers learn it as soon as its gathers are done. Once per run.
  void announce_round() {
    if (round_announced) return;
    ctx.quiesce_start();
    round_announced = true;
  }
  ProgressHook hook() noexcept {
    return inline_progress ? ProgressHook{&Impl::progress_tick, this} : ProgressHook{};
  }
  // The peers of this run's quiesce round (ns_quiesce_peers): the pattern's (who this rank
  // gathers from, who gathers from it), nobody (a run whose every row is pushed), or every
  // node. Before the run announces its round.
  void quiesce_with(std::span<const int> tell, std::span<const int> wait_for) {
    ctx.quiesce_peers(tell, wait_for);
  }
  void quiesce_with_every_peer() { ctx.quiesce_every_peer(); }
  // Regions registered on this engine so far: plans record afresh after each.
  [[nodiscard]] std::uint64_t registrations() const noexcept { return registration_count; }
  // A push tag (ns_plan_push) for a new compact exchange: every rank creates its kernels on an
  // engine in the same order (their construction is collective), so the n-th is n everywhere.
  [[nodiscard]] std::uint32_t new_push_tag() noexcept { return next_push_tag++; }
  // Owner-pushed replays of a fixed pattern (DistKernel's compact exchange, SpGEMM's value
  // pass): this rank's armed lists for `round` go to their requesters now (ns_plan_push), and a
  // pushed start of every plan joins `wrs` (once armed it asks nobody). The caller's fence (an
  // agreement or allreduce every rank entered) guarantees the previous round's output was used.
  void push_replays(std::span<const GatherPlan> plans, std::uint32_t tag, std::uint32_t round,
                    std::vector<ns_send_wr>& wrs) {
    netsparse::detail::check(ns_plan_push(ctx.get(), tag, round, nullptr), "ns_plan_push");
    for (const GatherPlan& p : plans) {
      ns_send_wr wr = plan_wr(0, p, NS_SEND_SIGNALED | NS_SEND_PUSHED);
      wr.wr.plan.push_tag = tag;
      wr.wr.plan.push_round = round;
      wrs.push_back(wr);
    }
  }

  // Ends a run: nobody returns (and lets the caller change its operand) before every peer is
  // done with this rank's block (quiesce, counted as sync time); the progress ticks' time is
  // added too. Returns the engine's counters where this run's traffic ends.
  dist::EngineCounters end_run(CommStats& stats);

  // ---- what a run reads ----
  // A property larger than one message travels in piece_count() sub-rows of
  // bytes_per_piece() each (see `pieces` below).
  [[nodiscard]] std::uint32_t piece_count() const noexcept { return pieces; }
  [[nodiscard]] std::uint32_t bytes_per_piece() const noexcept { return piece_bytes; }
  [[nodiscard]] const PropertyRegion& property_region() const noexcept { return region; }
  [[nodiscard]] Context& context() noexcept { return ctx; }

 private:
  friend class ::netsparse::RigEngine;

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
    ++registration_count;
  }
  std::uint64_t registration_count = 0;
  std::uint32_t next_push_tag = 1;

  // The engine's counters when its last run ended (RigEngine::reset_stats zeroes them with the
  // engine's): the start of the next run's traffic, whichever kernel runs it.
  dist::EngineCounters last_run_end;
  bool ran = false;
  dist::EngineCounters counters_since_last_run() {
    if (!ran) {
      ran = true;
      last_run_end = dist::EngineCounters::read(ctx);
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

namespace dist {

// The RIG modes' door to a RigEngine's implementation (a friend of RigEngine).
class RigEngineAccess {
 public:
  [[nodiscard]] static RigEngine::Impl& impl(RigEngine& engine) noexcept { return *engine.impl_; }
};

// The context attributes of an engine opened for `options` (RigEngine's, and the host leaders'
// engine of netsparse-node).
ContextAttr engine_context_attr(const EngineOptions& options);
// Throws the failure of a work request (status, opcode, vendor error) for the mode `mode`.
[[noreturn]] void throw_wc(const ns_wc& wc, const char* mode);

}  // namespace dist
}  // namespace netsparse
