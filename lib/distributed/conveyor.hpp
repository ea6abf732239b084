// A Conveyors-style message aggregator over pure MPI (after the model of HPE/Cray bale's
// "conveyors": a direct, one-hop "vector" conveyor with an MPI porter). Reusable: the
// sa-conveyors / sa-opt baselines use it, and so can any benchmark that needs software
// aggregation of small items (e.g. an index gather).
//
//   Conveyor c(comm);                        // collective (duplicates comm: own channel)
//   c.begin(item_bytes);                     // collective
//   while (c.advance(i == n)) {              // done = this rank will push nothing more
//     for (; i < n; ++i) if (!c.push(&item[i], dest[i])) break;   // refused: buffers full
//     while (const std::byte* it = c.pull(&from)) consume(it, from);
//   }                                        // false once every rank is done, all delivered
//
// Items of `item_bytes` bytes are copied into a per-destination buffer of `buffer_bytes`; a
// full buffer is sent at once with MPI_Isend (a buffer being filled is never sent early, except
// at the end). Each link has `buffers_per_link` buffers, so a destination whose buffers are all
// in flight refuses the push (backpressure): the caller pulls and advances, then retries.
// Receives are pre-posted (MPI_Irecv, any source) and completed with MPI_Testsome in advance().
// Items to oneself go through a bounded local queue (no MPI).
//
// Request/reply needs TWO conveyors (one per direction), or it can deadlock: a rank that cannot
// push its reply must still accept requests. The request side's advance() returning false (no
// more requests can arrive) is the reply side's `done`:
//   bool more_req = true, more_rep = true;
//   while (more_req || more_rep) {
//     more_req = req.advance(i == n);  more_rep = rep.advance(!more_req);
//     ... push requests; pull requests -> push replies (unpull() if refused); pull replies ...
//   }
//
// Termination: when a rank is done it sends, to every peer, its last buffer with an END flag and
// the number of buffers it sent that peer. A rank is complete when it is done, every END went
// out and every send finished, and it has received END from every peer together with all the
// buffers announced, and every received item was pulled. Then nobody will send it anything.
//
// Not thread-safe: one thread drives a conveyor. No per-item allocation, lock or virtual call.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace netsparse::dist {

struct ConveyorOptions {
  std::size_t buffer_bytes = 10000;  // item area of one link buffer (bale's default)
  int buffers_per_link = 2;          // per destination (bale's default)
  int receive_buffers = 0;           // pre-posted receives; 0 = buffers_per_link * (P - 1)
};

struct ConveyorStats {
  std::uint64_t pushed = 0;            // items accepted by push()
  std::uint64_t refused = 0;           // push() calls refused (backpressure)
  std::uint64_t pulled = 0;            // items returned by pull()
  std::uint64_t buffers_sent = 0;      // MPI messages sent (END buffers included)
  std::uint64_t bytes_sent = 0;        // their bytes (16 B buffer header + items)
  std::uint64_t buffers_received = 0;  // MPI messages received
};

class Conveyor {
 public:
  // Collective over comm (MPI_Comm_dup): the conveyor's traffic never matches anyone else's.
  explicit Conveyor(MPI_Comm comm, const ConveyorOptions& options = {});
  ~Conveyor();
  Conveyor(const Conveyor&) = delete;
  Conveyor& operator=(const Conveyor&) = delete;

  // Starts a session with items of item_bytes (1 .. buffer_bytes). Collective in effect: every
  // rank must begin, and a session ends only when every rank has advanced to completion.
  // std::logic_error if a session is still running; std::invalid_argument for a bad size.
  void begin(std::size_t item_bytes);

  // Copies the item into dest's buffer; false if dest's buffers are all in flight (nothing is
  // copied). std::out_of_range for a bad dest, std::logic_error outside a session or after
  // advance(true).
  [[nodiscard]] bool push(const void* item, int dest);

  // The next received item (valid until the next pull, unpull, advance or begin), or nullptr.
  // *from receives the sender's rank.
  [[nodiscard]] const std::byte* pull(int* from);
  // Copying variant: true and the item copied into `item`, or false.
  [[nodiscard]] bool pull(void* item, int* from);
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
  struct SendBuffer {
    std::vector<std::byte> bytes;  // header + item area
    std::size_t used = 0;          // item bytes
    bool in_flight = false;
  };
  struct Link {                // towards one destination
    std::vector<int> buffers;  // indices into send_ of this link's buffers
    int filling = -1;          // buffer being filled, -1 if all are in flight
    std::uint64_t sent = 0;    // buffers sent on this link
    bool end_sent = false;
  };
  struct Peer {  // from one source
    std::uint64_t received = 0;
    std::uint64_t expected = UINT64_MAX;  // known once END arrived
  };

  void send_buffer(int dest, int buffer, bool end);
  void progress_sends();
  void progress_receives();
  void post_receive(int slot);
  bool try_finish();
  void require_session(const char* call) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  ConveyorOptions options_;
  std::size_t item_bytes_ = 0;
  std::size_t capacity_ = 0;  // item bytes a buffer holds (a multiple of item_bytes_)
  State state_ = State::dormant;
  bool done_ = false;

  std::vector<SendBuffer> send_;
  std::vector<MPI_Request> send_req_;
  std::vector<int> send_owner_;  // destination of each send buffer
  std::vector<Link> links_;

  std::vector<std::vector<std::byte>> recv_;
  std::vector<MPI_Request> recv_req_;
  std::vector<Peer> peers_;
  std::vector<int> ready_;  // completed receive slots, FIFO (ring of size recv_.size())
  std::size_t ready_head_ = 0;
  std::size_t ready_count_ = 0;
  std::vector<int> ready_src_;              // per receive slot: its source
  std::vector<std::uint32_t> ready_items_;  // per receive slot: items in it
  int cur_slot_ = -1;                       // slot being pulled from
  std::uint32_t cur_pos_ = 0;               // next item in it
  std::uint64_t session_ = 0;  // sessions begun; the MPI tag is its parity (see begin())

  std::vector<std::byte> self_queue_;  // items to oneself
  std::size_t self_head_ = 0;
  std::size_t self_limit_ = 0;

  enum class LastPull { none, network, self };
  LastPull last_pull_ = LastPull::none;

  std::vector<int> test_indices_;  // scratch for MPI_Testsome
  std::vector<MPI_Status> statuses_;
  ConveyorStats stats_;
};

}  // namespace netsparse::dist
