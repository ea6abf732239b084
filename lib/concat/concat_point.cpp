#include "concat/concat_point.hpp"
#include "support/enum_names.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <stdexcept>
#include <string>

namespace netsparse::concat {

constexpr auto kFlushCauseNames = std::to_array<support::EnumName<FlushCause>>({
    {FlushCause::kFull, "full"},
    {FlushCause::kExpired, "expired"},
    {FlushCause::kExplicit, "explicit"},
    {FlushCause::kPoolPressure, "pool-pressure"},
    {FlushCause::kUnqueued, "unqueued"},
});

const char* to_string(FlushCause c) noexcept {
  return support::name_of<kFlushCauseNames>(c, "unknown");
}

void ConcatStats::merge(const ConcatStats& o) {
  for (int t = 0; t < kNumPrTypes; ++t) {
    packets[t] += o.packets[t];
    prs[t] += o.prs[t];
    header_bytes[t] += o.header_bytes[t];
    payload_bytes[t] += o.payload_bytes[t];
    wire_bytes[t] += o.wire_bytes[t];
  }
  for (int c = 0; c < kNumFlushCauses; ++c) flushes[c] += o.flushes[c];
  for (int n = 0; n < 65; ++n) prs_per_packet_hist[n] += o.prs_per_packet_hist[n];
}

double ConcatStats::prs_per_packet(int type) const {
  if (type < 0 || type >= kNumPrTypes || packets[type] == 0) return 0.0;
  return static_cast<double>(prs[type]) / static_cast<double>(packets[type]);
}

namespace {
[[noreturn]] void bad_config(const std::string& why) {
  throw std::invalid_argument("ConcatPoint: " + why);
}
std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}
}  // namespace

ConcatPoint::ConcatPoint(const ConcatConfig& config, PacketSink& sink)
    : config_(config), sink_(&sink) {
  if (config.num_nodes == 0) bad_config("num_nodes must be >= 1");
  if (config.num_nodes > (kNone - 1) / 2) bad_config("num_nodes too large");
  if (config.packet_bytes < kConcatHeaderBytes + kPrHeaderBytes) {
    bad_config("packet_bytes " + std::to_string(config.packet_bytes) +
               " cannot hold the 14 B header and one 18 B PR header");
  }
  const std::size_t response_record = pr_record_bytes(PrType::kResponse, config.prop_len);
  if (response_record > 0xFFFFFFFFu) bad_config("prop_len too large");
  for (int ti = 0; ti < kNumPrTypes; ++ti) {
    const PrType t = type_at(ti);
    const std::size_t rec = pr_record_bytes(t, config.prop_len);
    record_bytes_[ti] = static_cast<std::uint32_t>(rec);
    // A record that does not fit a packet on its own still travels, alone.
    const bool queued = t == PrType::kRead || t == PrType::kResponse;
    max_prs_[ti] = queued ? static_cast<std::uint32_t>(std::max<std::size_t>(
                                1, (config.packet_bytes - kConcatHeaderBytes) / rec))
                          : 1;
  }
  queue_capacity_ = std::max(packet_bytes(PrType::kRead, config.prop_len, max_prs_[0]),
                             packet_bytes(PrType::kResponse, config.prop_len, max_prs_[1]));

  const std::size_t n_queues = 2 * std::size_t{config.num_nodes};
  queues_.resize(n_queues);
  std::size_t max_live = n_queues;  // EQ entries that can be live at once
  if (config.virtualized) {
    if (config.chunk_bytes < 16) bad_config("chunk_bytes must be >= 16");
    const std::size_t chunks_per_packet =
        ceil_div(queue_capacity_ - kConcatHeaderBytes, config.chunk_bytes);
    if (config.pool_chunks < chunks_per_packet) {
      bad_config("pool_chunks " + std::to_string(config.pool_chunks) +
                 " cannot hold one full packet (" + std::to_string(chunks_per_packet) +
                 " chunks of " + std::to_string(config.chunk_bytes) + " B)");
    }
    if (config.pool_chunks >= kNone) bad_config("pool_chunks too large");
    pool_.resize(std::size_t{config.pool_chunks} * config.chunk_bytes);
    next_.resize(config.pool_chunks);
    for (std::uint32_t c = 0; c < config.pool_chunks; ++c) {
      next_[c] = c + 1 < config.pool_chunks ? c + 1 : kNone;
    }
    free_head_ = 0;
    free_chunks_ = config.pool_chunks;
    staging_.resize(queue_capacity_);
    scratch_.resize(response_record);
    // Every non-empty virtual queue owns at least one chunk.
    max_live = std::min<std::size_t>(max_live, config.pool_chunks);
  } else {
    buffers_.resize(n_queues * queue_capacity_);
  }
  // Twice the live bound: compaction after the ring fills frees at least half of it.
  ring_.resize(std::bit_ceil(std::max<std::size_t>(2, 2 * max_live)));
}

void ConcatPoint::push(PrType type, std::uint32_t dest, const PrHeader& pr, const void* payload,
                       std::uint64_t now_ns) {
  if (!is_known_type(static_cast<std::uint16_t>(type))) {
    throw std::invalid_argument("ConcatPoint::push: unknown PR type");
  }
  if (dest >= config_.num_nodes) {
    throw std::out_of_range("ConcatPoint::push: destination " + std::to_string(dest) +
                            " >= num_nodes " + std::to_string(config_.num_nodes));
  }
  if (type == PrType::kInvalid || type == PrType::kControl) {
    send_unqueued(type, dest, pr);
    return;
  }
  const bool response = type == PrType::kResponse;
  if (response && payload == nullptr && config_.prop_len != 0) {
    throw std::invalid_argument("ConcatPoint::push: response PR without payload");
  }
  const std::uint32_t q = queue_index(type, dest);
  const int ti = type_index(type);
  Queue& queue = queues_[q];

  if (config_.virtualized) {
    write_record_virtual(q, type, pr, payload);  // may flush queues under pool pressure
  } else {
    std::byte* dst = buffers_.data() + std::size_t{q} * queue_capacity_ + kConcatHeaderBytes +
                     std::size_t{queue.n_prs} * record_bytes_[ti];
    encode_pr(dst, pr, payload, response ? config_.prop_len : 0);
  }
  // The first PR of an empty queue starts its expiration clock.
  if (queue.n_prs++ == 0 && config_.delay_ns != 0) {
    const std::uint64_t et =
        now_ns > UINT64_MAX - config_.delay_ns ? UINT64_MAX : now_ns + config_.delay_ns;
    eq_append(q, et);
  }
  ++buffered_prs_;
  if (queue.n_prs == max_prs_[ti]) {
    flush_queue(q, FlushCause::kFull);
  } else if (config_.delay_ns == 0) {
    flush_queue(q, FlushCause::kExpired);
  }
}

std::uint32_t ConcatPoint::ensure_chunks(std::uint32_t q, std::size_t record_bytes) {
  Queue& queue = queues_[q];
  const std::size_t cb = config_.chunk_bytes;
  const std::size_t start = std::size_t{queue.n_prs} * record_bytes;
  const std::size_t have = ceil_div(start, cb);  // the list holds exactly this many chunks
  const std::size_t need = ceil_div(start + record_bytes, cb);
  if (need - have > free_chunks_) return kNone;
  const std::uint32_t old_last = queue.last_chunk;
  for (std::size_t k = have; k < need; ++k) {
    const std::uint32_t c = free_head_;
    free_head_ = next_[c];
    --free_chunks_;
    next_[c] = kNone;
    if (queue.last_chunk == kNone) {
      queue.first_chunk = c;
    } else {
      next_[queue.last_chunk] = c;
    }
    queue.last_chunk = c;
  }
  // The record starts inside the old tail chunk unless that one is full (or absent).
  if (start % cb != 0) return old_last;
  return old_last == kNone ? queue.first_chunk : next_[old_last];
}

void ConcatPoint::write_record_virtual(std::uint32_t q, PrType type, const PrHeader& pr,
                                       const void* payload) {
  const std::size_t rec = record_bytes_[type_index(type)];
  // Make room: the pool is shared by every destination, so when it is dry the oldest waiting
  // queue (EQ head) leaves early. That may be q itself; then q restarts empty.
  std::uint32_t chunk;
  while ((chunk = ensure_chunks(q, rec)) == kNone) {
    if (eq_head_ == eq_tail_) {
      // Unreachable while every non-empty queue has an EQ entry (delay > 0) and the pool holds
      // a full packet (checked at construction); with delay 0 nothing is ever buffered.
      throw std::logic_error("ConcatPoint: chunk pool exhausted with no queue to flush");
    }
    flush_queue(ring_[eq_head_ & (ring_.size() - 1)].queue, FlushCause::kPoolPressure);
  }
  const std::size_t cb = config_.chunk_bytes;
  std::size_t offset = (std::size_t{queues_[q].n_prs} * rec) % cb;
  const std::uint32_t payload_len = type == PrType::kResponse ? config_.prop_len : 0;
  if (offset + rec <= cb) {  // common case: the record fits in one chunk, encode in place
    encode_pr(pool_.data() + std::size_t{chunk} * cb + offset, pr, payload, payload_len);
    return;
  }
  // A record straddling chunks: encode once, then scatter it along the list.
  encode_pr(scratch_.data(), pr, payload, payload_len);
  for (std::size_t done = 0; done < rec; chunk = next_[chunk], offset = 0) {
    const std::size_t n = std::min(rec - done, cb - offset);
    std::copy_n(scratch_.data() + done, n, pool_.data() + std::size_t{chunk} * cb + offset);
    done += n;
  }
}

void ConcatPoint::eq_append(std::uint32_t q, std::uint64_t expires_ns) {
  if (eq_tail_ - eq_head_ == ring_.size()) eq_compact();
  const std::size_t slot = eq_tail_ & (ring_.size() - 1);
  ring_[slot] = EqEntry{expires_ns, q};
  queues_[q].eq_slot = static_cast<std::uint32_t>(slot);
  ++eq_tail_;
}

void ConcatPoint::eq_compact() {
  // Slide live entries towards the head, keeping their order; the write position never passes
  // the read position, so this works in place.
  const std::size_t mask = ring_.size() - 1;
  std::uint64_t write = eq_head_;
  for (std::uint64_t read = eq_head_; read != eq_tail_; ++read) {
    const EqEntry e = ring_[read & mask];
    if (e.queue == kNone) continue;
    ring_[write & mask] = e;
    queues_[e.queue].eq_slot = static_cast<std::uint32_t>(write & mask);
    ++write;
  }
  eq_tail_ = write;
  if (eq_tail_ - eq_head_ == ring_.size()) {
    throw std::logic_error("ConcatPoint: expiration queue overflow");  // bound violated
  }
}

void ConcatPoint::eq_drop_tombstones() noexcept {
  const std::size_t mask = ring_.size() - 1;
  while (eq_head_ != eq_tail_ && ring_[eq_head_ & mask].queue == kNone) ++eq_head_;
}

void ConcatPoint::flush_queue(std::uint32_t q, FlushCause cause) {
  Queue& queue = queues_[q];
  const PrType type = queue_type(q);
  const std::uint32_t dest = queue_dest(q);
  const std::uint32_t n = queue.n_prs;
  const std::size_t bytes = packet_bytes(type, config_.prop_len, n);
  // Clear the EQ entry first (a tombstone), so the head invariant "live or empty" holds again
  // before the sink runs.
  if (queue.eq_slot != kNone) {
    ring_[queue.eq_slot].queue = kNone;
    queue.eq_slot = kNone;
    eq_drop_tombstones();
  }
  queue.n_prs = 0;
  buffered_prs_ -= n;
  account(type, n, bytes, cause);

  std::byte* packet;
  if (config_.virtualized) {
    // Gather the chunk list into one contiguous packet, then return the chunks to the pool.
    packet = staging_.data();
    const std::size_t cb = config_.chunk_bytes;
    std::size_t left = bytes - kConcatHeaderBytes;
    std::byte* dst = packet + kConcatHeaderBytes;
    for (std::uint32_t c = queue.first_chunk; left != 0; c = next_[c]) {
      const std::size_t len = std::min(left, cb);
      std::copy_n(pool_.data() + std::size_t{c} * cb, len, dst);
      dst += len;
      left -= len;
    }
    next_[queue.last_chunk] = free_head_;
    free_head_ = queue.first_chunk;
    free_chunks_ += static_cast<std::uint32_t>(ceil_div(bytes - kConcatHeaderBytes, cb));
    queue.first_chunk = kNone;
    queue.last_chunk = kNone;
  } else {
    packet = buffers_.data() + std::size_t{q} * queue_capacity_;
  }
  encode_concat_header(packet, ConcatHeader{type, dest, config_.prop_len, n});
  sink_->on_packet(dest, type, std::span<const std::byte>(packet, bytes), cause);
}

void ConcatPoint::send_unqueued(PrType type, std::uint32_t dest, const PrHeader& pr) {
  static_assert(sizeof(unqueued_) == packet_bytes(PrType::kInvalid, 0, 1));
  static_assert(sizeof(unqueued_) == packet_bytes(PrType::kControl, 0, 1));
  encode_concat_header(unqueued_, ConcatHeader{type, dest, config_.prop_len, 1});
  encode_pr(unqueued_ + kConcatHeaderBytes, pr, nullptr, 0);
  account(type, 1, sizeof(unqueued_), FlushCause::kUnqueued);
  sink_->on_packet(dest, type, std::span<const std::byte>(unqueued_, sizeof(unqueued_)),
                   FlushCause::kUnqueued);
}

void ConcatPoint::account(PrType type, std::uint32_t n, std::size_t bytes,
                          FlushCause cause) noexcept {
  const int ti = type_index(type);
  stats_.packets[ti] += 1;
  stats_.prs[ti] += n;
  stats_.header_bytes[ti] += kConcatHeaderBytes + std::uint64_t{n} * kPrHeaderBytes;
  stats_.payload_bytes[ti] += carries_payload(type) ? std::uint64_t{n} * config_.prop_len : 0;
  stats_.wire_bytes[ti] += bytes + kUpperLayerBytes;
  stats_.flushes[static_cast<int>(cause)] += 1;
  stats_.prs_per_packet_hist[std::min<std::uint32_t>(n, 64)] += 1;
}

void ConcatPoint::account_model(PrType t, std::uint64_t n_prs) noexcept {
  const std::uint32_t per = max_prs_[type_index(t)];
  const std::uint64_t full = n_prs / per;
  const auto rest = static_cast<std::uint32_t>(n_prs % per);
  if (full != 0) {
    const int ti = type_index(t);
    const std::size_t bytes = packet_bytes(t, config_.prop_len, per);
    stats_.packets[ti] += full;
    stats_.prs[ti] += full * per;
    stats_.header_bytes[ti] += full * (kConcatHeaderBytes + std::uint64_t{per} * kPrHeaderBytes);
    stats_.payload_bytes[ti] +=
        carries_payload(t) ? full * per * std::uint64_t{config_.prop_len} : 0;
    stats_.wire_bytes[ti] += full * (bytes + kUpperLayerBytes);
    stats_.flushes[static_cast<int>(FlushCause::kFull)] += full;
    stats_.prs_per_packet_hist[std::min<std::uint32_t>(per, 64)] += full;
  }
  if (rest != 0) account(t, rest, packet_bytes(t, config_.prop_len, rest), FlushCause::kExplicit);
}

void ConcatPoint::poll_expired(std::uint64_t now_ns) {
  const std::size_t mask = ring_.size() - 1;
  // The head is always live (tombstones are dropped eagerly), and ETs are in arrival order.
  while (eq_head_ != eq_tail_ && ring_[eq_head_ & mask].expires_ns <= now_ns) {
    flush_queue(ring_[eq_head_ & mask].queue, FlushCause::kExpired);
  }
}

std::uint64_t ConcatPoint::next_expiry_ns() const noexcept {
  return eq_head_ == eq_tail_ ? UINT64_MAX : ring_[eq_head_ & (ring_.size() - 1)].expires_ns;
}

void ConcatPoint::flush_all() {
  // Every non-empty queue has exactly one live EQ entry, so flushing the head until the EQ is
  // empty flushes exactly the non-empty queues, oldest first.
  const std::size_t mask = ring_.size() - 1;
  while (eq_head_ != eq_tail_) flush_queue(ring_[eq_head_ & mask].queue, FlushCause::kExplicit);
  eq_head_ = eq_tail_ = 0;
}

bool ConcatPoint::empty() const noexcept {
  return buffered_prs_ == 0;
}

std::size_t ConcatPoint::memory_bytes() const noexcept {
  return queues_.size() * sizeof(Queue) + buffers_.size() + pool_.size() +
         next_.size() * sizeof(std::uint32_t) + staging_.size() + scratch_.size() +
         ring_.size() * sizeof(EqEntry);
}

}  // namespace netsparse::concat
