// A Conveyors-style message aggregator (after the model of HPE/Cray bale's "conveyors": a direct,
// one-hop "vector" conveyor). The buffers move through a Porter (porter.hpp): MpiPorter
// (MPI_Isend / MPI_Irecv / MPI_Testsome, the default) or TransportPorter (any
// transport::Transport). The library's one Conveyors baseline: sa-conveyors / sa-opt and
// bench_index_gather use it, through RequestReply (request_reply.hpp) when they gather.
//
//   Conveyor c(comm);                        // collective (the MPI porter dups comm)
//   c.begin(item_bytes);                     // collective
//   while (c.advance(i == n)) {              // done = this rank will push nothing more
//     for (; i < n; ++i) if (!c.push(&item[i], dest[i])) break;   // refused: buffers full
//     while (const std::byte* it = c.pull(&from)) consume(it, from);
//   }                                        // false once every rank is done, all delivered
//
// Items of `item_bytes` bytes are copied into a per-destination buffer of `buffer_bytes`; a
// full buffer is sent at once (a buffer being filled is never sent early, except at the end).
// Each link has `buffers_per_link` buffers, so a destination whose buffers are all in flight
// refuses the push (backpressure): the caller pulls and advances, then retries. Received
// buffers are pulled from in arrival order. Items to oneself go through a bounded local queue
// (no porter).
//
// Request/reply needs TWO conveyors (one per direction), or it can deadlock: a rank that cannot
// push its reply must still accept requests. The request side's advance() returning false (no
// more requests can arrive) is the reply side's `done`:
//   bool more_req = true, more_rep = true;
//   while (more_req || more_rep) {
//     more_req = req.advance(i == n);  ... pull requests -> push replies (unpull() if refused)
//     more_rep = rep.advance(!more_req);  ... pull replies; push requests
//   }
// RequestReply (request_reply.hpp) packages exactly this loop behind an answer callback; use
// it rather than writing the loop again.
//
// Termination: when a rank is done it sends, to every peer, its last buffer with an END flag and
// the number of buffers it sent that peer. A rank is complete when it is done, every END went
// out and every send finished, and it has received END from every peer together with all the
// buffers announced, and every received item was pulled. Then nobody will send it anything.
//
// Not thread-safe: one thread drives a conveyor. No per-item allocation, lock or virtual call:
// push / reserve / pull are inline; the porter is called per buffer and per advance.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "concat/wire_model.hpp"
#include "conveyor/porter.hpp"

namespace netsparse::dist {

struct ConveyorOptions {
  std::size_t buffer_bytes = 10000;  // item area of one link buffer (bale's default)
  int buffers_per_link = 2;          // per destination (bale's default)
  int receive_buffers = 0;           // receives held at once; 0 = buffers_per_link * (P - 1)
};

struct ConveyorStats {
  std::uint64_t pushed = 0;            // items accepted by push() / reserve()
  std::uint64_t refused = 0;           // push() / reserve() calls refused (backpressure)
  std::uint64_t pulled = 0;            // items returned by pull()
  std::uint64_t buffers_sent = 0;      // buffers handed to the porter (END buffers included)
  std::uint64_t bytes_sent = 0;        // their bytes (16 B buffer header + items)
  std::uint64_t buffers_received = 0;  // buffers received
};

// Bytes on the wire of what the stats count as sent, priced by the one wire model: every buffer
// is an MPI message (its 16 B header + items) plus the paper's 50 B of upper layers.
[[nodiscard]] constexpr std::uint64_t wire_bytes(const ConveyorStats& s) {
  return concat::mpi_messages_wire_bytes(s.buffers_sent, s.bytes_sent);
}

class Conveyor {
 public:
  // Over MPI: an MpiPorter on a duplicate of comm (collective), so the conveyor's traffic never
  // matches anyone else's.
  explicit Conveyor(MPI_Comm comm, const ConveyorOptions& options = {});
  // Over any porter (e.g. a TransportPorter); the conveyor owns it.
  explicit Conveyor(std::unique_ptr<Porter> porter, const ConveyorOptions& options = {});
  ~Conveyor();
  Conveyor(const Conveyor&) = delete;
  Conveyor& operator=(const Conveyor&) = delete;

  // Starts a session with items of item_bytes (1 .. buffer_bytes). Collective in effect: every
  // rank must begin, and a session ends only when every rank has advanced to completion.
  // std::logic_error if a session is still running; std::invalid_argument for a bad size.
  void begin(std::size_t item_bytes);
  // The checks begin() makes on item_bytes (std::invalid_argument), without beginning.
  void check_item_bytes(std::size_t item_bytes) const;

  // Copies the item into dest's buffer; false if dest's buffers are all in flight (nothing is
  // copied). std::out_of_range for a bad dest, std::logic_error outside a session or after
  // advance(true).
  [[nodiscard]] bool push(const void* item, int dest) {
    std::byte* slot = reserve(dest);
    if (slot == nullptr) return false;
    std::memcpy(slot, item, item_bytes_);
    if (full_dest_ >= 0) send_full();
    return true;
  }
  // Push without a copy: room for one item in dest's buffer, to be written by the caller before
  // its next call on this conveyor, or nullptr if refused (as push). The item counts as pushed.
  [[nodiscard]] std::byte* reserve(int dest) {
    if (full_dest_ >= 0) send_full();
    if (state_ != State::working || static_cast<unsigned>(dest) >= static_cast<unsigned>(size_) ||
        dest == rank_) {
      return reserve_slow(dest);
    }
    Link& link = links_[dest];
    if (link.filling < 0) {
      ++stats_.refused;
      return nullptr;
    }
    SendBuffer& buf = send_[link.filling];
    std::byte* slot = buf.items + buf.used;
    buf.used += item_bytes_;
    ++stats_.pushed;
    if (buf.used + item_bytes_ > capacity_) full_dest_ = dest;  // sent on the next call
    return slot;
  }

  // The next received item (valid until the next pull, unpull, advance or begin), or nullptr.
  // *from receives the sender's rank.
  [[nodiscard]] const std::byte* pull(int* from) {
    if (cur_left_ > 0) {
      const std::byte* item = cur_;
      cur_ += item_bytes_;
      --cur_left_;
      *from = cur_src_;
      last_pull_ = LastPull::network;
      ++stats_.pulled;
      return item;
    }
    return pull_slow(from);
  }
  // Copying variant: true and the item copied into `item`, or false.
  [[nodiscard]] bool pull(void* item, int* from) {
    const std::byte* p = pull(from);
    if (p == nullptr) return false;
    std::memcpy(item, p, item_bytes_);
    return true;
  }
  // Puts the item returned by the last pull() back (it will be pulled again first), e.g. when
  // the reply it asks for cannot be pushed. Only directly after a successful pull.
  void unpull();

  // Makes progress: completes sends and receives, and when `done` (this rank pushes nothing
  // more; must stay true once given) sends the final buffers. Returns true while the session
  // runs, false once it is complete on this rank (see Termination). No-op returning false
  // outside a session.
  bool advance(bool done);

  void reset_stats() noexcept { stats_ = {}; }
  [[nodiscard]] const ConveyorStats& stats() const noexcept { return stats_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] std::size_t item_bytes() const noexcept { return item_bytes_; }
  [[nodiscard]] const ConveyorOptions& options() const noexcept { return options_; }
  [[nodiscard]] bool running() const noexcept {
    return state_ == State::working || state_ == State::endgame;
  }

  // Header of every buffer on the wire (public for tests and byte accounting).
  struct BufferHeader {
    std::uint32_t items;
    std::uint32_t flags;          // kEndFlag
    std::uint64_t buffers_total;  // with END: buffers this sender sent the receiver, END included
  };
  static constexpr std::uint32_t kEndFlag = 1;

 private:
  enum class State { dormant, working, endgame, complete };
  enum class LastPull { none, network, self };
  struct SendBuffer {
    std::vector<std::byte> bytes;  // porter headroom + header + item area
    std::byte* items = nullptr;    // the item area in `bytes`
    std::size_t used = 0;          // item bytes
    int dest = -1;
    bool in_flight = false;
  };
  struct Link {              // towards one destination
    int first = 0;           // its buffers: send_[first, first + buffers_per_link)
    int filling = -1;        // buffer being filled, -1 if all are in flight
    std::uint64_t sent = 0;  // buffers sent on this link
    bool end_sent = false;
  };
  struct Peer {  // from one source
    std::uint64_t received = 0;
    std::uint64_t expected = UINT64_MAX;  // known once END arrived
  };
  struct Ready {  // a received buffer waiting to be pulled from
    int slot;
    int src;
    std::uint32_t items;
    const std::byte* data;  // first item
  };

  void init();
  [[nodiscard]] std::byte* reserve_slow(int dest);
  [[nodiscard]] const std::byte* pull_slow(int* from);
  void send_full();
  void send_buffer(int dest, int buffer, bool end);
  void progress();
  bool try_finish();
  void require_session(const char* call) const;

  std::unique_ptr<Porter> porter_;
  int rank_ = 0;
  int size_ = 1;
  ConveyorOptions options_;
  std::size_t headroom_ = 0;  // the porter's, in front of every send buffer
  std::size_t item_bytes_ = 0;
  std::size_t capacity_ = 0;  // item bytes a buffer holds (a multiple of item_bytes_)
  State state_ = State::dormant;
  bool done_ = false;
  int full_dest_ = -1;  // a link whose filling buffer is full, sent on the next call

  std::vector<SendBuffer> send_;
  std::vector<Link> links_;
  int sends_in_flight_ = 0;

  std::vector<Peer> peers_;
  std::vector<Ready> ready_;  // FIFO ring of received buffers (capacity: the receive slots)
  std::size_t ready_head_ = 0;
  std::size_t ready_count_ = 0;
  int cur_slot_ = -1;  // slot being pulled from
  int cur_src_ = -1;
  const std::byte* cur_ = nullptr;  // its next item
  std::uint32_t cur_left_ = 0;      // items left in it

  std::vector<std::byte> self_queue_;  // items to oneself
  std::size_t self_head_ = 0;
  std::size_t self_limit_ = 0;
  LastPull last_pull_ = LastPull::none;

  std::vector<int> sent_scratch_;  // porter poll output
  std::vector<Porter::Arrival> arrived_scratch_;
  ConveyorStats stats_;
};

}  // namespace netsparse::dist
