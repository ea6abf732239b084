// Allreduce benchmark: every variant side by side in one run, medians over --rounds.
//
//   mpirun -np P bench_allreduce [--sizes-mib 1,4,16,64] [--rounds 3] [--json PATH]
//                                [--sparse-n LIST] [--densities 0.01,0.5] [--no-dense]
//                                [--no-sparse]
//                                [--no-family] [--concurrent 8] [--concurrent-mib 1]
//                                [--hierarchy]
//
// Dense (fp32 sum, every size): MPI_Allreduce, and NetSparse's allreduce over its own transport
// with each of Flare's designs (single buffer, 2 and 4 buffers, the reproducible tree) and the
// automatic choice. Sparse (fp32 sum of vectors of length N, each rank holding density * N
// distinct random indices): NetSparse's sparse allreduce, against MPI_Allreduce of the dense
// vector (alone, and with the densification a sparse holder must do first) and NetSparse's dense
// allreduce of it, and a SparCML-style sparse allreduce over MPI point-to-point (recursive
// doubling with densification, sparcml_allreduce.hpp), checked against MPI's sum and ours.
// Dense also runs a ring allreduce over MPI point-to-point (reduce-scatter then
// all-gather around the ring, Flare's baseline). Family (every size): ns_reduce, ns_bcast,
// ns_allgather (blocking, and ns_allgather_start + ns_coll_wait beside MPI_Iallgather + MPI_Wait)
// and ns_reduce_scatter beside MPI_Reduce, MPI_Bcast, MPI_Allgather and
// MPI_Reduce_scatter_block (the size is the whole vector: all-gather and reduce-scatter move
// size / P per rank), and ns_barrier beside MPI_Barrier. Concurrent: --concurrent non-blocking
// allreduces of --concurrent-mib each outstanding at once, against one blocking allreduce of
// their total size. Every variant's result is checked against MPI_Allreduce's (integer-valued
// floats: any order gives the same bits). Time per operation = the slowest rank's; bytes = the
// transport bytes a rank sent, averaged over ranks (MPI_Allreduce: the 2 (P-1)/P N lower bound
// of any allreduce, since MPI does not report its own). Exit 0 when every variant agreed, 1
// otherwise, 2 on a bad option.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "netsparse/collectives_mpi.h"
#include "report.hpp"
#include "sparcml_allreduce.hpp"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using netsparse::bench::Json;
using netsparse::bench::median;

const char* kHelp =
    R"help(bench_allreduce: MPI_Allreduce beside NetSparse's dense allreduce designs and its sparse
allreduce, every variant side by side in one run, medians over --rounds.

usage: mpirun -np P bench_allreduce [options]

  --sizes-mib LIST     dense vector sizes in MiB, comma-separated (default 1,4,16,64)
  --densities LIST     sparse densities (fractions of N, each <= 1), comma-separated
                       (default 0.01,0.5)
  --sparse-n LIST      sparse vector lengths, comma-separated (default 16777216, 64 MiB dense)
  --rounds N           rounds of every variant; times are medians over them (default 3)
  --json PATH          also write every record as JSON (rank 0)
  --no-dense           skip the dense section
  --no-sparse          skip the sparse section
  --no-family          skip the family (reduce, broadcast, all-gather, reduce-scatter, barrier)
  --barriers N         barriers per round in the family's barrier row (default 200)
  --concurrent N       non-blocking allreduces outstanding at once (default 8; 0 skips)
  --concurrent-mib X   size of each (default 1)
  --hierarchy          also run flat against hierarchical allreduce (dense at every size, sparse
                       at every density; NETSPARSE_COLL_HIERARCHY forced per communicator) with
                       the inter-host bytes summed over the ranks (exact)
  --help               this text

Time per operation = the slowest rank's; bytes = the transport bytes a rank sent, averaged over
ranks (MPI_Allreduce: the 2 (P-1)/P N lower bound of any allreduce, marked "(model)").

Exit codes: 0 every variant agreed with MPI_Allreduce, 1 a variant disagreed, 2 a bad option.
)help";

struct Args {
  std::vector<double> sizes_mib = {1, 4, 16, 64};
  std::vector<double> densities = {0.01, 0.5};
  std::vector<std::uint64_t> sparse_ns = {16ull << 20};  // the sparse section's vector lengths
  int rounds = 3;
  std::string json;
  bool dense = true, sparse = true, family = true;
  int barriers = 200;  // barriers per round (the family's barrier row)
  int concurrent = 8;
  double concurrent_mib = 1;
  bool hierarchy = false;
};

// Every rank parses the same argv; rank 0 prints. -1: go on, else the exit code.
int parse(int argc, char** argv, int rank, Args& a) {
  namespace nb = netsparse::bench;
  cli::App app{"bench_allreduce"};
  app.add_option_function<std::string>("--sizes-mib", [&](const std::string& v) {
    a.sizes_mib = nb::positive_list("--sizes-mib", v);
  });
  app.add_option_function<std::string>("--densities", [&](const std::string& v) {
    a.densities = nb::positive_list("--densities", v);
    for (double d : a.densities) {
      if (d > 1) throw cli::ValidationError("--densities", "densities are fractions <= 1");
    }
  });
  app.add_option_function<std::string>("--sparse-n", [&](const std::string& v) {
    a.sparse_ns.clear();
    for (double n : nb::positive_list("--sparse-n", v)) {
      if (n != std::floor(n) || n > 1099511627776.0)
        throw cli::ValidationError("--sparse-n", "lengths are whole numbers from 1 to 2^40");
      a.sparse_ns.push_back(static_cast<std::uint64_t>(n));
    }
  });
  app.add_option("--rounds", a.rounds)->check(cli::Range(1, 1000000));
  app.add_option("--json", a.json);
  app.add_flag_callback("--no-dense", [&] { a.dense = false; });
  app.add_flag_callback("--no-sparse", [&] { a.sparse = false; });
  app.add_flag_callback("--no-family", [&] { a.family = false; });
  app.add_flag_callback("--hierarchy", [&] { a.hierarchy = true; });
  app.add_option("--barriers", a.barriers)->check(cli::Range(1, 100000000));
  app.add_option("--concurrent", a.concurrent)->check(cli::Range(0, 1024));
  app.add_option("--concurrent-mib", a.concurrent_mib)->check(cli::Range(1.0 / 1024, 1024.0));
  return nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_allreduce", kHelp,
                                 rank == 0);
}

// The slowest rank's time of fn (after a barrier).
double timed(MPI_Comm comm, const std::function<void()>& fn) {
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  fn();
  return netsparse::bench::max_over_ranks(MPI_Wtime() - t0, comm);
}

struct Record {
  Record(std::string s, std::string v, std::string a, double size, double d = 0)
      : section(std::move(s)),
        variant(std::move(v)),
        algorithm(std::move(a)),
        size_bytes(size),
        density(d) {}
  std::string section, variant, algorithm;
  double size_bytes = 0, density = 0;
  std::vector<double> times;
  double bytes_per_rank = 0;
  bool bytes_modelled = false;
  bool agrees = true;
  double inter_host_bytes = -1;  // summed over the ranks, exact (-1: not measured)
  double inter_rack_bytes = -1;  // the same for other racks (NETSPARSE_HOSTS_PER_RACK)
};

void check(ns_status_t s, const char* what) {
  if (s != NS_OK) {
    std::fprintf(stderr, "bench_allreduce: %s: %s\n", what, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// One run's shared state: the ranks, MPI_Allreduce's communicator, the collective context.
struct Job {
  int rank = 0, P = 1;
  MPI_Comm mpi_comm = MPI_COMM_NULL;  // MPI_Allreduce's own communicator
  ns_coll* coll = nullptr;
  bool all_agree = true;

  // The transport bytes a rank sent, averaged over the ranks (collective).
  double avg_bytes(std::uint64_t mine) const {
    return netsparse::bench::reduce_over_ranks(static_cast<double>(mine), MPI_SUM) / P;
  }
  // Did every rank's result agree? (collective; a disagreement anywhere fails the run)
  bool agree_all(bool ok) {
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    all_agree = all_agree && all == 1;
    return all == 1;
  }
};

// The ring allreduce over MPI point-to-point (the baseline of Flare's evaluation): P - 1 steps
// of reduce-scatter, each rank sending one chunk to its right neighbour and adding the chunk
// from its left, then P - 1 steps of all-gather passing the reduced chunks on. fp32 sum.
void ring_allreduce(const float* in, float* out, std::size_t count, MPI_Comm comm,
                    std::vector<float>& tmp) {
  int rank = 0, P = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &P);
  if (out != in) std::memcpy(out, in, count * sizeof(float));
  if (P == 1) return;
  const auto lo = [&](int c) { return count * static_cast<std::size_t>(c) / P; };
  const auto len = [&](int c) { return lo(c + 1) - lo(c); };
  const int right = (rank + 1) % P, left = (rank + P - 1) % P;
  tmp.resize(lo(1) + 1);
  for (int step = 0; step < P - 1; ++step) {
    const int send_c = (rank - step + P) % P, recv_c = (rank - step - 1 + P) % P;
    MPI_Sendrecv(out + lo(send_c), static_cast<int>(len(send_c)), MPI_FLOAT, right, 0, tmp.data(),
                 static_cast<int>(len(recv_c)), MPI_FLOAT, left, 0, comm, MPI_STATUS_IGNORE);
    float* acc = out + lo(recv_c);
    for (std::size_t i = 0; i < len(recv_c); ++i) acc[i] += tmp[i];
  }
  for (int step = 0; step < P - 1; ++step) {
    const int send_c = (rank + 1 - step + P) % P, recv_c = (rank - step + P) % P;
    MPI_Sendrecv(out + lo(send_c), static_cast<int>(len(send_c)), MPI_FLOAT, right, 1,
                 out + lo(recv_c), static_cast<int>(len(recv_c)), MPI_FLOAT, left, 1, comm,
                 MPI_STATUS_IGNORE);
  }
}

// Dense fp32 sums of every --sizes-mib: MPI_Allreduce, then each of NetSparse's designs.
void run_dense(Job& job, const Args& args, std::vector<Record>& records) {
  const int rank = job.rank, P = job.P;
  const MPI_Comm mpi_comm = job.mpi_comm;
  ns_coll* coll = job.coll;
  struct DenseVariant {
    const char* name;
    int algorithm;
    unsigned flags;
  };
  const DenseVariant ours[] = {{"auto", NS_ALLREDUCE_AUTO, 0},
                               {"single_buffer", NS_ALLREDUCE_SINGLE_BUFFER, 0},
                               {"multi_buffer_2", NS_ALLREDUCE_MULTI_BUFFER_2, 0},
                               {"multi_buffer_4", NS_ALLREDUCE_MULTI_BUFFER_4, 0},
                               {"tree_reproducible", NS_ALLREDUCE_AUTO, NS_ALLREDUCE_REPRODUCIBLE}};
  for (double mib : args.sizes_mib) {
    const std::size_t count = static_cast<std::size_t>(mib * (1 << 20) / 4);
    std::vector<float> in(count), ref(count), out(count);
    std::mt19937 rng(static_cast<unsigned>(rank) * 7 + 1);
    for (auto& x : in) x = static_cast<float>(static_cast<int>(rng() % 17) - 8);
    const int iters = std::clamp(static_cast<int>(16 / mib), 1, 8);
    MPI_Allreduce(in.data(), ref.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, mpi_comm);
    Record mpi{"dense", "mpi_allreduce", "mpi", static_cast<double>(count) * 4};
    mpi.bytes_per_rank = 2.0 * (P - 1) / P * count * 4;
    mpi.bytes_modelled = true;
    std::vector<Record> mine;
    for (const DenseVariant& v : ours) mine.emplace_back("dense", v.name, "", mpi.size_bytes);
    Record ring{"dense", "ring_allreduce_mpi_p2p", "ring", mpi.size_bytes};
    ring.bytes_per_rank = mpi.bytes_per_rank;  // the ring meets the lower bound exactly
    ring.bytes_modelled = true;
    std::vector<float> ring_tmp;
    for (int round = 0; round < args.rounds; ++round) {
      mpi.times.push_back(timed(MPI_COMM_WORLD,
                                [&] {
                                  for (int i = 0; i < iters; ++i)
                                    MPI_Allreduce(in.data(), out.data(), static_cast<int>(count),
                                                  MPI_FLOAT, MPI_SUM, mpi_comm);
                                }) /
                          iters);
      ring.times.push_back(timed(MPI_COMM_WORLD,
                                 [&] {
                                   for (int i = 0; i < iters; ++i)
                                     ring_allreduce(in.data(), out.data(), count, mpi_comm,
                                                    ring_tmp);
                                 }) /
                           iters);
      if (round == 0)
        ring.agrees = job.agree_all(std::memcmp(out.data(), ref.data(), count * 4) == 0);
      for (std::size_t k = 0; k < std::size(ours); ++k) {
        ns_allreduce_params p{};
        p.algorithm = ours[k].algorithm;
        p.flags = ours[k].flags;
        std::uint64_t bytes = 0;
        mine[k].times.push_back(timed(MPI_COMM_WORLD,
                                      [&] {
                                        for (int i = 0; i < iters; ++i) {
                                          check(ns_allreduce(coll, in.data(), out.data(), count,
                                                             NS_DTYPE_FP32, NS_OP_SUM, &p),
                                                "ns_allreduce");
                                          bytes += ns_coll_bytes_sent(coll);
                                        }
                                      }) /
                                iters);
        mine[k].algorithm = ns_allreduce_algorithm_str(ns_coll_last_algorithm(coll));
        if (round == 0) {
          mine[k].bytes_per_rank = job.avg_bytes(bytes / static_cast<std::uint64_t>(iters));
          mine[k].agrees = job.agree_all(std::memcmp(out.data(), ref.data(), count * 4) == 0);
        }
      }
    }
    records.push_back(mpi);
    if (rank == 0) {
      std::printf("dense %6.1f MiB  np %d  MPI_Allreduce %9.3f ms\n", mib, P,
                  1e3 * median(mpi.times));
      for (const Record& r : mine)
        std::printf("    %-18s %-15s %9.3f ms  %.2fx MPI  %s\n", r.variant.c_str(),
                    r.algorithm.c_str(), 1e3 * median(r.times), median(r.times) / median(mpi.times),
                    r.agrees ? "" : "DISAGREES");
      std::fflush(stdout);
    }
    if (rank == 0) {
      std::printf("    %-18s %-15s %9.3f ms  %.2fx MPI  %s\n", ring.variant.c_str(), "mpi p2p",
                  1e3 * median(ring.times), median(ring.times) / median(mpi.times),
                  ring.agrees ? "" : "DISAGREES");
      std::fflush(stdout);
    }
    records.insert(records.end(), mine.begin(), mine.end());
    records.push_back(ring);
  }
}

// The rest of the family beside its MPI call, fp32 (sum for the reductions), every --sizes-mib
// (the whole vector; all-gather and reduce-scatter move size / P per rank), root 0; barrier once.
void run_family(Job& job, const Args& args, std::vector<Record>& records) {
  const int rank = job.rank, P = job.P;
  const MPI_Comm mpi_comm = job.mpi_comm;
  ns_coll* coll = job.coll;
  struct Pair {
    Record mpi, ours;
  };
  const auto print = [&](const Pair& p) {
    if (rank != 0) return;
    std::printf("    %-15s MPI %9.3f ms  NetSparse %9.3f ms  %.2fx MPI  %s\n",
                p.ours.variant.c_str(), 1e3 * median(p.mpi.times), 1e3 * median(p.ours.times),
                median(p.ours.times) / median(p.mpi.times), p.ours.agrees ? "" : "DISAGREES");
    std::fflush(stdout);
  };
  for (double mib : args.sizes_mib) {
    const std::size_t part =
        std::max<std::size_t>(1, static_cast<std::size_t>(mib * (1 << 20) / 4) / P);
    const std::size_t count = part * static_cast<std::size_t>(P);
    const double bytes = static_cast<double>(count) * 4;
    std::vector<float> in(count), ref(count), out(count);
    std::mt19937 rng(static_cast<unsigned>(rank) * 7 + 3);
    for (auto& x : in) x = static_cast<float>(static_cast<int>(rng() % 17) - 8);
    const int iters = std::clamp(static_cast<int>(16 / mib), 1, 8);
    const int n = static_cast<int>(count), np = static_cast<int>(part);
    struct Op {
      const char* name;
      std::function<void()> mpi, ours;
      std::function<bool()> check;  // after ours: the result equals MPI's (ref)
    };
    std::vector<Op> ops = {
        {"reduce", [&] { MPI_Reduce(in.data(), ref.data(), n, MPI_FLOAT, MPI_SUM, 0, mpi_comm); },
         [&] {
           check(
               ns_reduce(coll, in.data(), out.data(), count, NS_DTYPE_FP32, NS_OP_SUM, 0, nullptr),
               "ns_reduce");
         },
         [&] { return rank != 0 || std::memcmp(out.data(), ref.data(), count * 4) == 0; }},
        {"bcast",
         [&] {
           if (rank == 0) std::memcpy(ref.data(), in.data(), count * 4);
           MPI_Bcast(ref.data(), n, MPI_FLOAT, 0, mpi_comm);
         },
         [&] {
           if (rank == 0) std::memcpy(out.data(), in.data(), count * 4);
           check(ns_bcast(coll, out.data(), count, NS_DTYPE_FP32, 0), "ns_bcast");
         },
         [&] { return std::memcmp(out.data(), ref.data(), count * 4) == 0; }},
        {"allgather",
         [&] { MPI_Allgather(in.data(), np, MPI_FLOAT, ref.data(), np, MPI_FLOAT, mpi_comm); },
         [&] {
           check(ns_allgather(coll, in.data(), out.data(), part, NS_DTYPE_FP32), "ns_allgather");
         },
         [&] { return std::memcmp(out.data(), ref.data(), count * 4) == 0; }},
        // The non-blocking all-gather started and waited for at once (its cost over the
        // blocking call: the request, one more driver round), beside MPI_Iallgather + MPI_Wait.
        {"allgather_start",
         [&] {
           MPI_Request r;
           MPI_Iallgather(in.data(), np, MPI_FLOAT, ref.data(), np, MPI_FLOAT, mpi_comm, &r);
           MPI_Wait(&r, MPI_STATUS_IGNORE);
         },
         [&] {
           ns_coll_request* r = nullptr;
           check(ns_allgather_start(coll, in.data(), out.data(), part, NS_DTYPE_FP32, &r),
                 "ns_allgather_start");
           check(ns_coll_wait(&r), "ns_coll_wait");
         },
         [&] { return std::memcmp(out.data(), ref.data(), count * 4) == 0; }},
        {"reduce_scatter",
         [&] { MPI_Reduce_scatter_block(in.data(), ref.data(), np, MPI_FLOAT, MPI_SUM, mpi_comm); },
         [&] {
           check(ns_reduce_scatter(coll, in.data(), out.data(), part, NS_DTYPE_FP32, NS_OP_SUM,
                                   nullptr),
                 "ns_reduce_scatter");
         },
         [&] { return std::memcmp(out.data(), ref.data(), part * 4) == 0; }},
    };
    if (rank == 0) std::printf("family %6.1f MiB  np %d\n", mib, P);
    for (const Op& op : ops) {
      Pair p{{"family", std::string("mpi_") + op.name, "mpi", bytes},
             {"family", op.name, "netsparse", bytes}};
      for (int round = 0; round < args.rounds; ++round) {
        p.mpi.times.push_back(timed(MPI_COMM_WORLD,
                                    [&] {
                                      for (int i = 0; i < iters; ++i) op.mpi();
                                    }) /
                              iters);
        std::uint64_t sent = 0;
        p.ours.times.push_back(timed(MPI_COMM_WORLD,
                                     [&] {
                                       for (int i = 0; i < iters; ++i) {
                                         op.ours();
                                         sent += ns_coll_bytes_sent(coll);
                                       }
                                     }) /
                               iters);
        if (round == 0) {
          p.ours.bytes_per_rank = job.avg_bytes(sent / static_cast<std::uint64_t>(iters));
          p.ours.agrees = job.agree_all(op.check());
        }
      }
      print(p);
      records.push_back(p.mpi);
      records.push_back(p.ours);
    }
  }
  Pair b{{"family", "mpi_barrier", "mpi", 0}, {"family", "barrier", "netsparse", 0}};
  const int kBarriers = args.barriers;
  for (int round = 0; round < args.rounds; ++round) {
    b.mpi.times.push_back(timed(MPI_COMM_WORLD,
                                [&] {
                                  for (int i = 0; i < kBarriers; ++i) MPI_Barrier(mpi_comm);
                                }) /
                          kBarriers);
    b.ours.times.push_back(timed(MPI_COMM_WORLD,
                                 [&] {
                                   for (int i = 0; i < kBarriers; ++i)
                                     check(ns_barrier(coll), "ns_barrier");
                                 }) /
                           kBarriers);
  }
  if (rank == 0) {
    std::printf("family barrier  np %d\n", P);
    std::printf("    %-15s MPI %9.3f us  NetSparse %9.3f us  %.2fx MPI\n", "barrier",
                1e6 * median(b.mpi.times), 1e6 * median(b.ours.times),
                median(b.ours.times) / median(b.mpi.times));
    std::fflush(stdout);
  }
  records.push_back(b.mpi);
  records.push_back(b.ours);
}

// --concurrent non-blocking allreduces of --concurrent-mib each outstanding at once (started
// back to back, then waited for), against one blocking allreduce of their total size and the
// same operations one after the other.
void run_concurrent(Job& job, const Args& args, std::vector<Record>& records) {
  const int rank = job.rank;
  ns_coll* coll = job.coll;
  const int k = args.concurrent;
  const std::size_t each =
      std::max<std::size_t>(1, static_cast<std::size_t>(args.concurrent_mib * (1 << 20) / 4));
  const std::size_t total = each * static_cast<std::size_t>(k);
  std::vector<float> in(total), out(total), ref(total);
  std::mt19937 rng(static_cast<unsigned>(rank) * 7 + 5);
  for (auto& x : in) x = static_cast<float>(static_cast<int>(rng() % 17) - 8);
  MPI_Allreduce(in.data(), ref.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, job.mpi_comm);
  const double bytes = static_cast<double>(total) * 4;
  Record one{"concurrent", "one_allreduce_of_total", "", bytes};
  Record nb{"concurrent", "nonblocking_outstanding", "", bytes};
  Record seq{"concurrent", "blocking_one_after_another", "", bytes};
  std::vector<ns_coll_request*> req(static_cast<std::size_t>(k));
  for (int round = 0; round < args.rounds; ++round) {
    one.times.push_back(timed(MPI_COMM_WORLD, [&] {
      check(ns_allreduce(coll, in.data(), out.data(), total, NS_DTYPE_FP32, NS_OP_SUM, nullptr),
            "ns_allreduce");
    }));
    if (round == 0) one.agrees = job.agree_all(std::memcmp(out.data(), ref.data(), total * 4) == 0);
    std::fill(out.begin(), out.end(), 0.0f);
    nb.times.push_back(timed(MPI_COMM_WORLD, [&] {
      for (int i = 0; i < k; ++i)
        check(ns_allreduce_start(coll, in.data() + each * i, out.data() + each * i, each,
                                 NS_DTYPE_FP32, NS_OP_SUM, nullptr, &req[std::size_t(i)]),
              "ns_allreduce_start");
      for (int i = k - 1; i >= 0; --i) check(ns_coll_wait(&req[std::size_t(i)]), "ns_coll_wait");
    }));
    if (round == 0) nb.agrees = job.agree_all(std::memcmp(out.data(), ref.data(), total * 4) == 0);
    std::fill(out.begin(), out.end(), 0.0f);
    seq.times.push_back(timed(MPI_COMM_WORLD, [&] {
      for (int i = 0; i < k; ++i)
        check(ns_allreduce(coll, in.data() + each * i, out.data() + each * i, each, NS_DTYPE_FP32,
                           NS_OP_SUM, nullptr),
              "ns_allreduce");
    }));
    if (round == 0) seq.agrees = job.agree_all(std::memcmp(out.data(), ref.data(), total * 4) == 0);
  }
  if (rank == 0) {
    std::printf("concurrent %d x %.2f MiB  np %d\n", k, args.concurrent_mib, job.P);
    for (const Record* r : {&one, &nb, &seq})
      std::printf("    %-28s %9.3f ms  %.2fx one allreduce of the total  %s\n", r->variant.c_str(),
                  1e3 * median(r->times), median(r->times) / median(one.times),
                  r->agrees ? "" : "DISAGREES");
    std::fflush(stdout);
  }
  for (const Record* r : {&one, &nb, &seq}) records.push_back(*r);
}

// A rank's sparse contribution of length n: each index kept with probability `density`
// (ascending, no repeats), small integer values (sums exact in float). The same per rank and
// density in the flat and the hierarchical sections.
std::pair<std::vector<std::uint64_t>, std::vector<float>> sparse_input(int rank, std::uint64_t n,
                                                                       double density) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(rank) * 1315423911ull + 3);
  std::vector<std::uint64_t> idx;
  std::vector<float> vals;
  const std::uint64_t threshold = static_cast<std::uint64_t>(density * 4294967296.0);
  for (std::uint64_t i = 0; i < n; ++i)
    if ((rng() & 0xffffffffu) < threshold) {
      idx.push_back(i);
      vals.push_back(static_cast<float>(static_cast<int>(rng() % 9) + 1));
    }
  return {std::move(idx), std::move(vals)};
}

// Sparse (index, value) sums of every --densities against MPI_Allreduce of the dense vector.
void run_sparse(Job& job, const Args& args, std::vector<Record>& records) {
  const int rank = job.rank, P = job.P;
  const MPI_Comm mpi_comm = job.mpi_comm;
  ns_coll* coll = job.coll;
  netsparse::bench::SparcmlScratch sparcml_scratch;
  for (const std::uint64_t n : args.sparse_ns)
    for (double density : args.densities) {
      const auto [idx, vals] = sparse_input(rank, n, density);
      std::vector<float> dense(n), ref(n), out(n), ours_result(n);
      const auto densify = [&] {
        std::fill(dense.begin(), dense.end(), 0.0f);
        for (std::size_t k = 0; k < idx.size(); ++k) dense[idx[k]] = vals[k];
      };
      densify();
      MPI_Allreduce(dense.data(), ref.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, mpi_comm);
      const double nbytes = static_cast<double>(n) * 4;
      Record mpi{"sparse", "mpi_allreduce_dense", "mpi", nbytes, density};
      Record mpi_d{"sparse", "mpi_densify_allreduce", "mpi", nbytes, density};
      Record ours_dense{"sparse", "netsparse_dense", "", nbytes, density};
      Record sp{"sparse", "netsparse_sparse", "sparse", nbytes, density};
      Record sparcml{"sparse", "sparcml_recursive_doubling", "", nbytes, density};
      netsparse::bench::SparcmlResult sparcml_res;
      mpi.bytes_per_rank = mpi_d.bytes_per_rank = 2.0 * (P - 1) / P * nbytes;
      mpi.bytes_modelled = mpi_d.bytes_modelled = true;
      for (int round = 0; round < args.rounds; ++round) {
        mpi.times.push_back(timed(MPI_COMM_WORLD, [&] {
          MPI_Allreduce(dense.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                        mpi_comm);
        }));
        mpi_d.times.push_back(timed(MPI_COMM_WORLD, [&] {
          densify();
          MPI_Allreduce(dense.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                        mpi_comm);
        }));
        ours_dense.times.push_back(timed(MPI_COMM_WORLD, [&] {
          check(ns_allreduce(coll, dense.data(), out.data(), n, NS_DTYPE_FP32, NS_OP_SUM, nullptr),
                "ns_allreduce");
        }));
        if (round == 0) {
          ours_dense.algorithm = ns_allreduce_algorithm_str(ns_coll_last_algorithm(coll));
          ours_dense.bytes_per_rank = job.avg_bytes(ns_coll_bytes_sent(coll));
          ours_dense.agrees = job.agree_all(std::memcmp(out.data(), ref.data(), n * 4) == 0);
        }
        ns_sparse_result* res = nullptr;
        sp.times.push_back(timed(MPI_COMM_WORLD, [&] {
          ns_sparse_params sparams{NS_SPARSE_OUTPUT_AUTO, out.data()};  // like MPI's recvbuf
          check(ns_sparse_allreduce(coll, n, idx.size(), idx.data(), vals.data(), NS_DTYPE_FP32,
                                    NS_OP_SUM, &sparams, &res),
                "ns_sparse_allreduce");
        }));
        if (round == 0) {
          sp.bytes_per_rank = job.avg_bytes(ns_coll_bytes_sent(coll));
          const float* v = static_cast<const float*>(ns_sparse_result_values(res));
          bool ok = true;
          if (ns_sparse_result_is_dense(res)) {
            sp.algorithm = "sparse->dense output";
            ok = std::memcmp(v, ref.data(), n * 4) == 0;
          } else {
            sp.algorithm = "sparse output";
            std::vector<float> d(n, 0.0f);
            const std::uint64_t* ix = ns_sparse_result_indices(res);
            for (std::uint64_t k = 0; k < ns_sparse_result_size(res); ++k) d[ix[k]] = v[k];
            ok = std::memcmp(d.data(), ref.data(), n * 4) == 0;
          }
          sp.agrees = job.agree_all(ok);
          if (ns_sparse_result_is_dense(res)) {
            std::memcpy(ours_result.data(), v, n * 4);
          } else {
            std::fill(ours_result.begin(), ours_result.end(), 0.0f);
            const std::uint64_t* ix = ns_sparse_result_indices(res);
            for (std::uint64_t k = 0; k < ns_sparse_result_size(res); ++k)
              ours_result[ix[k]] = v[k];
          }
        }
        ns_sparse_result_free(res);
        // The SparCML-style baseline, its dense result (if it goes dense) in out like ours.
        sparcml.times.push_back(timed(MPI_COMM_WORLD, [&] {
          try {
            netsparse::bench::sparcml_allreduce(mpi_comm, n, idx.size(), idx.data(), vals.data(),
                                                out.data(), sparcml_res, sparcml_scratch);
          } catch (const std::invalid_argument& e) {  // n above 2^31 - 1
            std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
            MPI_Abort(MPI_COMM_WORLD, 2);
          }
        }));
        if (round == 0) {
          sparcml.bytes_per_rank = job.avg_bytes(sparcml_res.bytes_sent);
          sparcml.algorithm = sparcml_res.dense
                                  ? "dense from step " + std::to_string(sparcml_res.dense_from_step)
                                  : "sparse throughout";
          std::vector<float> d;
          const float* got = out.data();
          if (!sparcml_res.dense) {
            d.assign(n, 0.0f);
            for (std::size_t k = 0; k < sparcml_res.idx.size(); ++k)
              d[sparcml_res.idx[k]] = sparcml_res.val[k];
            got = d.data();
          }
          // Against MPI's sum and against ours (the same bits: integer-valued sums).
          sparcml.agrees = job.agree_all(std::memcmp(got, ref.data(), n * 4) == 0 &&
                                         std::memcmp(got, ours_result.data(), n * 4) == 0);
        }
      }
      if (rank == 0) {
        std::printf("sparse n %llu density %.3f  np %d  (%zu entries on rank 0)\n",
                    static_cast<unsigned long long>(n), density, P, idx.size());
        for (const Record* r : {&mpi, &mpi_d, &ours_dense, &sp, &sparcml})
          std::printf(
              "    %-22s %9.3f ms  %.2fx faster than MPI  bytes/rank %.3g%s (%.1fx fewer)  %s\n",
              r->variant.c_str(), 1e3 * median(r->times), median(mpi.times) / median(r->times),
              r->bytes_per_rank, r->bytes_modelled ? " (model)" : "",
              mpi.bytes_per_rank / r->bytes_per_rank, r->agrees ? "" : "DISAGREES");
        std::printf("    netsparse_sparse / sparcml time %.2fx (< 1: ours faster); sparcml: %s\n",
                    median(sp.times) / median(sparcml.times), sparcml.algorithm.c_str());
        std::fflush(stdout);
      }
      for (Record* r : {&mpi, &mpi_d, &ours_dense, &sp, &sparcml}) records.push_back(*r);
    }
}

// Flat against hierarchical (dense at every --sizes-mib, sparse at every --densities), each on
// a communicator of its own forced by NETSPARSE_COLL_HIERARCHY, beside MPI_Allreduce: times and
// the inter-host bytes summed over the ranks (exact counts of packets to other hosts).
void run_hierarchy(Job& job, const Args& args, std::vector<Record>& records) {
  const int rank = job.rank, P = job.P;
  const auto open = [&](const char* mode) {
    setenv("NETSPARSE_COLL_HIERARCHY", mode, 1);
    ns_coll* c = nullptr;
    check(ns_coll_open_mpi(MPI_COMM_WORLD, nullptr, &c), "ns_coll_open_mpi");
    unsetenv("NETSPARSE_COLL_HIERARCHY");
    return c;
  };
  ns_coll* const colls[2] = {open("flat"), open("hierarchical")};
  const char* const names[2] = {"flat", "hierarchical"};
  const auto inter_total = [](std::uint64_t mine) {
    return netsparse::bench::reduce_over_ranks(static_cast<double>(mine), MPI_SUM);
  };
  for (double mib : args.sizes_mib) {
    const std::size_t count = static_cast<std::size_t>(mib * (1 << 20) / 4);
    std::vector<float> in(count), ref(count), out(count);
    std::mt19937 rng(static_cast<unsigned>(rank) * 7 + 1);
    for (auto& x : in) x = static_cast<float>(static_cast<int>(rng() % 17) - 8);
    const int iters = std::clamp(static_cast<int>(16 / mib), 1, 8);
    MPI_Allreduce(in.data(), ref.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, job.mpi_comm);
    Record mpi{"hierarchy", "mpi_allreduce", "mpi", static_cast<double>(count) * 4};
    std::vector<Record> mine;
    for (int k = 0; k < 4; ++k)
      mine.emplace_back("hierarchy", std::string(names[k % 2]) + (k < 2 ? "" : "_reproducible"), "",
                        mpi.size_bytes);
    for (int round = 0; round < args.rounds; ++round) {
      mpi.times.push_back(timed(MPI_COMM_WORLD,
                                [&] {
                                  for (int i = 0; i < iters; ++i)
                                    MPI_Allreduce(in.data(), out.data(), static_cast<int>(count),
                                                  MPI_FLOAT, MPI_SUM, job.mpi_comm);
                                }) /
                          iters);
      for (int k = 0; k < 4; ++k) {
        ns_allreduce_params p{};
        p.flags = k < 2 ? 0u : unsigned{NS_ALLREDUCE_REPRODUCIBLE};
        ns_coll* c = colls[k % 2];
        mine[static_cast<std::size_t>(k)].times.push_back(
            timed(MPI_COMM_WORLD,
                  [&] {
                    for (int i = 0; i < iters; ++i)
                      check(ns_allreduce(c, in.data(), out.data(), count, NS_DTYPE_FP32, NS_OP_SUM,
                                         &p),
                            "ns_allreduce");
                  }) /
            iters);
        Record& r = mine[static_cast<std::size_t>(k)];
        if (round == 0) {
          r.algorithm = ns_allreduce_algorithm_str(ns_coll_last_algorithm(c));
          r.bytes_per_rank = job.avg_bytes(ns_coll_bytes_sent(c));
          r.inter_host_bytes = inter_total(ns_coll_inter_host_bytes(c));
          r.inter_rack_bytes = inter_total(ns_coll_inter_rack_bytes(c));
          r.agrees = job.agree_all(std::memcmp(out.data(), ref.data(), count * 4) == 0);
        }
      }
    }
    if (rank == 0) {
      std::printf("hierarchy dense %6.1f MiB  np %d  MPI_Allreduce %9.3f ms\n", mib, P,
                  1e3 * median(mpi.times));
      for (const Record& r : mine)
        std::printf(
            "    %-25s %-15s %9.3f ms  %.2fx MPI  inter-host %.0f B (%.3fx flat)  inter-rack %.0f "
            "B  %s\n",
            r.variant.c_str(), r.algorithm.c_str(), 1e3 * median(r.times),
            median(r.times) / median(mpi.times), r.inter_host_bytes,
            r.inter_host_bytes /
                mine[r.variant.find("reproducible") == std::string::npos ? 0 : 2].inter_host_bytes,
            r.inter_rack_bytes, r.agrees ? "" : "DISAGREES");
      std::fflush(stdout);
    }
    records.push_back(mpi);
    records.insert(records.end(), mine.begin(), mine.end());
  }
  const std::uint64_t n = *std::max_element(args.sparse_ns.begin(), args.sparse_ns.end());
  for (double density : args.densities) {
    const auto [idx, vals] = sparse_input(rank, n, density);
    std::vector<float> dense(n, 0.0f), ref(n), out(n);
    for (std::size_t k = 0; k < idx.size(); ++k) dense[idx[k]] = vals[k];
    MPI_Allreduce(dense.data(), ref.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, job.mpi_comm);
    const double nbytes = static_cast<double>(n) * 4;
    std::vector<Record> mine;
    for (int k = 0; k < 2; ++k)
      mine.emplace_back("hierarchy", std::string(names[k]) + "_sparse", "sparse", nbytes, density);
    for (int round = 0; round < args.rounds; ++round)
      for (int k = 0; k < 2; ++k) {
        ns_sparse_result* res = nullptr;
        Record& r = mine[static_cast<std::size_t>(k)];
        r.times.push_back(timed(MPI_COMM_WORLD, [&] {
          ns_sparse_params sparams{NS_SPARSE_OUTPUT_AUTO, out.data()};
          check(ns_sparse_allreduce(colls[k], n, idx.size(), idx.data(), vals.data(), NS_DTYPE_FP32,
                                    NS_OP_SUM, &sparams, &res),
                "ns_sparse_allreduce");
        }));
        if (round == 0) {
          r.bytes_per_rank = job.avg_bytes(ns_coll_bytes_sent(colls[k]));
          r.inter_host_bytes = inter_total(ns_coll_inter_host_bytes(colls[k]));
          r.inter_rack_bytes = inter_total(ns_coll_inter_rack_bytes(colls[k]));
          const float* v = static_cast<const float*>(ns_sparse_result_values(res));
          std::vector<float> d(n, 0.0f);
          if (ns_sparse_result_is_dense(res)) {
            std::memcpy(d.data(), v, n * 4);
          } else {
            const std::uint64_t* ix = ns_sparse_result_indices(res);
            for (std::uint64_t e = 0; e < ns_sparse_result_size(res); ++e) d[ix[e]] = v[e];
          }
          r.agrees = job.agree_all(std::memcmp(d.data(), ref.data(), n * 4) == 0);
        }
        ns_sparse_result_free(res);
      }
    if (rank == 0) {
      std::printf("hierarchy sparse n %llu density %.3f  np %d\n",
                  static_cast<unsigned long long>(n), density, P);
      for (const Record& r : mine)
        std::printf("    %-25s %9.3f ms  inter-host %.0f B (%.3fx flat)  inter-rack %.0f B  %s\n",
                    r.variant.c_str(), 1e3 * median(r.times), r.inter_host_bytes,
                    r.inter_host_bytes / mine[0].inter_host_bytes, r.inter_rack_bytes,
                    r.agrees ? "" : "DISAGREES");
      std::fflush(stdout);
    }
    records.insert(records.end(), mine.begin(), mine.end());
  }
  for (ns_coll* c : colls) check(ns_coll_close(c), "ns_coll_close");
}

Json report(const Job& job, const Args& args, const std::vector<Record>& records, double load1) {
  Json doc;
  doc["bench"] = "allreduce";
  doc["np"] = job.P;
  doc["rounds"] = args.rounds;
  doc["transport"] = ns_coll_transport_name(job.coll);
  doc["dtype"] = "fp32";
  doc["loadavg_1min"] = load1;
  doc["sparse_n"] = *std::max_element(args.sparse_ns.begin(), args.sparse_ns.end());
  Json& out = doc["records"] = Json::array();
  for (const Record& r : records) {
    out.push_back({{"section", r.section},
                   {"variant", r.variant},
                   {"algorithm", r.algorithm},
                   {"size_bytes", r.size_bytes},
                   {"density", r.density},
                   {"time_s", median(r.times)},
                   {"times_s", r.times},
                   {"bytes_per_rank", r.bytes_per_rank},
                   {"bytes_modelled", r.bytes_modelled},
                   {"agrees", r.agrees},
                   {"inter_host_bytes", r.inter_host_bytes},
                   {"inter_rack_bytes", r.inter_rack_bytes}});
  }
  return doc;
}

int run_benchmark(Args& args, const netsparse::bench::World& world) {
  Job job;
  job.rank = world.rank;
  job.P = world.size;
  const double load1 = netsparse::bench::load_average_1min();
  MPI_Comm_dup(MPI_COMM_WORLD, &job.mpi_comm);
  check(ns_coll_open_mpi(MPI_COMM_WORLD, nullptr, &job.coll), "ns_coll_open_mpi");
  std::vector<Record> records;
  if (args.dense) run_dense(job, args, records);
  if (args.family) run_family(job, args, records);
  if (args.concurrent > 0) run_concurrent(job, args, records);
  if (args.sparse) run_sparse(job, args, records);
  if (args.hierarchy) run_hierarchy(job, args, records);
  if (job.rank == 0 && !args.json.empty()) {
    const std::string problem =
        netsparse::bench::write_json(args.json, report(job, args, records, load1));
    if (!problem.empty()) std::fprintf(stderr, "bench_allreduce: %s\n", problem.c_str());
  }
  check(ns_coll_close(job.coll), "ns_coll_close");
  MPI_Comm_free(&job.mpi_comm);
  return job.all_agree ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // No thread of the benchmark's own calls MPI: the single-thread level MPI_Init gives.
  return netsparse::bench::run_job(argc, argv, parse, run_benchmark, MPI_THREAD_SINGLE);
}
