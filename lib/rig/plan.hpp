// A learned gather plan (the C handle ns_plan): one RIG gather that the application repeats —
// the same idx list into the same output, every kernel run of a fixed sparsity pattern. Its
// first start runs the paper's RIG path (Idx Filter, Pending PR Table, concatenation) and, as a
// by-product, the client unit records what that path decided per idx: which owner sends which
// row and where it lands, which positions repeat an earlier one, which rows are this node's.
// Every later start replays the recording in bulk (plan_unit.hpp): one small request per owner,
// the owner packs the rows of the list it was sent once into frames (concat/plan_wire.hpp), the
// client lands each packet with one copy per row (one memcpy per packet where the rows are
// contiguous in the output). No per-property event, filter lookup or pending entry on a replay.
//
// The plan owns a copy of its idx list, so a caller's later change to its own array cannot make
// a replay stale; a region registered again (new data layout or rows) makes the recording stale
// and the next start records afresh; each recording has a context-wide unique version, so an
// owner never serves the list of an older one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "netsparse/netsparse.h"

namespace netsparse::rig {

struct Command;
class PostTarget;

// What one owner sends for a plan: its rows in list order and where each lands.
struct PlanPeer {
  std::uint32_t owner = 0;
  std::vector<std::uint64_t> rows;  // owner-local row numbers, in list order
  std::vector<std::uint64_t> dst;   // byte offset in the output of each row
  bool contiguous = true;           // dst[k] == dst[0] + k * prop_bytes for every k
  std::uint32_t installed = 0;      // the version of the list the owner holds (0: none)
  std::uint32_t arrived = 0;        // rows of the current start that landed
  // Owner-pushed starts (NS_SEND_PUSHED): the version whose starts the owner pushes (0: it is
  // asked with kStart), whether the kStart that arms it is in flight, and whether `arrived`
  // counts rows of start early_seq, pushed before that start was posted.
  std::uint32_t pushed = 0;
  bool arming = false;
  bool early = false;
  std::uint16_t early_seq = 0;
};

class Plan {
 public:
  // `wr`: a valid NS_WR_RIG; `target`: the engine it belongs to.
  Plan(std::uint32_t id, const ns_send_wr& wr, std::uint32_t prop_bytes, const PostTarget* target);
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // ---- the gather, fixed at creation ----
  const std::uint32_t id;
  const std::vector<std::uint64_t> idx;
  std::byte* const out;
  const int layout;
  const std::uint64_t window_base, window_len;
  const std::uint32_t prop_bytes;
  const unsigned flags;  // NS_SEND_REMOTE_ONLY of the creating work request
  const PostTarget* const target;
  // Set by the poster (ns_post_send) while a start is in flight, cleared when it completes.
  std::atomic<bool> busy{false};

  // ---- the recording (engine thread only) ----
  bool recorded() const noexcept { return region_gen_ != 0; }
  std::uint64_t region_gen() const noexcept { return region_gen_; }
  std::uint32_t version() const noexcept { return version_; }
  // Starts a recording over `nodes` nodes (drops the previous one).
  void begin_recording(std::uint32_t nodes);
  // The recording's command completed: kept (valid for region generation `gen`, with a new
  // `version`) when it succeeded, dropped otherwise.
  void end_recording(bool ok, std::uint64_t gen, std::uint32_t version);
  void add_remote(std::uint32_t owner, std::uint64_t row, std::uint64_t dst);
  void add_local(std::uint64_t dst, std::uint64_t row) { local_.emplace_back(dst, row); }
  void add_copy(std::uint64_t dst, std::uint64_t src) { copies_.emplace_back(dst, src); }

  std::vector<PlanPeer>& peers() noexcept { return peers_; }
  // Index in peers() of node p's entry, -1 if p sends nothing.
  int peer_of(std::uint32_t p) const noexcept {
    return p < peer_index_.size() ? peer_index_[p] : -1;
  }
  const std::vector<std::pair<std::uint64_t, std::uint64_t>>& local() const noexcept {
    return local_;
  }
  const std::vector<std::pair<std::uint64_t, std::uint64_t>>& copies() const noexcept {
    return copies_;
  }
  std::uint64_t remote_rows() const noexcept;

  // ---- the start in flight (engine thread only) ----
  Command* active = nullptr;
  std::uint16_t seq = 0;  // names the start in flight; rows of an older one are stale

 private:
  std::uint64_t region_gen_ = 0;  // 0: nothing recorded
  std::uint32_t version_ = 0;
  std::vector<PlanPeer> peers_;
  std::vector<int> peer_index_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> local_;   // (dst offset, local row)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> copies_;  // (dst offset, src offset)
};

}  // namespace netsparse::rig

// The C handle is the plan.
struct ns_plan final : netsparse::rig::Plan {
  using Plan::Plan;
};
