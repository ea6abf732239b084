// The C API of collectives.h / collectives_mpi.h over collectives::Communicator. Every entry
// point validates its handle, catches every exception (none crosses the C boundary) and records
// the reason of a failure for ns_last_error() (the RIG API's per-thread record).
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "agreement/mpi.hpp"
#include "collectives/communicator.hpp"
#include "collectives/hierarchical_mpi.hpp"
#include "config/settings.hpp"
#include "netsparse/collectives_mpi.h"
#include "support/api_error.hpp"
#include "transport/transport_factory.hpp"

namespace cl = netsparse::collectives;

struct ns_coll_request;
struct ns_coll {
  // Declared first, destroyed last: the hierarchy's transports work on duplicates of its
  // communicators.
  std::optional<netsparse::dist::Topology> topology;
  std::unique_ptr<cl::Communicator> comm;
  // Allreduce and sparse allreduce by host (hierarchical.hpp), when the layout asks for it.
  std::unique_ptr<cl::Hierarchy> hier;
  // Requests not completed yet: closing the communicator orphans them (their coll is cleared,
  // so a later test cannot reach another communicator allocated at the same address).
  std::unordered_set<ns_coll_request*> requests;
  int last_algorithm = -1;
  std::uint64_t last_bytes = 0;
  std::uint64_t last_inter_host_bytes = 0;
  std::uint64_t last_inter_rack_bytes = 0;
  bool rack_level = false;  // the hierarchy's leaders' step goes through the racks' switches
};
struct ns_sparse_result {
  cl::SparseResult r;
};
struct ns_coll_request {
  ns_coll* coll;
  std::uint32_t id;   // the operation number (Communicator::start_dense), or the hierarchy's
  bool hier = false;  // an allreduce through the hierarchy (Hierarchy::start_allreduce)
};

namespace {

std::mutex g_live_mutex;
std::unordered_set<const void*> g_live;  // live ns_coll and ns_sparse_result handles

bool live(const void* h) {
  std::lock_guard lock(g_live_mutex);
  return h != nullptr && g_live.count(h) != 0;
}
void add_live(const void* h) {
  std::lock_guard lock(g_live_mutex);
  g_live.insert(h);
}
void drop_live(const void* h) {
  std::lock_guard lock(g_live_mutex);
  g_live.erase(h);
}

using netsparse::support::fail;

ns_status_t status_of(cl::Failure f) {
  switch (f) {
    case cl::Failure::kInvalid:
    case cl::Failure::kMismatch:
      return NS_ERR_INVALID;
    case cl::Failure::kTimeout:
      return NS_ERR_TIMEOUT;
    case cl::Failure::kPeerFailed:
    case cl::Failure::kProtocol:
      return NS_ERR_TRANSPORT;
    case cl::Failure::kBroken:
      return NS_ERR_STATE;
  }
  return NS_ERR_TRANSPORT;
}

// The RIG API's exception map (support/api_error.hpp), after the collectives' own failures.
template <class F>
ns_status_t guarded(const char* call, F&& f) noexcept {
  return netsparse::support::guarded(call, [&]() -> ns_status_t {
    try {
      return f();
    } catch (const cl::CollectiveError& e) {
      return fail(call, status_of(e.failure()), e.what());
    }
  });
}

// Runs one operation of coll's communicator and records the bytes it sent
// (ns_coll_bytes_sent), whether the operation returns or throws.
template <class F>
auto recording_bytes(ns_coll* coll, F&& f) {
  struct Record {
    ns_coll* coll;
    ~Record() {
      coll->last_bytes = coll->comm->last_stats().bytes_sent;
      coll->last_inter_host_bytes = coll->comm->last_stats().inter_host_bytes;
      coll->last_inter_rack_bytes = coll->comm->last_stats().inter_rack_bytes;
    }
  } record{coll};
  return f();
}
// The same for an operation of the hierarchy.
template <class F>
auto recording_hier_bytes(ns_coll* coll, F&& f) {
  struct Record {
    ns_coll* coll;
    ~Record() {
      coll->last_bytes = coll->hier->last_stats().bytes_sent;
      coll->last_inter_host_bytes = coll->hier->last_stats().inter_host_bytes;
      coll->last_inter_rack_bytes = coll->hier->last_stats().inter_rack_bytes;
    }
  } record{coll};
  return f();
}

}  // namespace

extern "C" {

ns_status_t ns_coll_open_mpi(MPI_Comm comm, const ns_coll_attr* attr, ns_coll** out) {
  namespace tr = netsparse::transport;
  const char* call = "ns_coll_open_mpi";
  if (out == nullptr) return fail(call, NS_ERR_INVALID, "out is NULL");
  *out = nullptr;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return fail(call, NS_ERR_STATE, "MPI is not initialized (or already finalized)");
  if (comm == MPI_COMM_NULL) return fail(call, NS_ERR_INVALID, "comm is MPI_COMM_NULL");
  cl::Options options;
  int transport = NS_TRANSPORT_AUTO;
  // Refusal reasons are agreed over MPI before the transport is built (its setup is
  // collective).
  netsparse::agreement::Agreement mine;
  const auto refuse = [&mine](const std::string& why) { mine.refuse(NS_ERR_INVALID, why); };
  tr::TransportKind kind = tr::TransportKind::kMpi;
  try {
    if (attr != nullptr) {
      if (attr->comp_mask & ~std::uint64_t{15}) refuse("unknown comp_mask bits");
      if (attr->comp_mask & NS_COLL_ATTR_MAX_IN_FLIGHT) {
        if (attr->max_in_flight == 0 || attr->max_in_flight > 1024)
          refuse("max_in_flight must be in [1, 1024]");
        options.max_in_flight = static_cast<int>(attr->max_in_flight);
      }
      if (attr->comp_mask & NS_COLL_ATTR_TRANSPORT) transport = attr->transport;
      if (attr->comp_mask & NS_COLL_ATTR_TIMEOUT) {
        if (attr->timeout_ms == 0 || attr->timeout_ms > 0x7fffffffu)
          refuse("timeout_ms must be in [1, 2^31)");
        options.timeout_ms = static_cast<int>(attr->timeout_ms);
      }
      if (attr->comp_mask & NS_COLL_ATTR_PACKET) options.packet_bytes = attr->packet_bytes;
    }
    if (transport == NS_TRANSPORT_INPROC) {
      refuse("transport must be AUTO, MPI or VERBS");
    } else {
      kind = tr::transport_for_attribute(transport);
    }
    if (!mine.refused() && kind == tr::TransportKind::kInproc) {
      int size = 1;
      MPI_Comm_size(comm, &size);
      if (size > 1) refuse("the inproc transport needs a communicator of one rank");
    }
    if (!mine.refused() && kind == tr::TransportKind::kVerbs && !tr::verbs_device_available()) {
      mine.refuse(NS_ERR_UNSUPPORTED,
                  "verbs asked for, but no RDMA device with an ACTIVE port (or built without "
                  "verbs)");
    }
  } catch (const std::exception& e) {
    refuse(e.what());
  }
  // NETSPARSE_COLL_HIERARCHY decides which collectives follow: refused unless every rank has
  // the same.
  try {
    const std::string mode = netsparse::config::choice(netsparse::config::Env::kCollHierarchy);
    int code[2] = {mode == "flat" ? 1 : mode == "hierarchical" ? 2 : mode == "hosts" ? 3 : 0, 0};
    code[1] = -code[0];
    int extremes[2] = {0, 0};
    MPI_Allreduce(code, extremes, 2, MPI_INT, MPI_MAX, comm);
    if (extremes[0] != -extremes[1]) refuse("the ranks disagree on NETSPARSE_COLL_HIERARCHY");
  } catch (const std::exception& e) {
    refuse(e.what());
  }
  netsparse::agreement::Verdict verdict;
  try {
    verdict = netsparse::agreement::settle_over_mpi(mine, comm);
  } catch (const std::exception& e) {
    return fail(call, NS_ERR_TRANSPORT, e.what());
  }
  if (!verdict.ok()) return fail(call, verdict.status, verdict.reason);
  return guarded(call, [&]() -> ns_status_t {
    tr::TransportOptions topt;
    auto t = tr::make_transport(kind, comm, topt);
    auto c = std::make_unique<ns_coll>();
    c->comm = std::make_unique<cl::Communicator>(std::move(t), options);
    // Hosts (agreed on every rank, or refused on every rank): for the inter-host count and the
    // choice of the hierarchy.
    c->topology.emplace(netsparse::dist::Topology::build(comm));
    c->comm->set_hosts(cl::hosts_of_ranks(*c->topology));
    c->comm->set_racks(cl::racks_of_ranks(*c->topology));
    if (cl::hierarchy_wanted(*c->topology)) {
      c->hier = cl::make_hierarchy(*c->topology, kind, options);
      c->rack_level = cl::rack_level_wanted(*c->topology);
    }
    *out = c.release();
    add_live(*out);
    return NS_OK;
  });
}

ns_status_t ns_coll_close(ns_coll* coll) {
  if (!live(coll)) return fail("ns_coll_close", NS_ERR_INVALID, "not a live ns_coll");
  drop_live(coll);
  for (ns_coll_request* r : coll->requests) r->coll = nullptr;
  return guarded("ns_coll_close", [&]() -> ns_status_t {
    delete coll;  // the transport's teardown (collective with the live peers)
    return NS_OK;
  });
}

int ns_coll_rank(const ns_coll* coll) {
  return live(coll) ? coll->comm->rank() : -1;
}
int ns_coll_size(const ns_coll* coll) {
  return live(coll) ? coll->comm->size() : -1;
}
const char* ns_coll_transport_name(const ns_coll* coll) {
  return live(coll) ? netsparse::transport::to_string(coll->comm->transport().kind()) : "";
}
uint64_t ns_coll_bytes_sent(const ns_coll* coll) {
  return live(coll) ? coll->last_bytes : 0;
}
uint64_t ns_coll_inter_host_bytes(const ns_coll* coll) {
  return live(coll) ? coll->last_inter_host_bytes : 0;
}
uint64_t ns_coll_inter_rack_bytes(const ns_coll* coll) {
  return live(coll) ? coll->last_inter_rack_bytes : 0;
}
int ns_coll_hierarchical(const ns_coll* coll) {
  if (!live(coll)) return -1;
  return !coll->hier ? 0 : coll->rack_level ? 2 : 1;
}
int ns_coll_last_algorithm(const ns_coll* coll) {
  return live(coll) ? coll->last_algorithm : -1;
}

const char* ns_allreduce_algorithm_str(int algorithm) {
  if (algorithm < 0 || algorithm >= cl::kAlgorithmCount) return "unknown algorithm";
  return cl::to_string(static_cast<cl::Algorithm>(algorithm));
}

}  // extern "C"

namespace {
// The C API's dense call: arguments and params into AllreduceArgs, then one Communicator call.
template <class F>
ns_status_t dense_call(const char* call, ns_coll* coll, cl::AllreduceArgs a,
                       const ns_allreduce_params* params, F&& run, bool by_host = false) {
  if (!live(coll)) return fail(call, NS_ERR_INVALID, "not a live ns_coll");
  return guarded(call, [&]() -> ns_status_t {
    cl::UserOp user;
    if (params != nullptr) {
      a.algorithm = params->algorithm;
      a.reproducible = (params->flags & NS_ALLREDUCE_REPRODUCIBLE) != 0;
      user.fn = params->user_fn;
      user.user_data = params->user_data;
      user.commutative = params->user_commutative != 0;
      user.id = params->user_op_id;
      a.user = &user;
    }
    coll->last_algorithm = by_host ? recording_hier_bytes(coll, [&] { return run(*coll->comm, a); })
                                   : recording_bytes(coll, [&] { return run(*coll->comm, a); });
    return NS_OK;
  });
}
}  // namespace

extern "C" {

ns_status_t ns_allreduce(ns_coll* coll, const void* send, void* recv, uint64_t count, int dtype,
                         int op, const ns_allreduce_params* params) {
  cl::AllreduceArgs a{.send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
  if (live(coll) && coll->hier) {
    cl::Hierarchy& h = *coll->hier;
    return dense_call(
        "ns_allreduce", coll, a, params,
        [&h](cl::Communicator&, const auto& x) { return static_cast<int>(h.allreduce(x)); }, true);
  }
  return dense_call("ns_allreduce", coll, a, params, [](cl::Communicator& c, const auto& x) {
    return static_cast<int>(c.allreduce(x));
  });
}

ns_status_t ns_reduce(ns_coll* coll, const void* send, void* recv, uint64_t count, int dtype,
                      int op, int root, const ns_allreduce_params* params) {
  cl::AllreduceArgs a{
      .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op, .root = root};
  return dense_call("ns_reduce", coll, a, params, [](cl::Communicator& c, const auto& x) {
    return static_cast<int>(c.reduce(x));
  });
}

ns_status_t ns_reduce_scatter(ns_coll* coll, const void* send, void* recv, uint64_t recvcount,
                              int dtype, int op, const ns_allreduce_params* params) {
  cl::AllreduceArgs a{.send = send, .recv = recv, .count = recvcount, .dtype = dtype, .op = op};
  return dense_call("ns_reduce_scatter", coll, a, params, [](cl::Communicator& c, const auto& x) {
    return static_cast<int>(c.reduce_scatter(x));
  });
}

ns_status_t ns_bcast(ns_coll* coll, void* buffer, uint64_t count, int dtype, int root) {
  cl::AllreduceArgs a{.send = buffer, .recv = buffer, .count = count, .dtype = dtype, .root = root};
  return dense_call("ns_bcast", coll, a, nullptr, [](cl::Communicator& c, const auto& x) {
    c.broadcast(x.recv, x.count, x.dtype, x.root);
    return -1;
  });
}

ns_status_t ns_allgather(ns_coll* coll, const void* send, void* recv, uint64_t sendcount,
                         int dtype) {
  cl::AllreduceArgs a{.send = send, .recv = recv, .count = sendcount, .dtype = dtype};
  return dense_call("ns_allgather", coll, a, nullptr, [](cl::Communicator& c, const auto& x) {
    c.allgather(x.send, x.recv, x.count, x.dtype);
    return -1;
  });
}

ns_status_t ns_barrier(ns_coll* coll) {
  return dense_call("ns_barrier", coll, cl::AllreduceArgs{}, nullptr,
                    [](cl::Communicator& c, const auto&) {
                      c.barrier();
                      return -1;
                    });
}

}  // extern "C"

namespace {
// A started non-blocking operation of the family (start: the Communicator's start_*) as a
// request handle the caller tests or waits for.
template <class Start>
ns_status_t start_request(const char* call, ns_coll* coll, const cl::AllreduceArgs& a,
                          const ns_allreduce_params* params, ns_coll_request** req, Start start,
                          bool by_host = false) {
  if (req == nullptr) return fail(call, NS_ERR_INVALID, "req is NULL");
  *req = nullptr;
  return dense_call(call, coll, a, params, [&](cl::Communicator& c, const auto& x) {
    auto r = std::make_unique<ns_coll_request>();
    r->coll = coll;
    r->hier = by_host;
    r->id = by_host ? coll->hier->start_allreduce(x) : start(c, x);
    coll->requests.insert(r.get());
    *req = r.release();
    add_live(*req);
    return -1;  // chosen per operation; ns_coll_last_algorithm is the blocking calls'
  });
}
}  // namespace

extern "C" {

ns_status_t ns_allreduce_start(ns_coll* coll, const void* send, void* recv, uint64_t count,
                               int dtype, int op, const ns_allreduce_params* params,
                               ns_coll_request** req) {
  cl::AllreduceArgs a{.send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
  // Through the hosts when the layout asks for it, as ns_allreduce (Hierarchy::start_allreduce).
  return start_request(
      "ns_allreduce_start", coll, a, params, req,
      [](cl::Communicator& c, const auto& x) { return c.start_allreduce(x); },
      live(coll) && coll->hier != nullptr);
}

ns_status_t ns_allgather_start(ns_coll* coll, const void* send, void* recv, uint64_t sendcount,
                               int dtype, ns_coll_request** req) {
  cl::AllreduceArgs a{.send = send, .recv = recv, .count = sendcount, .dtype = dtype};
  return start_request("ns_allgather_start", coll, a, nullptr, req,
                       [](cl::Communicator& c, const auto& x) {
                         return c.start_allgather(x.send, x.recv, x.count, x.dtype);
                       });
}

namespace {
// Test (wait = false) or wait for *req; frees it once the operation completed or failed.
ns_status_t complete_request(const char* call, ns_coll_request** req, int* done, bool wait) {
  if (req == nullptr || !live(*req)) return fail(call, NS_ERR_INVALID, "not a live request");
  ns_coll_request* r = *req;
  bool finished = true;
  const auto release = [&] {
    if (r->coll != nullptr) r->coll->requests.erase(r);
    drop_live(r);
    delete r;
    *req = nullptr;
  };
  if (r->coll == nullptr || !live(r->coll)) {
    release();
    if (done != nullptr) *done = 1;
    return fail(call, NS_ERR_STATE, "the request's communicator was closed");
  }
  const ns_status_t s = guarded(call, [&]() -> ns_status_t {
    try {
      if (r->hier && wait)
        r->coll->hier->wait(r->id);
      else if (r->hier)
        finished = r->coll->hier->test(r->id);
      else if (wait)
        r->coll->comm->wait(r->id);
      else
        finished = r->coll->comm->test(r->id);
    } catch (...) {
      finished = true;
      throw;
    }
    return NS_OK;
  });
  if (finished) release();
  if (done != nullptr) *done = finished ? 1 : 0;
  return s;
}
}  // namespace

ns_status_t ns_coll_test(ns_coll_request** req, int* done) {
  if (done == nullptr) return fail("ns_coll_test", NS_ERR_INVALID, "done is NULL");
  *done = 0;
  return complete_request("ns_coll_test", req, done, false);
}

ns_status_t ns_coll_wait(ns_coll_request** req) {
  return complete_request("ns_coll_wait", req, nullptr, true);
}

ns_status_t ns_sparse_allreduce(ns_coll* coll, uint64_t n, uint64_t nnz, const uint64_t* idx,
                                const void* values, int dtype, int op,
                                const ns_sparse_params* params, ns_sparse_result** out) {
  if (!live(coll)) return fail("ns_sparse_allreduce", NS_ERR_INVALID, "not a live ns_coll");
  if (out == nullptr) return fail("ns_sparse_allreduce", NS_ERR_INVALID, "out is NULL");
  *out = nullptr;
  return guarded("ns_sparse_allreduce", [&]() -> ns_status_t {
    cl::SparseArgs a{.n = n, .nnz = nnz, .idx = idx, .values = values, .dtype = dtype, .op = op};
    if (params != nullptr) {
      if (params->output < 0 || params->output > 2)
        throw std::invalid_argument("params->output must be an ns_sparse_output");
      a.output = static_cast<cl::SparseOutput>(params->output);
      a.dense_out = params->dense_out;
    }
    auto r = std::make_unique<ns_sparse_result>();
    r->r = coll->hier ? recording_hier_bytes(coll, [&] { return coll->hier->sparse_allreduce(a); })
                      : recording_bytes(coll, [&] { return coll->comm->sparse_allreduce(a); });
    *out = r.release();
    add_live(*out);
    return NS_OK;
  });
}

int ns_sparse_result_is_dense(const ns_sparse_result* r) {
  return live(r) && r->r.dense ? 1 : 0;
}
uint64_t ns_sparse_result_size(const ns_sparse_result* r) {
  return live(r) ? r->r.size() : 0;
}
const uint64_t* ns_sparse_result_indices(const ns_sparse_result* r) {
  return live(r) && !r->r.dense ? r->r.indices.data() : nullptr;
}
const void* ns_sparse_result_values(const ns_sparse_result* r) {
  return live(r) ? r->r.data() : nullptr;
}
void ns_sparse_result_free(ns_sparse_result* r) {
  if (!live(r)) return;
  drop_live(r);
  delete r;
}

}  // extern "C"
