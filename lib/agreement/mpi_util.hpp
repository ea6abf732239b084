// Small MPI helpers over the checked calls of mpi.hpp: a collective call within a deadline,
// polling requests until a deadline, MPI counts, a byte-block datatype, an all-to-all of items.
// Used by the distributed layer, the Conveyors analogue (lib/conveyor) and the hosts (lib/hosts).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi.hpp"

namespace netsparse::agreement {

// Runs f() on every rank and agrees on failure within `deadline` (see above).
template <class F>
void collective_call_within(MPI_Comm comm, std::chrono::milliseconds deadline, F&& f) {
  std::exception_ptr error;
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_failure(comm, error, deadline);
}

// Polls MPI_Testall on `requests` until they are all done (true) or `until` passes (false),
// calling idle() between polls (a yield, or the engine's progress). Never blocks in MPI, so a
// peer that died cannot hold the caller past the deadline.
template <class Idle>
[[nodiscard]] bool test_all_until(std::span<MPI_Request> requests,
                                  std::chrono::steady_clock::time_point until, Idle&& idle) {
  for (;;) {
    int done = 0;
    check_mpi(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    if (done) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    idle();
  }
}

// An int count for an MPI call, or std::overflow_error naming what overflowed.
[[nodiscard]] inline int to_mpi_count(std::uint64_t n, const char* what) {
  if (n > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    throw std::overflow_error(std::string(what) + ": " + std::to_string(n) +
                              " elements exceed an MPI count (2^31 - 1)");
  }
  return static_cast<int>(n);
}

// A contiguous MPI datatype of `bytes` bytes, freed with the object.
class ByteBlockType {
 public:
  explicit ByteBlockType(std::size_t bytes);
  ~ByteBlockType();
  ByteBlockType(const ByteBlockType&) = delete;
  ByteBlockType& operator=(const ByteBlockType&) = delete;
  [[nodiscard]] MPI_Datatype get() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// Sends items of type T (trivially copyable) to their destination ranks: send[p] goes to p.
// Returns what every rank sent here, concatenated in rank order; `from_counts`, if given,
// receives how many came from each rank. Collective.
template <class T>
std::vector<T> exchange_all_to_all(MPI_Comm comm, const std::vector<std::vector<T>>& send,
                                   std::vector<int>* from_counts = nullptr) {
  static_assert(std::is_trivially_copyable_v<T>);
  const int nranks = comm_size(comm);
  std::vector<int> send_counts(nranks), recv_counts(nranks), send_displs(nranks + 1, 0),
      recv_displs(nranks + 1, 0);
  std::uint64_t send_total = 0;
  for (int p = 0; p < nranks; ++p) {
    send_counts[p] = to_mpi_count(send[p].size(), "exchange_all_to_all");
    send_total += send[p].size();
  }
  check_mpi(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm),
            "MPI_Alltoall");
  std::uint64_t recv_total = 0;
  for (int p = 0; p < nranks; ++p) {
    send_displs[p + 1] = to_mpi_count(send_displs[p] + std::uint64_t(send_counts[p]),
                                      "exchange_all_to_all send displacement");
    recv_displs[p + 1] = to_mpi_count(recv_displs[p] + std::uint64_t(recv_counts[p]),
                                      "exchange_all_to_all receive displacement");
    recv_total += static_cast<std::uint64_t>(recv_counts[p]);
  }
  std::vector<T> packed;
  packed.reserve(send_total);
  for (const auto& part : send) packed.insert(packed.end(), part.begin(), part.end());
  std::vector<T> received(recv_total);
  ByteBlockType item(sizeof(T));
  check_mpi(
      MPI_Alltoallv(packed.data(), send_counts.data(), send_displs.data(), item.get(),
                    received.data(), recv_counts.data(), recv_displs.data(), item.get(), comm),
      "MPI_Alltoallv");
  if (from_counts != nullptr) *from_counts = std::move(recv_counts);
  return received;
}

}  // namespace netsparse::agreement

namespace netsparse::dist {

// The distributed layer's names for the shared checked MPI calls, the failure agreement and the
// helpers above.
using agreement::agree_on_failure;
using agreement::ByteBlockType;
using agreement::check_mpi;
using agreement::collective_call;
using agreement::collective_call_within;
using agreement::comm_rank;
using agreement::comm_size;
using agreement::exchange_all_to_all;
using agreement::test_all_until;
using agreement::to_mpi_count;

}  // namespace netsparse::dist
