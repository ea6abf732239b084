// netsparse._netsparse: the compiled half of the `netsparse` Python package (the Python half,
// python/netsparse/__init__.py, takes scipy.sparse matrices apart and documents the API).
//
// Errors: the library's exceptions arrive with their message -- std::invalid_argument (and
// ParseError's cousins that pybind11 maps) as ValueError, netsparse::Error (a C API status) as
// netsparse.Error (a RuntimeError subclass with .status), ParseError as netsparse.ParseError (a
// ValueError subclass), anything else as RuntimeError.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "collective.hpp"
#include "netsparse/netsparse.hpp"
#include "netsparse/sparse_error.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_netsparse, m) {
  m.doc() = "NetSparse: distributed SpMM / SDDMM / SpMV and the Remote Indexed Gather verb";
  netsparse::python::import_mpi4py_api();

  static py::exception<netsparse::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<netsparse::ParseError> parse_error(m, "ParseError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const netsparse::Error& e) {
      py::object instance = py::reinterpret_borrow<py::object>(error.ptr())(e.what());
      instance.attr("status") = e.status();
      PyErr_SetObject(error.ptr(), instance.ptr());
    } catch (const netsparse::ParseError& e) {
      parse_error(e.what());
    }
  });

  m.def("_abandon_teardown", &netsparse::python::abandon_teardown,
        "Called by the package's atexit hook when an uncaught exception ends this rank.");
  netsparse::python::bind_distributed(m);
  netsparse::python::bind_rig(m);
  netsparse::python::bind_collectives(m);
  netsparse::python::bind_embedding(m);
}
