// The MPI transport's registered regions and one-sided reads (mpi_transport_impl.hpp; the read
// modes are described at the top of mpi_transport.cpp).
#include "transport/mpi_transport_impl.hpp"

namespace netsparse::transport::mpi_detail {

int MpiTransport::register_memory(void* base, std::size_t bytes) {
  if (base == nullptr && bytes != 0) {
    throw std::invalid_argument("netsparse mpi transport: register_memory(nullptr, " +
                                std::to_string(bytes) + ")");
  }
  if (bytes > static_cast<std::size_t>(std::numeric_limits<MPI_Aint>::max())) {
    throw std::invalid_argument("netsparse mpi transport: region larger than MPI_Aint");
  }
  std::size_t id = 0;
  while (id < regions_.size() && regions_[id].used) ++id;
  if (id == regions_.size()) regions_.emplace_back();
  Region& region = regions_[id];
  region.base = static_cast<std::byte*>(base);
  region.mode = MpiReadMode::kMessages;
  if (read_mode_ != MpiReadMode::kMessages) {
    // Collective. Open MPI returns an error (MPI_ERR_WIN) on every rank when no one-sided
    // component can serve the communicator; the ranks agree before using the window.
    MPI_Win win = MPI_WIN_NULL;
    const int rc = MPI_Win_create(bytes == 0 ? nullptr : base, static_cast<MPI_Aint>(bytes), 1,
                                  MPI_INFO_NULL, comm_, &win);
    int mine = rc == MPI_SUCCESS ? 1 : 0;
    int everyone = 0;
    check_mpi(MPI_Allreduce(&mine, &everyone, 1, MPI_INT, MPI_MIN, comm_),
              "MPI_Allreduce (window agreement)");
    if (everyone) {
      region.win = win;
      region.mode = MpiReadMode::kRma;
      check_mpi(MPI_Win_set_errhandler(region.win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
      // One passive-target epoch for the window's whole life: no lock per get.
      check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, region.win), "MPI_Win_lock_all");
    } else if (read_mode_ == MpiReadMode::kRma) {
      // A window that exists on some ranks only cannot be freed (collective): leave it.
      throw std::runtime_error(
          "netsparse mpi transport: MPI_Win_create failed (" + mpi_error_string(rc) +
          ") and read_mode is kRma; Open MPI needs shared memory with single-copy or an RDMA "
          "network for windows; use MpiReadMode::kAuto or NETSPARSE_MPI_READS=messages");
    }
  }
  if (region.mode == MpiReadMode::kMessages) ++messages_regions_;
  region.sizes.assign(static_cast<std::size_t>(size_), 0);
  const std::uint64_t mine = bytes;
  check_mpi(MPI_Allgather(&mine, 1, MPI_UINT64_T, region.sizes.data(), 1, MPI_UINT64_T, comm_),
            "MPI_Allgather (region sizes)");
  region.used = true;
  return static_cast<int>(id);
}

void MpiTransport::deregister_memory(int id) {
  if (id < 0 || static_cast<std::size_t>(id) >= regions_.size() ||
      !regions_[static_cast<std::size_t>(id)].used) {
    throw std::invalid_argument("netsparse mpi transport: deregister_memory of unknown region " +
                                std::to_string(id));
  }
  Region& region = regions_[static_cast<std::size_t>(id)];
  if (region.mode == MpiReadMode::kRma) {
    // Unlock completes this origin's gets on the window; then reap their requests so that
    // their completions are still reported by poll_reads.
    check_mpi(MPI_Win_unlock_all(region.win), "MPI_Win_unlock_all");
    for (std::size_t s = 0; s < read_capacity_; ++s) {
      if (read_requests_[s] != MPI_REQUEST_NULL && read_slots_[s].region == id) {
        const int rc = MPI_Wait(&read_requests_[s], MPI_STATUS_IGNORE);
        read_slots_[s].pending = 0;
        finish_read(static_cast<int>(s), rc == MPI_SUCCESS);
      }
    }
    check_mpi(MPI_Win_free(&region.win), "MPI_Win_free (deregister_memory)");
  } else {
    // Our reads from the region must be answered before the peers stop serving it, and we
    // must keep serving theirs until everyone is done: progress inside the barrier.
    while (reads_in_flight(id) > 0 && !any_failed()) {
      progress();
      reap_reads();
    }
    barrier();
    while (responses_in_flight(id) > 0 && !any_failed()) progress();
    --messages_regions_;
  }
  region = Region{};
}

TxStatus MpiTransport::read(int dest, int id, std::uint64_t offset, void* local, std::size_t bytes,
                            std::uint64_t cookie) {
  if (dest < 0 || dest >= size_ || id < 0 || static_cast<std::size_t>(id) >= regions_.size() ||
      !regions_[static_cast<std::size_t>(id)].used || (local == nullptr && bytes != 0) ||
      bytes > static_cast<std::size_t>(INT_MAX)) {
    return TxStatus::kError;
  }
  const Region& region = regions_[static_cast<std::size_t>(id)];
  const std::uint64_t size = region.sizes[static_cast<std::size_t>(dest)];
  if (offset > size || bytes > size - offset) return TxStatus::kError;  // overflow-safe
  if (failed_[static_cast<std::size_t>(dest)]) return TxStatus::kPeerFailed;
  // Unreturned completions count too, so the completion ring can never overflow.
  if (read_done_.size() + reads_in_flight() >= read_capacity_) return TxStatus::kNoResource;
  const int slot = read_free_.back();
  const auto s = static_cast<std::size_t>(slot);
  int rc = MPI_SUCCESS;
  int pending = 1;
  if (region.mode == MpiReadMode::kRma) {
    rc = MPI_Rget(local, static_cast<int>(bytes), MPI_BYTE, dest, static_cast<MPI_Aint>(offset),
                  static_cast<int>(bytes), MPI_BYTE, region.win, &read_requests_[s]);
  } else {
    // Receive first, so that the response never arrives unexpected.
    rc = MPI_Irecv(local, static_cast<int>(bytes), MPI_BYTE, dest, kReadResponseTag, comm_,
                   &read_requests_[s]);
    if (rc == MPI_SUCCESS) {
      read_msgs_[s] = ReadRequestMessage{id, 0, offset, bytes};
      rc = MPI_Isend(&read_msgs_[s], sizeof(ReadRequestMessage), MPI_BYTE, dest, kReadRequestTag,
                     comm_, &read_requests_[read_capacity_ + s]);
      pending = 2;
      if (rc != MPI_SUCCESS) {
        MPI_Cancel(&read_requests_[s]);
        MPI_Request_free(&read_requests_[s]);
      }
    }
  }
  if (rc != MPI_SUCCESS) {
    read_requests_[s] = MPI_REQUEST_NULL;
    read_requests_[read_capacity_ + s] = MPI_REQUEST_NULL;
    mark_failed(dest);
    return TxStatus::kPeerFailed;
  }
  read_free_.pop_back();
  read_slots_[s] = ReadSlot{cookie, bytes, dest, id, pending, true};
  return TxStatus::kOk;
}

int MpiTransport::poll_reads(ReadCompletion* out, int max) {
  if (reads_in_flight() > 0) {
    if (messages_regions_) progress();  // serve peers' requests and drive ours
    reap_reads();
  }
  return read_done_.pop(out, max);
}

std::size_t MpiTransport::reads_in_flight(int region) const noexcept {
  std::size_t n = 0;
  for (const ReadSlot& s : read_slots_) n += (s.pending > 0 && s.region == region) ? 1 : 0;
  return n;
}

std::size_t MpiTransport::responses_in_flight(int region) const noexcept {
  std::size_t n = 0;
  for (int i = 0; i < response_count_; ++i) {
    n += (requests_[static_cast<std::size_t>(response_base_ + i)] != MPI_REQUEST_NULL &&
          response_region_[static_cast<std::size_t>(i)] == region)
             ? 1
             : 0;
  }
  return n;
}

void MpiTransport::post_request_recv(int slot) {
  RingSlot& s = request_slots_[static_cast<std::size_t>(slot)];
  s.state = RingSlot::kPosted;
  MPI_Request& request = requests_[static_cast<std::size_t>(request_ring_base_ + slot)];
  if (MPI_Irecv(&request_msgs_[static_cast<std::size_t>(slot)], sizeof(ReadRequestMessage),
                MPI_BYTE, MPI_ANY_SOURCE, kReadRequestTag, comm_, &request) != MPI_SUCCESS) {
    request = MPI_REQUEST_NULL;
    s.state = RingSlot::kFailed;
  }
}

// Answers peers' read requests in ring order (= per-source arrival order, which is what the
// requesters' in-order response receives rely on), while response slots are free.
void MpiTransport::serve_read_requests() {
  while (!response_free_.empty()) {
    RingSlot& slot = request_slots_[static_cast<std::size_t>(request_head_)];
    if (slot.state == RingSlot::kPosted) break;
    if (slot.state == RingSlot::kDone) {
      const ReadRequestMessage& m = request_msgs_[static_cast<std::size_t>(request_head_)];
      // Validated again here: the request came over the wire. An invalid one is answered with
      // an empty message, which the requester reports as ok=false.
      const std::byte* data = nullptr;
      int count = 0;
      if (slot.count == static_cast<int>(sizeof(ReadRequestMessage)) && m.region >= 0 &&
          static_cast<std::size_t>(m.region) < regions_.size() &&
          regions_[static_cast<std::size_t>(m.region)].used && m.bytes <= INT_MAX) {
        const Region& region = regions_[static_cast<std::size_t>(m.region)];
        const std::uint64_t size = region.sizes[static_cast<std::size_t>(rank_)];
        if (m.offset <= size && m.bytes <= size - m.offset) {
          data = region.base + m.offset;
          count = static_cast<int>(m.bytes);
        }
      }
      const int r = response_free_.back();
      MPI_Request& request = requests_[static_cast<std::size_t>(response_base_ + r)];
      if (MPI_Isend(data, count, MPI_BYTE, slot.src, kReadResponseTag, comm_, &request) ==
          MPI_SUCCESS) {
        response_free_.pop_back();
        response_dest_[static_cast<std::size_t>(r)] = slot.src;
        response_region_[static_cast<std::size_t>(r)] = m.region;
        bytes_sent_ += static_cast<std::uint64_t>(count);
      } else {
        request = MPI_REQUEST_NULL;
        mark_failed(slot.src);
      }
    }
    post_request_recv(request_head_);
    request_head_ = (request_head_ + 1) % request_ring_count_;
  }
}

void MpiTransport::reap_reads() {
  int count = 0;
  const int rc = MPI_Testsome(static_cast<int>(read_requests_.size()), read_requests_.data(),
                              &count, read_indices_.data(), read_statuses_.data());
  if (count == MPI_UNDEFINED) return;
  for (int k = 0; k < count; ++k) {
    const int index = read_indices_[static_cast<std::size_t>(k)];
    const MPI_Status& status = read_statuses_[static_cast<std::size_t>(k)];
    const bool response = static_cast<std::size_t>(index) < read_capacity_;
    const int slot = static_cast<int>(response ? index : index - static_cast<int>(read_capacity_));
    ReadSlot& s = read_slots_[static_cast<std::size_t>(slot)];
    bool ok = rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && status.MPI_ERROR == MPI_SUCCESS);
    if (!ok) mark_failed(s.dest);
    if (ok && response &&
        regions_[static_cast<std::size_t>(s.region)].mode == MpiReadMode::kMessages) {
      int got = -1;
      MPI_Get_count(&status, MPI_BYTE, &got);
      ok = got == static_cast<int>(s.bytes);  // a short answer = the target refused the request
    }
    s.ok = s.ok && ok;
    if (--s.pending == 0) finish_read(slot, s.ok);
  }
}

void MpiTransport::finish_read(int slot, bool ok) {
  read_done_.push({read_slots_[static_cast<std::size_t>(slot)].cookie, ok});
  read_slots_[static_cast<std::size_t>(slot)] = ReadSlot{};
  read_free_.push_back(slot);
}

}  // namespace netsparse::transport::mpi_detail
