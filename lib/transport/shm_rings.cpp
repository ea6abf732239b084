// The MPI transport's intra-host fast path (transport.hpp: make_host_shm_transport).
//
// Profile behind it (docs/benchmarks.md): with 64 KiB frames over Open MPI's vader, the receive
// side's single-copy rendezvous (process_vm_readv with page pinning, inside MPI_Testsome) was
// ~40 % of the RIG engine's step time. Ranks on one host can share memory directly: one
// single-producer/single-consumer byte ring per ordered pair of the host's ranks, in POSIX shared
// memory. A send is one copy into the receiver's ring; the receiver hands the bytes to its
// handler in place (no copy) and then releases them. Reads of this host's ranks copy from their
// memory with process_vm_readv (a dead peer is an error at once, see read()). Traffic to other
// hosts, their reads, barriers and their failure detection stay with the wrapped MPI transport.
//
// Segments: each rank creates one segment holding the rings whose RECEIVER it is (one per
// sender of its host), under a name agreed through MPI; peers map it; once everybody has mapped
// every segment the names are unlinked, so nothing outlives the job even if it crashes, and no
// teardown is collective (munmap is local). Space is reserved with posix_fallocate, so a full
// /dev/shm fails at setup (and the transport falls back to MPI alone) instead of raising SIGBUS
// at a later write.
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
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi.hpp"
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
  // Takes `inner` only when the rings are set up; on failure (an exception, agreed by every
  // rank of the host) the caller keeps it.
  HostShmTransport(MPI_Comm comm, std::unique_ptr<Transport>& inner, std::size_t ring_bytes)
      : ring_bytes_(ring_bytes) {
    host_index_.assign(static_cast<std::size_t>(inner->size()), -1);
    MPI_Comm host = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host),
              "MPI_Comm_split_type");
    try {
      setup(comm, host);
    } catch (...) {
      MPI_Comm_free(&host);
      unmap_all();
      throw;
    }
    MPI_Comm_free(&host);
    inner_ = std::move(inner);
  }

  ~HostShmTransport() override {
    // Peers found dead here are dead for the MPI transport's teardown too (it cannot see it).
    if (inner_) {
      for (int r = 0; r < size(); ++r) {
        if (r != rank() && peer_failed(r)) inner_->note_peer_failed(r);
      }
    }
    unmap_all();
  }

  TransportKind kind() const noexcept override { return inner_->kind(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_packet_bytes() const noexcept override { return inner_->max_packet_bytes(); }
  std::size_t max_read_bytes() const noexcept override { return inner_->max_read_bytes(); }

  TxStatus send(int dest, std::span<const std::byte> packet) override {
    if (dest < 0 || dest >= size() || packet.empty() || packet.size() > max_packet_bytes()) {
      return TxStatus::kError;
    }
    const int h = host_index_[static_cast<std::size_t>(dest)];
    if (h < 0 || dest == rank()) {
      if (dest == rank()) self_sends_ = true;  // its arrival needs the MPI poll every time
      return inner_->send(dest, packet);
    }
    if (inner_->peer_failed(dest) || failed_[static_cast<std::size_t>(h)]) {
      return TxStatus::kPeerFailed;
    }
    Outbound& o = out_[static_cast<std::size_t>(h)];
    if (o.reserved != 0) return TxStatus::kError;  // a reservation is open for this peer
    std::byte* at = place(o, packet.size());
    if (at == nullptr) return TxStatus::kNoResource;
    std::memcpy(at + kHeader, packet.data(), packet.size());
    publish(o, static_cast<std::uint32_t>(packet.size()));
    return TxStatus::kOk;
  }

  std::span<std::byte> reserve(int dest) override {
    if (dest < 0 || dest >= size()) return {};
    const int h = host_index_[static_cast<std::size_t>(dest)];
    if (h < 0 || dest == rank() || failed_[static_cast<std::size_t>(h)]) return {};
    Outbound& o = out_[static_cast<std::size_t>(h)];
    const std::size_t len = max_packet_bytes();
    std::byte* at = place(o, len);
    if (at == nullptr) return {};
    o.reserved = len;
    return {at + kHeader, len};
  }

  bool lends(int dest) const noexcept override {
    if (dest < 0 || dest >= size() || dest == rank()) return false;
    const int h = host_index_[static_cast<std::size_t>(dest)];
    return h >= 0 && !failed_[static_cast<std::size_t>(h)];
  }

  TxStatus commit(int dest, std::size_t bytes) override {
    if (dest < 0 || dest >= size()) return TxStatus::kError;
    const int h = host_index_[static_cast<std::size_t>(dest)];
    if (h < 0) return TxStatus::kError;
    Outbound& o = out_[static_cast<std::size_t>(h)];
    if (o.reserved == 0 || bytes > o.reserved) return TxStatus::kError;
    o.reserved = 0;
    if (bytes == 0) return TxStatus::kOk;  // place() wrote nothing the consumer can see yet
    publish(o, static_cast<std::uint32_t>(bytes));
    return TxStatus::kOk;
  }

  int poll(const std::function<void(const ReceivedPacket&)>& handler, int max_packets) override {
    int delivered = 0;
    for (std::size_t h = 0; h < in_.size() && delivered < max_packets; ++h) {
      Inbound& in = in_[h];
      if (in.control == nullptr || failed_[h]) continue;
      const std::uint64_t tail = in.control->tail.load(std::memory_order_acquire);
      const std::uint64_t cap = ring_bytes_;
      while (in.head != tail && delivered < max_packets) {
        const std::size_t off = static_cast<std::size_t>(in.head & (cap - 1));
        std::uint32_t len = 0, tag = 0;
        std::memcpy(&len, in.data + off, 4);
        std::memcpy(&tag, in.data + off + 4, 4);
        if (tag == kWrap) {
          in.head += cap - off;
        } else if (tag == kMessage && len > 0 && len <= max_packet_bytes() &&
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
    // nothing but packets to this rank itself, so it is polled every kInnerPollEvery-th time.
    if (delivered < max_packets &&
        (remote_hosts_ || self_sends_ || ++polls_since_inner_ >= kInnerPollEvery)) {
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
    const int h = dest >= 0 && dest < size() ? host_index_[static_cast<std::size_t>(dest)] : -1;
    const auto span = spans_.find(region);
    if (h < 0 || dest == rank() || !direct_reads_ || span == spans_.end()) {
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
      const int h = host_index_[static_cast<std::size_t>(peer)];
      if (h >= 0 && peer != rank()) {
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
    int peers = 0;
    for (const Inbound& in : in_) peers += in.control != nullptr ? 1 : 0;
    return "shared-memory rings to " + std::to_string(peers) + " rank" + (peers == 1 ? "" : "s") +
           " of this host (" + std::to_string(ring_bytes_ >> 10) + " KiB each), MPI for the rest";
  }
  std::uint64_t bytes_sent() const noexcept override {
    return inner_->bytes_sent() + ring_bytes_sent_;
  }

 private:
  struct Outbound {  // the ring (me -> peer) in the peer's segment
    RingControl* control = nullptr;
    std::byte* data = nullptr;
    std::uint64_t tail = 0;
    std::uint64_t head_seen = 0;
    std::size_t reserved = 0;  // an open reservation's length, 0 if none
  };
  struct Inbound {  // the ring (peer -> me) in my segment
    RingControl* control = nullptr;
    std::byte* data = nullptr;
    std::uint64_t head = 0;
    int peer = -1;
  };

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
      if (o.tail + total - o.head_seen > cap) return nullptr;
    }
    if (contiguous < need) {  // the message would straddle the end: wrap to the start
      write_header(o.data + off, 0, kWrap);
      o.tail += contiguous;  // published together with the message
      return o.data;
    }
    return o.data + off;
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

  void setup(MPI_Comm comm, MPI_Comm host) {
    int host_size = 1, host_rank = 0, world_rank = 0;
    MPI_Comm_size(host, &host_size);
    MPI_Comm_rank(host, &host_rank);
    MPI_Comm_rank(comm, &world_rank);
    std::vector<int> ranks(static_cast<std::size_t>(host_size));
    check_mpi(MPI_Allgather(&world_rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, host),
              "MPI_Allgather (host ranks)");
    const int my_pid = static_cast<int>(getpid());
    pids_.assign(static_cast<std::size_t>(host_size), 0);
    checked_.assign(static_cast<std::size_t>(host_size), std::chrono::steady_clock::time_point{});
    check_mpi(MPI_Allgather(&my_pid, 1, MPI_INT, pids_.data(), 1, MPI_INT, host),
              "MPI_Allgather (host pids)");
    // A name no other job on this host uses: the host's first rank draws it.
    std::uint64_t token = 0;
    if (host_rank == 0) {
      std::random_device rd;
      token =
          (std::uint64_t{rd()} << 32) ^ rd() ^ static_cast<std::uint64_t>(getpid()) ^
          static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    check_mpi(MPI_Bcast(&token, 1, MPI_UINT64_T, 0, host), "MPI_Bcast (segment name)");
    const auto name_of = [&](int h) {
      return "/netsparse-" + std::to_string(token) + "-" + std::to_string(h);
    };
    // One ring per other rank of the host (none for the rank itself).
    const std::size_t seg_bytes = ring_stride() * static_cast<std::size_t>(host_size - 1);
    segments_.assign(static_cast<std::size_t>(host_size), nullptr);
    failed_.assign(static_cast<std::size_t>(host_size), 0);
    seg_bytes_ = seg_bytes;
    // 1. Every rank creates its own segment (the rings it receives on).
    int ok = 1;
    std::string why;
    {
      const int fd = shm_open(name_of(host_rank).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) {
        ok = 0;
        why = "shm_open: " + std::string(std::strerror(errno));
      } else {
        const int rc = posix_fallocate(fd, 0, static_cast<off_t>(seg_bytes));
        if (rc != 0) {
          ok = 0;
          why = "posix_fallocate of " + std::to_string(seg_bytes) + " bytes: " + std::strerror(rc);
        } else {
          // Read here (faults map 16 pages at a time); written through the peers' mappings.
          void* p = mmap(nullptr, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (p == MAP_FAILED) {
            ok = 0;
            why = "mmap: " + std::string(std::strerror(errno));
          } else {
            segments_[static_cast<std::size_t>(host_rank)] = static_cast<std::byte*>(p);
            for (int s = 0; s < host_size; ++s) {
              if (s != host_rank) new (control_at(host_rank, s)) RingControl{};
            }
          }
        }
        close(fd);
      }
    }
    agree(host, ok, why, name_of(host_rank));
    // 2. Every rank maps every peer's segment.
    for (int h = 0; h < host_size && ok; ++h) {
      if (h == host_rank) continue;
      const int fd = shm_open(name_of(h).c_str(), O_RDWR, 0600);
      if (fd < 0) {
        ok = 0;
        why = "shm_open of a peer's segment: " + std::string(std::strerror(errno));
        break;
      }
      void* p = mmap(nullptr, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (p == MAP_FAILED) {
        ok = 0;
        why = "mmap of a peer's segment: " + std::string(std::strerror(errno));
        break;
      }
      segments_[static_cast<std::size_t>(h)] = static_cast<std::byte*>(p);
    }
    agree(host, ok, why, name_of(host_rank));
    shm_unlink(name_of(host_rank).c_str());  // everybody has it mapped: nothing can leak now
    // 3. Wire the rings.
    out_.assign(static_cast<std::size_t>(host_size), Outbound{});
    in_.assign(static_cast<std::size_t>(host_size), Inbound{});
    for (int h = 0; h < host_size; ++h) {
      host_index_[static_cast<std::size_t>(ranks[static_cast<std::size_t>(h)])] = h;
      if (h == host_rank) continue;
      Outbound& o = out_[static_cast<std::size_t>(h)];
      o.control = control_at(h, host_rank);  // in h's segment, the ring from me
      o.data = reinterpret_cast<std::byte*>(o.control) + kControlBytes;
      populate_for_writing(o.control, ring_stride());
      Inbound& in = in_[static_cast<std::size_t>(h)];
      in.control = control_at(host_rank, h);
      in.data = reinterpret_cast<std::byte*>(in.control) + kControlBytes;
      in.peer = ranks[static_cast<std::size_t>(h)];
    }
    remote_hosts_ = host_size < static_cast<int>(host_index_.size());
  }

  // All ranks of the host succeed or all fail (then with this rank's reason, else the first
  // failing rank's).
  void agree(MPI_Comm host, int ok, const std::string& why, const std::string& own_name) {
    agreement::Agreement mine;
    if (!ok) mine.refuse(1, why.empty() ? "failed" : why);
    const agreement::Verdict verdict = agreement::settle_over_mpi(mine, host);
    if (verdict.ok()) return;
    shm_unlink(own_name.c_str());
    throw std::runtime_error("shared-memory rings unavailable: " +
                             (mine.refused() ? mine.reason() : "host " + verdict.reason));
  }

  // The ring this rank writes into a peer's segment is mapped writable now, not one write fault
  // per page during the first runs (measured: ~1500 faults per rank over the first 10 replays of
  // the main job). Only that ring: the rest of the peer's segment is other ranks' rings, and
  // populating it all would cost every rank host_size x 256 MiB of page tables on a large host.
  // Best effort: a kernel without MADV_POPULATE_WRITE (before 5.14) faults the pages in later.
  static void populate_for_writing(void* at, std::size_t bytes) noexcept {
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(at) & ~(page - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(at) + bytes + page - 1) & ~(page - 1);
    (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
  }

  // The ring from `sender` in `owner`'s segment (sender != owner: slots skip the owner).
  RingControl* control_at(int owner, int sender) const {
    const int slot = sender < owner ? sender : sender - 1;
    return reinterpret_cast<RingControl*>(segments_[static_cast<std::size_t>(owner)] +
                                          ring_stride() * static_cast<std::size_t>(slot));
  }

  void unmap_all() noexcept {
    for (std::byte*& p : segments_) {
      if (p != nullptr) munmap(p, seg_bytes_);
      p = nullptr;
    }
  }

  std::unique_ptr<Transport> inner_;
  const std::size_t ring_bytes_;
  std::size_t seg_bytes_ = 0;
  std::vector<int> host_index_;  // world rank -> index among this host's ranks, -1 elsewhere
  std::vector<std::byte*> segments_;
  std::vector<Outbound> out_;
  std::vector<Inbound> in_;
  mutable std::vector<unsigned char> failed_;  // by host index: process gone or ring corrupt
  std::vector<int> pids_;                      // by host index
  mutable std::vector<std::chrono::steady_clock::time_point> checked_;
  std::uint64_t ring_bytes_sent_ = 0;
  struct RegionSpan {
    std::uint64_t base;
    std::uint64_t bytes;
  };
  std::map<int, std::vector<RegionSpan>> spans_;  // region -> every rank's (base, size)
  std::deque<ReadCompletion> direct_done_;        // reads done by process_vm_readv
  bool direct_reads_ = true;
  static constexpr int kInnerPollEvery = 64;
  bool remote_hosts_ = true;  // some rank is on another host: MPI is polled every time
  bool self_sends_ = false;
  int polls_since_inner_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_host_shm_transport(MPI_Comm comm, std::unique_ptr<Transport> inner,
                                                   std::size_t ring_bytes, std::string* why_not) {
  int host_size = 1;
  {
    MPI_Comm host = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host),
              "MPI_Comm_split_type");
    MPI_Comm_size(host, &host_size);
    MPI_Comm_free(&host);
  }
  if (host_size < 2) {
    if (why_not != nullptr) *why_not = "no other rank on this host";
    return inner;
  }
  if (ring_bytes == 0) {
    // 256 MiB of rings per host at most, 2 MiB per pair at most. Measured (main job, np 2):
    // opening with 8 MiB rings took ~10 ms (populating the written side, below), 2 MiB ~4 ms,
    // at the same time per run at K = 16 and 128: the consumer drains while the producer
    // writes, so a ring need not hold a whole run's frames.
    const std::size_t pairs =
        static_cast<std::size_t>(host_size) * static_cast<std::size_t>(host_size);
    ring_bytes = std::min<std::size_t>(std::size_t{2} << 20, (std::size_t{256} << 20) / pairs);
  }
  // Room for 4 largest messages at least.
  ring_bytes = std::max(ring_bytes, 4 * padded(inner->max_packet_bytes() + kHeader));
  ring_bytes = std::bit_ceil(ring_bytes);
  try {
    return std::make_unique<HostShmTransport>(comm, inner, ring_bytes);
  } catch (const std::exception& e) {
    // Every rank of the host saw the same failure (agreed): MPI alone carries everything.
    if (why_not != nullptr) *why_not = e.what();
    return inner;
  }
}

}  // namespace netsparse::transport
