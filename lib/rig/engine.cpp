// The RIG engine: admin, the progress loop, frame delivery, dispatch, RDMA reads, completions,
// watchdog, quiesce and statistics. The units, the region, the outbox and the queues live in
// their own files.
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
#include "config/settings.hpp"
#include "rig/backoff.hpp"
#include "rig/copy.hpp"
#include "rig/handles.hpp"

namespace netsparse::rig {

namespace {
constexpr std::uint64_t kWatchdogTickNs = 1'000'000;  // 1 ms
constexpr int kPollMessages = 64;
constexpr std::size_t kDispatchPerStep = 256;
constexpr std::size_t kMaxReadSlots = 65536;  // RDMA reads in flight (bounce slots)

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

Engine::Engine(std::unique_ptr<transport::Transport> tx, const Config& config)
    : config_(config),
      tx_(std::move(tx)),
      rank_(tx_->rank()),
      size_(tx_->size()),
      dead_(new std::atomic<bool>[static_cast<std::size_t>(size_)]),
      quiesce_(size_),
      profile_(netsparse::config::choice(netsparse::config::Env::kEngineProfile) == "1") {
  if (config_.progress_mode == NS_PROGRESS_AUTO) config_.progress_mode = NS_PROGRESS_THREAD;
  for (int p = 0; p < size_; ++p) dead_[p].store(false);
  last_heard_ns_.assign(static_cast<std::size_t>(size_), now_ns());
  timeouts_seen_.assign(static_cast<std::size_t>(size_), 0);
  if (netsparse::config::is_set(netsparse::config::Env::kPresumeDeadS))
    presume_dead_ns_ = static_cast<std::uint64_t>(
        netsparse::config::real(netsparse::config::Env::kPresumeDeadS) * 1e9);
  port_.rank = static_cast<std::uint32_t>(rank_);
  port_.size = static_cast<std::uint32_t>(size_);
  port_.dead = dead_.get();
  port_.sink = this;
  outbox_ = std::make_unique<Outbox>(*tx_, dead_.get(), *this, size_);
  for (int u = 0; u < config_.client_units; ++u) {
    clients_.push_back(std::make_unique<ClientUnit>(port_, static_cast<std::uint16_t>(u), config_));
  }
  for (int u = 0; u < config_.server_units; ++u) {
    servers_.push_back(std::make_unique<ServerUnit>(port_));
  }
  frame_packets_.resize(concat::kMaxPacketsPerFrame);
  read_completions_.resize(kPollMessages);
  handler_ = [this](const transport::ReceivedPacket& p) { on_frame(p); };
  if (!inline_mode()) thread_ = std::thread([this] { progress_thread_main(); });
}

Engine::~Engine() {
  finalize_hook_.release();  // the context is closing itself
  // Whatever the API did not destroy goes with the engine: its handles die now.
  for (const auto& q : qps_) unregister_handle(q.get());
  for (const auto& c : cqs_) unregister_handle(c.get());
  if (region_owner_) unregister_handle(region_owner_.get());
  stop_progress_thread();
}

void Engine::stop_progress_thread() noexcept {
  stop_.store(true);
  { std::lock_guard<std::mutex> lk(sleep_mu_); }
  sleep_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

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
                                const std::uint64_t* row_offsets) {
  if (closed_by_finalize()) throw EngineError(NS_ERR_STATE, broken_reason());
  const std::size_t max_message = tx_->max_packet_bytes();
  const std::size_t one_response = concat::packet_bytes(concat::PrType::kResponse, prop_bytes, 1);
  // Every rank validates its own arguments, then all agree (collectively, before the transport's
  // collective registration): a rank whose arguments are refused, or arguments that differ
  // between ranks, fail every rank with the same message instead of leaving the others waiting
  // or gathering mismatched properties.
  std::string why;
  try {
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
    why = e.what();
  }
  using Shared = RegionAgreement;
  Shared me = RegionAgreement::of(prop_bytes, row_offsets, size_);
  std::snprintf(me.error, sizeof me.error, "%s", why.c_str());
  std::vector<Shared> all(static_cast<std::size_t>(size_));
  tx_->allgather(&me, sizeof me, all.data());
  for (int r = 0; r < size_; ++r) {
    const Shared& o = all[static_cast<std::size_t>(r)];
    if (o.error[0] != '\0') {
      throw EngineError(NS_ERR_INVALID, "rank " + std::to_string(r) + ": " + o.error);
    }
  }
  for (int r = 1; r < size_; ++r) {
    const Shared& o = all[static_cast<std::size_t>(r)];
    const auto differ = [&](const char* field, std::uint64_t a, std::uint64_t b) {
      throw EngineError(NS_ERR_INVALID, std::string("ranks disagree on ") + field +
                                            ": rank 0 has " + std::to_string(a) + ", rank " +
                                            std::to_string(r) + " has " + std::to_string(b));
    };
    if (o.prop_bytes != all[0].prop_bytes) differ("prop_bytes", all[0].prop_bytes, o.prop_bytes);
    if (o.total_rows != all[0].total_rows) {
      differ("row_offsets[size] (total rows)", all[0].total_rows, o.total_rows);
    }
    if (o.offsets_hash != all[0].offsets_hash) {
      throw EngineError(NS_ERR_INVALID, "ranks disagree on row_offsets (rank 0 and rank " +
                                            std::to_string(r) + " pass different partitions)");
    }
  }
  AdminLock lk(progress_mu_, admin_waiting_);
  if (region_owner_) throw EngineError(NS_ERR_STATE, "a property region is already registered");
  auto r = std::make_unique<ns_mr>(
      *this, static_cast<std::byte*>(base), local_rows, prop_bytes,
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
  r->tx_region = tx_->register_memory(base, local_rows * prop_bytes);  // collective
  concat_ = std::move(cp);
  region_owner_ = std::move(r);
  port_.concat = concat_.get();
  port_.region = region_owner_.get();
  region_.store(region_owner_.get(), std::memory_order_release);
  register_handle(region_owner_.get(), HandleKind::kMr);
  tx_->barrier();  // every node can serve before anyone posts
  return region_owner_.get();
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

bool Engine::release_region_collectively(Region* mr) {
  // The teardown protocol (docs/architecture.md): keep serving until every live peer has
  // quiesced, however late it comes — no timeout decides that a live peer is gone, and earlier
  // transient timeouts do not matter; peers known to have failed (reported by the transport:
  // verbs QP errors, the intra-host rings' process check, inproc kills) are not waited for.
  // Then, only if no peer has failed, the collective part (barrier, window free) with all of
  // them; otherwise everything stays local, and the caller is told.
  quiesce(-1);
  AdminLock lk(progress_mu_, admin_waiting_);
  bool clean = true;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && (peer_dead(p) || tx_->peer_failed(p))) clean = false;
  }
  if (clean) {
    tx_->barrier();
    tx_->deregister_memory(mr->tx_region);
  } else {
    note_failure();
  }
  return clean;
}

void Engine::drop_region() {
  concat_retired_.merge(concat_->stats());
  unregister_handle(region_owner_.get());
  region_.store(nullptr, std::memory_order_release);
  port_.concat = nullptr;
  port_.region = nullptr;
  concat_.reset();
  region_owner_.reset();
}

// ---- queues --------------------------------------------------------------------------------
Cq* Engine::create_cq(std::uint32_t cqe) {
  AdminLock lk(progress_mu_, admin_waiting_);
  cqs_.push_back(std::make_unique<ns_cq>(*this, cqe));
  register_handle(cqs_.back().get(), HandleKind::kCq);
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
  qps_.push_back(std::make_unique<ns_qp>(*this, *this, cq, depth));
  register_handle(qps_.back().get(), HandleKind::kQp);
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
  for (ReadSlot& r : read_slots_) {
    if (r.cmd == nullptr) continue;
    Command* c = r.cmd;
    r.cmd = nullptr;  // abandoned: the transport may still write into the bounce buffer
    c->status = NS_WC_TRANSPORT_ERR;
    complete(*c);
  }
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

void Engine::progress_thread_main() {
  Backoff backoff;
  while (!stop_.load(std::memory_order_relaxed)) {
    int work = 0;
    bool busy = false;
    std::uint64_t next_expiry = UINT64_MAX;
    {
      std::lock_guard<std::mutex> lk(progress_mu_);
      work = guarded_step();
      busy = active_commands.load(std::memory_order_relaxed) != 0 || !outbox_->empty() ||
             rdma_outstanding_ != 0;
      if (concat_) next_expiry = concat_->next_expiry_ns();
    }
    while (admin_waiting_.load(std::memory_order_acquire) != 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
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

int Engine::step() {
  std::uint64_t now = now_ns();
  std::uint64_t mark[6] = {now, 0, 0, 0, 0, 0};
  std::size_t work = poll_transport();
  if (rdma_outstanding_ != 0) work += poll_reads();
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
  if (!outbox_->empty()) work += outbox_->flush();
  if (concat_ && outbox_->empty()) quiesce_.left();
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
  last_heard_ns_[static_cast<std::size_t>(m.src)] = now_ns();
  timeouts_seen_[static_cast<std::size_t>(m.src)] = timeouts_;
  for (std::size_t k = 0; k < s.packets; ++k) on_packet(m.src, frame_packets_[k]);
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
  if (c.opcode == NS_WR_RDMA_READ) {
    const std::uint64_t i = c.read_idx;
    const int owner = r.solver.owner(i);
    const std::uint32_t P = r.prop_bytes;
    if (i >= r.solver.total_rows()) {
      c.status = NS_WC_REM_INV_REQ;
    } else if (owner == rank_) {
      copy_prop(c.out, r.base + (i - r.row_begin) * P, P);
    } else if (peer_dead(owner)) {
      c.status = NS_WC_TRANSPORT_ERR;
    } else if (c.deadline_ns <= now) {
      c.status = NS_WC_WATCHDOG_TIMEOUT;
      note_timeout();
    } else {
      if (free_read_slots_.empty()) {
        if (read_slots_.size() >= kMaxReadSlots) return false;  // all busy: retried later
        read_slots_.emplace_back();
        free_read_slots_.push_back(static_cast<std::uint32_t>(read_slots_.size() - 1));
      }
      const std::uint32_t slot = free_read_slots_.back();
      ReadSlot& rs = read_slots_[slot];
      rs.bounce.resize(P);
      const std::uint64_t offset = (i - r.solver.begin(owner)) * P;
      switch (tx_->read(owner, r.tx_region, offset, rs.bounce.data(), P, slot)) {
        case transport::TxStatus::kOk:
          free_read_slots_.pop_back();
          rs.cmd = &c;
          rs.busy = true;
          ++rdma_reads_;
          ++rdma_outstanding_;
          return true;
        case transport::TxStatus::kNoResource:
          return false;  // retried on a later step, in order
        case transport::TxStatus::kPeerFailed:
          dead_[owner].store(true, std::memory_order_relaxed);
          note_failure();
          c.status = NS_WC_TRANSPORT_ERR;
          break;
        case transport::TxStatus::kError:
          c.status = NS_WC_TRANSPORT_ERR;
          break;
      }
    }
    ++rdma_reads_;
    complete(c);
    return true;
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

std::size_t Engine::poll_reads() {
  const int n =
      tx_->poll_reads(read_completions_.data(), static_cast<int>(read_completions_.size()));
  for (int k = 0; k < n; ++k) {
    const transport::ReadCompletion& rc = read_completions_[static_cast<std::size_t>(k)];
    if (rc.cookie >= read_slots_.size()) continue;
    ReadSlot& rs = read_slots_[rc.cookie];
    rs.busy = false;
    free_read_slots_.push_back(static_cast<std::uint32_t>(rc.cookie));
    --rdma_outstanding_;
    Command* c = rs.cmd;
    rs.cmd = nullptr;
    if (c == nullptr) continue;  // abandoned at its deadline: the late data is discarded
    if (rc.ok) {
      copy_prop(c->out, rs.bounce.data(), c->mr->prop_bytes);
      c->status = NS_WC_SUCCESS;
    } else {
      c->status = NS_WC_TRANSPORT_ERR;
    }
    complete(*c);
  }
  return n > 0 ? static_cast<std::size_t>(n) : 0;
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
  c.mr->inflight.fetch_sub(1, std::memory_order_release);
  qp.release(c);  // the slot may be reused from here on; `c` is not touched again
  active_commands.fetch_sub(1, std::memory_order_acq_rel);
  ++completions_;
  if (!signaled) return;
  if (!wc_backlog_.empty() || !cq.push(wc)) {
    wc_backlog_.push_back({&cq, wc});
    return;
  }
  cq.notify();
}

std::size_t Engine::flush_completions() {
  std::size_t n = 0;
  while (!wc_backlog_.empty()) {
    PendingWc& p = wc_backlog_.front();
    if (!p.cq->push(p.wc)) break;
    p.cq->notify();
    wc_backlog_.pop_front();
    ++n;
  }
  return n;
}

void Engine::run_watchdog(std::uint64_t now) {
  if (quiesce_waiting_.load(std::memory_order_acquire)) {
    for (int p = 0; p < size_; ++p) {
      const auto i = static_cast<std::size_t>(p);
      // Timed out since we last heard from it, and silent for presume_dead_ns_.
      if (p == rank_ || peer_dead(p) || timeouts_ <= timeouts_seen_[i] ||
          now < last_heard_ns_[i] + presume_dead_ns_) {
        continue;
      }
      dead_[p].store(true, std::memory_order_relaxed);
      tx_->note_peer_failed(p);
      note_failure();
    }
  }
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && !peer_dead(p) && tx_->peer_failed(p)) {
      dead_[p].store(true, std::memory_order_relaxed);
      note_failure();
    }
  }
  if (config_.watchdog_ms == 0) return;
  for (auto& u : clients_) u->watchdog(now);
  // RDMA reads past their deadline complete now; their bounce slots stay with the transport.
  for (ReadSlot& rs : read_slots_) {
    if (rs.cmd == nullptr || rs.cmd->deadline_ns > now) continue;
    Command* c = rs.cmd;
    rs.cmd = nullptr;
    c->status = NS_WC_WATCHDOG_TIMEOUT;
    note_timeout();
    complete(*c);
  }
}

// ---- quiesce -------------------------------------------------------------------------------
void Engine::step_quiesce(std::uint64_t now) {
  const std::uint64_t round = quiesce_.to_send();
  if (round == 0 || active_commands.load(std::memory_order_acquire) != 0) return;
  // Control PRs are never queued and would overtake what is still queued: flush that first, so
  // "done" reaches each peer after everything this node sent it before.
  concat_->flush_all();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || peer_dead(p)) continue;
    concat_->push(
        concat::PrType::kControl, static_cast<std::uint32_t>(p),
        concat::PrHeader{static_cast<std::uint32_t>(rank_), 0, round, kControlQuiesceDone}, nullptr,
        now);
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
  quiesce_waiting_.store(true, std::memory_order_release);
  struct ClearWaiting {
    std::atomic<bool>& flag;
    ~ClearWaiting() { flag.store(false, std::memory_order_release); }
  } clear_waiting{quiesce_waiting_};
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
  s.timeouts = timeouts_;
  s.rdma_reads = rdma_reads_;
  s.malformed_packets = malformed_packets_;
  s.completions = completions_;
  s.packets_in = packets_in_;
  s.frames_in = frames_in_;
  s.tx_bytes = tx_->bytes_sent();
  s.control_prs = control_prs_;
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
  timeouts_ = rdma_reads_ = malformed_packets_ = completions_ = packets_in_ = frames_in_ =
      control_prs_ = steps_ = 0;
  std::fill(std::begin(stage_ns_), std::end(stage_ns_), 0);
  std::fill(std::begin(decode_errors_), std::end(decode_errors_), 0);
}

}  // namespace netsparse::rig
