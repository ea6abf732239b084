// Matrix Market parsing throughput, ours against Eigen's loadMarket (unsupported/SparseExtra),
// measured alternately in one run so both see the same machine load and page cache.
//
//   bench_mm_parse [FILE.mtx] [REPETITIONS]
//
// Without FILE, a ~55 MB Kronecker matrix (scale 18, real values) is generated into /tmp once.
// Reports MB/s (file bytes / wall time, best and median over the repetitions) for our reader
// with all OpenMP threads and with one thread, and for Eigen (serial, sscanf-based), and the
// ratios of the medians. Eigen's reader neither expands symmetric files nor rejects bad input,
// so compare on general files; it reads no value for pattern files (times are still valid).
#include <omp.h>

#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <unsupported/Eigen/SparseExtra>
#include <vector>

#include "cli.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/matrix_market.hpp"
#include "stats.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using Clock = std::chrono::steady_clock;

// Wall and process CPU seconds of each repetition. CPU time is the load-robust figure for the
// serial readers (another process taking the core stretches wall time, not CPU time); for the
// threaded reader it sums all threads, so only wall time says how fast it is.
struct Series {
  const char* name;
  std::vector<double> wall;
  std::vector<double> cpu;
  static double median(const std::vector<double>& s) { return netsparse::bench::median(s); }
  [[nodiscard]] double best_wall() const { return *std::min_element(wall.begin(), wall.end()); }
  template <class F>
  void time(F&& f) {
    const std::clock_t c0 = std::clock();
    const auto t0 = Clock::now();
    f();
    wall.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
  }
};

std::string default_input() {
  const std::string path = "/tmp/netsparse_bench_kronecker_s18.mtx";
  if (!std::filesystem::exists(path)) {
    std::printf("generating %s (Kronecker scale 18, edge factor 16)...\n", path.c_str());
    netsparse::KroneckerParams params;
    params.scale = 18;
    const auto n = netsparse::gidx_t{1} << params.scale;
    const std::string partial = path + ".partial";
    netsparse::write_matrix_market(partial, netsparse::generate_kronecker(params, 0, n));
    std::filesystem::rename(partial, path);
  }
  return path;
}

const char* const kHelp =
    "usage: bench_mm_parse [FILE.mtx] [REPETITIONS]\n"
    "  FILE.mtx      the Matrix Market file to parse (default: a generated kron matrix, cached)\n"
    "  REPETITIONS   timed parses per reader (default 5)\n";

}  // namespace

int main(int argc, char** argv) {
  namespace nb = netsparse::bench;
  std::string path;
  int reps = 5;
  cli::App app{"bench_mm_parse"};
  app.add_option("file", path);
  app.add_option("repetitions", reps)->check(cli::Range(1, 1000000));
  if (const int code = nb::finish_command_line(nb::parse_command_line(app, argc, argv),
                                               "bench_mm_parse", kHelp, true);
      code >= 0)
    return code;
  if (path.empty()) path = default_input();
  std::error_code ec;
  const auto bytes = static_cast<double>(std::filesystem::file_size(path, ec));
  if (ec) {
    std::fprintf(stderr, "cannot stat %s: %s\n", path.c_str(), ec.message().c_str());
    return 1;
  }
  const int threads = omp_get_max_threads();

  // Warm the page cache and check both readers see the same matrix.
  netsparse::CsrMatrix ours;
  try {
    ours = netsparse::read_matrix_market(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  Eigen::SparseMatrix<float, Eigen::RowMajor, int> eigen;
  if (!Eigen::loadMarket(eigen, path)) {
    std::fprintf(stderr, "Eigen::loadMarket failed on %s\n", path.c_str());
    return 1;
  }
  std::printf("file %s: %.1f MB, %lld x %lld, nnz ours %lld, Eigen %lld%s\n", path.c_str(),
              bytes / 1e6, static_cast<long long>(ours.n_rows), static_cast<long long>(ours.n_cols),
              static_cast<long long>(ours.nnz()), static_cast<long long>(eigen.nonZeros()),
              ours.nnz() == eigen.nonZeros() ? "" : " (differ: Eigen does not expand symmetry)");

  Series ours_all{"netsparse (all threads)", {}, {}};
  Series ours_one{"netsparse (1 thread)", {}, {}};
  Series eigen_series{"Eigen::loadMarket", {}, {}};
  std::int64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    omp_set_num_threads(threads);
    ours_all.time([&] { sink += netsparse::read_matrix_market(path).nnz(); });
    omp_set_num_threads(1);
    ours_one.time([&] { sink += netsparse::read_matrix_market(path).nnz(); });
    omp_set_num_threads(threads);
    eigen_series.time([&] {
      Eigen::SparseMatrix<float, Eigen::RowMajor, int> m;
      Eigen::loadMarket(m, path);
      sink += m.nonZeros();
    });
  }
  std::printf("%d repetitions, %d OpenMP threads (checksum %lld)\n", reps, threads,
              static_cast<long long>(sink));
  std::printf("%-26s %10s %12s %12s %12s\n", "reader", "median s", "median MB/s", "best MB/s",
              "CPU MB/s");
  const double mb = bytes / 1e6;
  for (const Series* s : {&ours_all, &ours_one, &eigen_series}) {
    const double wall = Series::median(s->wall);
    std::printf("%-26s %10.4f %12.1f %12.1f %12.1f\n", s->name, wall, mb / wall,
                mb / s->best_wall(), mb / Series::median(s->cpu));
  }
  const double eigen_wall = Series::median(eigen_series.wall);
  std::printf("speedup over Eigen, wall-time medians: all threads %.2fx, 1 thread %.2fx\n",
              eigen_wall / Series::median(ours_all.wall),
              eigen_wall / Series::median(ours_one.wall));
  std::printf("speedup over Eigen, CPU-time medians (serial readers): 1 thread %.2fx\n",
              Series::median(eigen_series.cpu) / Series::median(ours_one.cpu));
  return 0;
}
