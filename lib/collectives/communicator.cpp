// The operation driver: agreement, dispatch, deadline, failure detection (op.hpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "collectives/communicator.hpp"
#include "collectives/op.hpp"
#include "support/backoff.hpp"
#include "support/enum_names.hpp"

namespace netsparse::collectives {

constexpr auto kAlgorithmNames = std::to_array<support::EnumName<Algorithm>>({
    {Algorithm::kAuto, "auto"},
    {Algorithm::kSingleBuffer, "single_buffer"},
    {Algorithm::kMultiBuffer2, "multi_buffer_2"},
    {Algorithm::kMultiBuffer4, "multi_buffer_4"},
    {Algorithm::kTree, "tree"},
});

const char* to_string(Algorithm a) noexcept {
  return support::name_of<kAlgorithmNames>(a, "unknown algorithm");
}

Algorithm choose_algorithm(std::uint64_t bytes, bool reproducible) noexcept {
  if (reproducible) return Algorithm::kTree;
  if (bytes > (512u << 10)) return Algorithm::kSingleBuffer;
  if (bytes > (256u << 10)) return Algorithm::kMultiBuffer4;
  if (bytes > (128u << 10)) return Algorithm::kMultiBuffer2;
  return Algorithm::kTree;
}

constexpr auto kLocalErrorNames = std::to_array<support::EnumName<LocalError>>({
    {LocalError::kNone, "no error"},
    {LocalError::kNullBuffer, "a buffer is NULL"},
    {LocalError::kBadDataType, "unknown datatype"},
    {LocalError::kBadOp, "unknown reduction operator"},
    {LocalError::kNoUserFunction, "NS_OP_USER without a user function"},
    {LocalError::kOverlap, "send and receive buffers overlap without being equal"},
    {LocalError::kTooLarge, "the vector has too many blocks for the wire format"},
    {LocalError::kBadAlgorithm, "unknown algorithm"},
    {LocalError::kIndexOutOfRange, "an index is >= n"},
    {LocalError::kSparseOp, "sparse allreduce supports sum only (absent entries are 0)"},
    {LocalError::kNonCommutativeDesign, "a non-commutative user operator needs the tree algorithm"},
    {LocalError::kBadRoot, "root is not a rank of the communicator"},
    {LocalError::kHostFailed, "its host's step of a hierarchical operation failed"},
});

const char* to_string(LocalError e) noexcept {
  return support::name_of<kLocalErrorNames>(e, "unknown local error");
}

bool same_arguments(const wire::Descriptor& a, const wire::Descriptor& b) noexcept {
  return a.collective == b.collective && a.dtype == b.dtype && a.op == b.op && a.flags == b.flags &&
         a.user_op_id == b.user_op_id && a.packet_bytes == b.packet_bytes && a.count == b.count &&
         a.root == b.root;
}

namespace {
const char* collective_name(wire::Collective c) {
  switch (c) {
    case wire::Collective::kDense:
      return "allreduce";
    case wire::Collective::kSparse:
      return "sparse allreduce";
    case wire::Collective::kReduce:
      return "reduce";
    case wire::Collective::kBcast:
      return "broadcast";
    case wire::Collective::kBarrier:
      return "barrier";
    case wire::Collective::kAllgather:
      return "all-gather";
    case wire::Collective::kReduceScatter:
      return "reduce-scatter";
  }
  return "unknown collective";
}
}  // namespace

std::string describe(const wire::Descriptor& d) {
  const auto t = data_type_from_int(d.dtype);
  const auto o = reduce_op_from_int(d.op);
  std::string s = collective_name(d.collective);
  s += d.collective == wire::Collective::kSparse ? ", n " : ", count ";
  s += std::to_string(d.count);
  if (d.collective == wire::Collective::kReduce || d.collective == wire::Collective::kBcast)
    s += ", root " + std::to_string(d.root);
  s += std::string(", ") + (t ? to_string(*t) : "datatype " + std::to_string(d.dtype));
  s += std::string(", ") + (o ? to_string(*o) : "op " + std::to_string(d.op));
  if (d.op == static_cast<std::uint8_t>(ReduceOp::kUser))
    s += " (id " + std::to_string(d.user_op_id) + ")";
  if (d.flags & 1) s += ", reproducible";
  s += ", packet " + std::to_string(d.packet_bytes) + " B";
  return s;
}

Communicator::Op::Op(Communicator& c, const wire::Descriptor& m)
    : comm(c),
      tr(*c.transport_),
      P(c.size()),
      me(c.rank()),
      mine(m),
      args_ok(m.local_error == 0),
      scratch_set(c.acquire_scratch()),
      desc(scratch_set->desc),
      have_desc(scratch_set->have_desc),
      src_ok(scratch_set->src_ok) {
  desc.assign(static_cast<std::size_t>(P), wire::Descriptor{});
  have_desc.assign(static_cast<std::size_t>(P), 0);
  src_ok.assign(static_cast<std::size_t>(P), 0);
  desc[static_cast<std::size_t>(me)] = mine;
  have_desc[static_cast<std::size_t>(me)] = 1;
  src_ok[static_cast<std::size_t>(me)] = args_ok ? 1 : 0;
}

Communicator::Op::~Op() {
  comm.release_scratch(std::move(scratch_set));
}

void Communicator::Op::record_failure(Failure f, const std::string& why) {
  if (failed) return;
  failed = true;
  failure = f;
  failure_reason = why;
}

bool Communicator::Op::send(int dest, std::size_t bytes,
                            const std::function<void(std::byte*)>& fill) {
  if (pending_dest >= 0) return false;
  const std::span<std::byte> lent = tr.reserve(dest);
  if (!lent.empty()) {
    if (lent.size() >= bytes) {
      fill(lent.data());
      const transport::TxStatus s = tr.commit(dest, bytes);
      if (s == transport::TxStatus::kOk) {
        comm.count_sent(dest, bytes);
        return true;
      }
      record_failure(
          s == transport::TxStatus::kPeerFailed ? Failure::kPeerFailed : Failure::kProtocol,
          "sending to rank " + std::to_string(dest) + ": " + transport::to_string(s));
      return true;
    }
    tr.commit(dest, 0);  // too small to use: drop the reservation
  }
  std::vector<std::byte>& st = scratch_set->staging;
  if (st.size() < bytes) st.resize(bytes);
  fill(st.data());
  const transport::TxStatus s = tr.send(dest, std::span<const std::byte>(st.data(), bytes));
  if (s == transport::TxStatus::kOk || s == transport::TxStatus::kNoResource)
    comm.count_sent(dest, bytes);  // a staged packet is sent later, once
  if (s == transport::TxStatus::kOk) return true;
  if (s == transport::TxStatus::kNoResource) {  // keep it; run() retries it first
    pending_dest = dest;
    pending_bytes = bytes;
    return true;
  }
  record_failure(s == transport::TxStatus::kPeerFailed ? Failure::kPeerFailed : Failure::kProtocol,
                 "sending to rank " + std::to_string(dest) + ": " + transport::to_string(s));
  return true;
}

Communicator::Communicator(std::unique_ptr<transport::Transport> transport, Options options)
    : transport_(std::move(transport)), options_(options) {
  if (!transport_) throw std::invalid_argument("Communicator: no transport");
  host_of_.resize(static_cast<std::size_t>(transport_->size()));
  for (std::size_t r = 0; r < host_of_.size(); ++r) host_of_[r] = static_cast<int>(r);
  rack_of_ = host_of_;
  const std::size_t max = transport_->max_packet_bytes();
  packet_bytes_ =
      options_.packet_bytes == 0 ? std::min<std::size_t>(max, 65536) : options_.packet_bytes;
  if (packet_bytes_ > max)
    throw std::invalid_argument("Communicator: packet_bytes " + std::to_string(packet_bytes_) +
                                " exceeds the transport's largest packet " + std::to_string(max));
  if (packet_bytes_ < wire::kHeaderBytes + 64)
    throw std::invalid_argument("Communicator: packet_bytes " + std::to_string(packet_bytes_) +
                                " is too small (at least " +
                                std::to_string(wire::kHeaderBytes + 64) + ")");
  if (options_.timeout_ms <= 0) throw std::invalid_argument("Communicator: timeout_ms must be > 0");
}

Communicator::~Communicator() {
  // Outstanding operations first: each returns its scratch set to the pool (a member).
  active_.clear();
  requests_.clear();
}

int Communicator::rank() const noexcept {
  return transport_->rank();
}
int Communicator::size() const noexcept {
  return transport_->size();
}

std::byte* Communicator::ScratchSet::get(std::size_t id, std::size_t n) {
  if (arrays.size() <= id) {
    arrays.resize(id + 1);
    bytes.resize(id + 1, 0);
  }
  if (bytes[id] < n) {
    arrays[id].reset();
    arrays[id] = std::make_unique_for_overwrite<std::byte[]>(n);
    bytes[id] = n;
  }
  return arrays[id].get();
}

std::unique_ptr<Communicator::ScratchSet> Communicator::acquire_scratch() {
  if (scratch_pool_.empty()) return std::make_unique<ScratchSet>();
  std::unique_ptr<ScratchSet> s = std::move(scratch_pool_.back());
  scratch_pool_.pop_back();
  return s;
}

void Communicator::release_scratch(std::unique_ptr<ScratchSet> s) noexcept {
  if (!s) return;
  try {
    scratch_pool_.push_back(std::move(s));
  } catch (...) {  // no memory for the pool's slot: the set is simply freed
  }
}

namespace {
bool breaks(Failure f) {
  return f == Failure::kTimeout || f == Failure::kPeerFailed || f == Failure::kProtocol;
}
// Packets of an operation this far ahead of the last one started here cannot come from a peer
// that follows the protocol (a peer completes nothing without this rank's descriptor, so it is
// ahead by its outstanding operations at most).
constexpr std::uint32_t kMaxAhead = 1u << 16;
}  // namespace

void Communicator::route(int src, std::span<const std::byte> packet) {
  wire::Header h;
  const wire::DecodeError e = wire::decode_header(packet, &h);
  const auto protocol = [&](const std::string& why) {
    for (Op* op : active_) op->record_failure(Failure::kProtocol, why);
    if (broken_.empty()) broken_ = why;
  };
  if (e != wire::DecodeError::kOk || src < 0 || src >= size() || src == rank()) {
    protocol("malformed packet from rank " + std::to_string(src) + ": " + wire::to_string(e));
    return;
  }
  for (Op* op : active_)
    if (op->seq == h.seq) {
      dispatch(*op, src, h, packet);
      return;
    }
  const auto ahead = static_cast<std::int32_t>(h.seq - seq_);
  if (ahead > 0 && static_cast<std::uint32_t>(ahead) <= kMaxAhead) {
    stash_.push_back({h.seq, src, std::vector<std::byte>(packet.begin(), packet.end())});
  } else if (ahead > 0) {
    protocol("packet of operation " + std::to_string(h.seq) + " from rank " + std::to_string(src) +
             " while the last one started here is " + std::to_string(seq_));
  }  // else: a packet of an earlier operation that failed or finished here: dropped
}

void Communicator::dispatch(Op& op, int src, const wire::Header& h,
                            std::span<const std::byte> packet) {
  if (op.failed) return;
  const auto s = static_cast<std::size_t>(src);
  if (h.kind == wire::Kind::kDescriptor) {
    wire::Descriptor d;
    const wire::DecodeError de = wire::decode_descriptor(packet.subspan(wire::kHeaderBytes), &d);
    if (de != wire::DecodeError::kOk || op.have_desc[s]) {
      op.record_failure(Failure::kProtocol, "bad descriptor from rank " + std::to_string(src));
      return;
    }
    op.desc[s] = d;
    op.have_desc[s] = 1;
    op.src_ok[s] = op.args_ok && d.local_error == 0 && same_arguments(d, op.mine) ? 1 : 0;
    ++op.n_desc;
  } else if (!op.have_desc[s]) {
    op.record_failure(Failure::kProtocol,
                      "data before the descriptor from rank " + std::to_string(src));
  } else if (op.src_ok[s]) {
    op.on_data(src, h, packet);
  }
}

wire::Descriptor Communicator::begin_descriptor(wire::Collective kind, int dtype, int op) const {
  if (broken()) throw CollectiveError(Failure::kBroken, "communicator broken earlier: " + broken_);
  wire::Descriptor d;
  d.collective = kind;
  d.dtype = static_cast<std::uint8_t>(dtype);
  d.op = static_cast<std::uint8_t>(op);
  d.packet_bytes = static_cast<std::uint32_t>(packet_bytes_);
  return d;
}

void Communicator::start(Op& op) {
  op.seq = next_seq();
  op.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  active_.push_back(&op);
  // Packets of this operation that arrived before it started here, in arrival order.
  std::vector<Stashed> later;
  for (Stashed& s : stash_) {
    if (s.seq == op.seq) {
      wire::Header h;
      wire::decode_header(s.bytes, &h);  // checked when stashed
      dispatch(op, s.src, h, s.bytes);
    } else {
      later.push_back(std::move(s));
    }
  }
  stash_.swap(later);
}

// calloc: a large dense result is mapped lazily, its pages zero until written.
ByteBuffer::ByteBuffer(std::size_t bytes) : n_(bytes) {
  if (bytes == 0) return;
  void* p = std::calloc(bytes, 1);
  if (p == nullptr) throw std::bad_alloc();
  p_.reset(static_cast<std::byte*>(p));
}
void ByteBuffer::Free::operator()(std::byte* p) const noexcept {
  std::free(p);
}

void Communicator::set_hosts(std::vector<int> host_of_rank) {
  if (host_of_rank.size() != host_of_.size())
    throw std::invalid_argument("Communicator::set_hosts: " + std::to_string(host_of_rank.size()) +
                                " hosts for " + std::to_string(host_of_.size()) + " ranks");
  host_of_ = std::move(host_of_rank);
}

void Communicator::set_racks(std::vector<int> rack_of_rank) {
  if (rack_of_rank.size() != rack_of_.size())
    throw std::invalid_argument("Communicator::set_racks: " + std::to_string(rack_of_rank.size()) +
                                " racks for " + std::to_string(rack_of_.size()) + " ranks");
  rack_of_ = std::move(rack_of_rank);
}

bool Communicator::advance_sends(Op& op) {
  const int P = op.P;
  bool progress = false;
  // 1. the staged packet the transport refused last time
  if (op.pending_dest >= 0) {
    const transport::TxStatus s = transport_->send(
        op.pending_dest,
        std::span<const std::byte>(op.scratch_set->staging.data(), op.pending_bytes));
    if (s == transport::TxStatus::kOk) {
      op.pending_dest = -1;
      progress = true;
    } else if (s != transport::TxStatus::kNoResource) {
      op.record_failure(
          s == transport::TxStatus::kPeerFailed ? Failure::kPeerFailed : Failure::kProtocol,
          "sending to rank " + std::to_string(op.pending_dest) + ": " + transport::to_string(s));
    }
  }
  // 2. our descriptor, to every peer in staggered order (before any data to that peer)
  while (!op.failed && op.desc_sent < P - 1 && op.pending_dest < 0) {
    const int dest = (op.me + 1 + op.desc_sent) % P;
    const bool sent =
        op.send(dest, wire::kHeaderBytes + wire::kDescriptorBytes, [&](std::byte* out) {
          wire::Header h{wire::Kind::kDescriptor, 0, op.seq, 0, 0, 0, 0, 0};
          wire::encode_header(h, out);
          wire::encode_descriptor(op.mine, out + wire::kHeaderBytes);
        });
    if (!sent) break;
    ++op.desc_sent;
    progress = true;
  }
  // 3. data (the operation decides what it may send before the agreement)
  if (!op.failed && op.desc_sent == P - 1) progress |= op.pump();
  return progress;
}

bool Communicator::progress_once() {
  bool progress = false;
  for (Op* op : active_)
    if (!op->failed) progress |= advance_sends(*op);
  // 4. receive, every packet to its operation
  progress |= transport_->poll(
                  [this](const transport::ReceivedPacket& p) { route(p.src, p.bytes); }, 64) > 0;
  for (Op* op : active_) {
    if (op->failed) continue;
    // 5. the verdict, once every descriptor is in: the same on every rank
    // (only once ours went out everywhere: a peer must never miss it because we left early)
    const bool sent_all = op->desc_sent == op->P - 1 && op->pending_dest < 0;
    if (!op->agreed && op->n_desc == op->P && sent_all) {
      settle_arguments(*op);
      if (op->failed) continue;
      op->agreed = true;
      op->on_agreed();
      progress = true;
    }
    if (!op->failed && op->agreed && sent_all && op->finished()) op->done = true;
  }
  retire();
  return progress;
}

void Communicator::retire() {
  for (Op* op : active_)
    if (op->failed && breaks(op->failure)) {
      if (broken_.empty()) broken_ = op->failure_reason;
      for (Op* other : active_) other->record_failure(op->failure, op->failure_reason);
      break;
    }
  std::erase_if(active_, [](const Op* op) { return op->done || op->failed; });
}

void Communicator::drive(const std::function<bool()>& done) {
  // The first kEagerPolls idle rounds poll again at once, and only every 16th of them checks the
  // peers and deadlines (two clock reads and a look at each peer): a barrier's or a small
  // operation's answer is a shared-memory ring write away, a fraction of a microsecond, and a
  // back-off pause or a check between polls was most of ns_barrier's time (3.5x MPI_Barrier at
  // np 2). Past them the back-off spins, yields and sleeps as before, checking every round.
  constexpr std::uint64_t kEagerPolls = 64;
  support::Backoff backoff(16, 256);
  std::uint64_t iterations = 0, idle = 0;
  while (!done()) {
    const bool progress = progress_once();
    if (done()) break;
    ++iterations;
    idle = progress ? 0 : idle + 1;
    // 6. deadlines and the transport's failure detection: every 64th round whatever happens,
    // and while idle every 16th eager round, then every round
    if ((iterations & 63) == 0 || (idle > 0 && (idle > kEagerPolls || idle % 16 == 1)))
      check_peers_and_deadlines();
    if (progress) {
      backoff.reset();
    } else if (idle > kEagerPolls && backoff.pause()) {
      std::this_thread::sleep_for(backoff.sleep_for(std::chrono::microseconds(50)));
    }
  }
}

void Communicator::run(Op& op) {
  const std::uint64_t bytes_before = transport_->bytes_sent();
  const std::uint64_t inter_before = inter_host_total_, rack_before = inter_rack_total_;
  start(op);
  drive([&] { return op.done || op.failed; });
  stats_.bytes_sent = transport_->bytes_sent() - bytes_before;
  stats_.inter_host_bytes = inter_host_total_ - inter_before;
  stats_.inter_rack_bytes = inter_rack_total_ - rack_before;
  if (op.failed) throw CollectiveError(op.failure, op.failure_reason);
}

std::size_t Communicator::in_flight() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(requests_.begin(), requests_.end(),
                    [](const auto& r) { return !r.second->done && !r.second->failed; }));
}

std::uint32_t Communicator::start_dense(wire::Collective kind, const AllreduceArgs& a,
                                        bool send_now) {
  if (broken()) throw CollectiveError(Failure::kBroken, "communicator broken earlier: " + broken_);
  // The in-flight limit: progress the outstanding operations until one more may start.
  const auto limit = static_cast<std::size_t>(std::max(1, options_.max_in_flight));
  drive([&] { return in_flight() < limit; });
  Algorithm algo = Algorithm::kAuto;
  std::unique_ptr<Op> op = make_dense(kind, a, &algo);
  start(*op);
  const std::uint32_t id = op->seq;
  requests_.emplace(id, std::move(op));
  // One round now: without it nothing leaves before the caller's next call on the
  // communicator, and a prefetch started before a layer's compute would overlap nothing.
  if (send_now) progress_once();
  return id;
}

std::uint32_t Communicator::start_allreduce(const AllreduceArgs& a) {
  return start_dense(wire::Collective::kDense, a, /*send_now=*/false);
}

std::uint32_t Communicator::start_allgather(const void* send, void* recv, std::uint64_t count,
                                            int dtype) {
  AllreduceArgs a;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  return start_dense(wire::Collective::kAllgather, a, /*send_now=*/true);
}

std::uint32_t Communicator::start_reduce(const AllreduceArgs& a) {
  return start_dense(wire::Collective::kReduce, a, /*send_now=*/false);
}

std::uint32_t Communicator::start_broadcast(void* buffer, std::uint64_t count, int dtype, int root,
                                            LocalError refuse, bool star) {
  return start_dense(wire::Collective::kBcast,
                     broadcast_args(buffer, count, dtype, root, refuse, star), /*send_now=*/false);
}

bool Communicator::test(std::uint32_t id) {
  const auto it = requests_.find(id);
  if (it == requests_.end())
    throw std::invalid_argument("no outstanding operation " + std::to_string(id) +
                                " (completed, failed or never started)");
  Op& op = *it->second;
  if (!op.done && !op.failed) {
    progress_once();
    if (!op.done && !op.failed) check_peers_and_deadlines();
  }
  if (op.failed) {
    const CollectiveError e(op.failure, op.failure_reason);
    requests_.erase(it);
    throw e;
  }
  if (!op.done) return false;
  requests_.erase(it);
  return true;
}

void Communicator::wait(std::uint32_t id) {
  const auto it = requests_.find(id);
  if (it == requests_.end())
    throw std::invalid_argument("no outstanding operation " + std::to_string(id) +
                                " (completed, failed or never started)");
  Op& op = *it->second;
  drive([&] { return op.done || op.failed; });
  test(id);
}

void Communicator::settle_arguments(Op& op) {
  for (int r = 0; r < op.P; ++r) {
    const wire::Descriptor& d = op.desc[static_cast<std::size_t>(r)];
    if (d.local_error != 0) {
      const auto le = static_cast<LocalError>(d.local_error);
      op.record_failure(Failure::kInvalid, "rank " + std::to_string(r) + ": " + to_string(le));
      return;
    }
  }
  for (int r = 1; r < op.P; ++r) {
    if (!same_arguments(op.desc[0], op.desc[static_cast<std::size_t>(r)])) {
      op.record_failure(Failure::kMismatch, "ranks disagree: rank 0 has " + describe(op.desc[0]) +
                                                "; rank " + std::to_string(r) + " has " +
                                                describe(op.desc[static_cast<std::size_t>(r)]));
      return;
    }
  }
}

void Communicator::check_peers_and_deadlines() {
  if (active_.empty()) return;
  for (int p = 0; p < size(); ++p) {
    if (p != rank() && transport_->peer_failed(p)) {
      for (Op* op : active_)
        op->record_failure(Failure::kPeerFailed,
                           "rank " + std::to_string(p) +
                               " failed (reported by the transport) during operation " +
                               std::to_string(op->seq));
      retire();
      return;
    }
  }
  const auto now = std::chrono::steady_clock::now();
  for (Op* op : active_) {
    if (op->failed || now <= op->deadline) continue;
    std::string missing;
    for (int p = 0; p < op->P; ++p)
      if (!op->have_desc[static_cast<std::size_t>(p)]) {
        missing += ' ';
        missing += std::to_string(p);
      }
    std::string why = "operation " + std::to_string(op->seq) + " not done after ";
    why += std::to_string(options_.timeout_ms);
    why += " ms";
    if (missing.empty()) {
      why += " (every rank joined; a peer stopped mid-way)";
    } else {
      why += " (no descriptor from rank";
      why += missing;
      why += ")";
    }
    op->record_failure(Failure::kTimeout, why);
  }
  retire();
}

}  // namespace netsparse::collectives
