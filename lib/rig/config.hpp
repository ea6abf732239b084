// The engine's configuration: the context attributes (ns_context_attr) with their defaults,
// validation, and the choice of progress model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/settings.hpp"
#include "netsparse/netsparse.h"

namespace netsparse::rig {

// Also the bound on a PR's src_unit.
inline constexpr int kMaxUnits = static_cast<int>(config::attribute(config::Attr::kClientUnits).hi);

// Defaults and ranges are the configuration table's (config/settings.hpp, kAttributes); the
// reasons for them are given there and here.
template <typename T>
constexpr T attr_default(config::Attr a) {
  return static_cast<T>(config::attribute(a).def);
}

struct Config {
  int client_units = attr_default<int>(config::Attr::kClientUnits);
  int server_units = attr_default<int>(config::Attr::kServerUnits);
  // resolved by the context opener (see choose_progress)
  int progress_mode = attr_default<int>(config::Attr::kProgressMode);
  // one protocol packet = the paper's 1500 B NIC packet
  std::uint32_t packet_bytes = attr_default<std::uint32_t>(config::Attr::kPacketBytes);
  std::uint64_t delay_ns = attr_default<std::uint64_t>(config::Attr::kConcatDelayNs);
  // In-flight PRs per client unit. The paper's hardware table has 256 entries; in software an
  // entry is 24 bytes of host memory, and a small table only makes the engine wait for round
  // trips (the profile in docs/benchmarks.md: 2232 stalls per run at 256 entries).
  std::uint32_t pending_entries = attr_default<std::uint32_t>(config::Attr::kPendingEntries);
  std::uint32_t watchdog_ms = attr_default<std::uint32_t>(config::Attr::kWatchdogMs);
  std::uint32_t flags = attr_default<std::uint32_t>(config::Attr::kFlags);
  // Idxs a client unit processes per step: large enough that a step's fixed cost (transport
  // poll, expiry check) is spread over many PRs, small enough that other units and the server
  // side get their turn.
  std::uint32_t idx_chunk = attr_default<std::uint32_t>(config::Attr::kIdxChunk);
  bool virtual_queues = attr_default<int>(config::Attr::kVirtualQueues) != 0;
  int wire = attr_default<int>(config::Attr::kWire);
  int transport = attr_default<int>(config::Attr::kTransport);
  std::string progress_reason;  // why AUTO chose what it chose (statistics JSON)
  // INLINE progress with a standby thread (resolved by the context opener: AUTO chose INLINE
  // and MPI_THREAD_MULTIPLE is there): every standby_us the thread checks whether the
  // application has driven the engine since its last look, and serves the peers while it has
  // not, so a rank that computes without calling the library does not stall its partners'
  // gathers (issue 37 item 3). 0: none (pure INLINE, or THREAD).
  std::uint32_t standby_us = 0;

  bool filter_on() const noexcept { return (flags & NS_CTX_NO_FILTER) == 0; }
  bool coalesce_on() const noexcept { return (flags & NS_CTX_NO_COALESCE) == 0; }
  bool concat_on() const noexcept { return (flags & NS_CTX_NO_CONCAT) == 0; }
  // NS_CTX_UNCHECKED: post and poll on the trusted caller's fast path (api.cpp).
  bool unchecked() const noexcept { return (flags & NS_CTX_UNCHECKED) != 0; }
  // The compact software wire (gather_wire.hpp) unless the paper's format is asked for, or the
  // paper's virtualized queues (they exist only in that format).
  bool compact_wire() const noexcept { return wire == NS_WIRE_COMPACT && !virtual_queues; }
  bool inline_progress() const noexcept { return progress_mode == NS_PROGRESS_INLINE; }
  // Defaults overridden by the fields attr->comp_mask names; std::invalid_argument on a bad value.
  static Config from_attr(const ns_context_attr* attr);
  // Bytes the engine allocates for these settings whatever the traffic (client units' tables,
  // index buffers), checked against the context memory budget when a context opens.
  std::uint64_t fixed_memory_bytes() const noexcept;
  // fixed_memory_bytes() plus the transport's buffers (`transport_bytes`) against the budget:
  // NETSPARSE_MAX_CONTEXT_BYTES if set, else a quarter of physical memory (std::invalid_argument
  // naming the settings), then against the memory available now (support::OutOfMemory naming
  // the size: support/memory.hpp).
  void check_memory_budget(std::uint64_t transport_bytes = 0) const;
};

// The progress model AUTO resolves to: a progress thread only where a core is free for it, i.e.
// when the cores this rank may use exceed the threads that compute (OpenMP) — otherwise the
// thread would steal the compute core and both would run at half speed, and the application
// drives progress instead (ns_poll_cq, waits, the kernels' progress hook). A thread also needs
// MPI_THREAD_MULTIPLE where MPI is the transport (`multiple_ok`). `where` describes how the
// cores were counted (for the reason text).
struct ProgressChoice {
  int mode;
  std::string reason;
};
ProgressChoice choose_progress(int cores_per_rank, int compute_threads, bool multiple_ok,
                               const std::string& where);
// The cores a rank may use when `ranks` ranks of one host have the affinity masks `masks`
// (CPU sets as bytes, one per rank; `self` is ours): its own mask's count when the masks are
// pairwise disjoint (the launcher bound each rank), else the union shared evenly.
int cores_per_rank(const std::vector<std::vector<unsigned char>>& masks, int self);
// This process's affinity mask as bytes (for cores_per_rank), and its core count.
std::vector<unsigned char> affinity_mask();

}  // namespace netsparse::rig
