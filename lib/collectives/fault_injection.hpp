// A Transport decorator that disturbs timing for tests (and benchmarks of robustness): received
// packets are held back a random time each (per-source order kept, as the contract requires, so
// only the interleaving of sources changes), and optionally the process exits abruptly after a
// number of sends (a peer dying mid-operation).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "transport/transport.hpp"

namespace netsparse::collectives {

struct FaultOptions {
  std::uint32_t max_delay_us = 0;  // each received packet is held [0, max_delay_us] µs
  std::uint64_t seed = 1;
  // >= 0: _exit(0) right before the send with this number (0-based), no teardown at all.
  std::int64_t exit_before_send = -1;
};

class FaultInjectingTransport final : public transport::Transport {
 public:
  FaultInjectingTransport(std::unique_ptr<transport::Transport> inner, const FaultOptions& o);
  transport::TransportKind kind() const noexcept override { return inner_->kind(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_packet_bytes() const noexcept override { return inner_->max_packet_bytes(); }
  transport::TxStatus send(int dest, std::span<const std::byte> packet) override;
  int poll(const std::function<void(const transport::ReceivedPacket&)>& handler,
           int max_packets) override;
  int register_memory(void* base, std::size_t bytes) override {
    return inner_->register_memory(base, bytes);
  }
  void deregister_memory(int region) override { inner_->deregister_memory(region); }
  transport::TxStatus read(int dest, int region, std::uint64_t offset, void* local,
                           std::size_t bytes, std::uint64_t cookie) override {
    return inner_->read(dest, region, offset, local, bytes, cookie);
  }
  int poll_reads(transport::ReadCompletion* out, int max) override {
    return inner_->poll_reads(out, max);
  }
  void barrier() override { inner_->barrier(); }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    inner_->allgather(mine, bytes, all);
  }
  bool peer_failed(int peer) const noexcept override { return inner_->peer_failed(peer); }
  void note_peer_failed(int peer) override { inner_->note_peer_failed(peer); }
  std::uint64_t bytes_sent() const noexcept override { return inner_->bytes_sent(); }
  std::size_t max_read_bytes() const noexcept override { return inner_->max_read_bytes(); }
  std::string detail() const override { return inner_->detail(); }
  // reserve/commit are not offered: every send goes through send(), where faults are injected.

 private:
  struct Held {
    std::uint64_t release_ns;
    std::vector<std::byte> bytes;
  };
  std::unique_ptr<transport::Transport> inner_;
  FaultOptions opt_;
  std::mt19937_64 rng_;
  std::vector<std::deque<Held>> held_;  // per source, in arrival order
  std::int64_t sends_ = 0;
};

}  // namespace netsparse::collectives
