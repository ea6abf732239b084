// C++ layer over collectives.h: an RAII communicator, typed spans, exceptions (netsparse::Error,
// as in netsparse.hpp). Header-only; every call maps to one C call. Open one with
// netsparse::open_collectives (collectives_mpi.h).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "netsparse/collectives.h"
#include "netsparse/netsparse.hpp"

namespace netsparse {

// IEEE binary16 storage for NS_DTYPE_FP16 (the library converts; no arithmetic here).
struct Half {
  std::uint16_t bits;
};

template <class T>
constexpr int dtype_of() {
  if constexpr (std::is_same_v<T, std::int8_t>)
    return NS_DTYPE_INT8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return NS_DTYPE_INT16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return NS_DTYPE_INT32;
  else if constexpr (std::is_same_v<T, Half>)
    return NS_DTYPE_FP16;
  else if constexpr (std::is_same_v<T, float>)
    return NS_DTYPE_FP32;
  else if constexpr (std::is_same_v<T, double>)
    return NS_DTYPE_FP64;
  else
    static_assert(sizeof(T) == 0, "no NetSparse datatype for this type");
}

struct AllreduceOptions {
  ns_allreduce_algorithm algorithm = NS_ALLREDUCE_AUTO;
  bool reproducible = false;
};

template <class T>
struct SparseVector {
  std::uint64_t n = 0;
  bool dense = false;                  // values has n entries
  std::vector<std::uint64_t> indices;  // ascending (sparse only)
  std::vector<T> values;
};

// A started non-blocking allreduce or all-gather (Collectives::allreduce_start,
// allgather_start). test() / wait() complete it
// (and throw its failure); destroying a request not completed waits for it, ignoring failure.
class CollRequest {
 public:
  CollRequest() = default;
  explicit CollRequest(ns_coll_request* r) noexcept : r_(r) {}
  CollRequest(CollRequest&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  CollRequest& operator=(CollRequest&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      r_ = o.r_;
      o.r_ = nullptr;
    }
    return *this;
  }
  CollRequest(const CollRequest&) = delete;
  CollRequest& operator=(const CollRequest&) = delete;
  ~CollRequest() { finish_quietly(); }
  bool pending() const noexcept { return r_ != nullptr; }
  // true once complete (then !pending()).
  bool test() {
    int done = 0;
    detail::check(ns_coll_test(&r_, &done), "ns_coll_test");
    return done != 0;
  }
  void wait() { detail::check(ns_coll_wait(&r_), "ns_coll_wait"); }

 private:
  void finish_quietly() noexcept {
    if (r_ != nullptr) (void)ns_coll_wait(&r_);
  }
  ns_coll_request* r_ = nullptr;
};

class Collectives {
 public:
  Collectives() = default;
  explicit Collectives(ns_coll* c) noexcept : h_(c) {}
  ns_coll* get() const noexcept { return h_.get(); }
  int rank() const { return ns_coll_rank(h_.get()); }
  int size() const { return ns_coll_size(h_.get()); }
  // Bytes the transport sent during the last call.
  std::uint64_t bytes_sent() const { return ns_coll_bytes_sent(h_.get()); }
  // Packet bytes sent to other hosts during the last call (exact), and whether allreduce and
  // sparse allreduce run hierarchically.
  std::uint64_t inter_host_bytes() const { return ns_coll_inter_host_bytes(h_.get()); }
  // The same for other racks, and whether the hierarchy goes through one switch per rack.
  std::uint64_t inter_rack_bytes() const { return ns_coll_inter_rack_bytes(h_.get()); }
  bool hierarchical() const { return ns_coll_hierarchical(h_.get()) >= 1; }
  bool through_racks() const { return ns_coll_hierarchical(h_.get()) == 2; }
  void close() { h_.close("ns_coll_close"); }

  template <class T>
  ns_allreduce_algorithm allreduce(std::span<const T> send, std::span<T> recv, ns_op op = NS_OP_SUM,
                                   const AllreduceOptions& o = {}) {
    if (send.size() != recv.size())
      throw Error(NS_ERR_INVALID, "allreduce: send and recv differ in length");
    ns_allreduce_params p{};
    p.algorithm = o.algorithm;
    p.flags = o.reproducible ? unsigned{NS_ALLREDUCE_REPRODUCIBLE} : 0u;
    detail::check(
        ns_allreduce(h_.get(), send.data(), recv.data(), send.size(), dtype_of<T>(), op, &p),
        "ns_allreduce");
    return static_cast<ns_allreduce_algorithm>(ns_coll_last_algorithm(h_.get()));
  }
  template <class T>
  ns_allreduce_algorithm allreduce(std::span<T> inout, ns_op op = NS_OP_SUM,
                                   const AllreduceOptions& o = {}) {
    return allreduce(std::span<const T>(inout), inout, op, o);
  }

  template <class T>
  CollRequest allreduce_start(std::span<const T> send, std::span<T> recv, ns_op op = NS_OP_SUM,
                              const AllreduceOptions& o = {}) {
    if (send.size() != recv.size())
      throw Error(NS_ERR_INVALID, "allreduce_start: send and recv differ in length");
    const ns_allreduce_params p = params(o);
    ns_coll_request* r = nullptr;
    detail::check(ns_allreduce_start(h_.get(), send.data(), recv.data(), send.size(), dtype_of<T>(),
                                     op, &p, &r),
                  "ns_allreduce_start");
    return CollRequest(r);
  }

  // The rest of the dense family (collectives.h): spans of the element type, lengths checked
  // here (a wrong length throws before anything collective, so call it alike on every rank).
  template <class T>
  ns_allreduce_algorithm reduce(std::span<const T> send, std::span<T> recv, int root,
                                ns_op op = NS_OP_SUM, const AllreduceOptions& o = {}) {
    if (rank() == root && send.size() != recv.size())
      throw Error(NS_ERR_INVALID, "reduce: send and recv differ in length at the root");
    const ns_allreduce_params p = params(o);
    detail::check(
        ns_reduce(h_.get(), send.data(), recv.data(), send.size(), dtype_of<T>(), op, root, &p),
        "ns_reduce");
    return static_cast<ns_allreduce_algorithm>(ns_coll_last_algorithm(h_.get()));
  }
  // send: size() * recv.size() elements.
  template <class T>
  ns_allreduce_algorithm reduce_scatter(std::span<const T> send, std::span<T> recv,
                                        ns_op op = NS_OP_SUM, const AllreduceOptions& o = {}) {
    if (send.size() != recv.size() * static_cast<std::size_t>(size()))
      throw Error(NS_ERR_INVALID, "reduce_scatter: send must hold size() * recv.size() elements");
    const ns_allreduce_params p = params(o);
    detail::check(
        ns_reduce_scatter(h_.get(), send.data(), recv.data(), recv.size(), dtype_of<T>(), op, &p),
        "ns_reduce_scatter");
    return static_cast<ns_allreduce_algorithm>(ns_coll_last_algorithm(h_.get()));
  }
  template <class T>
  void broadcast(std::span<T> buffer, int root) {
    detail::check(ns_bcast(h_.get(), buffer.data(), buffer.size(), dtype_of<T>(), root),
                  "ns_bcast");
  }
  // recv: size() * send.size() elements, rank order.
  template <class T>
  void allgather(std::span<const T> send, std::span<T> recv) {
    if (recv.size() != send.size() * static_cast<std::size_t>(size()))
      throw Error(NS_ERR_INVALID, "allgather: recv must hold size() * send.size() elements");
    detail::check(ns_allgather(h_.get(), send.data(), recv.data(), send.size(), dtype_of<T>()),
                  "ns_allgather");
  }
  // Non-blocking allgather (recv: size() * send.size() elements); test() / wait() the request.
  template <class T>
  CollRequest allgather_start(std::span<const T> send, std::span<T> recv) {
    if (recv.size() != send.size() * static_cast<std::size_t>(size()))
      throw Error(NS_ERR_INVALID, "allgather_start: recv must hold size() * send.size() elements");
    ns_coll_request* r = nullptr;
    detail::check(
        ns_allgather_start(h_.get(), send.data(), recv.data(), send.size(), dtype_of<T>(), &r),
        "ns_allgather_start");
    return CollRequest(r);
  }
  void barrier() { detail::check(ns_barrier(h_.get()), "ns_barrier"); }

  template <class T>
  SparseVector<T> sparse_allreduce(std::uint64_t n, std::span<const std::uint64_t> idx,
                                   std::span<const T> values,
                                   ns_sparse_output output = NS_SPARSE_OUTPUT_AUTO) {
    if (idx.size() != values.size())
      throw Error(NS_ERR_INVALID, "sparse_allreduce: idx and values differ in length");
    ns_sparse_params p{};
    p.output = output;
    p.dense_out = nullptr;
    ns_sparse_result* r = nullptr;
    detail::check(ns_sparse_allreduce(h_.get(), n, idx.size(), idx.data(), values.data(),
                                      dtype_of<T>(), NS_OP_SUM, &p, &r),
                  "ns_sparse_allreduce");
    SparseVector<T> v;
    v.n = n;
    v.dense = ns_sparse_result_is_dense(r) != 0;
    const std::uint64_t size = ns_sparse_result_size(r);
    const T* vals = static_cast<const T*>(ns_sparse_result_values(r));
    v.values.assign(vals, vals + size);
    if (!v.dense) {
      const std::uint64_t* ix = ns_sparse_result_indices(r);
      v.indices.assign(ix, ix + size);
    }
    ns_sparse_result_free(r);
    return v;
  }

 private:
  static ns_allreduce_params params(const AllreduceOptions& o) {
    ns_allreduce_params p{};
    p.algorithm = o.algorithm;
    p.flags = o.reproducible ? unsigned{NS_ALLREDUCE_REPRODUCIBLE} : 0u;
    return p;
  }
  detail::Handle<ns_coll, ns_coll_close> h_;
};

}  // namespace netsparse
