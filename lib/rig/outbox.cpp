#include "rig/outbox.hpp"

#include <algorithm>
#include <cstring>

#include "concat/frame.hpp"

namespace netsparse::rig {

Outbox::Outbox(transport::Transport& tx, std::atomic<bool>* dead, CommandSink& sink, int nodes)
    : tx_(tx),
      dead_(dead),
      sink_(sink),
      frame_bytes_(tx.max_packet_bytes()),
      queues_(static_cast<std::size_t>(nodes)),
      lent_(static_cast<std::size_t>(nodes)),
      is_dirty_(static_cast<std::size_t>(nodes), 0) {}

void Outbox::on_packet(std::uint32_t dest, concat::PrType, std::span<const std::byte> packet,
                       concat::FlushCause) {
  std::memcpy(packet_room(dest, packet.size()), packet.data(), packet.size());
  commit_packet(dest, packet.size());
}

std::byte* Outbox::lent_room(std::uint32_t dest, std::size_t bytes, std::size_t answer_bytes) {
  // In the transport's memory while nothing is queued for dest (order is kept: once a frame
  // waits in the queue, everything after it waits behind it).
  if (!queues_[dest].empty() || dead_[dest].load(std::memory_order_relaxed)) return nullptr;
  Lent& lent = lent_[dest];
  if (!lent.room.empty() &&
      (lent.used + bytes > lent.room.size() || lent.packets == concat::kMaxPacketsPerFrame)) {
    commit_lent(dest);  // full: it leaves now, the next one is reserved below
  }
  if (lent.room.empty() && bytes <= frame_bytes_) {
    lent.room = tx_.reserve_for(static_cast<int>(dest), std::max(bytes, answer_bytes));
    lent.used = 0;
    lent.packets = 0;
    if (!lent.room.empty()) mark_dirty(dest);
  }
  if (lent.room.empty() || lent.used + bytes > lent.room.size()) return nullptr;
  room_in_lent_ = true;
  return lent.room.data() + lent.used;
}

std::byte* Outbox::packet_room_or_later(std::uint32_t dest, std::size_t bytes,
                                        std::size_t answer_bytes) {
  if (!tx_.lends(static_cast<int>(dest)) || dead_[dest].load(std::memory_order_relaxed)) {
    return packet_room(dest, bytes);
  }
  return lent_room(dest, bytes, answer_bytes);
}

std::byte* Outbox::packet_room(std::uint32_t dest, std::size_t bytes) {
  if (std::byte* at = lent_room(dest, bytes)) return at;
  std::deque<Frame>& q = queues_[dest];
  Lent& lent = lent_[dest];
  if (!lent.room.empty()) commit_lent(dest);  // keep the order: what was lent leaves first
  if (q.empty() || q.back().bytes.size() + bytes > q.back().cap ||
      q.back().packets == concat::kMaxPacketsPerFrame) {
    mark_dirty(dest);
    Frame f;
    if (!spare_.empty()) {
      f.bytes = std::move(spare_.back());
      spare_.pop_back();
      f.bytes.clear();
    }
    // Packets stay within frame_bytes_ (the smallest path's message); a frame to a peer whose
    // path carries larger ones (the MPI transport off this host) grows up to that, so a
    // pair's answer leaves in as few messages as the transport allows.
    f.cap = std::max(frame_bytes_, tx_.max_frame_bytes(static_cast<int>(dest)));
    f.bytes.reserve(frame_bytes_);
    q.push_back(std::move(f));
    ++queued_frames_;
  }
  Frame& f = q.back();
  room_in_lent_ = false;
  room_at_ = f.bytes.size();
  f.bytes.resize(room_at_ + bytes);
  return f.bytes.data() + room_at_;
}

void Outbox::commit_packet(std::uint32_t dest, std::size_t used) {
  if (room_in_lent_) {
    Lent& lent = lent_[dest];
    lent.used += used;
    ++lent.packets;
    return;
  }
  Frame& f = queues_[dest].back();
  f.bytes.resize(room_at_ + used);
  ++f.packets;
}

void Outbox::commit_lent(std::uint32_t dest) {
  Lent& lent = lent_[dest];
  if (lent.room.empty()) return;
  const transport::TxStatus st = tx_.commit(static_cast<int>(dest), lent.used);
  if (st == transport::TxStatus::kOk) {
    ++stats_.frames;
    stats_.frame_packets += lent.packets;
    stats_.frame_bytes += lent.used;
  } else {
    if (st == transport::TxStatus::kPeerFailed) {
      dead_[dest].store(true, std::memory_order_relaxed);
      sink_.note_failure();
    } else {
      ++stats_.tx_errors;
    }
    ++stats_.dropped;
  }
  lent = Lent{};
}

bool Outbox::try_send(std::uint32_t dest, const Frame& f) {
  if (dead_[dest].load(std::memory_order_relaxed)) {
    ++stats_.dropped;
    return true;
  }
  switch (tx_.send(static_cast<int>(dest), f.bytes)) {
    case transport::TxStatus::kOk:
      ++stats_.frames;
      stats_.frame_packets += f.packets;
      stats_.frame_bytes += f.bytes.size();
      return true;
    case transport::TxStatus::kNoResource:
      ++stats_.retries;
      return false;
    case transport::TxStatus::kPeerFailed:
      dead_[dest].store(true, std::memory_order_relaxed);
      sink_.note_failure();
      ++stats_.dropped;
      return true;
    case transport::TxStatus::kError:
      ++stats_.tx_errors;
      ++stats_.dropped;
      return true;
  }
  return true;
}

std::size_t Outbox::flush() {
  std::size_t sent = 0;
  std::size_t keep = 0;
  for (std::size_t k = 0; k < dirty_.size(); ++k) {
    const std::uint32_t d = dirty_[k];
    if (!lent_[d].room.empty()) {
      commit_lent(d);  // lent frames never wait behind queued ones (see on_packet)
      ++sent;
    }
    std::deque<Frame>& q = queues_[d];
    while (!q.empty()) {
      if (!try_send(d, q.front())) break;  // this destination is still busy; keep its order
      spare_.push_back(std::move(q.front().bytes));
      q.pop_front();
      --queued_frames_;
      ++sent;
    }
    if (!q.empty()) {
      dirty_[keep++] = d;
    } else {
      is_dirty_[d] = 0;
    }
  }
  dirty_.resize(keep);
  return sent;
}

}  // namespace netsparse::rig
