#include "agreement/mpi.hpp"

#include <sched.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "netsparse/sparse_error.hpp"
#include "support/memory.hpp"
#include "support/peer_failure.hpp"

namespace netsparse::agreement {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw std::runtime_error(std::string(call) + " failed: " +
                           (len > 0 ? std::string(text, static_cast<std::size_t>(len))
                                    : "MPI error " + std::to_string(rc)));
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

int comm_size(MPI_Comm comm) {
  int n = 0;
  check_mpi(MPI_Comm_size(comm, &n), "MPI_Comm_size");
  return n;
}

void allreduce_within(void* inout, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      std::chrono::milliseconds deadline) {
  if (deadline.count() <= 0) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, inout, count, type, op, comm), "MPI_Allreduce");
    return;
  }
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, inout, count, type, op, comm, &req), "MPI_Iallreduce");
  const auto start = std::chrono::steady_clock::now();
  for (int done = 0, polls = 0;; ++polls) {
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test (allreduce_within)");
    if (done) return;
    if (polls < 256) continue;  // the common case: the others are a few microseconds away
    if (polls < 10000) {        // ranks share cores: give the others the core, then back off
      sched_yield();
      continue;
    }
    if (std::chrono::steady_clock::now() - start > deadline) {
      support::record_peer_failure("a collective step of the library timed out");
      throw std::runtime_error("not every rank joined within " + std::to_string(deadline.count()) +
                               " ms (a rank died or is stuck)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

Verdict settle_over_mpi(const Agreement& mine, MPI_Comm comm, std::chrono::milliseconds deadline) {
  // max(refused), max(digest), max(~digest) = ~min(digest): equal digests iff max == min.
  // The record's size too: ranks whose records differ in size are in different calls (a caller's
  // bug), and gathering records of different sizes would corrupt memory.
  const std::uint64_t d = mine.digest(), bytes = mine.record_bytes();
  std::uint64_t round1[5] = {mine.refused() ? 1u : 0u, d, ~d, bytes, ~bytes};
  allreduce_within(round1, 5, MPI_UINT64_T, MPI_MAX, comm, deadline);
  if (round1[3] != ~round1[4]) {
    throw std::logic_error(
        "the ranks are in different collective calls (their argument records differ in size)");
  }
  if (round1[0] == 0 && round1[1] == ~round1[2]) return {};
  const int size = comm_size(comm);
  return mine.settle(size, [comm](const void* me, std::size_t bytes, void* all) {
    check_mpi(MPI_Allgather(me, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes),
                            MPI_BYTE, comm),
              "MPI_Allgather (agreement)");
  });
}

namespace {

// The exception kinds agree_on_failure reproduces, as the refusal status (nonzero).
enum class ErrorKind : std::int32_t {
  parse = 1,
  invalid_argument,
  overflow,
  logic,
  runtime,
  out_of_memory
};

// A ParseError travels as "<file bytes>:<line>:<file><reason>", the others as their text.
void describe_into(Agreement& a, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const ParseError& e) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::parse), std::to_string(e.file().size()) + ":" +
                                                              std::to_string(e.line()) + ":" +
                                                              e.file() + e.reason());
  } catch (const support::OutOfMemory& e) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::out_of_memory), e.what());
  } catch (const std::invalid_argument& e) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::invalid_argument), e.what());
  } catch (const std::overflow_error& e) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::overflow), e.what());
  } catch (const std::logic_error& e) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::logic), e.what());
  } catch (const std::exception& e) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::runtime), e.what());
  } catch (...) {
    a.refuse(static_cast<std::int32_t>(ErrorKind::runtime), "unknown exception");
  }
}

[[noreturn]] void throw_parse_error(const std::string& what) {
  const std::size_t c1 = what.find(':');
  const std::size_t c2 = what.find(':', c1 + 1);
  const std::size_t file_bytes = std::stoull(what.substr(0, c1));
  const std::int64_t line = std::stoll(what.substr(c1 + 1, c2 - c1 - 1));
  throw ParseError(what.substr(c2 + 1, file_bytes), line, what.substr(c2 + 1 + file_bytes));
}

}  // namespace

void agree_on_failure(MPI_Comm comm, std::exception_ptr error) {
  agree_on_failure(comm, std::move(error), std::chrono::milliseconds(0));
}

void agree_on_failure(MPI_Comm comm, std::exception_ptr error, std::chrono::milliseconds deadline) {
  agree_on_call(comm, "", Agreement{}, std::move(error), deadline);
}

void agree_on_call(MPI_Comm comm, std::string_view fn, Agreement agreed, std::exception_ptr error,
                   std::chrono::milliseconds deadline) {
  if (error) describe_into(agreed, error);
  const Verdict v = settle_over_mpi(agreed, comm, deadline);
  if (v.ok()) return;
  if (!v.refused) throw std::invalid_argument(std::string(fn) + ": the " + v.reason);
  if (error) std::rethrow_exception(error);
  switch (static_cast<ErrorKind>(v.status)) {
    case ErrorKind::parse:
      throw_parse_error(v.what);
    case ErrorKind::invalid_argument:
      throw std::invalid_argument(v.what);
    case ErrorKind::overflow:
      throw std::overflow_error(v.what);
    case ErrorKind::logic:
      throw std::logic_error(v.what);
    case ErrorKind::out_of_memory:
      throw support::OutOfMemory(v.what);
    case ErrorKind::runtime:
      break;
  }
  throw std::runtime_error(v.reason);
}

}  // namespace netsparse::agreement
