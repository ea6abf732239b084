// The configuration table: every NETSPARSE_* environment variable and every context attribute
// (ns_context_attr), declared once with its type, default, range and one line of doc. The
// environment is read here and nowhere else (the only std::getenv of lib/, bench/, examples/),
// and a bad value is refused with a message naming the variable. netsparse_info prints the
// table, ns_stats_json reports the effective values, the README's environment table is checked
// against it (tests/config). The bottom component: it includes nothing else of lib/.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace netsparse::config {

enum class Type {
  kChoice,   // one of `choices` ("a|b|c")
  kInteger,  // a decimal integer in [lo, hi]
  kReal,     // a decimal number in (lo, hi]
  kText,     // any text (a device name, a directory)
};

// Who reads a setting: the library (checked when a context opens) or the benchmarks.
enum class Scope { kLibrary, kBenchmark };

struct Setting {
  const char* name;
  Type type;
  const char* default_text;  // as a user would write it; "" = computed (doc says how)
  const char* choices;       // kChoice: "a|b|c"
  double lo, hi;             // kInteger: [lo, hi]; kReal: (lo, hi]
  // Changes what the ranks of one context do together (its collectives, its message sizes):
  // ns_open_mpi refuses a context whose ranks have different effective values.
  bool agreed;
  Scope scope;
  const char* doc;
};

// The environment variables; the order of kEnvironment.
enum class Env : int {
  kTransport,
  kIbDevice,
  kIbPort,
  kIbGidIndex,
  kIbMaxPacket,
  kIbPeerTimeoutMs,
  kMpiReads,
  kMpiShm,
  kMpiShmRingBytes,
  kMpiMessageBytes,
  kMpiFrameBytes,
  kWire,
  kPresumeDeadS,
  kProgressIntervalNs,
  kProgressStandbyUs,
  kEngineProfile,
  kMaxContextBytes,
  kKernelIsa,
  kRanksPerHost,
  kHostsPerRack,
  kRackSwitch,
  kCollHierarchy,
  kNodeEngines,
  kTaskPackets,
  kBenchStallS,
  kDataDir,
  kTraceCollectives,
  kCount
};

// clang-format off
inline constexpr Setting kEnvironment[] = {
  {"NETSPARSE_TRANSPORT", Type::kChoice, "auto", "auto|verbs|mpi|inproc", 0, 0, false,
   Scope::kLibrary, "transport when ns_context_attr.transport is AUTO: auto (verbs if an ACTIVE "
   "RDMA port exists, else mpi), verbs, mpi, inproc; the resolved transport must agree"},
  {"NETSPARSE_IB_DEVICE", Type::kText, "", "", 0, 0, false, Scope::kLibrary,
   "RDMA device (default: the first with an ACTIVE port)"},
  {"NETSPARSE_IB_PORT", Type::kInteger, "0", "", 0, 255, false, Scope::kLibrary,
   "RDMA port (0: the device's first ACTIVE port)"},
  {"NETSPARSE_IB_GID_INDEX", Type::kInteger, "-1", "", -1, 65535, false, Scope::kLibrary,
   "GID index (-1: the lowest RoCE v2 IPv4-mapped GID, else 0)"},
  {"NETSPARSE_IB_MAX_PACKET", Type::kInteger, "4096", "", 64, 1 << 20, true, Scope::kLibrary,
   "largest verbs message (receive buffer), bytes"},
  {"NETSPARSE_IB_PEER_TIMEOUT_MS", Type::kInteger, "1000", "", 1, 3600000, false,
   Scope::kLibrary, "how soon a dead peer's QP errors out (RC retry timeout), ms"},
  {"NETSPARSE_MPI_READS", Type::kChoice, "auto", "auto|rma|messages", 0, 0, true,
   Scope::kLibrary, "one-sided reads over MPI: auto (RMA when the window works, else messages), "
   "rma, messages"},
  {"NETSPARSE_MPI_SHM", Type::kChoice, "1", "0|1", 0, 0, true, Scope::kLibrary,
   "1: ranks of one host exchange the engine's frames through shared-memory rings (and detect "
   "each other's death); 0: MPI only"},
  {"NETSPARSE_MPI_SHM_RING_BYTES", Type::kInteger, "", "", 4096, 1 << 30, true, Scope::kLibrary,
   "bytes of one shared-memory ring (one per ordered pair of a host's ranks that exchange "
   "frames, created on first use; rounded up to a power of two, at least 4 frames); default "
   "2 MiB, less when a rank's rings to every other rank of its host would pass 4 MiB; a ring "
   "that would take a rank's rings past its share of MemAvailable (or "
   "NETSPARSE_MAX_CONTEXT_BYTES) is not made: that pair uses MPI, with a warning"},
  {"NETSPARSE_MPI_MESSAGE_BYTES", Type::kInteger, "65536", "", 64, 1 << 24, true,
   Scope::kLibrary, "largest engine packet, and the MPI transport's pre-posted receive buffers; "
   "a property larger than one packet (K above 16376 in fp32, 8188 in fp64) travels in pieces, "
   "so raising it only saves PR headers"},
  {"NETSPARSE_MPI_FRAME_BYTES", Type::kInteger, "16777216", "", 64, 1 << 30, true,
   Scope::kLibrary, "largest frame the MPI transport sends to a rank it reaches through MPI: the "
   "engine's packets to one peer concatenate up to this, and a frame above "
   "NETSPARSE_MPI_MESSAGE_BYTES goes as one MPI message received outside the pre-posted ring "
   "(announced in order by an empty message); at or below NETSPARSE_MPI_MESSAGE_BYTES: off"},
  {"NETSPARSE_WIRE", Type::kChoice, "compact", "compact|paper", 0, 0, true, Scope::kLibrary,
   "how RIG reads and answers travel when ns_context_attr.wire is not set: compact (packed rows, "
   "no per-PR header) or paper (the MICRO '25 Fig. 6 format, 18 B per PR)"},
  {"NETSPARSE_PRESUME_DEAD_S", Type::kReal, "20", "", 0, 86400, false, Scope::kLibrary,
   "teardown only: a peer this rank timed out on and has not heard from for this many "
   "seconds is presumed dead, for transports that cannot see a dead process (soft-RoCE drops "
   "packets to a vanished QP silently)"},
  {"NETSPARSE_PROGRESS_INTERVAL_NS", Type::kInteger, "5000", "", 0, 1e9, false,
   Scope::kLibrary, "how often the kernels drive an engine without a progress thread, ns"},
  {"NETSPARSE_PROGRESS_STANDBY_US", Type::kInteger, "1000", "", 0, 1e7, false, Scope::kLibrary,
   "when AUTO progress resolves to INLINE (no free core) and MPI gives MPI_THREAD_MULTIPLE: a "
   "standby thread wakes after this many us, and serves the peers while the application has "
   "made no library call for a whole interval; the interval doubles, up to 16x, while the "
   "application keeps calling (0: no standby thread)"},
  {"NETSPARSE_ENGINE_PROFILE", Type::kChoice, "0", "0|1", 0, 0, false, Scope::kLibrary,
   "1: time the engine's steps by stage (\"profile\" in ns_stats_json)"},
  {"NETSPARSE_MAX_CONTEXT_BYTES", Type::kInteger, "", "", 1, 9.2e18, false, Scope::kLibrary,
   "a context's memory budget, bytes (default: a quarter of physical memory): the engine's "
   "tables and the transport's buffers are checked against it, and against MemAvailable, "
   "before a context opens; a rank's shared-memory rings stay within it"},
  {"NETSPARSE_KERNEL_ISA", Type::kChoice, "", "baseline|avx2|avx512", 0, 0, false,
   Scope::kLibrary, "instruction set of the local kernels (default: the best the CPU runs)"},
  {"NETSPARSE_RANKS_PER_HOST", Type::kInteger, "", "", 1, 1 << 24, true, Scope::kLibrary,
   "the job's hosts are groups of this many consecutive ranks (virtual hosts on one machine, "
   "for tests and benchmarks; default: ranks sharing memory form a host); node-aware-ie, "
   "netsparse-node (which netsparse resolves to on hosts of several ranks), the MPI "
   "transport's shared-memory rings and the host counters use them (docs/node-aware.md)"},
  {"NETSPARSE_HOSTS_PER_RACK", Type::kInteger, "", "", 1, 1 << 24, true, Scope::kLibrary,
   "racks of this many consecutive hosts (default: one rack)"},
  {"NETSPARSE_RACK_SWITCH", Type::kChoice, "0", "0|1", 0, 0, true, Scope::kLibrary,
   "1: netsparse-node's inter-rack gathers pass through a software ToR switch per rack (the "
   "rack's first host leader) with the Property Cache (docs/node-aware.md); same as "
   "DistOptions::rack_switch"},
  {"NETSPARSE_COLL_HIERARCHY", Type::kChoice, "auto", "auto|flat|hierarchical|hosts", 0, 0, true,
   Scope::kLibrary, "collectives' allreduce and sparse allreduce: hierarchical (reduce inside "
   "each host through shared memory, across hosts between one leader per host, broadcast down; "
   "with several racks of several hosts the leaders reduce through one switch per rack), hosts "
   "(the same without the racks' switches), flat (every rank with every rank), or auto "
   "(hierarchical when there are several hosts and some host has several ranks; hosts as "
   "NETSPARSE_RANKS_PER_HOST makes them, racks as NETSPARSE_HOSTS_PER_RACK); read when a "
   "collectives communicator opens (docs/collectives.md)"},
  {"NETSPARSE_NODE_ENGINES", Type::kChoice, "auto", "auto|ranks|leader", 0, 0, true,
   Scope::kLibrary, "netsparse-node: who runs a host's RIG units: ranks (every rank of the host "
   "runs an engine for its share of the host pairs, the paper's parallel units), leader (the "
   "host's leader alone), auto (ranks where every rank has a core of its own, else leader: "
   "docs/architecture.md); ranks needs hosts of equal size and no rack switch, else leader"},
  {"NETSPARSE_TASK_PACKETS", Type::kChoice, "auto", "auto|rows|tasks|block|measure", 0, 0,
   false, Scope::kLibrary, "task-packets mode, per owner: auto (task packets where they move at "
   "least a quarter fewer bytes than fetching the rows), rows (always fetch: "
   "inspector-executor), tasks (task packets wherever the kernel allows), block (the owner's "
   "whole block, sent from its operand without packing), measure (each owner's way chosen by "
   "trial runs: DistOptions::tune_owners); each rank tells its owners its choice; must be the "
   "same on every rank"},
  {"NETSPARSE_BENCH_STALL_S", Type::kInteger, "120", "", 0, 1e6, false, Scope::kBenchmark,
   "the benchmarks give up (exit 3) after this many seconds without progress (0 = never)"},
  {"NETSPARSE_DATA_DIR", Type::kText, "~/.cache/netsparse/matrices", "", 0, 0, false,
   Scope::kBenchmark, "where scripts/fetch-matrices.sh puts the real matrices"},
  {"NETSPARSE_TRACE_COLLECTIVES", Type::kInteger, "-1", "", -1, 1 << 30, false,
   Scope::kBenchmark, "netsparse_bench: this world rank prints the call stack and time of "
   "each MPI collective it counts to stderr (-1 = none), to find where a setup's collectives "
   "come from"},
};
// clang-format on
static_assert(std::size(kEnvironment) == static_cast<std::size_t>(Env::kCount));

// The context attributes (ns_context_attr, netsparse.h): the same declaration, so that
// netsparse_info lists them and Config takes its defaults and ranges from here.
enum class Attr : int {
  kTransport,
  kClientUnits,
  kServerUnits,
  kProgressMode,
  kPacketBytes,
  kConcatDelayNs,
  kPendingEntries,
  kWatchdogMs,
  kFlags,
  kIdxChunk,
  kVirtualQueues,
  kWire,
  kCount
};

struct Attribute {
  const char* name;          // the field of ns_context_attr
  const char* mask;          // the comp_mask bit that selects it
  double def, lo, hi;        // default and range (integers)
  const char* default_text;  // as printed
  bool agreed;               // must be equal on every rank (ns_open_mpi refuses otherwise)
  const char* doc;
};

// clang-format off
inline constexpr Attribute kAttributes[] = {
  {"transport", "NS_CTX_ATTR_TRANSPORT", 0, 0, 3, "NS_TRANSPORT_AUTO", true,
   "NS_TRANSPORT_AUTO (NETSPARSE_TRANSPORT decides), _MPI, _VERBS, _INPROC"},
  {"num_client_units", "NS_CTX_ATTR_UNITS", 2, 1, 1024, "2", false,
   "client RIG units (walk work requests)"},
  {"num_server_units", "NS_CTX_ATTR_UNITS", 2, 1, 1024, "2", false,
   "server RIG units (answer peers' reads)"},
  {"progress_mode", "NS_CTX_ATTR_PROGRESS", 2, 0, 2, "NS_PROGRESS_AUTO", true,
   "NS_PROGRESS_THREAD, _INLINE or _AUTO (a thread only where a core is free for it)"},
  {"packet_bytes", "NS_CTX_ATTR_PACKET", 1500, 64, 1 << 20, "1500", true,
   "protocol packet (one concatenation queue), bytes"},
  {"concat_delay_ns", "NS_CTX_ATTR_DELAY", 2000, 0, 1.8e19, "2000", true,
   "how long a concatenation queue may wait to fill, ns"},
  {"pending_entries", "NS_CTX_ATTR_PENDING", 8192, 1, 1 << 20, "8192", false,
   "in-flight PRs per client unit (Pending PR Table entries)"},
  {"watchdog_ms", "NS_CTX_ATTR_WATCHDOG", 5000, 0, 4294967295.0, "5000", false,
   "a work request not done in this time completes NS_WC_WATCHDOG_TIMEOUT, ms"},
  {"flags", "NS_CTX_ATTR_FLAGS", 0, 0, 31, "0", true,
   "NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT (ablations) | NS_CTX_NO_HOST_RINGS "
   "(the MPI transport without its intra-host rings) | NS_CTX_UNCHECKED (post and poll without "
   "handle checks or work-request validation; local, not agreed)"},
  {"idx_chunk", "NS_CTX_ATTR_BATCH", 4096, 1, 1 << 20, "4096", false,
   "idxs a client unit walks per engine step"},
  {"virtual_queues", "NS_CTX_ATTR_VIRTUAL_QUEUES", 0, 0, 1, "0", true,
   "1: virtualized concatenation queues (implies the paper's wire)"},
  {"wire", "NS_CTX_ATTR_WIRE", 0, 0, 1, "NS_WIRE_COMPACT", true,
   "NS_WIRE_COMPACT (packed rows, no per-PR header) or NS_WIRE_PAPER (Fig. 6, 18 B per PR)"},
};
// clang-format on
static_assert(std::size(kAttributes) == static_cast<std::size_t>(Attr::kCount));

constexpr const Setting& setting(Env e) {
  return kEnvironment[static_cast<int>(e)];
}
// How many variables are agreed (fixed-size agreement records hold one value per such variable).
inline constexpr std::size_t kAgreedCount = [] {
  std::size_t n = 0;
  for (const Setting& s : kEnvironment) n += s.agreed ? 1 : 0;
  return n;
}();
constexpr const Attribute& attribute(Attr a) {
  return kAttributes[static_cast<int>(a)];
}

// The raw value of a variable, nullptr when unset or empty.
const char* raw(Env e);
bool is_set(Env e);
// Typed reads: the default when unset; std::invalid_argument naming the variable and the
// accepted values when the value is malformed or out of range.
std::string choice(Env e);  // kChoice: the chosen text ("" when unset with no default)
long long integer(Env e);   // kInteger (callers check is_set() when the default is computed)
double real(Env e);         // kReal
std::string text(Env e);    // kText
// The value in effect as text: the variable's, else the default ("" for a computed default).
// Throws like the typed reads.
std::string effective(Env e);
// Checks every variable of `scope`: the first error message, "" when all are good.
std::string first_error(Scope scope);
// The effective values of the agreed variables, in table order (for ns_open_mpi's agreement).
std::vector<std::pair<const char*, std::string>> agreed_values();
std::vector<std::string> agreed_names();

// The environment's NETSPARSE_* names that are not settings (a typo is otherwise ignored), one
// line each, sorted: "NETSPARSE_X is set but is not a NetSparse setting (did you mean
// NETSPARSE_Y?)", the nearest name suggested when it is a few edits away. The names the
// project's own scripts and tests read (NETSPARSE_TEST_*, NETSPARSE_VM_*, NETSPARSE_FUZZ_*,
// NETSPARSE_JOBS, ...) are not reported. ns_open_mpi (the communicator's rank 0) and
// ns_open_inproc (node 0) warn with them through warn_unknown_names_once; netsparse_info lists
// them and exits 1.
std::vector<std::string> unknown_names();
// "netsparse: warning: <line>" on stderr for each unknown name, the first call of the process only.
void warn_unknown_names_once();

// A variable that is not NetSparse's (HOME, OMP_NUM_THREADS, OMPI_COMM_WORLD_LOCAL_SIZE): the
// raw value, nullptr when unset. Here so that the environment is read in one place.
const char* foreign(const char* name);

}  // namespace netsparse::config
