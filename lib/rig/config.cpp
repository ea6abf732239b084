#include "rig/config.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "config/settings.hpp"
#include "support/memory.hpp"

namespace netsparse::rig {

namespace {

// The value of attribute `a` when it lies in the table's range, else std::invalid_argument
// naming the field and the range.
template <typename T>
T in_range(config::Attr a, T value) {
  const config::Attribute& d = config::attribute(a);
  if (static_cast<double>(value) < d.lo || static_cast<double>(value) > d.hi) {
    throw std::invalid_argument(std::string("ns_context_attr.") + d.name + " must be in " +
                                std::to_string(static_cast<long long>(d.lo)) + ".." +
                                std::to_string(static_cast<long long>(d.hi)) + ", got " +
                                std::to_string(value));
  }
  return value;
}

}  // namespace

Config Config::from_attr(const ns_context_attr* attr) {
  using config::Attr;
  Config c;
  c.wire = config::choice(config::Env::kWire) == "paper" ? NS_WIRE_PAPER : NS_WIRE_COMPACT;
  if (attr == nullptr) return c;
  const std::uint64_t m = attr->comp_mask;
  constexpr std::uint64_t kKnown = (NS_CTX_ATTR_WIRE << 1) - 1;
  if ((m & ~kKnown) != 0) throw std::invalid_argument("ns_context_attr: unknown comp_mask bits");
  if (m & NS_CTX_ATTR_TRANSPORT) c.transport = in_range(Attr::kTransport, attr->transport);
  if (m & NS_CTX_ATTR_UNITS) {
    c.client_units = in_range(Attr::kClientUnits, attr->num_client_units);
    c.server_units = in_range(Attr::kServerUnits, attr->num_server_units);
  }
  if (m & NS_CTX_ATTR_PROGRESS)
    c.progress_mode = in_range(Attr::kProgressMode, attr->progress_mode);
  if (m & NS_CTX_ATTR_PACKET) c.packet_bytes = in_range(Attr::kPacketBytes, attr->packet_bytes);
  if (m & NS_CTX_ATTR_DELAY) c.delay_ns = attr->concat_delay_ns;
  if (m & NS_CTX_ATTR_PENDING) {
    c.pending_entries = in_range(Attr::kPendingEntries, attr->pending_entries);
  }
  if (m & NS_CTX_ATTR_WATCHDOG) c.watchdog_ms = attr->watchdog_ms;
  if (m & NS_CTX_ATTR_FLAGS) {
    constexpr std::uint32_t kFlags = NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT |
                                     NS_CTX_NO_HOST_RINGS | NS_CTX_UNCHECKED;
    if ((attr->flags & ~kFlags) != 0)
      throw std::invalid_argument("ns_context_attr.flags: unknown bits");
    c.flags = attr->flags;
  }
  if (m & NS_CTX_ATTR_BATCH) c.idx_chunk = in_range(Attr::kIdxChunk, attr->idx_chunk);
  if (m & NS_CTX_ATTR_VIRTUAL_QUEUES) c.virtual_queues = attr->virtual_queues != 0;
  if (m & NS_CTX_ATTR_WIRE) c.wire = in_range(Attr::kWire, attr->wire);
  return c;
}

std::uint64_t Config::fixed_memory_bytes() const noexcept {
  // Per client unit: the Pending PR Table (24 B per entry + a 4 B free-list slot) and the
  // positional de-duplication map (grows with the work requests, not counted here).
  const std::uint64_t per_unit = std::uint64_t{pending_entries} * 28 + 4096;
  return per_unit * static_cast<std::uint64_t>(client_units) +
         std::uint64_t{1024} * static_cast<std::uint64_t>(server_units);
}

void Config::check_memory_budget(std::uint64_t transport_bytes) const {
  std::uint64_t budget = 0;
  if (config::is_set(config::Env::kMaxContextBytes)) {
    budget = static_cast<std::uint64_t>(config::integer(config::Env::kMaxContextBytes));
  } else {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    budget = pages > 0 && page > 0
                 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 4
                 : UINT64_MAX;
  }
  const std::uint64_t tables = fixed_memory_bytes();
  const std::uint64_t need = tables + transport_bytes;
  const std::string what =
      std::to_string(tables) + " bytes of engine tables (" + std::to_string(client_units) +
      " client units x " + std::to_string(pending_entries) +
      " Pending PR Table entries x 28 B) and " + std::to_string(transport_bytes) +
      " bytes of transport buffers (pre-posted receives and sends: NETSPARSE_MPI_MESSAGE_BYTES "
      "each over MPI, NETSPARSE_IB_MAX_PACKET over verbs)";
  if (need > budget) {
    throw std::invalid_argument(
        "the context settings need " + std::to_string(need) + " bytes (" + what +
        "), more than the context memory budget of " + std::to_string(budget) +
        " bytes (a quarter of physical memory, or NETSPARSE_MAX_CONTEXT_BYTES)");
  }
  // Within the budget but not within what the machine has free now: refused before anything is
  // allocated rather than failing half-built (or being killed) later.
  support::require_memory("the context", need, what);
}

std::vector<unsigned char> affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    const long online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    for (long c = 0; c < online && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &set);
  }
  std::vector<unsigned char> bytes(sizeof set);
  std::memcpy(bytes.data(), &set, sizeof set);
  return bytes;
}

int cores_per_rank(const std::vector<std::vector<unsigned char>>& masks, int self) {
  std::vector<unsigned char> all;
  int sum = 0;
  for (const auto& m : masks) {
    if (all.size() < m.size()) all.resize(m.size(), 0);
    for (std::size_t i = 0; i < m.size(); ++i) {
      all[i] = static_cast<unsigned char>(all[i] | m[i]);
      sum += std::popcount(static_cast<unsigned>(m[i]));
    }
  }
  int uni = 0;
  for (unsigned char b : all) uni += std::popcount(static_cast<unsigned>(b));
  int own = 0;
  for (unsigned char b : masks[static_cast<std::size_t>(self)]) {
    own += std::popcount(static_cast<unsigned>(b));
  }
  if (sum == uni) return std::max(1, own);  // disjoint: each rank has its own cores
  return std::max(1, uni / std::max<int>(1, static_cast<int>(masks.size())));
}

ProgressChoice choose_progress(int cores_per_rank, int compute_threads, bool multiple_ok,
                               const std::string& where) {
  const int per_rank = std::max(1, cores_per_rank);
  const int compute = std::max(1, compute_threads);
  std::string why = std::to_string(per_rank) + (per_rank == 1 ? " core" : " cores") +
                    " per rank (" + where + "), " + std::to_string(compute) + " compute thread" +
                    (compute == 1 ? "" : "s");
  if (per_rank <= compute)
    return {NS_PROGRESS_INLINE, why + ": no free core for a progress thread"};
  if (!multiple_ok) return {NS_PROGRESS_INLINE, why + ", but MPI lacks MPI_THREAD_MULTIPLE"};
  return {NS_PROGRESS_THREAD, why + ": a free core runs the progress thread"};
}

}  // namespace netsparse::rig
