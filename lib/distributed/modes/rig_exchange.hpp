// What the four RIG engine exchanges share (modes/exchange_rig*.cpp): the run around the
// variant's gathers (the engine's begin_run / end_run and the run's traffic from its counters),
// the chains posted and their completions drained per window slot, the positional batches.
//   panels  (exchange_rig.cpp):         NS_WR_RIG per column panel, INDEXED into a panel
//                                       window, double-buffered (RigIdxSource::nonzeros)
//   compact (exchange_rig_compact.cpp): a fixed pattern (the default): the distinct remote
//                                       columns POSITIONAL into a compact buffer, as gather
//                                       plans (recorded once, replayed)
//   direct  (exchange_rig_direct.cpp):  a changing pattern (DistOptions::dynamic_pattern): the
//                                       CSR's distinct remote columns found per run
//   vanilla (exchange_rig_vanilla.cpp): sa-vanilla, one NS_WR_RDMA_READ per remote nonzero
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "agreement/neighbours.hpp"
#include "concat/wire_model.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/engine_counters.hpp"
#include "distributed/exchange.hpp"
#include "distributed/rig_engine.hpp"

namespace netsparse::dist {

template <class T>
class RigExchangeBase : public Exchange<T> {
 public:
  explicit RigExchangeBase(std::shared_ptr<RigEngine> engine) : engine_(std::move(engine)) {}

  // A RIG-only region moves to the run's operand before this rank enters the run.
  void bind_operand(const void* operand, const RunContext& rc) override {
    const auto rows = static_cast<std::uint64_t>(rc.cols->size(rc.rank));
    impl().bind_operand(operand, rows, static_cast<std::uint32_t>(rc.row_bytes()), *rc.cols);
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) final {
    RigEngine::Impl& e = impl();
    const auto prop_bytes = static_cast<std::uint32_t>(rc.row_bytes());
    const EngineCounters before =
        e.begin_run(ops.b, static_cast<std::uint64_t>(rc.cols->size(rc.rank)), prop_bytes,
                    sizeof(T), *rc.cols, rig_only(), node_wait_deadline(*rc.options));
    ++round_;  // every rank alike (runs are collective), whether the run succeeds or not
    choose_quiesce_peers(rc);
    gather_and_compute(pat, rc, ops, compute, stats);
    const EngineCounters after = e.end_run(stats);
    account(before, after, stats);
  }

 protected:
  // The peers of the run's quiesce round: the pattern's when known (a fixed pattern), else
  // every node (a pattern that changes every run: its requesters change too).
  virtual void choose_quiesce_peers(const RunContext&) {
    if (peers_known_) {
      impl().quiesce_with(owners_, requesters_);
    } else {
      impl().quiesce_with_every_peer();
    }
  }
  // The owners this rank gathers from (the remote columns' owners) and the ranks that gather
  // from it: the peers of a run's quiesce round (ns_quiesce_peers), found once per pattern with
  // one sparse exchange (agreement::sources_of, O(neighbours)), so that a run's control traffic
  // grows with the pattern's peers, not with the job (issue 34). Collective (setup is).
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
  // The same from the pattern's distinct remote columns, sorted (GhostLayout::ghosts): one
  // owner lookup per owner, not per remote nonzero (the per-nonzero walk was a third of the
  // compact exchange's setup at np 2: 239 K lookups for 17 K columns).
  void find_pattern_peers(std::span<const gidx_t> sorted_columns, const RunContext& rc) {
    owners_.clear();
    const RowPartition& cols = *rc.cols;
    for (std::size_t i = 0; i < sorted_columns.size();) {
      const int o = cols.owner(sorted_columns[i]);
      owners_.push_back(o);
      const gidx_t end = cols.end(o);  // skip the owner's other columns
      i = static_cast<std::size_t>(
          std::lower_bound(sorted_columns.begin() + static_cast<std::ptrdiff_t>(i),
                           sorted_columns.end(), end) -
          sorted_columns.begin());
    }
    requesters_ = agreement::sources_of(rc.comm, owners_, node_wait_deadline(*rc.options));
    peers_known_ = true;
  }

  // The variant's run between the engine's begin_run and end_run.
  virtual void gather_and_compute(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                                  Compute<T>& compute, CommStats& stats) = 0;
  // Whether the region is read by the engine alone (NS_MR_RIG_ONLY); sa-vanilla's is not.
  [[nodiscard]] virtual bool rig_only() const noexcept { return true; }
  // The run's traffic from the engine's counters at its start and end.
  virtual void account(const EngineCounters& before, const EngineCounters& after,
                       CommStats& stats) {
    RigEngine::Impl& e = impl();
    stats.bytes_sent += after.wire - before.wire;
    // Transport messages (frames), as inspector-executor counts its MPI messages; the packets
    // inside them are priced in bytes_sent.
    stats.messages_sent += after.frames - before.frames;
    stats.requests += after.prs_sent - before.prs_sent;
    stats.payload_bytes_in +=
        (after.prs_sent - before.prs_sent + after.plan_rows - before.plan_rows) *
        e.bytes_per_piece();
  }

  [[nodiscard]] RigEngine::Impl& impl() noexcept { return RigEngineAccess::impl(*engine_); }

  // One window per panel in flight: the second only when there are several panels.
  void size_panel_windows(const Pattern& pat, const RunContext& rc) {
    const std::size_t window_elems = static_cast<std::size_t>(pat.window) * rc.k;
    window_[0].resize(window_elems);
    window_[1].resize(pat.remote_panels.size() > 1 ? window_elems : 0);
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
    RigEngine::Impl& e = impl();
    ns_wc wc[64];
    const std::size_t n = e.completions(wc, block, mode);
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != NS_WC_SUCCESS) throw_wc(wc[i], mode);
      --pending_[wc[i].wr_id & 1];
    }
  }

  // Posts a chain, polling completions while the queue is full.
  void post_chain(ns_send_wr* first, const char* mode) {
    RigEngine::Impl& e = impl();
    ns_send_wr* next = first;
    while (next != nullptr) {
      ns_send_wr* bad = nullptr;
      const ns_status_t st = e.post(*next, &bad);
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
    impl().announce_round();  // everything this rank needs has arrived
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
  // handed to take(wr) in order. idx is distinct (both callers pass a sorted ghost list), and
  // the gathers say so (NS_SEND_UNIQUE): the engine then walks them on its bulk path, without a
  // filter word per idx that could never find a repeat (a plan keeps no such flag).
  template <class Take>
  void positional_batches(std::span<const std::uint64_t> idx, std::uint64_t batch,
                          std::size_t piece_elems, Take take) {
    RigEngine::Impl& e = impl();
    for (std::uint64_t off = 0; off < idx.size(); off += batch) {
      const std::uint64_t cnt = std::min<std::uint64_t>(batch, idx.size() - off);
      ns_send_wr wr = rig_wr(0, e.property_region(), idx.subspan(off, cnt),
                             std::span<T>(window_[0]).subspan(off * piece_elems, cnt * piece_elems),
                             Layout::kPositional);
      wr.send_flags |= NS_SEND_UNIQUE;
      take(wr);
    }
  }

  std::vector<std::uint64_t> piece_buf_[2];  // per slot: idxs of property pieces (piece_idx)
  std::vector<int> owners_, requesters_;     // the pattern's peers (find_pattern_peers)
  bool peers_known_ = false;
  std::uint32_t round_ = 0;  // runs of this exchange, the same on every rank
  std::shared_ptr<RigEngine> engine_;
  std::vector<T> window_[2];
  std::vector<ns_send_wr> wrs_[2];
  std::int64_t pending_[2] = {0, 0};  // work requests in flight per window
};

// The base's members a variant names unqualified (its base is a dependent type), declared once
// for the four in their private sections.
#define NETSPARSE_RIG_EXCHANGE_BASE_NAMES \
  using Base = RigExchangeBase<T>;        \
  using Base::drain;                      \
  using Base::find_pattern_peers;         \
  using Base::round_;                     \
  using Base::impl;                       \
  using Base::pending_;                   \
  using Base::piece_buf_;                 \
  using Base::piece_idx;                  \
  using Base::positional_batches;         \
  using Base::post_linked;                \
  using Base::wait_for_gathers;           \
  using Base::window_;                    \
  using Base::wrs_

// The four variants (RigVariant), for make_rig_exchange.
template <class T>
std::unique_ptr<Exchange<T>> make_rig_panels_exchange(std::shared_ptr<RigEngine> engine);
template <class T>
std::unique_ptr<Exchange<T>> make_rig_compact_exchange(std::shared_ptr<RigEngine> engine);
template <class T>
std::unique_ptr<Exchange<T>> make_rig_direct_exchange(std::shared_ptr<RigEngine> engine);
template <class T>
std::unique_ptr<Exchange<T>> make_rig_vanilla_exchange(std::shared_ptr<RigEngine> engine);

// Defines the factory `name<T>(engine)` of a RIG variant's class template `Class` (in its file's
// anonymous namespace) and instantiates it for float and double.
#define NETSPARSE_RIG_EXCHANGE_FACTORY(name, Class)                                  \
  template <class T>                                                                 \
  std::unique_ptr<Exchange<T>> name(std::shared_ptr<RigEngine> engine) {             \
    return std::make_unique<Class<T>>(std::move(engine));                            \
  }                                                                                  \
  template std::unique_ptr<Exchange<float>> name<float>(std::shared_ptr<RigEngine>); \
  template std::unique_ptr<Exchange<double>> name<double>(std::shared_ptr<RigEngine>)

}  // namespace netsparse::dist
