// The Remote Indexed Gather verb for Python, over the C++ RAII layer (netsparse_mpi.h /
// netsparse.hpp): a context on an mpi4py communicator, a registered numpy table (this rank's
// rows of a distributed table), and gathers of rows by global index into numpy arrays.
//
//   ctx = netsparse.RigContext(comm)                    # collective
//   table = ctx.register(local_rows)                    # collective: rows in rank order
//   rows = table.gather(idx)                            # one-sided: rows idx of the whole table
//   ctx.quiesce()                                       # collective: serve peers until all done
//
// A gather is one RIG work request (POSITIONAL layout: the i-th idx's row lands in out[i]); the
// engine filters and coalesces repeated idxs. It is not collective: in INLINE progress (what AUTO
// picks when the ranks have no spare core) a rank serves its peers only while it is inside a
// netsparse call, so every rank ends a phase of gathers with quiesce().
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "collective.hpp"
#include "netsparse/netsparse_mpi.h"

namespace netsparse::python {
namespace {

struct PyRigContext {
  py::object comm_obj;
  MPI_Comm comm = MPI_COMM_NULL;
  Context ctx;
  Cq cq;
  Qp qp;
  std::uint64_t next_wr_id = 1;
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
  return t;
}

// Rows idx of the whole table into out (len(idx) x width, the table's dtype).
py::array gather(PyRigTable& t, py::object idx_obj, py::object out_obj, int timeout_ms) {
  PyRigContext& c = *t.ctx;
  if (!c.ctx || !t.region.get()) throw py::value_error("the table is closed");
  std::span<const std::uint64_t> idx;
  std::string problem;
  if (py::isinstance<py::array>(idx_obj) &&
      has_dtype<std::int64_t>(py::reinterpret_borrow<py::array>(idx_obj))) {
    // int64 (numpy's default integer): same bits as uint64 for valid (non-negative) idxs; a
    // negative one is out of range and refused by the engine.
    std::span<const std::int64_t> signed_idx;
    problem = check_array(idx_obj, "idx", {-1}, false, signed_idx);
    idx = {reinterpret_cast<const std::uint64_t*>(signed_idx.data()), signed_idx.size()};
  } else {
    problem = check_array(idx_obj, "idx", {-1}, false, idx);
  }
  if (!problem.empty()) throw py::value_error(problem);
  std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(idx.size())};
  if (t.rows.ndim() == 2) shape.push_back(t.width());
  if (out_obj.is_none()) out_obj = py::array(t.rows.dtype(), shape);
  if (!py::isinstance<py::array>(out_obj)) throw py::value_error("out must be a numpy.ndarray");
  auto out = py::reinterpret_borrow<py::array>(out_obj);
  if (!same_dtype(out.dtype(), t.rows.dtype())) {
    throw py::value_error("out must have the table's dtype " + dtype_text(t.rows.dtype()) +
                          ", got " + dtype_text(out.dtype()));
  }
  if ((out.flags() & py::array::c_style) == 0 || !out.writeable() ||
      out.nbytes() != static_cast<py::ssize_t>(idx.size()) * t.rows.itemsize() * t.width()) {
    throw py::value_error("out must be a writable C-contiguous array of shape (len(idx), " +
                          std::to_string(t.width()) + "), got " + shape_text(out));
  }
  if (idx.empty()) return out;
  const std::uint64_t wr_id = c.next_wr_id++;
  ns_send_wr wr = rig_wr(wr_id, t.region, idx, out.mutable_data(),
                         static_cast<std::uint64_t>(out.nbytes()), Layout::kPositional);
  ns_wc wc{};
  {
    py::gil_scoped_release release;
    c.qp.post(wr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (c.cq.wait(std::span<ns_wc>(&wc, 1), std::chrono::milliseconds(100)) == 0) {
      if (timeout_ms >= 0 && std::chrono::steady_clock::now() > deadline) {
        throw Error(NS_ERR_TIMEOUT, "RigTable.gather: no completion within " +
                                        std::to_string(timeout_ms) +
                                        " ms (are the peers serving: inside a gather or "
                                        "quiesce()?)");
      }
      // Let Python see Ctrl-C between waits.
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }
  if (wc.status != NS_WC_SUCCESS) {
    throw Error(NS_ERR_INVALID, std::string("RigTable.gather: the work request completed with ") +
                                    ns_wc_status_str(wc.status) +
                                    " (an idx outside the table's rows, or a failed peer)");
  }
  return out;
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
            py::gil_scoped_release release;
            c.qp.close();
            c.cq.close();
            c.ctx.close();
          },
          "Collective: closes the context (close its tables first).");

  py::class_<PyRigTable, std::shared_ptr<PyRigTable>>(m, "RigTable",
                                                      "A registered table (RigContext.register).")
      .def("gather", &gather, R"(Rows idx (1-D uint64 or int64 global row numbers) of the whole
table, into out (len(idx) x row width, the table's dtype; allocated when None). Not collective;
the peers must be inside a netsparse call (a gather, quiesce()) or have a progress thread.)",
           py::arg("idx"), py::arg("out") = py::none(), py::arg("timeout_ms") = 60000)
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
