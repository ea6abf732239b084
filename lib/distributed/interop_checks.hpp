// The checks interop.cpp and dense_interop.cpp share: every rank runs a check and fails alike,
// values every rank must pass alike, an invalid argument.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi_util.hpp"

namespace netsparse::dist::interop {

using agreement::check_mpi;

// Runs check() on every rank. If any rank threw, EVERY rank throws the exception of the lowest
// rank that threw (that rank its own, the others a copy with the same kind and text), so the
// message is the same everywhere.
template <class F>
inline void checked_on_every_rank(MPI_Comm comm, F&& check) {
  std::exception_ptr error;
  try {
    check();
  } catch (...) {
    error = std::current_exception();
  }
  const int rank = comm_rank(comm);
  int lowest = error ? rank : INT_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (lowest == INT_MAX) return;
  agree_on_failure(comm, rank == lowest ? error : nullptr);
}

// Values every rank must pass alike: the same reduction on every rank finds the first one that
// differs, so every rank throws the same message.
struct Agreed {
  std::string name;
  std::int64_t value;
};
inline void require_agreement(MPI_Comm comm, const char* fn, const std::vector<Agreed>& values,
                              const std::string& hint) {
  const std::size_t n = values.size();
  std::vector<std::int64_t> v(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    v[2 * i] = values[i].value;
    v[2 * i + 1] = values[i].value == INT64_MIN ? INT64_MAX : -values[i].value;
  }
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_MAX, comm),
      "MPI_Allreduce");
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t hi = v[2 * i], lo = -v[2 * i + 1];
    if (hi != lo) {
      throw std::invalid_argument(std::string(fn) + ": the ranks disagree on " + values[i].name +
                                  " (from " + std::to_string(lo) + " to " + std::to_string(hi) +
                                  " over the ranks)" + hint);
    }
  }
}

[[noreturn]] inline void fail(const std::string& what) {
  throw std::invalid_argument(what);
}

}  // namespace netsparse::dist::interop
