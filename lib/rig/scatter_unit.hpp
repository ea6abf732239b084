// The scatter unit: both halves of Remote Indexed Scatter-Reduce (NS_WR_RIS) in one engine.
//   client: walks the WR's idx list once, checking every idx against the region's rows and
//           folding repeated idxs into one record (the Idx Filter's idea turned around: a
//           repeated update is combined here instead of sent again); records are grouped per
//           owner and concatenated into packets as large as a frame; this node's rows are
//           combined in place. The WR completes when every owner acknowledged every packet.
//           Nothing is sent or written when an idx is out of range or an owner is known dead.
//   owner:  checks every row of a packet before applying any (a packet is applied whole or
//           refused whole), combines the values into its rows and acknowledges the packet.
// Every write to the region happens on the thread that steps the engine, in packet order, so
// updates are atomic with respect to each other and to the reads the server units answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "concat/scatter_wire.hpp"
#include "rig/counters.hpp"
#include "rig/outbox.hpp"
#include "rig/port.hpp"
#include "rig/queues.hpp"

namespace netsparse::rig {

struct ScatterCounters {
  std::uint64_t records = 0;      // (idx, value) pairs posted
  std::uint64_t combined = 0;     // folded into an earlier pair of the same idx
  std::uint64_t local = 0;        // distinct rows of this node applied in place
  std::uint64_t sent = 0;         // distinct rows sent to their owners
  std::uint64_t packets_out = 0;  // updates and acknowledgements sent
  std::uint64_t bytes_out = 0;    // their bytes as sent
  std::uint64_t applied = 0;      // rows applied for peers
  std::uint64_t refused = 0;      // updates refused as a whole (a row not ours)
  std::uint64_t stale = 0;        // acknowledgements of a WR no longer in flight
  std::uint64_t malformed = 0;    // packets that failed validation or broke the protocol
  template <class Self>
  static auto fields(Self& s) {
    return std::tie(s.records, s.combined, s.local, s.sent, s.packets_out, s.bytes_out, s.applied,
                    s.refused, s.stale, s.malformed);
  }
  void add(const ScatterCounters& o) { add_counters(*this, o); }
};

// dst[e] = op(dst[e], src[e]) for the bytes / size(datatype) elements of one row (ns_ris_op,
// ns_ris_datatype; integers wrap). Unaligned pointers are fine.
void combine_row(std::byte* dst, const std::byte* src, std::uint32_t bytes, int op,
                 int datatype) noexcept;
// The same for one (op, datatype), chosen once per WR or packet: no dispatch per row.
using CombineFn = void (*)(std::byte* dst, const std::byte* src, std::uint32_t bytes) noexcept;
CombineFn combine_fn(int op, int datatype) noexcept;

class ScatterUnit {
 public:
  ScatterUnit(const UnitPort& port, Outbox& outbox) : port_(port), outbox_(outbox) {}

  // Starts an NS_WR_RIS on the registered region (completes it at once when nothing is remote
  // or it fails before sending).
  void start(Command& c, std::uint64_t now);
  // One scatter packet of a frame from node src.
  void on_packet(int src, std::span<const std::byte> bytes);
  // WRs past their deadline, or waiting for an owner known dead, complete with an error.
  void watchdog(std::uint64_t now);
  void fail_all(int status);
  bool busy() const noexcept { return !active_.empty(); }

  ScatterCounters counters;

 private:
  struct Owner {
    std::uint32_t node;
    std::uint64_t packets;  // not yet acknowledged
  };
  struct Active {
    Command* cmd;
    std::vector<Owner> owners;
    std::uint64_t left;  // packets not yet acknowledged, all owners
  };
  // One distinct idx of the WR being combined (16 B): its owner and record number in
  // recs_[owner], packed as owner << 40 | record (records < count < 2^40, nodes < 2^24).
  struct Slot {
    std::uint64_t key;
    std::uint64_t where;
  };
  static constexpr int kRecBits = 40;
  static constexpr std::uint64_t kEmpty = UINT64_MAX;  // never a valid idx (< total rows)
  static constexpr std::size_t kFirstSlots = 1024;
  // Doubles the table and re-inserts its keys (load kept <= 1/2).
  void grow_slots();

  // Folds the idx list of c into recs_ (per owner); false (c.status, c.bad_pos set) when an
  // idx is out of range.
  bool combine(Command& c);
  bool bucket_unique(Command& c, std::uint64_t total);
  // Appends the record (idx, value of P bytes) to node's list; returns its index there.
  std::uint64_t append_record(std::uint32_t node, std::uint64_t idx, const std::byte* value,
                              std::uint32_t P);
  void send_updates(Command& c, Active& a, std::uint32_t req);
  void apply_local(const Command& c);
  void on_update(int src, const concat::ScatterPacket& pkt);
  void on_ack(int src, const concat::ScatterPacket& pkt);
  void finish(std::uint32_t req, int status);
  void send_ack(std::uint32_t dest, const concat::ScatterHeader& update, concat::ScatterStatus s);

  const UnitPort& port_;
  Outbox& outbox_;
  std::unordered_map<std::uint32_t, Active> active_;  // by request id
  std::uint32_t next_req_ = 1;
  // Scratch of combine(), kept across WRs (cleared, not freed).
  std::vector<Slot> slots_;
  std::size_t used_slots_ = 0;
  int slot_shift_ = 64;
  std::vector<std::vector<std::byte>> recs_;  // per node: wire records [row 8 | value P]
  std::vector<std::uint32_t> touched_;        // nodes with records, in first-use order
};

}  // namespace netsparse::rig
