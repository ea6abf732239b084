// The verbs transport (make_verbs_transport): one RC queue pair to every peer, bootstrapped over
// MPI; the design is described at the top of verbs_transport.cpp. This header holds the class
// and its data path (send, poll, reads, registration); verbs_transport.cpp opens (device, slabs,
// queues, the connection of every pair of ranks) and closes it.
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi.hpp"
#include "transport/completion_ring.hpp"
#include "transport/transport.hpp"
#include "transport/transport_factory.hpp"
#include "transport/verbs_config.hpp"
#include "transport/verbs_device.hpp"

namespace netsparse::transport::verbs {

constexpr int kPeerShift = 40;  // send wr_id = peer << 40 | sequence number on that QP
constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kPeerShift) - 1;

inline std::uint64_t wr_id(int dest, std::uint64_t seq) {
  return (static_cast<std::uint64_t>(dest) << kPeerShift) | (seq & kSeqMask);
}

class VerbsTransport final : public Transport {
 public:
  VerbsTransport(MPI_Comm user_comm, const VerbsOptions& options);

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

  void create_local_resources();

  void connect_all();

  void post_all_receives();

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

  void release_resources() noexcept;

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
  void shutdown() noexcept;

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

}  // namespace netsparse::transport::verbs
