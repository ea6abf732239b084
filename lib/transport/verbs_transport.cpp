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
#include "transport/verbs_transport.hpp"

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
namespace verbs {

// ---- opening and closing (VerbsTransport's setup and teardown) --------------------------------

VerbsTransport::VerbsTransport(MPI_Comm user_comm, const VerbsOptions& options)
    : options_(options) {
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

void VerbsTransport::create_local_resources() {
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

  const int send_cqe = static_cast<int>(std::min<std::uint64_t>(
      sq_depth_ * static_cast<std::uint64_t>(peers) + 1, static_cast<std::uint64_t>(dev.max_cqe)));
  const int recv_wrs =
      std::min(options_.recv_buffers, dev.max_srq_wr > 0 ? dev.max_srq_wr : options_.recv_buffers);
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
                                 static_cast<std::size_t>(recv_wrs) * pkt, IBV_ACCESS_LOCAL_WRITE));
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
    const int rc = ibv_modify_qp(
        peer.qp.get(), &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
      throw std::runtime_error("netsparse verbs transport: modify QP to INIT: " + errno_text(rc));
    }
  }
}

void VerbsTransport::connect_all() {
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
              " (gid " + gid_to_string(g) + ", local gid index " + std::to_string(port_.gid_index) +
              "): " + errno_text(rc);
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

void VerbsTransport::post_all_receives() {
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

void VerbsTransport::release_resources() noexcept {
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

void VerbsTransport::shutdown() noexcept {
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

}  // namespace verbs

using verbs::Context;
using verbs::DeviceList;
using verbs::port_active;
using verbs::VerbsTransport;

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
