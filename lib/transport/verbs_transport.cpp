// Verbs transport: one RC queue pair to every peer, bootstrapped over MPI.
//
// Resources (all created once, nothing allocated per packet):
//   - one shared receive queue (SRQ) whose receive buffers are fixed slots of one registered
//     slab (slot size = max_packet_bytes); a receive is reposted right after its packet was
//     handed to the caller, in one chained ibv_post_srq_recv per poll batch;
//   - a send slab of registered buffers (free stack) for packets too large to inline;
//   - a read bounce slab: RDMA READ lands in a registered slot and is copied to the caller's
//     `local` at completion. Registering every caller buffer lazily would avoid the copy but costs
//     a registration (a system call and page pinning) per new buffer; for property-sized reads the
//     copy is far cheaper and always correct, whatever memory `local` lives in;
//   - one CQ for sends and reads, one for receives, both polled without blocking in batches.
//
// Packets travel as SEND_WITH_IMM whose immediate value is the sender's rank, so the receiver
// learns the source without looking the QP number up.
//
// Selective signalling: per QP, only every Nth send is IBV_SEND_SIGNALED (reads always are).
// Completions of one send queue are generated in order, so a signalled completion for WR s also
// retires every earlier unsignalled WR of that QP; each QP keeps a ring of its outstanding WRs
// (sequence -> send buffer / read slot) and releases them up to s. N is clamped so that (a) a
// full send queue always contains a signalled WR and (b) QPs that go idle with unsignalled
// sends can hold at most half of the send slab; below a low-water mark of free buffers every
// send is signalled.
//
// Failure: a completion whose status is not IBV_WC_SUCCESS (IBV_WC_RETRY_EXC_ERR when the peer
// died, then IBV_WC_WR_FLUSH_ERR for everything behind it; errored WRs complete even when
// unsignalled) marks the peer failed: later sends/reads to it return kPeerFailed, outstanding
// reads complete with ok=false and their buffers are released. The ack timeout and retry count
// come from VerbsOptions::peer_timeout_ms; RNR retries are unlimited (a slow receiver is
// backpressure, not a failure).
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi.hpp"
#include "transport/completion_ring.hpp"
#include "transport/transport_factory.hpp"
#include "transport/verbs_config.hpp"

namespace netsparse::transport {

namespace {

constexpr int kPeerShift = 40;  // send wr_id = peer << 40 | sequence number on that QP
constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kPeerShift) - 1;

std::uint64_t wr_id(int dest, std::uint64_t seq) {
  return (static_cast<std::uint64_t>(dest) << kPeerShift) | (seq & kSeqMask);
}

// Posts one signalled RDMA READ of `length` bytes from (remote_addr, rkey) into local memory
// registered with lkey; returns ibv_post_send's code.
int post_read(ibv_qp* qp, std::uint64_t id, void* local, std::uint32_t length, std::uint32_t lkey,
              std::uint64_t remote_addr, std::uint32_t rkey) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(local);
  sge.length = length;
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

std::string errno_text(int err) {
  return std::string(std::strerror(err));
}

// Every verbs object is owned by a unique_ptr whose deleter is the call that releases it.
template <class T, auto Release>
struct ReleaseWith {
  void operator()(T* p) const noexcept { Release(p); }
};
template <class T, auto Release>
using Owned = std::unique_ptr<T, ReleaseWith<T, Release>>;
using DeviceList = Owned<ibv_device*, ibv_free_device_list>;
using Context = Owned<ibv_context, ibv_close_device>;
using Pd = Owned<ibv_pd, ibv_dealloc_pd>;
using Cq = Owned<ibv_cq, ibv_destroy_cq>;
using Srq = Owned<ibv_srq, ibv_destroy_srq>;
using Mr = Owned<ibv_mr, ibv_dereg_mr>;
using Qp = Owned<ibv_qp, ibv_destroy_qp>;
void free_bytes(std::byte* p) noexcept {
  std::free(p);
}
using Slab = Owned<std::byte, free_bytes>;

// ibv_reg_mr is a macro that ORs `access` with another enum type; passing an int keeps that
// expression well-formed C++20 (clang warns about enum-enum arithmetic otherwise).
ibv_mr* register_region(ibv_pd* pd, void* addr, std::size_t length, int access) {
  return ibv_reg_mr(pd, addr, length, access);
}

Slab allocate_slab(std::size_t bytes) {
  const std::size_t rounded = std::max<std::size_t>((bytes + 4095) / 4096 * 4096, 4096);
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return Slab(static_cast<std::byte*>(p));
}

// What one rank tells a peer about the QP it created for that peer.
struct ConnInfo {
  std::uint32_t qpn;
  std::uint32_t psn;
  std::uint32_t max_packet;  // receive buffer size: must be the same everywhere
  std::uint32_t flush_rkey;
  std::uint64_t flush_addr;
  std::uint16_t lid;
  std::uint8_t mtu;  // enum ibv_mtu of the sender's port
  std::uint8_t pad;
  std::uint8_t gid[16];
};

struct RegionInfo {
  std::uint64_t addr;
  std::uint64_t bytes;
  std::uint32_t rkey;
  std::int32_t ok;
};

// The device, port and GID chosen on this rank.
struct LocalPort {
  Context context;
  std::string device_name;
  int port = 0;
  ibv_port_attr port_attr{};
  ibv_device_attr device_attr{};
  int gid_index = 0;
  ibv_gid gid{};
};

bool port_active(ibv_context* ctx, int port, ibv_port_attr* out) {
  ibv_port_attr attr{};
  if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &attr) != 0) return false;
  if (out != nullptr) *out = attr;
  return attr.state == IBV_PORT_ACTIVE;
}

int pick_gid_index(ibv_context* ctx, int port, const ibv_port_attr& attr) {
  if (attr.gid_tbl_len <= 0) return 0;
  // One call for the whole table (an ioctl on current kernels) instead of one sysfs read per
  // index, which is very slow under emulation.
  std::vector<ibv_gid_entry> raw(static_cast<std::size_t>(attr.gid_tbl_len));
  const ssize_t n = ibv_query_gid_table(ctx, raw.data(), raw.size(), 0);
  if (n <= 0) return 0;
  std::vector<GidEntry> entries;
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = raw[static_cast<std::size_t>(i)];
    if (static_cast<int>(e.port_num) != port) continue;
    GidEntry g;
    g.index = static_cast<int>(e.gid_index);
    std::memcpy(g.gid.data(), e.gid.raw, 16);
    g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::kRoceV2
             : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                  : GidType::kIb;
    entries.push_back(g);
  }
  return choose_gid_index(entries);
}

// Opens the configured (or first usable) device and port. Throws with a clear reason.
LocalPort open_local_port(const VerbsOptions& options) {
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (!list || count == 0) {
    throw std::runtime_error(no_rdma_device_message(
        !list ? "ibv_get_device_list failed: " + errno_text(errno)
              : "ibv_get_device_list found no device; /dev/infiniband/uverbs* missing?"));
  }
  std::string seen;
  for (int d = 0; d < count; ++d) {
    ibv_device* dev = list.get()[d];
    const std::string name = ibv_get_device_name(dev);
    seen += (seen.empty() ? "" : ", ") + name;
    if (!options.device.empty() && name != options.device) continue;
    Context ctx(ibv_open_device(dev));
    if (!ctx) {
      if (!options.device.empty()) {
        throw std::runtime_error("netsparse verbs transport: ibv_open_device(" + name +
                                 ") failed: " + errno_text(errno));
      }
      continue;
    }
    ibv_device_attr dattr{};
    if (ibv_query_device(ctx.get(), &dattr) != 0) continue;
    for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
      if (options.port != 0 && p != options.port) continue;
      ibv_port_attr pattr{};
      if (!port_active(ctx.get(), p, &pattr)) continue;
      LocalPort local;
      local.device_name = name;
      local.port = p;
      local.port_attr = pattr;
      local.device_attr = dattr;
      local.gid_index =
          options.gid_index >= 0 ? options.gid_index : pick_gid_index(ctx.get(), p, pattr);
      if (ibv_query_gid(ctx.get(), static_cast<std::uint8_t>(p), local.gid_index, &local.gid) !=
          0) {
        throw std::runtime_error("netsparse verbs transport: GID index " +
                                 std::to_string(local.gid_index) + " of " + name + " port " +
                                 std::to_string(p) + " cannot be read (NETSPARSE_IB_GID_INDEX?)");
      }
      local.context = std::move(ctx);
      return local;
    }
  }
  if (!options.device.empty() && seen.find(options.device) == std::string::npos) {
    throw std::runtime_error(no_rdma_device_message("device '" + options.device +
                                                    "' (NETSPARSE_IB_DEVICE) not among: " + seen));
  }
  throw std::runtime_error(no_rdma_device_message(
      "found " + seen + " but no ACTIVE port" +
      (options.port != 0 ? " numbered " + std::to_string(options.port) : std::string())));
}

class VerbsTransport final : public Transport {
 public:
  VerbsTransport(MPI_Comm user_comm, const VerbsOptions& options) : options_(options) {
    options_.validate();
    if (MPI_Comm_dup(user_comm, &comm_) != MPI_SUCCESS) {
      throw std::runtime_error("netsparse verbs transport: MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    try {
      // Every stage ends in an agreement so that a rank failing locally (no device, QP creation
      // refused) makes every rank throw instead of leaving the others in a collective.
      std::string error;
      try {
        create_local_resources();
      } catch (const std::exception& e) {
        error = e.what();
      }
      agree(error);
      connect_all();
      post_all_receives();
      agree(last_error_);  // receives must be posted everywhere before anyone sends
      MPI_Barrier(comm_);
    } catch (...) {
      release_resources();
      MPI_Comm_free(&comm_);
      throw;
    }
  }

  ~VerbsTransport() override { shutdown(); }

  TransportKind kind() const noexcept override { return TransportKind::kVerbs; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_packet_bytes() const noexcept override { return options_.max_packet_bytes; }
  std::size_t max_read_bytes() const noexcept override { return options_.read_slot_bytes; }

  TxStatus send(int dest, std::span<const std::byte> packet) override {
    if (dest < 0 || dest >= size_ || packet.empty() || packet.size() > options_.max_packet_bytes) {
      return TxStatus::kError;
    }
    if (dest == rank_) return send_to_self(packet);
    Peer& peer = peers_[static_cast<std::size_t>(dest)];
    if (const TxStatus room = send_queue_room(peer); room != TxStatus::kOk) return room;
    const bool inline_data = packet.size() <= max_inline_;
    int buffer = -1;
    ibv_sge sge{};
    sge.length = static_cast<std::uint32_t>(packet.size());
    if (inline_data) {
      sge.addr = reinterpret_cast<std::uintptr_t>(packet.data());  // copied by the post itself
    } else {
      if (send_free_.empty()) {
        poll_send_cq();
        if (send_free_.empty()) return TxStatus::kNoResource;
      }
      buffer = send_free_.back();
      send_free_.pop_back();
      std::byte* dst =
          send_slab_.get() + static_cast<std::size_t>(buffer) * options_.max_packet_bytes;
      std::memcpy(dst, packet.data(), packet.size());
      sge.addr = reinterpret_cast<std::uintptr_t>(dst);
      sge.lkey = send_mr_->lkey;
    }
    const std::uint64_t seq = peer.posted;
    const bool signaled = peer.unsignaled + 1 >= signal_interval_ ||
                          send_free_.size() < send_low_water_ ||
                          peer.posted - peer.completed + 1 >= sq_depth_;
    ibv_send_wr wr{};
    wr.wr_id = wr_id(dest, seq);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = (signaled ? unsigned{IBV_SEND_SIGNALED} : 0u) |
                    (inline_data ? unsigned{IBV_SEND_INLINE} : 0u);
    wr.imm_data = htonl(static_cast<std::uint32_t>(rank_));
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(peer.qp.get(), &wr, &bad);
    if (rc != 0) {
      if (buffer >= 0) send_free_.push_back(buffer);
      if (rc == ENOMEM) return TxStatus::kNoResource;
      mark_failed(dest, "ibv_post_send: " + errno_text(rc));
      return TxStatus::kPeerFailed;
    }
    peer.ring[seq % sq_depth_] = SqEntry{buffer, -1};
    peer.unsignaled = signaled ? 0 : peer.unsignaled + 1;
    ++peer.posted;
    bytes_sent_ += packet.size();
    return TxStatus::kOk;
  }

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override {
    int delivered = 0;
    while (delivered < max_packets && self_count_ > 0) {
      const SelfPacket& p = self_queue_[self_head_];
      handler(ReceivedPacket{
          rank_, std::span<const std::byte>(
                     self_slab_.data() + self_head_ * options_.max_packet_bytes, p.bytes)});
      self_head_ = (self_head_ + 1) % self_queue_.size();
      --self_count_;
      ++delivered;
    }
    poll_send_cq();
    while (delivered < max_packets) {
      const int want = std::min(max_packets - delivered, options_.cq_batch);
      const int n = ibv_poll_cq(recv_cq_.get(), want, wcs_.data());
      if (n <= 0) break;
      int repost = 0;
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs_[static_cast<std::size_t>(i)];
        const auto slot = static_cast<std::size_t>(wc.wr_id);
        if (wc.status == IBV_WC_SUCCESS) {
          const int src = static_cast<int>(ntohl(wc.imm_data));
          handler(ReceivedPacket{
              src, std::span<const std::byte>(recv_slab_.get() + slot * options_.max_packet_bytes,
                                              wc.byte_len)});
          ++delivered;
        } else {
          // A flushed receive only says that its QP went to the error state (the send side
          // reports why); the buffer belongs to the shared queue and is reposted either way.
          mark_failed(peer_of_qpn(wc.qp_num),
                      std::string("receive completion: ") + ibv_wc_status_str(wc.status));
        }
        add_recv(repost++, slot);
      }
      post_recvs(repost);
      if (n < want) break;
    }
    return delivered;
  }

  int register_memory(void* base, std::size_t bytes) override {
    if (base == nullptr && bytes != 0) {
      throw std::invalid_argument("netsparse verbs transport: register_memory(nullptr, " +
                                  std::to_string(bytes) + ")");
    }
    std::size_t id = 0;
    while (id < regions_.size() && regions_[id].used) ++id;
    if (id == regions_.size()) regions_.emplace_back();
    Region& region = regions_[id];
    RegionInfo mine{reinterpret_cast<std::uintptr_t>(base), bytes, 0, 1};
    std::string error;
    if (bytes > 0) {
      region.mr.reset(register_region(pd_.get(), base, bytes, IBV_ACCESS_REMOTE_READ));
      if (!region.mr) {
        mine.ok = 0;
        error = "ibv_reg_mr(" + std::to_string(bytes) + " bytes) failed: " + errno_text(errno);
      } else {
        mine.rkey = region.mr->rkey;
      }
    }
    region.peers.assign(static_cast<std::size_t>(size_), RegionInfo{});
    if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, region.peers.data(), sizeof mine, MPI_BYTE,
                      comm_) != MPI_SUCCESS) {
      region.mr.reset();
      throw std::runtime_error("netsparse verbs transport: MPI_Allgather (register_memory)");
    }
    for (int r = 0; r < size_; ++r) {
      if (!region.peers[static_cast<std::size_t>(r)].ok) {
        region.mr.reset();
        throw std::runtime_error("netsparse verbs transport: register_memory failed on rank " +
                                 std::to_string(r) + (error.empty() ? "" : ": " + error));
      }
    }
    region.base = static_cast<std::byte*>(base);
    region.used = true;
    return static_cast<int>(id);
  }

  void deregister_memory(int id) override {
    if (id < 0 || static_cast<std::size_t>(id) >= regions_.size() ||
        !regions_[static_cast<std::size_t>(id)].used) {
      throw std::invalid_argument(
          "netsparse verbs transport: deregister_memory of unknown region " + std::to_string(id));
    }
    // Our own reads from this region on peers must land before the peers deregister it.
    while (reads_to_region(id) > 0) poll_send_cq();
    barrier();
    Region& region = regions_[static_cast<std::size_t>(id)];
    region.mr.reset();
    region.peers.clear();
    region.used = false;
  }

  TxStatus read(int dest, int id, std::uint64_t offset, void* local, std::size_t bytes,
                std::uint64_t cookie) override {
    if (dest < 0 || dest >= size_ || id < 0 || static_cast<std::size_t>(id) >= regions_.size() ||
        !regions_[static_cast<std::size_t>(id)].used || (local == nullptr && bytes != 0) ||
        bytes > options_.read_slot_bytes) {
      return TxStatus::kError;
    }
    const Region& region = regions_[static_cast<std::size_t>(id)];
    const RegionInfo& remote = region.peers[static_cast<std::size_t>(dest)];
    // Checked here: an out-of-range RDMA READ would be a remote access error that moves the QP
    // to the error state and kills the whole connection.
    if (offset > remote.bytes || bytes > remote.bytes - offset) return TxStatus::kError;
    if (reads_unreturned_ >= static_cast<std::size_t>(options_.max_outstanding_reads)) {
      poll_send_cq();
      if (reads_unreturned_ >= static_cast<std::size_t>(options_.max_outstanding_reads)) {
        return TxStatus::kNoResource;
      }
    }
    if (dest == rank_ || bytes == 0) {
      if (bytes != 0) std::memcpy(local, region.base + offset, bytes);
      ++reads_unreturned_;
      push_read_completion(cookie, true);
      return TxStatus::kOk;
    }
    Peer& peer = peers_[static_cast<std::size_t>(dest)];
    if (const TxStatus room = send_queue_room(peer); room != TxStatus::kOk) return room;
    const int slot = read_free_.back();
    const std::uint64_t seq = peer.posted;
    // Every read is signalled: it needs its own completion (cookie).
    const int rc = post_read(
        peer.qp.get(), wr_id(dest, seq),
        bounce_slab_.get() + static_cast<std::size_t>(slot) * options_.read_slot_bytes,
        static_cast<std::uint32_t>(bytes), bounce_mr_->lkey, remote.addr + offset, remote.rkey);
    if (rc != 0) {
      if (rc == ENOMEM) return TxStatus::kNoResource;
      mark_failed(dest, "ibv_post_send (read): " + errno_text(rc));
      return TxStatus::kPeerFailed;
    }
    read_free_.pop_back();
    read_slots_[static_cast<std::size_t>(slot)] = ReadSlot{local, bytes, cookie, id};
    peer.ring[seq % sq_depth_] = SqEntry{-1, slot};
    peer.unsignaled = 0;
    ++peer.posted;
    ++reads_unreturned_;
    return TxStatus::kOk;
  }

  int poll_reads(ReadCompletion* out, int max) override {
    poll_send_cq();
    const int n = done_.pop(out, max);
    reads_unreturned_ -= static_cast<std::size_t>(n);
    return n;
  }

  void allgather(const void* mine, std::size_t bytes, void* all) override {
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Iallgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes),
                       MPI_BYTE, comm_, &request) != MPI_SUCCESS) {
      throw std::runtime_error("netsparse verbs transport: MPI_Iallgather failed");
    }
    wait_draining(request, "allgather");
  }

  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Ibarrier(comm_, &request) != MPI_SUCCESS) {
      throw std::runtime_error("netsparse verbs transport: MPI_Ibarrier failed");
    }
    wait_draining(request, "barrier");
  }

  // Completes a nonblocking collective while draining the send CQ, so sends this rank still
  // owes its peers complete and they can reach the collective too.
  void wait_draining(MPI_Request& request, const char* what) {
    int done = 0;
    while (!done) {
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        throw std::runtime_error(std::string("netsparse verbs transport: ") + what +
                                 " failed (a peer failed?)");
      }
      if (!done) poll_send_cq();
    }
  }

  void note_peer_failed(int peer) override {
    if (peer >= 0 && peer < size_ && peer != rank_)
      peers_[static_cast<std::size_t>(peer)].failed = true;
  }

  bool peer_failed(int peer) const noexcept override {
    return peer >= 0 && peer < size_ && peer != rank_ &&
           peers_[static_cast<std::size_t>(peer)].failed;
  }

  std::uint64_t bytes_sent() const noexcept override { return bytes_sent_; }

 private:
  struct SqEntry {
    int send_buffer = -1;  // released when the WR is retired
    int read_slot = -1;    // completed when the WR is retired
  };
  struct Peer {
    Qp qp;
    std::uint64_t posted = 0;     // sequence number of the next WR
    std::uint64_t completed = 0;  // WRs with a smaller sequence number are retired
    int unsignaled = 0;           // unsignalled WRs since the last signalled one
    bool failed = false;
    std::vector<SqEntry> ring;     // outstanding WRs, indexed by sequence % depth
    std::uint64_t flush_addr = 0;  // the peer's flush word (see post_flush)
    std::uint32_t flush_rkey = 0;
  };
  struct ReadSlot {
    void* local = nullptr;
    std::size_t bytes = 0;
    std::uint64_t cookie = 0;
    int region = -1;
  };
  struct Region {
    Mr mr;
    std::byte* base = nullptr;
    std::vector<RegionInfo> peers;
    bool used = false;
  };
  struct SelfPacket {
    std::size_t bytes = 0;
  };

  // Whether the peer's send queue takes one more work request (the send CQ is polled once when
  // it is full): kOk, kNoResource, or kPeerFailed.
  TxStatus send_queue_room(const Peer& peer) {
    if (peer.failed) return TxStatus::kPeerFailed;
    if (peer.posted - peer.completed < sq_depth_) return TxStatus::kOk;
    poll_send_cq();
    if (peer.failed) return TxStatus::kPeerFailed;
    return peer.posted - peer.completed < sq_depth_ ? TxStatus::kOk : TxStatus::kNoResource;
  }

  // Throws on every rank when any rank reports a local error (empty = fine): its own error on
  // a failing rank, the first failing rank's on the others.
  void agree(const std::string& local_error) {
    agreement::Agreement mine;
    if (!local_error.empty()) mine.refuse(1, local_error);
    agreement::Verdict verdict;
    try {
      verdict = agreement::settle_over_mpi(mine, comm_);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("netsparse verbs transport: bootstrap agreement: ") +
                               e.what());
    }
    if (mine.refused()) throw std::runtime_error(local_error);
    if (!verdict.ok()) {
      throw std::runtime_error("netsparse verbs transport: setup failed on " + verdict.reason);
    }
  }

  void create_local_resources() {
    port_ = open_local_port(options_);
    ibv_context* ctx = port_.context.get();
    const ibv_device_attr& dev = port_.device_attr;
    const int peers = std::max(size_ - 1, 1);

    sq_depth_ = static_cast<std::uint64_t>(std::min(options_.send_queue_depth, dev.max_qp_wr));
    if (sq_depth_ < 2) throw std::runtime_error("netsparse verbs transport: device max_qp_wr < 2");
    // See the header comment: a full send queue must hold a signalled WR, and idle QPs may pin
    // at most half of the send slab with unsignalled sends.
    signal_interval_ =
        std::clamp(options_.signal_every, 1,
                   static_cast<int>(std::min<std::uint64_t>(
                       sq_depth_ / 2, std::max(1, options_.send_buffers / (2 * peers)))));
    signal_interval_ = std::max(signal_interval_, 1);
    send_low_water_ = static_cast<std::size_t>(std::max(1, options_.send_buffers / 8));

    pd_.reset(ibv_alloc_pd(ctx));
    if (!pd_)
      throw std::runtime_error("netsparse verbs transport: ibv_alloc_pd: " + errno_text(errno));

    const int send_cqe =
        static_cast<int>(std::min<std::uint64_t>(sq_depth_ * static_cast<std::uint64_t>(peers) + 1,
                                                 static_cast<std::uint64_t>(dev.max_cqe)));
    const int recv_wrs = std::min(options_.recv_buffers,
                                  dev.max_srq_wr > 0 ? dev.max_srq_wr : options_.recv_buffers);
    recv_count_ = recv_wrs;
    send_cq_.reset(ibv_create_cq(ctx, send_cqe, nullptr, nullptr, 0));
    recv_cq_.reset(ibv_create_cq(ctx, std::min(recv_wrs + 1, dev.max_cqe), nullptr, nullptr, 0));
    if (!send_cq_ || !recv_cq_) {
      throw std::runtime_error("netsparse verbs transport: ibv_create_cq: " + errno_text(errno));
    }
    ibv_srq_init_attr srq_attr{};
    srq_attr.attr.max_wr = static_cast<std::uint32_t>(recv_wrs);
    srq_attr.attr.max_sge = 1;
    srq_.reset(ibv_create_srq(pd_.get(), &srq_attr));
    if (!srq_)
      throw std::runtime_error("netsparse verbs transport: ibv_create_srq: " + errno_text(errno));

    const std::size_t pkt = options_.max_packet_bytes;
    recv_slab_ = allocate_slab(static_cast<std::size_t>(recv_wrs) * pkt);
    send_slab_ = allocate_slab(static_cast<std::size_t>(options_.send_buffers) * pkt);
    bounce_slab_ = allocate_slab(static_cast<std::size_t>(options_.max_outstanding_reads) *
                                 options_.read_slot_bytes);
    recv_mr_.reset(register_region(pd_.get(), recv_slab_.get(),
                                   static_cast<std::size_t>(recv_wrs) * pkt,
                                   IBV_ACCESS_LOCAL_WRITE));
    send_mr_.reset(register_region(pd_.get(), send_slab_.get(),
                                   static_cast<std::size_t>(options_.send_buffers) * pkt, 0));
    bounce_mr_.reset(register_region(
        pd_.get(), bounce_slab_.get(),
        static_cast<std::size_t>(options_.max_outstanding_reads) * options_.read_slot_bytes,
        IBV_ACCESS_LOCAL_WRITE));
    flush_slab_ = allocate_slab(64);
    flush_mr_.reset(register_region(pd_.get(), flush_slab_.get(), 64,
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
    if (!recv_mr_ || !send_mr_ || !bounce_mr_ || !flush_mr_) {
      throw std::runtime_error("netsparse verbs transport: ibv_reg_mr of the slabs: " +
                               errno_text(errno));
    }
    send_free_.reserve(static_cast<std::size_t>(options_.send_buffers));
    for (int i = options_.send_buffers - 1; i >= 0; --i) send_free_.push_back(i);
    read_slots_.assign(static_cast<std::size_t>(options_.max_outstanding_reads), ReadSlot{});
    read_free_.reserve(read_slots_.size());
    for (int i = options_.max_outstanding_reads - 1; i >= 0; --i) read_free_.push_back(i);
    done_.resize(read_slots_.size());
    wcs_.resize(static_cast<std::size_t>(options_.cq_batch));
    recv_wrs_.resize(static_cast<std::size_t>(options_.cq_batch));
    recv_sges_.resize(static_cast<std::size_t>(options_.cq_batch));
    self_queue_.assign(64, SelfPacket{});
    self_slab_.resize(self_queue_.size() * pkt);

    peers_.resize(static_cast<std::size_t>(size_));
    max_inline_ = size_ > 1 ? SIZE_MAX : 0;  // lowered to what every QP granted
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      Peer& peer = peers_[static_cast<std::size_t>(r)];
      peer.ring.assign(sq_depth_, SqEntry{});
      ibv_qp_init_attr attr{};
      attr.send_cq = send_cq_.get();
      attr.recv_cq = recv_cq_.get();
      attr.srq = srq_.get();
      attr.cap.max_send_wr = static_cast<std::uint32_t>(sq_depth_);
      attr.cap.max_send_sge = 1;
      attr.cap.max_recv_sge = 1;
      attr.cap.max_inline_data = 64;
      attr.qp_type = IBV_QPT_RC;
      attr.sq_sig_all = 0;
      peer.qp.reset(ibv_create_qp(pd_.get(), &attr));
      if (!peer.qp) {  // some providers refuse inline data: retry without
        attr.cap.max_inline_data = 0;
        peer.qp.reset(ibv_create_qp(pd_.get(), &attr));
      }
      if (!peer.qp) {
        throw std::runtime_error("netsparse verbs transport: ibv_create_qp for peer " +
                                 std::to_string(r) + ": " + errno_text(errno));
      }
      max_inline_ = std::min<std::size_t>(max_inline_, attr.cap.max_inline_data);
      ibv_qp_attr init{};
      init.qp_state = IBV_QPS_INIT;
      init.pkey_index = 0;
      init.port_num = static_cast<std::uint8_t>(port_.port);
      init.qp_access_flags = IBV_ACCESS_REMOTE_READ;
      const int rc =
          ibv_modify_qp(peer.qp.get(), &init,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      if (rc != 0) {
        throw std::runtime_error("netsparse verbs transport: modify QP to INIT: " + errno_text(rc));
      }
    }
  }

  void connect_all() {
    std::random_device random;
    std::vector<ConnInfo> out(static_cast<std::size_t>(size_)), in(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      ConnInfo& c = out[static_cast<std::size_t>(r)];
      std::memset(&c, 0, sizeof c);
      if (r == rank_) continue;
      c.qpn = peers_[static_cast<std::size_t>(r)].qp->qp_num;
      c.psn = random() & 0xffffffu;
      c.lid = port_.port_attr.lid;
      c.mtu = static_cast<std::uint8_t>(port_.port_attr.active_mtu);
      c.max_packet = static_cast<std::uint32_t>(options_.max_packet_bytes);
      c.flush_addr = reinterpret_cast<std::uintptr_t>(flush_slab_.get());
      c.flush_rkey = flush_mr_->rkey;
      std::memcpy(c.gid, port_.gid.raw, 16);
    }
    if (MPI_Alltoall(out.data(), sizeof(ConnInfo), MPI_BYTE, in.data(), sizeof(ConnInfo), MPI_BYTE,
                     comm_) != MPI_SUCCESS) {
      throw std::runtime_error("netsparse verbs transport: MPI_Alltoall (QP exchange) failed");
    }
    const bool use_grh = port_.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    const int timeout = rc_timeout_exponent(options_.peer_timeout_ms, options_.retry_count);
    const std::uint8_t rd_atom = static_cast<std::uint8_t>(std::clamp(
        std::min(port_.device_attr.max_qp_rd_atom, port_.device_attr.max_qp_init_rd_atom), 1, 16));
    std::string error;
    for (int r = 0; r < size_ && error.empty(); ++r) {
      if (r == rank_) continue;
      const ConnInfo& remote = in[static_cast<std::size_t>(r)];
      peers_[static_cast<std::size_t>(r)].flush_addr = remote.flush_addr;
      peers_[static_cast<std::size_t>(r)].flush_rkey = remote.flush_rkey;
      if (remote.max_packet != options_.max_packet_bytes) {
        // A packet larger than the receiver's buffers would break the connection on arrival.
        error = "netsparse verbs transport: max_packet_bytes differs between ranks (" +
                std::to_string(options_.max_packet_bytes) + " here, " +
                std::to_string(remote.max_packet) + " on rank " + std::to_string(r) +
                "); set the same NETSPARSE_IB_MAX_PACKET everywhere";
        break;
      }
      ibv_qp* qp = peers_[static_cast<std::size_t>(r)].qp.get();
      ibv_qp_attr rtr{};
      rtr.qp_state = IBV_QPS_RTR;
      rtr.path_mtu = static_cast<ibv_mtu>(std::min<int>(
          port_.port_attr.active_mtu, remote.mtu == 0 ? int{IBV_MTU_1024} : int{remote.mtu}));
      rtr.dest_qp_num = remote.qpn;
      rtr.rq_psn = remote.psn;
      rtr.max_dest_rd_atomic = rd_atom;
      rtr.min_rnr_timer = 12;  // 0.64 ms before an RNR-NAKed send is retried
      rtr.ah_attr.dlid = remote.lid;
      rtr.ah_attr.sl = 0;
      rtr.ah_attr.port_num = static_cast<std::uint8_t>(port_.port);
      if (use_grh) {  // RoCE: addressing is by GID, which needs the global route header
        rtr.ah_attr.is_global = 1;
        std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid, 16);
        rtr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(port_.gid_index);
        rtr.ah_attr.grh.hop_limit = 64;
      }
      int rc = ibv_modify_qp(qp, &rtr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      if (rc != 0) {
        std::array<std::uint8_t, 16> g{};
        std::memcpy(g.data(), remote.gid, 16);
        error = "netsparse verbs transport: modify QP to RTR for peer " + std::to_string(r) +
                " (gid " + gid_to_string(g) + ", local gid index " +
                std::to_string(port_.gid_index) + "): " + errno_text(rc);
        break;
      }
      ibv_qp_attr rts{};
      rts.qp_state = IBV_QPS_RTS;
      rts.timeout = static_cast<std::uint8_t>(timeout);
      rts.retry_cnt = static_cast<std::uint8_t>(options_.retry_count);
      rts.rnr_retry = 7;  // unlimited: a receiver out of buffers is backpressure, not failure
      rts.sq_psn = out[static_cast<std::size_t>(r)].psn;
      rts.max_rd_atomic = rd_atom;
      rc = ibv_modify_qp(qp, &rts,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      if (rc != 0) {
        error = "netsparse verbs transport: modify QP to RTS for peer " + std::to_string(r) + ": " +
                errno_text(rc);
      }
    }
    agree(error);
  }

  void post_all_receives() {
    int pending = 0;
    for (int slot = 0; slot < recv_count_; ++slot) {
      add_recv(pending++, static_cast<std::size_t>(slot));
      if (pending == options_.cq_batch) {
        post_recvs(pending);
        pending = 0;
      }
    }
    post_recvs(pending);
  }

  void add_recv(int k, std::size_t slot) {
    ibv_sge& sge = recv_sges_[static_cast<std::size_t>(k)];
    sge.addr =
        reinterpret_cast<std::uintptr_t>(recv_slab_.get() + slot * options_.max_packet_bytes);
    sge.length = static_cast<std::uint32_t>(options_.max_packet_bytes);
    sge.lkey = recv_mr_->lkey;
    ibv_recv_wr& wr = recv_wrs_[static_cast<std::size_t>(k)];
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.next = nullptr;
    if (k > 0) recv_wrs_[static_cast<std::size_t>(k - 1)].next = &wr;
  }

  void post_recvs(int count) {
    if (count == 0) return;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_srq_recv(srq_.get(), recv_wrs_.data(), &bad);
    if (rc != 0) {
      // Only on a broken device; the ring shrinks, which shows up as backpressure.
      last_error_ = "ibv_post_srq_recv: " + errno_text(rc);
    }
  }

  void poll_send_cq() {
    for (int round = 0; round < 4; ++round) {
      const int n = ibv_poll_cq(send_cq_.get(), options_.cq_batch, wcs_.data());
      for (int i = 0; i < n; ++i) retire(wcs_[static_cast<std::size_t>(i)]);
      if (n < options_.cq_batch) break;
    }
  }

  // A send-queue completion for WR `seq` of a peer retires every WR of that QP up to `seq`.
  void retire(const ibv_wc& wc) {
    const int dest = static_cast<int>(wc.wr_id >> kPeerShift);
    if (dest < 0 || dest >= size_ || dest == rank_) return;
    Peer& peer = peers_[static_cast<std::size_t>(dest)];
    const bool ok = wc.status == IBV_WC_SUCCESS;
    if (!ok) mark_failed(dest, std::string("send completion: ") + ibv_wc_status_str(wc.status));
    // Recover the full sequence number from its low 40 bits (never 2^40 WRs in flight).
    const std::uint64_t low = wc.wr_id & kSeqMask;
    const std::uint64_t seq = (peer.completed & ~kSeqMask) | low;
    const std::uint64_t last = seq < peer.completed ? seq + (kSeqMask + 1) : seq;
    if (last >= peer.posted) return;  // stale or impossible: ignore
    for (; peer.completed <= last; ++peer.completed) {
      SqEntry& e = peer.ring[peer.completed % sq_depth_];
      if (e.send_buffer >= 0) send_free_.push_back(e.send_buffer);
      if (e.read_slot >= 0) finish_read(e.read_slot, peer.completed == last ? ok : true);
      e = SqEntry{};
    }
  }

  void finish_read(int slot, bool ok) {
    ReadSlot& s = read_slots_[static_cast<std::size_t>(slot)];
    if (ok && s.bytes != 0) {
      std::memcpy(s.local,
                  bounce_slab_.get() + static_cast<std::size_t>(slot) * options_.read_slot_bytes,
                  s.bytes);
    }
    push_read_completion(s.cookie, ok);
    s = ReadSlot{};
    read_free_.push_back(slot);
  }

  void push_read_completion(std::uint64_t cookie, bool ok) {
    // reads_unreturned_ counts the local reads that go straight here, so this never overflows.
    done_.push(ReadCompletion{cookie, ok});
  }

  std::size_t reads_to_region(int id) const {
    std::size_t n = 0;
    for (const ReadSlot& s : read_slots_) n += s.region == id ? 1 : 0;
    return n;
  }

  TxStatus send_to_self(std::span<const std::byte> packet) {
    if (self_count_ == self_queue_.size()) return TxStatus::kNoResource;
    const std::size_t at = (self_head_ + self_count_) % self_queue_.size();
    std::memcpy(self_slab_.data() + at * options_.max_packet_bytes, packet.data(), packet.size());
    self_queue_[at].bytes = packet.size();
    ++self_count_;
    return TxStatus::kOk;  // never on the wire: not counted in bytes_sent
  }

  int peer_of_qpn(std::uint32_t qpn) const {
    for (int r = 0; r < size_; ++r) {
      const Peer& p = peers_[static_cast<std::size_t>(r)];
      if (p.qp && p.qp->qp_num == qpn) return r;
    }
    return -1;
  }

  void mark_failed(int peer, const std::string& why) {
    if (peer < 0 || peer >= size_ || peer == rank_) return;
    Peer& p = peers_[static_cast<std::size_t>(peer)];
    if (!p.failed) {
      p.failed = true;
      last_error_ = "peer " + std::to_string(peer) + ": " + why;
      // Once per peer and rare: worth a line on stderr, the engine only sees peer_failed().
      std::fprintf(stderr, "netsparse verbs transport: rank %d: peer %d failed (%s)\n", rank_, peer,
                   why.c_str());
    }
  }

  void release_resources() noexcept {
    for (Region& r : regions_) r.mr.reset();
    for (Peer& p : peers_) p.qp.reset();
    srq_.reset();
    send_cq_.reset();
    recv_cq_.reset();
    recv_mr_.reset();
    send_mr_.reset();
    bounce_mr_.reset();
    flush_mr_.reset();
    pd_.reset();
    port_.context.reset();
  }

  // A signalled 8-byte RDMA READ of the peer's flush word: its completion retires every earlier
  // WR of the QP (completions are in order), so "posted == completed" becomes reachable even
  // when the last sends were unsignalled. False when the send queue is full.
  bool post_flush(int dest) {
    Peer& peer = peers_[static_cast<std::size_t>(dest)];
    if (peer.posted - peer.completed >= sq_depth_) return false;
    const std::uint64_t seq = peer.posted;
    if (post_read(peer.qp.get(), wr_id(dest, seq), flush_slab_.get() + 8, 8, flush_mr_->lkey,
                  peer.flush_addr, peer.flush_rkey) != 0) {
      return false;
    }
    peer.ring[seq % sq_depth_] = SqEntry{};
    peer.unsignaled = 0;
    ++peer.posted;
    return true;
  }

  bool live_peers_drained() const {
    for (const Peer& p : peers_) {
      if (p.qp && !p.failed && p.posted != p.completed) return false;
    }
    return true;
  }

  // Teardown, bounded by teardown_timeout_ms: (1) flush every live QP, so that our last packets
  // have been acknowledged before the QPs go (a failed peer does not stop this); (2) unless a
  // peer failed (it would never arrive), wait in an Ibarrier until every rank tears down, so
  // that peers never see our QPs vanish while they still talk. While waiting we keep receiving
  // (and discarding), otherwise peers flushing towards us would stall on RNR.
  void shutdown() noexcept {
    bool abandoned_comm = false;
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (options_.teardown_timeout_ms != 0 && pd_) {
      using clock = std::chrono::steady_clock;
      const auto deadline =
          options_.teardown_timeout_ms < 0
              ? clock::time_point::max()
              : clock::now() + std::chrono::milliseconds(options_.teardown_timeout_ms);
      const auto failed_now = [&] {
        return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.failed; });
      };
      auto discard = [](const ReceivedPacket&) {};
      for (int r = 0; r < size_; ++r) {
        Peer& p = peers_[static_cast<std::size_t>(r)];
        if (!p.qp || p.failed || p.posted == p.completed) continue;
        while (!post_flush(r) && !p.failed && clock::now() < deadline) poll(discard, 64);
      }
      // With a peer failed nobody waits for anybody in a barrier below, so a live peer may
      // destroy its QPs before our flush reaches it; RC retries would fail that flush within
      // peer_timeout_ms on hardware, but soft-RoCE may drop it silently: bound the wait.
      const auto drain_deadline =
          failed_now()
              ? std::min(deadline, clock::now() + std::chrono::milliseconds(
                                                      2 * std::max(1, options_.peer_timeout_ms)))
              : deadline;
      while (!live_peers_drained() && clock::now() < drain_deadline) poll(discard, 64);
      const bool any_failed =
          std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.failed; });
      MPI_Request request = MPI_REQUEST_NULL;
      if (!finalized && !any_failed && MPI_Ibarrier(comm_, &request) == MPI_SUCCESS) {
        int done = 0;
        // A peer whose QP fails while we wait will never arrive: stop waiting then (its QP
        // error is the failure detection), otherwise wait for live peers however late.
        while (!done && MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
               clock::now() < deadline && !failed_now()) {
          poll(discard, 64);
        }
        // An unfinished non-blocking collective must not be freed (erroneous in MPI; Open MPI
        // reports it through the fatal world handler and aborts the survivors of a dead peer).
        // Abandon it, and with it the communicator it is pending on.
        if (!done) abandoned_comm = true;
      }
    }
    release_resources();
    if (!finalized && !abandoned_comm && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  VerbsOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  std::string last_error_;  // first failure seen, for diagnostics
  std::uint64_t bytes_sent_ = 0;

  // Declaration order = reverse destruction order: device first, QPs last.
  LocalPort port_;
  Pd pd_;
  Cq send_cq_;
  Cq recv_cq_;
  Srq srq_;
  Slab recv_slab_;
  Slab send_slab_;
  Slab bounce_slab_;
  Mr recv_mr_;
  Mr send_mr_;
  Mr bounce_mr_;
  Slab flush_slab_;  // [0, 8): the word peers read to flush; [8, 16): where our flushes land
  Mr flush_mr_;
  std::vector<Region> regions_;
  std::vector<Peer> peers_;

  std::uint64_t sq_depth_ = 0;
  int signal_interval_ = 1;
  std::size_t send_low_water_ = 1;
  std::size_t max_inline_ = 0;
  int recv_count_ = 0;
  std::vector<int> send_free_;
  std::vector<ReadSlot> read_slots_;
  std::vector<int> read_free_;
  std::size_t reads_unreturned_ = 0;  // issued and not yet returned by poll_reads
  CompletionRing done_;               // completions waiting for poll_reads
  std::vector<ibv_wc> wcs_;
  std::vector<ibv_recv_wr> recv_wrs_;
  std::vector<ibv_sge> recv_sges_;
  std::vector<SelfPacket> self_queue_;  // loopback: packets to ourselves never touch the NIC
  std::vector<std::byte> self_slab_;
  std::size_t self_head_ = 0;
  std::size_t self_count_ = 0;
};

}  // namespace

bool verbs_compiled_in() noexcept {
  return true;
}

bool verbs_device_available() noexcept {
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (!list) return false;
  for (int d = 0; d < count; ++d) {
    Context ctx(ibv_open_device(list.get()[d]));
    if (!ctx) continue;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx.get(), &attr) != 0) continue;
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      if (port_active(ctx.get(), p, nullptr)) return true;
    }
  }
  return false;
}

std::unique_ptr<Transport> make_verbs_transport(MPI_Comm comm, const VerbsOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    throw std::runtime_error(
        "netsparse verbs transport: MPI is not initialized (it bootstraps the queue pairs)");
  }
  return std::make_unique<VerbsTransport>(comm, options);
}

}  // namespace netsparse::transport
