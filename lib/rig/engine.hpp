// The RIG engine: the software emulation of a NetSparse SmartNIC (MICRO '25 §5). One Engine per
// context (ns_context). It owns
//   * the queue pairs' command rings (host -> engine) and the completion queues (engine -> host),
//   * client units (take RIG commands, filter, coalesce, solve owners, generate read PRs, write
//     responses, complete commands) and server units (answer read PRs from the registered
//     region, never reading outside it),
//   * one concatenation point shared by all units (the NIC's Concatenator) and an outbox that
//     hands packets to the transport, keeping those the transport cannot take yet,
//   * the watchdog, the quiesce protocol and the statistics.
// Units are state machines stepped round-robin by step(): by the progress thread (THREAD mode)
// or by whichever application thread polls (INLINE mode). Either way step() runs under
// progress_mu_, so everything the units touch is single-threaded; the host-facing rings are
// lock-free SPSC rings and the few values read by the host are atomics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "filter/idx_filter.hpp"
#include "filter/pending_table.hpp"
#include "netsparse/netsparse.h"
#include "rig/backoff.hpp"
#include "rig/destination.hpp"
#include "rig/spsc_ring.hpp"
#include "transport/transport.hpp"

namespace netsparse::rig {

// ---- control messages (concat::PrType::kControl, docs/protocol.md) --------------------------
// A control PR's req_id says which message it is and idx carries its argument; src_unit is 0.
// kControlQuiesceDone: src_node has finished quiesce round `idx` (no work request in flight,
// everything it queued before has been flushed). Any other req_id is malformed.
inline constexpr std::uint32_t kControlQuiesceDone = 0;
inline constexpr int kMaxUnits = 1024;  // also the bound on a PR's src_unit

// A waiter (what the Pending PR Table records per requester) packs the client unit's command
// slot, that slot's reuse epoch and the idx position inside the work request.
inline constexpr int kWaiterPosBits = 40;
inline constexpr std::uint64_t kMaxWrCount = std::uint64_t{1} << kWaiterPosBits;
inline constexpr std::uint32_t kUnitSlots = 32;  // commands in flight per client unit

std::uint64_t now_ns() noexcept;
// Records the reason of a failing API call for ns_last_error() (this thread).
void set_last_error(const std::string& what);

struct Config {
  int client_units = 2;
  int server_units = 2;
  int progress_mode = NS_PROGRESS_THREAD;
  std::uint32_t packet_bytes = 1500;
  std::uint64_t delay_ns = 2000;
  std::uint32_t pending_entries = 256;
  std::uint32_t watchdog_ms = 5000;
  std::uint32_t flags = 0;
  std::uint32_t idx_chunk = 512;
  bool virtual_queues = false;
  int transport = NS_TRANSPORT_AUTO;

  bool filter_on() const noexcept { return (flags & NS_CTX_NO_FILTER) == 0; }
  bool coalesce_on() const noexcept { return (flags & NS_CTX_NO_COALESCE) == 0; }
  bool concat_on() const noexcept { return (flags & NS_CTX_NO_CONCAT) == 0; }
  // Defaults overridden by the fields attr->comp_mask names; std::invalid_argument on a bad value.
  static Config from_attr(const ns_context_attr* attr);
};

class Engine;
class Qp;
class Cq;
class Region;

// One posted work request. Lives in its queue pair's slot array from ns_post_send until the
// engine releases the slot; fields above the line are written by the host before the doorbell.
struct Command {
  std::uint64_t wr_id = 0;
  int opcode = NS_WR_RIG;
  unsigned flags = 0;
  Region* mr = nullptr;
  const std::uint64_t* idx = nullptr;  // RIG: idx list; RDMA_READ: unused
  std::uint64_t read_idx = 0;          // RDMA_READ
  std::uint64_t count = 0;
  std::byte* out = nullptr;
  int layout = NS_RIG_LAYOUT_INDEXED;
  std::uint64_t window_base = 0;
  std::uint64_t window_len = 0;
  std::uint64_t deadline_ns = UINT64_MAX;  // watchdog, from the post time
  // ---- engine state ----
  std::uint64_t outstanding = 0;  // waiters (positions) not yet answered
  std::uint64_t bad_pos = 0;      // LOC_INV_REQ: position of the offending idx
  int status = NS_WC_SUCCESS;
  bool use_filter = false;
  bool generated = false;  // no more idxs will be generated (all done, or stopped by an error)
  Qp* qp = nullptr;
  std::uint32_t slot = 0;
};

class Cq {
 public:
  Cq(Engine& engine, std::uint32_t cqe) : engine_(engine), ring_(cqe) {}
  Engine& engine() const noexcept { return engine_; }
  // Producer (engine). False when full: the engine keeps the completion and retries.
  bool push(const ns_wc& wc) noexcept { return ring_.push(wc); }
  void notify() noexcept;  // wakes a thread sleeping in wait()
  int poll(int n, ns_wc* wc) noexcept;
  // Sleeps until notify() or the timeout; the caller re-polls.
  void sleep(std::chrono::microseconds d);
  std::atomic<int> users{0};  // queue pairs using it

 private:
  Engine& engine_;
  SpscRing<ns_wc> ring_;
  std::mutex consumer_mu_;  // several application threads may poll one CQ
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mu_;
  std::condition_variable cv_;
  std::uint64_t wakeups_ = 0;  // guarded by sleep_mu_
};

class Qp {
 public:
  Qp(Engine& engine, Cq& cq, std::uint32_t depth);
  Engine& engine() const noexcept { return engine_; }
  Cq& cq() const noexcept { return cq_; }
  // ns_post_send (thread-safe: one lock per chain).
  ns_status_t post(ns_send_wr* wr, ns_send_wr** bad_wr);
  // Engine side.
  Command* peek() noexcept {
    std::uint32_t* s = submit_.peek();
    return s == nullptr ? nullptr : &slots_[*s];
  }
  void pop() noexcept { submit_.pop(); }
  void release(Command& c) noexcept {
    free_.push(c.slot);
    outstanding.fetch_sub(1, std::memory_order_release);
  }
  std::atomic<std::uint32_t> outstanding{0};

 private:
  Engine& engine_;
  Cq& cq_;
  std::vector<Command> slots_;
  SpscRing<std::uint32_t> submit_;  // host -> engine: slot ids
  SpscRing<std::uint32_t> free_;    // engine -> host: released slot ids
  std::mutex post_mu_;
};

// The registered local block of the property array, plus what the client units need to reach
// every other block (destination solver) and the Idx Filter of this region.
class Region {
 public:
  Region(Engine& engine, std::byte* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
         std::span<const std::uint64_t> row_offsets, int rank);
  Engine& engine() const noexcept { return engine_; }
  Engine& engine_;
  std::byte* const base;
  const std::uint64_t local_rows;
  const std::uint32_t prop_bytes;
  const DestinationSolver solver;
  const std::uint64_t row_begin, row_end;
  int tx_region = -1;
  filter::IdxFilter filter;  // over global rows, sized on the first filtered RIG
  bool mapping_set = false;  // the current epoch's INDEXED mapping (out - base * prop_bytes)
  std::uint64_t mapping = 0;
  std::uint32_t filtered_inflight = 0;     // commands using the filter (engine thread)
  std::atomic<std::uint64_t> inflight{0};  // posted, not completed (for dereg)
};

struct ClientCounters {
  std::uint64_t requested = 0, filtered = 0, coalesced = 0, local = 0, sent = 0;
  std::uint64_t stalls = 0, stale_responses = 0, stale_waiters = 0, retried = 0;
  std::uint64_t invalid_local = 0, responses = 0;
  void add(const ClientCounters& o);
};
struct ServerCounters {
  std::uint64_t packets = 0, answered = 0, invalid = 0, malformed_prs = 0;
  void add(const ServerCounters& o);
};

// Open addressing map idx -> first position, for positional-layout de-duplication inside one
// work request. Generation-tagged slots make "clear" O(1); a bounded size (a full table simply
// stops recording, which only costs some filtering). A small Bloom bit array (4 bits per slot,
// cleared per command in O(count)) answers most misses from L1 without touching the slots, so
// requests without repeats pay little for the mechanism.
class PositionMap {
 public:
  // False (and nothing recorded) for commands too long to de-duplicate.
  bool begin_command(std::uint64_t count);
  // Position recorded for idx, or UINT64_MAX.
  std::uint64_t find(std::uint64_t idx) const noexcept {
    const std::uint64_t b = bloom_bit(idx);
    if (((bloom_[b >> 6] >> (b & 63)) & 1) == 0) return UINT64_MAX;
    for (std::size_t h = home(idx);; h = (h + 1) & mask_) {
      const Slot& s = slots_[h];
      if (s.gen != gen_) return UINT64_MAX;
      if (s.idx == idx) return s.pos;
    }
  }
  void insert(std::uint64_t idx, std::uint64_t pos) noexcept;

 private:
  static constexpr std::size_t kMaxSlots = std::size_t{1} << 21;
  struct Slot {  // 16 bytes: four per cache line
    std::uint64_t idx;
    std::uint32_t pos;  // commands of 2^32 idxs or more are not de-duplicated
    std::uint32_t gen;
  };
  std::size_t home(std::uint64_t idx) const noexcept {
    return static_cast<std::size_t>((idx * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::uint64_t bloom_bit(std::uint64_t idx) const noexcept {
    return (idx * 0xC2B2AE3D27D4EB4Full) >> bloom_shift_;
  }
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> bloom_;
  std::size_t mask_ = 0;  // this command's table size - 1 (a prefix of slots_)
  int shift_ = 64;
  int bloom_shift_ = 64;
  std::size_t used_ = 0;
  std::uint32_t gen_ = 0;
};

class ClientUnit {
 public:
  ClientUnit(Engine& engine, std::uint16_t id, const Config& config);
  std::uint16_t id() const noexcept { return id_; }
  // True when the unit can start generating another command.
  bool can_take() const noexcept { return current_ == nullptr && free_slots_ > 0; }
  bool busy() const noexcept { return live_ > 0; }
  void take(Command& cmd);
  // Generates up to one idx chunk of the current command; returns the idxs processed.
  std::size_t generate(std::uint64_t now);
  void on_response(const concat::PrHeader& pr, const std::byte* payload, bool invalid);
  // Completes commands whose deadline passed; returns how many.
  int watchdog(std::uint64_t now);
  // Completes every command with `status` (teardown).
  void fail_all(int status);
  ClientCounters counters;

 private:
  struct Slot {
    Command* cmd = nullptr;
    std::uint8_t epoch = 0;
  };
  std::uint64_t waiter(std::uint32_t slot, std::uint64_t pos) const noexcept {
    return (std::uint64_t{slot} << 48) | (std::uint64_t{slots_[slot].epoch} << kWaiterPosBits) |
           pos;
  }
  // Processes idx_buf_[chunk_pos_..] of the current command; false if stalled.
  bool run_chunk(std::uint64_t now);
  void push_read(int owner, std::uint64_t idx, std::uint32_t entry, std::uint64_t now);
  void maybe_finish(std::uint32_t slot);
  void finish_slot(std::uint32_t slot);
  void retry_drained(std::uint64_t now);

  Engine& engine_;
  const std::uint16_t id_;
  const Config& config_;
  filter::PendingTable pending_;
  std::vector<std::uint64_t> idx_buf_;  // the unit's Idx buffer
  std::vector<Slot> slots_;
  std::uint32_t free_slots_ = kUnitSlots;
  std::uint32_t live_ = 0;
  Command* current_ = nullptr;
  std::uint32_t current_slot_ = 0;
  std::uint64_t chunk_start_ = 0;  // position of idx_buf_[0] in the command
  std::size_t chunk_len_ = 0;
  std::size_t chunk_pos_ = 0;
  bool stalled_ = false;
  bool dedup_ = false;  // positional de-duplication active for the current command
  PositionMap positions_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> retry_;  // (idx, waiter) after a drain
};

// A received read packet waiting for a server unit (received bytes are only valid inside the
// transport's handler, and the handler may not send, so reads are copied out).
struct InPacket {
  int src = 0;
  std::vector<std::byte> bytes;
};

class ServerUnit {
 public:
  explicit ServerUnit(Engine& engine) : engine_(engine) {}
  std::deque<InPacket*> inbox;
  // Answers every queued packet; returns PRs answered.
  std::size_t serve(std::uint64_t now);
  ServerCounters counters;

 private:
  Engine& engine_;
};

// The concatenation point's sink: sends at once when possible, otherwise keeps a copy per
// destination (in order) and retries on later steps. Packets for failed peers are dropped.
class Outbox final : public concat::PacketSink {
 public:
  explicit Outbox(Engine& engine) : engine_(engine) {}
  void on_packet(std::uint32_t dest, concat::PrType type, std::span<const std::byte> packet,
                 concat::FlushCause cause) override;
  void resize(int nodes) { backlog_.resize(static_cast<std::size_t>(nodes)); }
  // Retries the backlog; returns packets sent.
  std::size_t flush();
  bool empty() const noexcept { return queued_ == 0; }
  std::uint64_t queued_total = 0, dropped = 0, tx_errors = 0;

 private:
  // True when the packet left (or was dropped for good); false = keep and retry.
  bool try_send(std::uint32_t dest, std::span<const std::byte> packet);
  Engine& engine_;
  std::vector<std::deque<std::vector<std::byte>>> backlog_;
  std::vector<std::vector<std::byte>> spare_;
  std::size_t queued_ = 0;
};

class Engine {
 public:
  Engine(std::unique_ptr<transport::Transport> tx, const Config& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Config& config() const noexcept { return config_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const char* transport_name() const noexcept { return transport::to_string(tx_->kind()); }
  bool inline_mode() const noexcept { return config_.progress_mode == NS_PROGRESS_INLINE; }

  // ---- admin (application threads; serialized with the engine by progress_mu_) ----
  Region* register_region(void* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
                          const std::uint64_t* row_offsets);  // throws
  ns_status_t deregister_region(Region* mr);
  Region* region() const noexcept { return region_.load(std::memory_order_acquire); }
  Cq* create_cq(std::uint32_t cqe);
  ns_status_t destroy_cq(Cq* cq);
  Qp* create_qp(Cq& cq, std::uint32_t depth);
  ns_status_t destroy_qp(Qp* qp);
  int live_objects() const;

  // ---- progress ----
  // INLINE mode: one step if no other thread is stepping; returns the work done.
  int progress_inline();
  // Posted, not completed, work requests (all queue pairs).
  std::atomic<std::uint64_t> active_commands{0};
  void doorbell() noexcept;  // a post happened: wake the progress thread if it sleeps
  ns_status_t quiesce(int timeout_ms);

  // ---- statistics (take progress_mu_) ----
  struct Snapshot {
    ClientCounters client;
    ServerCounters server;
    concat::ConcatStats concat;
    std::uint64_t timeouts = 0, rdma_reads = 0, malformed_packets = 0, completions = 0;
    std::uint64_t packets_in = 0, backlog_packets = 0, dropped_packets = 0, tx_bytes = 0;
    std::uint64_t control_prs = 0, decode_errors[8] = {};
  };
  Snapshot snapshot() const;
  void reset_stats();

  // ---- used by the units (engine thread only) ----
  concat::ConcatPoint& concat() noexcept { return *concat_; }
  transport::Transport& tx() noexcept { return *tx_; }
  bool peer_dead(int p) const noexcept { return dead_[p].load(std::memory_order_relaxed); }
  void mark_dead(int p) noexcept { dead_[p].store(true, std::memory_order_relaxed); }
  // Completes a command (status already set): CQ entry if signaled or failed, slot release.
  void finish(Command& cmd);
  void count_malformed() noexcept { ++malformed_packets_; }

 private:
  friend class Outbox;
  friend class ServerUnit;
  friend class ClientUnit;
  int step();  // under progress_mu_
  void progress_thread_main();
  void lock_admin();  // acquire progress_mu_ against a spinning progress thread
  std::size_t poll_transport();
  void on_packet(const transport::ReceivedPacket& p);
  void on_control(const concat::PacketView& v);  // a validated kControl packet
  std::size_t dispatch(std::uint64_t now);
  bool dispatch_one(Command& cmd, std::uint64_t now);  // false: cannot start it yet
  std::size_t poll_reads();
  void run_watchdog(std::uint64_t now);
  std::size_t flush_completions();
  void send_quiesce_round(std::uint64_t round, std::uint64_t now);
  bool quiesce_done(std::uint64_t round) const;
  InPacket* take_packet_buffer();
  void recycle(InPacket* p);

  Config config_;
  std::unique_ptr<transport::Transport> tx_;
  const int rank_;
  const int size_;
  std::unique_ptr<std::atomic<bool>[]> dead_;

  mutable std::mutex progress_mu_;
  std::atomic<int> admin_waiting_{0};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::atomic<bool> sleeping_{false};
  std::atomic<std::uint64_t> doorbells_{0};

  // Guarded by progress_mu_ (the engine's own state).
  std::vector<std::unique_ptr<ns_qp>> qps_;
  std::vector<std::unique_ptr<ns_cq>> cqs_;
  std::unique_ptr<ns_mr> region_owner_;
  std::atomic<Region*> region_{nullptr};
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<concat::ConcatPoint> concat_;
  std::vector<std::unique_ptr<ClientUnit>> clients_;
  std::vector<std::unique_ptr<ServerUnit>> servers_;
  std::size_t next_client_ = 0, next_server_ = 0, next_qp_ = 0;
  std::vector<std::unique_ptr<InPacket>> packet_store_;
  std::vector<InPacket*> free_packets_;
  struct PendingWc {
    Cq* cq;
    ns_wc wc;
  };
  std::deque<PendingWc> wc_backlog_;
  std::uint64_t next_watchdog_ns_ = 0;
  std::uint64_t rdma_reads_ = 0, timeouts_ = 0, malformed_packets_ = 0, completions_ = 0;
  std::uint64_t packets_in_ = 0, control_prs_ = 0, decode_errors_[8] = {};
  std::uint64_t rdma_outstanding_ = 0;
  std::vector<transport::ReadCompletion> read_completions_;
  std::function<void(const transport::ReceivedPacket&)> handler_;
  concat::ConcatStats concat_retired_;  // statistics of concatenation points already destroyed
  bool in_handler_ = false;             // inside the transport's poll handler: no sends

  // Quiesce protocol: rounds requested by the application, sent by the engine, received per peer.
  std::atomic<std::uint64_t> quiesce_requested_{0};
  std::atomic<std::uint64_t> quiesce_sent_{0};
  std::atomic<std::uint64_t> quiesce_out_{0};  // sent and handed to the transport
  std::unique_ptr<std::atomic<std::uint64_t>[]> done_from_;
  std::mutex quiesce_mu_;                 // one ns_quiesce at a time
  std::atomic<bool> had_failure_{false};  // a timeout or dead peer: teardown becomes local

 public:
  bool had_failure() const noexcept { return had_failure_.load(std::memory_order_relaxed); }
  void note_failure() noexcept { had_failure_.store(true, std::memory_order_relaxed); }
  void note_timeout() noexcept {
    ++timeouts_;
    note_failure();
  }
};

}  // namespace netsparse::rig

// The C handles are the engine objects.
struct ns_context final : netsparse::rig::Engine {
  using Engine::Engine;
};
struct ns_cq final : netsparse::rig::Cq {
  using Cq::Cq;
};
struct ns_qp final : netsparse::rig::Qp {
  using Qp::Qp;
};
struct ns_mr final : netsparse::rig::Region {
  using Region::Region;
};
