// In-process fabric: every node is a thread of this process.
//
// Each node owns one mailbox, a bounded multi-producer single-consumer queue whose cells carry
// the packet bytes inline (the pooled buffers: allocated once with the fabric, never per
// packet). The queue follows the classic sequence-number design for bounded lock-free queues:
// cell i holds a sequence counter that tells producers when the cell is free for position p
// (seq == p) and the consumer when it holds the packet for position p (seq == p + 1). A
// producer claims a position with one CAS, copies, then publishes with a release store, so the
// only shared write per packet is that CAS. A full mailbox gives kNoResource (backpressure)
// rather than growing memory.
//
// Ordering per (src,dst): a sender claims strictly increasing positions and the single
// consumer reads positions in order, so one sender's packets come out in send order.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/completion_ring.hpp"
#include "transport/transport.hpp"

namespace netsparse::transport {

namespace {

constexpr int kMaxRegions = 64;
constexpr std::size_t kCacheLine = 64;

enum : std::uint8_t { kAlive = 0, kDeadSilent = 1, kDeadReported = 2 };

std::size_t round_up_pow2(std::size_t v) {
  std::size_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

class Mailbox {
 public:
  Mailbox(std::size_t capacity, std::size_t max_packet_bytes)
      : capacity_(round_up_pow2(std::max<std::size_t>(capacity, 2))),
        mask_(capacity_ - 1),
        slot_bytes_(max_packet_bytes),
        cells_(new Cell[capacity_]),
        data_(new std::byte[capacity_ * slot_bytes_]) {
    for (std::size_t i = 0; i < capacity_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  // Multi-producer. False when full.
  bool push(int src, std::span<const std::byte> packet) noexcept {
    std::size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    Cell* cell = nullptr;
    for (;;) {
      cell = &cells_[pos & mask_];
      const std::size_t seq = cell->seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::ptrdiff_t>(seq - pos);
      if (diff == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // the consumer has not released this cell yet: full
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
    std::memcpy(data_.get() + (pos & mask_) * slot_bytes_, packet.data(), packet.size());
    cell->src = src;
    cell->len = packet.size();
    cell->seq.store(pos + 1, std::memory_order_release);
    return true;
  }

  // Single consumer: calls fn(src, bytes) for up to `max` packets, in order.
  template <class Fn>
  int drain(int max, Fn&& fn) {
    int taken = 0;
    while (taken < max) {
      Cell& cell = cells_[dequeue_pos_ & mask_];
      if (cell.seq.load(std::memory_order_acquire) != dequeue_pos_ + 1) break;
      fn(cell.src,
         std::span<const std::byte>(data_.get() + (dequeue_pos_ & mask_) * slot_bytes_, cell.len));
      cell.seq.store(dequeue_pos_ + capacity_, std::memory_order_release);
      ++dequeue_pos_;
      ++taken;
    }
    return taken;
  }

 private:
  struct Cell {
    std::atomic<std::size_t> seq{0};
    int src = 0;
    std::size_t len = 0;
  };
  const std::size_t capacity_;
  const std::size_t mask_;
  const std::size_t slot_bytes_;
  std::unique_ptr<Cell[]> cells_;
  std::unique_ptr<std::byte[]> data_;
  alignas(kCacheLine) std::atomic<std::size_t> enqueue_pos_{0};
  alignas(kCacheLine) std::size_t dequeue_pos_ = 0;  // consumer-private
};

struct RegionSlot {
  // Written by the owner before a barrier, read by peers after it; atomics keep a misbehaving
  // reader (reading during deregistration) a defined, TSan-clean race instead of UB.
  std::atomic<std::byte*> base{nullptr};
  std::atomic<std::size_t> bytes{0};
  std::atomic<bool> used{false};
};

}  // namespace

class InprocFabricState {
 public:
  InprocFabricState(int nodes, const InprocOptions& options)
      : nodes_(nodes),
        options_(options),
        dead_(new std::atomic<std::uint8_t>[nodes]),
        taken_(new std::atomic<bool>[nodes]),
        regions_(new RegionSlot[nodes * kMaxRegions]) {
    mailboxes_.reserve(static_cast<std::size_t>(nodes));
    for (int i = 0; i < nodes; ++i) {
      mailboxes_.push_back(
          std::make_unique<Mailbox>(options.mailbox_packets, options.max_packet_bytes));
      dead_[i].store(kAlive, std::memory_order_relaxed);
      taken_[i].store(false, std::memory_order_relaxed);
    }
    live_ = nodes;
  }

  int nodes() const noexcept { return nodes_; }
  const InprocOptions& options() const noexcept { return options_; }
  Mailbox& mailbox(int rank) noexcept { return *mailboxes_[static_cast<std::size_t>(rank)]; }
  std::uint8_t dead(int rank) const noexcept { return dead_[rank].load(std::memory_order_acquire); }
  RegionSlot& region(int rank, int id) noexcept { return regions_[rank * kMaxRegions + id]; }

  bool take_endpoint(int rank) noexcept { return !taken_[rank].exchange(true); }

  void kill(int rank, FailureVisibility visibility) {
    std::lock_guard lock(barrier_mutex_);
    const std::uint8_t was = dead_[rank].load(std::memory_order_relaxed);
    if (was == kDeadSilent && visibility == FailureVisibility::kReported) {
      dead_[rank].store(kDeadReported, std::memory_order_release);  // detected at last
      return;
    }
    if (was != kAlive) return;
    dead_[rank].store(visibility == FailureVisibility::kReported ? kDeadReported : kDeadSilent,
                      std::memory_order_release);
    --live_;
    release_barrier_if_complete();
  }

  void allgather(int rank, const void* mine, std::size_t bytes, void* all) {
    {
      std::lock_guard lock(barrier_mutex_);
      if (gather_.size() != static_cast<std::size_t>(nodes_)) gather_.resize(nodes_);
      const auto* m = static_cast<const std::byte*>(mine);
      gather_[static_cast<std::size_t>(rank)].assign(m, m + bytes);
    }
    barrier(rank);
    {
      std::lock_guard lock(barrier_mutex_);
      auto* out = static_cast<std::byte*>(all);
      for (int p = 0; p < nodes_; ++p) {
        const auto& g = gather_[static_cast<std::size_t>(p)];
        if (g.size() == bytes && dead_[p].load(std::memory_order_relaxed) == kAlive) {
          std::copy(g.begin(), g.end(), out + static_cast<std::size_t>(p) * bytes);
        } else {
          std::fill_n(out + static_cast<std::size_t>(p) * bytes, bytes, std::byte{0});
        }
      }
    }
    barrier(rank);  // nobody overwrites a contribution before everyone has read it
  }

  // Barrier over the live nodes; a dead node passes straight through.
  void barrier(int rank) {
    std::unique_lock lock(barrier_mutex_);
    if (dead_[rank].load(std::memory_order_relaxed) != kAlive) return;
    const std::uint64_t generation = barrier_generation_;
    ++barrier_arrived_;
    release_barrier_if_complete();
    barrier_cv_.wait(lock, [&] { return barrier_generation_ != generation; });
  }

 private:
  void release_barrier_if_complete() {  // caller holds barrier_mutex_
    if (barrier_arrived_ > 0 && barrier_arrived_ >= live_) {
      barrier_arrived_ = 0;
      ++barrier_generation_;
      barrier_cv_.notify_all();
    }
  }

  const int nodes_;
  const InprocOptions options_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> dead_;
  std::unique_ptr<std::atomic<bool>[]> taken_;
  std::unique_ptr<RegionSlot[]> regions_;
  std::vector<std::vector<std::byte>> gather_;  // allgather contributions (barrier_mutex_)
  std::mutex barrier_mutex_;
  std::condition_variable barrier_cv_;
  int live_ = 0;
  int barrier_arrived_ = 0;
  std::uint64_t barrier_generation_ = 0;
};

namespace {

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocFabricState> fabric, int rank)
      : fabric_(std::move(fabric)),
        rank_(rank),
        max_packet_(fabric_->options().max_packet_bytes),
        completions_(std::max<std::size_t>(fabric_->options().max_outstanding_reads, 1)) {}

  TransportKind kind() const noexcept override { return TransportKind::kInproc; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return fabric_->nodes(); }
  std::size_t max_packet_bytes() const noexcept override { return max_packet_; }
  std::size_t max_read_bytes() const noexcept override { return SIZE_MAX; }

  TxStatus send(int dest, std::span<const std::byte> packet) override {
    if (dest < 0 || dest >= fabric_->nodes() || packet.empty() || packet.size() > max_packet_) {
      return TxStatus::kError;
    }
    if (fabric_->dead(rank_) != kAlive) return TxStatus::kOk;  // a dead node's packets vanish
    switch (fabric_->dead(dest)) {
      case kDeadSilent:
        return TxStatus::kOk;  // lost on the way to a node that no longer answers
      case kDeadReported:
        return TxStatus::kPeerFailed;
      default:
        break;
    }
    if (!fabric_->mailbox(dest).push(rank_, packet)) return TxStatus::kNoResource;
    bytes_sent_ += packet.size();
    return TxStatus::kOk;
  }

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override {
    Mailbox& box = fabric_->mailbox(rank_);
    if (fabric_->dead(rank_) != kAlive) {  // drop whatever arrived at the dead node
      box.drain(INT32_MAX, [](int, std::span<const std::byte>) {});
      return 0;
    }
    return box.drain(max_packets, [&](int src, std::span<const std::byte> bytes) {
      handler(ReceivedPacket{src, bytes});
    });
  }

  int register_memory(void* base, std::size_t bytes) override {
    if (base == nullptr && bytes != 0) {
      throw std::invalid_argument("netsparse inproc: register_memory(nullptr, " +
                                  std::to_string(bytes) + ")");
    }
    int id = 0;
    while (id < kMaxRegions && fabric_->region(rank_, id).used.load()) ++id;
    if (id == kMaxRegions) {
      throw std::runtime_error("netsparse inproc: more than " + std::to_string(kMaxRegions) +
                               " registered regions");
    }
    RegionSlot& slot = fabric_->region(rank_, id);
    slot.base.store(static_cast<std::byte*>(base), std::memory_order_relaxed);
    slot.bytes.store(bytes, std::memory_order_relaxed);
    slot.used.store(true, std::memory_order_release);
    fabric_->barrier(rank_);  // collective: every region is visible when anyone returns
    return id;
  }

  void deregister_memory(int region) override {
    if (region < 0 || region >= kMaxRegions || !fabric_->region(rank_, region).used.load()) {
      throw std::invalid_argument("netsparse inproc: deregister_memory of unknown region " +
                                  std::to_string(region));
    }
    fabric_->barrier(rank_);  // nobody reads the region past this point
    RegionSlot& slot = fabric_->region(rank_, region);
    slot.bytes.store(0, std::memory_order_relaxed);
    slot.base.store(nullptr, std::memory_order_relaxed);
    slot.used.store(false, std::memory_order_release);
  }

  TxStatus read(int dest, int region, std::uint64_t offset, void* local, std::size_t bytes,
                std::uint64_t cookie) override {
    if (dest < 0 || dest >= fabric_->nodes() || region < 0 || region >= kMaxRegions ||
        (local == nullptr && bytes != 0)) {
      return TxStatus::kError;
    }
    const std::uint8_t dest_state = fabric_->dead(dest);
    if (dest_state == kDeadReported) return TxStatus::kPeerFailed;
    const RegionSlot& slot = fabric_->region(dest, region);
    if (!slot.used.load(std::memory_order_acquire)) return TxStatus::kError;
    const std::size_t size = slot.bytes.load(std::memory_order_relaxed);
    if (offset > size || bytes > size - offset) return TxStatus::kError;  // overflow-safe
    if (dest_state == kDeadSilent || fabric_->dead(rank_) != kAlive) {
      return TxStatus::kOk;  // the request is lost: no completion ever (watchdog's job)
    }
    if (completions_.full()) return TxStatus::kNoResource;
    if (bytes != 0) {
      std::memcpy(local, slot.base.load(std::memory_order_relaxed) + offset, bytes);
    }
    completions_.push({cookie, true});
    return TxStatus::kOk;
  }

  int poll_reads(ReadCompletion* out, int max) override { return completions_.pop(out, max); }

  void barrier() override { fabric_->barrier(rank_); }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    fabric_->allgather(rank_, mine, bytes, all);
  }

  // A dead node is cut off from everyone: to itself every peer has failed (so its own teardown,
  // if its thread still runs one, stays local instead of waiting for them).
  bool peer_failed(int peer) const noexcept override {
    if (peer < 0 || peer >= fabric_->nodes()) return false;
    if (peer != rank_ && fabric_->dead(rank_) != kAlive) return true;
    return fabric_->dead(peer) == kDeadReported;
  }

  std::uint64_t bytes_sent() const noexcept override { return bytes_sent_; }

 private:
  std::shared_ptr<InprocFabricState> fabric_;
  const int rank_;
  const std::size_t max_packet_;
  std::uint64_t bytes_sent_ = 0;
  // Reads are served at issue time (memcpy); their completions wait here for poll_reads.
  CompletionRing completions_;
};

}  // namespace

InprocFabric::InprocFabric(int nodes, const InprocOptions& options) {
  if (nodes < 1) {
    throw std::invalid_argument("netsparse InprocFabric: nodes must be >= 1, got " +
                                std::to_string(nodes));
  }
  if (options.max_packet_bytes < 1 || options.mailbox_packets < 1) {
    throw std::invalid_argument(
        "netsparse InprocFabric: max_packet_bytes and mailbox_packets must be >= 1");
  }
  state_ = std::make_shared<InprocFabricState>(nodes, options);
}

InprocFabric::~InprocFabric() = default;

int InprocFabric::nodes() const noexcept {
  return state_->nodes();
}

std::unique_ptr<Transport> InprocFabric::endpoint(int rank) {
  if (rank < 0 || rank >= state_->nodes()) {
    throw std::invalid_argument("netsparse InprocFabric::endpoint: rank " + std::to_string(rank) +
                                " outside [0, " + std::to_string(state_->nodes()) + ")");
  }
  if (!state_->take_endpoint(rank)) {
    throw std::logic_error("netsparse InprocFabric::endpoint: rank " + std::to_string(rank) +
                           " already has an endpoint (each mailbox has one consumer)");
  }
  return std::make_unique<InprocTransport>(state_, rank);
}

void InprocFabric::kill(int rank, FailureVisibility visibility) {
  if (rank < 0 || rank >= state_->nodes()) {
    throw std::invalid_argument("netsparse InprocFabric::kill: rank " + std::to_string(rank) +
                                " out of range");
  }
  state_->kill(rank, visibility);
}

}  // namespace netsparse::transport
