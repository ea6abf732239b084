// The transport layer: move opaque packets between the nodes of a job, and read bytes from a
// peer's registered memory. Three implementations sit behind one small interface:
//   inproc - nodes are threads of one process (tests, emulation);
//   mpi    - Open MPI point-to-point on a private duplicate of the user's communicator, MPI RMA
//            for one-sided reads;
//   verbs  - libibverbs RC queue pairs (one per peer), a shared receive queue, RDMA READ.
//
// Threading: a Transport object is used by one thread at a time (the engine's progress thread
// or the application thread in inline-progress mode). Different inproc endpoints may be used
// concurrently from different threads; that is their purpose.
//
// Only lib/transport includes <mpi.h> / <infiniband/verbs.h>; this header needs <mpi.h> for
// MPI_Comm, so everything linking netsparse_transport sees it (netsparse_transport links
// MPI::MPI_CXX publicly).
#pragma once

// The deprecated MPI C++ bindings are not used; skipping them saves compile time and warnings.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace netsparse::transport {

enum class TransportKind { kInproc, kMpi, kVerbs };
const char* to_string(TransportKind kind) noexcept;

enum class TxStatus {
  kOk,
  kNoResource,  // no send buffer / credit / read slot now: call poll()/poll_reads() and retry
  kPeerFailed,  // the destination is known to have failed; retrying will not help
  kError,       // invalid argument (bad rank, oversized packet, out-of-range read, ...)
};
const char* to_string(TxStatus status) noexcept;

// A received packet; `bytes` is valid only during the handler call.
struct ReceivedPacket {
  int src;
  std::span<const std::byte> bytes;
};

struct ReadCompletion {
  std::uint64_t cookie;  // echoed from read()
  bool ok;               // false: the peer failed before the data arrived
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportKind kind() const noexcept = 0;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // Largest packet send() accepts.
  virtual std::size_t max_packet_bytes() const noexcept = 0;
  // Two-sided, ordered per (src,dst) pair, reliable. Copies `packet` before returning kOk.
  // kNoResource: no send buffer/credit now; call poll() and retry. kError: packet too large,
  // empty, or dest out of range. Sending to oneself is allowed.
  virtual TxStatus send(int dest, std::span<const std::byte> packet) = 0;
  // Delivers up to max_packets received packets to handler (one call per packet), returns how
  // many. Also advances sends. Never blocks. The handler must not call back into this object.
  virtual int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) = 0;
  // Collective: exposes [base, base+bytes) for one-sided reads by peers. Returns a region id
  // (the same on every rank, since the calls are collective and ordered). bytes may be 0.
  virtual int register_memory(void* base, std::size_t bytes) = 0;
  virtual void deregister_memory(int region) = 0;  // collective
  // One-sided read of `bytes` at `offset` in peer `dest`'s region `region` into `local`.
  // Completion (cookie echoed) through poll_reads; `local` must stay valid until then.
  // kNoResource = too many outstanding reads. kError = bad dest/region, or the range is outside
  // the peer's region (checked locally before anything is issued; no completion follows).
  // kPeerFailed = dest already known failed (no completion follows).
  virtual TxStatus read(int dest, int region, std::uint64_t offset, void* local, std::size_t bytes,
                        std::uint64_t cookie) = 0;
  // Writes up to max completions into out, returns how many. Never blocks.
  virtual int poll_reads(ReadCompletion* out, int max) = 0;
  // Collective barrier for bootstrap/teardown (blocking; never called on the hot path).
  virtual void barrier() = 0;
  // Peers known to have failed (QP in error, MPI error, simulated detection): true once detected.
  virtual bool peer_failed(int peer) const noexcept = 0;
  // Bytes the transport itself put on the wire (packets + its own headers if any).
  virtual std::uint64_t bytes_sent() const noexcept = 0;
  // Largest single read() accepted (kError above it). Added beyond the contract; not pure so
  // that test doubles written against the contract still compile.
  virtual std::size_t max_read_bytes() const noexcept { return SIZE_MAX; }
  // Zero-copy send, optional: the transport's own memory for the next message to `dest`
  // (max_packet_bytes() long), to be filled and then sent by commit(dest, bytes); an empty span
  // when there is no room now or the transport (or the path to dest) has none to offer, and
  // the caller then uses send(). At most one reservation per destination is open; nothing else
  // is sent to that destination while it is.
  virtual std::span<std::byte> reserve(int /*dest*/) { return {}; }
  // Sends the first `bytes` (<= the reserved length; 0 drops the reservation) of the open
  // reservation to dest. kOk, or kPeerFailed / kError as send() would report them.
  virtual TxStatus commit(int /*dest*/, std::size_t /*bytes*/) { return TxStatus::kError; }
};

// ---- inproc -----------------------------------------------------------------------------
struct InprocOptions {
  std::size_t max_packet_bytes = 4096;
  // Packets each node's mailbox holds; a full mailbox makes send() return kNoResource.
  std::size_t mailbox_packets = 256;
  // Reads completed but not yet returned by poll_reads; beyond it read() returns kNoResource.
  std::size_t max_outstanding_reads = 1024;
};

// How a kill() looks to the survivors.
enum class FailureVisibility {
  // Silent: sends to the dead node return kOk and are dropped, its reads never complete,
  // peer_failed() stays false. This is what a lossless fabric without failure notification (and
  // Open MPI over shared memory) gives: only the engine's watchdog can notice.
  kSilent,
  // Reported: peer_failed(dead) becomes true, sends and reads to it return kPeerFailed. This is
  // what RC verbs give once the retry counter is exhausted (about a second after the death).
  kReported,
};

class InprocFabricState;  // shared by the fabric and its endpoints

// N nodes = threads of one process. endpoint(r) is called once per rank; endpoints and the
// fabric may be destroyed in any order.
class InprocFabric {
 public:
  explicit InprocFabric(int nodes, const InprocOptions& options = {});
  ~InprocFabric();
  InprocFabric(const InprocFabric&) = delete;
  InprocFabric& operator=(const InprocFabric&) = delete;

  int nodes() const noexcept;
  std::unique_ptr<Transport> endpoint(int rank);
  // Simulate a dead node: packets it sends afterwards are dropped, packets to it are dropped
  // (already queued ones included), it leaves barriers. Packets it sent before the kill that are
  // already in a mailbox are still delivered (they were on the wire).
  void kill(int rank, FailureVisibility visibility = FailureVisibility::kSilent);

 private:
  std::shared_ptr<InprocFabricState> state_;
};

// ---- mpi --------------------------------------------------------------------------------
// How the MPI transport implements read().
enum class MpiReadMode {
  // kRma if MPI_Win_create works (Open MPI 4.1 needs an RMA-capable path for its osc/rdma
  // component: shared memory with single-copy (CMA/xpmem/knem) or an RDMA network; over TCP
  // windows cannot be created at all under MPI_THREAD_MULTIPLE), else kMessages.
  // NETSPARSE_MPI_READS=auto|rma|messages overrides kAuto.
  kAuto,
  // MPI RMA: MPI_Rget on a window locked once with MPI_Win_lock_all; no target involvement.
  kRma,
  // Emulated: a small request message, answered by the target's transport from the registered
  // region inside its poll()/poll_reads()/barrier(). Works on every MPI path, but a read only
  // progresses while the target polls.
  kMessages,
};
const char* to_string(MpiReadMode mode) noexcept;

struct MpiOptions {
  // Size of each pre-posted receive buffer = largest message. The engine frames several
  // protocol packets into one message (up to this size): measured on Open MPI 4.1's vader,
  // streaming 1500 B messages costs ~1 us each (1.6 GB/s) while 64 KiB messages reach 7.7 GB/s
  // (rendezvous with single-copy), so per-message costs are paid per frame. 4 MiB of receive
  // and 4 MiB of send buffers per rank at the default rings.
  std::size_t max_packet_bytes = 65536;
  int recv_ring = 64;  // pre-posted MPI_Irecv
  int send_ring = 64;  // MPI_Isend buffers in flight; full -> kNoResource
  // Send buffers one destination may hold (0: three quarters of send_ring). Open MPI never
  // completes sends to a dead process and reports no error, so without a cap one dead (or
  // stalled) peer would take the whole ring and block traffic to everyone else.
  int max_in_flight_per_peer = 0;
  int max_outstanding_reads = 512;
  MpiReadMode read_mode = MpiReadMode::kAuto;
  int read_request_ring = 64;   // kMessages: pre-posted receives for peers' read requests
  int read_response_pool = 64;  // kMessages: responses in flight; full -> serve later
  // Destruction is collective: the transport keeps receiving until every rank is destroying
  // its transport too, at most this long (then, or when a peer is known failed, it gives up
  // without waiting, leaking the dup'd communicator). 0: do not wait for the peers.
  int teardown_timeout_ms = 10000;
};

// Dups the communicator (application traffic never matches ours), sets MPI_ERRORS_RETURN on the
// dup, checks the thread level: need_thread_multiple (a progress thread calls MPI concurrently
// with the application) requires MPI_THREAD_MULTIPLE. Throws std::runtime_error with a clear
// message (MPI not initialized, insufficient thread level, ...).
// "MPI_THREAD_MULTIPLE" etc., for error messages that name the thread level.
const char* mpi_thread_level_name(int level) noexcept;

std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm, bool need_thread_multiple);
std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm, bool need_thread_multiple,
                                              const MpiOptions& options);

// The MPI transport's intra-host fast path (shm_rings.cpp): packets between ranks of the same
// host go through single-producer/single-consumer rings in POSIX shared memory (one copy, read
// in place) instead of MPI; everything else (other hosts, reads, barriers, failures) through
// `inner`. Collective over comm. Returns `inner` itself, with the reason in *why_not, when the
// host has one rank of comm or shared memory cannot be set up (on every rank of the host
// alike). ring_bytes 0: automatic (<= 8 MiB per pair, <= 256 MiB per host). make_transport uses
// it for kMpi unless NETSPARSE_MPI_SHM=0.
std::unique_ptr<Transport> make_host_shm_transport(MPI_Comm comm, std::unique_ptr<Transport> inner,
                                                   std::size_t ring_bytes = 0,
                                                   std::string* why_not = nullptr);

// ---- verbs ------------------------------------------------------------------------------
struct VerbsOptions {
  std::string device;  // empty: the first device with an ACTIVE port
  int port = 0;        // 0: the first ACTIVE port of the device
  // -1: the IPv4-mapped RoCE v2 GID if present, else index 0 (see choose_gid_index).
  int gid_index = -1;
  std::size_t max_packet_bytes = 4096;  // = receive buffer size
  int recv_buffers = 1024;              // pre-posted on the shared receive queue
  int send_buffers = 512;               // registered send slab; exhausted -> kNoResource
  int signal_every = 16;                // selective signalling interval per QP
  int send_queue_depth = 256;           // per QP (sends + reads)
  int max_outstanding_reads = 256;
  std::size_t read_slot_bytes = 4096;  // bounce slot per outstanding read = max_read_bytes()
  // Time until a dead peer is reported (QP retry exceeded); converted to the RC ack timeout
  // exponent with retry_count retries (see rc_timeout_exponent).
  int peer_timeout_ms = 1000;
  int retry_count = 7;  // transport retries (0..7)
  int cq_batch = 32;    // completions taken per ibv_poll_cq call
  // Destruction waits (at most this long) until every rank destroys its transport, so that
  // peers never see our queue pairs vanish mid-conversation. 0: do not wait (a test uses this
  // to make a live process look dead to its peers).
  int teardown_timeout_ms = 10000;

  // Overrides the fields that have a variable set: NETSPARSE_IB_DEVICE, NETSPARSE_IB_PORT,
  // NETSPARSE_IB_GID_INDEX, NETSPARSE_IB_MAX_PACKET, NETSPARSE_IB_PEER_TIMEOUT_MS; throws
  // std::runtime_error naming the variable on a malformed value.
  VerbsOptions& apply_env();
  static VerbsOptions from_env() { return VerbsOptions{}.apply_env(); }
  // Throws std::invalid_argument naming the field when a value is out of range.
  void validate() const;
};

// Uses `options` as given (make_transport applies the environment first). Throws
// std::runtime_error when the library was built without verbs or there is no usable device
// ("no RDMA device ..."). Collective over comm.
std::unique_ptr<Transport> make_verbs_transport(MPI_Comm comm, const VerbsOptions& options);
// True when some device has an ACTIVE port (false when built without verbs).
bool verbs_device_available() noexcept;
// True when this build contains the verbs transport.
bool verbs_compiled_in() noexcept;

// ---- selection --------------------------------------------------------------------------
// Parses "auto" | "verbs" | "mpi" | "inproc" (case-sensitive); auto resolves through
// verbs_device_available(). Throws std::invalid_argument listing the accepted values.
TransportKind parse_transport_kind(std::string_view text);
// NETSPARSE_TRANSPORT (unset or empty = auto). Throws on an unknown value.
TransportKind transport_from_env();

struct TransportOptions {
  bool need_thread_multiple = false;  // see make_mpi_transport
  MpiOptions mpi;
  VerbsOptions verbs;  // make_transport applies VerbsOptions::apply_env() to a copy
  InprocOptions inproc;
};
// kMpi / kVerbs: as above. kInproc: only for a communicator of one rank (a one-node fabric);
// multi-node inproc endpoints come from InprocFabric. Collective over comm.
std::unique_ptr<Transport> make_transport(TransportKind kind, MPI_Comm comm,
                                          const TransportOptions& options = {});

}  // namespace netsparse::transport
