// Conformance checks written once against the Transport interface and run on every transport
// (inproc threads, mpirun ranks, verbs ranks). They return an error description instead of
// using gtest assertions so that they can run on any thread and be combined across ranks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.hpp"

namespace netsparse::transport::testing {

inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finalizer: a cheap keyed hash
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr std::uint32_t kMagic = 0x7e57da7a;
constexpr std::size_t kHeaderBytes = 16;  // magic, src, dst, seq

// Length of packet `seq` from src to dst: known to both sides, so the receiver checks it.
inline std::size_t packet_length(std::uint64_t seed, int src, int dst, std::uint32_t seq,
                                 std::size_t max_bytes) {
  const std::uint64_t h =
      mix64(seed ^ (std::uint64_t(src) << 44) ^ (std::uint64_t(dst) << 24) ^ seq);
  // A quarter of the packets are exactly max-size: the boundary is the interesting case.
  if ((h & 3) == 0) return max_bytes;
  return kHeaderBytes + static_cast<std::size_t>((h >> 2) % (max_bytes - kHeaderBytes + 1));
}

inline std::byte payload_byte(std::uint64_t seed, int src, int dst, std::uint32_t seq,
                              std::size_t i) {
  return static_cast<std::byte>(mix64(seed + (std::uint64_t(src) << 48) +
                                      (std::uint64_t(dst) << 32) + seq * 1315423911ull + i / 8) >>
                                ((i % 8) * 8));
}

inline void fill_packet(std::vector<std::byte>& buf, std::uint64_t seed, int src, int dst,
                        std::uint32_t seq, std::size_t len) {
  buf.resize(len);
  const std::uint32_t header[4] = {kMagic, static_cast<std::uint32_t>(src),
                                   static_cast<std::uint32_t>(dst), seq};
  std::memcpy(buf.data(), header, kHeaderBytes);
  for (std::size_t i = kHeaderBytes; i < len; ++i) buf[i] = payload_byte(seed, src, dst, seq, i);
}

struct ExchangeConfig {
  int packets_per_peer = 200;
  std::uint64_t seed = 1;
  int poll_batch = 16;
  std::size_t packet_bytes = 0;  // 0: t.max_packet_bytes()
};

struct ExchangeResult {
  std::string error;  // empty: every packet arrived once, in order, byte-exact
  std::uint64_t no_resource = 0;
  std::uint64_t received = 0;
};

// Every rank sends packets_per_peer packets to every rank (itself included), round-robin over
// destinations so that traffic interleaves, and checks every packet it receives: header,
// length, every payload byte, and per-source order. step() makes one send attempt and polls
// now and then, so a test can interleave other work (application MPI traffic) between steps.
// done() when this rank has sent and received everything (other ranks may still be receiving:
// call barrier() after).
class Exchange {
 public:
  Exchange(Transport& t, const ExchangeConfig& cfg)
      : t_(t),
        cfg_(cfg),
        n_(t.size()),
        me_(t.rank()),
        max_bytes_(cfg.packet_bytes ? cfg.packet_bytes : t.max_packet_bytes()),
        next_send_(static_cast<std::size_t>(n_), 0),
        next_recv_(static_cast<std::size_t>(n_), 0),
        expected_(std::uint64_t(cfg.packets_per_peer) * std::uint64_t(n_)),
        dest_((me_ + 1) % n_) {
    if (cfg.packets_per_peer == 0) dests_done_ = n_;
  }

  bool done() const {
    return !result_.error.empty() || (dests_done_ == n_ && result_.received >= expected_);
  }
  const ExchangeResult& result() const { return result_; }

  void step() {
    if (!result_.error.empty()) return;
    if (dests_done_ < n_) {
      while (next_send_[static_cast<std::size_t>(dest_)] ==
             static_cast<std::uint32_t>(cfg_.packets_per_peer)) {
        dest_ = (dest_ + 1) % n_;
      }
      const std::uint32_t seq = next_send_[static_cast<std::size_t>(dest_)];
      fill_packet(buf_, cfg_.seed, me_, dest_, seq,
                  packet_length(cfg_.seed, me_, dest_, seq, max_bytes_));
      const TxStatus st = t_.send(dest_, buf_);
      if (st == TxStatus::kOk) {
        if (++next_send_[static_cast<std::size_t>(dest_)] ==
            static_cast<std::uint32_t>(cfg_.packets_per_peer)) {
          ++dests_done_;
        }
        dest_ = (dest_ + 1) % n_;
      } else if (st == TxStatus::kNoResource) {
        ++result_.no_resource;
        // Back off when there is nothing to receive either: with more node threads than cores
        // the receiver we wait for needs the CPU.
        if (poll() == 0) std::this_thread::yield();
      } else {
        result_.error =
            std::string("send to ") + std::to_string(dest_) + " returned " + to_string(st);
      }
    }
    // Poll every few sends, and on every step once everything is sent.
    if ((++iteration_ & 3) == 0 || dests_done_ == n_) {
      if (poll() == 0 && dests_done_ == n_) std::this_thread::yield();
    }
  }

  // Call once this rank is done() and the run is over: nothing more may arrive.
  void finish() {
    if (result_.error.empty() && result_.received != expected_) {
      result_.error = "received " + std::to_string(result_.received) + " packets, expected " +
                      std::to_string(expected_);
    }
  }

 private:
  int poll() {
    return t_.poll([this](const ReceivedPacket& p) { check(p); }, cfg_.poll_batch);
  }

  void check(const ReceivedPacket& p) {
    ++result_.received;
    if (!result_.error.empty()) return;
    std::uint32_t header[4] = {};
    if (p.bytes.size() < kHeaderBytes) {
      result_.error = "short packet of " + std::to_string(p.bytes.size()) + " bytes";
      return;
    }
    std::memcpy(header, p.bytes.data(), kHeaderBytes);
    const int src = static_cast<int>(header[1]);
    if (header[0] != kMagic || src != p.src || header[2] != static_cast<std::uint32_t>(me_) ||
        p.src < 0 || p.src >= n_) {
      result_.error = "bad header: reported src " + std::to_string(p.src) + ", header src " +
                      std::to_string(src) + " dst " + std::to_string(header[2]);
      return;
    }
    const std::uint32_t seq = header[3];
    if (seq != next_recv_[static_cast<std::size_t>(src)]) {
      result_.error = "order broken from " + std::to_string(src) + ": got seq " +
                      std::to_string(seq) + ", expected " +
                      std::to_string(next_recv_[static_cast<std::size_t>(src)]);
      return;
    }
    ++next_recv_[static_cast<std::size_t>(src)];
    const std::size_t len = packet_length(cfg_.seed, src, me_, seq, max_bytes_);
    if (p.bytes.size() != len) {
      result_.error = "packet " + std::to_string(seq) + " from " + std::to_string(src) + " has " +
                      std::to_string(p.bytes.size()) + " bytes, expected " + std::to_string(len);
      return;
    }
    for (std::size_t i = kHeaderBytes; i < len; ++i) {
      if (p.bytes[i] != payload_byte(cfg_.seed, src, me_, seq, i)) {
        result_.error = "byte " + std::to_string(i) + " of packet " + std::to_string(seq) +
                        " from " + std::to_string(src) + " differs";
        return;
      }
    }
  }

  Transport& t_;
  const ExchangeConfig cfg_;
  const int n_;
  const int me_;
  const std::size_t max_bytes_;
  std::vector<std::uint32_t> next_send_;
  std::vector<std::uint32_t> next_recv_;
  const std::uint64_t expected_;
  int dest_;
  int dests_done_ = 0;
  std::uint64_t iteration_ = 0;
  std::vector<std::byte> buf_;
  ExchangeResult result_;
};

inline ExchangeResult all_to_all(Transport& t, const ExchangeConfig& cfg) {
  Exchange exchange(t, cfg);
  while (!exchange.done()) exchange.step();
  exchange.finish();
  return exchange.result();
}

inline std::byte region_byte(int rank, std::uint64_t i) {
  return static_cast<std::byte>(mix64((std::uint64_t(rank) << 40) ^ (i / 8)) >> ((i % 8) * 8));
}

// Region size differs per rank so that bounds are checked against the right peer's size.
inline std::size_t region_size_of(int rank, std::size_t base) {
  return base + 13 * std::size_t(rank);
}

struct ReadCheckConfig {
  std::size_t region_base_bytes = 1 << 16;
  int reads = 2000;
  std::size_t max_read = 1024;
  std::uint64_t seed = 7;
};

// Registers a region per rank (collective), reads random ranges from every rank (itself
// included) and checks every byte and that each cookie completes exactly once; then checks that
// out-of-range / invalid reads are refused with kError and produce no completion. Deregisters
// (collective) before returning.
inline std::string read_check(Transport& t, const ReadCheckConfig& cfg) {
  const int n = t.size();
  const int me = t.rank();
  std::vector<std::byte> region(region_size_of(me, cfg.region_base_bytes));
  for (std::size_t i = 0; i < region.size(); ++i) region[i] = region_byte(me, i);
  const int id = t.register_memory(region.data(), region.size());
  std::string error;
  const std::size_t max_read = std::min(cfg.max_read, t.max_read_bytes());

  struct Pending {
    int dest;
    std::uint64_t offset;
    std::size_t bytes;
    bool done;
  };
  std::vector<Pending> pending(static_cast<std::size_t>(cfg.reads));
  std::vector<std::byte> out(static_cast<std::size_t>(cfg.reads) * max_read);
  std::vector<ReadCompletion> completions(64);
  int completed = 0;
  auto reap = [&] {
    const int k = t.poll_reads(completions.data(), static_cast<int>(completions.size()));
    for (int i = 0; i < k && error.empty(); ++i) {
      const ReadCompletion& c = completions[static_cast<std::size_t>(i)];
      if (c.cookie >= pending.size() || pending[c.cookie].done) {
        error = "unexpected or duplicate read completion, cookie " + std::to_string(c.cookie);
        break;
      }
      Pending& p = pending[c.cookie];
      p.done = true;
      ++completed;
      if (!c.ok) {
        error = "read from " + std::to_string(p.dest) + " completed with ok=false";
        break;
      }
      const std::byte* got = out.data() + c.cookie * max_read;
      for (std::size_t b = 0; b < p.bytes; ++b) {
        if (got[b] != region_byte(p.dest, p.offset + b)) {
          error = "read from " + std::to_string(p.dest) + " offset " + std::to_string(p.offset) +
                  ": byte " + std::to_string(b) + " differs";
          break;
        }
      }
    }
  };
  for (int r = 0; r < cfg.reads && error.empty(); ++r) {
    const std::uint64_t h = mix64(cfg.seed ^ (std::uint64_t(me) << 32) ^ std::uint64_t(r));
    Pending& p = pending[static_cast<std::size_t>(r)];
    p.dest = static_cast<int>(h % std::uint64_t(n));
    const std::size_t size = region_size_of(p.dest, cfg.region_base_bytes);
    p.bytes = 1 + static_cast<std::size_t>((h >> 16) % max_read);
    // Every eighth read ends exactly at the end of the peer's region.
    p.offset = (h >> 40) % 8 == 0 ? size - p.bytes : (h >> 24) % (size - p.bytes + 1);
    p.done = false;
    for (;;) {
      const TxStatus st = t.read(p.dest, id, p.offset, out.data() + std::size_t(r) * max_read,
                                 p.bytes, static_cast<std::uint64_t>(r));
      if (st == TxStatus::kOk) break;
      if (st != TxStatus::kNoResource) {
        error = std::string("valid read returned ") + to_string(st);
        break;
      }
      reap();
      if (!error.empty()) break;
    }
  }
  while (error.empty() && completed < cfg.reads) reap();

  // Invalid reads: refused up front, no completion.
  std::byte scratch[16];
  for (int d = 0; d < n && error.empty(); ++d) {
    const std::uint64_t size = region_size_of(d, cfg.region_base_bytes);
    struct Bad {
      int dest;
      int region;
      std::uint64_t offset;
      std::size_t bytes;
      const char* what;
    } bad[] = {
        {d, id, size - 1, 2, "one byte past the end"},
        {d, id, size + 1, 0, "offset past the end"},
        {d, id, UINT64_MAX, 1, "offset overflow"},
        {d, id, 1, static_cast<std::size_t>(size), "length past the end"},
        {d, id + 7, 0, 1, "unregistered region"},
        {d, -1, 0, 1, "negative region"},
        {n, id, 0, 1, "rank == size"},
        {-1, id, 0, 1, "negative rank"},
    };
    for (const Bad& b : bad) {
      const TxStatus st = t.read(b.dest, b.region, b.offset, scratch, b.bytes, 1u << 30);
      if (st != TxStatus::kError) {
        error = std::string("invalid read (") + b.what + ", dest " + std::to_string(d) +
                ") returned " + to_string(st) + " instead of kError";
        break;
      }
    }
    // An empty range at the very end is valid and completes.
    if (error.empty()) {
      TxStatus st;
      while ((st = t.read(d, id, size, scratch, 0, 1u << 31)) == TxStatus::kNoResource) {
        t.poll_reads(completions.data(), static_cast<int>(completions.size()));
      }
      if (st != TxStatus::kOk) error = std::string("empty read at end returned ") + to_string(st);
      int got = 0;
      while (error.empty() && got == 0) {
        got = t.poll_reads(completions.data(), 1);
        if (got == 1 && (completions[0].cookie != (1u << 31) || !completions[0].ok)) {
          error = "wrong completion for the empty read (cookie " +
                  std::to_string(completions[0].cookie) + ")";
        }
      }
    }
  }
  if (error.empty() && t.poll_reads(completions.data(), 64) != 0) {
    error = "a refused read produced a completion";
  }
  t.deregister_memory(id);
  return error;
}

// Argument validation of send(): the same everywhere.
inline std::string send_validation_check(Transport& t) {
  const std::vector<std::byte> ok(8), big(t.max_frame_bytes(0) + 1);
  const struct {
    int dest;
    std::span<const std::byte> bytes;
    const char* what;
  } cases[] = {
      {-1, ok, "negative rank"},
      {t.size(), ok, "rank == size"},
      {0, std::span<const std::byte>(), "empty packet"},
      {0, big, "packet larger than max_frame_bytes"},
  };
  for (const auto& c : cases) {
    const TxStatus st = t.send(c.dest, c.bytes);
    if (st != TxStatus::kError) {
      return std::string("send(") + c.what + ") returned " + to_string(st) + " instead of kError";
    }
  }
  return {};
}

}  // namespace netsparse::transport::testing
