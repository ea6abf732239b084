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

namespace netsparse::transport {

namespace {

// Any tags: the dup'd communicator already isolates us from the application.
constexpr int kPacketTag = 0x4e53;
constexpr int kReadRequestTag = 0x4e54;
constexpr int kReadResponseTag = 0x4e55;
constexpr int kLargeFrameTag = 0x4e56;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

using agreement::check_mpi;

// Keeps a receive buffer MPI may still write into (a request let go of) alive, and reachable,
// until the process exits.
void abandon(std::vector<std::byte>&& buffer) {
  static std::mutex mu;
  static std::vector<std::vector<std::byte>> kept;
  const std::lock_guard<std::mutex> lock(mu);
  kept.push_back(std::move(buffer));
}

MpiReadMode resolve_read_mode(MpiReadMode requested) {
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

  TxStatus send(int dest, std::span<const std::byte> packet) override {
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

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override {
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

  void deregister_memory(int id) override {
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

  int poll_reads(ReadCompletion* out, int max) override {
    if (reads_in_flight() > 0) {
      if (messages_regions_) progress();  // serve peers' requests and drive ours
      reap_reads();
    }
    return read_done_.pop(out, max);
  }

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

  std::size_t reads_in_flight(int region) const noexcept {
    std::size_t n = 0;
    for (const ReadSlot& s : read_slots_) n += (s.pending > 0 && s.region == region) ? 1 : 0;
    return n;
  }

  std::size_t responses_in_flight(int region) const noexcept {
    std::size_t n = 0;
    for (int i = 0; i < response_count_; ++i) {
      n += (requests_[static_cast<std::size_t>(response_base_ + i)] != MPI_REQUEST_NULL &&
            response_region_[static_cast<std::size_t>(i)] == region)
               ? 1
               : 0;
    }
    return n;
  }

  enum class LargeReceive { kPending, kDone, kFailed };

  // The large frame announced by `src` at the ring's head: matched (MPI_Improbe), received
  // (MPI_Imrecv into large_recv_.buffer, grown to fit) and tested, never waited for. kFailed:
  // the source failed or MPI reported an error; the announcement is dropped.
  LargeReceive receive_large(int src) {
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

  void post_request_recv(int slot) {
    RingSlot& s = request_slots_[static_cast<std::size_t>(slot)];
    s.state = RingSlot::kPosted;
    MPI_Request& request = requests_[static_cast<std::size_t>(request_ring_base_ + slot)];
    if (MPI_Irecv(&request_msgs_[static_cast<std::size_t>(slot)], sizeof(ReadRequestMessage),
                  MPI_BYTE, MPI_ANY_SOURCE, kReadRequestTag, comm_, &request) != MPI_SUCCESS) {
      request = MPI_REQUEST_NULL;
      s.state = RingSlot::kFailed;
    }
  }

  // One MPI_Testsome over every request the engine owns: progresses MPI and reaps all of them.
  void progress() {
    // Read requests only arrive while some region is served by messages (every rank agrees on a
    // region's mode), so otherwise the read part of the array is left out of the scan.
    const int active =
        messages_regions_ > 0 ? static_cast<int>(requests_.size()) : request_ring_base_;
    int count = 0;
    const int rc =
        MPI_Testsome(active, requests_.data(), &count, indices_.data(), statuses_.data());
    if (count != MPI_UNDEFINED) {
      for (int k = 0; k < count; ++k) {
        const int index = indices_[static_cast<std::size_t>(k)];
        const MPI_Status& status = statuses_[static_cast<std::size_t>(k)];
        const bool ok =
            rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && status.MPI_ERROR == MPI_SUCCESS);
        if (index < send_base_ || (index >= request_ring_base_ && index < response_base_)) {
          const bool packet = index < send_base_;
          RingSlot& slot =
              packet ? recv_slots_[static_cast<std::size_t>(index)]
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

  // Answers peers' read requests in ring order (= per-source arrival order, which is what the
  // requesters' in-order response receives rely on), while response slots are free.
  void serve_read_requests() {
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

  void reap_reads() {
    int count = 0;
    const int rc = MPI_Testsome(static_cast<int>(read_requests_.size()), read_requests_.data(),
                                &count, read_indices_.data(), read_statuses_.data());
    if (count == MPI_UNDEFINED) return;
    for (int k = 0; k < count; ++k) {
      const int index = read_indices_[static_cast<std::size_t>(k)];
      const MPI_Status& status = read_statuses_[static_cast<std::size_t>(k)];
      const bool response = static_cast<std::size_t>(index) < read_capacity_;
      const int slot =
          static_cast<int>(response ? index : index - static_cast<int>(read_capacity_));
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

  void finish_read(int slot, bool ok) {
    read_done_.push({read_slots_[static_cast<std::size_t>(slot)].cookie, ok});
    read_slots_[static_cast<std::size_t>(slot)] = ReadSlot{};
    read_free_.push_back(slot);
  }

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
  void shutdown() noexcept {
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

}  // namespace

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
  return std::make_unique<MpiTransport>(comm, resolved);
}

}  // namespace netsparse::transport
