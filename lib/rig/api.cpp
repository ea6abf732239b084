// The C API of netsparse.h over the RIG engine. Every entry point validates its arguments,
// catches every exception (none crosses the C boundary) and records the reason of a failure for
// ns_last_error().
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/settings.hpp"
#include "netsparse/config.h"
#include "netsparse/netsparse.h"
#include "rig/engine.hpp"
#include "transport/transport.hpp"

#include "rig/api_checks.hpp"
#include "rig/api_status.hpp"
#include "rig/handles.hpp"
#include "support/backoff.hpp"
#include "support/enum_names.hpp"

using netsparse::rig::Config;
using netsparse::rig::Engine;
using netsparse::rig::EngineError;
using netsparse::rig::guarded;
using netsparse::rig::HandleKind;
using netsparse::rig::set_last_error;
using netsparse::rig::WrError;
using netsparse::rig::api::invalid;
using netsparse::rig::api::live;
using netsparse::rig::api::not_live;
using netsparse::support::Backoff;

struct ns_fabric {
  explicit ns_fabric(int nodes) : fabric(nodes), opened(static_cast<std::size_t>(nodes)) {}
  netsparse::transport::InprocFabric fabric;
  std::vector<std::atomic<bool>> opened;
};

namespace {

// NULL and stale handles are refused with the call's name (out_given: the call's `out` pointer
// is not NULL).
template <class H>
ns_status_t check_handle(const char* call, const H* h, const char* name, HandleKind k,
                         bool out_given = true) {
  if (h == nullptr) return invalid(call, (std::string(name) + " is NULL").c_str());
  if (!out_given) return invalid(call, "out is NULL");
  if (!live(h, k)) return not_live(call, name, k);
  return NS_OK;
}

// Runs f (guarded) on a live handle of kind k.
template <class H, class F>
ns_status_t on_live(const char* call, const H* h, const char* name, HandleKind k, F&& f) {
  if (const ns_status_t s = check_handle(call, h, name, k); s != NS_OK) return s;
  return guarded(call, std::forward<F>(f));
}

// NS_CTX_UNCHECKED: the handles of such a context's queue pairs and completion queues carry the
// choice in their lowest bit (the objects are at least 8-byte aligned), so ns_post_send and
// ns_poll_cq pick their path without the registry and without dereferencing a handle the
// default path would refuse (bale's RECKLESS table, chosen per context). Every other entry point
// strips the bit and checks as usual.
constexpr std::uintptr_t kUncheckedBit = 1;
template <class H>
bool is_unchecked(const H* h) noexcept {
  return (reinterpret_cast<std::uintptr_t>(h) & kUncheckedBit) != 0;
}
template <class H>
H* strip(H* h) noexcept {
  return reinterpret_cast<H*>(reinterpret_cast<std::uintptr_t>(h) & ~kUncheckedBit);
}
// The handle ns_create_cq / ns_create_qp gives out for the object `h`.
template <class H>
H* handle_for(H* h) noexcept {
  return h->unchecked_owner == nullptr
             ? h
             : reinterpret_cast<H*>(reinterpret_cast<std::uintptr_t>(h) | kUncheckedBit);
}

constexpr auto kWrErrorTexts = std::to_array<netsparse::support::EnumName<WrError>>({
    {WrError::kNone, "no error"},
    {WrError::kUnknownFlags, "unknown send_flags bits"},
    {WrError::kRigMrNull, "wr.rig.mr is NULL"},
    {WrError::kRigMrForeign, "wr.rig.mr is not the region registered on this context"},
    {WrError::kCountTooLarge, "wr.rig.count must be < 2^40"},
    {WrError::kIdxNull, "wr.rig.idx is NULL"},
    {WrError::kOutNull, "wr.rig.out is NULL"},
    {WrError::kWindowLenZero, "wr.rig.window_len is 0 (INDEXED layout)"},
    {WrError::kWindowOverflow, "wr.rig window overflows"},
    {WrError::kWindowTooLarge, "wr.rig window too large"},
    {WrError::kPositionalTooLarge, "wr.rig.count too large"},
    {WrError::kUnknownLayout, "wr.rig.layout is neither INDEXED nor POSITIONAL"},
    {WrError::kReadMrNull, "wr.rdma_read.mr is NULL"},
    {WrError::kReadMrForeign, "wr.rdma_read.mr is not the region registered on this context"},
    {WrError::kReadOutNull, "wr.rdma_read.out is NULL"},
    {WrError::kUnknownOpcode, "unknown opcode"},
    {WrError::kQueueFull, "send queue full (max_send_wr outstanding)"},
    {WrError::kPlanNull, "wr.plan.plan is NULL"},
    {WrError::kPlanForeign, "wr.plan.plan is not a live plan of this context"},
    {WrError::kPlanBusy, "a start of wr.plan.plan is still in flight (one at a time)"},
    {WrError::kPushedNotPlan, "NS_SEND_PUSHED is for NS_WR_RIG_PLAN starts only"},
    {WrError::kUniqueNotRig, "NS_SEND_UNIQUE is for NS_WR_RIG and NS_WR_RIS work requests only"},
    {WrError::kPlanPropBytes,
     "the registered region's prop_bytes differs from the one the plan was created with"},
    {WrError::kNoRegion, "no property region is registered"},
    {WrError::kOutTooSmall,
     "wr.rig.out_bytes is smaller than the output the gather writes (count x prop_bytes for "
     "POSITIONAL, window_len x prop_bytes for INDEXED)"},
    {WrError::kReadOutTooSmall, "wr.rdma_read.out_bytes is smaller than prop_bytes"},
    {WrError::kRisMrNull, "wr.ris.mr is NULL"},
    {WrError::kRisMrForeign, "wr.ris.mr is not the region registered on this context"},
    {WrError::kRisCountTooLarge, "wr.ris.count must be < 2^40"},
    {WrError::kRisIdxNull, "wr.ris.idx is NULL"},
    {WrError::kRisValuesNull, "wr.ris.values is NULL"},
    {WrError::kRisValuesTooSmall, "wr.ris.values_bytes is smaller than count x prop_bytes"},
    {WrError::kRisUnknownOp, "wr.ris.op is not an ns_ris_op (SUM, MIN, MAX)"},
    {WrError::kRisUnknownDatatype,
     "wr.ris.datatype is not an ns_ris_datatype (FLOAT32, FLOAT64, INT32, INT64)"},
    {WrError::kRisRowNotWhole,
     "the region's prop_bytes is not a multiple of the size of wr.ris.datatype"},
    {WrError::kRisFlags, "NS_WR_RIS takes no send_flags but NS_SEND_SIGNALED and NS_SEND_UNIQUE"},
    {WrError::kReadRigOnly,
     "wr.rdma_read.mr was registered NS_MR_RIG_ONLY (ns_reg_props_ex): it takes no one-sided "
     "reads"},
});

const char* wr_error_text(WrError e) {
  return netsparse::support::name_of<kWrErrorTexts>(e, "unknown reason");
}

}  // namespace

// ---- strings -------------------------------------------------------------------------------
extern "C" const char* ns_wc_status_str(int status) {
  static const char* const kText[] = {
      "success",
      "watchdog timeout (output invalid)",
      "remote invalid request (idx outside the owner's rows)",
      "transport error",
      "work request flushed",
      "local invalid request (idx outside the window)",
  };
  if (status < 0 || status >= static_cast<int>(sizeof kText / sizeof kText[0])) {
    return "unknown status";
  }
  return kText[status];
}

constexpr auto kOpcodeNames = std::to_array<netsparse::support::EnumName<int>>({
    {NS_WR_RIG, "RIG"},
    {NS_WR_RDMA_READ, "RDMA_READ"},
    {NS_WR_RIG_PLAN, "RIG_PLAN"},
    {NS_WR_RIS, "RIS"},
});

extern "C" const char* ns_wr_opcode_str(int opcode) {
  return netsparse::support::name_of<kOpcodeNames>(opcode, "unknown opcode");
}

// ---- fabric --------------------------------------------------------------------------------
extern "C" ns_status_t ns_fabric_create(int nodes, ns_fabric** out) {
  if (out == nullptr) return invalid("ns_fabric_create", "out is NULL");
  if (nodes < 1 || nodes > 4096) return invalid("ns_fabric_create", "nodes must be in 1..4096");
  return guarded("ns_fabric_create", [&]() -> ns_status_t {
    *out = new ns_fabric(nodes);
    netsparse::rig::register_handle(*out, HandleKind::kFabric);
    return NS_OK;
  });
}

extern "C" void ns_fabric_destroy(ns_fabric* fabric) {
  if (!live(fabric, HandleKind::kFabric)) return;  // NULL, or destroyed already
  netsparse::rig::unregister_handle(fabric);
  delete fabric;
}

static ns_status_t kill_node(ns_fabric* fabric, int node, bool reported) {
  if (fabric == nullptr) return invalid("ns_fabric_kill_node", "fabric is NULL");
  if (!live(fabric, HandleKind::kFabric)) {
    return not_live("ns_fabric_kill_node", "fabric", HandleKind::kFabric);
  }
  if (node < 0 || node >= fabric->fabric.nodes())
    return invalid("ns_fabric_kill_node", "no such node");
  return guarded("ns_fabric_kill_node", [&]() -> ns_status_t {
    fabric->fabric.kill(node, reported ? netsparse::transport::FailureVisibility::kReported
                                       : netsparse::transport::FailureVisibility::kSilent);
    return NS_OK;
  });
}
extern "C" ns_status_t ns_fabric_kill_node(ns_fabric* fabric, int node) {
  return kill_node(fabric, node, false);
}
extern "C" ns_status_t ns_fabric_kill_node_reported(ns_fabric* fabric, int node) {
  return kill_node(fabric, node, true);
}

// ---- context -------------------------------------------------------------------------------
extern "C" ns_status_t ns_open_inproc(ns_fabric* fabric, int node, const ns_context_attr* attr,
                                      ns_context** out) {
  if (fabric == nullptr || out == nullptr)
    return invalid("ns_open_inproc", "fabric or out is NULL");
  if (!live(fabric, HandleKind::kFabric)) {
    return not_live("ns_open_inproc", "fabric", HandleKind::kFabric);
  }
  if (node < 0 || node >= fabric->fabric.nodes()) return invalid("ns_open_inproc", "no such node");
  return guarded("ns_open_inproc", [&]() -> ns_status_t {
    Config cfg = Config::from_attr(attr);
    cfg.check_memory_budget();
    if (cfg.progress_mode == NS_PROGRESS_AUTO) {
      cfg.progress_mode = NS_PROGRESS_THREAD;
      cfg.progress_reason = "auto: in-process fabric (its nodes are threads of one process)";
    }
    if (cfg.transport != NS_TRANSPORT_AUTO && cfg.transport != NS_TRANSPORT_INPROC) {
      return invalid("ns_open_inproc", "an in-process fabric only has the inproc transport");
    }
    // A misspelt NETSPARSE_* name would change nothing silently: node 0 says so, once.
    if (node == 0) netsparse::config::warn_unknown_names_once();
    if (fabric->opened[static_cast<std::size_t>(node)].exchange(true)) {
      set_last_error("ns_open_inproc: node " + std::to_string(node) + " is already open");
      return NS_ERR_STATE;
    }
    *out = new ns_context(fabric->fabric.endpoint(node), cfg);
    netsparse::rig::register_handle(*out, HandleKind::kContext);
    return NS_OK;
  });
}

extern "C" ns_status_t ns_close(ns_context* ctx) {
  if (ctx == nullptr) return NS_OK;
  if (!live(ctx, HandleKind::kContext)) return not_live("ns_close", "ctx", HandleKind::kContext);
  if (ctx->live_objects() != 0) {
    set_last_error("ns_close: destroy the queue pairs and completion queues first");
    return NS_ERR_STATE;
  }
  return guarded("ns_close", [&]() -> ns_status_t {
    netsparse::rig::Region* r = ctx->region();
    const bool clean = r == nullptr || ctx->deregister_region(r);
    netsparse::rig::unregister_handle(ctx);
    if (!clean) {
      delete ctx;
      set_last_error("ns_close: a peer failed; the region was released locally (no collective)");
      return NS_ERR_TRANSPORT;
    }
    delete ctx;
    return NS_OK;
  });
}

extern "C" int ns_rank(const ns_context* ctx) {
  return live(ctx, HandleKind::kContext) ? ctx->rank() : -1;
}
extern "C" int ns_size(const ns_context* ctx) {
  return live(ctx, HandleKind::kContext) ? ctx->size() : -1;
}
extern "C" const char* ns_transport_name(const ns_context* ctx) {
  return live(ctx, HandleKind::kContext) ? ctx->transport_name() : "none";
}

extern "C" int ns_progress_mode_of(const ns_context* ctx) {
  return live(ctx, HandleKind::kContext) ? ctx->config().progress_mode : -1;
}

extern "C" uint32_t ns_max_prop_bytes(const ns_context* ctx) {
  return live(ctx, HandleKind::kContext) ? ctx->max_prop_bytes() : 0;
}

extern "C" int ns_progress(ns_context* ctx) {
  return on_live("ns_progress", ctx, "ctx", HandleKind::kContext,
                 [&]() -> ns_status_t { return ctx->progress_inline(); });
}

extern "C" ns_status_t ns_quiesce_start(ns_context* ctx) {
  return on_live("ns_quiesce_start", ctx, "ctx", HandleKind::kContext, [&]() -> ns_status_t {
    ctx->quiesce_start();
    return NS_OK;
  });
}

extern "C" ns_status_t ns_quiesce_test(ns_context* ctx, int* done) {
  if (const ns_status_t s =
          check_handle("ns_quiesce_test", ctx, "ctx", HandleKind::kContext, done != nullptr);
      s != NS_OK)
    return s;
  return guarded("ns_quiesce_test", [&]() -> ns_status_t {
    *done = ctx->quiesce_test() ? 1 : 0;
    return NS_OK;
  });
}

extern "C" ns_status_t ns_quiesce(ns_context* ctx, int timeout_ms) {
  return on_live("ns_quiesce", ctx, "ctx", HandleKind::kContext, [&]() -> ns_status_t {
    ctx->quiesce(timeout_ms);
    return NS_OK;
  });
}

extern "C" ns_status_t ns_plan_push(ns_context* ctx, uint32_t tag, uint32_t round, int* lists) {
  return on_live("ns_plan_push", ctx, "ctx", HandleKind::kContext, [&]() -> ns_status_t {
    const int n = ctx->plan_push(tag, round);
    if (lists != nullptr) *lists = n;
    return NS_OK;
  });
}

extern "C" ns_status_t ns_quiesce_peers(ns_context* ctx, const int* tell, int n_tell,
                                        const int* wait_for, int n_wait) {
  return on_live("ns_quiesce_peers", ctx, "ctx", HandleKind::kContext, [&]() -> ns_status_t {
    if (n_tell < 0 && n_wait < 0) {
      ctx->quiesce_peers(std::nullopt, std::nullopt);
      return NS_OK;
    }
    if (n_tell < 0 || n_wait < 0 || (n_tell > 0 && tell == nullptr) ||
        (n_wait > 0 && wait_for == nullptr)) {
      throw EngineError(NS_ERR_INVALID,
                        "ns_quiesce_peers: both counts -1 (every node), or both >= 0 with "
                        "their lists (NULL only for a count of 0)");
    }
    ctx->quiesce_peers(std::span<const int>(tell, static_cast<std::size_t>(n_tell)),
                       std::span<const int>(wait_for, static_cast<std::size_t>(n_wait)));
    return NS_OK;
  });
}

// ---- region --------------------------------------------------------------------------------
namespace {
// ns_reg_props and ns_reg_props_ex: one registration, named by the call the user made.
ns_status_t register_props(const char* call, ns_context* ctx, void* base, uint64_t local_rows,
                           uint32_t prop_bytes, const uint64_t* row_offsets, uint32_t flags,
                           ns_mr** out) {
  if (const ns_status_t s = check_handle(call, ctx, "ctx", HandleKind::kContext, out != nullptr);
      s != NS_OK)
    return s;
  return guarded(call, [&]() -> ns_status_t {
    *out =
        static_cast<ns_mr*>(ctx->register_region(base, local_rows, prop_bytes, row_offsets, flags));
    return NS_OK;
  });
}
}  // namespace

extern "C" ns_status_t ns_reg_props(ns_context* ctx, void* base, uint64_t local_rows,
                                    uint32_t prop_bytes, const uint64_t* row_offsets, ns_mr** out) {
  return register_props("ns_reg_props", ctx, base, local_rows, prop_bytes, row_offsets, 0, out);
}

extern "C" ns_status_t ns_reg_props_ex(ns_context* ctx, void* base, uint64_t local_rows,
                                       uint32_t prop_bytes, const uint64_t* row_offsets,
                                       uint32_t flags, ns_mr** out) {
  return register_props("ns_reg_props_ex", ctx, base, local_rows, prop_bytes, row_offsets, flags,
                        out);
}

extern "C" ns_status_t ns_rebind_props(ns_mr* mr, void* base) {
  return on_live("ns_rebind_props", mr, "mr", HandleKind::kMr, [&]() -> ns_status_t {
    netsparse::rig::engine_of(mr).rebind_region(mr, base);
    return NS_OK;
  });
}

extern "C" ns_status_t ns_dereg_props(ns_mr* mr) {
  return on_live("ns_dereg_props", mr, "mr", HandleKind::kMr, [&]() -> ns_status_t {
    netsparse::rig::Engine& engine = netsparse::rig::engine_of(mr);
    const bool clean = engine.deregister_region(mr);
    if (!clean) {
      set_last_error(
          "ns_dereg_props: a peer failed; the region was released locally (no "
          "collective)");
      return NS_ERR_TRANSPORT;
    }
    return NS_OK;
  });
}

extern "C" uint32_t ns_mr_prop_bytes(const ns_mr* mr) {
  return live(mr, HandleKind::kMr) ? mr->prop_bytes : 0;
}
extern "C" uint64_t ns_mr_total_rows(const ns_mr* mr) {
  return live(mr, HandleKind::kMr) ? mr->solver.total_rows() : 0;
}

// ---- queues --------------------------------------------------------------------------------
extern "C" ns_status_t ns_create_cq(ns_context* ctx, int cqe, ns_cq** out) {
  if (const ns_status_t s =
          check_handle("ns_create_cq", ctx, "ctx", HandleKind::kContext, out != nullptr);
      s != NS_OK)
    return s;
  if (cqe < 1 || cqe > (1 << 24)) return invalid("ns_create_cq", "cqe must be in 1..2^24");
  return guarded("ns_create_cq", [&]() -> ns_status_t {
    *out = handle_for(static_cast<ns_cq*>(ctx->create_cq(static_cast<std::uint32_t>(cqe))));
    return NS_OK;
  });
}

extern "C" ns_status_t ns_destroy_cq(ns_cq* cq) {
  cq = strip(cq);
  return on_live("ns_destroy_cq", cq, "cq", HandleKind::kCq, [&]() -> ns_status_t {
    netsparse::rig::engine_of(cq).destroy_cq(cq);  // throws (and keeps it) while it is in use
    return NS_OK;
  });
}

extern "C" ns_status_t ns_create_qp(ns_context* ctx, ns_cq* send_cq, int max_send_wr, ns_qp** out) {
  send_cq = strip(send_cq);
  if (ctx == nullptr || send_cq == nullptr || out == nullptr) {
    return invalid("ns_create_qp", "ctx, send_cq or out is NULL");
  }
  if (!live(ctx, HandleKind::kContext))
    return not_live("ns_create_qp", "ctx", HandleKind::kContext);
  if (!live(send_cq, HandleKind::kCq)) return not_live("ns_create_qp", "send_cq", HandleKind::kCq);
  if (&netsparse::rig::engine_of(send_cq) != static_cast<netsparse::rig::Engine*>(ctx))
    return invalid("ns_create_qp", "send_cq belongs to another context");
  if (max_send_wr < 1 || max_send_wr > (1 << 20)) {
    return invalid("ns_create_qp", "max_send_wr must be in 1..2^20");
  }
  return guarded("ns_create_qp", [&]() -> ns_status_t {
    *out = handle_for(
        static_cast<ns_qp*>(ctx->create_qp(*send_cq, static_cast<std::uint32_t>(max_send_wr))));
    return NS_OK;
  });
}

extern "C" ns_status_t ns_destroy_qp(ns_qp* qp) {
  qp = strip(qp);
  return on_live("ns_destroy_qp", qp, "qp", HandleKind::kQp, [&]() -> ns_status_t {
    netsparse::rig::engine_of(qp).destroy_qp(
        qp);  // throws (and keeps it) while work is outstanding
    return NS_OK;
  });
}

// ---- gather plans --------------------------------------------------------------------------
extern "C" ns_status_t ns_plan_create(ns_context* ctx, const ns_send_wr* wr, ns_plan** out) {
  if (ctx == nullptr || wr == nullptr || out == nullptr) {
    return invalid("ns_plan_create", "ctx, wr or out is NULL");
  }
  if (!live(ctx, HandleKind::kContext))
    return not_live("ns_plan_create", "ctx", HandleKind::kContext);
  if (wr->opcode != NS_WR_RIG) return invalid("ns_plan_create", "wr->opcode must be NS_WR_RIG");
  return guarded("ns_plan_create", [&]() -> ns_status_t {
    const netsparse::rig::Region* reg = ctx->region();
    if (reg == nullptr) {
      set_last_error("ns_plan_create: no property region is registered");
      return NS_ERR_NOT_REGISTERED;
    }
    if (const WrError why = netsparse::rig::validate_wr(*wr, reg); why != WrError::kNone) {
      return invalid("ns_plan_create", wr_error_text(why));
    }
    *out = static_cast<ns_plan*>(ctx->create_plan(*wr));
    return NS_OK;
  });
}

extern "C" ns_status_t ns_plan_destroy(ns_plan* plan) {
  return on_live("ns_plan_destroy", plan, "plan", HandleKind::kPlan, [&]() -> ns_status_t {
    netsparse::rig::engine_of(plan).destroy_plan(plan);
    return NS_OK;
  });
}

// ---- work requests and completions ---------------------------------------------------------
namespace {
// The part of ns_post_send after the handle checks, on either path.
template <bool kValidate>
ns_status_t post_on(Engine& engine, ns_qp& qp, ns_send_wr* wr, ns_send_wr** bad_wr) {
  if (engine.broken()) {
    if (bad_wr != nullptr) *bad_wr = wr;
    set_last_error("ns_post_send: the engine failed: " + engine.broken_reason());
    return NS_ERR_TRANSPORT;
  }
  const netsparse::rig::PostResult r =
      kValidate ? qp.post(wr, bad_wr) : qp.post_unchecked(wr, bad_wr);
  if (r.status != NS_OK) set_last_error(std::string("ns_post_send: ") + wr_error_text(r.why));
  // INLINE: start the work at once (the caller may compute for a while before polling).
  if (engine.inline_mode()) engine.progress_inline();
  return r.status;
}

// The part of ns_poll_cq after the argument checks, on either path.
int poll_on(Engine& engine, ns_cq& cq, int num_entries, ns_wc* wc) {
  int n = cq.poll(num_entries, wc);
  if (n == 0 && engine.inline_mode()) {
    engine.progress_inline();
    n = cq.poll(num_entries, wc);
  }
  return n;
}
}  // namespace

extern "C" ns_status_t ns_post_send(ns_qp* qp, ns_send_wr* wr, ns_send_wr** bad_wr) {
  if (is_unchecked(qp)) {  // NS_CTX_UNCHECKED: no registry, no validate_wr
    if (wr == nullptr) return NS_OK;
    ns_qp& q = *strip(qp);
    return guarded("ns_post_send", [&]() -> ns_status_t {
      return post_on<false>(*q.unchecked_owner, q, wr, bad_wr);
    });
  }
  if (qp == nullptr) return invalid("ns_post_send", "qp is NULL");
  if (!live(qp, HandleKind::kQp)) return not_live("ns_post_send", "qp", HandleKind::kQp);
  if (wr == nullptr) return NS_OK;
  return guarded("ns_post_send", [&]() -> ns_status_t {
    return post_on<true>(netsparse::rig::engine_of(qp), *qp, wr, bad_wr);
  });
}

extern "C" int ns_poll_cq(ns_cq* cq, int num_entries, ns_wc* wc) {
  if (is_unchecked(cq)) {  // NS_CTX_UNCHECKED: no registry, no argument checks
    ns_cq& c = *strip(cq);
    return guarded("ns_poll_cq", [&]() -> ns_status_t {
      return poll_on(*c.unchecked_owner, c, num_entries, wc);
    });
  }
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr)) {
    return invalid("ns_poll_cq", "cq is NULL, num_entries < 0 or wc is NULL");
  }
  if (!live(cq, HandleKind::kCq)) return not_live("ns_poll_cq", "cq", HandleKind::kCq);
  return guarded("ns_poll_cq", [&]() -> ns_status_t {
    return poll_on(netsparse::rig::engine_of(cq), *cq, num_entries, wc);
  });
}

extern "C" int ns_cq_wait(ns_cq* cq, int num_entries, ns_wc* wc, int timeout_ms) {
  cq = strip(cq);  // a wait is not on the fast path: checked either way
  if (cq == nullptr || num_entries <= 0 || wc == nullptr) {
    return invalid("ns_cq_wait", "cq is NULL, num_entries <= 0 or wc is NULL");
  }
  if (!live(cq, HandleKind::kCq)) return not_live("ns_cq_wait", "cq", HandleKind::kCq);
  return guarded("ns_cq_wait", [&]() -> ns_status_t {
    Engine& e = netsparse::rig::engine_of(cq);
    const std::uint64_t deadline =
        timeout_ms < 0 ? UINT64_MAX
                       : netsparse::rig::now_ns() + std::uint64_t(timeout_ms) * 1'000'000;
    Backoff backoff(e.inline_mode() ? 64 : 8, e.inline_mode() ? 64 : 16);
    for (;;) {
      int n = cq->poll(num_entries, wc);
      if (n > 0) return n;
      if (e.inline_mode() && e.progress_inline() > 0) {
        backoff.reset();
        n = cq->poll(num_entries, wc);
        if (n > 0) return n;
      }
      if (netsparse::rig::now_ns() >= deadline) return 0;
      if (!backoff.pause()) continue;
      // INLINE: nobody else drives the engine, so only yield-length naps. THREAD: the progress
      // thread notifies the CQ when it writes a completion.
      const auto cap =
          e.inline_mode() ? std::chrono::microseconds(20) : std::chrono::microseconds(1000);
      if (e.inline_mode()) {
        std::this_thread::sleep_for(backoff.sleep_for(cap));
      } else {
        cq->sleep(backoff.sleep_for(cap));
      }
    }
  });
}
