#include "rig/queues.hpp"

#include <memory>
#include <new>
#include <type_traits>

#include "rig/clock.hpp"
#include "rig/handles.hpp"
#include "rig/plan.hpp"
#include "rig/region.hpp"

namespace netsparse::rig {

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

// ---- validation ----------------------------------------------------------------------------
namespace {
WrError validate_ris(const ns_send_wr& w, const Region* reg) noexcept {
  const auto& r = w.wr.ris;
  if ((w.send_flags & ~unsigned{NS_SEND_SIGNALED | NS_SEND_UNIQUE}) != 0) return WrError::kRisFlags;
  if (r.mr == nullptr) return WrError::kRisMrNull;
  if (static_cast<const Region*>(r.mr) != reg) return WrError::kRisMrForeign;
  if (r.count >= kMaxWrCount) return WrError::kRisCountTooLarge;
  if (r.op < NS_RIS_SUM || r.op > NS_RIS_MAX) return WrError::kRisUnknownOp;
  if (r.datatype < NS_RIS_FLOAT32 || r.datatype > NS_RIS_INT64) {
    return WrError::kRisUnknownDatatype;
  }
  const std::uint32_t elem = r.datatype == NS_RIS_FLOAT32 || r.datatype == NS_RIS_INT32 ? 4 : 8;
  if (reg->prop_bytes % elem != 0) return WrError::kRisRowNotWhole;
  if (r.count == 0) return WrError::kNone;
  if (r.idx == nullptr) return WrError::kRisIdxNull;
  if (r.values == nullptr) return WrError::kRisValuesNull;
  // count < 2^40 and prop_bytes < 2^32: the product fits.
  if (r.values_bytes < r.count * reg->prop_bytes) return WrError::kRisValuesTooSmall;
  return WrError::kNone;
}
}  // namespace

WrError validate_wr(const ns_send_wr& w, const Region* reg, const PostTarget* target) noexcept {
  constexpr unsigned kFlags =
      NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH | NS_SEND_REMOTE_ONLY | NS_SEND_PUSHED | NS_SEND_UNIQUE;
  if ((w.send_flags & ~kFlags) != 0) return WrError::kUnknownFlags;
  if ((w.send_flags & NS_SEND_UNIQUE) != 0 && w.opcode != NS_WR_RIG && w.opcode != NS_WR_RIS) {
    return WrError::kUniqueNotRig;
  }
  if ((w.send_flags & NS_SEND_PUSHED) != 0 && w.opcode != NS_WR_RIG_PLAN) {
    return WrError::kPushedNotPlan;
  }
  if (w.opcode == NS_WR_RIG_PLAN) {
    const Plan* p = w.wr.plan.plan;
    if (p == nullptr) return WrError::kPlanNull;
    if (!is_live_handle(p, HandleKind::kPlan) || p->target != target) return WrError::kPlanForeign;
    if (reg == nullptr) return WrError::kNoRegion;
    if (p->prop_bytes != reg->prop_bytes) return WrError::kPlanPropBytes;
    return WrError::kNone;
  }
  if (w.opcode == NS_WR_RIG) {
    const auto& r = w.wr.rig;
    if (r.mr == nullptr) return WrError::kRigMrNull;
    if (static_cast<const Region*>(r.mr) != reg) return WrError::kRigMrForeign;
    if (r.count >= kMaxWrCount) return WrError::kCountTooLarge;
    if (r.count == 0) return WrError::kNone;
    if (r.idx == nullptr) return WrError::kIdxNull;
    if (r.out == nullptr) return WrError::kOutNull;
    if (r.layout == NS_RIG_LAYOUT_INDEXED) {
      if (r.window_len == 0) return WrError::kWindowLenZero;
      if (r.window_base + r.window_len < r.window_base) return WrError::kWindowOverflow;
      if (r.window_len > UINT64_MAX / reg->prop_bytes) return WrError::kWindowTooLarge;
      if (r.out_bytes < r.window_len * reg->prop_bytes) return WrError::kOutTooSmall;
    } else if (r.layout == NS_RIG_LAYOUT_POSITIONAL) {
      if (r.count > UINT64_MAX / reg->prop_bytes) return WrError::kPositionalTooLarge;
      if (r.out_bytes < r.count * reg->prop_bytes) return WrError::kOutTooSmall;
    } else {
      return WrError::kUnknownLayout;
    }
    return WrError::kNone;
  }
  if (w.opcode == NS_WR_RIS) return validate_ris(w, reg);
  if (w.opcode == NS_WR_RDMA_READ) {
    const auto& r = w.wr.rdma_read;
    if (r.mr == nullptr) return WrError::kReadMrNull;
    if (static_cast<const Region*>(r.mr) != reg) return WrError::kReadMrForeign;
    if (reg->rig_only) return WrError::kReadRigOnly;
    if (r.out == nullptr) return WrError::kReadOutNull;
    if (r.out_bytes < reg->prop_bytes) return WrError::kReadOutTooSmall;
    return WrError::kNone;
  }
  return WrError::kUnknownOpcode;
}

// ---- Qp ------------------------------------------------------------------------------------
static_assert(std::is_trivially_destructible_v<Command>,
              "Qp's slots are raw storage, constructed on first use and never destroyed");

Qp::Qp(PostTarget& target, Cq& cq, std::uint32_t depth)
    : target_(target),
      cq_(cq),
      depth_(depth),
      slots_(std::allocator<Command>().allocate(depth)),
      submit_(depth),
      free_(depth) {}

Qp::~Qp() {
  std::allocator<Command>().deallocate(slots_, depth_);
}

bool Qp::take_slot(std::uint32_t& slot) noexcept {
  if (free_.pop(slot)) return true;
  if (fresh_ == depth_) return false;
  slot = fresh_++;
  Command* c = ::new (static_cast<void*>(slots_ + slot)) Command{};
  c->slot = slot;
  c->qp = this;
  return true;
}

template <bool kValidate>
PostResult Qp::post_chain(ns_send_wr* wr, ns_send_wr** bad_wr) {
  std::lock_guard<std::mutex> lk(post_mu_);
  const std::uint64_t wd = target_.watchdog_ns();
  const std::uint64_t deadline = wd == 0 ? UINT64_MAX : now_ns() + wd;
  const Region* registered = target_.registered_region();
  PostResult result;
  std::size_t n = 0;
  Region* reg = nullptr;
  ns_send_wr* w = wr;
  for (; w != nullptr; w = w->next) {
    if constexpr (kValidate) {
      if (const WrError why = validate_wr(*w, registered, &target_); why != WrError::kNone) {
        result = {NS_ERR_INVALID, why};
        break;
      }
    }
    Plan* plan = w->opcode == NS_WR_RIG_PLAN ? w->wr.plan.plan : nullptr;
    // One start of a plan at a time: its recording and output are single.
    if (plan != nullptr && plan->busy.exchange(true, std::memory_order_acq_rel)) {
      result = {NS_ERR_INVALID, WrError::kPlanBusy};
      break;
    }
    std::uint32_t slot = 0;
    if (!take_slot(slot)) {
      if (plan != nullptr) plan->busy.store(false, std::memory_order_release);
      result = {NS_ERR_NO_RESOURCE, WrError::kQueueFull};
      break;
    }
    Command& c = slots_[slot];
    c.wr_id = w->wr_id;
    c.opcode = w->opcode;
    c.flags = w->send_flags;
    c.deadline_ns = deadline;
    c.plan = plan;
    c.recording = false;
    c.push_tag = plan != nullptr ? w->wr.plan.push_tag : 0;
    c.push_round = plan != nullptr ? w->wr.plan.push_round : 0;
    if (plan != nullptr) {
      reg = const_cast<Region*>(registered);
      c.flags |= plan->flags;
      c.idx = plan->idx.data();
      c.count = plan->idx.size();
      c.out = plan->out;
      c.layout = plan->layout;
      c.window_base = plan->window_base;
      c.window_len = plan->window_len;
    } else if (w->opcode == NS_WR_RIG) {
      const auto& r = w->wr.rig;
      reg = static_cast<Region*>(r.mr);
      c.idx = r.idx;
      c.count = r.count;
      c.out = static_cast<std::byte*>(r.out);
      c.layout = r.layout;
      c.window_base = r.window_base;
      c.window_len = r.window_len;
    } else if (w->opcode == NS_WR_RIS) {
      const auto& r = w->wr.ris;
      reg = static_cast<Region*>(r.mr);
      c.idx = r.idx;
      c.count = r.count;
      c.out = nullptr;
      c.values = static_cast<const std::byte*>(r.values);
      c.op = r.op;
      c.datatype = r.datatype;
    } else {
      const auto& r = w->wr.rdma_read;
      reg = static_cast<Region*>(r.mr);
      c.idx = nullptr;
      c.read_idx = r.idx;
      c.count = 1;
      c.out = static_cast<std::byte*>(r.out);
      c.layout = NS_RIG_LAYOUT_POSITIONAL;
    }
    c.mr = reg;
    submit_.write(n, slot);
    ++n;
  }
  if (n > 0) {
    outstanding.fetch_add(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    target_.count_posted(n, *reg);
    submit_.publish(n);
    target_.doorbell();
  }
  if (result.status != NS_OK && bad_wr != nullptr) *bad_wr = w;
  return result;
}

template PostResult Qp::post_chain<true>(ns_send_wr*, ns_send_wr**);
template PostResult Qp::post_chain<false>(ns_send_wr*, ns_send_wr**);

}  // namespace netsparse::rig
