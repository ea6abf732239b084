// Porters move a Conveyor's buffers between ranks (after bale's porters: the conveyor decides
// what goes into a buffer and when it leaves; the porter only moves whole buffers). The seam
// lets the same conveyor run over MPI point-to-point (MpiPorter, here) or over the library's
// transport::Transport (TransportPorter, transport_porter.hpp).
//
// A porter is called once per buffer (send, release) and once per Conveyor::advance (poll),
// never per item, so the virtual calls cost nothing measurable.
//
// Sessions: Conveyor::begin calls begin(), and end() once the session is complete on this rank
// (every buffer of the session arrived, every send completed). A peer can be at most one
// session ahead (a session cannot complete without this rank), so a porter must keep buffers
// of the next session apart from the current one's (MpiPorter: the MPI tag is the session's
// parity) and deliver them after the next begin().
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace netsparse::dist {

class Porter {
 public:
  // A received buffer: valid (and its slot taken) until release(slot).
  struct Arrival {
    int slot;
    int src;
    std::span<const std::byte> bytes;
  };

  virtual ~Porter() = default;
  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int size() const noexcept = 0;
  // Bytes the porter may write in front of every buffer it sends (its own framing); the
  // conveyor leaves that much room at the start of each send buffer. Received buffers come
  // without it.
  [[nodiscard]] virtual std::size_t headroom() const noexcept { return 0; }
  // Largest buffer send() accepts, headroom included.
  [[nodiscard]] virtual std::size_t max_buffer_bytes() const noexcept { return SIZE_MAX; }

  // A session starts: sends use slots [0, send_slots); at most receive_slots arrivals are held
  // at once (unreleased); no buffer is longer than max_bytes (headroom excluded).
  virtual void begin(int send_slots, int receive_slots, std::size_t max_bytes) = 0;
  // Starts moving `buffer` (headroom + the conveyor's bytes) to dest (never this rank). The
  // bytes stay untouched until poll() reports the slot complete; the slot is not in flight.
  virtual void send(int slot, int dest, std::span<std::byte> buffer) = 0;
  // Makes progress without blocking. Writes the slots of completed sends to `sent` (room for
  // send_slots) and new arrivals to `arrived` (room for receive_slots) and their counts.
  virtual void poll(int* sent, int* n_sent, Arrival* arrived, int* n_arrived) = 0;
  // The conveyor is done with an arrival: its slot takes a later buffer.
  virtual void release(int slot) = 0;
  // The session is complete on this rank: nothing more of it is in flight either way.
  virtual void end() = 0;
};

// The pure-MPI porter: MPI_Isend of each buffer, receives pre-posted with MPI_Irecv
// (MPI_ANY_SOURCE) into buffers it owns, one MPI_Testsome over sends and receives per poll().
// Collective construction: duplicates the communicator, so its traffic matches nobody else's.
class MpiPorter final : public Porter {
 public:
  explicit MpiPorter(MPI_Comm comm);
  ~MpiPorter() override;
  MpiPorter(const MpiPorter&) = delete;
  MpiPorter& operator=(const MpiPorter&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::size_t max_buffer_bytes() const noexcept override;
  void begin(int send_slots, int receive_slots, std::size_t max_bytes) override;
  void send(int slot, int dest, std::span<std::byte> buffer) override;
  void poll(int* sent, int* n_sent, Arrival* arrived, int* n_arrived) override;
  void release(int slot) override;
  void end() override;

 private:
  void post_receive(int slot);
  [[nodiscard]] int tag() const noexcept { return static_cast<int>(session_ & 1); }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t session_ = 0;  // sessions begun; the MPI tag is its parity
  int send_slots_ = 0;
  std::size_t max_bytes_ = 0;
  // requests_[0, send_slots_) are the sends, [send_slots_, ...) the receives: one MPI_Testsome.
  std::vector<MPI_Request> requests_;
  std::vector<std::vector<std::byte>> recv_;  // per receive slot
  std::vector<int> indices_;                  // MPI_Testsome scratch
  std::vector<MPI_Status> statuses_;
};

}  // namespace netsparse::dist
