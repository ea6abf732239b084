#include <climits>
#include <stdexcept>
#include <string>

#include "agreement/mpi_util.hpp"
#include "conveyor/porter.hpp"

namespace netsparse::dist {

MpiPorter::MpiPorter(MPI_Comm comm) {
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  rank_ = comm_rank(comm_);
  size_ = comm_size(comm_);
}

MpiPorter::~MpiPorter() {
  // Normally every session completed (nothing in flight). After an exception the receives are
  // cancelled and unfinished sends released to MPI.
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    MPI_Request& r = requests_[i];
    if (r == MPI_REQUEST_NULL) continue;
    if (i < static_cast<std::size_t>(send_slots_)) {
      MPI_Request_free(&r);
    } else {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::size_t MpiPorter::max_buffer_bytes() const noexcept {
  return INT_MAX;
}

void MpiPorter::begin(int send_slots, int receive_slots, std::size_t max_bytes) {
  for (const MPI_Request& r : requests_) {
    if (r != MPI_REQUEST_NULL) throw std::logic_error("MpiPorter::begin: the last session is live");
  }
  ++session_;
  send_slots_ = send_slots;
  max_bytes_ = max_bytes;
  requests_.assign(static_cast<std::size_t>(send_slots + receive_slots), MPI_REQUEST_NULL);
  recv_.resize(static_cast<std::size_t>(receive_slots));
  indices_.resize(requests_.size());
  statuses_.resize(requests_.size());
  for (int s = 0; s < receive_slots; ++s) {
    recv_[s].resize(max_bytes);
    post_receive(s);
  }
}

void MpiPorter::post_receive(int slot) {
  // A peer can be at most one session ahead, so the session's parity as tag keeps the next
  // session's buffers out of this session's receives.
  check_mpi(MPI_Irecv(recv_[slot].data(), static_cast<int>(max_bytes_), MPI_BYTE, MPI_ANY_SOURCE,
                      tag(), comm_, &requests_[send_slots_ + slot]),
            "MPI_Irecv");
}

void MpiPorter::send(int slot, int dest, std::span<std::byte> buffer) {
  check_mpi(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, dest, tag(), comm_,
                      &requests_[slot]),
            "MPI_Isend");
}

void MpiPorter::poll(int* sent, int* n_sent, Arrival* arrived, int* n_arrived) {
  *n_sent = 0;
  *n_arrived = 0;
  if (requests_.empty()) return;
  int n = 0;
  check_mpi(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &n, indices_.data(),
                         statuses_.data()),
            "MPI_Testsome");
  if (n == MPI_UNDEFINED) return;  // nothing active
  for (int i = 0; i < n; ++i) {
    const int at = indices_[i];
    if (at < send_slots_) {
      sent[(*n_sent)++] = at;
      continue;
    }
    const int slot = at - send_slots_;
    int bytes = 0;
    check_mpi(MPI_Get_count(&statuses_[i], MPI_BYTE, &bytes), "MPI_Get_count");
    arrived[(*n_arrived)++] =
        Arrival{slot, statuses_[i].MPI_SOURCE,
                std::span<const std::byte>(recv_[slot].data(), static_cast<std::size_t>(bytes))};
  }
}

void MpiPorter::release(int slot) {
  post_receive(slot);
}

void MpiPorter::end() {
  // No peer sends this session anything more, so the posted receives can only be cancelled
  // (the next session uses the other tag).
  for (std::size_t i = static_cast<std::size_t>(send_slots_); i < requests_.size(); ++i) {
    MPI_Request& r = requests_[i];
    if (r == MPI_REQUEST_NULL) continue;
    check_mpi(MPI_Cancel(&r), "MPI_Cancel");
    MPI_Status st;
    check_mpi(MPI_Wait(&r, &st), "MPI_Wait");
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    if (!cancelled) throw std::logic_error("Conveyor: a buffer arrived after END (protocol bug)");
  }
}

}  // namespace netsparse::dist
