// MPI transport: Open MPI point-to-point on a private duplicate of the user's communicator.
//
// Receives: a ring of MPI_Irecv(ANY_SOURCE) into fixed buffers of max_packet_bytes, reposted
// after consumption. Every receive is identical, so an incoming message matches the oldest
// posted one: the ring is *matched* in post order. A later slot can still *complete* earlier (a
// large message matched first but still transferring while a small one behind it is done —
// observed with Open MPI over TCP and over shared memory without single-copy), so packets are
// delivered strictly in ring order from the head; that preserves MPI's per-pair
// non-overtaking order and costs nothing when every packet is eager.
//
// Sends: a pool of buffers with an MPI_Isend each; completed out of order (different
// destinations), so free slots sit on a stack.
//
// Large frames (above the ring's buffer size, up to MpiOptions::max_frame_bytes): the payload
// goes as one MPI_Isend on kLargeFrameTag from a buffer of its own, followed by an *empty*
// message on kPacketTag (send() refuses empty packets, so an empty ring message is always an
// announcement). The receiver meets the announcement in ring order, matches the payload with
// MPI_Improbe / MPI_Imrecv from that source on kLargeFrameTag (MPI keeps a pair's messages of
// one tag in order, so the n-th announcement from a source is its n-th large payload) into a
// buffer grown to the largest frame seen, and delivers it in the announcement's place: the
// pair's order holds. Delivery waits at the announcement until the payload is in; a source that
// fails meanwhile is skipped. All requests the progress engine owns (packet
// receives, packet sends, read-request receives, read-response sends) live in one array so that
// one MPI_Testsome per poll() progresses and reaps all of them.
//
// One-sided reads (see MpiReadMode):
//  - kRma: register_memory creates a window over the region (collective), locks it once with
//    MPI_Win_lock_all(MPI_MODE_NOCHECK) and allgathers the region sizes so that read() checks
//    bounds locally. read() issues MPI_Rget, poll_reads reaps with MPI_Testsome. Why Rget +
//    Testsome and not MPI_Get + MPI_Win_flush_local_all per batch: the flush blocks the caller
//    until every get of the batch has landed (a round trip spent idle; forever if the target
//    died), whereas request-based gets let poll_reads return at once with whatever has finished,
//    and Testsome reaps a whole batch in one call. The price is one request object per get, which
//    Open MPI takes from a free list. bench/bench_transport_bw.cpp measures both.
//  - kMessages: read() posts the receive for the response straight into `local`, then sends a
//    16-byte request; the target answers from its registered region with one MPI_Isend (no copy).
//    Responses from one target come back in request order (requests are non-overtaking and
//    served in ring order), so receives posted in issue order match them one to one.
//
// Failure: MPI_ERRORS_RETURN is set on the dup and on every window, so an MPI error surfaces as
// an error code: the peer it concerns is marked failed and send/read return kPeerFailed. Nothing
// in send/poll/read/poll_reads waits.
//
// Files: this header holds the class; mpi_transport.cpp its packets, large frames, progress and
// teardown (and the factory); mpi_transport_reads.cpp its registered regions and one-sided reads.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>
#include "agreement/mpi.hpp"
#include "config/settings.hpp"
#include "support/enum_names.hpp"
#include "transport/completion_ring.hpp"
#include "transport/transport_factory.hpp"

namespace netsparse::transport::mpi_detail {

// Any tags: the dup'd communicator already isolates us from the application.
constexpr int kPacketTag = 0x4e53;
constexpr int kReadRequestTag = 0x4e54;
constexpr int kReadResponseTag = 0x4e55;
constexpr int kLargeFrameTag = 0x4e56;

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

using agreement::check_mpi;

// Keeps a receive buffer MPI may still write into (a request let go of) alive, and reachable,
// until the process exits.
inline void abandon(std::vector<std::byte>&& buffer) {
  static std::mutex mu;
  static std::vector<std::vector<std::byte>> kept;
  const std::lock_guard<std::mutex> lock(mu);
  kept.push_back(std::move(buffer));
}

inline MpiReadMode resolve_read_mode(MpiReadMode requested) {
  if (requested != MpiReadMode::kAuto) return requested;
  const std::string mode = config::choice(config::Env::kMpiReads);
  if (mode == "rma") return MpiReadMode::kRma;
  if (mode == "messages") return MpiReadMode::kMessages;
  return MpiReadMode::kAuto;
}

// A read request of the kMessages mode, as sent on the wire.
struct ReadRequestMessage {
  std::int32_t region;
  std::int32_t reserved;
  std::uint64_t offset;
  std::uint64_t bytes;
};

// A slot of a pre-posted receive ring, delivered strictly in ring order.
struct RingSlot {
  enum State : std::uint8_t { kPosted, kDone, kFailed };
  State state = kPosted;
  int src = -1;
  int count = 0;
};

class MpiTransport final : public Transport {
 public:
  MpiTransport(MPI_Comm user_comm, const MpiOptions& options)
      : read_mode_(resolve_read_mode(options.read_mode)),
        packet_bytes_(options.max_packet_bytes),
        frame_bytes_(std::max(options.max_packet_bytes, options.max_frame_bytes)),
        recv_count_(options.recv_ring),
        send_count_(options.send_ring),
        large_count_(frame_bytes_ > packet_bytes_ ? options.large_frames_in_flight : 0),
        request_ring_count_(options.read_request_ring),
        response_count_(options.read_response_pool),
        send_base_(recv_count_),
        large_base_(send_base_ + send_count_),
        request_ring_base_(large_base_ + large_count_),
        response_base_(request_ring_base_ + request_ring_count_),
        read_capacity_(static_cast<std::size_t>(options.max_outstanding_reads)),
        teardown_timeout_ms_(options.teardown_timeout_ms),
        per_peer_cap_(options.max_in_flight_per_peer > 0
                          ? options.max_in_flight_per_peer
                          : std::max(1, options.send_ring - options.send_ring / 4)) {
    // Collective on the user's communicator; from here on only our dup is used.
    check_mpi(MPI_Comm_dup(user_comm, &comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    failed_.assign(static_cast<std::size_t>(size_), 0);
    in_flight_to_.assign(static_cast<std::size_t>(size_), 0);

    const auto total = static_cast<std::size_t>(response_base_ + response_count_);
    requests_.assign(total, MPI_REQUEST_NULL);
    indices_.resize(total);
    statuses_.resize(total);
    // Not zero-filled (new T[] without ()): 2 x 64 frames of 64 KiB would be 8 MiB of page
    // faults and zeroing at every open (profiled: the largest part of ns_open_mpi), although a
    // slot's memory is only touched when a message uses it (with shared-memory rings, rarely).
    recv_slab_.reset(new std::byte[static_cast<std::size_t>(recv_count_) * packet_bytes_]);
    send_slab_.reset(new std::byte[static_cast<std::size_t>(send_count_) * packet_bytes_]);
    recv_slots_.assign(static_cast<std::size_t>(recv_count_), RingSlot{});
    send_dest_.assign(static_cast<std::size_t>(send_count_), -1);
    for (int i = send_count_ - 1; i >= 0; --i) send_free_.push_back(i);
    for (int i = 0; i < recv_count_; ++i) post_packet_recv(i);
    large_send_.resize(static_cast<std::size_t>(large_count_));
    large_dest_.assign(static_cast<std::size_t>(large_count_), -1);
    for (int i = large_count_ - 1; i >= 0; --i) large_free_.push_back(i);

    request_slots_.assign(static_cast<std::size_t>(request_ring_count_), RingSlot{});
    request_msgs_.assign(static_cast<std::size_t>(request_ring_count_), ReadRequestMessage{});
    for (int i = 0; i < request_ring_count_; ++i) post_request_recv(i);
    response_dest_.assign(static_cast<std::size_t>(response_count_), -1);
    response_region_.assign(static_cast<std::size_t>(response_count_), -1);
    for (int i = response_count_ - 1; i >= 0; --i) response_free_.push_back(i);

    // Reads: [0, capacity) the Rget or response receive, [capacity, 2 capacity) the request send.
    read_requests_.assign(2 * read_capacity_, MPI_REQUEST_NULL);
    read_indices_.resize(2 * read_capacity_);
    read_statuses_.resize(2 * read_capacity_);
    read_slots_.assign(read_capacity_, ReadSlot{});
    read_msgs_.assign(read_capacity_, ReadRequestMessage{});
    for (int i = static_cast<int>(read_capacity_) - 1; i >= 0; --i) read_free_.push_back(i);
    read_done_.resize(read_capacity_);
  }

  ~MpiTransport() override { shutdown(); }

  TransportKind kind() const noexcept override { return TransportKind::kMpi; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_packet_bytes() const noexcept override { return packet_bytes_; }
  std::size_t max_frame_bytes(int /*dest*/) const noexcept override { return frame_bytes_; }
  std::size_t max_read_bytes() const noexcept override { return INT_MAX; }

  TxStatus send(int dest, std::span<const std::byte> packet) override;

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override;

  int register_memory(void* base, std::size_t bytes) override;

  void deregister_memory(int id) override;

  TxStatus read(int dest, int id, std::uint64_t offset, void* local, std::size_t bytes,
                std::uint64_t cookie) override;

  int poll_reads(ReadCompletion* out, int max) override;

  void allgather(const void* mine, std::size_t bytes, void* all) override {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes),
                             MPI_BYTE, comm_, &request),
              "MPI_Iallgather");
    int done = 0;
    while (!done) {
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Iallgather (test)");
      if (!done) progress();
    }
  }

  void note_peer_failed(int peer) override {
    if (peer >= 0 && peer < size_) mark_failed(peer);
  }

  void barrier() override {
    // Ibarrier + test, progressing (and serving read requests) while waiting; an MPI error or a
    // known failed peer turns into an exception instead of an endless wait.
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    int done = 0;
    while (!done) {
      const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        throw std::runtime_error("netsparse mpi transport: barrier failed (a peer failed?): " +
                                 mpi_error_string(rc));
      }
      if (!done) {
        progress();
        if (any_failed()) {
          // The unfinished Ibarrier is abandoned, not freed: freeing a pending non-blocking
          // collective is erroneous (Open MPI aborts through the world error handler).
          throw std::runtime_error(
              "netsparse mpi transport: barrier abandoned, a peer is known to have failed");
        }
      }
    }
  }

  bool peer_failed(int peer) const noexcept override {
    return peer >= 0 && peer < size_ && failed_[static_cast<std::size_t>(peer)] != 0;
  }

  std::uint64_t bytes_sent() const noexcept override { return bytes_sent_; }

 private:
  struct ReadSlot {
    std::uint64_t cookie = 0;
    std::size_t bytes = 0;
    int dest = -1;
    int region = -1;
    int pending = 0;  // requests of this read still incomplete (Rget: 1; messages: 2)
    bool ok = true;
  };
  struct Region {
    MPI_Win win = MPI_WIN_NULL;
    std::byte* base = nullptr;
    std::vector<std::uint64_t> sizes;  // every rank's region size, for local bounds checks
    MpiReadMode mode = MpiReadMode::kMessages;
    bool used = false;
  };

  std::size_t reads_in_flight() const noexcept { return read_capacity_ - read_free_.size(); }

  std::size_t reads_in_flight(int region) const noexcept;

  std::size_t responses_in_flight(int region) const noexcept;

  enum class LargeReceive { kPending, kDone, kFailed };

  // The large frame announced by `src` at the ring's head: matched (MPI_Improbe), received
  // (MPI_Imrecv into large_recv_.buffer, grown to fit) and tested, never waited for. kFailed:
  // the source failed or MPI reported an error; the announcement is dropped.
  LargeReceive receive_large(int src);

  void post_packet_recv(int slot) {
    RingSlot& s = recv_slots_[static_cast<std::size_t>(slot)];
    s.state = RingSlot::kPosted;
    if (MPI_Irecv(recv_slab_.get() + static_cast<std::size_t>(slot) * packet_bytes_,
                  static_cast<int>(packet_bytes_), MPI_BYTE, MPI_ANY_SOURCE, kPacketTag, comm_,
                  &requests_[static_cast<std::size_t>(slot)]) != MPI_SUCCESS) {
      // Only on resource exhaustion: the slot skips a turn and is retried at the next pass.
      requests_[static_cast<std::size_t>(slot)] = MPI_REQUEST_NULL;
      s.state = RingSlot::kFailed;
    }
  }

  void post_request_recv(int slot);

  // One MPI_Testsome over every request the engine owns: progresses MPI and reaps all of them.
  void progress();

  // Answers peers' read requests in ring order (= per-source arrival order, which is what the
  // requesters' in-order response receives rely on), while response slots are free.
  void serve_read_requests();

  void reap_reads();

  void finish_read(int slot, bool ok);

  void mark_failed(int peer) {
    if (peer >= 0 && peer < size_) failed_[static_cast<std::size_t>(peer)] = 1;
  }

  bool any_failed() const {
    return std::any_of(failed_.begin(), failed_.end(), [](auto f) { return f != 0; });
  }

  // Teardown is collective (like MPI_Comm_free). With healthy peers: finish our sends while
  // still receiving and serving (a peer may wait for us to match its last packets or answer
  // its reads), then agree with an Ibarrier that everyone is done, then cancel the receive
  // rings. With a failed peer, or after MpiOptions::teardown_timeout_ms, hand the requests back to
  // MPI without waiting (never hang); the windows and the dup are then leaked on purpose, because
  // freeing them synchronizes with the dead peer.
  void shutdown() noexcept;

  // The large frame being received (one at a time: frames are delivered in ring order).
  struct LargeFrame {
    MPI_Request request = MPI_REQUEST_NULL;
    int count = 0;
    std::vector<std::byte> buffer;  // grown to the largest frame received, kept
  };

  const MpiReadMode read_mode_;
  const std::size_t packet_bytes_;
  const std::size_t frame_bytes_;
  // requests_ layout: [0, send_base_) packet receives, [send_base_, large_base_) packet sends,
  // [large_base_, request_ring_base_) large-frame payload sends, [request_ring_base_,
  // response_base_) read-request receives, [response_base_, end) read-response sends.
  const int recv_count_;
  const int send_count_;
  const int large_count_;
  const int request_ring_count_;
  const int response_count_;
  const int send_base_;
  const int large_base_;
  const int request_ring_base_;
  const int response_base_;
  const std::size_t read_capacity_;
  const int teardown_timeout_ms_;
  const int per_peer_cap_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  std::vector<std::uint8_t> failed_;
  std::uint64_t bytes_sent_ = 0;
  int messages_regions_ = 0;  // regions read through kMessages (progress in poll_reads)

  std::vector<MPI_Request> requests_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::unique_ptr<std::byte[]> recv_slab_;
  std::unique_ptr<std::byte[]> send_slab_;
  std::vector<RingSlot> recv_slots_;
  int recv_head_ = 0;
  std::vector<int> send_free_;
  std::vector<int> send_dest_;
  std::vector<int> in_flight_to_;                   // send buffers held per destination
  std::vector<std::vector<std::byte>> large_send_;  // large-frame payloads, grown to need
  std::vector<int> large_free_;
  std::vector<int> large_dest_;
  LargeFrame large_recv_;
  std::uint64_t large_frames_sent_ = 0;
  std::uint64_t large_frames_received_ = 0;
  std::vector<RingSlot> request_slots_;
  std::vector<ReadRequestMessage> request_msgs_;
  int request_head_ = 0;
  std::vector<int> response_free_;
  std::vector<int> response_dest_;
  std::vector<int> response_region_;

  std::vector<Region> regions_;
  std::vector<MPI_Request> read_requests_;
  std::vector<int> read_indices_;
  std::vector<MPI_Status> read_statuses_;
  std::vector<ReadSlot> read_slots_;
  std::vector<ReadRequestMessage> read_msgs_;
  std::vector<int> read_free_;
  CompletionRing read_done_;  // completions not yet returned
};

}  // namespace netsparse::transport::mpi_detail
