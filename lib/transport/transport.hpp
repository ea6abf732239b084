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
// This header is MPI-free: the engine (lib/rig) and the in-process tests build against it alone.
// The factories of the MPI and verbs transports, which need MPI_Comm, are in
// transport/transport_factory.hpp.
#pragma once

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
  // Largest packet send() accepts on every path.
  virtual std::size_t max_packet_bytes() const noexcept = 0;
  // Largest send() to `dest`: at least max_packet_bytes(); more where a path carries larger
  // frames (the MPI transport to a peer it reaches through MPI). Added beyond the contract; not
  // pure so that test doubles written against the contract still compile.
  virtual std::size_t max_frame_bytes(int /*dest*/) const noexcept { return max_packet_bytes(); }
  // Two-sided, ordered per (src,dst) pair, reliable. Copies `packet` before returning kOk.
  // kNoResource: no send buffer/credit now; call poll() and retry. kError: packet too large
  // (above max_frame_bytes(dest)),
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
  // Collective: every rank contributes `bytes` bytes (the same count everywhere) and receives
  // all contributions in rank order in `all` (size() * bytes). For agreeing on arguments before
  // a collective setup; never on the hot path. Dead in-process nodes contribute zeros.
  virtual void allgather(const void* mine, std::size_t bytes, void* all) = 0;
  // Peers known to have failed (QP in error, MPI error, simulated detection): true once detected.
  virtual bool peer_failed(int peer) const noexcept = 0;
  // Tells the transport a peer is known to have failed (detected by a layer above it, e.g. the
  // intra-host rings' process check), so that its teardown does not wait for that peer.
  virtual void note_peer_failed(int /*peer*/) {}
  // Bytes the transport itself put on the wire (packets + its own headers if any).
  virtual std::uint64_t bytes_sent() const noexcept = 0;
  // Largest single read() accepted (kError above it). Added beyond the contract; not pure so
  // that test doubles written against the contract still compile.
  virtual std::size_t max_read_bytes() const noexcept { return SIZE_MAX; }
  // How this transport carries traffic beyond its kind (e.g. the MPI transport's intra-host
  // rings), for statistics; empty by default.
  virtual std::string detail() const { return {}; }
  // Zero-copy send, optional: the transport's own memory for the next message to `dest`
  // (at least max_packet_bytes() and at most max_frame_bytes(dest) long: as much as the path has
  // free now, so a message to a consumer that has drained can be as large as the path allows),
  // to be filled and then sent by
  // commit(dest, bytes); an empty span when there is no room now or the transport (or the path to
  // dest) has none to offer, and the caller then uses send(). At most one reservation per
  // destination is open; nothing else is sent to that destination while it is.
  virtual std::span<std::byte> reserve(int /*dest*/) { return {}; }
  // The same, for a caller about to write `want` bytes (a bulk answer): a transport that has
  // more room than its cheap view of it shows may look again (the shared-memory rings re-read
  // the consumer's position, a cache miss they otherwise save on every frame).
  virtual std::span<std::byte> reserve_for(int dest, std::size_t /*want*/) { return reserve(dest); }
  // True when reserve(dest) can lend memory at all, so an empty reservation means "no room
  // now" (the consumer has not drained yet) rather than "never": a producer may then wait for
  // room instead of copying its message into a queue of its own.
  virtual bool lends(int /*dest*/) const noexcept { return false; }
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

// ---- selection (the factories: transport_factory.hpp) ---------------------------------
// True when some device has an ACTIVE port (false when built without verbs).
bool verbs_device_available() noexcept;
// True when this build contains the verbs transport.
bool verbs_compiled_in() noexcept;
// Parses "auto" | "verbs" | "mpi" | "inproc" (case-sensitive); auto resolves through
// verbs_device_available(). Throws std::invalid_argument listing the accepted values.
TransportKind parse_transport_kind(std::string_view text);
// NETSPARSE_TRANSPORT (unset or empty = auto). Throws on an unknown value.
TransportKind transport_from_env();
// The transport an attribute's `transport` field names (NS_TRANSPORT_AUTO: transport_from_env()).
// Throws std::invalid_argument for a value that names none.
TransportKind transport_for_attribute(int ns_transport);

}  // namespace netsparse::transport
