// The wire format of task-packets (exchange_task.cpp), the data-centric mode of the SmartNIC
// dissertation (ch. 4, Fig. 4.7): instead of fetching an owner's dense rows, a rank sends the owner
// the sparse work on them and receives partial sums. One task packet per (requester, owner) and
// run:
//
//   header   magic u32 | flags u32 | slots u32 | tasks u32                      16 B
//   slot     u32 x tasks   the requester's reply slot (its distinct local rows touched, in order)
//   column   u32 x tasks   the owner-local row of B (the nonzero's column - the owner's first)
//   value    T x tasks     the nonzero (absent with kUnitValues: every value is 1, the Boolean
//                          format of Fig. 4.7 (a), e.g. a graph's adjacency matrix)
//
// The owner answers with slots x K values of T (slot-major): sum over the slot's tasks of
// value * B[column]. A refused packet is answered with an empty message on the same tag, so the
// requester learns it at once instead of at its deadline. Little-endian, like docs/protocol.md.
// A packet is checked whole before any of it is used: one bad triple refuses it all, so a forged
// column never reads outside the owner's rows and a forged slot never writes outside the reply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace netsparse::dist::task {

inline constexpr std::uint32_t kMagic = 0x4b534154;  // "TASK"
inline constexpr std::uint32_t kUnitValues = 1;      // flags: no value array, every value is 1
inline constexpr std::size_t kHeaderBytes = 16;
// MPI tags on the exchange's own communicator (a duplicate of the kernel's).
inline constexpr int kTagRows = 1;   // owner -> requester: the dense rows asked for at setup
inline constexpr int kTagTasks = 2;  // requester -> owner: a task packet
inline constexpr int kTagSums = 3;   // owner -> requester: the partial sums (empty: refused)

struct Header {
  std::uint32_t magic = kMagic;
  std::uint32_t flags = 0;
  std::uint32_t slots = 0;
  std::uint32_t tasks = 0;
};
static_assert(sizeof(Header) == kHeaderBytes);

// Bytes of a packet of `tasks` triples whose values have `value_bytes` bytes each.
[[nodiscard]] constexpr std::uint64_t packet_bytes(std::uint64_t tasks, bool unit_values,
                                                   std::uint64_t value_bytes) noexcept {
  return kHeaderBytes + tasks * (2 * sizeof(std::uint32_t) + (unit_values ? 0 : value_bytes));
}

[[nodiscard]] inline std::uint32_t load_u32(const std::byte* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Checks a received packet against what the setup announced (`slots`, `tasks`, `unit_values`)
// and the owner's row count. Returns "" when it is good, else why it is refused.
template <class T>
[[nodiscard]] std::string check_packet(std::span<const std::byte> packet, std::uint32_t slots,
                                       std::uint32_t tasks, bool unit_values,
                                       std::uint64_t owner_rows) {
  const std::uint64_t want = packet_bytes(tasks, unit_values, sizeof(T));
  if (packet.size() != want) {
    return "task packet of " + std::to_string(packet.size()) + " bytes, the setup announced " +
           std::to_string(want);
  }
  Header h;
  std::memcpy(&h, packet.data(), sizeof h);
  if (h.magic != kMagic) return "task packet without its magic number";
  if (h.flags != (unit_values ? kUnitValues : 0u) || h.slots != slots || h.tasks != tasks) {
    return "task packet header (flags " + std::to_string(h.flags) + ", " + std::to_string(h.slots) +
           " slots, " + std::to_string(h.tasks) + " tasks) differs from the setup's";
  }
  const std::byte* slot = packet.data() + kHeaderBytes;
  const std::byte* col = slot + std::size_t{tasks} * 4;
  for (std::uint32_t i = 0; i < tasks; ++i) {
    const std::uint32_t s = load_u32(slot + std::size_t{i} * 4);
    const std::uint32_t c = load_u32(col + std::size_t{i} * 4);
    if (s >= slots) {
      return "task " + std::to_string(i) + ": slot " + std::to_string(s) + " outside the " +
             std::to_string(slots) + " slots";
    }
    if (c >= owner_rows) {
      return "task " + std::to_string(i) + ": column " + std::to_string(c) +
             " outside the owner's " + std::to_string(owner_rows) + " rows";
    }
  }
  return {};
}

// sums[slot * k + j] = sum over the packet's tasks of value * b[column * k + j] (a CHECKED
// packet: check_packet returned "").
template <class T>
void apply_packet(std::span<const std::byte> packet, const T* b, int k, T* sums) {
  Header h;
  std::memcpy(&h, packet.data(), sizeof h);
  const std::size_t n = h.tasks;
  const std::size_t kk = static_cast<std::size_t>(k);
  std::memset(static_cast<void*>(sums), 0, std::size_t{h.slots} * kk * sizeof(T));
  const std::byte* slot = packet.data() + kHeaderBytes;
  const std::byte* col = slot + n * 4;
  const std::byte* val = col + n * 4;
  const bool unit = (h.flags & kUnitValues) != 0;
  for (std::size_t i = 0; i < n; ++i) {
    T* out = sums + std::size_t{load_u32(slot + i * 4)} * kk;
    const T* row = b + std::size_t{load_u32(col + i * 4)} * kk;
    if (unit) {
      for (std::size_t j = 0; j < kk; ++j) out[j] += row[j];
    } else {
      T v;
      std::memcpy(&v, val + i * sizeof(T), sizeof v);
      for (std::size_t j = 0; j < kk; ++j) out[j] += v * row[j];
    }
  }
}

}  // namespace netsparse::dist::task
