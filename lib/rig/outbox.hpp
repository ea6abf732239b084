// The Concatenation Point's sink and the transport framing (docs/architecture.md): finished
// protocol packets are appended to a per-destination frame; at the end of each engine step every
// frame leaves as ONE transport message, so MPI or verbs costs are paid per frame, not per
// 1500-byte packet. A frame is a concatenation of whole packets (concat/frame.hpp); it closes
// when the next packet would not fit in the transport's largest message. Where the transport
// lends its own memory (Transport::reserve: the shared-memory rings), the frame is built right
// there and sent without another copy; otherwise in the outbox's buffers. Frames the transport
// cannot take yet stay queued, in order, per destination; frames for failed peers are dropped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "concat/concat_point.hpp"
#include "rig/port.hpp"
#include "transport/transport.hpp"

namespace netsparse::rig {

struct OutboxStats {
  std::uint64_t frames = 0;         // transport messages sent
  std::uint64_t frame_packets = 0;  // protocol packets in them
  std::uint64_t frame_bytes = 0;
  std::uint64_t retries = 0;  // sends refused for lack of resources (kept, retried later)
  std::uint64_t dropped = 0;  // frames for failed peers
  std::uint64_t tx_errors = 0;
};

class Outbox final : public concat::PacketSink {
 public:
  // `dead` (size entries) is shared with the engine; a send that finds the peer failed marks it
  // there and tells `sink`.
  Outbox(transport::Transport& tx, std::atomic<bool>* dead, CommandSink& sink, int nodes);
  void on_packet(std::uint32_t dest, concat::PrType type, std::span<const std::byte> packet,
                 concat::FlushCause cause) override;
  // Room for one packet of up to `bytes` bytes (at most frame_capacity()) at the end of dest's
  // frame, a new frame when it does not fit; the caller writes the packet there and then calls
  // commit_packet(dest, its length) before anything else uses the outbox. Lets a unit build a
  // bulk packet in place (plan rows) instead of copying it in.
  std::byte* packet_room(std::uint32_t dest, std::size_t bytes);
  // The same, but only where the transport lends its memory to dest (Transport::lends): room in
  // the transport's memory, or nullptr when it has none now (the consumer has not drained yet,
  // or frames already wait in dest's queue) and the caller should come back at a later step
  // instead of copying a bulk answer into the queue (a copy, then a second one into the ring).
  // Where the transport does not lend to dest, the same as packet_room (never nullptr).
  // `answer_bytes`: what the caller has still to write to dest in all (a bulk answer), so that
  // a new frame in the transport's memory is as large as that where the transport can lend it.
  std::byte* packet_room_or_later(std::uint32_t dest, std::size_t bytes,
                                  std::size_t answer_bytes = 0);
  void commit_packet(std::uint32_t dest, std::size_t used);
  // Where the last packet_room / packet_room_or_later answer was: the transport's memory.
  bool last_room_lent() const noexcept { return room_in_lent_; }
  bool dead(std::uint32_t dest) const noexcept {
    return dead_[dest].load(std::memory_order_relaxed);
  }
  // Sends every frame (closed or still open), in order per destination, until the transport
  // refuses; returns frames sent.
  std::size_t flush();
  bool empty() const noexcept { return dirty_.empty(); }
  std::size_t queued_frames() const noexcept { return queued_frames_; }  // waiting in the queues
  const OutboxStats& stats() const noexcept { return stats_; }
  void reset_stats() noexcept { stats_ = OutboxStats{}; }
  std::size_t frame_capacity() const noexcept { return frame_bytes_; }

 private:
  struct Frame {
    std::vector<std::byte> bytes;
    std::uint32_t packets = 0;
    std::size_t cap = 0;  // the most bytes it may grow to (Transport::max_frame_bytes)
  };
  // A frame being built in the transport's memory (reserve/commit).
  struct Lent {
    std::span<std::byte> room;
    std::size_t used = 0;
    std::uint32_t packets = 0;
  };
  // Room in dest's lent frame (a new reservation when it is full), or nullptr when the
  // transport has none to lend now or frames wait in dest's queue (they leave first).
  std::byte* lent_room(std::uint32_t dest, std::size_t bytes, std::size_t answer_bytes = 0);
  // Sends the lent frame of dest (if any) and forgets it.
  void commit_lent(std::uint32_t dest);
  // True when the frame left (or was dropped for good); false = keep it and retry.
  bool try_send(std::uint32_t dest, const Frame& f);

  transport::Transport& tx_;
  std::atomic<bool>* dead_;
  CommandSink& sink_;
  const std::size_t frame_bytes_;
  std::vector<std::deque<Frame>> queues_;  // per destination; the back one may still grow
  std::vector<Lent> lent_;                 // per destination
  std::vector<std::uint32_t> dirty_;       // destinations with frames queued or lent
  std::vector<unsigned char> is_dirty_;    // per destination: listed in dirty_
  void mark_dirty(std::uint32_t dest) {
    if (!is_dirty_[dest]) {
      is_dirty_[dest] = 1;
      dirty_.push_back(dest);
    }
  }
  std::vector<std::vector<std::byte>> spare_;
  std::size_t queued_frames_ = 0;
  bool room_in_lent_ = false;  // packet_room's answer: in the lent frame, or at room_at_ of the
  std::size_t room_at_ = 0;    // last queued frame
  OutboxStats stats_;
};

}  // namespace netsparse::rig
