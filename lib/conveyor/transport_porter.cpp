#include "conveyor/transport_porter.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace netsparse::dist {

using transport::TxStatus;

TransportPorter::TransportPorter(std::unique_ptr<transport::Transport> transport)
    : tx_(std::move(transport)) {
  if (!tx_) throw std::invalid_argument("TransportPorter: no transport");
  if (tx_->max_packet_bytes() <= kHeadroomBytes) {
    throw std::invalid_argument("TransportPorter: the transport's packets are too small");
  }
  handler_ = [this](const transport::ReceivedPacket& p) { on_packet(p); };
}

TransportPorter::~TransportPorter() = default;

void TransportPorter::begin(int send_slots, int receive_slots, std::size_t max_bytes) {
  if (out_ != 0 || !refused_.empty()) {
    throw std::logic_error("TransportPorter::begin: the last session is live");
  }
  if (max_bytes + kHeadroomBytes > tx_->max_packet_bytes()) {
    throw std::invalid_argument("TransportPorter: buffers of " + std::to_string(max_bytes) +
                                " B do not fit the transport's packets");
  }
  ++session_;
  receive_slots_ = receive_slots;
  accepted_.clear();
  accepted_.reserve(static_cast<std::size_t>(send_slots));
  refused_.reserve(static_cast<std::size_t>(send_slots));
  while (pool_.size() < static_cast<std::size_t>(receive_slots)) {
    pool_.emplace_back(tx_->max_packet_bytes());
    length_.push_back(0);
    free_.push_back(static_cast<int>(pool_.size()) - 1);
  }
}

int TransportPorter::take_buffer() {
  if (free_.empty()) {  // only while a peer's next-session buffers are held
    pool_.emplace_back(tx_->max_packet_bytes());
    length_.push_back(0);
    return static_cast<int>(pool_.size()) - 1;
  }
  const int b = free_.back();
  free_.pop_back();
  return b;
}

void TransportPorter::send(int slot, int dest, std::span<std::byte> buffer) {
  std::memcpy(buffer.data(), &session_, kHeadroomBytes);
  const TxStatus s = tx_->send(dest, buffer);
  if (s == TxStatus::kOk) {
    accepted_.push_back(slot);
  } else if (s == TxStatus::kNoResource) {
    refused_.push_back(Refused{slot, dest, buffer});
  } else {
    throw std::runtime_error("TransportPorter: sending a buffer to rank " + std::to_string(dest) +
                             ": " + transport::to_string(s));
  }
}

void TransportPorter::on_packet(const transport::ReceivedPacket& p) {
  if (p.bytes.size() < kHeadroomBytes) {
    throw std::runtime_error("TransportPorter: a " + std::to_string(p.bytes.size()) +
                             "-byte packet from rank " + std::to_string(p.src));
  }
  std::uint64_t session = 0;
  std::memcpy(&session, p.bytes.data(), kHeadroomBytes);
  if (session != session_ && session != session_ + 1) {
    throw std::runtime_error("TransportPorter: a buffer of session " + std::to_string(session) +
                             " from rank " + std::to_string(p.src) + " during session " +
                             std::to_string(session_));
  }
  const int b = take_buffer();
  const std::size_t len = p.bytes.size() - kHeadroomBytes;
  std::memcpy(pool_[b].data(), p.bytes.data() + kHeadroomBytes, len);
  length_[b] = len;
  if (session == session_ + 1) {  // the peer is one session ahead: hold it for begin()
    early_.push_back(Held{b, p.src, session});
    ++held_early_;
    return;
  }
  arrived_[(*n_arrived_)++] = Arrival{b, p.src, std::span<const std::byte>(pool_[b].data(), len)};
  ++out_;
}

void TransportPorter::poll(int* sent, int* n_sent, Arrival* arrived, int* n_arrived) {
  *n_sent = 0;
  *n_arrived = 0;
  for (int slot : accepted_) sent[(*n_sent)++] = slot;
  accepted_.clear();
  for (std::size_t i = 0; i < refused_.size();) {
    const Refused r = refused_[i];
    const TxStatus s = tx_->send(r.dest, r.bytes);
    if (s == TxStatus::kOk) {
      sent[(*n_sent)++] = r.slot;
      refused_.erase(refused_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (s == TxStatus::kNoResource) {
      ++i;
    } else {
      throw std::runtime_error("TransportPorter: sending a buffer to rank " +
                               std::to_string(r.dest) + ": " + transport::to_string(s));
    }
  }
  // Buffers held from before this session began come first (a peer's buffers in order); the
  // next session's stay held.
  while (!early_.empty() && early_.front().session == session_ && out_ < receive_slots_) {
    const Held h = early_.front();
    early_.pop_front();
    arrived[(*n_arrived)++] = Arrival{
        h.buffer, h.src, std::span<const std::byte>(pool_[h.buffer].data(), length_[h.buffer])};
    ++out_;
  }
  if (out_ >= receive_slots_) return;  // no room: the packets wait in the transport
  if (!early_.empty() && early_.front().session == session_) return;
  arrived_ = arrived;
  n_arrived_ = n_arrived;
  tx_->poll(handler_, receive_slots_ - out_);
}

void TransportPorter::release(int slot) {
  free_.push_back(slot);
  --out_;
}

void TransportPorter::end() {
  if (!refused_.empty() || !accepted_.empty() || out_ != 0) {
    throw std::logic_error("TransportPorter::end: buffers of the session are still live");
  }
}

}  // namespace netsparse::dist
