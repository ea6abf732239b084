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
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "netsparse/collectives_mpi.h"

namespace {

struct Args {
  std::vector<double> sizes_mib = {1, 4, 16, 64};
  std::vector<double> densities = {0.01, 0.5};
  std::uint64_t sparse_n = 16ull << 20;
  int rounds = 3;
  std::string json;
  bool dense = true, sparse = true;
};

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0)) throw std::invalid_argument("bad list: " + s);
    out.push_back(v);
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--sizes-mib")
      a.sizes_mib = parse_list(value());
    else if (k == "--densities")
      a.densities = parse_list(value());
    else if (k == "--sparse-n")
      a.sparse_n = std::stoull(value());
    else if (k == "--rounds")
      a.rounds = std::stoi(value());
    else if (k == "--json")
      a.json = value();
    else if (k == "--no-dense")
      a.dense = false;
    else if (k == "--no-sparse")
      a.sparse = false;
    else if (k == "--help" || k == "-h")
      throw std::invalid_argument("help");
    else
      throw std::invalid_argument("unknown option " + k);
  }
  if (a.rounds < 1) throw std::invalid_argument("--rounds must be >= 1");
  for (double d : a.densities)
    if (d > 1) throw std::invalid_argument("densities are fractions <= 1");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The slowest rank's time of fn (after a barrier).
double timed(MPI_Comm comm, const std::function<void()>& fn) {
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  fn();
  double t = MPI_Wtime() - t0, worst = 0;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
  return worst;
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

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void check(ns_status_t s, const char* what) {
  if (s != NS_OK) {
    std::fprintf(stderr, "bench_allreduce: %s: %s\n", what, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    if (rank == 0) {
      if (std::string(e.what()) != "help") std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
      std::fprintf(stderr,
                   "usage: mpirun -np P bench_allreduce [--sizes-mib 1,4,16,64] [--rounds 3] "
                   "[--json PATH] [--sparse-n N] [--densities 0.01,0.5] [--no-dense] "
                   "[--no-sparse]\n");
    }
    MPI_Finalize();
    return 2;
  }
  double load1 = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load1) != 1) load1 = -1;
    std::fclose(f);
  }
  MPI_Comm mpi_comm;  // MPI_Allreduce's own communicator
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi_comm);
  ns_coll* coll = nullptr;
  check(ns_coll_open_mpi(MPI_COMM_WORLD, nullptr, &coll), "ns_coll_open_mpi");
  std::vector<Record> records;
  bool all_agree = true;
  const auto avg_bytes = [&](std::uint64_t mine) {
    double m = static_cast<double>(mine), sum = 0;
    MPI_Allreduce(&m, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / P;
  };
  const auto agree_all = [&](bool ok) {
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    all_agree = all_agree && all == 1;
    return all == 1;
  };

  // ---- dense ----
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
  if (args.dense) {
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
            mine[k].bytes_per_rank = avg_bytes(bytes / static_cast<std::uint64_t>(iters));
            mine[k].agrees = agree_all(std::memcmp(out.data(), ref.data(), count * 4) == 0);
          }
        }
      }
      records.push_back(mpi);
      if (rank == 0) {
        std::printf("dense %6.1f MiB  np %d  MPI_Allreduce %9.3f ms\n", mib, P,
                    1e3 * median(mpi.times));
        for (const Record& r : mine)
          std::printf("    %-18s %-15s %9.3f ms  %.2fx MPI  %s\n", r.variant.c_str(),
                      r.algorithm.c_str(), 1e3 * median(r.times),
                      median(r.times) / median(mpi.times), r.agrees ? "" : "DISAGREES");
        std::fflush(stdout);
      }
      records.insert(records.end(), mine.begin(), mine.end());
    }
  }

  // ---- sparse ----
  if (args.sparse) {
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
          ours_dense.bytes_per_rank = avg_bytes(ns_coll_bytes_sent(coll));
          ours_dense.agrees = agree_all(std::memcmp(out.data(), ref.data(), n * 4) == 0);
        }
        ns_sparse_result* res = nullptr;
        sp.times.push_back(timed(MPI_COMM_WORLD, [&] {
          ns_sparse_params sparams{NS_SPARSE_OUTPUT_AUTO, out.data()};  // like MPI's recvbuf
          check(ns_sparse_allreduce(coll, n, idx.size(), idx.data(), vals.data(), NS_DTYPE_FP32,
                                    NS_OP_SUM, &sparams, &res),
                "ns_sparse_allreduce");
        }));
        if (round == 0) {
          sp.bytes_per_rank = avg_bytes(ns_coll_bytes_sent(coll));
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
          sp.agrees = agree_all(ok);
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

  if (rank == 0 && !args.json.empty()) {
    std::ofstream f(args.json);
    f << "{\n  \"bench\": \"allreduce\",\n  \"np\": " << P << ",\n  \"rounds\": " << args.rounds
      << ",\n  \"transport\": \"" << ns_coll_transport_name(coll) << "\",\n  \"dtype\": \"fp32\""
      << ",\n  \"loadavg_1min\": " << load1 << ",\n  \"sparse_n\": " << args.sparse_n
      << ",\n  \"records\": [\n";
    for (std::size_t i = 0; i < records.size(); ++i) {
      const Record& r = records[i];
      f << "    {\"section\": \"" << r.section << "\", \"variant\": \"" << r.variant
        << "\", \"algorithm\": \"" << r.algorithm << "\", \"size_bytes\": " << r.size_bytes
        << ", \"density\": " << r.density << ", \"time_s\": " << median(r.times)
        << ", \"times_s\": " << json_list(r.times) << ", \"bytes_per_rank\": " << r.bytes_per_rank
        << ", \"bytes_modelled\": " << (r.bytes_modelled ? "true" : "false")
        << ", \"agrees\": " << (r.agrees ? "true" : "false") << "}"
        << (i + 1 < records.size() ? ",\n" : "\n");
    }
    f << "  ]\n}\n";
    if (!f) std::fprintf(stderr, "bench_allreduce: could not write %s\n", args.json.c_str());
  }
  check(ns_coll_close(coll), "ns_coll_close");
  MPI_Comm_free(&mpi_comm);
  MPI_Finalize();
  return all_agree ? 0 : 1;
}
