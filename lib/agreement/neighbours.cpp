#include "agreement/neighbours.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "agreement/mpi.hpp"
#include "support/peer_failure.hpp"

namespace netsparse::agreement {

std::vector<int> sources_of(MPI_Comm comm, std::span<const int> targets,
                            std::chrono::milliseconds deadline) {
  const int size = comm_size(comm);
  std::vector<int> to(targets.begin(), targets.end());
  for (const int t : to) {
    if (t < 0 || t >= size) {
      throw std::invalid_argument("sources_of: target rank " + std::to_string(t) +
                                  " is not in [0, " + std::to_string(size) + ")");
    }
  }
  std::sort(to.begin(), to.end());
  to.erase(std::unique(to.begin(), to.end()), to.end());

  MPI_Comm nbx = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &nbx), "MPI_Comm_dup (sources_of)");
  struct Free {
    MPI_Comm& c;
    ~Free() {
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    }
  } free_nbx{nbx};
  MPI_Comm_set_errhandler(nbx, MPI_ERRORS_RETURN);

  constexpr int kTag = 0x4e42;  // "NB"
  std::vector<MPI_Request> sends(to.size(), MPI_REQUEST_NULL);
  char none = 0;
  for (std::size_t k = 0; k < to.size(); ++k) {
    check_mpi(MPI_Issend(&none, 0, MPI_BYTE, to[k], kTag, nbx, &sends[k]), "MPI_Issend");
  }
  std::vector<int> sources;
  MPI_Request barrier = MPI_REQUEST_NULL;
  bool in_barrier = false;
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    int flag = 0;
    MPI_Status status;
    check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, kTag, nbx, &flag, &status), "MPI_Iprobe");
    if (flag) {
      check_mpi(MPI_Recv(&none, 0, MPI_BYTE, status.MPI_SOURCE, kTag, nbx, MPI_STATUS_IGNORE),
                "MPI_Recv");
      sources.push_back(status.MPI_SOURCE);
      continue;
    }
    if (!in_barrier) {
      int all_sent = 0;
      check_mpi(
          MPI_Testall(static_cast<int>(sends.size()), sends.data(), &all_sent, MPI_STATUSES_IGNORE),
          "MPI_Testall");
      if (all_sent) {  // every target received its message: this rank's part is done
        check_mpi(MPI_Ibarrier(nbx, &barrier), "MPI_Ibarrier");
        in_barrier = true;
      }
    } else {
      int done = 0;
      check_mpi(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
    }
    if (deadline.count() > 0 && std::chrono::steady_clock::now() > give_up) {
      support::record_peer_failure("sources_of: a rank did not join in time");
      // The requests stay pending (a peer is gone; the job is failing): the duplicate is leaked
      // rather than freed under them.
      nbx = MPI_COMM_NULL;
      throw std::runtime_error("sources_of: a rank did not join within " +
                               std::to_string(deadline.count()) + " ms (a peer probably died)");
    }
  }
  std::sort(sources.begin(), sources.end());
  return sources;
}

}  // namespace netsparse::agreement
