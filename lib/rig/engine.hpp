// The RIG engine: the software emulation of a NetSparse SmartNIC (MICRO '25 §5). One Engine per
// context (ns_context). It owns the queue pairs and completion queues (queues.hpp), the
// registered region (region.hpp), the client and server units (client_unit.hpp,
// server_unit.hpp), one concatenation point shared by the units (the NIC's Concatenator), the
// outbox that frames its packets for the transport (outbox.hpp), the watchdog, the quiesce
// protocol (quiesce.hpp) and the statistics.
//
// step() does one round of everything: deliver received frames (server units answer reads on
// the spot, client units take answers), start posted work requests, let each client unit
// process a chunk of idxs, flush expired concatenation queues, send the frames, run the
// watchdog. It runs under progress_mu_, on the progress thread (THREAD) or on whichever
// application thread drives the engine (INLINE: ns_poll_cq, ns_cq_wait, ns_progress, and the
// kernels' progress hook), so everything the units touch is single-threaded; the host-facing
// rings are lock-free SPSC rings and the few values the host reads are atomics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "netsparse/netsparse.h"
#include "rig/client_unit.hpp"
#include "rig/clock.hpp"
#include "rig/config.hpp"
#include "rig/finalize_hook.hpp"
#include "rig/handles.hpp"
#include "rig/outbox.hpp"
#include "rig/peer_health.hpp"
#include "rig/plan.hpp"
#include "rig/plan_unit.hpp"
#include "rig/port.hpp"
#include "rig/queues.hpp"
#include "rig/quiesce.hpp"
#include "rig/read_unit.hpp"
#include "rig/region.hpp"
#include "rig/scatter_unit.hpp"
#include "rig/server_unit.hpp"
#include "transport/transport.hpp"

struct ns_cq;
struct ns_qp;

namespace netsparse::rig {

// An engine call that failed: the status for the C API and the reason for ns_last_error().
class EngineError : public std::runtime_error {
 public:
  EngineError(ns_status_t status, const std::string& what)
      : std::runtime_error(what), status_(status) {}
  ns_status_t status() const noexcept { return status_; }

 private:
  ns_status_t status_;
};

class Engine : public PostTarget, public CommandSink {
 public:
  // `config.progress_mode` must be resolved (THREAD or INLINE).
  Engine(std::unique_ptr<transport::Transport> tx, const Config& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Config& config() const noexcept { return config_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const char* transport_name() const noexcept { return transport::to_string(tx_->kind()); }
  std::string transport_detail() const { return tx_->detail(); }
  // Largest property a region accepts (one response packet with one PR in one message).
  std::uint32_t max_prop_bytes() const noexcept;
  bool inline_mode() const noexcept { return config_.inline_progress(); }

  // ---- admin (application threads; serialized with the engine by progress_mu_). Failures
  // throw EngineError (or std::invalid_argument / std::length_error for bad arguments).
  Region* register_region(void* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
                          const std::uint64_t* row_offsets, std::uint32_t flags = 0);
  // Local: the NS_MR_RIG_ONLY region `mr` is read from (and scatter-reduced into) `base` from now
  // on (ns_rebind_props). EngineError NS_ERR_INVALID for another region or bad arguments,
  // NS_ERR_STATE while this node's work requests on it are in flight.
  void rebind_region(Region* mr, void* base);
  // Collective teardown of the region; true when it was collective (clean), false when a peer
  // known to have failed made it local (the region is released either way).
  bool deregister_region(Region* mr);
  Region* region() const noexcept { return region_.load(std::memory_order_acquire); }
  Cq* create_cq(std::uint32_t cqe);
  void destroy_cq(Cq* cq);
  Qp* create_qp(Cq& cq, std::uint32_t depth);
  void destroy_qp(Qp* qp);
  // `wr` was validated (an NS_WR_RIG on the registered region).
  Plan* create_plan(const ns_send_wr& wr);
  void destroy_plan(Plan* plan);  // EngineError(NS_ERR_STATE) while a start is in flight
  int live_objects() const;

  // ---- progress ----
  // INLINE mode: one step if no other thread is stepping; returns the work done (0 in THREAD
  // mode: the progress thread does it).
  int progress_inline();
  std::atomic<std::uint64_t> active_commands{0};  // posted, not completed (all queue pairs)
  // Keeps serving the peers until every live node has quiesced (EngineError on timeout).
  // quiesce_start() announces it without waiting (the engine tells the peers once no work
  // request of this node is in flight); the next quiesce() waits for that round.
  void quiesce_start();
  // Whether the round quiesce_start() announced is complete here (EngineError NS_ERR_STATE when
  // none is announced); runs no step.
  bool quiesce_test();
  void quiesce(int timeout_ms);
  // The peers of the next quiesce rounds (ns_quiesce_peers; nullopt: every node). EngineError
  // NS_ERR_INVALID for a node out of range or one list without the other, NS_ERR_STATE while a
  // round is announced. Region teardown always quiesces with every node.
  void quiesce_peers(std::optional<std::span<const int>> tell,
                     std::optional<std::span<const int>> wait_for);
  // ns_plan_push: the armed lists of `tag` answered now, unasked; returns how many.
  int plan_push(std::uint32_t tag, std::uint32_t round);
  // When the next step has timed work (the earliest concatenation-queue expiry, engine clock);
  // UINT64_MAX if none. For a driver that schedules INLINE steps itself instead of polling:
  // the cluster emulator (lib/emulate) steps each node in virtual time only when a packet
  // arrives, the host posts, or this time comes.
  std::uint64_t next_timer_ns() const;

  // Work of the units since the previous call, for a driver that charges their hardware time
  // per INLINE step (the cluster emulator): idxs walked by the busiest client unit and by all,
  // PRs answered by the server units, and the client units' totals of PRs sent and answers
  // taken (for PRs in flight). Call only from the thread that steps the engine; no lock.
  struct UnitWork {
    std::uint64_t max_unit_walked = 0, walked = 0, served = 0;
    std::uint64_t sent_total = 0, responses_total = 0;
  };
  UnitWork take_unit_work();

  // ---- statistics (take progress_mu_) ----
  struct Snapshot {
    ClientCounters client;
    ServerCounters server;
    concat::ConcatStats concat;
    OutboxStats frames;
    PlanCounters plans;
    ScatterCounters scatters;
    std::uint64_t timeouts = 0, rdma_reads = 0, malformed_packets = 0, completions = 0;
    std::uint64_t packets_in = 0, frames_in = 0, tx_bytes = 0;
    std::uint64_t control_prs = 0, decode_errors[8] = {};
    std::uint64_t registrations = 0, rebinds = 0;  // regions registered, moved (ns_rebind_props)
    // The standby thread (INLINE with Config::standby_us): the times it found the application
    // away with work to do, the steps it ran then, and its wake-ups (a look at the application
    // or a nap while serving ends).
    std::uint64_t standby_takeovers = 0, standby_steps = 0, standby_wakes = 0;
    // Gauges: the engine's queues at the moment of the snapshot (not reset by reset_stats).
    std::uint64_t commands_active = 0;  // posted, not completed
    std::uint64_t filter_commands = 0;  // on the row filter, admitted, not completed
    std::uint64_t wc_backlog = 0;       // completions waiting for room in their CQ
    std::uint64_t prs_in_flight = 0;    // Pending PR Table entries in use, all client units
    std::uint64_t prs_buffered = 0;     // PRs in concatenation queues
    std::uint64_t frames_queued = 0;    // frames the transport has not taken yet
    // NETSPARSE_ENGINE_PROFILE=1: nanoseconds of engine steps by stage (kStage*), and steps.
    bool profiled = false;
    std::uint64_t steps = 0, stage_ns[5] = {};
    // NS_STAT_MALFORMED: every packet or PR dropped by validation, whichever unit refused it
    // (frames, RIG PRs, plan and scatter-reduce packets).
    std::uint64_t malformed_total() const noexcept {
      return malformed_packets + server.malformed_prs + plans.malformed + scatters.malformed;
    }
  };
  // Stages of a step, for the profile: receive (frames in; server units answer reads, client
  // units take answers), dispatch (start work requests), generate (client units walk idxs),
  // expire (concatenation queues past their time, quiesce), send (frames out) .
  static constexpr const char* kStageNames[5] = {"receive", "dispatch", "generate", "expire",
                                                 "send"};
  Snapshot snapshot() const;
  void reset_stats();

  // ---- PostTarget (queue pairs) ----
  const Region* registered_region() const noexcept override { return region(); }
  std::uint64_t watchdog_ns() const noexcept override {
    return std::uint64_t{config_.watchdog_ms} * 1'000'000;
  }
  void count_posted(std::size_t n, Region& region) noexcept override;
  void doorbell() noexcept override;

  // ---- CommandSink (units) ----
  void complete(Command& c) override;
  void note_timeout() noexcept override {
    ++timeouts_;
    note_failure();
  }
  void note_failure() noexcept override { had_failure_.store(true, std::memory_order_relaxed); }
  bool had_failure() const noexcept { return had_failure_.load(std::memory_order_relaxed); }

  bool peer_dead(int p) const noexcept { return health_.dead(p); }
  // Non-empty once a step failed (fail_engine): the reason; further work is refused.
  std::string broken_reason() const;
  bool broken() const noexcept { return broken_flag_.load(std::memory_order_acquire); }

  // ---- MPI_Finalize with the context still open (ns_open_mpi contexts) ----
  // Arms a teardown that MPI runs at the start of MPI_Finalize (finalize_hook.hpp) unless the
  // context is closed first: close_for_finalize() then does, while MPI still works and on every
  // rank alike, what ns_dereg_props and ns_close would have (the region's collective teardown,
  // serving peers until they are done), stops the progress thread and fails outstanding and
  // later work with a message saying why. The handles stay valid: the destroy calls and ns_close
  // afterwards only free memory and call no MPI.
  void close_at_mpi_finalize();
  void close_for_finalize() noexcept;
  bool closed_by_finalize() const noexcept {
    return closed_by_finalize_.load(std::memory_order_acquire);
  }

 private:
  void stop_progress_thread() noexcept;
  // The region's teardown in two halves: the collective one (quiesce, barrier, the transport's
  // deregistration; false when a failed peer made it local) and, under progress_mu_, the
  // engine-side state and the handle.
  bool release_region_collectively(Region* mr);
  void drop_region();
  int step();  // under progress_mu_
  void progress_thread_main();
  // INLINE with a standby thread (Config::standby_us): sleeps, and steps the engine only while
  // the application has not driven it for a whole interval.
  void standby_thread_main();
  void yield_to_admin() const noexcept;
  std::size_t poll_transport();
  void on_frame(const transport::ReceivedPacket& frame);
  void on_packet(int src, std::span<const std::byte> bytes);
  // One compact-wire packet (gather_wire.hpp): reads to a server unit, answers to their unit.
  void on_compact(int src, std::span<const std::byte> bytes);
  std::size_t dispatch(std::uint64_t now);
  bool dispatch_one(Command& cmd, std::uint64_t now);  // false: cannot start it yet
  void run_watchdog(std::uint64_t now);
  // A step that threw (allocation failure, a transport error): every command in flight
  // completes with NS_WC_TRANSPORT_ERR and the engine refuses further work; nothing may
  // terminate the process from the progress thread.
  void fail_engine(const char* what) noexcept;
  int guarded_step() noexcept;
  std::size_t flush_completions();
  void step_quiesce(std::uint64_t now);

  Config config_;
  std::unique_ptr<transport::Transport> tx_;
  const int rank_;
  const int size_;
  PeerHealth health_;  // dead flags, transport reports, presume-dead in teardown

  mutable std::mutex progress_mu_;
  std::atomic<int> admin_waiting_{0};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::atomic<bool> sleeping_{false};
  std::atomic<std::uint64_t> doorbells_{0};
  // Calls of progress_inline (the application driving the engine): the standby thread's sign
  // that the application is in the library. Its own steps, and the times it took over, are
  // guarded by progress_mu_.
  std::atomic<std::uint64_t> inline_calls_{0};
  std::uint64_t standby_takeovers_ = 0, standby_steps_ = 0;
  std::atomic<std::uint64_t> standby_wakes_{0};  // written by the standby thread alone

  // Guarded by progress_mu_ (the engine's own state).
  UnitPort port_;
  std::vector<std::unique_ptr<ns_qp>> qps_;
  std::vector<std::unique_ptr<ns_cq>> cqs_;
  std::unique_ptr<ns_mr> region_owner_;
  std::atomic<Region*> region_{nullptr};
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<concat::ConcatPoint> concat_;
  std::vector<std::unique_ptr<ClientUnit>> clients_;
  std::vector<std::uint64_t> walked_seen_;  // take_unit_work: each client unit's last count
  std::uint64_t served_seen_ = 0;
  std::vector<std::unique_ptr<ServerUnit>> servers_;
  std::size_t next_client_ = 0, next_server_ = 0, next_qp_ = 0;
  std::vector<std::span<const std::byte>> frame_packets_;  // split_frame's output
  // A completion whose CQ was full, and the queue-pair slot of its command, held until the
  // completion is in the CQ: the host cannot post past its queue pairs' depth while completions
  // wait, so this backlog is bounded by those depths (see complete()).
  struct PendingWc {
    Cq* cq;
    ns_wc wc;
    Qp* qp;
    Command* cmd;
  };
  std::deque<PendingWc> wc_backlog_;
  std::uint64_t next_watchdog_ns_ = 0;
  std::unique_ptr<ReadUnit> reads_;        // NS_WR_RDMA_READ
  std::unique_ptr<PlanUnit> plans_;        // NS_WR_RIG_PLAN replays, and the lists peers installed
  std::unique_ptr<ScatterUnit> scatters_;  // NS_WR_RIS, both halves
  std::vector<std::unique_ptr<ns_plan>> plan_handles_;
  std::uint32_t next_plan_id_ = 1;
  std::uint64_t timeouts_ = 0, malformed_packets_ = 0, completions_ = 0;
  std::uint64_t packets_in_ = 0, frames_in_ = 0, control_prs_ = 0, decode_errors_[8] = {};
  std::uint64_t registrations_ = 0, rebinds_ = 0;
  std::string broken_;  // why the engine failed (fail_engine), empty while healthy
  std::atomic<bool> broken_flag_{false};
  std::function<void(const transport::ReceivedPacket&)> handler_;
  concat::ConcatStats concat_retired_;  // statistics of concatenation points already destroyed
  Quiesce quiesce_;
  const bool profile_;
  std::uint64_t steps_ = 0, stage_ns_[5] = {};
  std::atomic<bool> had_failure_{false};  // a timeout or dead peer: teardown becomes local
  std::mutex quiesce_mu_;                 // one application thread in quiesce at a time
  std::atomic<bool> closed_by_finalize_{false};
  FinalizeHook finalize_hook_;  // released first thing in ~Engine
};

}  // namespace netsparse::rig

// The C handles are the engine objects. A queue, completion queue or region does not point at
// its engine; engine_of() finds it in the handle registry (it is registered with its owner).
struct ns_context final : netsparse::rig::Engine {
  using Engine::Engine;
};
// NS_CTX_UNCHECKED: `unchecked_owner` is the context, set at creation, so that the fast path
// (api.cpp) finds it without the registry; nullptr on the checked default.
struct ns_cq final : netsparse::rig::Cq {
  using Cq::Cq;
  netsparse::rig::Engine* unchecked_owner = nullptr;
};
struct ns_qp final : netsparse::rig::Qp {
  using Qp::Qp;
  netsparse::rig::Engine* unchecked_owner = nullptr;
};

namespace netsparse::rig {
// The context a live queue pair, completion queue or region belongs to.
inline Engine& engine_of(const void* handle) noexcept {
  return *static_cast<Engine*>(const_cast<void*>(handle_owner(handle)));
}
}  // namespace netsparse::rig
