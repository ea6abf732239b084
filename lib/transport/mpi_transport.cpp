// MPI transport: Open MPI point-to-point on a private duplicate of the user's communicator.
//
// Receives: a ring of MPI_Irecv(ANY_SOURCE) into fixed buffers of max_packet_bytes, reposted
// after consumption. Every receive is identical, so an incoming message matches the oldest
// posted one: the ring completes in post order *as far as matching goes*. A later slot can still
// finish earlier (a large message matched first but still transferring while a small one
// behind it is done), so packets are delivered strictly in ring order from the head; that
// preserves MPI's per-pair non-overtaking order and costs nothing when every packet is eager.
//
// Sends: a pool of buffers with an MPI_Isend each; completed out of order (different
// destinations), so free slots sit on a stack. Send and receive requests live in one array so
// that one MPI_Testsome per poll() progresses and reaps both.
//
// One-sided reads: MPI RMA. register_memory creates a window over the region (collective),
// locks it once with MPI_Win_lock_all(MPI_MODE_NOCHECK) and allgathers the region sizes so that
// read() checks bounds locally. read() issues MPI_Rget and poll_reads reaps with MPI_Testsome.
// Why Rget + Testsome and not MPI_Get + MPI_Win_flush_local_all per batch: the flush blocks the
// caller until every outstanding get of the batch has landed (a network round trip spent
// idle, forever if the target died), whereas request-based gets let poll_reads return at once
// with whatever has finished, and Testsome reaps a whole batch of them in one call. The extra
// cost is one request object per get, which Open MPI takes from a free list (no malloc).
// bench/bench_transport_bw.cpp measures both for tiny gets.
//
// Failure: MPI_ERRORS_RETURN is set on the dup and on every window, so an MPI error surfaces as
// an error code: the peer it concerns is marked failed and send/read return kPeerFailed. Nothing
// in send/poll/read/poll_reads waits.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace netsparse::transport {

namespace {

constexpr int kPacketTag = 0x4e53;  // any tag: the dup'd communicator already isolates us

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown MPI thread level";
  }
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    throw std::runtime_error(std::string("netsparse mpi transport: ") + what +
                             " failed: " + mpi_error_string(rc));
  }
}

class MpiTransport final : public Transport {
 public:
  MpiTransport(MPI_Comm user_comm, const MpiOptions& options)
      : options_(options),
        recv_count_(options.recv_ring),
        send_count_(options.send_ring),
        packet_bytes_(options.max_packet_bytes) {
    // Collective on the user's communicator; from here on only our dup is used.
    check_mpi(MPI_Comm_dup(user_comm, &comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    failed_.assign(static_cast<std::size_t>(size_), 0);

    const std::size_t total = static_cast<std::size_t>(recv_count_ + send_count_);
    requests_.assign(total, MPI_REQUEST_NULL);
    indices_.resize(total);
    statuses_.resize(total);
    recv_slab_.resize(static_cast<std::size_t>(recv_count_) * packet_bytes_);
    send_slab_.resize(static_cast<std::size_t>(send_count_) * packet_bytes_);
    recv_slots_.assign(static_cast<std::size_t>(recv_count_), RecvSlot{});
    send_dest_.assign(static_cast<std::size_t>(send_count_), -1);
    send_free_.reserve(static_cast<std::size_t>(send_count_));
    for (int i = send_count_ - 1; i >= 0; --i) send_free_.push_back(i);
    for (int i = 0; i < recv_count_; ++i) post_recv(i);

    const auto reads = static_cast<std::size_t>(options.max_outstanding_reads);
    read_requests_.assign(reads, MPI_REQUEST_NULL);
    read_slots_.assign(reads, ReadSlot{});
    read_indices_.resize(reads);
    read_statuses_.resize(reads);
    read_free_.reserve(reads);
    for (int i = static_cast<int>(reads) - 1; i >= 0; --i) read_free_.push_back(i);
    read_done_.resize(reads);
  }

  ~MpiTransport() override { shutdown(); }

  TransportKind kind() const noexcept override { return TransportKind::kMpi; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_packet_bytes() const noexcept override { return packet_bytes_; }
  std::size_t max_read_bytes() const noexcept override { return INT_MAX; }

  TxStatus send(int dest, std::span<const std::byte> packet) override {
    if (dest < 0 || dest >= size_ || packet.empty() || packet.size() > packet_bytes_) {
      return TxStatus::kError;
    }
    if (failed_[static_cast<std::size_t>(dest)]) return TxStatus::kPeerFailed;
    if (send_free_.empty()) {
      progress();
      if (send_free_.empty()) return TxStatus::kNoResource;
    }
    const int slot = send_free_.back();
    std::byte* buffer = send_slab_.data() + static_cast<std::size_t>(slot) * packet_bytes_;
    std::memcpy(buffer, packet.data(), packet.size());
    MPI_Request& request = requests_[static_cast<std::size_t>(recv_count_ + slot)];
    const int rc = MPI_Isend(buffer, static_cast<int>(packet.size()), MPI_BYTE, dest, kPacketTag,
                             comm_, &request);
    if (rc != MPI_SUCCESS) {
      request = MPI_REQUEST_NULL;
      mark_failed(dest);
      return TxStatus::kPeerFailed;
    }
    send_free_.pop_back();
    send_dest_[static_cast<std::size_t>(slot)] = dest;
    bytes_sent_ += packet.size();
    return TxStatus::kOk;
  }

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override {
    progress();
    int delivered = 0;
    while (delivered < max_packets) {
      RecvSlot& slot = recv_slots_[static_cast<std::size_t>(recv_head_)];
      if (slot.state == RecvSlot::kPosted) break;
      if (slot.state == RecvSlot::kDone) {
        handler(ReceivedPacket{
            slot.src, std::span<const std::byte>(
                          recv_slab_.data() + static_cast<std::size_t>(recv_head_) * packet_bytes_,
                          static_cast<std::size_t>(slot.count))});
        ++delivered;
      }
      post_recv(recv_head_);  // kDone or kFailed: the buffer is free again
      recv_head_ = (recv_head_ + 1) % recv_count_;
    }
    return delivered;
  }

  int register_memory(void* base, std::size_t bytes) override {
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
    check_mpi(MPI_Win_create(bytes == 0 ? nullptr : base, static_cast<MPI_Aint>(bytes), 1,
                             MPI_INFO_NULL, comm_, &region.win),
              "MPI_Win_create (register_memory)");
    check_mpi(MPI_Win_set_errhandler(region.win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    // One passive-target epoch for the window's whole life: no lock per get.
    check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, region.win), "MPI_Win_lock_all");
    region.sizes.assign(static_cast<std::size_t>(size_), 0);
    const std::uint64_t mine = bytes;
    check_mpi(MPI_Allgather(&mine, 1, MPI_UINT64_T, region.sizes.data(), 1, MPI_UINT64_T, comm_),
              "MPI_Allgather (region sizes)");
    region.used = true;
    return static_cast<int>(id);
  }

  void deregister_memory(int id) override {
    if (id < 0 || static_cast<std::size_t>(id) >= regions_.size() ||
        !regions_[static_cast<std::size_t>(id)].used) {
      throw std::invalid_argument("netsparse mpi transport: deregister_memory of unknown region " +
                                  std::to_string(id));
    }
    Region& region = regions_[static_cast<std::size_t>(id)];
    // Unlock completes this origin's gets on the window; then reap their requests so that their
    // completions are still reported by poll_reads.
    check_mpi(MPI_Win_unlock_all(region.win), "MPI_Win_unlock_all");
    for (std::size_t s = 0; s < read_slots_.size(); ++s) {
      if (read_requests_[s] != MPI_REQUEST_NULL && read_slots_[s].region == id) {
        MPI_Status status;
        const int rc = MPI_Wait(&read_requests_[s], &status);
        finish_read(static_cast<int>(s), rc == MPI_SUCCESS);
      }
    }
    check_mpi(MPI_Win_free(&region.win), "MPI_Win_free (deregister_memory)");
    region.used = false;
    region.sizes.clear();
  }

  TxStatus read(int dest, int id, std::uint64_t offset, void* local, std::size_t bytes,
                std::uint64_t cookie) override {
    if (dest < 0 || dest >= size_ || id < 0 || static_cast<std::size_t>(id) >= regions_.size() ||
        !regions_[static_cast<std::size_t>(id)].used || (local == nullptr && bytes != 0) ||
        bytes > static_cast<std::size_t>(INT_MAX)) {
      return TxStatus::kError;
    }
    const Region& region = regions_[static_cast<std::size_t>(id)];
    const std::uint64_t size = region.sizes[static_cast<std::size_t>(dest)];
    if (offset > size || bytes > size - offset) return TxStatus::kError;  // overflow-safe
    if (failed_[static_cast<std::size_t>(dest)]) return TxStatus::kPeerFailed;
    if (completions_pending_ + in_flight_reads() >= read_slots_.size()) {
      return TxStatus::kNoResource;  // counts unreturned completions too: the ring is bounded
    }
    const int slot = read_free_.back();
    MPI_Request& request = read_requests_[static_cast<std::size_t>(slot)];
    const int rc =
        MPI_Rget(local, static_cast<int>(bytes), MPI_BYTE, dest, static_cast<MPI_Aint>(offset),
                 static_cast<int>(bytes), MPI_BYTE, region.win, &request);
    if (rc != MPI_SUCCESS) {
      request = MPI_REQUEST_NULL;
      mark_failed(dest);
      return TxStatus::kPeerFailed;
    }
    read_free_.pop_back();
    read_slots_[static_cast<std::size_t>(slot)] = ReadSlot{cookie, dest, id};
    return TxStatus::kOk;
  }

  int poll_reads(ReadCompletion* out, int max) override {
    if (in_flight_reads() > 0) {
      int count = 0;
      const int rc = MPI_Testsome(static_cast<int>(read_requests_.size()), read_requests_.data(),
                                  &count, read_indices_.data(), read_statuses_.data());
      if (count != MPI_UNDEFINED) {
        for (int k = 0; k < count; ++k) {
          const int slot = read_indices_[static_cast<std::size_t>(k)];
          const bool ok = rc == MPI_SUCCESS ||
                          (rc == MPI_ERR_IN_STATUS &&
                           read_statuses_[static_cast<std::size_t>(k)].MPI_ERROR == MPI_SUCCESS);
          if (!ok) mark_failed(read_slots_[static_cast<std::size_t>(slot)].dest);
          finish_read(slot, ok);
        }
      }
    }
    int n = 0;
    while (n < max && completions_pending_ > 0) {
      out[n++] = read_done_[completions_head_];
      completions_head_ = (completions_head_ + 1) % read_done_.size();
      --completions_pending_;
    }
    return n;
  }

  void barrier() override {
    // Ibarrier + test: a failed peer turns into an exception instead of an endless wait.
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    int done = 0;
    while (!done) {
      const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        throw std::runtime_error("netsparse mpi transport: barrier failed (a peer failed?): " +
                                 mpi_error_string(rc));
      }
      if (!done) progress();
    }
  }

  bool peer_failed(int peer) const noexcept override {
    return peer >= 0 && peer < size_ && failed_[static_cast<std::size_t>(peer)] != 0;
  }

  std::uint64_t bytes_sent() const noexcept override { return bytes_sent_; }

 private:
  struct RecvSlot {
    enum State : std::uint8_t { kPosted, kDone, kFailed };
    State state = kPosted;
    int src = -1;
    int count = 0;
  };
  struct ReadSlot {
    std::uint64_t cookie = 0;
    int dest = -1;
    int region = -1;
  };
  struct Region {
    MPI_Win win = MPI_WIN_NULL;
    std::vector<std::uint64_t> sizes;  // every rank's region size, for local bounds checks
    bool used = false;
  };

  std::size_t in_flight_reads() const noexcept { return read_slots_.size() - read_free_.size(); }

  void post_recv(int slot) {
    RecvSlot& s = recv_slots_[static_cast<std::size_t>(slot)];
    s.state = RecvSlot::kPosted;
    const int rc = MPI_Irecv(recv_slab_.data() + static_cast<std::size_t>(slot) * packet_bytes_,
                             static_cast<int>(packet_bytes_), MPI_BYTE, MPI_ANY_SOURCE, kPacketTag,
                             comm_, &requests_[static_cast<std::size_t>(slot)]);
    if (rc != MPI_SUCCESS) {
      // Cannot happen short of resource exhaustion; the slot stays out of the ring's rotation.
      requests_[static_cast<std::size_t>(slot)] = MPI_REQUEST_NULL;
      s.state = RecvSlot::kFailed;
      local_error_ = true;
    }
  }

  // One MPI_Testsome over receives and sends: progresses MPI and reaps both in one call.
  void progress() {
    int count = 0;
    const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count,
                                indices_.data(), statuses_.data());
    if (count == MPI_UNDEFINED) return;
    for (int k = 0; k < count; ++k) {
      const int index = indices_[static_cast<std::size_t>(k)];
      const MPI_Status& status = statuses_[static_cast<std::size_t>(k)];
      const bool ok =
          rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && status.MPI_ERROR == MPI_SUCCESS);
      if (index < recv_count_) {
        RecvSlot& slot = recv_slots_[static_cast<std::size_t>(index)];
        if (ok) {
          slot.state = RecvSlot::kDone;
          slot.src = status.MPI_SOURCE;
          MPI_Get_count(&status, MPI_BYTE, &slot.count);
        } else {
          slot.state = RecvSlot::kFailed;
          if (status.MPI_SOURCE >= 0 && status.MPI_SOURCE < size_) mark_failed(status.MPI_SOURCE);
        }
      } else {
        const int slot = index - recv_count_;
        if (!ok) mark_failed(send_dest_[static_cast<std::size_t>(slot)]);
        send_free_.push_back(slot);
      }
    }
  }

  void finish_read(int slot, bool ok) {
    read_done_[(completions_head_ + completions_pending_) % read_done_.size()] = {
        read_slots_[static_cast<std::size_t>(slot)].cookie, ok};
    ++completions_pending_;
    read_free_.push_back(slot);
  }

  void mark_failed(int peer) {
    if (peer >= 0 && peer < size_) failed_[static_cast<std::size_t>(peer)] = 1;
  }

  bool any_failed() const {
    return local_error_ || std::any_of(failed_.begin(), failed_.end(), [](auto f) { return f; });
  }

  // Teardown is collective (like MPI_Comm_free). With healthy peers: finish our sends while
  // still receiving (a peer may be waiting for us to match its last packets), then agree with an
  // Ibarrier that everyone is done, then cancel the receive ring. With a failed peer, or after
  // teardown_timeout, give the requests back to MPI without waiting (never hang).
  void shutdown() noexcept {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (finalized) return;  // too late to clean up; MPI_Finalize released everything
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::milliseconds(kTeardownTimeoutMs);
    bool clean = !any_failed();
    if (clean) {
      MPI_Request barrier = MPI_REQUEST_NULL;
      bool barrier_started = false;
      for (;;) {
        drain_discarding();
        if (!barrier_started && send_free_.size() == static_cast<std::size_t>(send_count_)) {
          barrier_started = MPI_Ibarrier(comm_, &barrier) == MPI_SUCCESS;
          if (!barrier_started) {
            clean = false;
            break;
          }
        }
        if (barrier_started) {
          int done = 0;
          if (MPI_Test(&barrier, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            clean = false;
            break;
          }
          if (done) break;
        }
        if (any_failed() || clock::now() > deadline) {
          clean = false;
          if (barrier_started) MPI_Request_free(&barrier);
          break;
        }
      }
    }
    for (int i = 0; i < recv_count_; ++i) {
      MPI_Request& request = requests_[static_cast<std::size_t>(i)];
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      int done = 0;
      while (!done && MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             clock::now() <= deadline) {
      }
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
    }
    for (int i = recv_count_; i < recv_count_ + send_count_; ++i) {
      MPI_Request& request = requests_[static_cast<std::size_t>(i)];
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);  // completes in background
    }
    for (MPI_Request& request : read_requests_) {
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
    }
    for (Region& region : regions_) {
      if (!region.used) continue;
      // MPI_Win_free synchronizes with every peer: only safe when they are all alive.
      if (clean) {
        MPI_Win_unlock_all(region.win);
        MPI_Win_free(&region.win);
      }
    }
    if (clean) MPI_Comm_free(&comm_);
  }

  void drain_discarding() {
    poll([](const ReceivedPacket&) {}, recv_count_);
  }

  static constexpr int kTeardownTimeoutMs = 10000;

  MpiOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  const int recv_count_;
  const int send_count_;
  const std::size_t packet_bytes_;
  std::vector<std::uint8_t> failed_;
  bool local_error_ = false;
  std::uint64_t bytes_sent_ = 0;

  // [0, recv_count_) receive ring, [recv_count_, +send_count_) sends.
  std::vector<MPI_Request> requests_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::vector<std::byte> recv_slab_;
  std::vector<std::byte> send_slab_;
  std::vector<RecvSlot> recv_slots_;
  int recv_head_ = 0;
  std::vector<int> send_free_;
  std::vector<int> send_dest_;

  std::vector<Region> regions_;
  std::vector<MPI_Request> read_requests_;
  std::vector<ReadSlot> read_slots_;
  std::vector<int> read_indices_;
  std::vector<MPI_Status> read_statuses_;
  std::vector<int> read_free_;
  std::vector<ReadCompletion> read_done_;  // ring of completions not yet returned
  std::size_t completions_head_ = 0;
  std::size_t completions_pending_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm, bool need_thread_multiple) {
  return make_mpi_transport(comm, need_thread_multiple, MpiOptions{});
}

std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm, bool need_thread_multiple,
                                              const MpiOptions& options) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw std::runtime_error(
        "netsparse mpi transport: MPI is not initialized (call MPI_Init_thread before creating "
        "the transport, and destroy the transport before MPI_Finalize)");
  }
  if (comm == MPI_COMM_NULL) {
    throw std::invalid_argument("netsparse mpi transport: communicator is MPI_COMM_NULL");
  }
  if (options.max_packet_bytes < 1 ||
      options.max_packet_bytes > static_cast<std::size_t>(INT_MAX) || options.recv_ring < 1 ||
      options.send_ring < 1 || options.max_outstanding_reads < 1) {
    throw std::invalid_argument(
        "netsparse mpi transport: max_packet_bytes, recv_ring, send_ring and "
        "max_outstanding_reads must be >= 1");
  }
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (need_thread_multiple && provided < MPI_THREAD_MULTIPLE) {
    throw std::runtime_error(
        std::string("netsparse mpi transport: MPI provides thread level ") +
        thread_level_name(provided) +
        " but MPI_THREAD_MULTIPLE is required (the progress thread calls MPI concurrently with "
        "the application). Initialize MPI with MPI_Init_thread(&argc, &argv, "
        "MPI_THREAD_MULTIPLE, &provided) and check `provided`, or use inline progress");
  }
  int is_main = 0;
  MPI_Is_thread_main(&is_main);
  if (!need_thread_multiple && provided < MPI_THREAD_SERIALIZED && !is_main) {
    throw std::runtime_error(
        std::string("netsparse mpi transport: created from a thread other than the main thread "
                    "but MPI provides only ") +
        thread_level_name(provided) +
        "; MPI_THREAD_SERIALIZED or better is required. Initialize MPI with "
        "MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided)");
  }
  return std::make_unique<MpiTransport>(comm, options);
}

}  // namespace netsparse::transport
