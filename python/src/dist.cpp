// DistMatrix, Engine, DistKernel, TransposedSpmm and DistSpgemm for Python.
//
// Every call that is collective in C++ stays collective here, and what Python checks first
// (types, dtypes, shapes, contiguity) is agreed on across the ranks before the library is called
// (agree_on_arguments), so a rank that refuses its operands makes every rank raise instead of
// leaving the others in a collective. The kernels run with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "collective.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/interop.hpp"
#include "netsparse/spgemm.hpp"

namespace netsparse::python {
namespace {

// A DistMatrix and the mpi4py communicator it uses (DistMatrix does not duplicate it: the
// Python object must outlive the matrix, so the matrix holds it).
struct PyDistMatrix {
  py::object comm_obj;
  std::shared_ptr<const DistMatrix> m;
  [[nodiscard]] MPI_Comm comm() const { return m->comm(); }
};

// An engine shared by kernels (RigEngine), with the communicator it was opened on.
struct PyEngine {
  py::object comm_obj;
  std::shared_ptr<RigEngine> engine;
  PyEngine(py::object c, std::shared_ptr<RigEngine> e)
      : comm_obj(std::move(c)), engine(std::move(e)) {}
  PyEngine(const PyEngine&) = default;
  PyEngine& operator=(const PyEngine&) = default;
  ~PyEngine() {
    if (teardown_abandoned()) leak(std::move(engine));  // collective.hpp
  }
};

// ---- CSR arrays from numpy ----------------------------------------------------------------

// Calls f(CsrArrays) for numpy indptr / indices (int32 or int64) and data (float32 or float64),
// which the Python layer has brought to one of those dtypes.
template <class F>
void with_csr_arrays(const py::array& indptr, const py::array& indices, const py::array& data,
                     F&& f) {
  const auto index_span = [](const py::array& a, auto tag) {
    using T = decltype(tag);
    return std::span<const T>(static_cast<const T*>(a.data()), static_cast<std::size_t>(a.size()));
  };
  const auto is = [](const py::array& a, auto tag) { return has_dtype<decltype(tag)>(a); };
  for (const py::array* a : {&indptr, &indices, &data}) {
    if ((a->flags() & py::array::c_style) == 0 || a->ndim() != 1) {
      throw py::value_error("CSR arrays must be 1-D and contiguous");
    }
  }
  const auto with_values = [&](auto row_ptr, auto col_idx) {
    if (is(data, float{})) {
      f(CsrArrays(row_ptr, col_idx, index_span(data, float{})));
    } else if (is(data, double{})) {
      f(CsrArrays(row_ptr, col_idx, index_span(data, double{})));
    } else {
      throw py::value_error("CSR values must be float32 or float64, got " +
                            dtype_text(data.dtype()));
    }
  };
  const auto with_col = [&](auto row_ptr) {
    if (is(indices, std::int32_t{})) {
      with_values(row_ptr, index_span(indices, std::int32_t{}));
    } else if (is(indices, std::int64_t{})) {
      with_values(row_ptr, index_span(indices, std::int64_t{}));
    } else {
      throw py::value_error("CSR indices must be int32 or int64");
    }
  };
  if (is(indptr, std::int32_t{})) {
    with_col(index_span(indptr, std::int32_t{}));
  } else if (is(indptr, std::int64_t{})) {
    with_col(index_span(indptr, std::int64_t{}));
  } else {
    throw py::value_error("CSR indptr must be int32 or int64");
  }
}

// A CsrMatrix as (indptr, indices, data) numpy arrays (copies: int64, int64, float64).
py::tuple csr_to_arrays(const CsrMatrix& c) {
  py::array_t<std::int64_t> indptr(static_cast<py::ssize_t>(c.row_ptr.size()));
  py::array_t<std::int64_t> indices(static_cast<py::ssize_t>(c.col_idx.size()));
  py::array_t<double> data(static_cast<py::ssize_t>(c.values.size()));
  std::copy(c.row_ptr.begin(), c.row_ptr.end(), indptr.mutable_data());
  std::copy(c.col_idx.begin(), c.col_idx.end(), indices.mutable_data());
  std::copy(c.values.begin(), c.values.end(), data.mutable_data());
  return py::make_tuple(indptr, indices, data);
}

py::array_t<std::int64_t> offsets_array(const RowPartition& p) {
  const auto& o = p.offsets();
  py::array_t<std::int64_t> a(static_cast<py::ssize_t>(o.size()));
  std::copy(o.begin(), o.end(), a.mutable_data());
  return a;
}

// (indptr, indices, data, n_cols) of a scipy.sparse matrix, through the Python half of the
// package (netsparse._csr_arrays: COO -> CSR, dtypes the import takes). What it refuses on this
// rank (not a scipy matrix, ...) is agreed on, so every rank raises.
struct ScipyCsr {
  py::array indptr, indices, data;
  std::int64_t n_rows = 0, n_cols = 0;
};
ScipyCsr scipy_csr(MPI_Comm comm, const py::object& matrix, const char* what) {
  ScipyCsr c;
  std::string problem;
  try {
    const py::tuple t = py::module_::import("netsparse").attr("_csr_arrays")(matrix, what);
    c.indptr = t[0];
    c.indices = t[1];
    c.data = t[2];
    const py::tuple shape = t[3];
    c.n_rows = shape[0].cast<std::int64_t>();
    c.n_cols = shape[1].cast<std::int64_t>();
  } catch (py::error_already_set& e) {
    problem = std::string(py::str(e.value()));
  }
  agree_on_arguments(comm, problem);
  return c;
}

PyDistMatrix from_local(py::object comm_obj, const py::object& a_local,
                        std::optional<std::vector<gidx_t>> row_offsets,
                        std::optional<std::vector<gidx_t>> col_offsets, std::string name) {
  const MPI_Comm comm = comm_from(comm_obj);
  const ScipyCsr a = scipy_csr(comm, a_local, "a_local");
  CsrImportOptions opt;
  // A scipy CSR matrix with unsorted or repeated column indices is refused (the message names
  // the row) rather than silently repaired: it usually means the caller built it wrong.
  opt.columns = ColumnOrder::require_sorted;
  if (col_offsets) opt.col_offsets = *col_offsets;
  opt.name = std::move(name);
  std::shared_ptr<DistMatrix> m;
  with_csr_arrays(a.indptr, a.indices, a.data, [&](const CsrArrays& arrays) {
    py::gil_scoped_release release;
    m = std::make_shared<DistMatrix>(row_offsets
                                         ? from_local_csr(comm, *row_offsets, a.n_cols, arrays, opt)
                                         : from_local_csr(comm, a.n_cols, arrays, opt));
  });
  return PyDistMatrix{std::move(comm_obj), std::move(m)};
}

PartitionKind parse_partition(const std::string& s) {
  if (s == "equal_rows") return PartitionKind::equal_rows;
  if (s == "balanced_nnz") return PartitionKind::balanced_nnz;
  throw py::value_error("partition must be 'equal_rows' or 'balanced_nnz', got '" + s + "'");
}

// A pattern of a DistMatrix's rows on this rank, validated once (netsparse.Pattern): handed to
// several kernels' set_pattern (a DistKernel and a TransposedSpmm of one training step) without
// converting and checking the scipy matrix again for each.
struct PyPattern {
  std::shared_ptr<const DistMatrix> of;  // the matrix whose partition it was checked against
  std::shared_ptr<const CsrMatrix> rows;
};

// This rank's rows of a's shape as a CsrMatrix, from a scipy matrix (collective: validated
// and agreed on by from_local_csr) or a Pattern made for a.
std::shared_ptr<const CsrMatrix> pattern_rows(const PyDistMatrix& a, const py::object& matrix) {
  if (py::isinstance<PyPattern>(matrix)) {
    const auto& p = matrix.cast<const PyPattern&>();
    const bool same = p.of == a.m || (p.of->rows().offsets() == a.m->rows().offsets() &&
                                      p.of->cols().offsets() == a.m->cols().offsets());
    agree_on_arguments(a.comm(), same ? std::string()
                                      : std::string("the Pattern was made for "
                                                    "another row / column split"));
    return p.rows;
  }
  const ScipyCsr c = scipy_csr(a.comm(), matrix, "the pattern");
  CsrImportOptions opt;
  opt.columns = ColumnOrder::require_sorted;
  opt.col_offsets = a.m->cols().offsets();
  auto rows = std::make_shared<CsrMatrix>();
  with_csr_arrays(c.indptr, c.indices, c.data, [&](const CsrArrays& arrays) {
    py::gil_scoped_release release;
    DistMatrix d = from_local_csr(a.comm(), a.m->rows().offsets(), c.n_cols, arrays, opt);
    *rows = d.local();
  });
  return rows;
}

// ---- kernels --------------------------------------------------------------------------------

ScalarType parse_dtype(const py::object& dtype) {
  const py::dtype d = py::dtype::from_args(dtype);
  if (same_dtype(d, py::dtype::of<float>())) return ScalarType::f32;
  if (same_dtype(d, py::dtype::of<double>())) return ScalarType::f64;
  throw py::value_error("dtype must be float32 or float64, got " + dtype_text(d));
}

KernelKind parse_kind(const std::string& s) {
  if (s == "spmm") return KernelKind::spmm;
  if (s == "sddmm") return KernelKind::sddmm;
  if (s == "spmv") return KernelKind::spmv;
  throw py::value_error("kind must be 'spmm', 'sddmm' or 'spmv', got '" + s + "'");
}

int parse_progress(const std::string& s) {
  if (s == "auto") return NS_PROGRESS_AUTO;
  if (s == "thread") return NS_PROGRESS_THREAD;
  if (s == "inline") return NS_PROGRESS_INLINE;
  throw py::value_error("progress must be 'auto', 'thread' or 'inline', got '" + s + "'");
}

py::dict stats_dict(const CommStats& s) {
  py::dict d;
  d["runs"] = s.runs;
  d["bytes_sent"] = s.bytes_sent;
  d["payload_bytes_in"] = s.payload_bytes_in;
  d["messages_sent"] = s.messages_sent;
  d["requests"] = s.requests;
  d["wait_seconds"] = s.wait_seconds;
  d["sync_seconds"] = s.sync_seconds;
  d["compute_seconds"] = s.compute_seconds;
  d["post_seconds"] = s.post_seconds;
  d["progress_seconds"] = s.progress_seconds;
  return d;
}

py::object numpy_dtype(ScalarType t) {
  return t == ScalarType::f32 ? py::object(py::dtype::of<float>())
                              : py::object(py::dtype::of<double>());
}

// A new C-contiguous array of `shape` in the kernel's precision.
py::array new_array(ScalarType t, std::vector<py::ssize_t> shape) {
  return t == ScalarType::f32 ? py::array(py::array_t<float>(shape))
                              : py::array(py::array_t<double>(shape));
}

// What the Python handle of a distributed operator holds: the DistMatrix it was built on (kept
// alive with it), the operator, its precision and K. Not copyable; an abandoned teardown
// (collective.hpp) leaks the operator instead of destroying it.
template <class Op>
struct PyDistOperator {
  PyDistMatrix a;
  std::unique_ptr<Op> op;
  ScalarType scalar{};
  int k = 0;
  PyDistOperator() = default;
  PyDistOperator(const PyDistOperator&) = delete;
  PyDistOperator& operator=(const PyDistOperator&) = delete;
  ~PyDistOperator() {
    if (teardown_abandoned()) leak(std::move(op));
  }

  // A new handle (a Self) of the operator make() builds, collectively, with the GIL released.
  template <class Self, class Make>
  static std::unique_ptr<Self> create(const PyDistMatrix& a, ScalarType scalar, int k, Make make) {
    auto self = std::make_unique<Self>();
    self->a = a;
    self->scalar = scalar;
    self->k = k;
    py::gil_scoped_release release;
    self->op = make();
    return self;
  }
};

// The engine a handle was given, or none.
std::shared_ptr<RigEngine> engine_of(const std::optional<PyEngine>& engine) {
  return engine ? engine->engine : std::shared_ptr<RigEngine>{};
}

struct PyDistKernel : PyDistOperator<DistKernel> {
  // The current pattern when set_pattern was called: a dynamic_pattern kernel BORROWS these
  // rows, so they live as long as the kernel uses them.
  std::shared_ptr<const CsrMatrix> pattern;

  [[nodiscard]] gidx_t row_block() const { return a.m->rows().size(a.m->rank()); }
  [[nodiscard]] gidx_t col_block() const { return a.m->cols().size(a.m->rank()); }
  [[nodiscard]] std::int64_t nnz() const { return pattern ? pattern->nnz() : a.m->local().nnz(); }

  // B (cols x K) -> C (rows x K).
  template <class T>
  void run_spmm(py::handle b, py::handle c) {
    std::span<const T> bs;
    std::span<T> cs;
    agree_on_arguments(a.comm(), first_problem({check_array(b, "B", {col_block(), k}, false, bs),
                                                check_array(c, "C", {row_block(), k}, true, cs)}));
    py::gil_scoped_release release;
    op->spmm(bs, cs);
  }
  template <class T>
  void run_sddmm(py::handle x, py::handle y, py::handle out) {
    std::span<const T> xs, ys;
    std::span<T> os;
    agree_on_arguments(a.comm(), first_problem({check_array(x, "X", {row_block(), k}, false, xs),
                                                check_array(y, "Y", {col_block(), k}, false, ys),
                                                check_array(out, "out", {nnz()}, true, os)}));
    py::gil_scoped_release release;
    op->sddmm(xs, ys, os);
  }
  template <class T>
  void run_spmv(py::handle x, py::handle y) {
    std::span<const T> xs;
    std::span<T> ys;
    agree_on_arguments(a.comm(), first_problem({check_array(x, "x", {col_block()}, false, xs),
                                                check_array(y, "y", {row_block()}, true, ys)}));
    py::gil_scoped_release release;
    op->spmv(xs, ys);
  }
};

struct PyTransposedSpmm : PyDistOperator<TransposedSpmm> {
  template <class T>
  void run(py::handle b, py::handle c) {
    const int rank = a.m->rank();
    std::span<const T> bs;
    std::span<T> cs;
    agree_on_arguments(a.comm(),
                       first_problem({check_array(b, "B", {a.m->rows().size(rank), k}, false, bs),
                                      check_array(c, "C", {a.m->cols().size(rank), k}, true, cs)}));
    py::gil_scoped_release release;
    op->spmm(bs, cs);
  }
};

// C = A * B with both operands distributed sparse matrices (DistSpgemm), both operands'
// handles kept alive (their communicator must outlive the product).
struct PySpgemm {
  PyDistMatrix a, b;
  std::unique_ptr<DistSpgemm> op;
  PySpgemm() = default;
  PySpgemm(const PySpgemm&) = delete;
  PySpgemm& operator=(const PySpgemm&) = delete;
  ~PySpgemm() {
    if (teardown_abandoned()) leak(std::move(op));
  }
};

py::dict spgemm_stats_dict(const SpgemmStats& s) {
  py::dict d;
  d["setup_seconds"] = s.setup_seconds;
  d["symbolic_seconds"] = s.symbolic_seconds;
  d["gather_seconds"] = s.gather_seconds;
  d["numeric_seconds"] = s.numeric_seconds;
  d["remote_rows"] = s.remote_rows;
  d["remote_nonzeros"] = s.remote_nonzeros;
  d["setup_bytes_in"] = s.setup_bytes_in;
  d["multiply_bytes_in"] = s.multiply_bytes_in;
  d["chunk"] = s.chunk;
  return d;
}

DistOptions make_options(const std::string& mode, const py::object& dtype, bool dynamic_pattern,
                         std::optional<std::uint64_t> batch, const std::string& progress) {
  DistOptions o;
  o.mode = parse_comm_mode(mode);
  o.scalar = parse_dtype(dtype);
  o.dynamic_pattern = dynamic_pattern;
  if (batch) o.batch = *batch;
  o.engine.progress = parse_progress(progress);
  return o;
}

// Local argument problems of a collective constructor, agreed on before it runs.
template <class F>
auto agreed(MPI_Comm comm, F&& parse) {
  std::string problem;
  decltype(parse()) value{};
  try {
    value = parse();
  } catch (const std::exception& e) {
    problem = e.what();
  }
  agree_on_arguments(comm, problem);
  return value;
}

}  // namespace

void bind_distributed(py::module_& m) {
  py::class_<PyDistMatrix>(m, "DistMatrix", R"(A sparse matrix split over an MPI communicator by
rows (rank p holds rows row_offsets[p]:row_offsets[p+1]). Built with netsparse.DistMatrix(comm,
a_local) from scipy.sparse (python/netsparse/__init__.py) or DistMatrix.load(comm, spec).)")
      .def(py::init(&from_local), R"(Collective: this rank's rows a_local (scipy.sparse, CSR or
COO, global column numbers). row_offsets: nranks + 1 global row offsets (default: the blocks in
rank order); col_offsets: the split of B / x / Y (default: the row split for a square matrix,
equal blocks otherwise). A CSR matrix must have sorted, unique column indices per row (else
ValueError naming the row: call a_local.sum_duplicates()); COO is converted.)",
           py::arg("comm"), py::arg("a_local"), py::arg("row_offsets") = py::none(),
           py::arg("col_offsets") = py::none(), py::arg("name") = "python")
      .def_static(
          "load",
          [](py::object comm_obj, const std::string& spec, const std::string& partition) {
            const MPI_Comm comm = comm_from(comm_obj);
            const PartitionKind kind = agreed(comm, [&] { return parse_partition(partition); });
            std::shared_ptr<DistMatrix> m;
            {
              py::gil_scoped_release release;
              m = std::make_shared<DistMatrix>(load_distributed_matrix(comm, spec, kind));
            }
            return PyDistMatrix{std::move(comm_obj), std::move(m)};
          },
          R"(Collective: a Matrix Market / METIS file or a generator ("gen:kron:16",
"gen:stencil:NX:NY:NZ[:DOF]", "gen:road:W:H"), each rank reading its part.)",
          py::arg("comm"), py::arg("spec"), py::arg("partition") = "equal_rows")
      .def_property_readonly("comm", [](const PyDistMatrix& a) { return a.comm_obj; })
      .def_property_readonly("rank", [](const PyDistMatrix& a) { return a.m->rank(); })
      .def_property_readonly("nranks", [](const PyDistMatrix& a) { return a.m->nranks(); })
      .def_property_readonly(
          "shape",
          [](const PyDistMatrix& a) { return py::make_tuple(a.m->n_rows(), a.m->n_cols()); })
      .def_property_readonly("nnz", [](const PyDistMatrix& a) { return a.m->nnz_global(); })
      .def_property_readonly("name", [](const PyDistMatrix& a) { return a.m->name(); })
      .def_property_readonly(
          "row_offsets", [](const PyDistMatrix& a) { return offsets_array(a.m->rows()); },
          "Rank p holds rows row_offsets[p]:row_offsets[p+1] (C of SpMM, y of SpMV, X of SDDMM).")
      .def_property_readonly(
          "col_offsets", [](const PyDistMatrix& a) { return offsets_array(a.m->cols()); },
          "Rank p holds rows col_offsets[p]:col_offsets[p+1] of B (SpMM), x (SpMV), Y (SDDMM).")
      .def("_local_arrays", [](const PyDistMatrix& a) { return csr_to_arrays(a.m->local()); })
      .def(
          "_sample_rows",
          [](const PyDistMatrix& a, double keep_fraction, int max_per_row, std::uint64_t seed) {
            SamplingParams p;
            p.keep_fraction = keep_fraction;
            p.max_per_row = max_per_row;
            return csr_to_arrays(sample_rows(a.m->local(), p, seed));
          },
          py::arg("keep_fraction"), py::arg("max_per_row"), py::arg("seed"))
      .def("_transpose", [](const PyDistMatrix& a) {
        std::shared_ptr<DistMatrix> t;
        {
          py::gil_scoped_release release;
          t = std::make_shared<DistMatrix>(transpose(*a.m));
        }
        return PyDistMatrix{a.comm_obj, std::move(t)};
      });

  py::class_<PyPattern>(m, "Pattern", R"(Pattern(a, a_local): a new sparsity pattern of this
rank's rows of DistMatrix a (scipy.sparse, the block's shape), checked once (collective), to
hand to several kernels' set_pattern.)")
      .def(py::init([](const PyDistMatrix& a, const py::object& a_local) {
             return PyPattern{a.m, pattern_rows(a, a_local)};
           }),
           py::arg("a"), py::arg("a_local"))
      .def_property_readonly("nnz", [](const PyPattern& p) { return p.rows->nnz(); });

  py::class_<PyEngine>(m, "Engine", R"(A RIG engine (ns_context over MPI) shared by kernels:
netsparse.Engine(comm, progress="auto"). Collective to create and to destroy.)")
      .def(py::init([](py::object comm_obj, const std::string& progress) {
             const MPI_Comm comm = comm_from(comm_obj);
             EngineOptions o;
             o.progress = agreed(comm, [&] { return parse_progress(progress); });
             std::shared_ptr<RigEngine> e;
             {
               py::gil_scoped_release release;
               e = std::make_shared<RigEngine>(comm, o);
             }
             return PyEngine{std::move(comm_obj), std::move(e)};
           }),
           py::arg("comm"), py::arg("progress") = "auto")
      .def_property_readonly("transport",
                             [](const PyEngine& e) { return e.engine->transport_name(); })
      .def("stats_json", [](const PyEngine& e) { return e.engine->stats_json(); })
      .def("reset_stats", [](PyEngine& e) { e.engine->reset_stats(); });

  py::class_<PyDistKernel>(m, "DistKernel", R"(A distributed SpMM / SDDMM / SpMV on a DistMatrix.

DistKernel(a, kind, k, mode="netsparse", dtype=numpy.float32, dynamic_pattern=False,
           engine=None, batch=None, progress="auto")
Collective. kind: "spmm", "sddmm" or "spmv" (k == 1); mode: any netsparse_bench mode
("netsparse", "su", "inspector-executor", ..., or "auto": chosen by timed trial runs, see
chosen_mode and auto_tuning()). The run calls take numpy arrays as they are (no
copy): dtype exactly the kernel's, C-contiguous, this rank's block shape; anything else raises
ValueError on every rank.)")
      .def(py::init([](const PyDistMatrix& a, const std::string& kind, int k,
                       const std::string& mode, const py::object& dtype, bool dynamic_pattern,
                       std::optional<PyEngine> engine, std::optional<std::uint64_t> batch,
                       const std::string& progress) {
             struct Parsed {
               KernelKind kind{};
               DistOptions options;
             };
             const Parsed p = agreed(a.comm(), [&] {
               return Parsed{parse_kind(kind),
                             make_options(mode, dtype, dynamic_pattern, batch, progress)};
             });
             return PyDistKernel::create<PyDistKernel>(a, p.options.scalar, k, [&] {
               return std::make_unique<DistKernel>(*a.m, p.kind, k, p.options, engine_of(engine));
             });
           }),
           py::arg("a"), py::arg("kind"), py::arg("k"), py::arg("mode") = "netsparse",
           py::arg("dtype") = py::dtype::of<float>(), py::arg("dynamic_pattern") = false,
           py::arg("engine") = py::none(), py::arg("batch") = py::none(),
           py::arg("progress") = "auto")
      .def(
          "spmm",
          [](PyDistKernel& s, py::object b, py::object c) {
            if (c.is_none()) c = new_array(s.scalar, {s.row_block(), s.k});
            if (s.scalar == ScalarType::f32) {
              s.run_spmm<float>(b, c);
            } else {
              s.run_spmm<double>(b, c);
            }
            return c;
          },
          "Collective: C = A @ B for this rank's blocks (B: col block x k, C: row block x k); "
          "returns C (written in place when given).",
          py::arg("b"), py::arg("c") = py::none())
      .def(
          "sddmm",
          [](PyDistKernel& s, py::object x, py::object y, py::object out) {
            if (out.is_none()) out = new_array(s.scalar, {s.nnz()});
            if (s.scalar == ScalarType::f32) {
              s.run_sddmm<float>(x, y, out);
            } else {
              s.run_sddmm<double>(x, y, out);
            }
            return out;
          },
          "Collective: out[i] = a_i * dot(X[r_i], Y[c_i]) for this rank's nonzeros in CSR order "
          "(X: row block x k, Y: col block x k).",
          py::arg("x"), py::arg("y"), py::arg("out") = py::none())
      .def(
          "spmv",
          [](PyDistKernel& s, py::object x, py::object y) {
            if (y.is_none()) y = new_array(s.scalar, {s.row_block()});
            if (s.scalar == ScalarType::f32) {
              s.run_spmv<float>(x, y);
            } else {
              s.run_spmv<double>(x, y);
            }
            return y;
          },
          "Collective: y = A @ x for this rank's blocks.", py::arg("x"), py::arg("y") = py::none())
      .def(
          "set_pattern",
          [](PyDistKernel& s, const py::object& a_local) {
            std::shared_ptr<const CsrMatrix> rows = pattern_rows(s.a, a_local);
            {
              py::gil_scoped_release release;
              s.op->set_pattern(*rows);
            }
            s.pattern = std::move(rows);  // the previous rows are no longer borrowed
          },
          R"(Collective: this rank's rows get a new sparsity pattern (scipy.sparse, the block's
shape, e.g. a.sample_rows(...); or a netsparse.Pattern). With dynamic_pattern=True the netsparse mode computes on these
rows directly (no setup); other modes redo their setup.)",
          py::arg("a_local"))
      .def("replicate",
           [](PyDistKernel& s, py::object operand) {
             const gidx_t cols = s.col_block();
             if (s.scalar == ScalarType::f32) {
               std::span<const float> v;
               agree_on_arguments(s.a.comm(),
                                  check_array(operand, "operand", {cols, s.k}, false, v));
               py::gil_scoped_release release;
               s.op->replicate(v);
             } else {
               std::span<const double> v;
               agree_on_arguments(s.a.comm(),
                                  check_array(operand, "operand", {cols, s.k}, false, v));
               py::gil_scoped_release release;
               s.op->replicate(v);
             }
           })
      .def_property_readonly("mode", [](const PyDistKernel& s) { return to_string(s.op->mode()); })
      .def_property_readonly(
          "chosen_mode", [](const PyDistKernel& s) { return to_string(s.op->chosen_mode()); },
          "The mode the runs use: mode, or for mode=\"auto\" the winner once its trials chose "
          "(\"auto\" while they run).")
      .def(
          "auto_tuning",
          [](const PyDistKernel& s) {
            return py::module_::import("json").attr("loads")(s.op->auto_tuning_json());
          },
          "mode=\"auto\": what the trials measured and chose (DistKernel::auto_tuning_json as "
          "a dict: tuned, chosen, chosen_knobs, tune_runs, tunings, setup_seconds, trial_seconds, "
          "trial_runs, candidates [{mode, knobs, skipped, seconds, setup_seconds, run_seconds}]; "
          "a NetSparse winner's engine knobs are tried after the modes).")
      .def(
          "retune",
          [](PyDistKernel& s) {
            py::gil_scoped_release release;
            s.op->retune();
          },
          "mode=\"auto\": tune again from the next run on. Collective.")
      .def_property_readonly("kind",
                             [](const PyDistKernel& s) { return to_string(s.op->kernel()); })
      .def_property_readonly("k", [](const PyDistKernel& s) { return s.k; })
      .def_property_readonly("dtype", [](const PyDistKernel& s) { return numpy_dtype(s.scalar); })
      .def_property_readonly("nnz_local", &PyDistKernel::nnz)
      .def(
          "stats",
          [](const PyDistKernel& s) {
            py::dict d;
            d["last_run"] = stats_dict(s.op->last_run_stats());
            d["total"] = stats_dict(s.op->total_stats());
            d["setup_seconds"] = s.op->setup_seconds();
            d["plan_seconds"] = s.op->plan_seconds();
            d["window_columns"] = s.op->window_columns();
            const PatternVolume v = s.op->volume();
            d["remote_nonzeros"] = v.remote_nonzeros;
            d["unique_remote_cols"] = v.unique_remote_cols;
            if (s.op->engine()) d["engine_json"] = s.op->engine()->stats_json();
            return d;
          },
          "This rank's statistics: 'last_run' and 'total' (bytes, messages, seconds), setup "
          "times, the pattern's remote volume and, for the RIG modes, the engine's counters as "
          "JSON text ('engine_json').")
      .def("reset_stats", [](PyDistKernel& s) { s.op->reset_stats(); })
      .def(
          "_cpp_spmm_seconds",
          [](PyDistKernel& s, py::object b, py::object c, int iters) {
            // The C++ call alone, for the Python-overhead benchmark (python/bench): the same
            // loop as a Python caller's (barrier, spmm, this rank's seconds), without Python.
            std::span<const double> bd;
            std::span<double> cd;
            std::span<const float> bf;
            std::span<float> cf;
            const bool f32 = s.scalar == ScalarType::f32;
            agree_on_arguments(
                s.a.comm(),
                f32 ? first_problem({check_array(b, "B", {s.col_block(), s.k}, false, bf),
                                     check_array(c, "C", {s.row_block(), s.k}, true, cf)})
                    : first_problem({check_array(b, "B", {s.col_block(), s.k}, false, bd),
                                     check_array(c, "C", {s.row_block(), s.k}, true, cd)}));
            std::vector<double> seconds;
            py::gil_scoped_release release;
            for (int i = 0; i < iters; ++i) {
              MPI_Barrier(s.a.comm());
              const double t0 = MPI_Wtime();
              if (f32) {
                s.op->spmm(bf, cf);
              } else {
                s.op->spmm(bd, cd);
              }
              seconds.push_back(MPI_Wtime() - t0);
            }
            return seconds;
          },
          py::arg("b"), py::arg("c"), py::arg("iters"));

  py::class_<PyTransposedSpmm>(m, "TransposedSpmm", R"(C = A^T @ B on a DistMatrix without
forming A^T on one rank (the backward pass of a GNN layer):
TransposedSpmm(a, k, mode="netsparse", dtype=numpy.float32, method="transpose"|"push",
dynamic_pattern=False, engine=None). B: a's row block x k, C: a's column block x k.)")
      .def(py::init([](const PyDistMatrix& a, int k, const std::string& mode,
                       const py::object& dtype, const std::string& method, bool dynamic_pattern,
                       std::optional<PyEngine> engine, const std::string& progress) {
             struct Parsed {
               DistOptions options;
               TransposedMethod method{};
             };
             const Parsed p = agreed(a.comm(), [&] {
               if (method != "transpose" && method != "push") {
                 throw std::invalid_argument("method must be 'transpose' or 'push', got '" +
                                             method + "'");
               }
               return Parsed{
                   make_options(mode, dtype, dynamic_pattern, {}, progress),
                   method == "push" ? TransposedMethod::push : TransposedMethod::via_transpose};
             });
             return PyTransposedSpmm::create<PyTransposedSpmm>(a, p.options.scalar, k, [&] {
               return std::make_unique<TransposedSpmm>(*a.m, k, p.options, p.method,
                                                       engine_of(engine));
             });
           }),
           py::arg("a"), py::arg("k"), py::arg("mode") = "netsparse",
           py::arg("dtype") = py::dtype::of<float>(), py::arg("method") = "transpose",
           py::arg("dynamic_pattern") = false, py::arg("engine") = py::none(),
           py::arg("progress") = "auto")
      .def(
          "spmm",
          [](PyTransposedSpmm& s, py::object b, py::object c) {
            if (c.is_none()) {
              c = new_array(s.scalar, {s.a.m->cols().size(s.a.m->rank()), s.k});
            }
            if (s.scalar == ScalarType::f32) {
              s.run<float>(b, c);
            } else {
              s.run<double>(b, c);
            }
            return c;
          },
          py::arg("b"), py::arg("c") = py::none())
      .def(
          "set_pattern",
          [](PyTransposedSpmm& s, const py::object& a_local) {
            std::shared_ptr<const CsrMatrix> rows = pattern_rows(s.a, a_local);
            py::gil_scoped_release release;
            s.op->set_pattern(*rows);  // copied or transposed inside: need not stay alive
          },
          "Collective: A's rows on this rank get a new pattern (scipy.sparse).", py::arg("a_local"))
      .def("stats", [](const PyTransposedSpmm& s) {
        py::dict d;
        d["last_run"] = stats_dict(s.op->last_run_stats());
        d["total"] = stats_dict(s.op->total_stats());
        d["setup_seconds"] = s.op->setup_seconds();
        d["transpose_seconds"] = s.op->transpose_seconds();
        return d;
      });

  py::class_<PySpgemm>(m, "DistSpgemm", R"(C = A @ B with both operands sparse DistMatrix objects
(B's rows split as A's columns): DistSpgemm(a, b, mode="netsparse"|"su"|"inspector-executor",
dtype=numpy.float64, chunk=0, batch=8192, plans=True, engine=None). Collective: gathers the
pattern of the remote rows of B and runs the symbolic phase once; multiply() then returns C as
a DistMatrix, multiply_values() C's values alone on the fixed pattern, update_values() new
values for the same patterns.)")
      .def(py::init([](const PyDistMatrix& a, const PyDistMatrix& b, const std::string& mode,
                       const py::object& dtype, int chunk, std::uint64_t batch, bool plans,
                       std::optional<PyEngine> engine, const std::string& progress) {
             const SpgemmOptions o = agreed(a.comm(), [&] {
               SpgemmOptions opt;
               opt.mode = parse_spgemm_mode(mode);
               opt.scalar = parse_dtype(dtype);
               if (chunk < 0) throw std::invalid_argument("chunk must be >= 0 (0: automatic)");
               if (batch == 0) throw std::invalid_argument("batch must be >= 1");
               opt.chunk = chunk;
               opt.batch = batch;
               opt.plans = plans;
               opt.engine.progress = parse_progress(progress);
               return opt;
             });
             auto self = std::make_unique<PySpgemm>();
             self->a = a;
             self->b = b;
             py::gil_scoped_release release;
             self->op = std::make_unique<DistSpgemm>(*a.m, *b.m, o, engine_of(engine));
             return self;
           }),
           py::arg("a"), py::arg("b"), py::arg("mode") = "netsparse",
           py::arg("dtype") = py::dtype::of<double>(), py::arg("chunk") = 0,
           py::arg("batch") = 8192, py::arg("plans") = true, py::arg("engine") = py::none(),
           py::arg("progress") = "auto")
      .def(
          "multiply",
          [](PySpgemm& s) {
            std::shared_ptr<DistMatrix> c;
            {
              py::gil_scoped_release release;
              c = std::make_shared<DistMatrix>(s.op->multiply());
            }
            return PyDistMatrix{s.a.comm_obj, std::move(c)};
          },
          "Collective: C = A @ B with the current values, as a DistMatrix (A's rows, B's columns).")
      .def(
          "multiply_values",
          [](PySpgemm& s, py::object out) {
            if (out.is_none())
              out = py::array_t<double>(static_cast<py::ssize_t>(s.op->local_nnz()));
            std::span<double> values;
            agree_on_arguments(s.a.comm(),
                               check_array(out, "out", {s.op->local_nnz()}, true, values));
            py::gil_scoped_release release;
            s.op->multiply_values(values);
            return out;
          },
          R"(Collective: C's values on this rank (local_nnz float64, in the CSR order of
multiply()'s C.local()), into `out` when given.)",
          py::arg("out") = py::none())
      .def(
          "update_values",
          [](PySpgemm& s, const py::object& a_values, const py::object& b_values) {
            std::span<const double> av, bv;
            const std::string problem = first_problem(
                {check_array(a_values, "a_values", {s.a.m->local().nnz()}, false, av),
                 check_array(b_values, "b_values", {s.b.m->local().nnz()}, false, bv)});
            // Local in C++ (checked by the next multiply); agreed here so a rank's refusal
            // raises on every rank at once.
            agree_on_arguments(s.a.comm(), problem);
            s.op->update_values(av, bv);
          },
          R"(Collective here: new values for A's and B's local nonzeros (float64, this rank's
a.local().nnz and b.local().nnz, in their CSR order); the patterns stay.)",
          py::arg("a_values"), py::arg("b_values"))
      .def_property_readonly("local_nnz", [](const PySpgemm& s) { return s.op->local_nnz(); })
      .def("stats", [](const PySpgemm& s) { return spgemm_stats_dict(s.op->stats()); });
}

}  // namespace netsparse::python
