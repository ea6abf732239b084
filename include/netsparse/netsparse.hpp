// NetSparse C++ layer over the C API of netsparse.h: RAII handles, spans, and exceptions
// (netsparse::Error, a std::system_error in the "netsparse" error category whose value is the
// ns_status_t). Header-only; every call maps to one C call. For MPI see netsparse_mpi.h
// (netsparse::open_mpi).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "netsparse/netsparse.h"

namespace netsparse {

// ---- errors ---------------------------------------------------------------------------------
class ErrorCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "netsparse"; }
  std::string message(int status) const override { return ns_status_str(status); }
};
inline const std::error_category& error_category() noexcept {
  static const ErrorCategory category;
  return category;
}
inline std::error_code make_error_code(ns_status_t status) noexcept {
  return {status, error_category()};
}

// Thrown by every wrapper on a negative status: code() is the ns_status_t in error_category(),
// what() names the call and carries ns_last_error().
class Error : public std::system_error {
 public:
  Error(ns_status_t status, const std::string& what)
      : std::system_error(make_error_code(status), what) {}
  ns_status_t status() const noexcept { return code().value(); }
};

namespace detail {
inline void check(ns_status_t status, const char* call) {
  if (status >= 0) return;
  std::string what = call;
  const std::string reason = ns_last_error() != nullptr ? ns_last_error() : "";
  // The C layer already names the call in most reasons; do not say it twice.
  if (reason.rfind(what + ":", 0) == 0) {
    what = reason;
  } else if (!reason.empty()) {
    what += ": " + reason;
  }
  throw Error(status, what);
}
// Owns one C handle; move-only.
template <class T, ns_status_t (*Destroy)(T*)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* h) noexcept : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  T* get() const noexcept { return h_; }
  T* release() noexcept { return std::exchange(h_, nullptr); }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  // Destroys now and reports a failure (the destructor cannot).
  void close(const char* call) {
    if (h_ == nullptr) return;
    const ns_status_t s = Destroy(h_);
    if (s >= 0) h_ = nullptr;
    check(s, call);
  }

 private:
  void reset() noexcept {
    if (h_ != nullptr) (void)Destroy(std::exchange(h_, nullptr));
  }
  T* h_ = nullptr;
};
inline ns_status_t destroy_fabric(ns_fabric* f) {
  ns_fabric_destroy(f);
  return NS_OK;
}
// A work request with its id, opcode and flags set, the opcode's union member still zero.
inline ns_send_wr work_request(std::uint64_t wr_id, int opcode, unsigned send_flags) {
  ns_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.send_flags = send_flags;
  return wr;
}

// The work-request builders over raw handles and pointers: what the typed builders below fill
// (and what tests holding raw handles post).
inline ns_send_wr rig_wr(std::uint64_t wr_id, ns_mr* mr, const std::uint64_t* idx,
                         std::uint64_t count, void* out, std::uint64_t out_bytes, int layout,
                         std::uint64_t window_base, std::uint64_t window_len, unsigned send_flags) {
  ns_send_wr wr = work_request(wr_id, NS_WR_RIG, send_flags);
  wr.wr.rig.mr = mr;
  wr.wr.rig.idx = idx;
  wr.wr.rig.count = count;
  wr.wr.rig.out = out;
  wr.wr.rig.layout = layout;
  wr.wr.rig.window_base = window_base;
  wr.wr.rig.window_len = window_len;
  wr.wr.rig.out_bytes = out_bytes;
  return wr;
}
inline ns_send_wr rdma_read_wr(std::uint64_t wr_id, ns_mr* mr, std::uint64_t idx, void* out,
                               std::uint64_t out_bytes, unsigned send_flags) {
  ns_send_wr wr = work_request(wr_id, NS_WR_RDMA_READ, send_flags);
  wr.wr.rdma_read.mr = mr;
  wr.wr.rdma_read.idx = idx;
  wr.wr.rdma_read.out = out;
  wr.wr.rdma_read.out_bytes = out_bytes;
  return wr;
}
inline ns_send_wr ris_wr(std::uint64_t wr_id, ns_mr* mr, const std::uint64_t* idx,
                         std::uint64_t count, const void* values, std::uint64_t values_bytes,
                         int op, int datatype, unsigned send_flags) {
  ns_send_wr wr = work_request(wr_id, NS_WR_RIS, send_flags);
  wr.wr.ris.mr = mr;
  wr.wr.ris.idx = idx;
  wr.wr.ris.count = count;
  wr.wr.ris.values = values;
  wr.wr.ris.values_bytes = values_bytes;
  wr.wr.ris.op = op;
  wr.wr.ris.datatype = datatype;
  return wr;
}

}  // namespace detail

// ns_stats_json of any context, whole (docs/api.md): with a progress thread, or a peer's traffic,
// the counters (and so the text's length) change between the size query and the copy, so the
// text is sized with headroom and asked for again whenever it did not fit. Throws Error.
inline std::string stats_json(const ns_context* ctx) {
  std::string s;
  for (int need = ns_stats_json(ctx, nullptr, 0);;) {
    detail::check(need < 0 ? need : 0, "ns_stats_json");
    s.assign(static_cast<std::size_t>(need) + 256, '\0');
    const int got = ns_stats_json(ctx, s.data(), s.size());
    detail::check(got < 0 ? got : 0, "ns_stats_json");
    if (static_cast<std::size_t>(got) < s.size()) {
      s.resize(static_cast<std::size_t>(got));
      return s;
    }
    need = got;
  }
}

enum class Layout : int {
  kIndexed = NS_RIG_LAYOUT_INDEXED,
  kPositional = NS_RIG_LAYOUT_POSITIONAL
};

// ns_context_attr with named setters; each setter also sets its comp_mask bit.
class ContextAttr {
 public:
  ContextAttr() = default;
  ContextAttr& transport(ns_transport t) {
    return set(NS_CTX_ATTR_TRANSPORT, a_.transport, int{t});
  }
  ContextAttr& units(int client, int server) {
    a_.num_server_units = server;
    return set(NS_CTX_ATTR_UNITS, a_.num_client_units, client);
  }
  ContextAttr& progress(ns_progress_mode m) {
    return set(NS_CTX_ATTR_PROGRESS, a_.progress_mode, int{m});
  }
  ContextAttr& packet_bytes(std::uint32_t b) { return set(NS_CTX_ATTR_PACKET, a_.packet_bytes, b); }
  ContextAttr& concat_delay(std::chrono::nanoseconds d) {
    return set(NS_CTX_ATTR_DELAY, a_.concat_delay_ns, static_cast<std::uint64_t>(d.count()));
  }
  ContextAttr& pending_entries(std::uint32_t n) {
    return set(NS_CTX_ATTR_PENDING, a_.pending_entries, n);
  }
  ContextAttr& watchdog(std::chrono::milliseconds ms) {
    return set(NS_CTX_ATTR_WATCHDOG, a_.watchdog_ms, static_cast<std::uint32_t>(ms.count()));
  }
  ContextAttr& flags(std::uint32_t f) { return set(NS_CTX_ATTR_FLAGS, a_.flags, f); }
  ContextAttr& idx_chunk(std::uint32_t n) { return set(NS_CTX_ATTR_BATCH, a_.idx_chunk, n); }
  ContextAttr& virtual_queues(bool on) {
    return set(NS_CTX_ATTR_VIRTUAL_QUEUES, a_.virtual_queues, on ? 1 : 0);
  }
  const ns_context_attr* get() const noexcept { return &a_; }

 private:
  template <class F, class V>
  ContextAttr& set(std::uint64_t bit, F& field, V value) {
    field = static_cast<F>(value);
    a_.comp_mask |= bit;
    return *this;
  }
  ns_context_attr a_{};
};

// An in-process fabric of N nodes (threads of this process).
class Fabric {
 public:
  explicit Fabric(int nodes) {
    ns_fabric* f = nullptr;
    detail::check(ns_fabric_create(nodes, &f), "ns_fabric_create");
    h_ = Handle(f);
  }
  void kill(int node, bool reported = false) {
    detail::check(
        reported ? ns_fabric_kill_node_reported(get(), node) : ns_fabric_kill_node(get(), node),
        "ns_fabric_kill_node");
  }
  ns_fabric* get() const noexcept { return h_.get(); }

 private:
  using Handle = detail::Handle<ns_fabric, detail::destroy_fabric>;
  Handle h_;
};

class Context {
 public:
  Context() = default;
  explicit Context(ns_context* adopt) noexcept : h_(adopt) {}
  static Context inproc(Fabric& fabric, int node, const ContextAttr& attr = ContextAttr{}) {
    ns_context* c = nullptr;
    detail::check(ns_open_inproc(fabric.get(), node, attr.get(), &c), "ns_open_inproc");
    return Context(c);
  }
  int rank() const noexcept { return ns_rank(get()); }
  int size() const noexcept { return ns_size(get()); }
  std::string transport_name() const { return ns_transport_name(get()); }
  // NS_PROGRESS_THREAD or NS_PROGRESS_INLINE (what AUTO resolved to).
  int progress_mode() const noexcept { return ns_progress_mode_of(get()); }
  // Largest prop_bytes a PropertyRegion accepts (see ns_max_prop_bytes).
  std::uint32_t max_prop_bytes() const noexcept { return ns_max_prop_bytes(get()); }
  int progress() {
    const int r = ns_progress(get());
    detail::check(r < 0 ? r : 0, "ns_progress");
    return r;
  }
  // The peers of the next quiesce rounds (ns_quiesce_peers); quiesce_every_peer() restores the
  // default.
  void quiesce_peers(std::span<const int> tell, std::span<const int> wait_for) {
    detail::check(ns_quiesce_peers(get(), tell.data(), static_cast<int>(tell.size()),
                                   wait_for.data(), static_cast<int>(wait_for.size())),
                  "ns_quiesce_peers");
  }
  void quiesce_every_peer() {
    detail::check(ns_quiesce_peers(get(), nullptr, -1, nullptr, -1), "ns_quiesce_peers");
  }
  void quiesce_start() { detail::check(ns_quiesce_start(get()), "ns_quiesce_start"); }
  // Whether the announced round is complete here (ns_quiesce_test).
  bool quiesce_test() {
    int done = 0;
    detail::check(ns_quiesce_test(get(), &done), "ns_quiesce_test");
    return done != 0;
  }
  // false on timeout.
  bool quiesce(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
    const ns_status_t s = ns_quiesce(get(), static_cast<int>(timeout.count()));
    if (s == NS_ERR_TIMEOUT) return false;
    detail::check(s, "ns_quiesce");
    return true;
  }
  std::uint64_t stat(ns_stat which) const noexcept { return ns_stat_get(get(), which); }
  double prs_per_packet() const noexcept { return ns_stat_prs_per_packet(get()); }
  void stats_reset() noexcept { ns_stats_reset(get()); }
  std::string stats_json() const { return netsparse::stats_json(get()); }
  void close() { h_.close("ns_close"); }
  ns_context* get() const noexcept { return h_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(h_); }

 private:
  detail::Handle<ns_context, ns_close> h_;
};

// The registered local block of the distributed property array (collective).
class PropertyRegion {
 public:
  PropertyRegion() = default;
  // flags: ns_mr_flags (ns_reg_props_ex).
  PropertyRegion(Context& ctx, void* base, std::uint64_t local_rows, std::uint32_t prop_bytes,
                 std::span<const std::uint64_t> row_offsets, std::uint32_t flags = 0) {
    if (row_offsets.size() != static_cast<std::size_t>(ctx.size()) + 1) {
      throw Error(NS_ERR_INVALID, "PropertyRegion: row_offsets needs size() + 1 entries");
    }
    ns_mr* m = nullptr;
    if (flags == 0) {
      detail::check(ns_reg_props(ctx.get(), base, local_rows, prop_bytes, row_offsets.data(), &m),
                    "ns_reg_props");
    } else {
      detail::check(
          ns_reg_props_ex(ctx.get(), base, local_rows, prop_bytes, row_offsets.data(), flags, &m),
          "ns_reg_props_ex");
    }
    h_ = Handle(m);
  }
  // Rows of `row_elems` elements of T each (e.g. K floats).
  template <class T>
  PropertyRegion(Context& ctx, std::span<T> local, std::size_t row_elems,
                 std::span<const std::uint64_t> row_offsets)
      : PropertyRegion(ctx, local.data(), row_elems == 0 ? 0 : local.size() / row_elems,
                       static_cast<std::uint32_t>(row_elems * sizeof(T)), row_offsets) {}
  std::uint32_t prop_bytes() const noexcept { return ns_mr_prop_bytes(get()); }
  std::uint64_t total_rows() const noexcept { return ns_mr_total_rows(get()); }
  // An NS_MR_RIG_ONLY region's rows move to base, locally (ns_rebind_props).
  void rebind(void* base) { detail::check(ns_rebind_props(get(), base), "ns_rebind_props"); }
  void close() { h_.close("ns_dereg_props"); }
  ns_mr* get() const noexcept { return h_.get(); }

 private:
  using Handle = detail::Handle<ns_mr, ns_dereg_props>;
  Handle h_;
};

class Cq {
 public:
  Cq() = default;
  Cq(Context& ctx, int cqe) {
    ns_cq* c = nullptr;
    detail::check(ns_create_cq(ctx.get(), cqe, &c), "ns_create_cq");
    h_ = Handle(c);
  }
  // Completions written into wc; returns how many (never blocks).
  std::size_t poll(std::span<ns_wc> wc) {
    const int n = ns_poll_cq(get(), static_cast<int>(wc.size()), wc.data());
    detail::check(n < 0 ? n : 0, "ns_poll_cq");
    return static_cast<std::size_t>(n);
  }
  // Waits (backing off) up to timeout for at least one completion; 0 = timed out.
  std::size_t wait(std::span<ns_wc> wc,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
    const int n = ns_cq_wait(get(), static_cast<int>(wc.size()), wc.data(),
                             static_cast<int>(timeout.count()));
    detail::check(n < 0 ? n : 0, "ns_cq_wait");
    return static_cast<std::size_t>(n);
  }
  void close() { h_.close("ns_destroy_cq"); }
  ns_cq* get() const noexcept { return h_.get(); }

 private:
  using Handle = detail::Handle<ns_cq, ns_destroy_cq>;
  Handle h_;
};

// Work-request builders (fill the union member of the opcode; chain with .next). `out_bytes`:
// the bytes the caller owns at `out`, checked by ns_post_send before anything is written; the
// span overloads take it from the span.
inline ns_send_wr rig_wr(std::uint64_t wr_id, const PropertyRegion& mr,
                         std::span<const std::uint64_t> idx, void* out, std::uint64_t out_bytes,
                         Layout layout, std::uint64_t window_base = 0, std::uint64_t window_len = 0,
                         unsigned send_flags = NS_SEND_SIGNALED) {
  return detail::rig_wr(wr_id, mr.get(), idx.data(), idx.size(), out, out_bytes,
                        static_cast<int>(layout), window_base, window_len, send_flags);
}
template <class T>
ns_send_wr rig_wr(std::uint64_t wr_id, const PropertyRegion& mr, std::span<const std::uint64_t> idx,
                  std::span<T> out, Layout layout, std::uint64_t window_base = 0,
                  std::uint64_t window_len = 0, unsigned send_flags = NS_SEND_SIGNALED) {
  return rig_wr(wr_id, mr, idx, static_cast<void*>(out.data()), out.size_bytes(), layout,
                window_base, window_len, send_flags);
}
inline ns_send_wr rdma_read_wr(std::uint64_t wr_id, const PropertyRegion& mr, std::uint64_t idx,
                               void* out, std::uint64_t out_bytes,
                               unsigned send_flags = NS_SEND_SIGNALED) {
  return detail::rdma_read_wr(wr_id, mr.get(), idx, out, out_bytes, send_flags);
}

// Remote Indexed Scatter-Reduce (NS_WR_RIS): row idx[j] (on its owner) becomes op(row, values
// row j); `values_bytes`: the bytes at `values` (at least idx.size() x prop_bytes).
enum class RisOp : int { kSum = NS_RIS_SUM, kMin = NS_RIS_MIN, kMax = NS_RIS_MAX };
enum class RisType : int {
  kFloat32 = NS_RIS_FLOAT32,
  kFloat64 = NS_RIS_FLOAT64,
  kInt32 = NS_RIS_INT32,
  kInt64 = NS_RIS_INT64
};
inline ns_send_wr ris_wr(std::uint64_t wr_id, const PropertyRegion& mr,
                         std::span<const std::uint64_t> idx, const void* values,
                         std::uint64_t values_bytes, RisOp op, RisType type,
                         unsigned send_flags = NS_SEND_SIGNALED) {
  return detail::ris_wr(wr_id, mr.get(), idx.data(), idx.size(), values, values_bytes,
                        static_cast<int>(op), static_cast<int>(type), send_flags);
}
// The datatype follows the span's element type (float, double, int32_t, int64_t).
template <class T>
ns_send_wr ris_wr(std::uint64_t wr_id, const PropertyRegion& mr, std::span<const std::uint64_t> idx,
                  std::span<const T> values, RisOp op = RisOp::kSum,
                  unsigned send_flags = NS_SEND_SIGNALED) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>,
                "ris_wr: values of float, double, int32_t or int64_t");
  const RisType type = std::is_same_v<T, float>          ? RisType::kFloat32
                       : std::is_same_v<T, double>       ? RisType::kFloat64
                       : std::is_same_v<T, std::int32_t> ? RisType::kInt32
                                                         : RisType::kInt64;
  return ris_wr(wr_id, mr, idx, static_cast<const void*>(values.data()), values.size_bytes(), op,
                type, send_flags);
}

// A learned gather plan (ns_plan_create): one RIG gather repeated; start it with plan_wr.
class GatherPlan {
 public:
  GatherPlan() = default;
  // `wr`: an NS_WR_RIG on the registered region (rig_wr); its idx list is copied.
  GatherPlan(Context& ctx, const ns_send_wr& wr) {
    ns_plan* p = nullptr;
    detail::check(ns_plan_create(ctx.get(), &wr, &p), "ns_plan_create");
    h_ = Handle(p);
  }
  void close() { h_.close("ns_plan_destroy"); }
  ns_plan* get() const noexcept { return h_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(h_); }

 private:
  using Handle = detail::Handle<ns_plan, ns_plan_destroy>;
  Handle h_;
};

inline ns_send_wr plan_wr(std::uint64_t wr_id, const GatherPlan& plan,
                          unsigned send_flags = NS_SEND_SIGNALED) {
  ns_send_wr wr = detail::work_request(wr_id, NS_WR_RIG_PLAN, send_flags);
  wr.wr.plan.plan = plan.get();
  return wr;
}

class Qp {
 public:
  Qp() = default;
  Qp(Context& ctx, Cq& cq, int max_send_wr) {
    ns_qp* q = nullptr;
    detail::check(ns_create_qp(ctx.get(), cq.get(), max_send_wr, &q), "ns_create_qp");
    h_ = Handle(q);
  }
  // Posts a chain. Returns NS_OK, or NS_ERR_NO_RESOURCE with *bad_wr set (the queue is full:
  // poll and retry from *bad_wr). Throws on invalid work requests.
  ns_status_t try_post(ns_send_wr& first, ns_send_wr** bad_wr) {
    const ns_status_t s = ns_post_send(get(), &first, bad_wr);
    if (s == NS_ERR_NO_RESOURCE) return s;
    detail::check(s, "ns_post_send");
    return s;
  }
  // Posts a chain or throws (also when the queue is full).
  void post(ns_send_wr& first) {
    ns_send_wr* bad = nullptr;
    detail::check(ns_post_send(get(), &first, &bad), "ns_post_send");
  }
  void close() { h_.close("ns_destroy_qp"); }
  ns_qp* get() const noexcept { return h_.get(); }

 private:
  using Handle = detail::Handle<ns_qp, ns_destroy_qp>;
  Handle h_;
};

}  // namespace netsparse
