// The RIG engine: construction, the progress loop, frame delivery, dispatch, completions,
// watchdog and quiesce. Admin calls (regions, queues, MPI_Finalize) and statistics are in
// engine_admin.cpp; the units, the region, the outbox, the queues and peer health live in their
// own files.
#include "rig/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "concat/frame.hpp"
#include "concat/gather_wire.hpp"
#include "concat/scatter_wire.hpp"
#include "config/settings.hpp"
#include "rig/backoff.hpp"
#include "rig/copy.hpp"
#include "rig/handles.hpp"
#include "support/peer_failure.hpp"

namespace netsparse::rig {

namespace {
constexpr std::uint64_t kWatchdogTickNs = 1'000'000;  // 1 ms
constexpr int kPollMessages = 64;
constexpr std::size_t kDispatchPerStep = 256;
}  // namespace

Engine::Engine(std::unique_ptr<transport::Transport> tx, const Config& config)
    : config_(config),
      tx_(std::move(tx)),
      rank_(tx_->rank()),
      size_(tx_->size()),
      health_(rank_, size_, now_ns()),
      quiesce_(size_),
      profile_(netsparse::config::choice(netsparse::config::Env::kEngineProfile) == "1") {
  if (config_.progress_mode == NS_PROGRESS_AUTO) config_.progress_mode = NS_PROGRESS_THREAD;
  port_.rank = static_cast<std::uint32_t>(rank_);
  port_.size = static_cast<std::uint32_t>(size_);
  port_.dead = health_.flags();
  port_.sink = this;
  outbox_ = std::make_unique<Outbox>(*tx_, health_.flags(), *this, size_);
  port_.outbox = outbox_.get();
  reads_ = std::make_unique<ReadUnit>(port_, *tx_);
  plans_ = std::make_unique<PlanUnit>(port_, *outbox_);
  scatters_ = std::make_unique<ScatterUnit>(port_, *outbox_);
  for (int u = 0; u < config_.client_units; ++u) {
    clients_.push_back(std::make_unique<ClientUnit>(port_, static_cast<std::uint16_t>(u), config_));
  }
  for (int u = 0; u < config_.server_units; ++u) {
    servers_.push_back(std::make_unique<ServerUnit>(port_));
  }
  frame_packets_.resize(concat::kMaxPacketsPerFrame);
  handler_ = [this](const transport::ReceivedPacket& p) { on_frame(p); };
  if (!inline_mode()) {
    thread_ = std::thread([this] { progress_thread_main(); });
  } else if (config_.standby_us > 0) {
    thread_ = std::thread([this] { standby_thread_main(); });
  }
}

Engine::~Engine() {
  finalize_hook_.release();  // the context is closing itself
  // Whatever the API did not destroy goes with the engine: its handles die now.
  for (const auto& q : qps_) unregister_handle(q.get());
  for (const auto& c : cqs_) unregister_handle(c.get());
  for (const auto& p : plan_handles_) unregister_handle(p.get());
  if (region_owner_) unregister_handle(region_owner_.get());
  stop_progress_thread();
}

void Engine::stop_progress_thread() noexcept {
  stop_.store(true);
  { std::lock_guard<std::mutex> lk(sleep_mu_); }
  sleep_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::count_posted(std::size_t n, Region& region) noexcept {
  active_commands.fetch_add(n, std::memory_order_relaxed);
  region.inflight.fetch_add(n, std::memory_order_relaxed);
}

void Engine::doorbell() noexcept {
  doorbells_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    { std::lock_guard<std::mutex> lk(sleep_mu_); }
    sleep_cv_.notify_one();
  }
}

// ---- progress ------------------------------------------------------------------------------
int Engine::progress_inline() {
  if (!inline_mode()) return 0;
  inline_calls_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lk(progress_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return 0;
  return guarded_step();
}

int Engine::guarded_step() noexcept {
  if (!broken_.empty()) return 0;
  try {
    return step();
  } catch (const std::bad_alloc&) {
    fail_engine("out of memory in an engine step");
  } catch (const std::exception& e) {
    fail_engine(e.what());
  } catch (...) {
    fail_engine("unknown exception in an engine step");
  }
  return 1;
}

void Engine::fail_engine(const char* what) noexcept {
  try {
    broken_ = what;
  } catch (...) {
    broken_ = "engine failure";
  }
  broken_flag_.store(true, std::memory_order_release);
  note_failure();
  for (auto& u : clients_) u->fail_all(NS_WC_TRANSPORT_ERR);
  reads_->fail_all(NS_WC_TRANSPORT_ERR);
  plans_->fail_all(NS_WC_TRANSPORT_ERR);
  scatters_->fail_all(NS_WC_TRANSPORT_ERR);
  // Commands not yet dispatched fail too, in order per queue pair.
  for (auto& qp : qps_) {
    while (Command* c = qp->peek()) {
      qp->pop();
      c->status = NS_WC_TRANSPORT_ERR;
      c->generated = true;
      complete(*c);
    }
  }
  try {
    flush_completions();
  } catch (...) {
  }
}

std::string Engine::broken_reason() const {
  std::lock_guard<std::mutex> lk(progress_mu_);
  return broken_;
}

// An administrative call (registration, teardown) is waiting for progress_mu_: let it in.
void Engine::yield_to_admin() const noexcept {
  while (admin_waiting_.load(std::memory_order_acquire) != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void Engine::progress_thread_main() {
  Backoff backoff;
  while (!stop_.load(std::memory_order_relaxed)) {
    int work = 0;
    bool busy = false;
    std::uint64_t next_expiry = UINT64_MAX;
    {
      std::lock_guard<std::mutex> lk(progress_mu_);
      work = guarded_step();
      busy =
          active_commands.load(std::memory_order_relaxed) != 0 || !outbox_->empty() ||
          reads_->busy() || plans_->serving() ||
          std::any_of(servers_.begin(), servers_.end(), [](const auto& u) { return u->serving(); });
      if (concat_) next_expiry = concat_->next_expiry_ns();
    }
    yield_to_admin();
    if (work > 0) {
      backoff.reset();
      continue;
    }
    if (!backoff.pause()) continue;
    // Sleep: short while requests are in flight (responses may arrive any moment), longer when
    // idle; never past the next concatenation-queue expiry. A post rings the doorbell.
    auto d =
        backoff.sleep_for(busy ? std::chrono::microseconds(50) : std::chrono::microseconds(200));
    if (next_expiry != UINT64_MAX) {
      const std::uint64_t now = now_ns();
      const auto until = next_expiry > now ? (next_expiry - now) / 1000 : 0;
      d = std::min(d, std::chrono::microseconds(static_cast<std::int64_t>(until)));
    }
    if (d.count() <= 0) continue;
    const std::uint64_t seen = doorbells_.load(std::memory_order_seq_cst);
    sleeping_.store(true, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lk(sleep_mu_);
      sleep_cv_.wait_for(lk, d, [&] {
        return stop_.load(std::memory_order_relaxed) ||
               doorbells_.load(std::memory_order_seq_cst) != seen;
      });
    }
    sleeping_.store(false, std::memory_order_relaxed);
    if (doorbells_.load(std::memory_order_relaxed) != seen) backoff.reset();
  }
}

// The standby thread of INLINE progress. While the application calls into the library (waits,
// polls, the kernels' progress hook: every call counts in inline_calls_), the application
// drives the engine and this thread only wakes to see the count move. When a whole interval
// passes without a call, it steps the engine as the progress thread would (backing off to naps
// when a step finds nothing), until the application calls in again; an interval in which a step
// did work counts as a takeover.
//
// The interval starts at standby_us and doubles at every look that finds the application
// driving, up to kStandbyStretch x standby_us; a takeover resets it. A wake-up is not cheap
// where every core runs a rank: on the 2-core development machine one wake per millisecond
// cost a distributed SpMV 7-8 % of its time per iteration (stencil 48^3, np 2: 0.48 against
// 0.44-0.45 ms with the thread off or waking every 16 ms; docs/benchmarks.md). So a rank that
// keeps calling in pays one wake per 16 ms, and one that went away is served within two
// intervals: 2 ms after a takeover, at most 32 ms after a long stretch of calls.
namespace {
constexpr std::uint32_t kStandbyStretch = 16;
}  // namespace

void Engine::standby_thread_main() {
  const auto base = std::chrono::microseconds(config_.standby_us);
  const auto longest = base * kStandbyStretch;
  auto interval = base;
  std::uint64_t seen = inline_calls_.load(std::memory_order_relaxed);
  const auto nap = [this](std::chrono::microseconds d) {
    std::unique_lock<std::mutex> lk(sleep_mu_);
    sleep_cv_.wait_for(lk, d, [this] { return stop_.load(std::memory_order_relaxed); });
    standby_wakes_.fetch_add(1, std::memory_order_relaxed);
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    nap(interval);
    const std::uint64_t now_calls = inline_calls_.load(std::memory_order_relaxed);
    if (now_calls != seen) {  // the application drove the engine during the interval
      seen = now_calls;
      interval = std::min(interval * 2, longest);
      continue;
    }
    interval = base;
    // Away for a whole interval: serve until it calls in again.
    Backoff backoff;
    bool counted = false;
    while (!stop_.load(std::memory_order_relaxed) &&
           inline_calls_.load(std::memory_order_relaxed) == seen) {
      int work = 0;
      {
        std::unique_lock<std::mutex> lk(progress_mu_, std::try_to_lock);
        if (!lk.owns_lock()) break;  // somebody else is stepping it
        work = guarded_step();
        if (work > 0) {
          if (!counted) ++standby_takeovers_;
          counted = true;
          ++standby_steps_;
        }
      }
      yield_to_admin();
      if (work > 0) {
        backoff.reset();
        continue;
      }
      if (!backoff.pause()) continue;
      nap(std::min<std::chrono::microseconds>(interval,
                                              backoff.sleep_for(std::chrono::microseconds(200))));
    }
    seen = inline_calls_.load(std::memory_order_relaxed);
  }
}

int Engine::step() {
  std::uint64_t now = now_ns();
  std::uint64_t mark[6] = {now, 0, 0, 0, 0, 0};
  std::size_t work = poll_transport();
  work += reads_->poll();
  if (profile_) mark[1] = now_ns();
  work += dispatch(now);
  if (profile_) mark[2] = now_ns();
  if (concat_) {
    const std::size_t nc = clients_.size();
    for (std::size_t k = 0; k < nc; ++k) {
      work += clients_[(next_client_ + k) % nc]->generate(now);
    }
    next_client_ = (next_client_ + 1) % nc;
    now = now_ns();
    if (profile_) mark[3] = now;
    const std::uint32_t before = concat_->buffered_prs();
    concat_->poll_expired(now);
    if (concat_->buffered_prs() != before) ++work;
    step_quiesce(now);
  } else if (profile_) {
    mark[3] = now_ns();
  }
  if (profile_) mark[4] = now_ns();
  // Answers larger than the ring's room (plan replays, compact reads): the next part.
  work += plans_->serve();
  for (auto& u : servers_) work += u->serve();
  if (!outbox_->empty()) work += outbox_->flush();
  // "Left" only once nothing of this node's is still to be packed either: with pushed replays
  // (ns_plan_push) a round may tell nobody, and must not end while a push still reads the rows.
  if (concat_ && outbox_->empty() && !plans_->serving()) quiesce_.left();
  if (profile_) {
    mark[5] = now_ns();
    ++steps_;
    for (int k = 0; k < 5; ++k) stage_ns_[k] += mark[k + 1] - mark[k];
  }
  if (now >= next_watchdog_ns_) {
    run_watchdog(now);
    next_watchdog_ns_ = now + kWatchdogTickNs;
  }
  if (!wc_backlog_.empty()) work += flush_completions();
  return static_cast<int>(std::min<std::size_t>(work, INT32_MAX));
}

std::size_t Engine::poll_transport() {
  const int n = tx_->poll(handler_, kPollMessages);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

// A transport message: one frame of one or more packets, split and checked as a whole first.
void Engine::on_frame(const transport::ReceivedPacket& m) {
  ++frames_in_;
  if (m.src < 0 || m.src >= size_) {
    ++malformed_packets_;
    return;
  }
  const concat::FrameSplit s = concat::split_frame(m.bytes, frame_packets_);
  if (s.error != concat::DecodeError::kOk) {
    ++malformed_packets_;
    ++decode_errors_[static_cast<int>(s.error) & 7];
    return;
  }
  health_.heard_from(m.src, now_ns(), timeouts_);
  for (std::size_t k = 0; k < s.packets; ++k) {
    const std::span<const std::byte> p = frame_packets_[k];
    const auto type = concat::wire::load<std::uint16_t>(p.data() + concat::kOffType);
    if (concat::is_gather_type(type)) {
      on_compact(m.src, p);
    } else if (concat::is_plan_type(type)) {
      ++packets_in_;
      plans_->on_packet(m.src, p, now_ns());
    } else if (concat::is_scatter_type(type)) {
      ++packets_in_;
      scatters_->on_packet(m.src, p);
    } else {
      on_packet(m.src, p);
    }
  }
}

void Engine::on_compact(int src, std::span<const std::byte> bytes) {
  ++packets_in_;
  Region* r = region();
  concat::GatherPacket pkt;
  const concat::DecodeError err =
      r == nullptr ? concat::DecodeError::kWrongDestination
                   : concat::decode_gather_packet(bytes, static_cast<std::uint32_t>(rank_),
                                                  r->prop_bytes, &pkt);
  if (err != concat::DecodeError::kOk) {
    ++malformed_packets_;
    ++decode_errors_[static_cast<int>(err) & 7];
    return;
  }
  const auto from = static_cast<std::uint32_t>(src);
  if (pkt.header.type == concat::GatherType::kGatherRead) {
    // The units are identical and the engine thread is one: rotate for the statistics.
    servers_[next_server_]->serve_compact(from, pkt);
    next_server_ = (next_server_ + 1) % servers_.size();
    return;
  }
  if (pkt.header.unit >= clients_.size() || pkt.header.src_node != from) {
    ++malformed_packets_;
    return;
  }
  ClientUnit& unit = *clients_[pkt.header.unit];
  if (pkt.header.type == concat::GatherType::kGatherRows) {
    unit.on_rows(from, pkt);
  } else {
    unit.on_refuse(from, pkt.header);
  }
}

void Engine::on_packet(int, std::span<const std::byte> bytes) {
  ++packets_in_;
  Region* r = region();
  if (r == nullptr) {
    ++malformed_packets_;
    return;
  }
  concat::PacketView v;
  const concat::DecodeError err =
      concat::decode_packet(bytes, static_cast<std::uint32_t>(rank_), r->prop_bytes, &v);
  if (err != concat::DecodeError::kOk) {
    ++malformed_packets_;
    ++decode_errors_[static_cast<int>(err) & 7];
    return;
  }
  const std::uint64_t now = now_ns();
  switch (v.header().type) {
    case concat::PrType::kRead:
      // The units are identical and the engine thread is one: rotate for the statistics.
      servers_[next_server_]->serve(v, now);
      next_server_ = (next_server_ + 1) % servers_.size();
      return;
    case concat::PrType::kControl: {
      const auto self = static_cast<std::uint32_t>(rank_);
      for (std::uint32_t i = 0; i < v.size(); ++i) {
        const concat::PrHeader pr = v.pr(i);
        if (pr.src_node >= static_cast<std::uint32_t>(size_) || pr.src_node == self ||
            pr.req_id != kControlQuiesceDone) {
          ++malformed_packets_;
          continue;
        }
        quiesce_.received(static_cast<int>(pr.src_node), pr.idx);
        ++control_prs_;
      }
      return;
    }
    case concat::PrType::kResponse:
    case concat::PrType::kInvalid: {
      const bool invalid = v.header().type == concat::PrType::kInvalid;
      const std::size_t nc = clients_.size();
      const std::uint32_t n = v.size();
      // Two-stage prefetch: the entry 8 PRs ahead, the destination 4 ahead (its entry is cached).
      for (std::uint32_t i = 0; i < n; ++i) {
        if (i + 8 < n) {
          const concat::PrHeader ahead = v.pr(i + 8);
          if (ahead.src_unit < nc) clients_[ahead.src_unit]->prefetch_entry(ahead.req_id);
        }
        if (!invalid && i + 4 < n) {
          const concat::PrHeader ahead = v.pr(i + 4);
          if (ahead.src_unit < nc) {
            clients_[ahead.src_unit]->prefetch_destination(ahead.req_id, ahead.idx);
          }
        }
        const concat::PrHeader pr = v.pr(i);
        if (pr.src_unit >= nc) {
          ++malformed_packets_;
          continue;
        }
        clients_[pr.src_unit]->on_response(pr, v.payload(i), invalid);
      }
      return;
    }
  }
}

std::size_t Engine::dispatch(std::uint64_t now) {
  std::size_t n = 0;
  const std::size_t nq = qps_.size();
  for (std::size_t k = 0; k < nq && n < kDispatchPerStep; ++k) {
    Qp& qp = *qps_[(next_qp_ + k) % nq];
    while (n < kDispatchPerStep) {
      Command* c = qp.peek();
      if (c == nullptr || !dispatch_one(*c, now)) break;
      qp.pop();
      ++n;
    }
  }
  if (nq > 0) next_qp_ = (next_qp_ + 1) % nq;
  return n;
}

bool Engine::dispatch_one(Command& c, std::uint64_t now) {
  c.outstanding = 0;
  c.bad_pos = 0;
  c.filter = FilterUse::kNone;
  c.coalesced_any = false;
  c.generated = false;
  c.status = NS_WC_SUCCESS;
  Region& r = *c.mr;
  if (c.opcode == NS_WR_RDMA_READ) return reads_->start(c, now);
  if (c.opcode == NS_WR_RIS) {
    scatters_->start(c, now);
    return true;
  }
  if (c.opcode == NS_WR_RIG_PLAN && !c.recording) {
    if (!plans_->needs_recording(c)) {
      plans_->start(c, now);
      return true;
    }
    // Not recorded for this region yet: this start is a RIG gather that records it.
    c.recording = true;
    c.plan->begin_recording(static_cast<std::uint32_t>(size_));
  }
  // RIG
  if (c.deadline_ns <= now) {
    c.status = NS_WC_WATCHDOG_TIMEOUT;
    note_timeout();
    complete(c);
    return true;
  }
  if (c.count == 0) {
    complete(c);
    return true;
  }
  ClientUnit* unit = nullptr;
  const std::size_t nc = clients_.size();
  for (std::size_t k = 0; k < nc; ++k) {
    ClientUnit* u = clients_[(next_client_ + k) % nc].get();
    if (u->can_take()) {
      unit = u;
      break;
    }
  }
  if (unit == nullptr || !r.admit(c, config_)) return false;
  unit->take(c);
  return true;
}

void Engine::complete(Command& c) {
  ns_wc wc{};
  wc.wr_id = c.wr_id;
  wc.status = c.status;
  wc.opcode = c.opcode;
  wc.vendor_err = 0;
  wc.count = c.status == NS_WC_SUCCESS ? c.count : (c.status == NS_WC_LOC_INV_REQ ? c.bad_pos : 0);
  const bool signaled = (c.flags & NS_SEND_SIGNALED) != 0 || c.status != NS_WC_SUCCESS;
  Qp& qp = *c.qp;
  Cq& cq = qp.cq();
  // A request its peer did not answer in time, or a peer known dead: MPI_Finalize may now wait
  // on the dead (ns_finalize_or_exit).
  if (c.status == NS_WC_WATCHDOG_TIMEOUT) {
    support::record_peer_failure("a work request timed out (watchdog)");
  } else if (c.status == NS_WC_TRANSPORT_ERR) {
    support::record_peer_failure("a work request failed: transport error or a dead peer");
  }
  if (c.plan != nullptr) plans_->on_complete(c);  // the plan may be started again
  c.mr->inflight.fetch_sub(1, std::memory_order_release);
  // A completion that finds its CQ full waits in wc_backlog_ together with its queue-pair slot
  // (as a verbs send-queue entry is not reusable before its completion is in the CQ). Releasing
  // the slot first let a host that posts whenever its queue pair has room run ahead of a small
  // CQ (issue 21.5): with a CQ of 16 and a queue pair of 64, 36 494 completions were held after
  // 5 s of bench_soak --posting queue, and the host saw them ever later.
  const bool deliver_now = !signaled || (wc_backlog_.empty() && cq.has_room());
  if (deliver_now) qp.release(c);  // the slot may be reused from here on; `c` is not touched again
  active_commands.fetch_sub(1, std::memory_order_acq_rel);
  ++completions_;
  if (!signaled) return;
  if (!deliver_now) {
    wc_backlog_.push_back({&cq, wc, &qp, &c});
    return;
  }
  cq.push(wc);  // has_room(): only the consumer changes it, and only by making more room
  cq.notify();
}

std::size_t Engine::flush_completions() {
  std::size_t n = 0;
  while (!wc_backlog_.empty()) {
    PendingWc& p = wc_backlog_.front();
    if (!p.cq->has_room()) break;
    p.qp->release(*p.cmd);  // before the host can see the completion: its slot is free then
    p.cq->push(p.wc);
    p.cq->notify();
    wc_backlog_.pop_front();
    ++n;
  }
  return n;
}

void Engine::run_watchdog(std::uint64_t now) {
  if (health_.check(now, timeouts_, *tx_) > 0) note_failure();
  plans_->watchdog(now);     // also fails replays waiting for an owner now known dead
  scatters_->watchdog(now);  // likewise for scatter-reduces
  if (config_.watchdog_ms == 0) return;
  for (auto& u : clients_) u->watchdog(now);
  reads_->watchdog(now);
}

// ---- quiesce -------------------------------------------------------------------------------
void Engine::step_quiesce(std::uint64_t now) {
  const std::uint64_t round = quiesce_.to_send();
  if (round == 0 || active_commands.load(std::memory_order_acquire) != 0) return;
  // Control PRs are never queued and would overtake what is still queued: flush that first, so
  // "done" reaches each peer after everything this node sent it before.
  concat_->flush_all();
  const auto tell = [&](int p) {
    if (p == rank_ || peer_dead(p)) return;
    concat_->push(
        concat::PrType::kControl, static_cast<std::uint32_t>(p),
        concat::PrHeader{static_cast<std::uint32_t>(rank_), 0, round, kControlQuiesceDone}, nullptr,
        now);
  };
  if (quiesce_.every_peer()) {
    for (int p = 0; p < size_; ++p) tell(p);
  } else {
    for (const int p : quiesce_.told()) tell(p);
  }
  quiesce_.sent(round);
}

void Engine::quiesce_start() {
  if (region() == nullptr) {
    throw EngineError(NS_ERR_NOT_REGISTERED, "no property region is registered");
  }
  std::lock_guard<std::mutex> q(quiesce_mu_);
  quiesce_.start();
  doorbell();
}

bool Engine::quiesce_test() {
  std::lock_guard<std::mutex> q(quiesce_mu_);
  const std::uint64_t round = quiesce_.announced();
  if (round == 0) {
    throw EngineError(NS_ERR_STATE, "no quiesce round is announced (ns_quiesce_start first)");
  }
  return quiesce_.complete(round, rank_, [this](int p) { return peer_dead(p); });
}

void Engine::quiesce(int timeout_ms) {
  if (region() == nullptr) {
    throw EngineError(NS_ERR_NOT_REGISTERED, "no property region is registered");
  }
  std::lock_guard<std::mutex> q(quiesce_mu_);
  const std::uint64_t round = quiesce_.start();
  doorbell();
  const std::uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : now_ns() + std::uint64_t(timeout_ms) * 1'000'000;
  Backoff backoff;
  auto dead = [this](int p) { return peer_dead(p); };
  health_.set_quiesce_waiting(true);
  struct ClearWaiting {
    PeerHealth& health;
    ~ClearWaiting() { health.set_quiesce_waiting(false); }
  } clear_waiting{health_};
  for (;;) {
    if (inline_mode() && progress_inline() > 0) backoff.reset();
    if (quiesce_.complete(round, rank_, dead)) {
      quiesce_.waited(round);
      return;
    }
    if (now_ns() >= deadline) {
      quiesce_.waited(round);
      throw EngineError(NS_ERR_TIMEOUT,
                        "some peers did not quiesce within " + std::to_string(timeout_ms) + " ms");
    }
    if (backoff.pause())
      std::this_thread::sleep_for(backoff.sleep_for(std::chrono::microseconds(100)));
  }
}

}  // namespace netsparse::rig
