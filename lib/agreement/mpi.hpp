// The checked MPI calls every component shares, and agreement over an MPI communicator: the
// argument record (agreement.hpp) and the failure agreement of collective calls.
#pragma once

#include <mpi.h>

#include <chrono>
#include <exception>
#include <string_view>
#include <type_traits>
#include <utility>

#include "agreement/agreement.hpp"

namespace netsparse::agreement {

// Throws std::runtime_error "<call> failed: <MPI's error text>" when rc is not MPI_SUCCESS.
// (MPI's default handler aborts before we get here; this matters with MPI_ERRORS_RETURN.)
void check_mpi(int rc, const char* call);

[[nodiscard]] int comm_rank(MPI_Comm comm);
[[nodiscard]] int comm_size(MPI_Comm comm);

// MPI_Allreduce in place of `count` elements, but a rank that never joins (dead) makes the
// others throw std::runtime_error after `deadline` instead of waiting forever: a nonblocking
// allreduce polled until then (a collective cannot be cancelled: the request stays pending, the
// job is failing anyway). deadline <= 0: a plain MPI_Allreduce. Collective.
void allreduce_within(void* inout, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      std::chrono::milliseconds deadline);

// Agreement::settle over `comm`, in two rounds so that the common case stays one small
// MPI_Allreduce (refused anywhere? the fields' digests equal?); every rank's record is
// gathered only when something is wrong. Collective; throws (check_mpi) when MPI fails.
[[nodiscard]] Verdict settle_over_mpi(const Agreement& mine, MPI_Comm comm,
                                      std::chrono::milliseconds deadline = {});

// Collective failure agreement. Every rank passes the exception it caught (or null). If any rank
// failed, every rank throws, so no rank is left waiting in the next collective: a failing rank
// rethrows its own exception, the others throw a copy of the lowest failing rank's (the same
// kind -- ParseError with the same file / line / reason, std::invalid_argument,
// std::overflow_error, std::logic_error, support::OutOfMemory (a std::bad_alloc), else
// std::runtime_error "rank r: ..." -- and the same text). Returns normally when no rank failed.
void agree_on_failure(MPI_Comm comm, std::exception_ptr error);
// Same, but a rank that never joins (dead) makes the others throw std::runtime_error after
// `deadline` instead of waiting forever: the first round is a nonblocking allreduce polled until
// then; the second runs only when every rank joined. deadline <= 0: as above.
void agree_on_failure(MPI_Comm comm, std::exception_ptr error, std::chrono::milliseconds deadline);

// agree_on_failure, and the values `agreed` holds (Agreement::field) must be the same on every
// rank: their digest rides in the same small allreduce, so agreeing on a call's arguments costs
// no collective beyond the failure agreement (the records are gathered only when something is
// wrong). A refusal (`error`) wins as above; otherwise a field that differs makes every rank
// throw std::invalid_argument "<fn>: the ranks disagree on <field>: rank 0 has <a>, rank r has
// <b> (...)". Every rank declares the same fields in the same order.
void agree_on_call(MPI_Comm comm, std::string_view fn, Agreement agreed, std::exception_ptr error,
                   std::chrono::milliseconds deadline = {});

// Runs f() on every rank and agrees on failure (see above).
template <class F>
auto collective_call(MPI_Comm comm, F&& f) -> decltype(f()) {
  std::exception_ptr error;
  if constexpr (std::is_void_v<decltype(f())>) {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
    agree_on_failure(comm, error);
  } else {
    decltype(f()) result{};
    try {
      result = f();
    } catch (...) {
      error = std::current_exception();
    }
    agree_on_failure(comm, error);
    return result;
  }
}

// Runs f() on every rank and agrees on failure and on the values of `agreed` (agree_on_call).
template <class F>
void collective_call_agreed(MPI_Comm comm, std::string_view fn, Agreement agreed, F&& f,
                            std::chrono::milliseconds deadline = {}) {
  std::exception_ptr error;
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_call(comm, fn, std::move(agreed), error, deadline);
}

}  // namespace netsparse::agreement
