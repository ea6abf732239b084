// The registered property region of a context: the local block of the distributed property
// array, the destination solver for every other block, and the Idx Filter over global rows with
// its lifecycle (epochs, the output mapping it stands for, the order in which commands that rely
// on each other's requests complete). Only the thread that drives the engine touches the filter
// state; `inflight` is also read by the host.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "agreement/agreement.hpp"
#include "concat/protocol.hpp"
#include "filter/row_state.hpp"
#include "rig/config.hpp"
#include "rig/destination.hpp"
#include "rig/queues.hpp"

namespace netsparse::rig {

// What ranks compare before registering a region collectively (Engine::register_region): the
// arguments that must agree (row_offsets: size + 1 entries, or null when refused), exchanged
// with Transport::allgather; the caller adds this rank's refusal.
[[nodiscard]] agreement::Agreement region_agreement(std::uint32_t prop_bytes,
                                                    const std::uint64_t* row_offsets, int size,
                                                    std::uint32_t flags);

class Region {
 public:
  // Validates the arguments (std::invalid_argument naming the field) and sizes the filter over
  // every global row (std::length_error when it would exceed max_filter_bytes).
  Region(std::byte* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
         std::span<const std::uint64_t> row_offsets, int rank, std::uint64_t max_filter_bytes);
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // Where the rows are: fixed for a region registered for one-sided reads; a region registered
  // NS_MR_RIG_ONLY may be pointed at another buffer of the same shape (Engine::rebind_region).
  std::byte* base;
  bool rig_only = false;  // NS_MR_RIG_ONLY: no transport registration (tx_region < 0)
  const std::uint64_t local_rows;
  const std::uint32_t prop_bytes;
  const DestinationSolver solver;
  const std::uint64_t row_begin, row_end;
  int tx_region = -1;
  std::atomic<std::uint64_t> inflight{0};  // posted, not completed (for dereg)

  filter::RowStateFilter& rows() noexcept { return rows_; }

  // Decides how a RIG command uses the filter (cmd.filter) when the engine starts it; false =
  // not now (an epoch change waits for the commands of the old epoch). Commands on the row
  // filter generate concurrently, one per client unit, as the paper's units do (a unit stalled
  // on its Pending PR Table does not hold the others back). Within an epoch the output memory
  // the filter vouches for must stay as the engine wrote it (docs/api.md).
  bool admit(Command& c, const Config& config);
  // The command generated its last idx. Every request it may have coalesced onto was sent by a
  // command admitted before now: that set (admission sequence < dep_end) is recorded.
  void generated(Command& c) noexcept {
    if (c.filter != FilterUse::kRows || c.generated_seen) return;
    c.generated_seen = true;
    --generating_;
    fifo_[c.fifo_seq - fifo_base_].dep_end = fifo_base_ + fifo_.size();
  }
  // The command has all its own answers (or failed). A command on the row filter that coalesced
  // onto another command's request completes only when every command admitted before its
  // generation ended has all its own answers (the request it waited for was one of theirs, so
  // its data is then in place); a failed one fails those of its epoch that coalesced and
  // complete after it, since what they waited for may never come. `complete(Command&)` is
  // called for every command that completes now.
  template <class Complete>
  void retire(Command& c, Complete&& complete);
  bool idle() const noexcept { return fifo_.empty() && generating_ == 0; }
  // Commands on the row filter admitted and not yet completed (statistics).
  std::size_t fifo_depth() const noexcept { return fifo_.size(); }

 private:
  struct FifoEntry {
    Command* cmd;           // nullptr once completed
    bool held;              // retired, coalesced, waiting for the commands it may depend on
    bool retired;           // has all its own answers (or failed)
    std::uint64_t dep_end;  // admission sequences it may depend on: [fifo start, dep_end)
  };
  void poison(Command& c) noexcept {
    if (c.status != NS_WC_SUCCESS) {
      if (poison_ == NS_WC_SUCCESS) poison_ = c.status;
    } else if (c.coalesced_any && poison_ != NS_WC_SUCCESS) {
      c.status = poison_;
    }
  }
  // The epoch's INDEXED mappings idx -> address (out - window_base * prop_bytes), each for the
  // window of rows it was first used with. A row's filter state vouches for its property at
  // the address its window's mapping gives, so commands whose windows overlap a window of
  // another mapping cannot use the row filter; disjoint windows (the column panels of one
  // kernel run, gathered into alternating buffers) each keep their own mapping.
  struct Mapping {
    std::uint64_t begin, end;  // window [begin, end)
    std::uint64_t mapping;
  };
  static constexpr std::size_t kMaxMappings = 64;
  // The row filter may serve this window with this mapping (recording it if new).
  bool claim_mapping(std::uint64_t begin, std::uint64_t end, std::uint64_t mapping);
  filter::RowStateFilter rows_;
  std::vector<Mapping> mappings_;
  std::uint64_t generating_ = 0;  // kRows commands admitted and not yet generated
  std::deque<FifoEntry> fifo_;    // kRows commands of this epoch not yet completed, in order
  std::uint64_t fifo_base_ = 0;   // sequence number of fifo_.front()
  int poison_ = NS_WC_SUCCESS;
};

template <class Complete>
void Region::retire(Command& c, Complete&& complete) {
  if (c.filter != FilterUse::kRows) {
    complete(c);
    return;
  }
  generated(c);
  poison(c);
  FifoEntry& e = fifo_[c.fifo_seq - fifo_base_];
  e.retired = true;
  if (!c.coalesced_any) {
    e.cmd = nullptr;
    complete(c);
  } else {
    e.held = true;
  }
  // Every command of the leading run of retired ones has all its answers: a held command whose
  // dependencies all lie in that run has its data in place. The fifo is bounded by the commands
  // in flight (queue depth), so the scan is short.
  std::uint64_t retired_end = fifo_base_;
  while (retired_end - fifo_base_ < fifo_.size() && fifo_[retired_end - fifo_base_].retired)
    ++retired_end;
  for (std::uint64_t s = fifo_base_; s < fifo_base_ + fifo_.size(); ++s) {
    FifoEntry& f = fifo_[s - fifo_base_];
    if (f.cmd == nullptr || !f.held || f.dep_end > retired_end) continue;
    poison(*f.cmd);
    Command& held = *f.cmd;
    f.cmd = nullptr;
    f.held = false;
    complete(held);
  }
  while (!fifo_.empty() && fifo_.front().retired && fifo_.front().cmd == nullptr) {
    fifo_.pop_front();
    ++fifo_base_;
  }
}

// The checks a unit makes of a bulk packet (plan, scatter) from peer `src` before acting on it:
// a region is registered, the peer is not this node, the packet decodes for this node and the
// region's rows (`decode`: concat's decode_<family>_packet) and its header names `src` as its
// source. false: the caller drops it as malformed.
template <class Packet, class Decode>
bool accept_bulk_packet(const Region* region, std::uint32_t rank, int src,
                        std::span<const std::byte> bytes, Decode decode, Packet* out) noexcept {
  return region != nullptr && src != static_cast<int>(rank) &&
         decode(bytes, rank, region->prop_bytes, out) == concat::DecodeError::kOk &&
         out->header.src_node == static_cast<std::uint32_t>(src);
}

}  // namespace netsparse::rig

// The C handle is the region (its context is found through the handle registry).
struct ns_mr final : netsparse::rig::Region {
  using Region::Region;
};
