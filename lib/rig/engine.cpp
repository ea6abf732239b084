// The RIG engine: progress loop, command dispatch, server units, outbox, completions, watchdog,
// quiesce protocol and statistics. Client units are in client_unit.cpp.
#include "rig/engine.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "rig/copy.hpp"

namespace netsparse::rig {

namespace {
constexpr std::uint64_t kWatchdogTickNs = 1'000'000;  // 1 ms
constexpr int kPollPackets = 64;
constexpr std::size_t kDispatchPerStep = 256;

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
}  // namespace

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// ---- Config --------------------------------------------------------------------------------
Config Config::from_attr(const ns_context_attr* attr) {
  Config c;
  if (attr == nullptr) return c;
  const std::uint64_t m = attr->comp_mask;
  constexpr std::uint64_t kKnown = (NS_CTX_ATTR_VIRTUAL_QUEUES << 1) - 1;
  if ((m & ~kKnown) != 0) throw std::invalid_argument("ns_context_attr: unknown comp_mask bits");
  if (m & NS_CTX_ATTR_TRANSPORT) {
    if (attr->transport < NS_TRANSPORT_AUTO || attr->transport > NS_TRANSPORT_INPROC) {
      throw std::invalid_argument("ns_context_attr.transport: unknown transport " +
                                  std::to_string(attr->transport));
    }
    c.transport = attr->transport;
  }
  if (m & NS_CTX_ATTR_UNITS) {
    if (attr->num_client_units < 1 || attr->num_client_units > kMaxUnits ||
        attr->num_server_units < 1 || attr->num_server_units > kMaxUnits) {
      throw std::invalid_argument("ns_context_attr: unit counts must be in 1.." +
                                  std::to_string(kMaxUnits));
    }
    c.client_units = attr->num_client_units;
    c.server_units = attr->num_server_units;
  }
  if (m & NS_CTX_ATTR_PROGRESS) {
    if (attr->progress_mode != NS_PROGRESS_THREAD && attr->progress_mode != NS_PROGRESS_INLINE) {
      throw std::invalid_argument("ns_context_attr.progress_mode: unknown mode");
    }
    c.progress_mode = attr->progress_mode;
  }
  if (m & NS_CTX_ATTR_PACKET) {
    if (attr->packet_bytes < 64 || attr->packet_bytes > (1u << 20)) {
      throw std::invalid_argument("ns_context_attr.packet_bytes must be in 64..1048576");
    }
    c.packet_bytes = attr->packet_bytes;
  }
  if (m & NS_CTX_ATTR_DELAY) c.delay_ns = attr->concat_delay_ns;
  if (m & NS_CTX_ATTR_PENDING) {
    if (attr->pending_entries < 1 || attr->pending_entries > (1u << 20)) {
      throw std::invalid_argument("ns_context_attr.pending_entries must be in 1..1048576");
    }
    c.pending_entries = attr->pending_entries;
  }
  if (m & NS_CTX_ATTR_WATCHDOG) c.watchdog_ms = attr->watchdog_ms;
  if (m & NS_CTX_ATTR_FLAGS) {
    constexpr std::uint32_t kFlags = NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT;
    if ((attr->flags & ~kFlags) != 0)
      throw std::invalid_argument("ns_context_attr.flags: unknown bits");
    c.flags = attr->flags;
  }
  if (m & NS_CTX_ATTR_BATCH) {
    if (attr->idx_chunk < 1 || attr->idx_chunk > (1u << 20)) {
      throw std::invalid_argument("ns_context_attr.idx_chunk must be in 1..1048576");
    }
    c.idx_chunk = attr->idx_chunk;
  }
  if (m & NS_CTX_ATTR_VIRTUAL_QUEUES) c.virtual_queues = attr->virtual_queues != 0;
  return c;
}

// ---- counters ------------------------------------------------------------------------------
void ClientCounters::add(const ClientCounters& o) {
  requested += o.requested;
  filtered += o.filtered;
  coalesced += o.coalesced;
  local += o.local;
  sent += o.sent;
  stalls += o.stalls;
  stale_responses += o.stale_responses;
  stale_waiters += o.stale_waiters;
  retried += o.retried;
  invalid_local += o.invalid_local;
  responses += o.responses;
}
void ServerCounters::add(const ServerCounters& o) {
  packets += o.packets;
  answered += o.answered;
  invalid += o.invalid;
  malformed_prs += o.malformed_prs;
}

// ---- Cq ------------------------------------------------------------------------------------
void Cq::notify() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard<std::mutex> lk(sleep_mu_);
    ++wakeups_;
  }
  cv_.notify_all();
}

int Cq::poll(int n, ns_wc* wc) noexcept {
  std::lock_guard<std::mutex> lk(consumer_mu_);
  int got = 0;
  while (got < n && ring_.pop(wc[got])) ++got;
  return got;
}

void Cq::sleep(std::chrono::microseconds d) {
  sleepers_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  {
    std::unique_lock<std::mutex> lk(sleep_mu_);
    const std::uint64_t seen = wakeups_;
    if (ring_.empty()) cv_.wait_for(lk, d, [&] { return wakeups_ != seen; });
  }
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

// ---- Qp ------------------------------------------------------------------------------------
Qp::Qp(Engine& engine, Cq& cq, std::uint32_t depth)
    : engine_(engine), cq_(cq), slots_(depth), submit_(depth), free_(depth) {
  for (std::uint32_t i = 0; i < depth; ++i) {
    slots_[i].slot = i;
    slots_[i].qp = this;
    free_.push(i);
  }
}

namespace {
const char* validate_wr(const ns_send_wr& w, const Engine& engine) {
  constexpr unsigned kFlags = NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH;
  if ((w.send_flags & ~kFlags) != 0) return "unknown send_flags bits";
  const Region* reg = engine.region();
  if (w.opcode == NS_WR_RIG) {
    const auto& r = w.wr.rig;
    if (r.mr == nullptr) return "wr.rig.mr is NULL";
    if (r.mr != reg) return "wr.rig.mr is not the region registered on this context";
    if (r.count >= kMaxWrCount) return "wr.rig.count must be < 2^40";
    if (r.count == 0) return nullptr;
    if (r.idx == nullptr) return "wr.rig.idx is NULL";
    if (r.out == nullptr) return "wr.rig.out is NULL";
    if (r.layout == NS_RIG_LAYOUT_INDEXED) {
      if (r.window_len == 0) return "wr.rig.window_len is 0 (INDEXED layout)";
      if (r.window_base + r.window_len < r.window_base) return "wr.rig window overflows";
      if (r.window_len > UINT64_MAX / reg->prop_bytes) return "wr.rig window too large";
    } else if (r.layout == NS_RIG_LAYOUT_POSITIONAL) {
      if (r.count > UINT64_MAX / reg->prop_bytes) return "wr.rig.count too large";
    } else {
      return "wr.rig.layout is neither INDEXED nor POSITIONAL";
    }
    return nullptr;
  }
  if (w.opcode == NS_WR_RDMA_READ) {
    const auto& r = w.wr.rdma_read;
    if (r.mr == nullptr) return "wr.rdma_read.mr is NULL";
    if (r.mr != reg) return "wr.rdma_read.mr is not the region registered on this context";
    if (r.out == nullptr) return "wr.rdma_read.out is NULL";
    return nullptr;
  }
  return "unknown opcode";
}
}  // namespace

ns_status_t Qp::post(ns_send_wr* wr, ns_send_wr** bad_wr) {
  std::lock_guard<std::mutex> lk(post_mu_);
  const std::uint64_t deadline =
      engine_.config().watchdog_ms == 0
          ? UINT64_MAX
          : now_ns() + std::uint64_t{engine_.config().watchdog_ms} * 1'000'000;
  ns_status_t status = NS_OK;
  std::size_t n = 0;
  Region* reg = nullptr;
  ns_send_wr* w = wr;
  for (; w != nullptr; w = w->next) {
    if (const char* why = validate_wr(*w, engine_)) {
      set_last_error(std::string("ns_post_send: ") + why);
      status = NS_ERR_INVALID;
      break;
    }
    std::uint32_t slot = 0;
    if (!free_.pop(slot)) {
      set_last_error("ns_post_send: send queue full (max_send_wr outstanding)");
      status = NS_ERR_NO_RESOURCE;
      break;
    }
    Command& c = slots_[slot];
    c.wr_id = w->wr_id;
    c.opcode = w->opcode;
    c.flags = w->send_flags;
    c.deadline_ns = deadline;
    if (w->opcode == NS_WR_RIG) {
      const auto& r = w->wr.rig;
      reg = static_cast<Region*>(r.mr);
      c.mr = reg;
      c.idx = r.idx;
      c.count = r.count;
      c.out = static_cast<std::byte*>(r.out);
      c.layout = r.layout;
      c.window_base = r.window_base;
      c.window_len = r.window_len;
    } else {
      const auto& r = w->wr.rdma_read;
      reg = static_cast<Region*>(r.mr);
      c.mr = reg;
      c.idx = nullptr;
      c.read_idx = r.idx;
      c.count = 1;
      c.out = static_cast<std::byte*>(r.out);
      c.layout = NS_RIG_LAYOUT_POSITIONAL;
    }
    submit_.write(n, slot);
    ++n;
  }
  if (n > 0) {
    // Counted before the doorbell so that nobody sees "nothing in flight" while it is.
    outstanding.fetch_add(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    engine_.active_commands.fetch_add(n, std::memory_order_relaxed);
    reg->inflight.fetch_add(n, std::memory_order_relaxed);
    submit_.publish(n);
    engine_.doorbell();
  }
  if (status != NS_OK && bad_wr != nullptr) *bad_wr = w;
  return status;
}

// ---- Region --------------------------------------------------------------------------------
namespace {
std::uint64_t checked_row_begin(std::span<const std::uint64_t> offsets, int rank,
                                std::uint64_t local_rows) {
  const auto r = static_cast<std::size_t>(rank);
  if (offsets[r + 1] < offsets[r] || offsets[r + 1] - offsets[r] != local_rows) {
    throw std::invalid_argument("local_rows (" + std::to_string(local_rows) +
                                ") differs from row_offsets[rank+1] - row_offsets[rank] (" +
                                std::to_string(offsets[r + 1] - offsets[r]) + ")");
  }
  return offsets[r];
}
}  // namespace

Region::Region(Engine& engine, std::byte* base_, std::uint64_t local_rows_,
               std::uint32_t prop_bytes_, std::span<const std::uint64_t> row_offsets, int rank)
    : engine_(engine),
      base(base_),
      local_rows(local_rows_),
      prop_bytes(prop_bytes_),
      solver(row_offsets),
      row_begin(checked_row_begin(row_offsets, rank, local_rows_)),
      row_end(row_begin + local_rows_) {}

// ---- Outbox --------------------------------------------------------------------------------
bool Outbox::try_send(std::uint32_t dest, std::span<const std::byte> packet) {
  if (engine_.peer_dead(static_cast<int>(dest))) {
    ++dropped;
    return true;
  }
  switch (engine_.tx().send(static_cast<int>(dest), packet)) {
    case transport::TxStatus::kOk:
      return true;
    case transport::TxStatus::kNoResource:
      return false;
    case transport::TxStatus::kPeerFailed:
      engine_.mark_dead(static_cast<int>(dest));
      engine_.note_failure();
      ++dropped;
      return true;
    case transport::TxStatus::kError:
      ++tx_errors;
      ++dropped;
      return true;
  }
  return true;
}

void Outbox::on_packet(std::uint32_t dest, concat::PrType, std::span<const std::byte> packet,
                       concat::FlushCause) {
  auto& q = backlog_[dest];
  if (q.empty() && !engine_.in_handler_ && try_send(dest, packet)) return;
  std::vector<std::byte> buf;
  if (!spare_.empty()) {
    buf = std::move(spare_.back());
    spare_.pop_back();
  }
  buf.assign(packet.begin(), packet.end());
  q.push_back(std::move(buf));
  ++queued_;
  ++queued_total;
}

std::size_t Outbox::flush() {
  std::size_t sent = 0;
  for (std::uint32_t d = 0; d < backlog_.size() && queued_ > 0; ++d) {
    auto& q = backlog_[d];
    while (!q.empty()) {
      if (!try_send(d, q.front())) break;  // this destination is still busy; keep its order
      spare_.push_back(std::move(q.front()));
      q.pop_front();
      --queued_;
      ++sent;
    }
  }
  return sent;
}

// ---- ServerUnit ----------------------------------------------------------------------------
std::size_t ServerUnit::serve(std::uint64_t now) {
  std::size_t answered = 0;
  Region* r = engine_.region();
  while (!inbox.empty()) {
    InPacket* in = inbox.front();
    inbox.pop_front();
    concat::PacketView v;
    if (r == nullptr || concat::decode_packet(in->bytes, static_cast<std::uint32_t>(engine_.rank()),
                                              r->prop_bytes, &v) != concat::DecodeError::kOk) {
      ++counters.malformed_prs;
      engine_.recycle(in);
      continue;
    }
    ++counters.packets;
    const auto self = static_cast<std::uint32_t>(engine_.rank());
    const auto nodes = static_cast<std::uint32_t>(engine_.size());
    const std::uint32_t P = r->prop_bytes;
    constexpr std::uint32_t kPrefetch = 4;  // rows are read at random: overlap the misses
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      if (i + kPrefetch < v.size()) {
        const std::uint64_t ahead = v.pr(i + kPrefetch).idx - r->row_begin;
        if (ahead < r->local_rows) __builtin_prefetch(r->base + ahead * P);
      }
      const concat::PrHeader pr = v.pr(i);
      // No engine has a unit >= kMaxUnits: such a read is forged, answering it is pointless.
      if (pr.src_node >= nodes || pr.src_node == self || pr.src_unit >= kMaxUnits) {
        ++counters.malformed_prs;
        continue;
      }
      const concat::PrHeader resp{self, pr.src_unit, pr.idx, pr.req_id};
      const std::uint64_t off = pr.idx - r->row_begin;  // wraps for idx < row_begin
      if (pr.idx >= r->row_begin && off < r->local_rows) {
        engine_.concat().push(concat::PrType::kResponse, pr.src_node, resp, r->base + off * P, now);
      } else {
        // Never read outside the registered region: refuse the idx (a payload-free PR).
        engine_.concat().push(concat::PrType::kInvalid, pr.src_node, resp, nullptr, now);
        ++counters.invalid;
      }
      ++counters.answered;
      ++answered;
    }
    engine_.recycle(in);
  }
  return answered;
}

// ---- Engine --------------------------------------------------------------------------------
Engine::Engine(std::unique_ptr<transport::Transport> tx, const Config& config)
    : config_(config),
      tx_(std::move(tx)),
      rank_(tx_->rank()),
      size_(tx_->size()),
      dead_(new std::atomic<bool>[static_cast<std::size_t>(size_)]),
      done_from_(new std::atomic<std::uint64_t>[static_cast<std::size_t>(size_)]) {
  for (int p = 0; p < size_; ++p) {
    dead_[p].store(false);
    done_from_[p].store(0);
  }
  outbox_ = std::make_unique<Outbox>(*this);
  outbox_->resize(size_);
  for (int u = 0; u < config_.client_units; ++u) {
    clients_.push_back(std::make_unique<ClientUnit>(*this, static_cast<std::uint16_t>(u), config_));
  }
  for (int u = 0; u < config_.server_units; ++u) {
    servers_.push_back(std::make_unique<ServerUnit>(*this));
  }
  read_completions_.resize(kPollPackets);
  handler_ = [this](const transport::ReceivedPacket& p) { on_packet(p); };
  if (!inline_mode()) thread_ = std::thread([this] { progress_thread_main(); });
}

Engine::~Engine() {
  stop_.store(true);
  { std::lock_guard<std::mutex> lk(sleep_mu_); }
  sleep_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int Engine::live_objects() const {
  std::lock_guard<std::mutex> lk(progress_mu_);
  return static_cast<int>(qps_.size() + cqs_.size());
}

Region* Engine::register_region(void* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
                                const std::uint64_t* row_offsets) {
  if (row_offsets == nullptr) throw std::invalid_argument("row_offsets is NULL");
  if (prop_bytes == 0) throw std::invalid_argument("prop_bytes is 0");
  if (local_rows > 0 && base == nullptr) throw std::invalid_argument("base is NULL");
  if (local_rows > SIZE_MAX / prop_bytes) throw std::invalid_argument("region size overflows");
  const std::size_t max_packet = tx_->max_packet_bytes();
  const std::size_t one_response = concat::packet_bytes(concat::PrType::kResponse, prop_bytes, 1);
  if (one_response > max_packet) {
    throw std::length_error("a property of " + std::to_string(prop_bytes) +
                            " bytes does not fit in one packet of the " + transport_name() +
                            " transport (" + std::to_string(max_packet) + " bytes max)");
  }
  AdminLock lk(progress_mu_, admin_waiting_);
  if (region_owner_) throw std::logic_error("a property region is already registered");
  auto r = std::make_unique<ns_mr>(
      *this, static_cast<std::byte*>(base), local_rows, prop_bytes,
      std::span<const std::uint64_t>(row_offsets, static_cast<std::size_t>(size_) + 1), rank_);
  concat::ConcatConfig cc;
  cc.num_nodes = static_cast<std::uint32_t>(size_);
  cc.prop_len = prop_bytes;
  cc.packet_bytes = static_cast<std::uint32_t>(
      std::max<std::size_t>(std::min<std::size_t>(config_.packet_bytes, max_packet), one_response));
  cc.delay_ns = config_.concat_on() ? config_.delay_ns : 0;
  cc.virtualized = config_.virtual_queues;
  auto cp = std::make_unique<concat::ConcatPoint>(cc, *outbox_);
  r->tx_region = tx_->register_memory(base, local_rows * prop_bytes);  // collective
  concat_ = std::move(cp);
  region_owner_ = std::move(r);
  region_.store(region_owner_.get(), std::memory_order_release);
  tx_->barrier();  // every node can serve before anyone posts
  return region_owner_.get();
}

ns_status_t Engine::deregister_region(Region* mr) {
  if (mr == nullptr || mr != region()) {
    set_last_error("ns_dereg_props: not the region registered on this context");
    return NS_ERR_INVALID;
  }
  if (mr->inflight.load(std::memory_order_acquire) != 0) {
    set_last_error("ns_dereg_props: work requests on this region are still in flight");
    return NS_ERR_STATE;
  }
  // Keep serving the peers until none of them needs this node; only then block in the
  // transport's collectives. After a failure the teardown stays local.
  const int timeout_ms =
      config_.watchdog_ms == 0 ? 30'000 : static_cast<int>(2 * config_.watchdog_ms + 100);
  const ns_status_t q = had_failure() ? NS_ERR_TIMEOUT : quiesce(timeout_ms);
  AdminLock lk(progress_mu_, admin_waiting_);
  if (q == NS_OK && !had_failure()) {
    // Nothing still buffered is needed by anyone: every node has quiesced.
    tx_->barrier();
    tx_->deregister_memory(mr->tx_region);
  } else {
    note_failure();
  }
  concat_retired_.merge(concat_->stats());
  region_.store(nullptr, std::memory_order_release);
  concat_.reset();
  region_owner_.reset();
  return NS_OK;
}

Cq* Engine::create_cq(std::uint32_t cqe) {
  AdminLock lk(progress_mu_, admin_waiting_);
  cqs_.push_back(std::make_unique<ns_cq>(*this, cqe));
  return cqs_.back().get();
}

ns_status_t Engine::destroy_cq(Cq* cq) {
  AdminLock lk(progress_mu_, admin_waiting_);
  if (cq->users.load() != 0) {
    set_last_error("ns_destroy_cq: a queue pair still uses this completion queue");
    return NS_ERR_STATE;
  }
  for (const PendingWc& p : wc_backlog_) {
    if (p.cq == cq) {
      set_last_error("ns_destroy_cq: completions are still being delivered to it");
      return NS_ERR_STATE;
    }
  }
  auto it = std::find_if(cqs_.begin(), cqs_.end(), [&](const auto& p) { return p.get() == cq; });
  if (it == cqs_.end()) {
    set_last_error("ns_destroy_cq: unknown completion queue");
    return NS_ERR_INVALID;
  }
  cqs_.erase(it);
  return NS_OK;
}

Qp* Engine::create_qp(Cq& cq, std::uint32_t depth) {
  AdminLock lk(progress_mu_, admin_waiting_);
  qps_.push_back(std::make_unique<ns_qp>(*this, cq, depth));
  cq.users.fetch_add(1);
  return qps_.back().get();
}

ns_status_t Engine::destroy_qp(Qp* qp) {
  AdminLock lk(progress_mu_, admin_waiting_);
  if (qp->outstanding.load(std::memory_order_acquire) != 0) {
    set_last_error("ns_destroy_qp: work requests are still outstanding");
    return NS_ERR_STATE;
  }
  auto it = std::find_if(qps_.begin(), qps_.end(), [&](const auto& p) { return p.get() == qp; });
  if (it == qps_.end()) {
    set_last_error("ns_destroy_qp: unknown queue pair");
    return NS_ERR_INVALID;
  }
  qp->cq().users.fetch_sub(1);
  qps_.erase(it);
  return NS_OK;
}

void Engine::doorbell() noexcept {
  doorbells_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    { std::lock_guard<std::mutex> lk(sleep_mu_); }
    sleep_cv_.notify_one();
  }
}

int Engine::progress_inline() {
  if (!inline_mode()) return 0;
  std::unique_lock<std::mutex> lk(progress_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return 0;
  return step();
}

void Engine::progress_thread_main() {
  Backoff backoff;
  while (!stop_.load(std::memory_order_relaxed)) {
    int work = 0;
    bool busy = false;
    std::uint64_t next_expiry = UINT64_MAX;
    {
      std::lock_guard<std::mutex> lk(progress_mu_);
      work = step();
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
  const std::uint64_t now = now_ns();
  std::size_t work = poll_transport();
  if (!outbox_->empty()) work += outbox_->flush();
  for (auto& s : servers_) {
    if (!s->inbox.empty()) work += s->serve(now);
  }
  if (rdma_outstanding_ != 0) work += poll_reads();
  work += dispatch(now);
  const std::size_t nc = clients_.size();
  for (std::size_t k = 0; k < nc; ++k) {
    work += clients_[(next_client_ + k) % nc]->generate(now);
  }
  next_client_ = (next_client_ + 1) % nc;
  if (concat_) {
    const std::uint32_t before = concat_->buffered_prs();
    concat_->poll_expired(now_ns());
    if (concat_->buffered_prs() != before) ++work;
    const std::uint64_t want = quiesce_requested_.load(std::memory_order_acquire);
    if (want > quiesce_sent_.load(std::memory_order_relaxed) &&
        active_commands.load(std::memory_order_acquire) == 0) {
      send_quiesce_round(want, now);
      ++work;
    }
    // Our own "done" must really have left before the round counts as complete here: after it
    // the application may block in a collective and stop this engine.
    const std::uint64_t sent = quiesce_sent_.load(std::memory_order_relaxed);
    if (sent > quiesce_out_.load(std::memory_order_relaxed) && outbox_->empty()) {
      quiesce_out_.store(sent, std::memory_order_release);
    }
  }
  if (now >= next_watchdog_ns_) {
    run_watchdog(now);
    next_watchdog_ns_ = now + kWatchdogTickNs;
  }
  if (!wc_backlog_.empty()) work += flush_completions();
  return static_cast<int>(std::min<std::size_t>(work, INT32_MAX));
}

std::size_t Engine::poll_transport() {
  in_handler_ = true;
  const int n = tx_->poll(handler_, kPollPackets);
  in_handler_ = false;
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

InPacket* Engine::take_packet_buffer() {
  if (free_packets_.empty()) {
    packet_store_.push_back(std::make_unique<InPacket>());
    return packet_store_.back().get();
  }
  InPacket* p = free_packets_.back();
  free_packets_.pop_back();
  return p;
}

void Engine::recycle(InPacket* p) {
  free_packets_.push_back(p);
}

void Engine::on_packet(const transport::ReceivedPacket& p) {
  ++packets_in_;
  Region* r = region();
  if (r == nullptr || p.src < 0 || p.src >= size_) {
    ++malformed_packets_;
    return;
  }
  concat::PacketView v;
  const concat::DecodeError err =
      concat::decode_packet(p.bytes, static_cast<std::uint32_t>(rank_), r->prop_bytes, &v);
  if (err != concat::DecodeError::kOk) {
    ++malformed_packets_;
    ++decode_errors_[static_cast<int>(err) & 7];
    return;
  }
  const concat::PrType type = v.header().type;
  if (type == concat::PrType::kControl) {
    on_control(v);
    return;
  }
  if (type == concat::PrType::kRead) {
    // Q control: the server unit with the shortest queue takes the packet.
    ServerUnit* best = servers_[next_server_ % servers_.size()].get();
    next_server_++;
    for (auto& s : servers_) {
      if (s->inbox.size() < best->inbox.size()) best = s.get();
    }
    InPacket* in = take_packet_buffer();
    in->src = p.src;
    in->bytes.assign(p.bytes.begin(), p.bytes.end());
    best->inbox.push_back(in);
    return;
  }
  // kResponse or kInvalid: both answer one of our reads.
  const bool invalid = type == concat::PrType::kInvalid;
  for (std::uint32_t i = 0; i < v.size(); ++i) {
    const concat::PrHeader pr = v.pr(i);
    if (pr.src_unit >= clients_.size()) {
      ++malformed_packets_;
      continue;
    }
    clients_[pr.src_unit]->on_response(pr, v.payload(i), invalid);
  }
}

void Engine::on_control(const concat::PacketView& v) {
  const auto self = static_cast<std::uint32_t>(rank_);
  for (std::uint32_t i = 0; i < v.size(); ++i) {
    const concat::PrHeader pr = v.pr(i);
    if (pr.src_node >= static_cast<std::uint32_t>(size_) || pr.src_node == self ||
        pr.req_id != kControlQuiesceDone) {
      ++malformed_packets_;
      continue;
    }
    auto& done = done_from_[pr.src_node];
    if (pr.idx > done.load(std::memory_order_relaxed)) {
      done.store(pr.idx, std::memory_order_release);
    }
    ++control_prs_;
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
  c.use_filter = false;
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
    } else {
      const std::uint64_t offset = (i - r.solver.begin(owner)) * P;
      switch (
          tx_->read(owner, r.tx_region, offset, c.out, P, reinterpret_cast<std::uint64_t>(&c))) {
        case transport::TxStatus::kOk:
          ++rdma_reads_;
          ++rdma_outstanding_;
          return true;
        case transport::TxStatus::kNoResource:
          return false;  // retried on a later step, in order
        case transport::TxStatus::kPeerFailed:
          mark_dead(owner);
          note_failure();
          c.status = NS_WC_TRANSPORT_ERR;
          break;
        case transport::TxStatus::kError:
          c.status = NS_WC_TRANSPORT_ERR;
          break;
      }
    }
    ++rdma_reads_;
    finish(c);
    return true;
  }
  // RIG
  if (c.deadline_ns <= now) {
    c.status = NS_WC_WATCHDOG_TIMEOUT;
    note_timeout();
    finish(c);
    return true;
  }
  if (c.count == 0) {
    finish(c);
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
  if (unit == nullptr) return false;
  if ((c.flags & NS_SEND_NEW_EPOCH) != 0) {
    // An epoch starts only when no earlier work request still writes through the filter.
    if (r.filtered_inflight != 0) return false;
    r.filter.new_epoch();
    r.mapping_set = false;
  }
  if (c.layout == NS_RIG_LAYOUT_INDEXED && config_.filter_on()) {
    // The filter says "already at its place"; that holds only for work requests sharing the
    // epoch's mapping idx -> address. Others bypass the filter (correct, merely unfiltered).
    const std::uint64_t mapping =
        reinterpret_cast<std::uint64_t>(c.out) - c.window_base * r.prop_bytes;
    if (!r.mapping_set) {
      r.mapping_set = true;
      r.mapping = mapping;
    }
    if (r.mapping == mapping) {
      // Sized lazily (2 bits per global row) so positional-only users never pay for it. Only
      // this thread touches the filter, so resizing between two commands is safe.
      if (r.filter.size() < r.solver.total_rows()) r.filter.resize(r.solver.total_rows());
      c.use_filter = true;
      ++r.filtered_inflight;
    }
  }
  unit->take(c);
  return true;
}

std::size_t Engine::poll_reads() {
  const int n =
      tx_->poll_reads(read_completions_.data(), static_cast<int>(read_completions_.size()));
  for (int k = 0; k < n; ++k) {
    auto* c = reinterpret_cast<Command*>(read_completions_[static_cast<std::size_t>(k)].cookie);
    c->status =
        read_completions_[static_cast<std::size_t>(k)].ok ? NS_WC_SUCCESS : NS_WC_TRANSPORT_ERR;
    --rdma_outstanding_;
    finish(*c);
  }
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void Engine::finish(Command& c) {
  if (c.use_filter) {
    --c.mr->filtered_inflight;
    c.use_filter = false;
  }
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
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && !peer_dead(p) && tx_->peer_failed(p)) {
      mark_dead(p);
      note_failure();
    }
  }
  if (config_.watchdog_ms == 0) return;
  for (auto& u : clients_) u->watchdog(now);
}

void Engine::send_quiesce_round(std::uint64_t round, std::uint64_t now) {
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
  quiesce_sent_.store(round, std::memory_order_release);
}

bool Engine::quiesce_done(std::uint64_t round) const {
  if (quiesce_out_.load(std::memory_order_acquire) < round) return false;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || peer_dead(p)) continue;
    if (done_from_[p].load(std::memory_order_acquire) < round) return false;
  }
  return true;
}

ns_status_t Engine::quiesce(int timeout_ms) {
  if (region() == nullptr) {
    set_last_error("ns_quiesce: no property region is registered");
    return NS_ERR_NOT_REGISTERED;
  }
  std::lock_guard<std::mutex> q(quiesce_mu_);
  const std::uint64_t round = quiesce_requested_.load() + 1;
  quiesce_requested_.store(round, std::memory_order_release);
  doorbell();
  const std::uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : now_ns() + std::uint64_t(timeout_ms) * 1'000'000;
  Backoff backoff;
  for (;;) {
    if (inline_mode() && progress_inline() > 0) backoff.reset();
    if (quiesce_done(round)) return NS_OK;
    if (now_ns() >= deadline) {
      set_last_error("ns_quiesce: some peers did not quiesce within " + std::to_string(timeout_ms) +
                     " ms");
      return NS_ERR_TIMEOUT;
    }
    if (backoff.pause())
      std::this_thread::sleep_for(backoff.sleep_for(std::chrono::microseconds(100)));
  }
}

Engine::Snapshot Engine::snapshot() const {
  std::lock_guard<std::mutex> lk(progress_mu_);
  Snapshot s;
  for (const auto& u : clients_) s.client.add(u->counters);
  for (const auto& u : servers_) s.server.add(u->counters);
  s.concat = concat_retired_;
  if (concat_) s.concat.merge(concat_->stats());
  s.timeouts = timeouts_;
  s.rdma_reads = rdma_reads_;
  s.malformed_packets = malformed_packets_;
  s.completions = completions_;
  s.packets_in = packets_in_;
  s.backlog_packets = outbox_->queued_total;
  s.dropped_packets = outbox_->dropped;
  s.tx_bytes = tx_->bytes_sent();
  s.control_prs = control_prs_;
  std::copy(std::begin(decode_errors_), std::end(decode_errors_), std::begin(s.decode_errors));
  return s;
}

void Engine::reset_stats() {
  AdminLock lk(progress_mu_, admin_waiting_);
  for (auto& u : clients_) u->counters = ClientCounters{};
  for (auto& u : servers_) u->counters = ServerCounters{};
  concat_retired_ = concat::ConcatStats{};
  if (concat_) concat_->reset_stats();
  timeouts_ = rdma_reads_ = malformed_packets_ = completions_ = packets_in_ = control_prs_ = 0;
  std::fill(std::begin(decode_errors_), std::end(decode_errors_), 0);
  outbox_->queued_total = outbox_->dropped = outbox_->tx_errors = 0;
}

}  // namespace netsparse::rig
