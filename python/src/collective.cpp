#include "collective.hpp"

// mpi4py's C API: PyMPIComm_Type, PyMPIComm_Get (mpi4py/include, found by python/CMakeLists.txt).
#include <mpi4py/mpi4py.h>

#include <atomic>
#include <climits>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

namespace netsparse::python {

void import_mpi4py_api() {
  if (import_mpi4py() < 0) throw py::error_already_set();
}

MPI_Comm comm_from(py::handle comm) {
  if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type)) {
    throw py::type_error("expected an mpi4py communicator (e.g. MPI.COMM_WORLD), got " +
                         std::string(py::str(py::type::of(comm).attr("__name__"))));
  }
  MPI_Comm* c = PyMPIComm_Get(comm.ptr());
  if (c == nullptr) throw py::error_already_set();
  if (*c == MPI_COMM_NULL) throw py::value_error("the communicator is MPI.COMM_NULL");
  return *c;
}

namespace {
std::atomic<bool> abandoned{false};
}  // namespace

void abandon_teardown() noexcept {
  abandoned = true;
}
bool teardown_abandoned() noexcept {
  return abandoned;
}

void agree_on_arguments(MPI_Comm comm, const std::string& problem) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // The lowest rank with a problem (INT_MAX: none). One small collective in the common case.
  int first = problem.empty() ? INT_MAX : rank;
  if (MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
    throw std::runtime_error("MPI_Allreduce failed while checking the arguments");
  }
  if (first == INT_MAX) return;
  // Its text travels to every rank, so each raises the same reason.
  int length = rank == first ? static_cast<int>(problem.size()) : 0;
  MPI_Bcast(&length, 1, MPI_INT, first, comm);
  std::vector<char> text(static_cast<std::size_t>(length));
  if (rank == first) text.assign(problem.begin(), problem.end());
  MPI_Bcast(text.data(), length, MPI_CHAR, first, comm);
  if (!problem.empty()) throw py::value_error(problem);
  throw py::value_error("rank " + std::to_string(first) + ": " +
                        std::string(text.begin(), text.end()));
}

}  // namespace netsparse::python
