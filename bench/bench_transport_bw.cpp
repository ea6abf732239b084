// Transport line rate: large-packet streaming bandwidth, small-packet round-trip latency and
// tiny-read rate, per transport, measured side by side in one run. The streaming figure is the
// "line rate" that later benchmarks divide by (line utilization = wire bytes/s / line rate).
//
//   mpirun -np 2 bench_transport_bw [--seconds S] [--packet BYTES] [--transports inproc,mpi,verbs]
//
// Rank 0 sends, rank 1 receives; other ranks idle. inproc runs two threads inside rank 0. The
// read section also compares, on a raw MPI window, request-based gets (MPI_Rget + MPI_Testsome,
// what the MPI transport uses) with MPI_Get + MPI_Win_flush_local_all per batch.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "stats.hpp"
#include "transport/transport_factory.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using namespace netsparse::transport;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Settings {
  double seconds = 1.0;
  std::size_t packet = 0;  // 0: the transport's max_packet_bytes
  std::vector<std::string> transports = {"inproc", "mpi", "verbs"};
  int pingpongs = 5000;
  int reads = 50000;
  int read_window = 64;
};

constexpr std::byte kData{0x00};
constexpr std::byte kEnd{0xEE};

// Rank `tx` streams packets of `packet` bytes to `rx` for `seconds`, then an end marker; the
// receiver measures from its first to its last byte. Returns bytes/s on the receiver.
double stream(Transport& t, int tx, int rx, std::size_t packet, double seconds) {
  std::vector<std::byte> buf(packet, kData);
  double rate = 0;
  if (t.rank() == tx) {
    const auto t0 = Clock::now();
    while (seconds_since(t0) < seconds) {
      for (int k = 0; k < 64; ++k) {
        if (t.send(rx, buf) != TxStatus::kOk) break;
      }
      t.poll([](const ReceivedPacket&) {}, 64);
    }
    buf.assign(1, kEnd);
    while (t.send(rx, buf) != TxStatus::kOk) t.poll([](const ReceivedPacket&) {}, 64);
  } else if (t.rank() == rx) {
    std::uint64_t bytes = 0;
    bool first = true, done = false;
    Clock::time_point start;
    while (!done) {
      t.poll(
          [&](const ReceivedPacket& p) {
            if (p.bytes[0] == kEnd) {
              done = true;
              return;
            }
            if (first) {
              start = Clock::now();
              first = false;
            } else {
              bytes += p.bytes.size();  // the first packet only starts the clock
            }
          },
          256);
    }
    rate = bytes / seconds_since(start);
    // Report the figure back to the sender (rank 0 prints) over the transport itself.
    std::byte report[sizeof rate];
    std::memcpy(report, &rate, sizeof rate);
    while (t.send(tx, report) != TxStatus::kOk) t.poll([](const ReceivedPacket&) {}, 64);
  }
  if (t.rank() == tx) {
    bool got = false;
    while (!got) {
      t.poll(
          [&](const ReceivedPacket& p) {
            if (p.src == rx && p.bytes.size() == sizeof rate) {
              std::memcpy(&rate, p.bytes.data(), sizeof rate);
              got = true;
            }
          },
          64);
    }
  }
  return rate;
}

// Half the round trip of an 8-byte packet between tx and rx, in microseconds.
double pingpong(Transport& t, int tx, int rx, int iterations) {
  std::vector<std::byte> buf(8, kData);
  int received = 0;
  auto count = [&](const ReceivedPacket&) { ++received; };
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (t.rank() == tx) {
      while (t.send(rx, buf) != TxStatus::kOk) t.poll(count, 1);
      while (received <= i) t.poll(count, 1);
    } else if (t.rank() == rx) {
      while (received <= i) t.poll(count, 1);
      while (t.send(tx, buf) != TxStatus::kOk) t.poll(count, 1);
    }
  }
  return seconds_since(t0) / iterations / 2 * 1e6;
}

// 8-byte reads by tx from rx's region, `window` outstanding; reads per second. rx polls (the
// message-based MPI reads need it) until tx says it is done.
double read_rate(Transport& t, int tx, int rx, int reads, int window) {
  std::vector<std::byte> region(1 << 20, std::byte{1});
  const int id = t.register_memory(region.data(), region.size());
  std::vector<std::byte> out(static_cast<std::size_t>(window) * 8);
  std::vector<ReadCompletion> done(static_cast<std::size_t>(window));
  double rate = 0;
  if (t.rank() == tx) {
    int issued = 0, completed = 0;
    const auto t0 = Clock::now();
    while (completed < reads) {
      while (issued < reads && issued - completed < window) {
        const auto slot = static_cast<std::size_t>(issued % window);
        if (t.read(rx, id, (static_cast<std::uint64_t>(issued) * 4096) % (region.size() - 8),
                   out.data() + slot * 8, 8, static_cast<std::uint64_t>(issued)) != TxStatus::kOk) {
          break;
        }
        ++issued;
      }
      completed += t.poll_reads(done.data(), window);
      t.poll([](const ReceivedPacket&) {}, 16);
    }
    rate = reads / seconds_since(t0);
    const std::byte end[1] = {kEnd};
    while (t.send(rx, end) != TxStatus::kOk) t.poll([](const ReceivedPacket&) {}, 16);
  } else if (t.rank() == rx) {
    bool finished = false;
    while (!finished) t.poll([&](const ReceivedPacket& p) { finished = p.bytes[0] == kEnd; }, 16);
  }
  t.deregister_memory(id);
  return rate;
}

struct Figures {
  double bandwidth = 0;  // bytes/s
  double latency_us = 0;
  double reads_per_s = 0;
  std::size_t packet = 0;
};

Figures measure(Transport& t, const Settings& s) {
  Figures f;
  f.packet = s.packet ? std::min(s.packet, t.max_packet_bytes()) : t.max_packet_bytes();
  t.barrier();
  f.bandwidth = stream(t, 0, 1, f.packet, s.seconds);
  t.barrier();
  f.latency_us = pingpong(t, 0, 1, s.pingpongs);
  t.barrier();
  f.reads_per_s = read_rate(t, 0, 1, s.reads, s.read_window);
  t.barrier();
  return f;
}

void print(const char* name, const Figures& f) {
  std::printf("%-16s packet %6zu B  stream %9.1f MB/s  latency %7.2f us  8B reads %9.0f /s\n", name,
              f.packet, f.bandwidth / 1e6, f.latency_us, f.reads_per_s);
  std::printf("  line_rate transport=%s packet_bytes=%zu bytes_per_s=%.0f\n", name, f.packet,
              f.bandwidth);
}

// Raw MPI streaming with the same packet size and a window of 64 (Isend/Irecv + Waitall): what
// the MPI transport's own bookkeeping is compared with. Bytes/s on rank 1, returned on rank 0.
double raw_mpi_stream(std::size_t packet, double seconds) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  constexpr int kWindow = 64;
  std::vector<std::byte> buf(packet * kWindow);
  std::vector<MPI_Request> req(kWindow);
  int go = 1;
  double rate = 0;
  if (rank == 0) {
    const auto t0 = Clock::now();
    while (go) {
      go = seconds_since(t0) < seconds ? 1 : 0;
      MPI_Send(&go, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
      if (!go) break;
      for (int w = 0; w < kWindow; ++w) {
        MPI_Isend(buf.data() + w * packet, static_cast<int>(packet), MPI_BYTE, 1, 2, MPI_COMM_WORLD,
                  &req[static_cast<std::size_t>(w)]);
      }
      MPI_Waitall(kWindow, req.data(), MPI_STATUSES_IGNORE);
    }
    MPI_Recv(&rate, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    std::uint64_t bytes = 0;
    const auto t0 = Clock::now();
    for (;;) {
      MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!go) break;
      for (int w = 0; w < kWindow; ++w) {
        MPI_Irecv(buf.data() + w * packet, static_cast<int>(packet), MPI_BYTE, 0, 2, MPI_COMM_WORLD,
                  &req[static_cast<std::size_t>(w)]);
      }
      MPI_Waitall(kWindow, req.data(), MPI_STATUSES_IGNORE);
      bytes += packet * kWindow;
    }
    rate = bytes / seconds_since(t0);
    MPI_Send(&rate, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
  }
  return rate;
}

// Raw MPI comparison for many tiny gets: request-based vs flush per batch.
void raw_get_comparison(int reads, int window) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<std::byte> region(1 << 20, std::byte{1});
  MPI_Win win;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (MPI_Win_create(region.data(), static_cast<MPI_Aint>(region.size()), 1, MPI_INFO_NULL,
                     MPI_COMM_WORLD, &win) != MPI_SUCCESS) {
    if (rank == 0) std::printf("raw MPI gets: MPI_Win_create not supported on this path\n");
    return;
  }
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  std::vector<std::byte> out(static_cast<std::size_t>(window) * 8);
  double rget_rate = 0, flush_rate = 0;
  if (rank == 0) {
    std::vector<MPI_Request> req(static_cast<std::size_t>(window), MPI_REQUEST_NULL);
    std::vector<int> idx(static_cast<std::size_t>(window));
    auto t0 = Clock::now();
    int issued = 0, completed = 0;
    while (completed < reads) {
      for (int w = 0; w < window && issued < reads; ++w) {
        if (req[static_cast<std::size_t>(w)] != MPI_REQUEST_NULL) continue;
        MPI_Rget(out.data() + w * 8, 8, MPI_BYTE, 1, (issued * 4096L) % (1 << 19), 8, MPI_BYTE, win,
                 &req[static_cast<std::size_t>(w)]);
        ++issued;
      }
      int n = 0;
      MPI_Testsome(window, req.data(), &n, idx.data(), MPI_STATUSES_IGNORE);
      if (n != MPI_UNDEFINED) completed += n;
    }
    rget_rate = reads / seconds_since(t0);
    t0 = Clock::now();
    for (int done = 0; done < reads; done += window) {
      for (int w = 0; w < window; ++w) {
        MPI_Get(out.data() + w * 8, 8, MPI_BYTE, 1, ((done + w) * 4096L) % (1 << 19), 8, MPI_BYTE,
                win);
      }
      MPI_Win_flush_local_all(win);
    }
    flush_rate = reads / seconds_since(t0);
    std::printf(
        "raw MPI 8B gets, window %d: Rget+Testsome %9.0f /s   Get+flush_local_all %9.0f /s\n",
        window, rget_rate, flush_rate);
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
}

const char* const kHelp =
    "usage: mpirun -np 2 bench_transport_bw [--seconds S] [--packet BYTES]\n"
    "                                       [--transports inproc,mpi,verbs]\n"
    "  --seconds S        length of each stream (default 1)\n"
    "  --packet BYTES     message size (default: each transport's largest message)\n"
    "  --transports LIST  inproc, mpi, verbs, comma-separated (default all)\n"
    "Exit codes: 0 done, 1 a transport failed, 2 a bad option.\n";

// Every rank parses the same argv; rank 0 prints. -1: go on, else the exit code.
int parse(int argc, char** argv, int rank, Settings& s) {
  namespace nb = netsparse::bench;
  cli::App app{"bench_transport_bw"};
  app.add_option("--seconds", s.seconds)->check(cli::Range(1e-3, 1e6));
  app.add_option("--packet", s.packet)->check(cli::Range(0, 1 << 30));
  app.add_option_function<std::string>("--transports", [&](const std::string& v) {
    s.transports = nb::member_list("--transports", v, {"inproc", "mpi", "verbs"});
  });
  return nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_transport_bw",
                                 kHelp, rank == 0);
}

// A barrier that sleeps instead of spinning: idle ranks must not steal the cores the measured
// ranks (or inproc threads) run on.
void sleepy_barrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  while (!done) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool wanted(const Settings& s, const char* name) {
  return std::find(s.transports.begin(), s.transports.end(), name) != s.transports.end();
}

int run_benchmark(Settings& s, const netsparse::bench::World& world) {
  const int rank = world.rank, size = world.size;
  int rc = 0;
  try {
    if (rank == 0) {
      std::printf("transport line rate: %d ranks, %.1f s streams, %d ping-pongs, %d reads\n", size,
                  s.seconds, s.pingpongs, s.reads);
    }
    if (wanted(s, "inproc")) {
      if (rank == 0) {
        InprocOptions options;
        options.max_packet_bytes = s.packet ? s.packet : 4096;
        InprocFabric fabric(2, options);
        auto a = fabric.endpoint(0);
        auto b = fabric.endpoint(1);
        std::jthread other([&] { measure(*b, s); });
        print("inproc", measure(*a, s));
      }
      sleepy_barrier();
    }
    if (size >= 2 && wanted(s, "mpi")) {
      for (MpiReadMode mode : {MpiReadMode::kAuto, MpiReadMode::kMessages}) {
        MpiOptions options;
        if (s.packet) options.max_packet_bytes = s.packet;
        options.read_mode = mode;
        auto t = make_mpi_transport(MPI_COMM_WORLD, false, options);
        const Figures f = measure(*t, s);
        if (rank == 0) print(mode == MpiReadMode::kAuto ? "mpi" : "mpi(msg reads)", f);
      }
      const std::size_t packet = s.packet ? s.packet : MpiOptions{}.max_packet_bytes;
      const double raw = raw_mpi_stream(packet, s.seconds);
      if (rank == 0) {
        std::printf("raw MPI stream  packet %6zu B  stream %9.1f MB/s (Isend/Irecv, window 64)\n",
                    packet, raw / 1e6);
      }
      raw_get_comparison(s.reads, s.read_window);
    }
    if (size >= 2 && wanted(s, "verbs")) {
      if (verbs_device_available()) {
        VerbsOptions options = VerbsOptions::from_env();
        if (s.packet) options.max_packet_bytes = s.packet;
        auto t = make_verbs_transport(MPI_COMM_WORLD, options);
        const Figures f = measure(*t, s);
        if (rank == 0) print("verbs", f);
      } else if (rank == 0) {
        std::printf("verbs: SKIPPED (no RDMA device with an ACTIVE port)\n");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  return netsparse::bench::run_job(argc, argv, parse, run_benchmark);
}
