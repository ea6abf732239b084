// Factories of the transports that bootstrap over MPI (mpi, its intra-host shared-memory rings,
// verbs) and the selection by name or environment. The only transport header that includes
// <mpi.h>: the engine and the in-process tests use transport.hpp alone.
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
#include <memory>
#include <string>
#include <string_view>

#include "transport/transport.hpp"

namespace netsparse::transport {

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
  // Largest frame send() takes (max_frame_bytes()): a frame above max_packet_bytes goes as one
  // MPI message on a tag of its own, after an empty message in the ring announcing it (so it is
  // delivered in order), and is received into a buffer grown to the largest such frame seen
  // (NETSPARSE_MPI_FRAME_BYTES). Why: a peer's rows in as few messages as inspector-executor's
  // one per pair, without pre-posting receive buffers of that size (the ring's stay small).
  std::size_t max_frame_bytes = std::size_t{16} << 20;
  int large_frames_in_flight = 4;  // their send buffers (grown to need); full -> kNoResource
  int max_outstanding_reads = 512;
  MpiReadMode read_mode = MpiReadMode::kAuto;
  int read_request_ring = 64;   // kMessages: pre-posted receives for peers' read requests
  int read_response_pool = 64;  // kMessages: responses in flight; full -> serve later
  // Destruction is collective: the transport keeps receiving until every rank is destroying
  // its transport too, however late a live peer comes (< 0, the default: no timeout decides that
  // a live peer is gone, so no collective is ever left half-matched); a peer known to have
  // failed ends the wait at once and the teardown becomes local (leaking the dup'd
  // communicator). 0: do not wait for the peers; > 0: give up after that many milliseconds.
  int teardown_timeout_ms = -1;
};

// The bytes of the MPI transport's pre-posted receive and send buffers for `options` (with
// NETSPARSE_MPI_MESSAGE_BYTES applied as make_mpi_transport applies it): what ns_open_mpi checks
// against the memory available before opening. Large frames' buffers grow with use: not counted.
[[nodiscard]] std::uint64_t mpi_buffer_bytes(const MpiOptions& options);

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
// `inner`. The host: the ranks sharing memory, cut into virtual hosts when
// NETSPARSE_RANKS_PER_HOST is set. Rings are created on first use (a pair that never exchanges
// a frame costs nothing). Collective over comm. Returns `inner` itself, with the reason in
// *why_not, when the host has one rank of comm. ring_bytes 0: automatic (<= 2 MiB per ring,
// <= 4 MiB for the rings a rank would write to every other rank of its host;
// NETSPARSE_MPI_SHM_RING_BYTES sets it in make_transport). make_transport uses it for kMpi unless
// NETSPARSE_MPI_SHM=0.
// machine_comm, layout_agreed: as TransportOptions's.
std::unique_ptr<Transport> make_host_shm_transport(MPI_Comm comm, std::unique_ptr<Transport> inner,
                                                   std::size_t ring_bytes = 0,
                                                   std::string* why_not = nullptr,
                                                   MPI_Comm* machine_comm = nullptr,
                                                   bool layout_agreed = false);

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
  // Destruction waits until every rank destroys its transport, so that peers never see our
  // queue pairs vanish mid-conversation: however late a live peer comes (< 0, the default),
  // while a peer whose QP failed ends the wait. 0: do not wait (a test uses this to make a live
  // process look dead to its peers); > 0: at most that many milliseconds.
  int teardown_timeout_ms = -1;

  // Overrides the fields that have a variable set: NETSPARSE_IB_DEVICE, NETSPARSE_IB_PORT,
  // NETSPARSE_IB_GID_INDEX, NETSPARSE_IB_MAX_PACKET, NETSPARSE_IB_PEER_TIMEOUT_MS; throws
  // std::invalid_argument naming the variable on a malformed value (config/settings.hpp).
  VerbsOptions& apply_env();
  static VerbsOptions from_env() { return VerbsOptions{}.apply_env(); }
  // Throws std::invalid_argument naming the field when a value is out of range.
  void validate() const;
};

// The bytes of the verbs transport's receive (shared receive queue), send and read-bounce
// buffers for `options` with the environment applied (apply_env): what ns_open_mpi checks
// against the memory available before opening.
[[nodiscard]] std::uint64_t verbs_buffer_bytes(VerbsOptions options);

// Uses `options` as given (make_transport applies the environment first). Throws
// std::runtime_error when the library was built without verbs or there is no usable device
// ("no RDMA device ..."). Collective over comm.
std::unique_ptr<Transport> make_verbs_transport(MPI_Comm comm, const VerbsOptions& options);

// ---- selection --------------------------------------------------------------------------
struct TransportOptions {
  bool need_thread_multiple = false;  // see make_mpi_transport
  // kMpi: false sends every frame through MPI, as NETSPARSE_MPI_SHM=0 (NS_CTX_NO_HOST_RINGS).
  bool host_rings = true;
  // kMpi with host rings: the ranks sharing this rank's memory (MPI_Comm_split_type SHARED of
  // comm), when the caller has already split them; the host rings cut that instead of splitting
  // comm again (one collective over comm less at an open) and take it over (*machine_comm is
  // then MPI_COMM_NULL). Left as it was otherwise; the caller frees what is left.
  MPI_Comm* machine_comm = nullptr;
  // The caller has agreed on the host layout over comm (NETSPARSE_RANKS_PER_HOST and
  // virtual_host_refusal, host_layout.hpp): the host rings skip their own agreement.
  bool layout_agreed = false;
  MpiOptions mpi;
  VerbsOptions verbs;  // make_transport applies VerbsOptions::apply_env() to a copy
  InprocOptions inproc;
};
// kMpi / kVerbs: as above. kInproc: only for a communicator of one rank (a one-node fabric);
// multi-node inproc endpoints come from InprocFabric. Collective over comm.
std::unique_ptr<Transport> make_transport(TransportKind kind, MPI_Comm comm,
                                          const TransportOptions& options = {});

}  // namespace netsparse::transport
