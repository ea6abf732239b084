// A Porter over the library's transport::Transport (inproc, MPI, verbs): one packet per conveyor
// buffer, so a Conveyor or RequestReply runs over any transport, e.g. node threads of one
// process on an InprocFabric.
//
//   auto porter = std::make_unique<TransportPorter>(fabric.endpoint(rank));
//   Conveyor c(std::move(porter), options);   // buffers must fit max_packet_bytes (8 B + 16 B
//                                             // of headers + buffer_bytes)
//
// - Framing: the porter's 8 B of headroom carry the session number. Buffers from a peer that
//   is already in the next session (a peer can be one session ahead) are held, in arrival
//   order, until this rank begins that session.
// - Sends: Transport::send copies the packet, so a send completes as soon as the transport takes
//   it; one it refuses (kNoResource: no mailbox cell / credit now) is retried on every poll.
//   kPeerFailed and kError throw std::runtime_error.
// - Receives: packets are copied out of the transport's handler into buffers the porter owns
//   (allocated once; the pool grows only to hold a peer's next-session buffers). It never takes
//   more packets from the transport than the conveyor has free receive slots, so a rank that
//   stops pulling backs its senders up in the transport (backpressure), not in memory.
// - A transport delivers everything sent to its endpoint, so each porter needs its own endpoint
//   (RequestReply: one endpoint, e.g. one InprocFabric, per direction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "conveyor/porter.hpp"
#include "transport/transport.hpp"

namespace netsparse::dist {

class TransportPorter final : public Porter {
 public:
  explicit TransportPorter(std::unique_ptr<transport::Transport> transport);
  ~TransportPorter() override;
  TransportPorter(const TransportPorter&) = delete;
  TransportPorter& operator=(const TransportPorter&) = delete;

  static constexpr std::size_t kHeadroomBytes = 8;  // the session number (u64)

  [[nodiscard]] int rank() const noexcept override { return tx_->rank(); }
  [[nodiscard]] int size() const noexcept override { return tx_->size(); }
  [[nodiscard]] std::size_t headroom() const noexcept override { return kHeadroomBytes; }
  [[nodiscard]] std::size_t max_buffer_bytes() const noexcept override {
    return tx_->max_packet_bytes();
  }
  void begin(int send_slots, int receive_slots, std::size_t max_bytes) override;
  void send(int slot, int dest, std::span<std::byte> buffer) override;
  void poll(int* sent, int* n_sent, Arrival* arrived, int* n_arrived) override;
  void release(int slot) override;
  void end() override;

  [[nodiscard]] transport::Transport& transport() noexcept { return *tx_; }
  // Buffers that arrived one session early and were held (a statistic, for tests).
  [[nodiscard]] std::uint64_t held_early() const noexcept { return held_early_; }

 private:
  struct Refused {  // a send the transport refused, retried on poll
    int slot;
    int dest;
    std::span<const std::byte> bytes;
  };
  struct Held {  // a next-session packet in a pool buffer
    int buffer;
    int src;
    std::uint64_t session;
  };
  void on_packet(const transport::ReceivedPacket& packet);
  [[nodiscard]] int take_buffer();

  std::unique_ptr<transport::Transport> tx_;
  std::function<void(const transport::ReceivedPacket&)> handler_;  // built once
  std::uint64_t session_ = 0;
  int receive_slots_ = 0;
  int out_ = 0;  // arrivals handed to the conveyor and not yet released

  std::vector<int> accepted_;  // sends the transport took since the last poll
  std::vector<Refused> refused_;

  std::vector<std::vector<std::byte>> pool_;  // receive buffers of max_packet_bytes
  std::vector<std::size_t> length_;           // bytes in each pool buffer
  std::vector<int> free_;                     // pool buffers not in use
  std::deque<Held> early_;                    // next session's buffers, in arrival order
  std::uint64_t held_early_ = 0;

  // poll() scratch: where on_packet writes this session's arrivals.
  Arrival* arrived_ = nullptr;
  int* n_arrived_ = nullptr;
};

}  // namespace netsparse::dist
