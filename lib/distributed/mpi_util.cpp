#include "distributed/mpi_util.hpp"

#include <sched.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

#include "netsparse/sparse_error.hpp"

namespace netsparse::dist {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(call) + " failed: " + std::string(text, len));
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

namespace {

enum class ErrorKind : std::int64_t { parse, invalid_argument, overflow, logic, runtime };

struct ErrorDescription {
  ErrorKind kind = ErrorKind::runtime;
  std::int64_t line = 0;
  std::string file;
  std::string text;  // reason for ParseError, what() otherwise
};

ErrorDescription describe(std::exception_ptr error) {
  ErrorDescription d;
  try {
    std::rethrow_exception(error);
  } catch (const ParseError& e) {
    d.kind = ErrorKind::parse;
    d.line = e.line();
    d.file = e.file();
    d.text = e.reason();
  } catch (const std::invalid_argument& e) {
    d.kind = ErrorKind::invalid_argument;
    d.text = e.what();
  } catch (const std::overflow_error& e) {
    d.kind = ErrorKind::overflow;
    d.text = e.what();
  } catch (const std::logic_error& e) {
    d.kind = ErrorKind::logic;
    d.text = e.what();
  } catch (const std::exception& e) {
    d.text = e.what();
  } catch (...) {
    d.text = "unknown exception";
  }
  return d;
}

[[noreturn]] void throw_described(const ErrorDescription& d, int from_rank) {
  switch (d.kind) {
    case ErrorKind::parse:
      throw ParseError(d.file, d.line, d.text);
    case ErrorKind::invalid_argument:
      throw std::invalid_argument(d.text);
    case ErrorKind::overflow:
      throw std::overflow_error(d.text);
    case ErrorKind::logic:
      throw std::logic_error(d.text);
    case ErrorKind::runtime:
      break;
  }
  throw std::runtime_error("rank " + std::to_string(from_rank) + ": " + d.text);
}

}  // namespace

void agree_on_failure(MPI_Comm comm, std::exception_ptr error) {
  agree_on_failure(comm, std::move(error), std::chrono::milliseconds(0));
}

void agree_on_failure(MPI_Comm comm, std::exception_ptr error, std::chrono::milliseconds deadline) {
  const int rank = comm_rank(comm);
  int lowest = error ? rank : INT_MAX;
  if (deadline.count() <= 0) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  } else {
    MPI_Request req = MPI_REQUEST_NULL;
    const int mine = lowest;
    check_mpi(MPI_Iallreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm, &req), "MPI_Iallreduce");
    const auto start = std::chrono::steady_clock::now();
    for (int done = 0, polls = 0;; ++polls) {
      check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
      if (polls < 10000) {  // ranks share cores: give the others the core, then back off
        sched_yield();
        continue;
      }
      if (std::chrono::steady_clock::now() - start > deadline) {
        // The request stays pending: a collective cannot be cancelled, and the job is failing.
        throw std::runtime_error("not every rank joined within " +
                                 std::to_string(deadline.count()) +
                                 " ms (a rank died or is stuck)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  if (lowest == INT_MAX) return;

  // The lowest failing rank describes its error to everybody: kind, line, then the two strings.
  ErrorDescription d;
  std::int64_t head[4] = {0, 0, 0, 0};
  if (rank == lowest) {
    d = describe(error);
    head[0] = static_cast<std::int64_t>(d.kind);
    head[1] = d.line;
    head[2] = static_cast<std::int64_t>(d.file.size());
    head[3] = static_cast<std::int64_t>(d.text.size());
  }
  check_mpi(MPI_Bcast(head, 4, MPI_INT64_T, lowest, comm), "MPI_Bcast");
  std::string both = d.file + d.text;
  both.resize(static_cast<std::size_t>(head[2] + head[3]));
  check_mpi(MPI_Bcast(both.data(), static_cast<int>(both.size()), MPI_CHAR, lowest, comm),
            "MPI_Bcast");
  if (error) std::rethrow_exception(error);
  d.kind = static_cast<ErrorKind>(head[0]);
  d.line = head[1];
  d.file = both.substr(0, static_cast<std::size_t>(head[2]));
  d.text = both.substr(static_cast<std::size_t>(head[2]));
  throw_described(d, lowest);
}

ByteBlockType::ByteBlockType(std::size_t bytes) {
  check_mpi(MPI_Type_contiguous(to_mpi_count(bytes, "ByteBlockType"), MPI_BYTE, &type_),
            "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&type_), "MPI_Type_commit");
}

ByteBlockType::~ByteBlockType() {
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

}  // namespace netsparse::dist
