// The MPI transport's packets and large frames, its progress and teardown, and the factory
// (the design: mpi_transport_impl.hpp).
#include "transport/mpi_transport_impl.hpp"

namespace netsparse::transport {

namespace mpi_detail {

TxStatus MpiTransport::send(int dest, std::span<const std::byte> packet) {
  if (dest < 0 || dest >= size_ || packet.empty() || packet.size() > frame_bytes_) {
    return TxStatus::kError;
  }
  const auto d = static_cast<std::size_t>(dest);
  if (failed_[d]) return TxStatus::kPeerFailed;
  const bool large = packet.size() > packet_bytes_;
  // A large frame holds two requests of the peer's share (its payload, its announcement).
  const int need = large ? 2 : 1;
  auto room = [&] {
    return !send_free_.empty() && (!large || !large_free_.empty()) &&
           in_flight_to_[d] + need <= per_peer_cap_;
  };
  if (!room()) {
    progress();
    if (!room()) return TxStatus::kNoResource;
  }
  if (large) {
    const int l = large_free_.back();
    std::vector<std::byte>& buffer = large_send_[static_cast<std::size_t>(l)];
    buffer.assign(packet.begin(), packet.end());  // keeps its capacity for the next one
    MPI_Request& request = requests_[static_cast<std::size_t>(large_base_ + l)];
    if (MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, dest, kLargeFrameTag,
                  comm_, &request) != MPI_SUCCESS) {
      request = MPI_REQUEST_NULL;
      mark_failed(dest);
      return TxStatus::kPeerFailed;
    }
    large_free_.pop_back();
    large_dest_[static_cast<std::size_t>(l)] = dest;
    ++in_flight_to_[d];
    ++large_frames_sent_;
  }
  const int slot = send_free_.back();
  std::byte* buffer = send_slab_.get() + static_cast<std::size_t>(slot) * packet_bytes_;
  const std::size_t ring_bytes = large ? 0 : packet.size();  // empty: the announcement
  if (!large) std::memcpy(buffer, packet.data(), packet.size());
  MPI_Request& request = requests_[static_cast<std::size_t>(send_base_ + slot)];
  if (MPI_Isend(buffer, static_cast<int>(ring_bytes), MPI_BYTE, dest, kPacketTag, comm_,
                &request) != MPI_SUCCESS) {
    request = MPI_REQUEST_NULL;
    mark_failed(dest);
    return TxStatus::kPeerFailed;
  }
  send_free_.pop_back();
  send_dest_[static_cast<std::size_t>(slot)] = dest;
  ++in_flight_to_[d];
  bytes_sent_ += packet.size();
  return TxStatus::kOk;
}

int MpiTransport::poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) {
  progress();
  int delivered = 0;
  while (delivered < max_packets) {
    RingSlot& slot = recv_slots_[static_cast<std::size_t>(recv_head_)];
    if (slot.state == RingSlot::kPosted) break;
    if (slot.state == RingSlot::kDone && slot.count == 0) {
      // An announced large frame: delivered here, in the ring's order, once it is in.
      const LargeReceive got = receive_large(slot.src);
      if (got == LargeReceive::kPending) break;
      if (got == LargeReceive::kDone) {
        handler(ReceivedPacket{
            slot.src, std::span<const std::byte>(large_recv_.buffer.data(),
                                                 static_cast<std::size_t>(large_recv_.count))});
        ++delivered;
      }
    } else if (slot.state == RingSlot::kDone) {
      handler(ReceivedPacket{
          slot.src, std::span<const std::byte>(
                        recv_slab_.get() + static_cast<std::size_t>(recv_head_) * packet_bytes_,
                        static_cast<std::size_t>(slot.count))});
      ++delivered;
    }
    post_packet_recv(recv_head_);  // kDone or kFailed: the buffer is free again
    recv_head_ = (recv_head_ + 1) % recv_count_;
  }
  return delivered;
}

// The large frame announced by `src` at the ring's head: matched (MPI_Improbe), received
// (MPI_Imrecv into large_recv_.buffer, grown to fit) and tested, never waited for. kFailed:
// the source failed or MPI reported an error; the announcement is dropped.
MpiTransport::LargeReceive MpiTransport::receive_large(int src) {
  LargeFrame& in = large_recv_;
  if (in.request == MPI_REQUEST_NULL) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(src, kLargeFrameTag, comm_, &found, &message, &status) != MPI_SUCCESS) {
      mark_failed(src);
      return LargeReceive::kFailed;
    }
    if (!found)
      return failed_[static_cast<std::size_t>(src)] ? LargeReceive::kFailed
                                                    : LargeReceive::kPending;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count <= 0 || static_cast<std::size_t>(count) > frame_bytes_) {
      // Never from this transport's send(); received and dropped, the source marked failed.
      count = std::max(count, 0);
      mark_failed(src);
    }
    if (in.buffer.size() < static_cast<std::size_t>(count)) {
      in.buffer.resize(static_cast<std::size_t>(count));
    }
    in.count = count;
    if (MPI_Imrecv(in.buffer.data(), count, MPI_BYTE, &message, &in.request) != MPI_SUCCESS) {
      in.request = MPI_REQUEST_NULL;
      mark_failed(src);
      return LargeReceive::kFailed;
    }
  }
  int done = 0;
  MPI_Status status;
  if (MPI_Test(&in.request, &done, &status) != MPI_SUCCESS) {
    in.request = MPI_REQUEST_NULL;
    mark_failed(src);
    return LargeReceive::kFailed;
  }
  if (!done) {
    if (!failed_[static_cast<std::size_t>(src)]) return LargeReceive::kPending;
    // The source died mid-transfer (found by a layer above, e.g. the host's process check):
    // MPI may never complete the receive, and the frames of every other source wait behind
    // it. Let go of the request; its buffer stays allocated (MPI may still write into it).
    MPI_Request_free(&in.request);
    abandon(std::move(in.buffer));
    in.buffer = {};
    return LargeReceive::kFailed;
  }
  in.request = MPI_REQUEST_NULL;
  if (failed_[static_cast<std::size_t>(src)]) return LargeReceive::kFailed;
  ++large_frames_received_;
  return LargeReceive::kDone;
}

// One MPI_Testsome over every request the engine owns: progresses MPI and reaps all of them.
void MpiTransport::progress() {
  // Read requests only arrive while some region is served by messages (every rank agrees on a
  // region's mode), so otherwise the read part of the array is left out of the scan.
  const int active =
      messages_regions_ > 0 ? static_cast<int>(requests_.size()) : request_ring_base_;
  int count = 0;
  const int rc = MPI_Testsome(active, requests_.data(), &count, indices_.data(), statuses_.data());
  if (count != MPI_UNDEFINED) {
    for (int k = 0; k < count; ++k) {
      const int index = indices_[static_cast<std::size_t>(k)];
      const MPI_Status& status = statuses_[static_cast<std::size_t>(k)];
      const bool ok =
          rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && status.MPI_ERROR == MPI_SUCCESS);
      if (index < send_base_ || (index >= request_ring_base_ && index < response_base_)) {
        const bool packet = index < send_base_;
        RingSlot& slot = packet
                             ? recv_slots_[static_cast<std::size_t>(index)]
                             : request_slots_[static_cast<std::size_t>(index - request_ring_base_)];
        if (ok) {
          slot.state = RingSlot::kDone;
          slot.src = status.MPI_SOURCE;
          MPI_Get_count(&status, MPI_BYTE, &slot.count);
        } else {
          slot.state = RingSlot::kFailed;
          mark_failed(status.MPI_SOURCE);
        }
      } else if (index < large_base_) {
        const int slot = index - send_base_;
        const int dest = send_dest_[static_cast<std::size_t>(slot)];
        if (!ok) mark_failed(dest);
        --in_flight_to_[static_cast<std::size_t>(dest)];
        send_free_.push_back(slot);
      } else if (index < request_ring_base_) {
        const int slot = index - large_base_;
        const int dest = large_dest_[static_cast<std::size_t>(slot)];
        if (!ok) mark_failed(dest);
        --in_flight_to_[static_cast<std::size_t>(dest)];
        large_free_.push_back(slot);
      } else {
        const int slot = index - response_base_;
        if (!ok) mark_failed(response_dest_[static_cast<std::size_t>(slot)]);
        response_region_[static_cast<std::size_t>(slot)] = -1;
        response_free_.push_back(slot);
      }
    }
  }
  if (messages_regions_ > 0) serve_read_requests();
}

// Teardown is collective (like MPI_Comm_free). With healthy peers: finish our sends while
// still receiving and serving (a peer may wait for us to match its last packets or answer
// its reads), then agree with an Ibarrier that everyone is done, then cancel the receive
// rings. With a failed peer, or after MpiOptions::teardown_timeout_ms, hand the requests back to
// MPI without waiting (never hang); the windows and the dup are then leaked on purpose, because
// freeing them synchronizes with the dead peer.
void MpiTransport::shutdown() noexcept {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized) return;  // too late to clean up; MPI_Finalize released everything
  using clock = std::chrono::steady_clock;
  const auto deadline = teardown_timeout_ms_ < 0
                            ? clock::time_point::max()
                            : clock::now() + std::chrono::milliseconds(teardown_timeout_ms_);
  bool clean = !any_failed() && teardown_timeout_ms_ != 0;
  if (clean) {
    MPI_Request barrier = MPI_REQUEST_NULL;
    bool barrier_started = false;
    for (;;) {
      poll([](const ReceivedPacket&) {}, recv_count_);  // late packets are discarded
      reap_reads();
      if (!barrier_started && send_free_.size() == static_cast<std::size_t>(send_count_) &&
          large_free_.size() == static_cast<std::size_t>(large_count_)) {
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
        clean = false;  // the pending barrier is abandoned with the communicator (see above)
        break;
      }
    }
  }
  // Receive rings: cancel (a local operation for receives) and reap.
  for (int i = 0; i < static_cast<int>(requests_.size()); ++i) {
    MPI_Request& request = requests_[static_cast<std::size_t>(i)];
    if (request == MPI_REQUEST_NULL) continue;
    const bool is_receive = i < send_base_ || (i >= request_ring_base_ && i < response_base_);
    if (is_receive) {
      MPI_Cancel(&request);
      int done = 0;
      // A cancelled receive completes locally; bounded anyway (a library that never
      // completes it must not hang the teardown).
      const auto cancel_deadline = clock::now() + std::chrono::seconds(1);
      while (!done && MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             clock::now() <= cancel_deadline) {
      }
    }
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);  // sends finish in background
  }
  for (MPI_Request& request : read_requests_) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
  if (large_recv_.request != MPI_REQUEST_NULL) {
    // A matched receive cannot be cancelled: MPI may still write into its buffer, which is
    // left allocated on purpose (as the dup is when a peer failed).
    MPI_Request_free(&large_recv_.request);
    abandon(std::move(large_recv_.buffer));
  }
  if (!clean) return;
  for (Region& region : regions_) {
    if (region.used && region.mode == MpiReadMode::kRma) {
      MPI_Win_unlock_all(region.win);
      MPI_Win_free(&region.win);
    }
  }
  MPI_Comm_free(&comm_);
}

}  // namespace mpi_detail

using mpi_detail::MpiTransport;

constexpr auto kMpiReadModeNames = std::to_array<support::EnumName<MpiReadMode>>({
    {MpiReadMode::kAuto, "auto"},
    {MpiReadMode::kRma, "rma"},
    {MpiReadMode::kMessages, "messages"},
});

const char* to_string(MpiReadMode mode) noexcept {
  return support::name_of<kMpiReadModeNames>(mode, "unknown");
}

constexpr auto kThreadLevelNames = std::to_array<support::EnumName<int>>({
    {MPI_THREAD_SINGLE, "MPI_THREAD_SINGLE"},
    {MPI_THREAD_FUNNELED, "MPI_THREAD_FUNNELED"},
    {MPI_THREAD_SERIALIZED, "MPI_THREAD_SERIALIZED"},
    {MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE"},
});

const char* mpi_thread_level_name(int level) noexcept {
  return support::name_of<kThreadLevelNames>(level, "an unknown MPI thread level");
}

std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm, bool need_thread_multiple) {
  return make_mpi_transport(comm, need_thread_multiple, MpiOptions{});
}

namespace {
// `options` with the environment's NETSPARSE_MPI_MESSAGE_BYTES and NETSPARSE_MPI_FRAME_BYTES.
MpiOptions with_environment(const MpiOptions& options) {
  MpiOptions resolved = options;
  if (config::is_set(config::Env::kMpiMessageBytes)) {
    // Largest transport message (frame); e.g. below the MPI's eager limit to avoid rendezvous.
    resolved.max_packet_bytes =
        static_cast<std::size_t>(config::integer(config::Env::kMpiMessageBytes));
  }
  if (config::is_set(config::Env::kMpiFrameBytes)) {
    resolved.max_frame_bytes =
        static_cast<std::size_t>(config::integer(config::Env::kMpiFrameBytes));
  }
  return resolved;
}
}  // namespace

std::uint64_t mpi_buffer_bytes(const MpiOptions& options) {
  const MpiOptions resolved = with_environment(options);
  return std::uint64_t{resolved.max_packet_bytes} *
         static_cast<std::uint64_t>(std::max(0, resolved.recv_ring) +
                                    std::max(0, resolved.send_ring));
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
      options.send_ring < 1 || options.max_outstanding_reads < 1 || options.read_request_ring < 1 ||
      options.read_response_pool < 1 || options.large_frames_in_flight < 1 ||
      options.max_frame_bytes > static_cast<std::size_t>(INT_MAX)) {
    throw std::invalid_argument(
        "netsparse mpi transport: max_packet_bytes and max_frame_bytes (<= INT_MAX), recv_ring, "
        "send_ring, max_outstanding_reads, read_request_ring, read_response_pool and "
        "large_frames_in_flight must be >= 1");
  }
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (need_thread_multiple && provided < MPI_THREAD_MULTIPLE) {
    throw std::runtime_error(
        std::string("netsparse mpi transport: MPI provides thread level ") +
        mpi_thread_level_name(provided) +
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
        mpi_thread_level_name(provided) +
        "; MPI_THREAD_SERIALIZED or better is required. Initialize MPI with "
        "MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided)");
  }
  return std::make_unique<MpiTransport>(comm, with_environment(options));
}

}  // namespace netsparse::transport
