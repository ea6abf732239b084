// The RIG engine's application-side calls: region registration and teardown, queue creation
// and destruction, closing at MPI_Finalize, statistics. Each holds progress_mu_ (AdminLock)
// while it touches engine state; the progress loop is in engine.cpp.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "rig/engine.hpp"
#include "rig/handles.hpp"

namespace netsparse::rig {

namespace {
// Holds progress_mu_ for an application-side operation; tells a spinning progress thread to
// step aside first so the lock is not starved.
class AdminLock {
 public:
  AdminLock(std::mutex& mu, std::atomic<int>& waiting) : mu_(mu) {
    waiting.fetch_add(1, std::memory_order_acq_rel);
    mu_.lock();
    waiting.fetch_sub(1, std::memory_order_acq_rel);
  }
  ~AdminLock() { mu_.unlock(); }
  AdminLock(const AdminLock&) = delete;
  AdminLock& operator=(const AdminLock&) = delete;

 private:
  std::mutex& mu_;
};

std::uint64_t half_physical_memory() noexcept {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return UINT64_MAX;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2;
}
}  // namespace
void Engine::close_at_mpi_finalize() {
  finalize_hook_ = FinalizeHook([this] { close_for_finalize(); });
}

void Engine::close_for_finalize() noexcept {
  // The region's collective teardown first, with the progress thread still serving the peers
  // (they are in the same MPI_Finalize doing the same); its handle stays for ns_dereg_props.
  // With work in flight it cannot be torn down collectively: that work is failed below and the
  // transport's memory is left to MPI_Finalize.
  try {
    Region* r = region();
    if (r != nullptr && r->inflight.load(std::memory_order_acquire) == 0)
      (void)release_region_collectively(r);
  } catch (...) {
  }
  stop_progress_thread();
  {
    std::lock_guard<std::mutex> lk(progress_mu_);
    if (broken_.empty()) {
      fail_engine(
          "MPI_Finalize was called while this context was open; the context was closed then "
          "(only the destroy calls and ns_close remain valid)");
    }
  }
  closed_by_finalize_.store(true, std::memory_order_release);
}

int Engine::live_objects() const {
  std::lock_guard<std::mutex> lk(progress_mu_);
  return static_cast<int>(qps_.size() + cqs_.size());
}

// ---- region --------------------------------------------------------------------------------
std::uint32_t Engine::max_prop_bytes() const noexcept {
  const std::size_t max_message = tx_->max_packet_bytes();
  const std::size_t overhead = concat::packet_bytes(concat::PrType::kResponse, 0, 1);
  if (max_message <= overhead) return 0;
  return static_cast<std::uint32_t>(
      std::min<std::size_t>(max_message - overhead, std::numeric_limits<std::uint32_t>::max()));
}

Region* Engine::register_region(void* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
                                const std::uint64_t* row_offsets, std::uint32_t flags) {
  if (closed_by_finalize()) throw EngineError(NS_ERR_STATE, broken_reason());
  const std::size_t max_message = tx_->max_packet_bytes();
  const std::size_t one_response = concat::packet_bytes(concat::PrType::kResponse, prop_bytes, 1);
  // Every rank validates its own arguments, then all agree (collectively, before the transport's
  // collective registration): a rank whose arguments are refused, or arguments that differ
  // between ranks, fail every rank with the same message instead of leaving the others waiting
  // or gathering mismatched properties.
  agreement::Agreement me = region_agreement(prop_bytes, row_offsets, size_, flags);
  try {
    if ((flags & ~std::uint32_t{NS_MR_RIG_ONLY}) != 0)
      throw std::invalid_argument("unknown flags bits " + std::to_string(flags));
    if (row_offsets == nullptr) throw std::invalid_argument("row_offsets is NULL");
    if (prop_bytes == 0) throw std::invalid_argument("prop_bytes is 0");
    if (local_rows > 0 && base == nullptr) throw std::invalid_argument("base is NULL");
    if (local_rows > SIZE_MAX / prop_bytes) throw std::invalid_argument("region size overflows");
    if (one_response > max_message) {
      throw std::length_error(
          "a response packet for a property of " + std::to_string(prop_bytes) + " bytes needs " +
          std::to_string(one_response) + " bytes, but the " + transport_name() +
          " transport's largest message is " + std::to_string(max_message) + " bytes" +
          (transport_name() == std::string("mpi")
               ? "; set NETSPARSE_MPI_MESSAGE_BYTES to at least " + std::to_string(one_response) +
                     " (largest transport message, up to 16777216)"
               : std::string()));
    }
    const DestinationSolver solver(
        std::span<const std::uint64_t>(row_offsets, static_cast<std::size_t>(size_) + 1));
    const std::uint64_t mine = solver.end(rank_) - solver.begin(rank_);
    if (mine != local_rows) {
      throw std::invalid_argument("local_rows (" + std::to_string(local_rows) +
                                  ") differs from row_offsets[rank+1] - row_offsets[rank] (" +
                                  std::to_string(mine) + ")");
    }
    const std::uint64_t filter_bytes = filter::RowStateFilter::bytes_for(solver.total_rows());
    if (filter_bytes > half_physical_memory()) {
      throw std::length_error("the Idx Filter for " + std::to_string(solver.total_rows()) +
                              " global rows (row_offsets[size]) needs " +
                              std::to_string(filter_bytes) +
                              " bytes, more than half of physical memory");
    }
  } catch (const std::exception& e) {
    me.refuse(NS_ERR_INVALID, e.what());
  }
  const agreement::Verdict verdict = me.settle(
      size_,
      [this](const void* mine, std::size_t bytes, void* all) { tx_->allgather(mine, bytes, all); });
  if (!verdict.ok()) throw EngineError(NS_ERR_INVALID, verdict.reason);
  AdminLock lk(progress_mu_, admin_waiting_);
  if (region_owner_) throw EngineError(NS_ERR_STATE, "a property region is already registered");
  auto r = std::make_unique<ns_mr>(
      static_cast<std::byte*>(base), local_rows, prop_bytes,
      std::span<const std::uint64_t>(row_offsets, static_cast<std::size_t>(size_) + 1), rank_,
      half_physical_memory());
  concat::ConcatConfig cc;
  cc.num_nodes = static_cast<std::uint32_t>(size_);
  cc.prop_len = prop_bytes;
  cc.packet_bytes = static_cast<std::uint32_t>(std::max<std::size_t>(
      std::min<std::size_t>(config_.packet_bytes, max_message), one_response));
  cc.delay_ns = config_.concat_on() ? config_.delay_ns : 0;
  cc.virtualized = config_.virtual_queues;
  auto cp = std::make_unique<concat::ConcatPoint>(cc, *outbox_);
  // Collective; a RIG-only region is served by the engine alone: no window, no MR.
  r->rig_only = (flags & NS_MR_RIG_ONLY) != 0;
  if (!r->rig_only) r->tx_region = tx_->register_memory(base, local_rows * prop_bytes);
  concat_ = std::move(cp);
  region_owner_ = std::move(r);
  port_.concat = concat_.get();
  port_.region = region_owner_.get();
  region_.store(region_owner_.get(), std::memory_order_release);
  ++registrations_;
  plans_->region_changed();
  register_handle(region_owner_.get(), HandleKind::kMr, static_cast<const Engine*>(this));
  tx_->barrier();  // every node can serve before anyone posts
  return region_owner_.get();
}

void Engine::rebind_region(Region* mr, void* base) {
  if (mr == nullptr || mr != region()) {
    throw EngineError(NS_ERR_INVALID, "not the region registered on this context");
  }
  if (!mr->rig_only) {
    throw EngineError(NS_ERR_INVALID,
                      "the region was registered for one-sided reads (without NS_MR_RIG_ONLY): "
                      "peers' reads would still see the registered buffer; deregister and "
                      "register the new one instead");
  }
  if (mr->local_rows > 0 && base == nullptr) throw EngineError(NS_ERR_INVALID, "base is NULL");
  if (closed_by_finalize()) throw EngineError(NS_ERR_STATE, broken_reason());
  AdminLock lk(progress_mu_, admin_waiting_);
  if (mr->inflight.load(std::memory_order_acquire) != 0) {
    throw EngineError(NS_ERR_STATE, "work requests on this region are still in flight");
  }
  mr->base = static_cast<std::byte*>(base);
  ++rebinds_;
}

bool Engine::deregister_region(Region* mr) {
  if (mr == nullptr || mr != region()) {
    throw EngineError(NS_ERR_INVALID, "not the region registered on this context");
  }
  if (closed_by_finalize()) {
    // MPI is gone: the collective part ran at MPI_Finalize (close_for_finalize) or went with
    // it; what is left is local.
    AdminLock lk(progress_mu_, admin_waiting_);
    drop_region();
    return true;
  }
  if (mr->inflight.load(std::memory_order_acquire) != 0) {
    throw EngineError(NS_ERR_STATE, "work requests on this region are still in flight");
  }
  const bool clean = release_region_collectively(mr);
  AdminLock lk(progress_mu_, admin_waiting_);
  drop_region();
  return clean;
}

void Engine::quiesce_peers(std::optional<std::span<const int>> tell,
                           std::optional<std::span<const int>> wait_for) {
  if (tell.has_value() != wait_for.has_value()) {
    throw EngineError(NS_ERR_INVALID,
                      "ns_quiesce_peers: give both lists, or neither (n_tell = n_wait = -1: "
                      "every node)");
  }
  const auto checked = [&](std::span<const int> nodes, const char* which) {
    std::vector<int> out;
    out.reserve(nodes.size());
    for (const int p : nodes) {
      if (p < 0 || p >= size_) {
        throw EngineError(NS_ERR_INVALID, std::string("ns_quiesce_peers: ") + which +
                                              " names node " + std::to_string(p) + ", not in [0, " +
                                              std::to_string(size_) + ")");
      }
      if (p != rank_) out.push_back(p);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  std::vector<int> t, w;
  if (tell) {
    t = checked(*tell, "tell");
    w = checked(*wait_for, "wait_for");
  }
  std::lock_guard<std::mutex> q(quiesce_mu_);
  if (quiesce_.announced() != 0) {
    throw EngineError(NS_ERR_STATE,
                      "ns_quiesce_peers: a quiesce round is announced and not yet waited for");
  }
  AdminLock step(progress_mu_, admin_waiting_);  // the engine thread reads them in its step
  if (tell) {
    quiesce_.set_peers(std::move(t), std::move(w));
  } else {
    quiesce_.all_peers();
  }
}

int Engine::plan_push(std::uint32_t tag, std::uint32_t round) {
  if (region() == nullptr) {
    throw EngineError(NS_ERR_NOT_REGISTERED, "no property region is registered");
  }
  int lists = 0;
  {
    AdminLock lk(progress_mu_, admin_waiting_);  // the plan unit is the engine thread's
    lists = plans_->push(tag, round);
  }
  doorbell();  // what did not fit the transport's memory is packed by the next steps
  return lists;
}

bool Engine::release_region_collectively(Region* mr) {
  // The teardown protocol (docs/architecture.md): keep serving until every live peer has
  // quiesced, however late it comes — no timeout decides that a live peer is gone, and earlier
  // transient timeouts do not matter; peers known to have failed (reported by the transport:
  // verbs QP errors, the intra-host rings' process check, inproc kills) are not waited for.
  // Then, only if no peer has failed, the collective part (barrier, window free) with all of
  // them; otherwise everything stays local, and the caller is told. Every node, whatever peers
  // the application named for its rounds (ns_quiesce_peers): no other node may need it after.
  {
    std::lock_guard<std::mutex> q(quiesce_mu_);
    AdminLock step(progress_mu_, admin_waiting_);
    quiesce_.all_peers();
  }
  quiesce(-1);
  AdminLock lk(progress_mu_, admin_waiting_);
  bool clean = true;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && (peer_dead(p) || tx_->peer_failed(p))) clean = false;
  }
  if (clean) {
    tx_->barrier();
    if (mr->tx_region >= 0) tx_->deregister_memory(mr->tx_region);
  } else {
    note_failure();
  }
  return clean;
}

void Engine::drop_region() {
  concat_retired_.merge(concat_->stats());
  unregister_handle(region_owner_.get());
  for (auto& u : servers_) u->region_changed();  // before the rows they would read go
  region_.store(nullptr, std::memory_order_release);
  port_.concat = nullptr;
  port_.region = nullptr;
  plans_->region_changed();
  concat_.reset();
  region_owner_.reset();
}

// ---- queues --------------------------------------------------------------------------------
Cq* Engine::create_cq(std::uint32_t cqe) {
  AdminLock lk(progress_mu_, admin_waiting_);
  cqs_.push_back(std::make_unique<ns_cq>(cqe));
  if (config_.unchecked()) cqs_.back()->unchecked_owner = this;
  register_handle(cqs_.back().get(), HandleKind::kCq, static_cast<const Engine*>(this));
  return cqs_.back().get();
}

void Engine::destroy_cq(Cq* cq) {
  AdminLock lk(progress_mu_, admin_waiting_);
  if (cq->users.load() != 0) {
    throw EngineError(NS_ERR_STATE, "a queue pair still uses this completion queue");
  }
  for (const PendingWc& p : wc_backlog_) {
    if (p.cq == cq) throw EngineError(NS_ERR_STATE, "completions are still being delivered to it");
  }
  auto it = std::find_if(cqs_.begin(), cqs_.end(), [&](const auto& p) { return p.get() == cq; });
  if (it == cqs_.end()) throw EngineError(NS_ERR_INVALID, "unknown completion queue");
  unregister_handle(it->get());
  cqs_.erase(it);
}

Qp* Engine::create_qp(Cq& cq, std::uint32_t depth) {
  AdminLock lk(progress_mu_, admin_waiting_);
  qps_.push_back(std::make_unique<ns_qp>(*this, cq, depth));
  if (config_.unchecked()) qps_.back()->unchecked_owner = this;
  register_handle(qps_.back().get(), HandleKind::kQp, static_cast<const Engine*>(this));
  cq.users.fetch_add(1);
  return qps_.back().get();
}

void Engine::destroy_qp(Qp* qp) {
  AdminLock lk(progress_mu_, admin_waiting_);
  if (qp->outstanding.load(std::memory_order_acquire) != 0) {
    throw EngineError(NS_ERR_STATE, "work requests are still outstanding");
  }
  auto it = std::find_if(qps_.begin(), qps_.end(), [&](const auto& p) { return p.get() == qp; });
  if (it == qps_.end()) throw EngineError(NS_ERR_INVALID, "unknown queue pair");
  qp->cq().users.fetch_sub(1);
  unregister_handle(it->get());
  qps_.erase(it);
}

Plan* Engine::create_plan(const ns_send_wr& wr) {
  AdminLock lk(progress_mu_, admin_waiting_);
  const Region* r = region();
  if (r == nullptr) throw EngineError(NS_ERR_NOT_REGISTERED, "no property region is registered");
  plan_handles_.push_back(std::make_unique<ns_plan>(next_plan_id_++, wr, r->prop_bytes,
                                                    static_cast<PostTarget*>(this)));
  ns_plan* p = plan_handles_.back().get();
  register_handle(p, HandleKind::kPlan, static_cast<const Engine*>(this));
  plans_->add(*p);
  return p;
}

void Engine::destroy_plan(Plan* plan) {
  AdminLock lk(progress_mu_, admin_waiting_);
  if (plan->busy.load(std::memory_order_acquire)) {
    throw EngineError(NS_ERR_STATE, "a start of this plan is still in flight");
  }
  auto it = std::find_if(plan_handles_.begin(), plan_handles_.end(),
                         [&](const auto& p) { return p.get() == plan; });
  if (it == plan_handles_.end()) throw EngineError(NS_ERR_INVALID, "unknown plan");
  plans_->remove(**it);
  unregister_handle(it->get());
  plan_handles_.erase(it);
}

// ---- statistics ----------------------------------------------------------------------------
std::uint64_t Engine::next_timer_ns() const {
  std::lock_guard<std::mutex> lk(progress_mu_);
  return concat_ ? concat_->next_expiry_ns() : UINT64_MAX;
}

Engine::UnitWork Engine::take_unit_work() {
  UnitWork w;
  walked_seen_.resize(clients_.size(), 0);
  for (std::size_t k = 0; k < clients_.size(); ++k) {
    const ClientCounters& c = clients_[k]->counters;
    const std::uint64_t d = c.requested - walked_seen_[k];
    walked_seen_[k] = c.requested;
    w.walked += d;
    w.max_unit_walked = std::max(w.max_unit_walked, d);
    w.sent_total += c.sent;
    w.responses_total += c.responses;
  }
  std::uint64_t served = 0;
  for (const auto& u : servers_) served += u->counters.answered;
  w.served = served - served_seen_;
  served_seen_ = served;
  return w;
}

Engine::Snapshot Engine::snapshot() const {
  std::lock_guard<std::mutex> lk(progress_mu_);
  Snapshot s;
  for (const auto& u : clients_) s.client.add(u->counters);
  for (const auto& u : servers_) s.server.add(u->counters);
  s.concat = concat_retired_;
  if (concat_) s.concat.merge(concat_->stats());
  s.frames = outbox_->stats();
  s.plans = plans_->counters;
  s.scatters = scatters_->counters;
  s.timeouts = timeouts_;
  s.rdma_reads = reads_->reads();
  s.malformed_packets = malformed_packets_;
  s.completions = completions_;
  s.packets_in = packets_in_;
  s.frames_in = frames_in_;
  s.tx_bytes = tx_->bytes_sent();
  s.control_prs = control_prs_;
  s.registrations = registrations_;
  s.rebinds = rebinds_;
  s.standby_takeovers = standby_takeovers_;
  s.standby_steps = standby_steps_;
  s.standby_wakes = standby_wakes_.load(std::memory_order_relaxed);
  s.commands_active = active_commands.load(std::memory_order_relaxed);
  if (const Region* r = region()) s.filter_commands = r->fifo_depth();
  s.wc_backlog = wc_backlog_.size();
  for (const auto& u : clients_) s.prs_in_flight += u->entries_in_flight();
  if (concat_) s.prs_buffered = concat_->buffered_prs();
  s.frames_queued = outbox_->queued_frames();
  std::copy(std::begin(decode_errors_), std::end(decode_errors_), std::begin(s.decode_errors));
  s.profiled = profile_;
  s.steps = steps_;
  std::copy(std::begin(stage_ns_), std::end(stage_ns_), std::begin(s.stage_ns));
  return s;
}

void Engine::reset_stats() {
  AdminLock lk(progress_mu_, admin_waiting_);
  for (auto& u : clients_) u->counters = ClientCounters{};
  for (auto& u : servers_) u->counters = ServerCounters{};
  concat_retired_ = concat::ConcatStats{};
  if (concat_) concat_->reset_stats();
  outbox_->reset_stats();
  plans_->counters = PlanCounters{};
  scatters_->counters = ScatterCounters{};
  reads_->reset_stats();
  timeouts_ = malformed_packets_ = completions_ = packets_in_ = frames_in_ = control_prs_ = steps_ =
      registrations_ = rebinds_ = 0;
  std::fill(std::begin(stage_ns_), std::end(stage_ns_), 0);
  std::fill(std::begin(decode_errors_), std::end(decode_errors_), 0);
}

}  // namespace netsparse::rig
