// The host-facing queues of a context, as in verbs: work requests go from the application to the
// engine through a queue pair's bounded command ring (one doorbell per chain), completions come
// back through a completion queue. Both rings are lock-free single-producer/single-consumer;
// posting takes one lock per chain so that several application threads may share a QP.
//
// Validation returns a reason code (WrError) and the API layer turns it into text: the engine
// never calls back into the C API.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "netsparse/netsparse.h"
#include "rig/spsc_ring.hpp"

namespace netsparse::rig {

class Region;
class Qp;
class Plan;

inline constexpr int kWaiterPosBits = 40;
inline constexpr std::uint64_t kMaxWrCount = std::uint64_t{1} << kWaiterPosBits;

// How a RIG command uses the Idx Filter (decided when the engine admits it; see Region::admit).
enum class FilterUse : std::uint8_t {
  kNone,   // every idx is requested (no filter, no coalescing), or a lone RDMA read
  kRows,   // INDEXED and sharing the epoch's mapping: the region's row-state filter
  kPerWr,  // de-duplication inside this work request only (POSITIONAL, or INDEXED with
           // another mapping): a per-WR idx -> first position map
};

// One posted work request. Lives in its queue pair's slot array from ns_post_send until the
// engine releases the slot; fields above the line are written by the host before the doorbell.
struct Command {
  std::uint64_t wr_id = 0;
  int opcode = NS_WR_RIG;
  unsigned flags = 0;
  Region* mr = nullptr;
  const std::uint64_t* idx = nullptr;  // RIG: idx list
  std::uint64_t read_idx = 0;          // RDMA_READ
  std::uint64_t count = 0;
  std::byte* out = nullptr;
  int layout = NS_RIG_LAYOUT_INDEXED;
  std::uint64_t window_base = 0;
  std::uint64_t window_len = 0;
  std::uint64_t deadline_ns = UINT64_MAX;  // watchdog, from the post time
  // ---- engine state ----
  std::uint64_t outstanding = 0;  // PRs sent for it and not yet answered
  std::uint64_t bad_pos = 0;      // LOC_INV_REQ: position of the offending idx
  int status = NS_WC_SUCCESS;
  FilterUse filter = FilterUse::kNone;
  bool generated = false;       // no more idxs will be generated (all done, or stopped by an error)
  bool coalesced_any = false;   // kRows: some idx waits for a PR another command sent
  std::uint64_t fifo_seq = 0;   // kRows: admission order in the region's epoch
  bool generated_seen = false;  // kRows: the region has counted the end of its generation
  Qp* qp = nullptr;
  std::uint32_t slot = 0;
  // NS_WR_RIG_PLAN: the plan started; `recording` while its RIG gather records it (plan.hpp).
  Plan* plan = nullptr;
  bool recording = false;
  std::uint32_t push_tag = 0;    // NS_SEND_PUSHED: the tag its owners push it under
  std::uint32_t push_round = 0;  // ... and its round
  // NS_WR_RIS: `count` value rows at `values`, combined by op over datatype (netsparse.h).
  const std::byte* values = nullptr;
  int op = NS_RIS_SUM;
  int datatype = NS_RIS_FLOAT32;
};

// Why a work request was refused (the API layer words it).
enum class WrError : int {
  kNone = 0,
  kUnknownFlags,
  kRigMrNull,
  kRigMrForeign,
  kCountTooLarge,
  kIdxNull,
  kOutNull,
  kWindowLenZero,
  kWindowOverflow,
  kWindowTooLarge,
  kPositionalTooLarge,
  kUnknownLayout,
  kReadMrNull,
  kReadMrForeign,
  kReadOutNull,
  kUnknownOpcode,
  kQueueFull,
  kPlanNull,
  kPlanForeign,
  kPlanBusy,
  kPushedNotPlan,
  kUniqueNotRig,
  kPlanPropBytes,
  kNoRegion,
  kOutTooSmall,
  kReadOutTooSmall,
  kRisMrNull,
  kRisMrForeign,
  kRisCountTooLarge,
  kRisIdxNull,
  kRisValuesNull,
  kRisValuesTooSmall,
  kRisUnknownOp,
  kRisUnknownDatatype,
  kRisRowNotWhole,
  kRisFlags,
  kReadRigOnly,
};
// `target`: the engine posting (plans must belong to it); may be null when no plan can occur.
WrError validate_wr(const ns_send_wr& w, const Region* registered,
                    const class PostTarget* target = nullptr) noexcept;

class Cq {
 public:
  explicit Cq(std::uint32_t cqe) : ring_(cqe) {}
  // Producer (engine). False when full: the engine keeps the completion and retries.
  bool push(const ns_wc& wc) noexcept { return ring_.push(wc); }
  // Producer (engine): a push now would succeed (only the consumer makes room).
  bool has_room() noexcept { return ring_.free_space() > 0; }
  void notify() noexcept;  // wakes a thread sleeping in wait()
  int poll(int n, ns_wc* wc) noexcept;
  // Sleeps until notify() or the timeout; the caller re-polls.
  void sleep(std::chrono::microseconds d);
  std::atomic<int> users{0};  // queue pairs using it

 private:
  SpscRing<ns_wc> ring_;
  std::mutex consumer_mu_;  // several application threads may poll one CQ
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mu_;
  std::condition_variable cv_;
  std::uint64_t wakeups_ = 0;  // guarded by sleep_mu_
};

// What a queue pair needs from its engine when the host posts.
class PostTarget {
 public:
  virtual const Region* registered_region() const noexcept = 0;
  virtual std::uint64_t watchdog_ns() const noexcept = 0;  // 0 = off
  // n commands are about to be published: counted before they become visible, so that nobody
  // sees "nothing in flight" while they are.
  virtual void count_posted(std::size_t n, Region& region) noexcept = 0;
  virtual void doorbell() noexcept = 0;  // after publication: wake whoever drives the engine

 protected:
  ~PostTarget() = default;
};

struct PostResult {
  ns_status_t status = NS_OK;
  WrError why = WrError::kNone;
};

class Qp {
 public:
  Qp(PostTarget& target, Cq& cq, std::uint32_t depth);
  ~Qp();
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;
  Cq& cq() const noexcept { return cq_; }
  // ns_post_send (thread-safe: one lock per chain).
  PostResult post(ns_send_wr* wr, ns_send_wr** bad_wr) { return post_chain<true>(wr, bad_wr); }
  // The same without validate_wr (NS_CTX_UNCHECKED: the caller vouches for its work requests).
  // The engine's own checks stay: the queue's room, one start of a plan at a time, INDEXED
  // windows, and every check of what peers send.
  PostResult post_unchecked(ns_send_wr* wr, ns_send_wr** bad_wr) {
    return post_chain<false>(wr, bad_wr);
  }
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
  template <bool kValidate>
  PostResult post_chain(ns_send_wr* wr, ns_send_wr** bad_wr);

  // A slot for the next work request: a released one, else one never used (constructed now),
  // else none (the queue is full). Host side, under post_mu_.
  bool take_slot(std::uint32_t& slot) noexcept;

  PostTarget& target_;
  Cq& cq_;
  // depth_ slots, constructed on first use (fresh_ of them so far): a queue pair of 4096
  // slots is 0.8 MB, and constructing it at creation was a third of an engine's open (perf:
  // Qp::Qp and its page faults; issue 34). The engine sees only slots handed to it.
  const std::uint32_t depth_;
  std::uint32_t fresh_ = 0;
  Command* slots_ = nullptr;
  SpscRing<std::uint32_t> submit_;  // host -> engine: slot ids
  SpscRing<std::uint32_t> free_;    // engine -> host: released slot ids
  std::mutex post_mu_;
};

}  // namespace netsparse::rig
