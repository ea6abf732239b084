#include "collectives/fault_injection.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace netsparse::collectives {
namespace {
std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}
}  // namespace

FaultInjectingTransport::FaultInjectingTransport(std::unique_ptr<transport::Transport> inner,
                                                 const FaultOptions& o)
    : inner_(std::move(inner)), opt_(o), rng_(o.seed) {
  held_.resize(static_cast<std::size_t>(inner_->size()));
}

transport::TxStatus FaultInjectingTransport::send(int dest, std::span<const std::byte> packet) {
  if (opt_.exit_before_send >= 0 && sends_ == opt_.exit_before_send) {
    std::fprintf(stderr, "[rank %d] fault injection: exiting before send %lld\n", rank(),
                 static_cast<long long>(sends_));
    std::fflush(stderr);
    _exit(0);
  }
  const transport::TxStatus s = inner_->send(dest, packet);
  if (s == transport::TxStatus::kOk) ++sends_;
  return s;
}

int FaultInjectingTransport::poll(
    const std::function<void(const transport::ReceivedPacket&)>& handler, int max_packets) {
  if (opt_.max_delay_us == 0) return inner_->poll(handler, max_packets);
  const std::uint64_t now = now_ns();
  std::uniform_int_distribution<std::uint64_t> delay(0, std::uint64_t{opt_.max_delay_us} * 1000);
  inner_->poll(
      [&](const transport::ReceivedPacket& p) {
        auto& q = held_[static_cast<std::size_t>(p.src)];
        std::uint64_t at = now + delay(rng_);
        if (!q.empty() && q.back().release_ns > at) at = q.back().release_ns;  // keep pair order
        q.push_back({at, std::vector<std::byte>(p.bytes.begin(), p.bytes.end())});
      },
      max_packets);
  // Deliver due packets, visiting the sources from a random start.
  int delivered = 0;
  const int n = size();
  const int start = static_cast<int>(rng_() % static_cast<std::uint64_t>(n));
  for (int k = 0; k < n && delivered < max_packets; ++k) {
    auto& q = held_[static_cast<std::size_t>((start + k) % n)];
    while (!q.empty() && q.front().release_ns <= now && delivered < max_packets) {
      Held h = std::move(q.front());
      q.pop_front();
      handler(transport::ReceivedPacket{(start + k) % n, h.bytes});
      ++delivered;
    }
  }
  return delivered;
}

}  // namespace netsparse::collectives
