// The Remote Indexed Gather verb for Python, over the C++ RAII layer (netsparse_mpi.h /
// netsparse.hpp): a context on an mpi4py communicator, a registered numpy table (this rank's
// rows of a distributed table), and gathers of rows by global index into numpy arrays.
//
//   ctx = netsparse.RigContext(comm)                    # collective
//   table = ctx.register(local_rows)                    # collective: rows in rank order
//   rows = table.gather(idx)                            # one-sided: rows idx of the whole table
//   plan = table.plan(idx); plan.run()                  # the same gather, recorded and replayed
//   table.scatter_reduce(idx, values, "sum")            # rows idx at their owners += values
//   ctx.quiesce()                                       # collective: serve peers until all done
//
// A gather is one RIG work request (POSITIONAL layout: the i-th idx's row lands in out[i]); the
// engine filters and coalesces repeated idxs. A plan is ns_plan_create on such a gather, each
// run() one NS_WR_RIG_PLAN start; scatter_reduce is one NS_WR_RIS. None is collective: in INLINE
// progress (what AUTO picks when the ranks have no spare core) a rank serves its peers only
// while it is inside a netsparse call, so every rank ends a phase of them with quiesce().
//
// Every call posts one work request and waits for its completion with the GIL released; a
// completion that is not SUCCESS raises netsparse.Error naming the offending idx where the
// engine reports one. A wait that times out (or is interrupted) leaves the work request in the
// engine: its operands are kept alive by the context until its completion arrives.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "collective.hpp"
#include "netsparse/netsparse_mpi.h"

namespace netsparse::python {
namespace {

struct PyRigTable;

struct PyRigContext {
  py::object comm_obj;
  MPI_Comm comm = MPI_COMM_NULL;
  Context ctx;
  Cq cq;
  Qp qp;
  std::uint64_t next_wr_id = 1;
  // The table registered on this context (the C API has one region per context at a time):
  // what RigContext.plan and RigContext.scatter_reduce act on.
  std::weak_ptr<PyRigTable> table;
  // One work request posted and waited for at a time (Python threads share the one CQ; taken
  // with the GIL released).
  std::mutex op_mu;
  // Operands of work requests whose wait timed out or was interrupted, by wr_id: the engine
  // still reads (idx, values) or writes (out) them until their completion, which frees them.
  std::unordered_map<std::uint64_t, std::vector<py::object>> abandoned;
  ~PyRigContext() {
    if (teardown_abandoned()) {  // collective.hpp
      leak(std::move(qp));
      leak(std::move(cq));
      leak(std::move(ctx));
    }
  }
};

struct PyRigTable {
  std::shared_ptr<PyRigContext> ctx;  // closed after the table
  py::array rows;                     // registered memory: peers read it until close()
  PropertyRegion region;
  std::vector<std::uint64_t> offsets;
  ~PyRigTable() {
    if (teardown_abandoned()) {  // collective.hpp: the peers may still read rows
      leak(std::move(region));
      leak(std::move(rows));
    }
  }

  [[nodiscard]] py::ssize_t width() const { return rows.ndim() == 2 ? rows.shape(1) : 1; }
};

int parse_progress(const std::string& s) {
  if (s == "auto") return NS_PROGRESS_AUTO;
  if (s == "thread") return NS_PROGRESS_THREAD;
  if (s == "inline") return NS_PROGRESS_INLINE;
  throw py::value_error("progress must be 'auto', 'thread' or 'inline', got '" + s + "'");
}

std::shared_ptr<PyRigTable> register_table(const std::shared_ptr<PyRigContext>& c,
                                           py::object rows_obj,
                                           std::optional<std::vector<std::uint64_t>> offsets) {
  if (!c->ctx) throw py::value_error("the RigContext is closed");
  // The table: 1-D or 2-D, C-contiguous, any fixed-size dtype; a row is row_width elements.
  std::string problem;
  py::array rows;
  if (!py::isinstance<py::array>(rows_obj)) {
    problem = "the table must be a numpy.ndarray";
  } else {
    rows = py::reinterpret_borrow<py::array>(rows_obj);
    if (rows.ndim() != 1 && rows.ndim() != 2) {
      problem = "the table must be 1-D or 2-D (rows x elements), got shape " + shape_text(rows);
    } else if ((rows.flags() & py::array::c_style) == 0) {
      problem = "the table must be C-contiguous; its strides are " + strides_text(rows);
    } else if (rows.ndim() == 2 && rows.shape(1) == 0) {
      problem = "the table's rows are empty (shape " + shape_text(rows) + ")";
    }
  }
  const int nranks = c->ctx.size();
  if (problem.empty() && offsets && offsets->size() != static_cast<std::size_t>(nranks) + 1) {
    problem = "row_offsets needs nranks + 1 = " + std::to_string(nranks + 1) + " entries, got " +
              std::to_string(offsets->size());
  }
  agree_on_arguments(c->comm, problem);
  const auto local_rows = static_cast<std::uint64_t>(rows.shape(0));
  const auto prop_bytes =
      static_cast<std::uint64_t>(rows.nbytes() / std::max<py::ssize_t>(1, rows.shape(0)));
  auto t = std::make_shared<PyRigTable>();
  t->ctx = c;
  t->rows = rows;
  if (offsets) {
    t->offsets = *offsets;
  } else {
    // Blocks in rank order: the prefix sums of every rank's row count.
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(nranks));
    MPI_Allgather(&local_rows, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, c->comm);
    t->offsets.assign(1, 0);
    for (std::uint64_t n : counts) t->offsets.push_back(t->offsets.back() + n);
  }
  py::gil_scoped_release release;
  // ns_reg_props checks the offsets, the row count and the row size on every rank.
  t->region = PropertyRegion(c->ctx, rows.mutable_data(), local_rows,
                             static_cast<std::uint32_t>(prop_bytes), t->offsets);
  c->table = t;
  return t;
}

// ---- operands ---------------------------------------------------------------------------------

// A 1-D idx array of global row numbers: uint64, or int64 (numpy's default integer; the same bits
// for valid, non-negative idxs; a negative one is out of range, refused like any other).
struct IdxView {
  std::span<const std::uint64_t> idx;
  bool is_signed = false;
  // idx[j] as the caller wrote it.
  [[nodiscard]] std::string text(std::uint64_t j) const {
    return is_signed ? std::to_string(static_cast<std::int64_t>(idx[j])) : std::to_string(idx[j]);
  }
  // The position of the first idx at or beyond `total` rows, if any.
  [[nodiscard]] std::optional<std::uint64_t> first_outside(std::uint64_t total) const {
    const auto it =
        std::find_if(idx.begin(), idx.end(), [&](std::uint64_t i) { return i >= total; });
    if (it == idx.end()) return std::nullopt;
    return static_cast<std::uint64_t>(it - idx.begin());
  }
};

IdxView check_idx(py::handle obj) {
  IdxView v;
  std::string problem;
  if (py::isinstance<py::array>(obj) &&
      has_dtype<std::int64_t>(py::reinterpret_borrow<py::array>(obj))) {
    std::span<const std::int64_t> signed_idx;
    problem = check_array(obj, "idx", {-1}, false, signed_idx);
    v.idx = {reinterpret_cast<const std::uint64_t*>(signed_idx.data()), signed_idx.size()};
    v.is_signed = true;
  } else if (py::isinstance<py::array>(obj) &&
             !has_dtype<std::uint64_t>(py::reinterpret_borrow<py::array>(obj))) {
    problem = "idx must have dtype int64 or uint64, got " +
              dtype_text(py::reinterpret_borrow<py::array>(obj).dtype()) +
              " (no implicit conversion: convert with .astype(numpy.int64))";
  } else {
    problem = check_array(obj, "idx", {-1}, false, v.idx);
  }
  if (!problem.empty()) throw py::value_error(problem);
  return v;
}

// "idx[j] = v is outside the table's N rows" for the first such idx ("" if none).
std::string outside_text(const IdxView& v, std::uint64_t total) {
  const auto j = v.first_outside(total);
  if (!j) return {};
  return "idx[" + std::to_string(*j) + "] = " + v.text(*j) + " is outside the table's " +
         std::to_string(total) + " rows";
}

// The output of a gather of n rows: `out_obj`, checked, or a new array (None).
py::array gather_out(const PyRigTable& t, std::size_t n, py::object out_obj) {
  std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(n)};
  if (t.rows.ndim() == 2) shape.push_back(t.width());
  if (out_obj.is_none()) out_obj = py::array(t.rows.dtype(), shape);
  if (!py::isinstance<py::array>(out_obj)) throw py::value_error("out must be a numpy.ndarray");
  auto out = py::reinterpret_borrow<py::array>(out_obj);
  if (!same_dtype(out.dtype(), t.rows.dtype())) {
    throw py::value_error("out must have the table's dtype " + dtype_text(t.rows.dtype()) +
                          ", got " + dtype_text(out.dtype()));
  }
  if ((out.flags() & py::array::c_style) == 0 || !out.writeable() ||
      out.nbytes() != static_cast<py::ssize_t>(n) * t.rows.itemsize() * t.width()) {
    throw py::value_error("out must be a writable C-contiguous array of shape (len(idx), " +
                          std::to_string(t.width()) + "), got " + shape_text(out));
  }
  return out;
}

void check_open(const PyRigTable& t, const char* what) {
  if (!t.ctx->ctx) throw py::value_error(std::string(what) + ": the RigContext is closed");
  if (!t.region.get()) throw py::value_error(std::string(what) + ": the table is closed");
}

// ---- one work request -------------------------------------------------------------------------

// Posts `wr` on the context's queue pair and waits for its completion (GIL released). On a
// timeout or an interrupt the work request stays in the engine: `operands` are kept alive (by
// the context) until its completion arrives, and the call raises.
ns_wc post_and_wait(PyRigContext& c, ns_send_wr& wr, int timeout_ms, const std::string& what,
                    std::vector<py::object> operands) {
  wr.wr_id = c.next_wr_id++;
  ns_wc wc{};
  bool timed_out = false;
  bool interrupted = false;
  std::vector<std::uint64_t> stale;  // completions of abandoned work requests seen meanwhile
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lk(c.op_mu);
    c.qp.post(wr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (c.cq.wait(std::span<ns_wc>(&wc, 1), std::chrono::milliseconds(100)) != 0) {
        if (wc.wr_id == wr.wr_id) break;
        stale.push_back(wc.wr_id);
        continue;
      }
      if (timeout_ms >= 0 && std::chrono::steady_clock::now() > deadline) {
        timed_out = true;
        break;
      }
      // Let Python see Ctrl-C between waits.
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        interrupted = true;
        break;
      }
    }
  }
  for (std::uint64_t id : stale) c.abandoned.erase(id);
  if (timed_out || interrupted) c.abandoned[wr.wr_id] = std::move(operands);
  if (interrupted) throw py::error_already_set();
  if (timed_out) {
    throw Error(NS_ERR_TIMEOUT, what + ": no completion within " + std::to_string(timeout_ms) +
                                    " ms (are the peers serving: inside a netsparse call or "
                                    "quiesce()?)");
  }
  return wc;
}

// netsparse.Error for a completion that is not SUCCESS; `outside`: the first idx out of range
// (if the caller found one).
[[noreturn]] void raise_completion(const std::string& what, const ns_wc& wc,
                                   const std::string& outside) {
  std::string text = what + ": the work request completed with " + ns_wc_status_str(wc.status);
  if (!outside.empty()) {
    text += ": " + outside;
  } else if (wc.status == NS_WC_REM_INV_REQ || wc.status == NS_WC_LOC_INV_REQ) {
    text += " (an idx outside the table's rows)";
  } else {
    text += " (a failed peer, or the watchdog)";
  }
  throw Error(wc.status == NS_WC_WATCHDOG_TIMEOUT ? NS_ERR_TIMEOUT
              : wc.status == NS_WC_TRANSPORT_ERR  ? NS_ERR_TRANSPORT
                                                  : NS_ERR_INVALID,
              text);
}

// Rows idx of the whole table into out (len(idx) x width, the table's dtype).
py::array gather(PyRigTable& t, py::object idx_obj, py::object out_obj, int timeout_ms) {
  check_open(t, "RigTable.gather");
  const IdxView v = check_idx(idx_obj);
  py::array out = gather_out(t, v.idx.size(), out_obj);
  if (v.idx.empty()) return out;
  ns_send_wr wr = rig_wr(0, t.region, v.idx, out.mutable_data(),
                         static_cast<std::uint64_t>(out.nbytes()), Layout::kPositional);
  const ns_wc wc = post_and_wait(*t.ctx, wr, timeout_ms, "RigTable.gather", {idx_obj, out});
  if (wc.status != NS_WC_SUCCESS) {
    raise_completion("RigTable.gather", wc, outside_text(v, t.region.total_rows()));
  }
  return out;
}

// ---- gather plans (ns_plan_create, NS_WR_RIG_PLAN) --------------------------------------------

struct PyRigPlan {
  std::shared_ptr<PyRigTable> table;
  ns_plan* plan = nullptr;  // owned; the engine frees it with the context
  py::array out;            // the plan's output: written by every run, kept alive with the plan
  std::vector<std::uint64_t> idx;  // the plan's copy of idx (ns_plan_create copies it too)
  bool idx_signed = false;
  std::uint64_t runs = 0;

  PyRigPlan() = default;
  PyRigPlan(const PyRigPlan&) = delete;
  PyRigPlan& operator=(const PyRigPlan&) = delete;
  ~PyRigPlan() {
    if (teardown_abandoned()) {  // collective.hpp: a start may be in flight
      leak(std::move(out));
      return;
    }
    // A closed context took its plans with it; a start abandoned by a timeout keeps the plan
    // (ns_plan_destroy refuses it) and its output (PyRigContext::abandoned).
    if (plan != nullptr && table->ctx->ctx) (void)ns_plan_destroy(plan);
  }

  [[nodiscard]] IdxView view() const { return {idx, idx_signed}; }

  void close() {
    if (plan == nullptr) return;
    if (table->ctx->ctx) detail::check(ns_plan_destroy(plan), "ns_plan_destroy");
    plan = nullptr;
  }
};

std::shared_ptr<PyRigPlan> make_plan(const std::shared_ptr<PyRigTable>& t, py::object idx_obj,
                                     py::object out_obj) {
  check_open(*t, "RigTable.plan");
  const IdxView v = check_idx(idx_obj);
  auto p = std::make_shared<PyRigPlan>();
  p->table = t;
  p->out = gather_out(*t, v.idx.size(), out_obj);
  p->idx.assign(v.idx.begin(), v.idx.end());
  p->idx_signed = v.is_signed;
  const ns_send_wr wr = rig_wr(0, t->region, p->idx, p->out.mutable_data(),
                               static_cast<std::uint64_t>(p->out.nbytes()), Layout::kPositional);
  detail::check(ns_plan_create(t->ctx->ctx.get(), &wr, &p->plan), "ns_plan_create");
  return p;
}

py::array run_plan(PyRigPlan& p, int timeout_ms) {
  if (p.plan == nullptr) throw py::value_error("RigPlan.run: the plan is closed");
  check_open(*p.table, "RigPlan.run");
  ns_send_wr wr = detail::work_request(0, NS_WR_RIG_PLAN, NS_SEND_SIGNALED);
  wr.wr.plan.plan = p.plan;
  const ns_wc wc = post_and_wait(*p.table->ctx, wr, timeout_ms, "RigPlan.run", {p.out});
  if (wc.status != NS_WC_SUCCESS) {
    raise_completion("RigPlan.run", wc, outside_text(p.view(), p.table->region.total_rows()));
  }
  ++p.runs;
  return p.out;
}

// ---- scatter-reduce (NS_WR_RIS) ---------------------------------------------------------------

int parse_ris_op(py::handle op) {
  if (py::isinstance<py::str>(op)) {
    std::string s = op.cast<std::string>();
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (s == "sum") return NS_RIS_SUM;
    if (s == "min") return NS_RIS_MIN;
    if (s == "max") return NS_RIS_MAX;
    throw py::value_error("op must be 'sum', 'min' or 'max' (or a netsparse.RisOp), got '" +
                          op.cast<std::string>() + "'");
  }
  if (py::isinstance<ns_ris_op>(op)) return static_cast<int>(op.cast<ns_ris_op>());
  throw py::value_error("op must be 'sum', 'min' or 'max' (or a netsparse.RisOp), got a " +
                        std::string(py::str(py::type::of(op).attr("__name__"))));
}

// The NS_WR_RIS datatype of a table's elements; ValueError for the others.
int ris_datatype(const py::array& rows) {
  const py::dtype d = rows.dtype();
  if (same_dtype(d, py::dtype::of<float>())) return NS_RIS_FLOAT32;
  if (same_dtype(d, py::dtype::of<double>())) return NS_RIS_FLOAT64;
  if (same_dtype(d, py::dtype::of<std::int32_t>())) return NS_RIS_INT32;
  if (same_dtype(d, py::dtype::of<std::int64_t>())) return NS_RIS_INT64;
  throw py::value_error(
      "scatter_reduce needs a table of float32, float64, int32 or int64 elements; this table's "
      "dtype is " +
      dtype_text(d));
}

void scatter_reduce(PyRigTable& t, py::object idx_obj, py::object values_obj, py::object op_obj,
                    int timeout_ms) {
  const char* what = "RigTable.scatter_reduce";
  check_open(t, what);
  const int op = parse_ris_op(op_obj);
  const int datatype = ris_datatype(t.rows);
  const IdxView v = check_idx(idx_obj);
  if (!py::isinstance<py::array>(values_obj)) {
    throw py::value_error("values must be a numpy.ndarray, got " +
                          std::string(py::str(py::type::of(values_obj).attr("__name__"))));
  }
  const auto values = py::reinterpret_borrow<py::array>(values_obj);
  if (!same_dtype(values.dtype(), t.rows.dtype())) {
    throw py::value_error("values must have the table's dtype " + dtype_text(t.rows.dtype()) +
                          ", got " + dtype_text(values.dtype()) +
                          " (no implicit conversion: convert with .astype)");
  }
  const auto n = static_cast<py::ssize_t>(v.idx.size());
  const bool shape_ok = t.rows.ndim() == 1 ? values.ndim() == 1 && values.shape(0) == n
                                           : values.ndim() == 2 && values.shape(0) == n &&
                                                 values.shape(1) == t.width();
  if (!shape_ok) {
    throw py::value_error(
        "values has shape " + shape_text(values) + ", needs (len(idx)" +
        (t.rows.ndim() == 2 ? ", " + std::to_string(t.width()) + ")" : std::string(",)")) + " = " +
        (t.rows.ndim() == 2 ? "(" + std::to_string(n) + ", " + std::to_string(t.width()) + ")"
                            : "(" + std::to_string(n) + ",)"));
  }
  if ((values.flags() & py::array::c_style) == 0) {
    throw py::value_error("values must be C-contiguous (row-major, no gaps); its strides are " +
                          strides_text(values) +
                          " (numpy.ascontiguousarray makes a contiguous copy)");
  }
  if (reinterpret_cast<std::uintptr_t>(values.data()) %
          static_cast<std::uintptr_t>(values.itemsize()) !=
      0) {
    throw py::value_error("values is not aligned to its element size");
  }
  if (v.idx.empty()) return;
  ns_send_wr wr =
      detail::ris_wr(0, t.region.get(), v.idx.data(), v.idx.size(), values.data(),
                     static_cast<std::uint64_t>(values.nbytes()), op, datatype, NS_SEND_SIGNALED);
  const ns_wc wc = post_and_wait(*t.ctx, wr, timeout_ms, what, {idx_obj, values_obj});
  if (wc.status == NS_WC_LOC_INV_REQ && wc.count < v.idx.size()) {
    raise_completion(what, wc,
                     "idx[" + std::to_string(wc.count) + "] = " + v.text(wc.count) +
                         " is outside the table's " + std::to_string(t.region.total_rows()) +
                         " rows (nothing was written)");
  }
  if (wc.status != NS_WC_SUCCESS) raise_completion(what, wc, {});
}

// The table registered on a context (RigContext.plan / scatter_reduce).
std::shared_ptr<PyRigTable> registered_table(PyRigContext& c, const char* what) {
  if (!c.ctx) throw py::value_error(std::string(what) + ": the RigContext is closed");
  std::shared_ptr<PyRigTable> t = c.table.lock();
  if (!t || !t->region.get()) {
    throw Error(NS_ERR_NOT_REGISTERED,
                std::string(what) + ": no table is registered on this RigContext (register one)");
  }
  return t;
}

}  // namespace

void bind_rig(py::module_& m) {
  py::class_<PyRigContext, std::shared_ptr<PyRigContext>>(m, "RigContext", R"(A RIG engine on an
mpi4py communicator: RigContext(comm, progress="auto", queue_depth=64). Collective.)")
      .def(py::init([](py::object comm_obj, const std::string& progress, int queue_depth) {
             auto c = std::make_shared<PyRigContext>();
             c->comm = comm_from(comm_obj);
             c->comm_obj = std::move(comm_obj);
             std::string problem;
             int mode = NS_PROGRESS_AUTO;
             try {
               mode = parse_progress(progress);
               if (queue_depth < 1) throw py::value_error("queue_depth must be >= 1");
             } catch (const std::exception& e) {
               problem = e.what();
             }
             agree_on_arguments(c->comm, problem);
             py::gil_scoped_release release;
             c->ctx =
                 open_mpi(c->comm, ContextAttr().progress(static_cast<ns_progress_mode>(mode)));
             c->cq = Cq(c->ctx, queue_depth);
             c->qp = Qp(c->ctx, c->cq, queue_depth);
             return c;
           }),
           py::arg("comm"), py::arg("progress") = "auto", py::arg("queue_depth") = 64)
      .def("register", &register_table, R"(Collective: registers this rank's rows of a table
(numpy, 1-D or 2-D, C-contiguous; kept alive and read by the peers until the table is closed).
row_offsets: nranks + 1 global row offsets (default: the blocks in rank order).)",
           py::arg("rows"), py::arg("row_offsets") = py::none())
      .def(
          "quiesce",
          [](PyRigContext& c, int timeout_ms) {
            py::gil_scoped_release release;
            if (!c.ctx.quiesce(std::chrono::milliseconds(timeout_ms))) {
              throw Error(NS_ERR_TIMEOUT, "RigContext.quiesce: timed out");
            }
          },
          "Collective: serve the peers until every rank has called it.", py::arg("timeout_ms") = -1)
      .def_property_readonly("transport",
                             [](const PyRigContext& c) { return c.ctx.transport_name(); })
      .def_property_readonly("progress_mode",
                             [](const PyRigContext& c) {
                               return c.ctx.progress_mode() == NS_PROGRESS_THREAD ? "thread"
                                                                                  : "inline";
                             })
      .def("stats_json", [](const PyRigContext& c) { return c.ctx.stats_json(); })
      .def(
          "close",
          [](PyRigContext& c) {
            {
              py::gil_scoped_release release;
              c.qp.close();
              c.cq.close();
              c.ctx.close();  // its plans go with it
            }
            c.abandoned.clear();  // nothing is in flight any more
          },
          "Collective: closes the context (close its tables first).")
      .def(
          "plan",
          [](PyRigContext& c, py::object idx, py::object out) {
            return make_plan(registered_table(c, "RigContext.plan"), std::move(idx),
                             std::move(out));
          },
          R"(RigTable.plan on the table registered on this context (the C API has one region per
context at a time); netsparse.Error (status NS_ERR_NOT_REGISTERED) when there is none.)",
          py::arg("idx"), py::arg("out") = py::none())
      .def(
          "scatter_reduce",
          [](PyRigContext& c, py::object idx, py::object values, py::object op, int timeout_ms) {
            scatter_reduce(*registered_table(c, "RigContext.scatter_reduce"), std::move(idx),
                           std::move(values), std::move(op), timeout_ms);
          },
          R"(RigTable.scatter_reduce on the table registered on this context; netsparse.Error
(status NS_ERR_NOT_REGISTERED) when there is none.)",
          py::arg("idx"), py::arg("values"), py::arg("op") = "sum", py::arg("timeout_ms") = 60000);

  py::enum_<ns_ris_op>(m, "RisOp", R"(How scatter_reduce combines a value into its row, element
by element (the C API's enum ns_ris_op): SUM (integer sums wrap), MIN, MAX.)")
      .value("SUM", NS_RIS_SUM)
      .value("MIN", NS_RIS_MIN)
      .value("MAX", NS_RIS_MAX);

  py::class_<PyRigPlan, std::shared_ptr<PyRigPlan>>(m, "RigPlan", R"(A gather plan
(RigTable.plan): one gather of a fixed idx list into a fixed output, recorded by its first run
and replayed in bulk by the later ones (ns_plan_create, NS_WR_RIG_PLAN).)")
      .def("run", &run_plan, R"(Runs the gather: out[i] = row idx[i] of the whole table as the
owners hold it now; returns out. The first run (and the first after the table's region was
registered again) records, later runs replay: the same result as a fresh gather. Not
collective; the peers must be inside a netsparse call (a gather, a run, quiesce()) or have a
progress thread. netsparse.Error when an idx lies outside the table (naming the first such idx),
a peer failed or the wait timed out; ValueError when the plan, its table or its context is
closed.)",
           py::arg("timeout_ms") = 60000)
      .def_property_readonly(
          "out", [](const PyRigPlan& p) { return p.out; },
          "The output array every run writes (len(idx) x row width, the table's dtype).")
      .def_property_readonly(
          "idx",
          [](const PyRigPlan& p) {
            return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(p.idx.size()), p.idx.data());
          },
          "A copy of the plan's idx list (uint64).")
      .def_property_readonly(
          "runs", [](const PyRigPlan& p) { return p.runs; }, "Runs completed successfully.")
      .def_property_readonly(
          "closed", [](const PyRigPlan& p) { return p.plan == nullptr; },
          "Whether close() was called.")
      .def("__len__", [](const PyRigPlan& p) { return p.idx.size(); })
      .def("close", &PyRigPlan::close,
           "Destroys the plan (local, not collective); run() raises afterwards.");

  py::class_<PyRigTable, std::shared_ptr<PyRigTable>>(m, "RigTable",
                                                      "A registered table (RigContext.register).")
      .def("gather", &gather, R"(Rows idx (1-D uint64 or int64 global row numbers) of the whole
table, into out (len(idx) x row width, the table's dtype; allocated when None). Not collective;
the peers must be inside a netsparse call (a gather, quiesce()) or have a progress thread.)",
           py::arg("idx"), py::arg("out") = py::none(), py::arg("timeout_ms") = 60000)
      .def("plan", &make_plan, R"(A gather plan for a fixed idx list (1-D uint64 or int64 global
row numbers, copied): RigPlan.run() gathers rows idx of the whole table into out (len(idx) x row
width, the table's dtype; allocated when None; kept and written by every run). Local, not
collective (ns_plan_create). ValueError for a bad idx or out, or a closed table or context.)",
           py::arg("idx"), py::arg("out") = py::none())
      .def("scatter_reduce", &scatter_reduce, R"(Remote Indexed Scatter-Reduce (NS_WR_RIS): for
every j, row idx[j] of the whole table, at its owner, becomes op(row, values[j]) element by
element, in place in the owner's registered array. idx: 1-D uint64 or int64 global row numbers
(repeats allowed: combined on this rank first); values: len(idx) rows of the table's shape and
dtype (float32, float64, int32 or int64), C-contiguous; op: 'sum', 'min', 'max' or a
netsparse.RisOp. Returns when every owner has applied its rows. Not collective: the owners
apply while inside a netsparse call (or with a progress thread), so end the phase with
quiesce() on every rank before reading the rows. ValueError for bad arguments (nothing posted);
netsparse.Error for an idx outside the table (nothing written anywhere), a failed peer or a
timeout.)",
           py::arg("idx"), py::arg("values"), py::arg("op") = "sum", py::arg("timeout_ms") = 60000)
      .def_property_readonly(
          "closed", [](const PyRigTable& t) { return !t.ctx->ctx || !t.region.get(); },
          "Whether the table (or its context) is closed.")
      .def_property_readonly("row_offsets",
                             [](const PyRigTable& t) {
                               return py::array_t<std::uint64_t>(
                                   static_cast<py::ssize_t>(t.offsets.size()), t.offsets.data());
                             })
      .def(
          "close",
          [](PyRigTable& t) {
            {
              py::gil_scoped_release release;
              t.region.close();  // collective: quiesces, then deregisters
            }
            t.rows = py::array();
          },
          "Collective: deregisters the table (after serving the peers).");
}

}  // namespace netsparse::python
