// The plan unit: both halves of learned gather plans (plan.hpp) in one engine.
//   client: starts a recorded plan (one kInstall list per owner the first time, then one
//           kStart per owner), lands kRows packets, completes the command when every owner's
//           rows are in and the repeats are copied; watchdog and dead owners as for RIG.
//   owner:  keeps each peer's installed lists (checked row by row against this node's rows
//           when they arrive: never a read outside the region) and answers kStart by packing
//           the rows straight into the outbox's frames (prefetched, no per-row header).
//   pushed: a start with NS_SEND_PUSHED arms its owners once (its kStart carries a tag and
//           round); later the owner's push(tag, round) answers the start of that round unasked,
//           the client sends nothing, and rows that arrive before the start land at once.
// Plans not yet recorded for the current region go through the RIG path (the engine asks
// needs_recording()). Runs on the thread that steps the engine, like the other units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "concat/plan_wire.hpp"
#include "rig/counters.hpp"
#include "rig/outbox.hpp"
#include "rig/plan.hpp"
#include "rig/port.hpp"
#include "rig/queues.hpp"
#include "rig/row_packing.hpp"

namespace netsparse::rig {

struct PlanCounters {
  std::uint64_t recorded = 0;       // recordings kept (a RIG gather that succeeded)
  std::uint64_t replays = 0;        // starts served from a recording
  std::uint64_t rows_in = 0;        // rows landed by replays
  std::uint64_t installs = 0;       // lists sent to owners
  std::uint64_t packets_out = 0;    // plan packets sent (every type)
  std::uint64_t bytes_out = 0;      // their bytes (headers and bodies, as sent)
  std::uint64_t rows_served = 0;    // rows this node packed for its peers
  std::uint64_t rows_queued = 0;    // of those, packed into the outbox's queue, not the transport's
                                    // memory (every row where the transport lends none)
  std::uint64_t refused = 0;        // kRefuse sent
  std::uint64_t stale = 0;          // packets of a start no longer in flight (dropped)
  std::uint64_t malformed = 0;      // packets that failed validation or broke the protocol
  std::uint64_t starts_sent = 0;    // client: kStart packets sent (one per owner asked)
  std::uint64_t pushes = 0;         // owner: lists pushed unasked (ns_plan_push)
  std::uint64_t pushed_starts = 0;  // client: (start, owner) pairs the owner pushed, no kStart
  std::uint64_t rows_early = 0;     // client: pushed rows that landed before their start
  template <class Self>
  static auto fields(Self& s) {
    return std::tie(s.recorded, s.replays, s.rows_in, s.installs, s.packets_out, s.bytes_out,
                    s.rows_served, s.rows_queued, s.refused, s.stale, s.malformed, s.starts_sent,
                    s.pushes, s.pushed_starts, s.rows_early);
  }
  void add(const PlanCounters& o) { add_counters(*this, o); }
};

class PlanUnit {
 public:
  PlanUnit(const UnitPort& port, Outbox& outbox) : port_(port), outbox_(outbox) {}

  // ---- plans of this node (admin, under the engine's lock) ----
  void add(Plan& p) { plans_[p.id] = &p; }
  void remove(Plan& p) { plans_.erase(p.id); }

  // The registered region changed (registered or dropped): every recording is stale and every
  // installed list of the peers is gone.
  void region_changed() noexcept;
  std::uint64_t region_gen() const noexcept { return region_gen_; }

  // ---- client ----
  // True when the plan of `c` must be (re)recorded through the RIG path first.
  bool needs_recording(const Command& c) const noexcept;
  // Starts a replay of a recorded plan (completes at once when nothing is remote).
  void start(Command& c, std::uint64_t now);
  // The command of a plan completed (recording or replay): the plan is free again.
  void on_complete(Command& c) noexcept;

  // ---- both: one plan packet of a frame from node src ----
  void on_packet(int src, std::span<const std::byte> bytes, std::uint64_t now);

  // ---- owner: answers still being packed ----
  // Packs more rows of the starts being answered, as far as the transport has room; returns the
  // packets packed (the engine's step calls it: work to do while it is non-zero).
  std::size_t serve();
  bool serving() const noexcept { return !serving_.empty(); }
  // Answers, unasked, the next start of every list armed with `tag` (ns_plan_push); returns
  // how many lists.
  int push(std::uint32_t tag, std::uint32_t round);

  // Replays past their deadline, or waiting for an owner known dead, complete with an error.
  void watchdog(std::uint64_t now);
  void fail_all(int status);

  PlanCounters counters;

 private:
  struct Stored {
    std::uint32_t version = 0;
    concat::PlanRefusal bad{};  // 0: the list is usable so far
    std::vector<std::uint64_t> rows;
    // Armed by a kStart with a push tag and round: push(tag, q) answers start
    // armed_seq + (q - armed_round) unasked, for q > armed_round.
    bool armed = false;
    std::uint32_t push_tag = 0;
    std::uint32_t armed_round = 0;
    std::uint16_t armed_seq = 0;
  };
  static constexpr std::size_t kMaxStoredPerPeer = 4096;  // lists one peer may install
  // A kStart being answered. Where the transport lends its memory (the shared-memory rings),
  // rows are packed straight into it, as far as the consumer has drained, and the rest on later
  // steps: a list larger than the ring (8.7 MB per replay on kron:16 at K = 128, 2 MiB rings)
  // no longer lands in the outbox's queue first (zero-filled, copied, then copied again).
  struct Serving {
    std::uint64_t key;  // stored_'s key of the list
    std::uint32_t dest, plan, version;
    std::uint16_t seq;
    std::size_t next = 0;  // rows packed so far
    // Bytes of the answers pushed to dest after this one in the same round: with this one's,
    // what a frame to dest is asked to hold (one frame for the pair's whole answer).
    std::size_t after = 0;
  };
  // Packs job's rows until done (true) or the transport has no room now (false).
  bool serve_one(Serving& job);

  void send_install(std::uint32_t owner, const Plan& p, const PlanPeer& peer);
  void send_arming_start(std::uint32_t owner, const Plan& p, std::uint32_t tag, std::uint32_t round,
                         std::uint32_t list_rows);
  void answer(Serving job);
  void send_header_only(std::uint32_t dest, concat::PlanType type, std::uint32_t plan,
                        std::uint32_t version, std::uint16_t seq, std::uint32_t first);
  void on_install(int src, const concat::PlanPacket& pkt);
  void on_start(int src, const concat::PlanPacket& pkt);
  // The plan and owner an answer (kRows, kRefuse) from src belongs to, or {nullptr, nullptr}
  // (counted stale or malformed) when no start of it is in flight or src is not its owner.
  struct Answer {
    Plan* plan = nullptr;
    PlanPeer* peer = nullptr;
  };
  Answer answer_to(int src, const concat::PlanHeader& h);
  void on_rows(int src, const concat::PlanPacket& pkt);
  // Pushed rows of the plan's next start, before it was posted: landed (true), else false.
  bool land_early(int src, const concat::PlanPacket& pkt);
  void land(Plan& p, PlanPeer& peer, const concat::PlanPacket& pkt);
  void on_refuse(int src, const concat::PlanPacket& pkt);
  // One owner of the start in flight is done (all rows, refused or failed).
  void peer_done(Plan& p);
  void finish(Plan& p, int status);

  const UnitPort& port_;
  Outbox& outbox_;
  std::unordered_map<std::uint32_t, Plan*> plans_;
  std::vector<Plan*> active_;  // plans with a start in flight
  std::uint64_t region_gen_ = 1;
  std::uint32_t next_version_ = 1;
  // Lists installed by peers: key = (src << 32) | plan id.
  std::unordered_map<std::uint64_t, Stored> stored_;
  std::unordered_map<std::uint32_t, std::size_t> stored_per_peer_;
  AnswerQueue<Serving> serving_;
};

}  // namespace netsparse::rig
