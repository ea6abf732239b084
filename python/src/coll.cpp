// netsparse.collectives' compiled half: the collectives communicator (collectives.h) on numpy
// arrays. Every call checks its arrays (dtype, contiguity, writability, lengths) and first agrees
// across the ranks on what each found wrong (collective.hpp), so a rank whose arrays are refused
// raises ValueError on every rank instead of leaving the others in the collective; arguments
// that pass here are agreed again by the library (counts, datatypes, operators, roots), whose
// refusals raise netsparse.Error (status NS_ERR_INVALID) on every rank.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "collective.hpp"
#include "netsparse/collectives_mpi.h"

namespace py = pybind11;

namespace netsparse::python {
namespace {

// A collective C call made without the GIL (other Python threads run while it waits on the
// peers), its status turned into the module's exception.
template <class Call>
void call_without_gil(const char* what, Call&& call) {
  ns_status_t st;
  {
    py::gil_scoped_release nogil;
    st = call();
  }
  detail::check(st, what);
}

// The NS_DTYPE_* of a numpy dtype; -1 for any other.
int dtype_code(const py::dtype& d) {
  // By kind and size (native byte order only): numpy has no C++ type for float16.
  if (!d.attr("isnative").cast<bool>()) return -1;
  const char kind = d.kind();
  const py::ssize_t size = d.itemsize();
  if (kind == 'i')
    return size == 1 ? NS_DTYPE_INT8 : size == 2 ? NS_DTYPE_INT16 : size == 4 ? NS_DTYPE_INT32 : -1;
  if (kind == 'f')
    return size == 2 ? NS_DTYPE_FP16 : size == 4 ? NS_DTYPE_FP32 : size == 8 ? NS_DTYPE_FP64 : -1;
  return -1;
}

int op_code(const std::string& op) {
  if (op == "sum") return NS_OP_SUM;
  if (op == "prod") return NS_OP_PROD;
  if (op == "min") return NS_OP_MIN;
  if (op == "max") return NS_OP_MAX;
  return -1;
}

// What is wrong with `obj` as an operand (numpy array of a supported dtype, C-contiguous,
// aligned, writable if `writable`), "" if nothing.
std::string check_operand(py::handle obj, const char* name, bool writable) {
  if (!py::isinstance<py::array>(obj))
    return std::string(name) + " must be a numpy.ndarray, got " +
           std::string(py::str(py::type::of(obj).attr("__name__")));
  const auto a = py::reinterpret_borrow<py::array>(obj);
  if (dtype_code(a.dtype()) < 0)
    return std::string(name) + " has dtype " + dtype_text(a.dtype()) +
           "; the collectives take int8, int16, int32, float16, float32 or float64";
  if ((a.flags() & py::array::c_style) == 0)
    return std::string(name) + " must be C-contiguous (numpy.ascontiguousarray makes a copy)";
  if (reinterpret_cast<std::uintptr_t>(a.data()) % static_cast<std::uintptr_t>(a.itemsize()) != 0)
    return std::string(name) + " is not aligned to its element size";
  if (writable && !a.writeable()) return std::string(name) + " is read-only";
  return {};
}

py::array as_array(py::handle obj) {
  return py::reinterpret_borrow<py::array>(obj);
}

ns_allreduce_params params_of(bool reproducible) {
  ns_allreduce_params p{};
  p.algorithm = NS_ALLREDUCE_AUTO;
  p.flags = reproducible ? unsigned{NS_ALLREDUCE_REPRODUCIBLE} : 0u;
  return p;
}

// NETSPARSE_COLL_HIERARCHY set to `mode` while the communicator opens (the C API reads the
// choice there, from the environment alone), the previous value back afterwards.
class HierarchyOverride {
 public:
  explicit HierarchyOverride(const std::string& mode) {
    if (mode.empty()) return;
    active_ = true;
    if (const char* old = std::getenv(kVar)) saved_ = old;
    setenv(kVar, mode.c_str(), 1);
  }
  ~HierarchyOverride() {
    if (!active_) return;
    if (saved_)
      setenv(kVar, saved_->c_str(), 1);
    else
      unsetenv(kVar);
  }
  HierarchyOverride(const HierarchyOverride&) = delete;
  HierarchyOverride& operator=(const HierarchyOverride&) = delete;

 private:
  static constexpr const char* kVar = "NETSPARSE_COLL_HIERARCHY";
  bool active_ = false;
  std::optional<std::string> saved_;
};

class PyRequest;

class PyCollectives {
 public:
  PyCollectives(py::handle comm, int timeout_ms, int packet_bytes, int max_in_flight,
                const std::string& hierarchy) {
    const MPI_Comm c = comm_from(comm);
    std::string problem;
    if (!hierarchy.empty() && hierarchy != "auto" && hierarchy != "flat" &&
        hierarchy != "hierarchical" && hierarchy != "hosts")
      problem =
          "hierarchy must be 'auto', 'flat', 'hierarchical' or 'hosts' (None: the environment's "
          "NETSPARSE_COLL_HIERARCHY), got '" +
          hierarchy + "'";
    if (timeout_ms < 0) problem = "timeout_ms must be >= 0 (0: the default)";
    if (packet_bytes < 0) problem = "packet_bytes must be >= 0 (0: the transport's)";
    if (max_in_flight < 0 || max_in_flight > 1024)
      problem = "max_in_flight must be in [0, 1024] (0: the default)";
    agree_on_arguments(c, problem);
    if (MPI_Comm_dup(c, &agree_) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_dup failed");
    MPI_Comm_size(agree_, &size_);
    MPI_Comm_rank(agree_, &rank_);
    ns_coll_attr attr{};
    if (timeout_ms > 0) {
      attr.comp_mask |= NS_COLL_ATTR_TIMEOUT;
      attr.timeout_ms = static_cast<std::uint32_t>(timeout_ms);
    }
    if (packet_bytes > 0) {
      attr.comp_mask |= NS_COLL_ATTR_PACKET;
      attr.packet_bytes = static_cast<std::uint32_t>(packet_bytes);
    }
    if (max_in_flight > 0) {
      attr.comp_mask |= NS_COLL_ATTR_MAX_IN_FLIGHT;
      attr.max_in_flight = static_cast<std::uint32_t>(max_in_flight);
    }
    const HierarchyOverride mode(hierarchy);
    py::gil_scoped_release nogil;
    coll_ = open_collectives(c, &attr);
  }
  ~PyCollectives() {
    if (teardown_abandoned()) {
      leak(std::move(coll_));
      return;
    }
    free_agreement_comm();
  }
  PyCollectives(const PyCollectives&) = delete;
  PyCollectives& operator=(const PyCollectives&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool hierarchical() const { return ns_coll_hierarchical(handle()) >= 1; }
  bool through_racks() const { return ns_coll_hierarchical(handle()) == 2; }
  std::uint64_t inter_host_bytes() const { return ns_coll_inter_host_bytes(handle()); }
  std::uint64_t inter_rack_bytes() const { return ns_coll_inter_rack_bytes(handle()); }
  void close() {
    {
      py::gil_scoped_release nogil;
      coll_.close();
    }
    free_agreement_comm();
  }
  ns_coll* handle() const {
    if (coll_.get() == nullptr) throw py::value_error("the communicator is closed");
    return coll_.get();
  }

  // The same element count on send and recv (allreduce, reduce at the root): recv may be send.
  py::object allreduce(py::handle send, py::object recv, const std::string& op, bool reproducible,
                       const std::string& given) {
    ns_coll* h = handle();
    const py::object out = recv.is_none() ? py::reinterpret_borrow<py::object>(send) : recv;
    std::string problem = first_problem({given, check_operand(send, "send", false),
                                         check_operand(out, "recv", true), check_op(op)});
    if (problem.empty()) problem = same_shape(send, out);
    agree_on_arguments(agree_, problem);
    py::array s = as_array(send), r = as_array(out);
    void* rp = r.mutable_data();
    const int dt = dtype_code(s.dtype());
    const ns_allreduce_params p = params_of(reproducible);
    call_without_gil("ns_allreduce", [&] {
      return ns_allreduce(h, s.data(), rp, static_cast<std::uint64_t>(s.size()), dt, op_code(op),
                          &p);
    });
    return out;
  }

  py::object reduce(py::handle send, py::object recv, int root, const std::string& op,
                    bool reproducible, const std::string& given) {
    ns_coll* h = handle();
    const bool at_root = rank_ == root;
    const py::object out = recv.is_none() ? py::reinterpret_borrow<py::object>(send) : recv;
    std::string problem = first_problem({given, check_operand(send, "send", false), check_op(op)});
    if (problem.empty() && at_root) problem = check_operand(out, "recv", true);
    if (problem.empty() && at_root) problem = same_shape(send, out);
    agree_on_arguments(agree_, problem);
    const py::array s = as_array(send);
    py::array ra = at_root ? as_array(out) : py::array();
    void* r = at_root ? ra.mutable_data() : nullptr;
    const int dt = dtype_code(s.dtype());
    const ns_allreduce_params p = params_of(reproducible);
    call_without_gil("ns_reduce", [&] {
      return ns_reduce(h, s.data(), r, static_cast<std::uint64_t>(s.size()), dt, op_code(op), root,
                       &p);
    });
    return at_root ? out : py::none();
  }

  py::object bcast(py::handle buffer, int root, const std::string& given) {
    ns_coll* h = handle();
    agree_on_arguments(agree_, first_problem({given, check_operand(buffer, "buffer", true)}));
    py::array b = as_array(buffer);
    void* bp = b.mutable_data();
    const int dt = dtype_code(b.dtype());
    call_without_gil("ns_bcast", [&] {
      return ns_bcast(h, bp, static_cast<std::uint64_t>(b.size()), dt, root);
    });
    return py::reinterpret_borrow<py::object>(buffer);
  }

  // recv: size() * send.size elements (a new array of shape (size(),) + send.shape if None).
  py::object allgather(py::handle send, py::object recv, const std::string& given) {
    ns_coll* h = handle();
    const GatherOperands g = allgather_operands(send, recv, given);
    call_without_gil("ns_allgather", [&] {
      return ns_allgather(h, g.send.data(), g.recv_data, g.count, g.datatype);
    });
    return recv;
  }

  // The all-gather's operands (blocking and started alike), checked and agreed on every rank;
  // recv is made when None: a new array of shape (size(),) + send.shape.
  struct GatherOperands {
    py::array send;
    void* recv_data = nullptr;
    std::uint64_t count = 0;
    int datatype = 0;
  };
  GatherOperands allgather_operands(py::handle send, py::object& recv, const std::string& given) {
    std::string problem = first_problem({given, check_operand(send, "send", false)});
    if (problem.empty() && recv.is_none()) {
      const py::array s = as_array(send);
      std::vector<py::ssize_t> shape{size_};
      for (py::ssize_t d = 0; d < s.ndim(); ++d) shape.push_back(s.shape(d));
      recv = py::array(s.dtype(), shape);
    }
    if (problem.empty()) problem = check_operand(recv, "recv", true);
    if (problem.empty()) problem = whole_of(send, recv, "recv");
    agree_on_arguments(agree_, problem);
    GatherOperands g;
    g.send = as_array(send);
    py::array r = as_array(recv);
    g.recv_data = r.mutable_data();
    g.count = static_cast<std::uint64_t>(g.send.size());
    g.datatype = dtype_code(g.send.dtype());
    return g;
  }

  // send: size() * n elements; recv: n (a new 1-D array, or send's rows / size() if 2-D+).
  py::object reduce_scatter(py::handle send, py::object recv, const std::string& op,
                            bool reproducible, const std::string& given) {
    ns_coll* h = handle();
    std::string problem = first_problem({given, check_operand(send, "send", false), check_op(op)});
    if (problem.empty() && recv.is_none()) {
      const py::array s = as_array(send);
      if (s.ndim() == 0 || s.shape(0) % size_ != 0) {
        problem = "send's first dimension (" + std::to_string(s.ndim() ? s.shape(0) : 0) +
                  ") must be a multiple of the communicator's size (" + std::to_string(size_) + ")";
      } else {
        std::vector<py::ssize_t> shape{s.shape(0) / size_};
        for (py::ssize_t d = 1; d < s.ndim(); ++d) shape.push_back(s.shape(d));
        recv = py::array(s.dtype(), shape);
      }
    }
    if (problem.empty()) problem = check_operand(recv, "recv", true);
    if (problem.empty()) problem = whole_of(recv, send, "send");
    agree_on_arguments(agree_, problem);
    py::array s = as_array(send), r = as_array(recv);
    void* rp = r.mutable_data();
    const int dt = dtype_code(s.dtype());
    const ns_allreduce_params p = params_of(reproducible);
    call_without_gil("ns_reduce_scatter", [&] {
      return ns_reduce_scatter(h, s.data(), rp, static_cast<std::uint64_t>(r.size()), dt,
                               op_code(op), &p);
    });
    return recv;
  }

  // Sums every rank's (indices, values) into a vector of length n (hierarchically on a
  // hierarchical communicator): (ascending indices, values) when the result is sparse, (None,
  // n values) when it is dense -- dense_out itself when given.
  // (The arrays come first: netsparse.collectives passes them positionally, n by keyword.)
  py::tuple sparse_allreduce(py::handle indices, py::handle values, py::object dense_out,
                             std::int64_t n, const std::string& output, const std::string& given) {
    ns_coll* h = handle();
    const int out_code = output == "auto"     ? NS_SPARSE_OUTPUT_AUTO
                         : output == "sparse" ? NS_SPARSE_OUTPUT_SPARSE
                         : output == "dense"  ? NS_SPARSE_OUTPUT_DENSE
                                              : -1;
    std::string problem = first_problem(
        {given, n < 0 ? "n must be >= 0, got " + std::to_string(n) : std::string(),
         check_indices(indices), check_operand(values, "values", false),
         out_code < 0 ? "output must be 'auto', 'sparse' or 'dense', got '" + output + "'"
                      : std::string()});
    if (problem.empty() && as_array(indices).size() != as_array(values).size())
      problem = "indices and values differ in size (" + std::to_string(as_array(indices).size()) +
                ", " + std::to_string(as_array(values).size()) + ")";
    if (problem.empty() && !dense_out.is_none()) {
      problem = check_operand(dense_out, "dense_out", true);
      if (problem.empty() && !same_dtype(as_array(dense_out).dtype(), as_array(values).dtype()))
        problem = "dense_out and values differ in dtype (" +
                  dtype_text(as_array(dense_out).dtype()) + ", " +
                  dtype_text(as_array(values).dtype()) + ")";
      if (problem.empty() && as_array(dense_out).size() != n)
        problem = "dense_out must hold n = " + std::to_string(n) + " elements, it has " +
                  std::to_string(as_array(dense_out).size());
    }
    agree_on_arguments(agree_, problem);
    const py::array ix = as_array(indices), v = as_array(values);
    py::array d = dense_out.is_none() ? py::array() : as_array(dense_out);
    ns_sparse_params params{out_code, dense_out.is_none() ? nullptr : d.mutable_data()};
    ns_sparse_result* res = nullptr;
    const int dt = dtype_code(v.dtype());  // with the GIL (a Python attribute)
    const auto nnz = static_cast<std::uint64_t>(ix.size());
    const auto* ip = static_cast<const std::uint64_t*>(ix.data());
    const void* vp = v.data();
    call_without_gil("ns_sparse_allreduce", [&] {
      return ns_sparse_allreduce(h, static_cast<std::uint64_t>(n), nnz, ip, vp, dt, NS_OP_SUM,
                                 &params, &res);
    });
    const std::unique_ptr<ns_sparse_result, void (*)(ns_sparse_result*)> owned(
        res, ns_sparse_result_free);
    const auto size = static_cast<py::ssize_t>(ns_sparse_result_size(res));
    const void* got = ns_sparse_result_values(res);
    if (ns_sparse_result_is_dense(res) && !dense_out.is_none())
      return py::make_tuple(py::none(), dense_out);
    py::array vals(v.dtype(), std::vector<py::ssize_t>{size});
    if (size > 0) std::memcpy(vals.mutable_data(), got, std::size_t(size) * v.itemsize());
    if (ns_sparse_result_is_dense(res)) return py::make_tuple(py::none(), vals);
    py::array_t<std::uint64_t> idx(size);
    if (size > 0)
      std::memcpy(idx.mutable_data(), ns_sparse_result_indices(res),
                  std::size_t(size) * sizeof(std::uint64_t));
    return py::make_tuple(idx, vals);
  }

  void barrier() {
    ns_coll* h = handle();
    call_without_gil("ns_barrier", [&] { return ns_barrier(h); });
  }

  std::unique_ptr<PyRequest> allreduce_start(py::handle send, py::object recv,
                                             const std::string& op, bool reproducible,
                                             const std::string& given);
  std::unique_ptr<PyRequest> allgather_start(py::handle send, py::object recv,
                                             const std::string& given);

 private:
  // Indices: a 1-D C-contiguous numpy array of uint64 or int64 (a negative one is out of range).
  static std::string check_indices(py::handle obj) {
    if (!py::isinstance<py::array>(obj))
      return "indices must be a numpy.ndarray, got " +
             std::string(py::str(py::type::of(obj).attr("__name__")));
    const auto a = py::reinterpret_borrow<py::array>(obj);
    if (a.dtype().kind() != 'u' && a.dtype().kind() != 'i')
      return "indices have dtype " + dtype_text(a.dtype()) + "; they must be uint64 or int64";
    if (a.itemsize() != 8 || !a.dtype().attr("isnative").cast<bool>())
      return "indices have dtype " + dtype_text(a.dtype()) + "; they must be uint64 or int64";
    if ((a.flags() & py::array::c_style) == 0)
      return "indices must be C-contiguous (numpy.ascontiguousarray makes a copy)";
    if (reinterpret_cast<std::uintptr_t>(a.data()) % 8 != 0) return "indices are not aligned";
    return {};
  }
  static std::string check_op(const std::string& op) {
    return op_code(op) < 0 ? "op must be 'sum', 'prod', 'min' or 'max', got '" + op + "'"
                           : std::string();
  }
  static std::string same_shape(py::handle a, py::handle b) {
    const py::array x = as_array(a), y = as_array(b);
    if (!same_dtype(x.dtype(), y.dtype()))
      return "send and recv differ in dtype (" + dtype_text(x.dtype()) + ", " +
             dtype_text(y.dtype()) + ")";
    if (x.size() != y.size())
      return "send and recv differ in size (" + std::to_string(x.size()) + ", " +
             std::to_string(y.size()) + ")";
    return {};
  }
  // `whole` must hold size() times `part`'s elements, of its dtype.
  std::string whole_of(py::handle part, py::handle whole, const char* name) const {
    const py::array p = as_array(part), w = as_array(whole);
    if (!same_dtype(p.dtype(), w.dtype()))
      return "send and recv differ in dtype (" + dtype_text(p.dtype()) + ", " +
             dtype_text(w.dtype()) + ")";
    if (w.size() != p.size() * size_)
      return std::string(name) + " must hold size() * " + std::to_string(p.size()) + " = " +
             std::to_string(p.size() * size_) + " elements, it has " + std::to_string(w.size());
    return {};
  }

  // The duplicate goes with the communicator (not after MPI_Finalize: then it is gone anyway).
  void free_agreement_comm() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (agree_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&agree_);
    agree_ = MPI_COMM_NULL;
  }

  Collectives coll_;
  MPI_Comm agree_ = MPI_COMM_NULL;  // the arguments' agreement (a duplicate of the user's comm)
  int rank_ = 0, size_ = 1;
};

// A started non-blocking allreduce or all-gather; keeps its arrays alive until it completes.
class PyRequest {
 public:
  PyRequest(CollRequest r, py::object send, py::object recv)
      : r_(std::move(r)), send_(std::move(send)), recv_(std::move(recv)) {}
  ~PyRequest() {
    if (teardown_abandoned()) leak(std::move(r_));
  }
  bool test() {
    bool done;
    {
      py::gil_scoped_release nogil;
      done = r_.test();
    }
    return done;
  }
  py::object wait() {
    {
      py::gil_scoped_release nogil;
      r_.wait();
    }
    return recv_;
  }
  bool done() const { return !r_.pending(); }
  py::object result() const { return recv_; }

 private:
  CollRequest r_;
  py::object send_, recv_;
};

std::unique_ptr<PyRequest> PyCollectives::allreduce_start(py::handle send, py::object recv,
                                                          const std::string& op, bool reproducible,
                                                          const std::string& given) {
  ns_coll* h = handle();
  const py::object out = recv.is_none() ? py::reinterpret_borrow<py::object>(send) : recv;
  std::string problem = first_problem(
      {given, check_operand(send, "send", false), check_operand(out, "recv", true), check_op(op)});
  if (problem.empty()) problem = same_shape(send, out);
  agree_on_arguments(agree_, problem);
  py::array s = as_array(send), r = as_array(out);
  void* rp = r.mutable_data();
  const int dt = dtype_code(s.dtype());
  const ns_allreduce_params p = params_of(reproducible);
  ns_coll_request* req = nullptr;
  call_without_gil("ns_allreduce_start", [&] {
    return ns_allreduce_start(h, s.data(), rp, static_cast<std::uint64_t>(s.size()), dt,
                              op_code(op), &p, &req);
  });
  return std::make_unique<PyRequest>(CollRequest(req), py::reinterpret_borrow<py::object>(send),
                                     out);
}

// As allgather (recv made when None), started: the request keeps send and recv alive.
std::unique_ptr<PyRequest> PyCollectives::allgather_start(py::handle send, py::object recv,
                                                          const std::string& given) {
  ns_coll* h = handle();
  const GatherOperands g = allgather_operands(send, recv, given);
  ns_coll_request* req = nullptr;
  call_without_gil("ns_allgather_start", [&] {
    return ns_allgather_start(h, g.send.data(), g.recv_data, g.count, g.datatype, &req);
  });
  return std::make_unique<PyRequest>(CollRequest(req), py::reinterpret_borrow<py::object>(send),
                                     recv);
}

}  // namespace

void bind_collectives(py::module_& m) {
  py::class_<PyRequest>(
      m, "CollRequest",
      "A started non-blocking allreduce or all-gather: test() / wait() complete it.")
      .def("test", &PyRequest::test,
           "Progresses the communicator once; True once complete (raises its failure).")
      .def("wait", &PyRequest::wait, "Waits for completion (raises its failure); the result.")
      .def_property_readonly("done", &PyRequest::done)
      .def_property_readonly("result", &PyRequest::result);
  py::class_<PyCollectives>(
      m, "Collectives", "Dense collectives over NetSparse's transports (netsparse.collectives).")
      .def(py::init<py::handle, int, int, int, const std::string&>(), py::arg("comm"),
           py::arg("timeout_ms") = 0, py::arg("packet_bytes") = 0, py::arg("max_in_flight") = 0,
           py::arg("hierarchy") = "")
      .def_property_readonly("rank", &PyCollectives::rank)
      .def_property_readonly("size", &PyCollectives::size)
      .def_property_readonly("hierarchical", &PyCollectives::hierarchical)
      .def_property_readonly("inter_host_bytes", &PyCollectives::inter_host_bytes)
      .def_property_readonly("inter_rack_bytes", &PyCollectives::inter_rack_bytes)
      .def_property_readonly("through_racks", &PyCollectives::through_racks)
      .def("sparse_allreduce", &PyCollectives::sparse_allreduce, py::arg("indices"),
           py::arg("values"), py::arg("dense_out") = py::none(), py::arg("n") = 0,
           py::arg("output") = "auto", py::arg("problem") = "")
      .def("close", &PyCollectives::close)
      .def("allreduce", &PyCollectives::allreduce, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("op") = "sum", py::arg("reproducible") = false, py::arg("problem") = "")
      .def("reduce", &PyCollectives::reduce, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("root") = 0, py::arg("op") = "sum", py::arg("reproducible") = false,
           py::arg("problem") = "")
      .def("bcast", &PyCollectives::bcast, py::arg("buffer"), py::arg("root") = 0,
           py::arg("problem") = "")
      .def("allgather", &PyCollectives::allgather, py::arg("send"), py::arg("recv") = py::none(),
           py::arg("problem") = "")
      .def("reduce_scatter", &PyCollectives::reduce_scatter, py::arg("send"),
           py::arg("recv") = py::none(), py::arg("op") = "sum", py::arg("reproducible") = false,
           py::arg("problem") = "")
      .def("barrier", &PyCollectives::barrier)
      .def("allreduce_start", &PyCollectives::allreduce_start, py::arg("send"),
           py::arg("recv") = py::none(), py::arg("op") = "sum", py::arg("reproducible") = false,
           py::arg("problem") = "")
      .def("allgather_start", &PyCollectives::allgather_start, py::arg("send"),
           py::arg("recv") = py::none(), py::arg("problem") = "");
}

}  // namespace netsparse::python
