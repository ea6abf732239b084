// A Concatenation Point (MICRO '25 §6.1.2, §7.2): PRs of the same (type, destination) wait in a
// Concatenation Queue (CQ) until it is full or its Expiration Time (ET = arrival of its first
// PR + delay) passes, then leave together as one NetSparse packet.
//
// * One CQ per (type, destination) for the two concatenated types, kRead and kResponse, looked
//   up by array index. A CQ holds as many PR records as fit in `packet_bytes` (14 B header
//   included); a CQ that reaches that count is flushed at once (cause kFull), so a full CQ
//   never waits for its ET.
// * An Expiration Time Queue (EQ): a circular array of {CQ, ET} in arrival order. ETs are
//   non-decreasing (time never goes back, the delay is constant), so only the head is checked.
//   A CQ flushed because it filled clears its EQ entry (a tombstone skipped at the head; the
//   ring is compacted in amortized O(1) if tombstones ever fill it).
// * Virtualized mode (§7.2): instead of 2·N packet buffers, a fixed pool of small chunks, linked
//   on demand into per-(type, destination) virtual CQs; memory is the pool plus a 16-byte head
//   per CQ. When the pool runs dry the CQ at the EQ head (the oldest) is flushed early
//   (cause kPoolPressure).
//
// * kInvalid and kControl PRs are never queued: each leaves at once in its own 32-byte packet
//   (cause kUnqueued). They are rare (a refused idx is an application bug; control is one PR
//   per peer per quiesce round), so queues for them would only cost memory: 2·N more packet
//   buffers, or 2·N more virtual-CQ heads. An unqueued PR overtakes the PRs still queued for
//   its destination; a caller that needs order flushes first.
//
// Cost: O(1) per PR and no allocation after construction; flushing is O(bytes of the packet).
// Not thread-safe: one ConcatPoint per producer thread (the paper's NIC has one per port).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "concat/protocol.hpp"
#include "support/raw_vector.hpp"

namespace netsparse::concat {

// kUnqueued: a kInvalid or kControl PR, sent alone as soon as it is pushed.
enum class FlushCause : int {
  kFull = 0,
  kExpired = 1,
  kExplicit = 2,
  kPoolPressure = 3,
  kUnqueued = 4
};
inline constexpr int kNumFlushCauses = 5;
const char* to_string(FlushCause c) noexcept;

// Receives finished packets. The span is valid only during the call (the sink copies it).
// One virtual call per PACKET (never per PR). The sink must not call back into the
// ConcatPoint that is flushing.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void on_packet(std::uint32_t dest, PrType type, std::span<const std::byte> packet,
                         FlushCause cause) = 0;
};

struct ConcatConfig {
  std::uint32_t num_nodes = 0;  // destinations 0..num_nodes-1
  std::uint32_t prop_len = 0;   // bytes of one property (Len field)
  // Capacity of one concatenation queue = max NetSparse packet (14 + records); a single record
  // larger than this is sent alone.
  std::uint32_t packet_bytes = 1500;
  // Expiration delay; 0 = every PR leaves at once (no concatenation; cause kExpired).
  std::uint64_t delay_ns = 0;
  bool virtualized = false;         // §7.2 mode: fixed pool of small chunks linked per destination
  std::uint32_t chunk_bytes = 128;  // virtualized: physical chunk size
  std::uint32_t pool_chunks = 4096;  // virtualized: pool size (memory bound); exhausted -> flush
                                     // EQ head (cause kPoolPressure)
};

// Per-type arrays are indexed by type_index: [0] read, [1] response, [2] invalid, [3] control.
// [0] and [1] are the paper's read and response packets (Table 7): since the invalid and control
// types exist they count property traffic only.
struct ConcatStats {
  std::uint64_t packets[kNumPrTypes] = {};
  std::uint64_t prs[kNumPrTypes] = {};
  std::uint64_t header_bytes[kNumPrTypes] = {};   // 14 + 18 per PR
  std::uint64_t payload_bytes[kNumPrTypes] = {};  // prop_len per response PR
  std::uint64_t wire_bytes[kNumPrTypes] = {};     // packet bytes + 50 B upper layer per packet
  std::uint64_t flushes[kNumFlushCauses] = {};    // by FlushCause
  std::uint64_t prs_per_packet_hist[65] = {};     // bucket n = packets with n PRs (64 = 64 or more)

  void merge(const ConcatStats& other);
  // Mean PRs per packet of type index `type` (see type_index); 0 if no packet was sent.
  double prs_per_packet(int type) const;
};

class ConcatPoint {
 public:
  // Validates the configuration (std::invalid_argument with the reason) and allocates
  // everything up front.
  ConcatPoint(const ConcatConfig& config, PacketSink& sink);
  ConcatPoint(const ConcatPoint&) = delete;
  ConcatPoint& operator=(const ConcatPoint&) = delete;

  // Appends one PR (prop_len bytes of payload for responses; payload is ignored for the other
  // types) to the queue of (type, dest). O(1); no allocation. Emits the packet through the sink
  // when the queue becomes full or, with delay_ns == 0, immediately; kInvalid and kControl PRs
  // are emitted at once, alone (kUnqueued). now_ns must not decrease between calls.
  // Throws std::out_of_range for dest >= num_nodes, std::invalid_argument for an unknown type or
  // a response without payload.
  void push(PrType type, std::uint32_t dest, const PrHeader& pr, const void* payload,
            std::uint64_t now_ns);
  // Flushes every queue whose expiration time <= now_ns (only the EQ head is examined;
  // O(expired)).
  void poll_expired(std::uint64_t now_ns);
  std::uint64_t next_expiry_ns() const noexcept;  // UINT64_MAX if nothing waits
  void flush_all();                               // explicit (end of batch); O(non-empty queues)
  bool empty() const noexcept;                    // nothing buffered

  // Counts n_prs PRs of type t (kRead or kResponse) to one destination that travelled in another
  // format (the compact software wire, gather_wire.hpp) as the packets this point would have
  // made of them back to back: full packets (kFull) and the rest in one (kExplicit). So the
  // statistics keep pricing RIG traffic in the paper's format whatever the wire carried.
  void account_model(PrType t, std::uint64_t n_prs) noexcept;

  const ConcatStats& stats() const noexcept { return stats_; }
  void reset_stats() { stats_ = ConcatStats{}; }
  // Bytes of queue storage: packet buffers (or chunk pool), per-queue heads, the EQ ring and the
  // staging buffer. Independent of num_nodes in virtualized mode except for the heads.
  std::size_t memory_bytes() const noexcept;

  const ConcatConfig& config() const noexcept { return config_; }
  // Most PRs one packet of this type carries (>= 1; 1 for the unqueued types).
  std::uint32_t max_prs_per_packet(PrType t) const noexcept { return max_prs_[type_index(t)]; }
  std::uint32_t buffered_prs() const noexcept { return buffered_prs_; }
  // Virtualized mode: chunks currently free in the pool.
  std::uint32_t free_chunks() const noexcept { return free_chunks_; }
  static constexpr std::size_t kHeadBytesPerQueue = 16;  // sizeof(Queue)

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  struct Queue {  // one CQ (or virtual CQ) head
    std::uint32_t n_prs = 0;
    std::uint32_t eq_slot = kNone;      // ring index of its EQ entry, kNone if none
    std::uint32_t first_chunk = kNone;  // virtualized only
    std::uint32_t last_chunk = kNone;   // virtualized only
  };
  static_assert(sizeof(Queue) == kHeadBytesPerQueue);
  struct EqEntry {
    std::uint64_t expires_ns;
    std::uint32_t queue;  // kNone = tombstone (the queue filled and was flushed first)
  };

  // Queues exist for kRead (index 0) and kResponse (index 1) only.
  std::uint32_t queue_index(PrType t, std::uint32_t dest) const noexcept {
    return static_cast<std::uint32_t>(type_index(t)) * config_.num_nodes + dest;
  }
  PrType queue_type(std::uint32_t q) const noexcept {
    return q < config_.num_nodes ? PrType::kRead : PrType::kResponse;
  }
  std::uint32_t queue_dest(std::uint32_t q) const noexcept {
    return q < config_.num_nodes ? q : q - config_.num_nodes;
  }
  void write_record_virtual(std::uint32_t q, PrType type, const PrHeader& pr, const void* payload);
  // Appends the chunks q needs for one more record of record_bytes; returns the chunk where
  // that record starts, or kNone (nothing allocated) if the pool cannot supply them.
  std::uint32_t ensure_chunks(std::uint32_t q, std::size_t record_bytes);
  void eq_append(std::uint32_t q, std::uint64_t expires_ns);
  void eq_compact();
  void eq_drop_tombstones() noexcept;
  void flush_queue(std::uint32_t q, FlushCause cause);
  void send_unqueued(PrType type, std::uint32_t dest, const PrHeader& pr);
  void account(PrType type, std::uint32_t n_prs, std::size_t bytes, FlushCause cause) noexcept;

  ConcatConfig config_;
  PacketSink* sink_;
  std::uint32_t record_bytes_[kNumPrTypes];  // by type_index
  std::uint32_t max_prs_[kNumPrTypes];
  std::size_t queue_capacity_;  // bytes of one (non-virtual) packet buffer / the staging buffer

  std::vector<Queue> queues_;  // 2 * num_nodes
  // non-virtualized: 2 * num_nodes * queue_capacity_, not zero-filled: a destination's buffer
  // is written before it is read, so only the pages of the destinations a node sends to become
  // resident (memory O(the peers it talks to), not O(nodes); issue 34).
  support::RawVector<std::byte> buffers_;
  std::vector<std::byte> pool_;      // virtualized: pool_chunks * chunk_bytes
  std::vector<std::uint32_t> next_;  // virtualized: chunk -> next chunk in its list
  std::uint32_t free_head_ = kNone;  // virtualized: free chunk stack
  std::uint32_t free_chunks_ = 0;
  std::vector<std::byte> staging_;  // virtualized: one packet assembled from chunks
  std::vector<std::byte> scratch_;  // virtualized: one record that straddles chunks
  std::byte unqueued_[kConcatHeaderBytes + kPrHeaderBytes];  // one kInvalid/kControl packet

  std::vector<EqEntry> ring_;  // power-of-two capacity
  std::uint64_t eq_head_ = 0;  // monotonically increasing positions; index = pos & mask
  std::uint64_t eq_tail_ = 0;
  std::uint32_t buffered_prs_ = 0;

  ConcatStats stats_;
};

}  // namespace netsparse::concat
