// Embedding tables for Python: netsparse._EmbeddingTables, a set of row-partitioned float32
// tables (EmbeddingTables) on its own context over an mpi4py communicator. The Python layer
// (python/netsparse/embedding.py: EmbeddingTables, EmbeddingTable) converts ids and partitions
// and documents the API; this file checks every operand (dtype, shape, contiguity) and calls the
// library with the GIL released.
//
// The constructor is collective: what Python refuses is agreed on across the ranks first
// (agree_on_arguments), and the library agrees on the rest (the shapes, bucket_rows). Lookups and
// pushes are one-sided, as in C++: a refused call raises on the rank that made it, before
// anything is fetched or written.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "collective.hpp"
#include "netsparse/embedding.hpp"
#include "netsparse/netsparse_mpi.h"

namespace netsparse::python {
namespace {

struct PyEmbeddingTables {
  py::object comm_obj;
  Context ctx;
  std::unique_ptr<EmbeddingTables> set;
  ~PyEmbeddingTables() {
    if (teardown_abandoned()) {  // collective.hpp: the peers may still read the rows
      leak(std::move(set));
      leak(std::move(ctx));
    }
  }
  EmbeddingTables& open(const char* call) {
    if (!set) throw Error(NS_ERR_STATE, std::string("EmbeddingTables.") + call + ": closed");
    return *set;
  }
};

int parse_progress(const std::string& s) {
  if (s == "auto") return NS_PROGRESS_AUTO;
  if (s == "thread") return NS_PROGRESS_THREAD;
  if (s == "inline") return NS_PROGRESS_INLINE;
  throw py::value_error("progress must be 'auto', 'thread' or 'inline', got '" + s + "'");
}

std::string table_name(std::size_t t) {
  return "table " + std::to_string(t);
}

// Per table: the ids (1-D uint64) as spans; ValueError naming the table otherwise.
std::vector<std::span<const std::uint64_t>> id_spans(const EmbeddingTables& set,
                                                     const py::list& ids, const char* call) {
  if (ids.size() != set.count()) {
    throw py::value_error(std::string(call) + ": " + std::to_string(ids.size()) +
                          " id arrays for " + std::to_string(set.count()) + " tables");
  }
  std::vector<std::span<const std::uint64_t>> spans(set.count());
  for (std::size_t t = 0; t < set.count(); ++t) {
    std::span<const std::uint64_t> s;
    const std::string problem = check_array(ids[t], table_name(t) + ": ids", {-1}, false, s);
    if (!problem.empty()) throw py::value_error(std::string(call) + ": " + problem);
    spans[t] = s;
  }
  return spans;
}

py::list lookup(PyEmbeddingTables& self, const py::list& ids, const py::object& out_obj) {
  EmbeddingTables& set = self.open("lookup");
  const auto ids_t = id_spans(set, ids, "lookup");
  py::list outs;
  if (out_obj.is_none()) {
    for (std::size_t t = 0; t < set.count(); ++t) {
      outs.append(py::array_t<float>(
          {static_cast<py::ssize_t>(ids_t[t].size()), static_cast<py::ssize_t>(set.dim(t))}));
    }
  } else {
    outs = py::list(out_obj);
    if (outs.size() != set.count()) {
      throw py::value_error("lookup: " + std::to_string(outs.size()) + " outputs for " +
                            std::to_string(set.count()) + " tables");
    }
  }
  std::vector<std::span<float>> out_t(set.count());
  for (std::size_t t = 0; t < set.count(); ++t) {
    const std::string problem = check_array(
        outs[t], table_name(t) + ": out",
        {static_cast<py::ssize_t>(ids_t[t].size()), static_cast<py::ssize_t>(set.dim(t))}, true,
        out_t[t]);
    if (!problem.empty()) throw py::value_error("lookup: " + problem);
  }
  py::gil_scoped_release release;
  set.lookup(ids_t, out_t);
  return outs;
}

void push_gradients(PyEmbeddingTables& self, const py::list& ids, const py::list& deltas) {
  EmbeddingTables& set = self.open("push_gradients");
  const auto ids_t = id_spans(set, ids, "push_gradients");
  if (deltas.size() != set.count()) {
    throw py::value_error("push_gradients: " + std::to_string(deltas.size()) +
                          " delta arrays for " + std::to_string(set.count()) + " tables");
  }
  std::vector<std::span<const float>> d_t(set.count());
  for (std::size_t t = 0; t < set.count(); ++t) {
    const std::string problem = check_array(
        deltas[t], table_name(t) + ": deltas",
        {static_cast<py::ssize_t>(ids_t[t].size()), static_cast<py::ssize_t>(set.dim(t))}, false,
        d_t[t]);
    if (!problem.empty()) throw py::value_error("push_gradients: " + problem);
  }
  py::gil_scoped_release release;
  set.push_gradients(ids_t, d_t);
}

py::dict stats_dict(const EmbeddingStats& s) {
  py::dict d;
  d["lookups"] = s.lookups;
  d["distinct"] = s.distinct;
  d["local_rows"] = s.local_rows;
  d["cache_hits"] = s.cache_hits;
  d["cache_stale"] = s.cache_stale;
  d["fetched_rows"] = s.fetched_rows;
  d["gathers"] = s.gathers;
  d["version_reads"] = s.version_reads;
  d["pushes"] = s.pushes;
  d["bumped_buckets"] = s.bumped_buckets;
  d["dedup_ns"] = s.dedup_ns;
  d["version_ns"] = s.version_ns;
  d["cache_ns"] = s.cache_ns;
  d["gather_ns"] = s.gather_ns;
  d["output_ns"] = s.output_ns;
  return d;
}

}  // namespace

void bind_embedding(py::module_& m) {
  py::class_<PyEmbeddingTables, std::shared_ptr<PyEmbeddingTables>>(
      m, "_EmbeddingTables",
      R"(EmbeddingTables on its own context (use netsparse.EmbeddingTables / EmbeddingTable).)")
      .def(py::init([](py::object comm_obj, const std::vector<std::uint32_t>& dims,
                       const std::vector<std::vector<std::uint64_t>>& row_offsets,
                       std::uint64_t cache_rows, bool dedup, std::uint32_t bucket_rows,
                       const std::string& progress) {
             auto self = std::make_shared<PyEmbeddingTables>();
             const MPI_Comm comm = comm_from(comm_obj);
             self->comm_obj = std::move(comm_obj);
             std::string problem;
             int mode = NS_PROGRESS_AUTO;
             try {
               mode = parse_progress(progress);
               if (dims.size() != row_offsets.size()) {
                 throw py::value_error(std::to_string(dims.size()) + " dims for " +
                                       std::to_string(row_offsets.size()) + " row_offsets");
               }
             } catch (const std::exception& e) {
               problem = e.what();
             }
             agree_on_arguments(comm, problem);
             std::vector<EmbeddingTableShape> shapes;
             for (std::size_t t = 0; t < dims.size(); ++t)
               shapes.push_back(EmbeddingTableShape{dims[t], row_offsets[t]});
             EmbeddingOptions options;
             options.cache_rows = cache_rows;
             options.dedup = dedup;
             options.bucket_rows = bucket_rows;
             py::gil_scoped_release release;
             self->ctx =
                 open_mpi(comm, ContextAttr().progress(static_cast<ns_progress_mode>(mode)));
             self->set = std::make_unique<EmbeddingTables>(self->ctx, shapes, options);
             return self;
           }),
           py::arg("comm"), py::arg("dims"), py::arg("row_offsets"), py::arg("cache_rows") = 0,
           py::arg("dedup") = true, py::arg("bucket_rows") = EmbeddingOptions::kDefaultBucketRows,
           py::arg("progress") = "auto")
      .def_property_readonly("count", [](PyEmbeddingTables& s) { return s.open("count").count(); })
      .def_property_readonly("row_stride",
                             [](PyEmbeddingTables& s) { return s.open("row_stride").row_stride(); })
      .def("dim", [](PyEmbeddingTables& s, std::size_t t) { return s.open("dim").dim(t); })
      .def("total_rows",
           [](PyEmbeddingTables& s, std::size_t t) { return s.open("total_rows").total_rows(t); })
      .def(
          "local_rows",
          [](py::object self_obj, std::size_t t) {
            auto& s = self_obj.cast<PyEmbeddingTables&>();
            EmbeddingTables& set = s.open("local_rows");
            const std::span<float> rows = set.local_rows(t);
            const auto stride = static_cast<py::ssize_t>(set.row_stride());
            // A view of the registered rows (rows x row_stride), kept alive by the set.
            return py::array_t<float>({static_cast<py::ssize_t>(rows.size()) / stride, stride},
                                      rows.data(), self_obj);
          },
          py::arg("table"))
      .def("local_rows_changed",
           [](PyEmbeddingTables& s) {
             EmbeddingTables& set = s.open("local_rows_changed");
             py::gil_scoped_release release;
             set.local_rows_changed();
           })
      .def("lookup", &lookup, py::arg("ids"), py::arg("out") = py::none())
      .def("push_gradients", &push_gradients, py::arg("ids"), py::arg("deltas"))
      .def(
          "set_options",
          [](PyEmbeddingTables& s, std::uint64_t cache_rows, bool dedup) {
            EmbeddingTables& set = s.open("set_options");
            EmbeddingOptions o = set.options();
            o.cache_rows = cache_rows;
            o.dedup = dedup;
            set.set_options(o);
          },
          py::arg("cache_rows"), py::arg("dedup"))
      .def("stats", [](PyEmbeddingTables& s) { return stats_dict(s.open("stats").stats()); })
      .def("reset_stats", [](PyEmbeddingTables& s) { s.open("reset_stats").reset_stats(); })
      .def(
          "quiesce",
          [](PyEmbeddingTables& s) {
            Context& c = s.ctx;
            py::gil_scoped_release release;
            c.quiesce();
          },
          "Collective: serve the peers until every rank has called it.")
      .def(
          "close",
          [](PyEmbeddingTables& s) {
            py::gil_scoped_release release;
            s.set.reset();
            s.ctx.close();
          },
          "Collective: frees the tables and closes their context.");
}

}  // namespace netsparse::python
