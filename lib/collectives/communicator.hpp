// Allreduce over the engine's transports (lib/transport): Flare's host-side designs in software.
//
// Every block of the vector (one packet's worth of elements) has an aggregator, the rank owning
// the contiguous range of blocks it lies in: ranks send their blocks to the aggregators
// (staggered: rank r starts with rank r + 1, so no aggregator is hit by everyone at once), the
// aggregator combines the P contributions of a block with one of Flare's designs and sends the
// result to every rank. Before any data counts, the ranks agree: each sends a descriptor of its
// arguments first (same per-pair channel, so it precedes the data), and every rank checks all P
// descriptors, so a bad argument on one rank or a mismatch fails every rank with one message.
// docs/collectives.md has the designs, the wire format and the decisions.
//
// Threading: one thread at a time per Communicator (like the Transport it owns).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/reduce_ops.hpp"
#include "collectives/wire.hpp"
#include "support/raw_vector.hpp"
#include "transport/transport.hpp"

namespace netsparse::collectives {

// Values are the C API's NS_ALLREDUCE_* algorithms.
enum class Algorithm : std::uint8_t {
  kAuto = 0,          // Flare's rule by size (choose_algorithm)
  kSingleBuffer = 1,  // one accumulator per block, contributions combined as they arrive
  kMultiBuffer2 = 2,  // B = 2 accumulators per block, combined once all arrived
  kMultiBuffer4 = 3,  // B = 4
  kTree = 4,          // fixed pairwise tree over the ranks: bitwise reproducible
};
inline constexpr int kAlgorithmCount = 5;
const char* to_string(Algorithm a) noexcept;
// Flare's selection by the vector's size in bytes: single buffer above 512 KiB, 4 buffers above
// 256 KiB, 2 above 128 KiB, else the tree; always the tree when reproducibility is asked.
Algorithm choose_algorithm(std::uint64_t bytes, bool reproducible) noexcept;

// Why a rank refuses its own arguments; sent in its descriptor so every rank reports it.
enum class LocalError : std::int32_t {
  kNone = 0,
  kNullBuffer,
  kBadDataType,
  kBadOp,
  kNoUserFunction,
  kOverlap,
  kTooLarge,
  kBadAlgorithm,
  kIndexOutOfRange,
  kSparseOp,
  kNonCommutativeDesign,
  kBadRoot,
  kHostFailed,
};
const char* to_string(LocalError e) noexcept;

enum class Failure {
  kInvalid,     // this or another rank's arguments were refused (communicator still usable)
  kMismatch,    // ranks passed different datatype / op / count / ... (still usable)
  kTimeout,     // the deadline passed (communicator broken)
  kPeerFailed,  // the transport reports a peer dead (broken)
  kProtocol,    // a malformed or unexpected packet arrived (broken)
  kBroken,      // an earlier failure broke this communicator
};
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(Failure f, const std::string& what) : std::runtime_error(what), failure_(f) {}
  Failure failure() const noexcept { return failure_; }

 private:
  Failure failure_;
};

struct Options {
  // Deadline of one operation: a peer that does not take part (dead, or never calling) makes
  // the call fail after this long instead of hanging. The transport's own failure detection
  // (intra-host rings, verbs) fails it sooner.
  int timeout_ms = 60000;
  // Packet size (header included); 0 = the transport's largest, at most 64 KiB. Every rank
  // must use the same (agreed per operation).
  std::size_t packet_bytes = 0;
  // Non-blocking operations outstanding at once (start_allreduce beyond it first progresses
  // the others until one completes).
  int max_in_flight = 8;
};

struct AllreduceArgs {
  const void* send = nullptr;  // count elements; may equal recv (in place)
  void* recv = nullptr;        // count elements
  std::uint64_t count = 0;
  int dtype = 0;                 // DataType as int (checked)
  int op = 0;                    // ReduceOp as int (checked)
  const UserOp* user = nullptr;  // for ReduceOp::kUser
  int algorithm = 0;             // Algorithm as int; kAuto by default
  bool reproducible = false;     // forces the tree
  int root = 0;                  // reduce only: the rank that receives the result
  // Reduce and broadcast: the root owns every block (a star: every rank sends its whole vector
  // to the root, the root sends the result to every rank), as a switch aggregates for the ranks
  // below it; otherwise the blocks are spread over the ranks. Every rank must pass the same.
  bool star = false;
  // Set by a caller that must take part but has nothing valid to give (a hierarchical
  // allreduce's host leader whose host step failed): refused with this reason on every rank.
  LocalError refuse = LocalError::kNone;
};

enum class SparseOutput { kAuto, kSparse, kDense };
struct SparseArgs {
  std::uint64_t n = 0;    // dense length of the vectors
  std::uint64_t nnz = 0;  // this rank's entries (repeated indices are summed)
  const std::uint64_t* idx = nullptr;
  const void* values = nullptr;
  int dtype = static_cast<int>(DataType::kFp32);
  int op = static_cast<int>(ReduceOp::kSum);  // sum only: absent entries are zeros
  SparseOutput output = SparseOutput::kAuto;
  // Optional, n elements: dense blocks are assembled here (scratch otherwise), and a dense
  // result is left here instead of in memory of the result's own (as MPI_Allreduce's recvbuf).
  void* dense_out = nullptr;
  LocalError refuse = LocalError::kNone;  // as AllreduceArgs::refuse
};
// Zero-filled bytes from calloc: a large dense result is mapped lazily (pages fault in as they
// are written) instead of being cleared first.
class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(std::size_t bytes);
  std::byte* data() noexcept { return p_.get(); }
  const std::byte* data() const noexcept { return p_.get(); }
  std::size_t size() const noexcept { return n_; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte, Free> p_;
  std::size_t n_ = 0;
};

struct SparseResult {
  std::uint64_t n = 0;
  DataType dtype = DataType::kFp32;
  bool dense = false;  // values holds n elements; else indices (ascending) and their values
  support::RawVector<std::uint64_t> indices;  // grown without a zero-fill, then written
  ByteBuffer values;
  std::byte* dense_external = nullptr;  // a dense result left in SparseArgs::dense_out
  std::uint64_t size() const noexcept { return dense ? n : indices.size(); }
  const std::byte* data() const noexcept {
    return dense_external != nullptr ? dense_external : values.data();
  }
};

// What the last operation did (benchmarks, tests).
struct OpStats {
  Algorithm algorithm = Algorithm::kAuto;
  std::uint64_t bytes_sent = 0;    // transport bytes of this operation
  std::uint32_t blocks = 0;        // blocks of the vector
  std::uint32_t span = 0;          // sparse: indices per block
  std::uint64_t dense_blocks = 0;  // sparse: result blocks sent dense-encoded (by this rank)
  // Packet bytes (collective headers included) this rank handed to the transport for ranks of
  // other hosts (set_hosts); every packet counts once, whatever the transport adds.
  std::uint64_t inter_host_bytes = 0;
  // The same for ranks of other racks (set_racks): what leaves a rack through its switch.
  std::uint64_t inter_rack_bytes = 0;
};

class Communicator {
 public:
  explicit Communicator(std::unique_ptr<transport::Transport> transport, Options options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  std::size_t packet_bytes() const noexcept { return packet_bytes_; }
  transport::Transport& transport() noexcept { return *transport_; }
  const Options& options() const noexcept { return options_; }
  void set_timeout_ms(int ms) noexcept { options_.timeout_ms = ms; }
  bool broken() const noexcept { return !broken_.empty(); }
  const std::string& broken_reason() const noexcept { return broken_; }
  const OpStats& last_stats() const noexcept { return stats_; }
  // The host of every rank (size() entries: the flat operations talk to every rank), for the
  // inter-host byte count; by default every rank is a host of its own.
  void set_hosts(std::vector<int> host_of_rank);
  bool other_host(int dest) const noexcept { return host_of_[dest] != host_of_[rank()]; }
  // Inter-host packet bytes of every operation so far (OpStats has the last one's).
  std::uint64_t inter_host_bytes_total() const noexcept { return inter_host_total_; }
  // The rack of every rank (size() entries), for the inter-rack byte count; by default every
  // rank is a rack of its own.
  void set_racks(std::vector<int> rack_of_rank);
  bool other_rack(int dest) const noexcept { return rack_of_[dest] != rack_of_[rank()]; }
  void count_sent(int dest, std::size_t bytes) noexcept {
    if (other_host(dest)) inter_host_total_ += bytes;
    if (other_rack(dest)) inter_rack_total_ += bytes;
  }

  // Collective. Throws CollectiveError (every rank throws for kInvalid / kMismatch).
  Algorithm allreduce(const AllreduceArgs& args);
  SparseResult sparse_allreduce(const SparseArgs& args);
  // The rest of the dense family, on the allreduce's blocks and designs (allreduce.cpp):
  // reduce: the result at args.root only (recv ignored elsewhere, may be null); in place at the
  // root when send == recv.
  Algorithm reduce(const AllreduceArgs& args);
  // reduce-scatter: send holds size() * count elements; recv gets this rank's count of the
  // reduced vector (elements [rank * count, (rank + 1) * count)). In place: recv == send +
  // rank * count elements.
  Algorithm reduce_scatter(const AllreduceArgs& args);
  // broadcast: count elements of buffer from root to every rank (refuse, star: AllreduceArgs').
  void broadcast(void* buffer, std::uint64_t count, int dtype, int root,
                 LocalError refuse = LocalError::kNone, bool star = false);
  // all-gather: count elements of send from every rank, recv = size() * count elements in rank
  // order. In place: send == recv + rank * count elements.
  void allgather(const void* send, void* recv, std::uint64_t count, int dtype);
  // Returns once every rank called it (the agreement's exchange of descriptors alone).
  void barrier();

  // Non-blocking allreduce: starts the operation and returns its id (the operation number on
  // the wire). The buffers must stay valid, and send unchanged, until it completes. Every rank
  // starts the same operations in the same order (blocking ones in between count too); they
  // progress whenever any call of this communicator runs and may complete in any order.
  std::uint32_t start_allreduce(const AllreduceArgs& args);
  // Non-blocking all-gather (allgather's arguments), the same requests as start_allreduce: the
  // dissertation's prefetch, the next partition's parameters gathered while this one computes.
  std::uint32_t start_allgather(const void* send, void* recv, std::uint64_t count, int dtype);
  // Non-blocking reduce and broadcast (reduce's and broadcast's arguments), the same requests:
  // the steps of Hierarchy::start_allreduce.
  std::uint32_t start_reduce(const AllreduceArgs& args);
  std::uint32_t start_broadcast(void* buffer, std::uint64_t count, int dtype, int root,
                                LocalError refuse = LocalError::kNone, bool star = false);
  // Progresses every outstanding operation once; true once `id` completed. A completed or
  // failed operation's id is released (its failure is thrown here, as the blocking call would).
  bool test(std::uint32_t id);
  void wait(std::uint32_t id);
  // Non-blocking operations started and not yet released by test / wait.
  std::size_t outstanding() const noexcept { return requests_.size(); }
  // Of those, the ones still running (at most options().max_in_flight).
  std::size_t in_flight() const noexcept;

  // Machinery shared by the operations (public for the operation classes in the .cpp files).
  struct Op;

 private:
  friend struct Op;
  // The first step of every collective: throws on a communicator broken earlier, else returns
  // the descriptor's fields every collective sets (kind, datatype, operator, packet size).
  wire::Descriptor begin_descriptor(wire::Collective kind, int dtype, int op) const;
  // Blocking: start(op), progress until it is done, throw its failure.
  void run(Op& op);
  // Gives op the next operation number and makes it active (its early packets delivered).
  void start(Op& op);
  // One round over the active operations: their sends, one poll, verdicts, completions, and
  // the retirement of those done or failed. true when anything happened.
  bool progress_once();
  // Progresses (with the idle back-off, the deadlines and the transport's failure reports)
  // until done() holds.
  void drive(const std::function<bool()>& done);
  // The steps of progress_once: a received packet routed to its operation by number (or kept
  // for an operation not started yet); one operation's sends; the verdict once every
  // descriptor is in (a refusal or a mismatch fails that operation only).
  void route(int src, std::span<const std::byte> packet);
  void dispatch(Op& op, int src, const wire::Header& h, std::span<const std::byte> packet);
  bool advance_sends(Op& op);
  void settle_arguments(Op& op);
  void check_peers_and_deadlines();
  // A failure that breaks the communicator (timeout, dead peer, bad packet) fails every active
  // operation; done and failed operations leave the active list.
  void retire();
  // The dense family: validates, builds the descriptor and the operation (algorithm chosen).
  std::unique_ptr<Op> make_dense(wire::Collective kind, const AllreduceArgs& args,
                                 Algorithm* algorithm);
  Algorithm dense_collective(wire::Collective kind, const AllreduceArgs& args);
  // A broadcast's arguments (broadcast and start_broadcast): buffer is both send and recv.
  static AllreduceArgs broadcast_args(void* buffer, std::uint64_t count, int dtype, int root,
                                      LocalError refuse, bool star);
  // A non-blocking operation of the dense family: waits for room under the in-flight limit and
  // starts it as a request; with send_now (the all-gather: a prefetch) one driver round runs
  // before it returns, so its descriptor and first blocks leave before the caller computes.
  // (The allreduce keeps its start free of transport work: a peer found dead then fails its
  // requests at test / wait, not the starts after it.)
  std::uint32_t start_dense(wire::Collective kind, const AllreduceArgs& args, bool send_now);

  std::unique_ptr<transport::Transport> transport_;
  Options options_;
  std::size_t packet_bytes_ = 0;
  std::uint32_t seq_ = 0;  // the last operation number started
  std::string broken_;
  OpStats stats_;
  // Started and not yet done or failed, in operation order (blocking ones live on the caller's
  // stack, non-blocking ones in requests_).
  std::vector<Op*> active_;
  std::map<std::uint32_t, std::unique_ptr<Op>> requests_;
  // Packets of operations not started here yet (peers may be ahead by their in-flight ones).
  struct Stashed {
    std::uint32_t seq;
    int src;
    std::vector<std::byte> bytes;
  };
  std::vector<Stashed> stash_;
  // The sparse roots' dense accumulators and touched bitmaps, all zero between operations.
  std::vector<std::byte> sparse_acc_;
  std::vector<std::uint64_t> sparse_bits_;
  std::vector<int> host_of_, rack_of_;
  std::uint64_t inter_host_total_ = 0, inter_rack_total_ = 0;

 public:
  // Scratch arrays and a staging packet, kept across operations (no page faults per call);
  // each operation holds one set while it runs (concurrent ones do not share).
  struct ScratchSet {
    std::vector<std::unique_ptr<std::byte[]>> arrays;
    std::vector<std::size_t> bytes;
    std::vector<std::byte> staging;
    // The operation's per-rank state (Op::desc, have_desc, src_ok), kept with the set so that
    // starting an operation allocates nothing once the pool is warm (a barrier's three
    // allocations and frees were a visible part of its time).
    std::vector<wire::Descriptor> desc;
    std::vector<std::uint8_t> have_desc, src_ok;
    std::byte* get(std::size_t id, std::size_t n);
  };
  std::unique_ptr<ScratchSet> acquire_scratch();
  void release_scratch(std::unique_ptr<ScratchSet> s) noexcept;

 private:
  std::vector<std::unique_ptr<ScratchSet>> scratch_pool_;

 public:
  // ---- used by the operations ----
  std::uint32_t next_seq() noexcept { return ++seq_; }
  OpStats& stats() noexcept { return stats_; }
  std::vector<std::byte>& sparse_acc() noexcept { return sparse_acc_; }
  std::vector<std::uint64_t>& sparse_bits() noexcept { return sparse_bits_; }
};

}  // namespace netsparse::collectives
