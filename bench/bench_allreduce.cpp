// Allreduce benchmark: every variant side by side in one run, medians over --rounds.
//
//   mpirun -np P bench_allreduce [--sizes-mib 1,4,16,64] [--rounds 3] [--json PATH]
//                                [--sparse-n N] [--densities 0.01,0.5] [--no-dense] [--no-sparse]
//
// Dense (fp32 sum, every size): MPI_Allreduce, and NetSparse's allreduce over its own transport
// with each of Flare's designs (single buffer, 2 and 4 buffers, the reproducible tree) and the
// automatic choice. Sparse (fp32 sum of vectors of length N, each rank holding density * N
// distinct random indices): NetSparse's sparse allreduce, against MPI_Allreduce of the dense
// vector (alone, and with the densification a sparse holder must do first) and NetSparse's dense
// allreduce of it. Every variant's result is checked against MPI_Allreduce's (integer-valued
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
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "netsparse/collectives_mpi.h"
#include "report.hpp"
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
  --sparse-n N         sparse vector length (default 16777216)
  --rounds N           rounds of every variant; times are medians over them (default 3)
  --json PATH          also write every record as JSON (rank 0)
  --no-dense           skip the dense section
  --no-sparse          skip the sparse section
  --help               this text

Time per operation = the slowest rank's; bytes = the transport bytes a rank sent, averaged over
ranks (MPI_Allreduce: the 2 (P-1)/P N lower bound of any allreduce, marked "(model)").

Exit codes: 0 every variant agreed with MPI_Allreduce, 1 a variant disagreed, 2 a bad option.
)help";

struct Args {
  std::vector<double> sizes_mib = {1, 4, 16, 64};
  std::vector<double> densities = {0.01, 0.5};
  std::uint64_t sparse_n = 16ull << 20;
  int rounds = 3;
  std::string json;
  bool dense = true, sparse = true;
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
  app.add_option("--sparse-n", a.sparse_n)
      ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("--rounds", a.rounds)->check(cli::Range(1, 1000000));
  app.add_option("--json", a.json);
  app.add_flag_callback("--no-dense", [&] { a.dense = false; });
  app.add_flag_callback("--no-sparse", [&] { a.sparse = false; });
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
    for (int round = 0; round < args.rounds; ++round) {
      mpi.times.push_back(timed(MPI_COMM_WORLD,
                                [&] {
                                  for (int i = 0; i < iters; ++i)
                                    MPI_Allreduce(in.data(), out.data(), static_cast<int>(count),
                                                  MPI_FLOAT, MPI_SUM, mpi_comm);
                                }) /
                          iters);
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
    records.insert(records.end(), mine.begin(), mine.end());
  }
}

// Sparse (index, value) sums of every --densities against MPI_Allreduce of the dense vector.
void run_sparse(Job& job, const Args& args, std::vector<Record>& records) {
  const int rank = job.rank, P = job.P;
  const MPI_Comm mpi_comm = job.mpi_comm;
  ns_coll* coll = job.coll;
  const std::uint64_t n = args.sparse_n;
  for (double density : args.densities) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(rank) * 1315423911ull + 3);
    std::vector<std::uint64_t> idx;
    std::vector<float> vals;
    const std::uint64_t threshold = static_cast<std::uint64_t>(density * 4294967296.0);
    for (std::uint64_t i = 0; i < n; ++i)
      if ((rng() & 0xffffffffu) < threshold) {
        idx.push_back(i);
        vals.push_back(static_cast<float>(static_cast<int>(rng() % 9) + 1));
      }
    std::vector<float> dense(n), ref(n), out(n);
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
    mpi.bytes_per_rank = mpi_d.bytes_per_rank = 2.0 * (P - 1) / P * nbytes;
    mpi.bytes_modelled = mpi_d.bytes_modelled = true;
    for (int round = 0; round < args.rounds; ++round) {
      mpi.times.push_back(timed(MPI_COMM_WORLD, [&] {
        MPI_Allreduce(dense.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, mpi_comm);
      }));
      mpi_d.times.push_back(timed(MPI_COMM_WORLD, [&] {
        densify();
        MPI_Allreduce(dense.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, mpi_comm);
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
      }
      ns_sparse_result_free(res);
    }
    if (rank == 0) {
      std::printf("sparse n %llu density %.3f  np %d  (%zu entries on rank 0)\n",
                  static_cast<unsigned long long>(n), density, P, idx.size());
      for (const Record* r : {&mpi, &mpi_d, &ours_dense, &sp})
        std::printf(
            "    %-22s %9.3f ms  %.2fx faster than MPI  bytes/rank %.3g%s (%.1fx fewer)  %s\n",
            r->variant.c_str(), 1e3 * median(r->times), median(mpi.times) / median(r->times),
            r->bytes_per_rank, r->bytes_modelled ? " (model)" : "",
            mpi.bytes_per_rank / r->bytes_per_rank, r->agrees ? "" : "DISAGREES");
      std::fflush(stdout);
    }
    for (Record* r : {&mpi, &mpi_d, &ours_dense, &sp}) records.push_back(*r);
  }
}

Json report(const Job& job, const Args& args, const std::vector<Record>& records, double load1) {
  Json doc;
  doc["bench"] = "allreduce";
  doc["np"] = job.P;
  doc["rounds"] = args.rounds;
  doc["transport"] = ns_coll_transport_name(job.coll);
  doc["dtype"] = "fp32";
  doc["loadavg_1min"] = load1;
  doc["sparse_n"] = args.sparse_n;
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
                   {"agrees", r.agrees}});
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
  if (args.sparse) run_sparse(job, args, records);
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
