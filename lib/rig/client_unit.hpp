// A RIG client unit (MICRO '25 §5.1-5.3), software-native: it takes RIG commands and walks
// their idx lists in chunks, one pass per chunk doing everything the paper's pipeline stages do
// per PR — window check, Idx Filter / coalescing (one 2-bit lookup in the region's row-state
// filter, or a per-WR map), owner solve, local copy, Pending PR Table entry, read PR appended to
// the destination's concatenation queue. Answers find their entry directly by request id (no
// search); the entry says where the property goes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "concat/gather_wire.hpp"
#include "concat/protocol.hpp"
#include "filter/row_state.hpp"
#include "rig/config.hpp"
#include "rig/counters.hpp"
#include "rig/port.hpp"
#include "rig/queues.hpp"
#include "support/hash.hpp"

namespace netsparse::rig {

inline constexpr std::uint32_t kUnitSlots = 32;  // commands in flight per client unit

struct ClientCounters {
  std::uint64_t requested = 0, filtered = 0, coalesced = 0, local = 0, sent = 0;
  std::uint64_t stalls = 0, stale_responses = 0, stale_waiters = 0, released = 0;
  std::uint64_t invalid_local = 0, responses = 0;
  std::uint64_t compact_packets = 0, compact_bytes = 0;  // compact reads sent, as sent
  // Work requests walked without their per-WR de-duplication: the unit's recent ones repeated
  // less than 1 % of their remote idxs (ClientUnit::skip_dedup).
  std::uint64_t dedup_skipped = 0;
  template <class Self>
  static auto fields(Self& s) {
    return std::tie(s.requested, s.filtered, s.coalesced, s.local, s.sent, s.stalls,
                    s.stale_responses, s.stale_waiters, s.released, s.invalid_local, s.responses,
                    s.compact_packets, s.compact_bytes, s.dedup_skipped);
  }
  void add(const ClientCounters& o) { add_counters(*this, o); }
};

// Per-WR de-duplication: has this idx occurred earlier in the same work request, and if so at
// which position and with which request? A row-state bitmap over the global rows answers
// "seen?" with one word access and is cleared per work request in O(1) (epoch bump); the
// idx -> first occurrence map is built only when a repeat shows up (from the list of first
// occurrences, once per work request), so a stream without repeats never hashes. Regions whose
// bitmap would exceed kMaxBitmapBytes use the map from the start.
class WrDedup {
 public:
  static constexpr std::uint32_t kNoRequest = 0xFFFFFFFFu;
  static constexpr std::uint64_t kMaxBitmapBytes = std::uint64_t{64} << 20;
  struct Hit {
    std::uint32_t pos;
    std::uint32_t req;
  };
  void begin(std::uint64_t total_rows, std::uint64_t count);
  // The first occurrence of idx (nullptr if none). A miss marks idx as seen: the caller then
  // either records() it or forget()s it (it was not sent after all). Both are inline: the
  // client's hot loop calls them per idx, and a call there spills the loop's registers (the
  // first-time bitmap claim is the common case; repeats take the out-of-line map).
  const Hit* find(std::uint64_t idx) {
    if (use_bitmap_ && idx < seen_.size()) {
      if (seen_.claim(idx) == filter::kRowNone) return nullptr;  // first time in this WR
      return find_repeat(idx);
    }
    return map_built_ ? map_find(idx) : nullptr;  // idxs beyond the rows are not de-duplicated
  }
  void record(std::uint64_t idx, std::uint32_t pos, std::uint32_t req) {
    if (map_built_) {
      map_insert(idx, Hit{pos, req});
    } else {
      firsts_.emplace_back(idx, Hit{pos, req});
    }
  }
  void prefetch(std::uint64_t idx) const noexcept {
    if (use_bitmap_) seen_.prefetch(idx);
  }
  void forget(std::uint64_t idx) noexcept {
    if (use_bitmap_) seen_.set(idx, filter::kRowNone);
  }

 private:
  struct Slot {
    std::uint64_t idx;
    Hit hit;
    std::uint32_t gen;
  };
  std::size_t home(std::uint64_t idx) const noexcept {
    return support::fibonacci_slot(idx, shift_);
  }
  const Hit* map_find(std::uint64_t idx) const noexcept;
  const Hit* find_repeat(std::uint64_t idx);  // a bitmap hit: the map (built on the first one)
  void map_insert(std::uint64_t idx, Hit hit) noexcept;
  void build_map();

  bool use_bitmap_ = false;
  bool map_built_ = false;
  filter::RowStateFilter seen_;
  std::vector<std::pair<std::uint64_t, Hit>> firsts_;  // first occurrences, before the map
  std::uint64_t count_ = 0;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t used_ = 0;
  std::uint32_t gen_ = 0;
};

class ClientUnit {
 public:
  ClientUnit(const UnitPort& port, std::uint16_t id, const Config& config);
  std::uint16_t id() const noexcept { return id_; }
  bool can_take() const noexcept { return current_ == nullptr && free_slots_ > 0; }
  bool busy() const noexcept { return live_ > 0; }
  void take(Command& cmd);
  // Processes up to one chunk of idxs of the current command; returns the work done.
  std::size_t generate(std::uint64_t now);
  void on_response(const concat::PrHeader& pr, const std::byte* payload, bool invalid);
  // Compact wire (gather_wire.hpp): rows of one of this unit's reads from `src`, or its refusal.
  void on_rows(std::uint32_t src, const concat::GatherPacket& pkt);
  void on_refuse(std::uint32_t src, const concat::GatherHeader& h);
  // Cache hints for an answer a few PRs ahead: its Pending PR Table entry, and (once that entry
  // is cached) the place its property goes. Answers land at random places in the output, and
  // each miss would otherwise stall the copy.
  void prefetch_entry(std::uint32_t req_id) const noexcept {
    const std::uint32_t e = req_id & id_mask_;
    if (e < entries_.size()) __builtin_prefetch(&entries_[e]);
  }
  void prefetch_destination(std::uint32_t req_id, std::uint64_t idx) const noexcept;
  // Completes commands whose deadline passed; returns how many.
  int watchdog(std::uint64_t now);
  // Completes every command with `status` (teardown).
  void fail_all(int status);
  std::uint32_t entries_in_flight() const noexcept {
    return static_cast<std::uint32_t>(entries_.size() - free_.size()) + inflight_prs_;
  }
  ClientCounters counters;

 private:
  // The software Pending PR Table: one entry per PR in flight, its index = low bits of the PR's
  // request id (the high bits are a generation, so a late answer to a reused entry is refused).
  struct Entry {
    std::uint64_t idx;
    std::uint64_t pos;  // POSITIONAL: where the property goes
    std::uint32_t gen;
    std::uint16_t slot;
    std::uint8_t slot_epoch;
    bool live;
  };
  struct Slot {
    Command* cmd = nullptr;
    std::uint8_t epoch = 0;
    // POSITIONAL repeats whose first occurrence was in flight: (position, first position),
    // copied when the command has all its answers.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> copies;
  };
  std::uint32_t request_id(std::uint32_t e) const noexcept {
    return (entries_[e].gen << id_bits_) | e;
  }
  bool request_live(std::uint32_t req) const noexcept {
    if (compact_) return batch_live(req);
    const std::uint32_t e = req & id_mask_;
    return e < entries_.size() && entries_[e].live && entries_[e].gen == (req >> id_bits_);
  }
  void free_entry(std::uint32_t e) noexcept {
    entries_[e].live = false;
    entries_[e].gen = (entries_[e].gen + 1) & gen_mask_;
    free_.push_back(e);
  }
  // ---- the compact wire: a read per owner holds the owner-local rows asked for, in order, and
  // where each answer goes; the owner answers with the rows in that order (gather_wire.hpp).
  // It replaces the Pending PR Table: one record per read, not per PR, and answers are matched
  // per packet. Reads fill while the command's idxs are walked and leave when full, when the
  // command's idxs are all walked, or before the unit stalls.
  struct Batch {
    std::vector<std::uint64_t> rows;  // owner-local rows (4 B each on the wire when they fit)
    std::vector<std::uint64_t> at;    // byte offset in the command's output of each answer
    std::uint64_t max_row = 0;
    std::uint32_t owner = 0;
    std::uint32_t received = 0;  // answers arrive in order: rows [0, received) have landed
    std::uint32_t gen = 0;
    std::uint16_t slot = 0;
    std::uint8_t slot_epoch = 0;
    bool live = false;  // being filled or in flight
    bool sent = false;
  };
  static constexpr std::uint32_t kNoBatch = 0xFFFFFFFFu;
  static constexpr std::uint32_t kBatchIndexBits = 16;
  std::uint32_t tag_of(std::uint32_t b) const noexcept {
    return (batches_[b].gen << kBatchIndexBits) | b;
  }
  static std::uint32_t batch_of(std::uint32_t tag) noexcept {
    return tag & ((1u << kBatchIndexBits) - 1);
  }
  bool batch_live(std::uint32_t tag) const noexcept {
    const std::uint32_t b = batch_of(tag);
    return b < batches_.size() && batches_[b].live && batches_[b].gen == (tag >> kBatchIndexBits);
  }
  // A read's rows that will not arrive (refused, or its command failed) become unrequested in
  // the region's row filter, so later commands ask for them again instead of waiting.
  void forget_unanswered(const Batch& b, Command& c) noexcept;
  // Room for one more PR to `owner` (an open read, or a free one, and the in-flight bound).
  // Inline, as WrDedup::find (per idx in the hot loop).
  bool compact_room(std::uint32_t owner) const noexcept {
    if (inflight_prs_ >= config_.pending_entries) return false;
    return open_[owner] != kNoBatch || !free_batches_.empty() || batches_.size() < max_batches_;
  }
  // The open read to `owner` (opened for the current command's slot if none is).
  Batch& open_batch(std::uint32_t owner) {
    const std::uint32_t b = open_[owner];
    return b != kNoBatch ? batches_[b] : open_new_batch(owner);
  }
  Batch& open_new_batch(std::uint32_t owner);
  // One row for `owner` (owner-local), answered at byte `at` of the command's output, into its
  // open read, which leaves once full; returns the read's tag (taken before it leaves).
  std::uint32_t append_to_read(std::uint32_t owner, std::uint64_t row, std::uint64_t at) {
    Batch& b = open_batch(owner);
    b.rows.push_back(row);
    b.at.push_back(at);
    b.max_row = std::max(b.max_row, row);
    ++inflight_prs_;
    const std::uint32_t tag = tag_of(open_[owner]);
    if (b.rows.size() == batch_cap_) send_batch(owner);
    return tag;
  }
  void send_batch(std::uint32_t owner);
  void send_open_batches();
  void free_batch(std::uint32_t b) noexcept;
  // The batch an answer from src names, or nullptr (counted stale) when none is in flight.
  Batch* answered_batch(std::uint32_t src, const concat::GatherHeader& h);
  // Walks idxs [next_, next_ + budget) of the current command; false if stalled.
  bool run(Command& c, std::uint64_t now, std::uint64_t budget);
  // run()'s bulk path for a POSITIONAL command answered by compact reads and not recording a
  // plan: without filter use (its idxs declared unique, or filtering and coalescing off), or
  // with the per-WR de-duplication (kDedup); kP: the property size, 0 for one known only at run
  // time (run_bulk_sized picks it).
  template <bool kDedup>
  bool run_bulk_sized(Command& c, std::uint64_t end);
  // Whether the bulk path may walk cmd (POSITIONAL on the compact wire, no plan to record).
  bool bulk_eligible(const Command& cmd) const noexcept;
  // Whether cmd, a work request with per-WR de-duplication on the bulk path, should go without
  // it: the unit's recent de-duplicated requests found repeats among fewer than 1 % of their
  // remote idxs (decayed by half per request), so the bitmap claim and first-occurrence record
  // per idx would cost more than the few repeats they save; every 8th such request still
  // de-duplicates, to keep measuring. Results never change (a repeat is requested again).
  bool skip_dedup(const Command& cmd) noexcept;
  template <std::uint32_t kP, bool kDedup>
  bool run_bulk(Command& c, std::uint64_t end);
  // Frees the entries of slot s (its command failed); their rows become unrequested again.
  void release_entries(std::uint32_t s);
  void maybe_finish(std::uint32_t slot);
  void finish_slot(std::uint32_t slot);

  const UnitPort& port_;
  const std::uint16_t id_;
  const Config& config_;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> free_;
  unsigned id_bits_ = 1;
  std::uint32_t id_mask_ = 1;
  std::uint32_t gen_mask_ = 0;
  std::vector<Slot> slots_;
  std::uint32_t free_slots_ = kUnitSlots;
  std::uint32_t live_ = 0;
  Command* current_ = nullptr;
  std::uint32_t current_slot_ = 0;
  std::uint64_t next_ = 0;  // next idx position of the current command
  bool stalled_ = false;
  WrDedup dedup_;
  // compact wire
  const bool compact_;
  std::uint32_t batch_cap_ = 1;    // rows per read
  std::uint32_t max_batches_ = 1;  // reads open or in flight
  std::uint32_t inflight_prs_ = 0;
  // skip_dedup's measure: remote idxs walked and repeats found by the de-duplicated walks of
  // the current command and, halved per command, of the ones before.
  std::uint64_t cmd_walked_ = 0, cmd_repeats_ = 0;
  std::uint64_t walked_window_ = 0, repeat_window_ = 0;
  std::uint32_t since_probe_ = 0;
  std::vector<Batch> batches_;
  std::vector<std::uint32_t> free_batches_;
  std::vector<std::uint32_t> open_;         // per owner: its read being filled, or kNoBatch
  std::vector<std::uint32_t> open_owners_;  // owners with a read being filled
};

}  // namespace netsparse::rig
