// The MPI transport's intra-host fast path (transport.hpp: make_host_shm_transport).
//
// Profile behind it (docs/benchmarks.md): with 64 KiB frames over Open MPI's vader, the receive
// side's single-copy rendezvous (process_vm_readv with page pinning, inside MPI_Testsome) was
// ~40 % of the RIG engine's step time. Ranks on one host can share memory directly: one
// single-producer/single-consumer byte ring per ordered pair of the host's ranks that exchange
// frames, in POSIX shared memory. A send is one copy into the receiver's ring; the receiver hands
// the bytes to its handler in place (no copy) and then releases them. Reads of this host's ranks
// copy from their memory with process_vm_readv (a dead peer is an error at once, see read()).
// Traffic to other hosts, their reads, barriers and their failure detection stay with the
// wrapped MPI transport.
//
// The host: the ranks that share memory (MPI_COMM_TYPE_SHARED), cut into the job's virtual hosts
// when NETSPARSE_RANKS_PER_HOST is set, so that one machine acting as several hosts carries the
// traffic between its virtual hosts over MPI (the inter-host path), never over these rings.
//
// Rings are created on first use (issue 34): a rank's state grows with the peers it sends to,
// not with the ranks of its host. Opening costs no shared memory at all (measured before: every
// ordered pair of a 128-rank host got its ring at open, 16 K rings and 12.9 s at np 128). The
// first frame to a peer creates the ring (me -> peer) as an anonymous memory file (memfd_create,
// sized with ftruncate, its pages allocated as frames first reach them; a failure makes the pair
// fall back to MPI with a warning) and announces it with one small MPI
// message on a private communicator naming the creator's descriptor; the receiver maps it when
// it sees the announcement (polled every kAnnouncePollEvery-th poll) by opening
// /proc/<creator>/fd/<n>, and says so in the ring's control block, upon which the creator closes
// its descriptor. Frames written before the receiver maps the ring wait in it in order: every
// frame to a peer of this host goes through its ring from the first one on, so the pair's order
// holds. The segment has no name: its memory goes when the last mapping and descriptor do, so a
// rank that crashes or _exits leaves nothing behind in /dev/shm (the first design's shm_open
// names outlived such a rank: 2 MiB each, found after the peer_exit tests).
//
// Ring: positions are byte counters that only grow (index = position mod capacity, a power of
// two); `tail` is written by the producer only, `head` by the consumer only, each on its own
// cache line. A message is an 8-byte header {length, kMessage} and the bytes padded to 8; a
// message that does not fit before the end of the ring is preceded by a kWrap header that sends
// the consumer back to the start. The consumer checks every header before trusting it: a
// corrupt ring marks the sender failed and is never read again.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agreement/mpi.hpp"
#include "config/settings.hpp"
#include "support/memory.hpp"
#include "transport/host_layout.hpp"
#include "transport/transport_factory.hpp"

namespace netsparse::transport {

namespace {

constexpr std::uint32_t kMessage = 0x4e534d31;  // "NSM1"
constexpr std::uint32_t kWrap = 0x4e535752;     // "NSWR"
constexpr std::size_t kHeader = 8;
constexpr std::size_t kLine = 64;

struct RingControl {
  alignas(kLine) std::atomic<std::uint64_t> tail;  // producer
  alignas(kLine) std::atomic<std::uint64_t> head;  // consumer
  std::atomic<std::uint32_t> mapped;               // consumer: 1 once it has the ring mapped
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process rings need lock-free 64-bit atomics");
constexpr std::size_t kControlBytes = sizeof(RingControl);

std::size_t padded(std::size_t n) {
  return (n + 7) & ~std::size_t{7};
}

using agreement::check_mpi;

class HostShmTransport final : public Transport {
 public:
  // Takes `inner` and `host` (kept for the announcements) once the host is set up; on failure
  // (an exception the host's ranks agree on) the caller keeps both. `ring_limit`: the bytes this
  // rank's rings may take (ring_memory_limit); a ring past it is not made: its pair uses MPI.
  HostShmTransport(MPI_Comm comm, MPI_Comm host, std::unique_ptr<Transport>& inner,
                   std::size_t ring_bytes, std::uint64_t ring_limit)
      : ring_bytes_(ring_bytes), ring_limit_(ring_limit) {
    host_index_.assign(static_cast<std::size_t>(inner->size()), -1);
    // The same on every rank of the host (the rings' size is: a receiver checks the size it is
    // announced), so a receiver accepts exactly what its senders may send.
    const auto frame_of = [&](std::size_t room) {
      return std::min(std::max(inner->max_packet_bytes(), (room - kHeader) & ~std::size_t{7}),
                      inner->max_frame_bytes(inner->rank()));
    };
    ring_frame_bytes_ = frame_of(ring_bytes_);
    half_frame_bytes_ = frame_of(ring_bytes_ / 2);
    setup(comm, host);
    inner_ = std::move(inner);
  }

  ~HostShmTransport() override {
    // Peers found dead here are dead for the MPI transport's teardown too (it cannot see it).
    bool host_peer_failed = false;
    if (inner_) {
      for (int r = 0; r < size(); ++r) {
        if (r != rank() && peer_failed(r)) {
          inner_->note_peer_failed(r);
          host_peer_failed = host_peer_failed || ring_peer(r) >= 0;
        }
      }
    }
    // With a rank of the host gone, nothing more is asked of MPI on the announcements'
    // communicator (a probe or a free there may wait on the dead under Open MPI's recovery):
    // it is left behind, as the MPI transport leaves its own (a teardown after a failure is
    // local).
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && !host_peer_failed && announce_comm_ != MPI_COMM_NULL) {
      take_announcements();  // maps late rings, so their creators can close their descriptors
      MPI_Comm_free(&announce_comm_);
    }
    // The rings have no names: unmapping them (and closing the descriptors of rings whose
    // receiver never mapped them) is all there is to free, whoever died.
    unmap_all();
  }

  TransportKind kind() const noexcept override { return inner_->kind(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_packet_bytes() const noexcept override { return inner_->max_packet_bytes(); }
  std::size_t max_read_bytes() const noexcept override { return inner_->max_read_bytes(); }
  // A ring's frames are the whole ring at most (less its header), never below the packet size
  // (issue 34: a pair's rows in as few messages as inspector-executor's one; measured with
  // quarter-ring frames: 3 messages per pair and run against its 1 at np 2, 2 at np 8). A
  // reservation lends what is free in one piece, up to half the ring (an empty ring always has
  // that much in one piece, before its end or after a wrap marker from its start), or up to the
  // whole ring for an answer that fits it (reserve_for): then an empty ring not at its start is
  // first sent back to it by a wrap marker alone, and the answer waits for the consumer to pass
  // it (one engine step). A consumer still draining gets smaller frames rather than a wait.
  // With fewer ranks per host a ring is larger (make_host_shm_transport).
  // The peers reached through MPI get what the wrapped
  // transport carries. A ring peer whose pair fell back to MPI keeps the ring's bound (it is
  // decided once, before the pair's first frame), which the MPI transport carries too.
  std::size_t max_frame_bytes(int dest) const noexcept override {
    if (dest < 0 || dest >= size()) return max_packet_bytes();
    return ring_peer(dest) < 0 ? inner_->max_frame_bytes(dest) : ring_frame_bytes_;
  }

  TxStatus send(int dest, std::span<const std::byte> packet) override {
    if (dest < 0 || dest >= size() || packet.empty()) return TxStatus::kError;
    const int h = ring_peer(dest);
    if (h < 0) {
      if (dest == rank()) self_sends_ = true;  // its arrival needs the MPI poll every time
      return inner_->send(dest, packet);       // it checks its own bound (max_frame_bytes)
    }
    if (packet.size() > ring_frame_bytes_) return TxStatus::kError;
    if (inner_->peer_failed(dest) || failed_[static_cast<std::size_t>(h)]) {
      return TxStatus::kPeerFailed;
    }
    Outbound* o = outbound(h);
    if (o == nullptr) return inner_->send(dest, packet);  // the pair fell back to MPI
    if (o->reserved != 0) return TxStatus::kError;        // a reservation is open for this peer
    rewind_if_drained(*o, kHeader + padded(packet.size()));
    std::byte* at = place(*o, packet.size());
    if (at == nullptr) return TxStatus::kNoResource;
    std::memcpy(at + kHeader, packet.data(), packet.size());
    publish(*o, static_cast<std::uint32_t>(packet.size()));
    return TxStatus::kOk;
  }

  std::span<std::byte> reserve(int dest) override { return reserve_for(dest, 0); }

  std::span<std::byte> reserve_for(int dest, std::size_t want) override {
    if (dest < 0 || dest >= size()) return {};
    const int h = ring_peer(dest);
    if (h < 0 || failed_[static_cast<std::size_t>(h)]) return {};
    Outbound* o = outbound(h);
    if (o == nullptr) return {};  // fell back to MPI: lends() says no from now on
    // A frame holds every packet: a rewind leaves at least the largest one's room.
    rewind_if_drained(*o, kHeader + padded(std::max(want, inner_->max_packet_bytes())));
    const std::size_t len = lendable(*o, want);       // up to a frame's room: max_frame_bytes(dest)
    if (len < inner_->max_packet_bytes()) return {};  // every packet fits what is lent
    const std::uint64_t tail = o->tail;
    std::byte* at = place(*o, len);
    if (at == nullptr) return {};
    o->reserved = len;
    o->reserved_from = tail;
    return {at + kHeader, len};
  }

  bool lends(int dest) const noexcept override {
    if (dest < 0 || dest >= size()) return false;
    const int h = ring_peer(dest);
    return h >= 0 && !failed_[static_cast<std::size_t>(h)] &&
           !fell_back_[static_cast<std::size_t>(h)];
  }

  TxStatus commit(int dest, std::size_t bytes) override {
    if (dest < 0 || dest >= size()) return TxStatus::kError;
    const int h = ring_peer(dest);
    if (h < 0) return TxStatus::kError;
    Outbound& o = out_[static_cast<std::size_t>(h)];
    if (o.control == nullptr || o.reserved == 0 || bytes > o.reserved) return TxStatus::kError;
    o.reserved = 0;
    if (bytes == 0) {  // dropped: so is the wrap marker place() may have written before it
      o.tail = o.reserved_from;
      return TxStatus::kOk;
    }
    publish(o, static_cast<std::uint32_t>(bytes));
    return TxStatus::kOk;
  }

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override {
    // Every other rank's ring to this one mapped: no announcement can come (one per pair).
    const bool all_mapped = mapped_in_.size() + 1 >= static_cast<std::size_t>(host_size_);
    if (!all_mapped && ++polls_since_announce_ >= kAnnouncePollEvery) {
      polls_since_announce_ = 0;
      take_announcements();
    }
    int delivered = 0;
    for (std::size_t k = 0; k < mapped_in_.size() && delivered < max_packets; ++k) {
      const std::size_t h = mapped_in_[k];
      Inbound& in = in_[h];
      if (failed_[h]) continue;
      const std::uint64_t tail = in.control->tail.load(std::memory_order_acquire);
      const std::uint64_t cap = in.ring_bytes;
      while (in.head != tail && delivered < max_packets) {
        const std::size_t off = static_cast<std::size_t>(in.head & (cap - 1));
        std::uint32_t len = 0, tag = 0;
        std::memcpy(&len, in.data + off, 4);
        std::memcpy(&tag, in.data + off + 4, 4);
        if (tag == kWrap) {
          in.head += cap - off;
        } else if (tag == kMessage && len > 0 && len <= ring_frame_bytes_ &&
                   off + kHeader + len <= cap && in.head + kHeader + padded(len) <= tail) {
          handler(
              ReceivedPacket{in.peer, std::span<const std::byte>(in.data + off + kHeader, len)});
          in.head += kHeader + padded(len);
          ++delivered;
        } else {
          failed_[h] = 1;  // a corrupt ring is never read again; the watchdog handles the rest
          break;
        }
        in.control->head.store(in.head, std::memory_order_release);
      }
    }
    // The MPI transport's poll (MPI_Testsome over its posted receives, one opal_progress) costs
    // about a microsecond: profiled as most of an idle engine step, which inline progress pays
    // every few microseconds inside the kernels. When every rank is on this host, MPI carries
    // nothing but packets to this rank itself, so it is polled every kInnerPollEvery-th time
    // (with every ring to this one mapped, not even those: every kInnerPollEveryAllMapped-th).
    if (delivered < max_packets &&
        (remote_hosts_ || self_sends_ || any_fell_back_ ||
         ++polls_since_inner_ >= (all_mapped ? kInnerPollEveryAllMapped : kInnerPollEvery))) {
      polls_since_inner_ = 0;
      const int n = inner_->poll(handler, max_packets - delivered);
      if (n > 0) delivered += n;
    }
    return delivered;
  }

  // Collective (as the inner registration is): every rank's base address and size of the
  // region, for the reads of this host's ranks below.
  int register_memory(void* base, std::size_t bytes) override {
    const RegionSpan mine{reinterpret_cast<std::uintptr_t>(base), bytes};
    std::vector<RegionSpan> all(static_cast<std::size_t>(size()));
    inner_->allgather(&mine, sizeof mine, all.data());
    const int region = inner_->register_memory(base, bytes);
    spans_[region] = std::move(all);
    return region;
  }
  void deregister_memory(int region) override {
    spans_.erase(region);
    inner_->deregister_memory(region);
  }
  // A read of a rank of this host copies from its memory directly (process_vm_readv, what Open
  // MPI's single-copy path does inside MPI_Rget), so that a peer that died is an error at once:
  // Open MPI's RMA retries a failed single-copy read forever inside MPI_Rget (measured: a
  // survivor's engine stuck there after its peer was SIGKILLed, issue 21.2). Without the
  // permission to read another process (EPERM, ENOSYS) reads go to the MPI transport.
  TxStatus read(int dest, int region, std::uint64_t offset, void* local, std::size_t bytes,
                std::uint64_t cookie) override {
    const int h = dest >= 0 && dest < size() ? ring_peer(dest) : -1;
    const auto span = spans_.find(region);
    if (h < 0 || !direct_reads_ || span == spans_.end()) {
      return inner_->read(dest, region, offset, local, bytes, cookie);
    }
    const RegionSpan& remote = span->second[static_cast<std::size_t>(dest)];
    if (offset > remote.bytes || bytes > remote.bytes - offset) return TxStatus::kError;
    if (failed_[static_cast<std::size_t>(h)] || inner_->peer_failed(dest)) {
      return TxStatus::kPeerFailed;
    }
    iovec to{local, bytes};
    iovec from{reinterpret_cast<void*>(remote.base + offset), bytes};
    const ssize_t got = process_vm_readv(pids_[static_cast<std::size_t>(h)], &to, 1, &from, 1, 0);
    if (got == static_cast<ssize_t>(bytes)) {
      direct_done_.push_back(ReadCompletion{cookie, true});
      return TxStatus::kOk;
    }
    if (got < 0 && errno == ESRCH) {
      failed_[static_cast<std::size_t>(h)] = 1;
      return TxStatus::kPeerFailed;
    }
    if (got < 0 && (errno == EPERM || errno == ENOSYS)) {
      direct_reads_ = false;
      return inner_->read(dest, region, offset, local, bytes, cookie);
    }
    return TxStatus::kError;  // EFAULT, a short read: the registered range is not readable
  }
  int poll_reads(ReadCompletion* out, int max) override {
    int n = 0;
    while (n < max && !direct_done_.empty()) {
      out[n++] = direct_done_.front();
      direct_done_.pop_front();
    }
    if (n < max) {
      const int more = inner_->poll_reads(out + n, max - n);
      if (more > 0) n += more;
    }
    return n;
  }
  void barrier() override { inner_->barrier(); }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    inner_->allgather(mine, bytes, all);
  }
  // A rank of this host is dead when its process is gone (kill(pid, 0) fails with ESRCH): the
  // failure detection MPI over shared memory does not have. Checked at most once a millisecond
  // per peer (the engine asks every millisecond).
  bool peer_failed(int peer) const noexcept override {
    if (peer >= 0 && peer < size()) {
      const int h = ring_peer(peer);
      if (h >= 0) {
        const auto hi = static_cast<std::size_t>(h);
        if (failed_[hi]) return true;
        const auto now = std::chrono::steady_clock::now();
        if (now - checked_[hi] > std::chrono::milliseconds(1)) {
          checked_[hi] = now;
          if (pids_[hi] > 0 && kill(pids_[hi], 0) != 0 && errno == ESRCH) failed_[hi] = 1;
          if (failed_[hi]) return true;
        }
      }
    }
    return inner_->peer_failed(peer);
  }
  std::string detail() const override {
    std::size_t sending = 0;
    for (const Outbound& o : out_) sending += o.control != nullptr ? 1 : 0;
    const int others = host_size_ - 1;
    return "shared-memory rings to the " + std::to_string(others) + " other rank" +
           (others == 1 ? "" : "s") + " of this host, created on first use (" +
           std::to_string(ring_bytes_ >> 10) + " KiB each; " + std::to_string(sending) +
           " sending, " + std::to_string(mapped_in_.size()) + " receiving so far; " +
           std::to_string(rewinds_) + " rewound when drained), MPI for the rest";
  }
  std::uint64_t bytes_sent() const noexcept override {
    return inner_->bytes_sent() + ring_bytes_sent_;
  }

 private:
  struct Outbound {  // the ring (me -> peer), a memory file of its own, created on first use
    RingControl* control = nullptr;
    int fd = -1;  // the ring's descriptor until its receiver has mapped it (RingControl::mapped)
    std::byte* data = nullptr;
    std::uint64_t tail = 0;
    std::uint64_t head_seen = 0;
    std::size_t reserved = 0;         // an open reservation's length, 0 if none
    std::uint64_t reserved_from = 0;  // ... and the tail before it (a dropped one goes back)
    std::uint64_t lone_wrap = 1;      // the tail right after a wrap marker sent alone (1: none)
    // rewind_if_drained()'s reads of the head: sends to skip before the next one, and the
    // current gap (0 after a read that found the ring drained, doubling to 64 while reads find
    // it busy).
    std::uint32_t skip_looks = 0, look_gap = 0;
  };
  struct Inbound {  // the ring (peer -> me), mapped when its creator announces it
    RingControl* control = nullptr;
    std::byte* data = nullptr;
    std::uint64_t head = 0;
    std::uint64_t ring_bytes = 0;
    int peer = -1;
  };
  // One announcement on announce_comm_: the ring from the sender (MPI source) is ready, open
  // as descriptor `fd` of the sender's process.
  struct Announcement {
    std::uint64_t ring_bytes;
    std::int64_t fd;
    std::uint64_t inode;  // the memory file's, checked: the descriptor may be another file by now
  };
  static constexpr int kAnnounceTag = 0x4e52;  // "NR"

  // The host index of `dest` when frames to it go through a ring (another rank of this host),
  // else -1.
  int ring_peer(int dest) const noexcept {
    const int h = host_index_[static_cast<std::size_t>(dest)];
    return h == host_rank_ ? -1 : h;
  }

  // The ring to host peer h, created and announced on first use; nullptr when the pair uses MPI
  // (shared memory could not be had for it).
  Outbound* outbound(int h) {
    const auto hi = static_cast<std::size_t>(h);
    Outbound& o = out_[hi];
    if (o.control != nullptr) {
      // The receiver has its own mapping now: the descriptor is not needed any more.
      if (o.fd >= 0 && o.control->mapped.load(std::memory_order_acquire) != 0) {
        close(o.fd);
        o.fd = -1;
      }
      return &o;
    }
    if (fell_back_[hi]) return nullptr;
    std::string why;
    const std::uint64_t after = std::uint64_t{ring_stride()} * (rings_created_ + 1);
    const bool fits = after <= ring_limit_;
    if (!fits) {
      why = "its ring would bring this rank's rings to " + std::to_string(after) +
            " bytes, past the " + std::to_string(ring_limit_) + " bytes they may take";
    }
    if (!fits || !create_ring(h, why)) {
      fell_back_[hi] = 1;
      any_fell_back_ = true;
      if (!warned_) {
        warned_ = true;
        std::fprintf(stderr,
                     "netsparse: rank %d: no shared-memory ring to rank %d of this host (%s); its "
                     "frames go through MPI (slower: docs/architecture.md, shared-memory rings). "
                     "Rings are anonymous memory (memfd), not /dev/shm: free memory, raise "
                     "NETSPARSE_MAX_CONTEXT_BYTES or set NETSPARSE_MPI_SHM_RING_BYTES lower.\n",
                     rank(), host_ranks_[hi], why.c_str());
      }
      return nullptr;
    }
    return &o;
  }

  bool create_ring(int h, std::string& why) {
    const int fd = memfd_create("netsparse-ring", MFD_CLOEXEC);
    if (fd < 0) {
      why = "memfd_create: " + std::string(std::strerror(errno));
      return false;
    }
    // Sized, not reserved: a ring's pages are allocated as frames first reach them, and a pair
    // that exchanges little keeps rewriting its first pages (rewind_if_drained), so it never
    // pays for the whole ring. Reserving and populating it at creation
    // (posix_fallocate, then MADV_POPULATE_WRITE) cost ~1 ms per 2 MiB ring here (2 us per page,
    // allocated and zeroed either way), all of it in the first run: a GCN's first epoch took
    // 1.80 ms with 2 MiB rings and 0.94 ms with 256 KiB ones (docs/benchmarks.md). What a rank's
    // rings may take is bounded at open (ring_memory_limit: its share of MemAvailable); memfd
    // memory has no size limit of its own, so a reservation could only fail for lack of memory,
    // which that bound is for.
    const std::size_t bytes = ring_stride();
    const int rc = ftruncate(fd, static_cast<off_t>(bytes));
    void* p =
        rc == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
      why = rc != 0 ? "ftruncate to " + std::to_string(bytes) + " bytes: " + std::strerror(errno)
                    : "mmap: " + std::string(std::strerror(errno));
      close(fd);
      return false;
    }
    struct stat st {};
    fstat(fd, &st);
    auto* control = new (p) RingControl{};
    // Announced before anything is written: the receiver maps it whenever it polls next.
    const Announcement a{ring_bytes_, fd, static_cast<std::uint64_t>(st.st_ino)};
    if (MPI_Send(&a, sizeof a, MPI_BYTE, h, kAnnounceTag, announce_comm_) != MPI_SUCCESS) {
      munmap(p, bytes);
      close(fd);
      why = "the announcement to the peer failed (MPI_Send)";
      failed_[static_cast<std::size_t>(h)] = 1;
      return false;
    }
    Outbound& o = out_[static_cast<std::size_t>(h)];
    o.fd = fd;
    o.control = control;
    o.data = static_cast<std::byte*>(p) + kControlBytes;
    ++rings_created_;
    return true;
  }

  // Maps every ring announced to this rank so far (non-blocking). Once a rank of the host has
  // died, Open MPI's recovery fails every MPI_ANY_SOURCE probe on a communicator holding it
  // (seen: a survivor's teardown waiting forever for a "done" whose ring it never mapped), so
  // the live peers without a ring are then probed one by one.
  void take_announcements() {
    if (!any_source_failed_) {
      for (;;) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kAnnounceTag, announce_comm_, &flag, &status) !=
            MPI_SUCCESS) {
          any_source_failed_ = true;
          break;
        }
        if (!flag || !take_announcement(status.MPI_SOURCE)) return;
      }
    }
    for (int h = 0; h < host_size_; ++h) {
      const auto hi = static_cast<std::size_t>(h);
      if (h == host_rank_ || failed_[hi] || in_[hi].control != nullptr) continue;
      int flag = 0;
      if (MPI_Iprobe(h, kAnnounceTag, announce_comm_, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
          flag) {
        take_announcement(h);
      }
    }
  }
  bool take_announcement(int h) {
    Announcement a{};
    if (MPI_Recv(&a, sizeof a, MPI_BYTE, h, kAnnounceTag, announce_comm_, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS) {
      return false;
    }
    map_ring_from(h, a);
    return true;
  }

  void map_ring_from(int h, const Announcement& a) {
    const auto hi = static_cast<std::size_t>(h);
    if (h == host_rank_ || h < 0 || h >= host_size_ || in_[hi].control != nullptr) return;
    // A ring size this rank would not have chosen is a corrupt announcement: refused.
    if (a.ring_bytes != ring_bytes_ || a.fd < 0 || a.fd > std::numeric_limits<int>::max()) {
      failed_[hi] = 1;
      return;
    }
    // The creator's descriptor, opened through /proc: the same permission process_vm_readv
    // needs for this host's reads (same user), and no name anywhere that could outlive a rank.
    const std::string path = "/proc/" + std::to_string(pids_[hi]) + "/fd/" + std::to_string(a.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      // Its creator is gone already (nothing to read from it), or /proc hides its descriptors:
      // either way its frames would be lost, so the peer is unreachable and the watchdog tells.
      if (errno != ENOENT && !warned_) {
        warned_ = true;
        std::fprintf(stderr,
                     "netsparse: rank %d: cannot open the shared-memory ring of rank %d (%s: %s)\n",
                     rank(), host_ranks_[hi], path.c_str(), std::strerror(errno));
      }
      failed_[hi] = 1;
      return;
    }
    struct stat st {};
    // The creator closes its descriptor at teardown, and the number can then name another
    // file: only the announced memory file is mapped.
    void* p = fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_ino) == a.inode &&
                      static_cast<std::size_t>(st.st_size) >= ring_stride()
                  ? mmap(nullptr, ring_stride(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) {
      failed_[hi] = 1;  // its frames would be lost: the peer is unreachable, the watchdog tells
      return;
    }
    static_cast<RingControl*>(p)->mapped.store(1, std::memory_order_release);
    Inbound& in = in_[hi];
    in.control = static_cast<RingControl*>(p);
    in.data = static_cast<std::byte*>(p) + kControlBytes;
    in.ring_bytes = ring_bytes_;
    in.peer = host_ranks_[hi];
    mapped_in_.push_back(hi);
  }

  // Room for a message of `len` bytes at the producer's tail (writing a wrap marker first if it
  // would straddle the end); returns where its header goes, or nullptr when the ring is full.
  // Nothing is visible to the consumer until publish().
  std::byte* place(Outbound& o, std::size_t len) {
    const std::size_t need = kHeader + padded(len);
    const std::uint64_t cap = ring_bytes_;
    const std::size_t off = static_cast<std::size_t>(o.tail & (cap - 1));
    const std::size_t contiguous = static_cast<std::size_t>(cap) - off;
    const std::size_t total = contiguous < need ? contiguous + need : need;
    if (o.tail + total - o.head_seen > cap) {
      o.head_seen = o.control->head.load(std::memory_order_acquire);
      if (o.tail + total - o.head_seen > cap) {
        // A message longer than the empty ring's room before and after its position: back to
        // the start first (a send of a frame of the whole ring), then it fits.
        if (need > contiguous && need > off) wrap_if_empty(o);
        return nullptr;
      }
    }
    if (contiguous < need) {  // the message would straddle the end: wrap to the start
      write_header(o.data + off, 0, kWrap);
      o.tail += contiguous;  // published together with the message
      return o.data;
    }
    return o.data + off;
  }
  // The longest message that can be placed now (before the ring's end, or from its start after
  // a wrap marker), at most ring_frame_bytes_. The consumer's head is read again only when the
  // head last seen leaves less than a quarter of the ring, or less than `want` (what the caller
  // is about to write): that read is a cache miss on a line the consumer writes, and paying it
  // on every reservation made the index gather at K = 1 (thousands of small frames) 10-15 %
  // slower; a bulk answer asks for what it needs and gets the whole frame from a drained ring.
  std::size_t lendable(Outbound& o, std::size_t want) {
    const std::uint64_t cap = ring_bytes_;
    // Past half the ring only for an answer the whole ring can take in one message.
    const bool whole = want > half_frame_bytes_ && want <= ring_frame_bytes_;
    const std::size_t most = whole ? ring_frame_bytes_ : half_frame_bytes_;
    const auto fit = [&] {
      const std::size_t contiguous = static_cast<std::size_t>(cap - (o.tail & (cap - 1)));
      const auto free = static_cast<std::size_t>(cap - (o.tail - o.head_seen));
      const std::size_t here = std::min(contiguous, free);
      const std::size_t after_wrap = free > contiguous ? free - contiguous : 0;
      const std::size_t best = std::max(here, after_wrap);
      return best > kHeader ? std::min(most, (best - kHeader) & ~std::size_t{7}) : std::size_t{0};
    };
    std::size_t len = fit();
    const std::size_t enough = std::min(most, std::max(want, ring_bytes_ / 4));
    if (len < enough) {
      o.head_seen = o.control->head.load(std::memory_order_acquire);
      len = fit();
    }
    // The whole ring once the consumer has passed a wrap marker sent alone (it is on its way
    // when nothing was written since).
    if (whole && len < want && (o.tail == o.lone_wrap || wrap_if_empty(o))) return 0;
    return len;
  }
  // An empty ring not at its start: a wrap marker alone sends the consumer back to the start,
  // so that the next message can take the whole ring once the consumer has passed it.
  bool wrap_if_empty(Outbound& o) {
    const auto off = static_cast<std::size_t>(o.tail & (ring_bytes_ - 1));
    if (o.tail != o.head_seen || off == 0) return false;
    write_header(o.data + off, 0, kWrap);
    o.tail += ring_bytes_ - off;
    o.control->tail.store(o.tail, std::memory_order_release);
    o.lone_wrap = o.tail;
    return true;
  }
  // A drained ring starts over at its beginning: once its tail is 64 KiB (an eighth of a smaller
  // ring) and a message of `need` bytes past the start, and the consumer has read everything, a
  // wrap marker alone sends both back to the start (the room there is the bytes skipped until
  // the consumer has passed it). A pair that exchanges little then keeps rewriting the same
  // first pages, which stay cached and were allocated once: a ring's pages are allocated when
  // frames first reach them (2 us each here), and a GCN's few KiB per epoch went through fresh
  // ones until the 2 MiB ring wrapped. The consumer's head is a line it writes, and reading it
  // on every send cost the index gather 10-15 % at K = 1 (see lendable), so while reads find
  // the ring busy they back off to one per 64 sends.
  static constexpr std::size_t kRewindBytes = std::size_t{64} << 10;
  void rewind_if_drained(Outbound& o, std::size_t need) {
    const auto off = static_cast<std::size_t>(o.tail & (ring_bytes_ - 1));
    if (o.reserved != 0 || off < std::min<std::size_t>(ring_bytes_ / 8, kRewindBytes) ||
        need > off) {
      return;
    }
    if (o.head_seen != o.tail) {
      if (o.skip_looks > 0) {
        --o.skip_looks;
        return;
      }
      o.head_seen = o.control->head.load(std::memory_order_acquire);
      if (o.head_seen != o.tail) {
        o.look_gap = std::min<std::uint32_t>(64, std::max<std::uint32_t>(1, 2 * o.look_gap));
        o.skip_looks = o.look_gap;
        return;
      }
    }
    o.look_gap = 0;
    write_header(o.data + off, 0, kWrap);
    o.tail += ring_bytes_ - off;
    o.control->tail.store(o.tail, std::memory_order_release);
    o.lone_wrap = o.tail;
    ++rewinds_;
  }
  // Makes the message of `len` bytes placed at the tail visible to the consumer.
  void publish(Outbound& o, std::uint32_t len) {
    const std::size_t off = static_cast<std::size_t>(o.tail & (ring_bytes_ - 1));
    write_header(o.data + off, len, kMessage);
    o.tail += kHeader + padded(len);
    o.control->tail.store(o.tail, std::memory_order_release);
    ring_bytes_sent_ += len;
  }

  static void write_header(std::byte* at, std::uint32_t len, std::uint32_t tag) {
    std::memcpy(at, &len, 4);
    std::memcpy(at + 4, &tag, 4);
  }

  std::size_t ring_stride() const { return kControlBytes + ring_bytes_; }

  // Collective over the host: who is on it (world ranks, pids), and the private communicator of
  // the announcements. No shared memory yet.
  void setup(MPI_Comm comm, MPI_Comm host) {
    int world_rank = 0;
    MPI_Comm_size(host, &host_size_);
    MPI_Comm_rank(host, &host_rank_);
    MPI_Comm_rank(comm, &world_rank);
    const auto n = static_cast<std::size_t>(host_size_);
    // Every rank's (world rank, pid) in one collective (each costs ~0.1 s at 16 ranks per core).
    const int mine[2] = {world_rank, static_cast<int>(getpid())};
    std::vector<int> all(2 * n, 0);
    check_mpi(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, host),
              "MPI_Allgather (host ranks and pids)");
    host_ranks_.assign(n, -1);
    pids_.assign(n, 0);
    for (std::size_t h = 0; h < n; ++h) {
      host_ranks_[h] = all[2 * h];
      pids_[h] = all[2 * h + 1];
    }
    checked_.assign(n, std::chrono::steady_clock::time_point{});
    out_.assign(n, Outbound{});
    in_.assign(n, Inbound{});
    failed_.assign(n, 0);
    fell_back_.assign(n, 0);
    for (std::size_t h = 0; h < n; ++h)
      host_index_[static_cast<std::size_t>(host_ranks_[h])] = static_cast<int>(h);
    remote_hosts_ = host_size_ < static_cast<int>(host_index_.size());
    // The announcements' communicator (not a duplicate); last: a throw leaves it to the caller.
    MPI_Comm_set_errhandler(host, MPI_ERRORS_RETURN);
    announce_comm_ = host;
  }

  void unmap_all() noexcept {
    for (Outbound& o : out_) {
      if (o.control != nullptr) munmap(o.control, ring_stride());
      if (o.fd >= 0) close(o.fd);
      o = Outbound{};
    }
    for (Inbound& in : in_) {
      if (in.control != nullptr) munmap(in.control, ring_stride());
      in = Inbound{};
    }
    mapped_in_.clear();
  }

  std::unique_ptr<Transport> inner_;
  const std::size_t ring_bytes_;
  std::size_t ring_frame_bytes_ = 0;  // the largest message of a ring (max_frame_bytes)
  std::size_t half_frame_bytes_ = 0;  // the most an empty ring always has in one piece
  const std::uint64_t ring_limit_;
  int host_size_ = 1;
  int host_rank_ = 0;
  MPI_Comm announce_comm_ = MPI_COMM_NULL;
  std::vector<int> host_index_;         // world rank -> index among this host's ranks, -1 elsewhere
  std::vector<int> host_ranks_;         // host index -> world rank
  std::vector<Outbound> out_;           // by host index; a ring only once a frame went to that rank
  std::vector<Inbound> in_;             // by host index; mapped once announced
  std::vector<std::size_t> mapped_in_;  // host indices with a mapped inbound ring
  mutable std::vector<unsigned char> failed_;  // by host index: process gone or ring corrupt
  std::vector<unsigned char> fell_back_;       // by host index: no ring could be made, MPI
  std::vector<int> pids_;                      // by host index
  mutable std::vector<std::chrono::steady_clock::time_point> checked_;
  std::uint64_t ring_bytes_sent_ = 0;
  std::size_t rings_created_ = 0;
  std::uint64_t rewinds_ = 0;  // rewind_if_drained's wrap markers
  struct RegionSpan {
    std::uint64_t base;
    std::uint64_t bytes;
  };
  std::map<int, std::vector<RegionSpan>> spans_;  // region -> every rank's (base, size)
  std::deque<ReadCompletion> direct_done_;        // reads done by process_vm_readv
  bool direct_reads_ = true;
  static constexpr int kInnerPollEvery = 64, kInnerPollEveryAllMapped = 1024;
  // Announcements probed every 16th poll (until all mapped): a few microseconds' wait at most.
  static constexpr int kAnnouncePollEvery = 16;
  bool remote_hosts_ = true;  // some rank is on another host: MPI is polled every time
  bool self_sends_ = false;
  bool any_fell_back_ = false;  // some pair of this host uses MPI: polled every time
  bool warned_ = false;
  bool any_source_failed_ = false;  // MPI_ANY_SOURCE probes fail (a rank of the host died)
  int polls_since_inner_ = 0;
  int polls_since_announce_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_host_shm_transport(MPI_Comm comm, std::unique_ptr<Transport> inner,
                                                   std::size_t ring_bytes, std::string* why_not,
                                                   MPI_Comm* machine_comm, bool layout_agreed) {
  MPI_Comm host = split_host(comm, machine_comm, layout_agreed);
  int host_size = 1;
  MPI_Comm_size(host, &host_size);
  if (host_size < 2) {
    MPI_Comm_free(&host);
    if (why_not != nullptr) *why_not = "no other rank on this host";
    return inner;
  }
  if (ring_bytes == 0) {
    // 2 MiB per ring at most, and 4 MiB for all the rings a rank writes, were it to talk to
    // every rank of its host (a ring's pages end up in both processes' resident sets). Measured
    // (main job, np 2): creating and populating an 8 MiB ring took ~10 ms, 2 MiB ~4 ms, at the
    // same time per run at K = 16 and 128 (the consumer drains while the producer writes). A
    // pair's answer up to half its ring leaves as one message (max_frame_bytes); 4 MiB rings
    // would carry kron:16's 1.09 MB per pair at K 16 and np 2 in one message instead of two, but
    // measured the index gather 5-12 % slower at K 1 and 16 (bench_index_gather --unique, np 2,
    // alternated with 2 MiB: the larger ring's footprint in the caches). Rings are sized alike
    // on every rank of a host (the receiver checks the size it is announced).
    const auto others = static_cast<std::size_t>(host_size - 1);
    ring_bytes = std::min<std::size_t>(std::size_t{2} << 20,
                                       std::bit_floor((std::size_t{4} << 20) / others));
  }
  // Room for 4 largest messages at least.
  ring_bytes = std::max(ring_bytes, 4 * padded(inner->max_packet_bytes() + kHeader));
  ring_bytes = std::bit_ceil(ring_bytes);
  const std::uint64_t ring_limit = ring_memory_limit(host, host_size, ring_bytes + kControlBytes);
  try {  // the transport owns `host` from here
    return std::make_unique<HostShmTransport>(comm, host, inner, ring_bytes, ring_limit);
  } catch (const std::exception& e) {
    MPI_Comm_free(&host);
    if (why_not != nullptr) *why_not = e.what();
    return inner;
  }
}

}  // namespace netsparse::transport
