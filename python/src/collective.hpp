// The MPI side of the Python module: communicators from mpi4py, and the agreement that keeps a
// rank whose arguments are refused in Python from stranding the others in a collective.
#pragma once

#include <mpi.h>
#include <pybind11/pybind11.h>

#include <string>
#include <type_traits>
#include <utility>

namespace netsparse::python {

// Imports mpi4py's C API (mpi4py.MPI, which initializes MPI). Called once from the module's init.
void import_mpi4py_api();

// The MPI_Comm inside an mpi4py.MPI.Comm (Intracomm, ...), through mpi4py's C API
// (PyMPIComm_Get). TypeError for anything else, ValueError for MPI.COMM_NULL.
[[nodiscard]] MPI_Comm comm_from(pybind11::handle comm);

// Collective over comm: every rank passes what it found wrong with its arguments (empty: nothing).
// If any rank found something, every rank raises ValueError: the rank that found it with its own
// text, the others with "rank R: <the lowest such rank's text>". Costs one MPI_Allreduce of an
// int when every rank is fine. Call it with the GIL held.
void agree_on_arguments(MPI_Comm comm, const std::string& problem);

// Teardown after an uncaught exception. The objects' destructors are collective (an engine's
// ns_close, a region's deregistration wait for every rank), so a rank that ends on an uncaught
// exception while its peers wait in a collective would wait for them in its own interpreter
// teardown, before mpi4py's MPI_Abort (python3 -m mpi4py) could end the job. The package's
// atexit hook calls abandon_teardown() in that case, and the destructors then leave the C++
// objects as they are (leak()) instead of tearing them down: the process is ending anyway.
void abandon_teardown() noexcept;
[[nodiscard]] bool teardown_abandoned() noexcept;
// Moves `object` to the heap and never frees it.
template <class T>
void leak(T&& object) {
  (void)new std::remove_cvref_t<T>(std::forward<T>(object));
}

}  // namespace netsparse::python
