// Local kernel benchmark: tiled SpMM / SDDMM / SpMV (autotuned and SPADE-Base configurations)
// against Eigen's sparse x dense product, on real and generated matrices, with a STREAM triad
// measured in the same run as the bandwidth yardstick. Prints a table; not a test.
//
//   bench_local_kernels [--data-dir DIR] [--matrices LIST] [--ks LIST] [--kernels LIST]
//                       [--tune-budget SECONDS] [--min-time SECONDS] [--stencil N]
//                       [--kron-scale S]
//
// Defaults: matrices NotreDame_www, mdual, kron18, stencil; K 1,16,128; kernels spmm,sddmm,spmv
// (SpMV once per matrix). Matrix files come from ${NETSPARSE_DATA_DIR:-~/.cache/netsparse/
// matrices} (scripts/fetch-matrices.sh fills it); a missing file is reported and skipped.
//
// Byte model of "effective GB/s" (compulsory traffic, the same for every implementation so GB/s
// ratios equal speed ratios): A = 8 B per nonzero (32-bit index + fp32 value) + 4 B per row;
// SpMM: + 4K B per distinct column touched (B) + 4K B per row (C, written once);
// SDDMM: + 4K B per row (X) + 4K B per distinct column (Y) + 4 B per nonzero (output);
// SpMV: + 4 B per distinct column (x) + 4 B per row (y). FLOPs: 2 nnz K (SpMV: 2 nnz).
// Triad: a[i] = b[i] + s c[i] over doubles, 24 B per element (STREAM's convention: no
// write-allocate traffic counted), 3 arrays of 128 MiB (12x a 32 MiB L3), best of 20, measured
// before and after the kernels; the better of the two is the %triad reference. Timing:
// implementations of a case run interleaved, round-robin, best time of >= 3 rounds.
#include <omp.h>
#include <sys/mman.h>

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "eigen_csr.hpp"
#include "matrices.hpp"
#include "netsparse/autotune.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "netsparse/tiled.hpp"
#include "stream_triad.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

#ifndef NETSPARSE_BENCH_ARCH
#define NETSPARSE_BENCH_ARCH ""
#endif

namespace {

using namespace netsparse;
using netsparse::bench::Clock;
using netsparse::bench::seconds_since;
using netsparse::bench::stream_triad_gbs;
using EigenCsr = Eigen::SparseMatrix<float, Eigen::RowMajor, int>;
using EigenDense = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using DenseMap = Eigen::Map<EigenDense, Eigen::Aligned64>;
using VectorMap = Eigen::Map<Eigen::VectorXf, Eigen::Aligned64>;

// Dense operands live on 2 MiB pages where the kernel allows it (madvise): B and Y rows are
// read at random, and with 4 KiB pages a 100+ MiB operand costs a TLB miss per row. Eigen
// gets the very same buffers, so the comparison stays fair.
class DenseBuffer {
 public:
  explicit DenseBuffer(std::size_t floats) : floats_(floats) {
    constexpr std::size_t kPage = std::size_t{2} << 20;
    const std::size_t bytes =
        std::max<std::size_t>(kPage, (floats * sizeof(float) + kPage - 1) / kPage * kPage);
    data_ = static_cast<float*>(std::aligned_alloc(kPage, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    madvise(data_, bytes, MADV_HUGEPAGE);  // advisory: ignored where THP is off
  }
  ~DenseBuffer() { std::free(data_); }
  DenseBuffer(const DenseBuffer&) = delete;
  DenseBuffer& operator=(const DenseBuffer&) = delete;
  [[nodiscard]] float* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return floats_; }

 private:
  float* data_ = nullptr;
  std::size_t floats_ = 0;
};

struct Options {
  std::string data_dir;
  std::vector<std::string> matrices{"NotreDame_www", "mdual", "kron18", "stencil"};
  std::vector<int> ks{1, 16, 128};
  std::vector<std::string> kernels{"spmm", "sddmm", "spmv"};
  double tune_budget = 4.0;  // seconds per autotune search
  double min_time = 0.3;     // seconds of timed runs per implementation and case (at least 3)
  gidx_t stencil_n = 70;     // 70^3 points x 3 dof = 1.03 M rows
  int kron_scale = 18;
};

const char* const kHelp =
    "usage: bench_local_kernels [--data-dir DIR] [--matrices NotreDame_www,mdual,kron18,stencil]\n"
    "                           [--ks 1,16,128] [--kernels spmm,sddmm,spmv] [--tune-budget S]\n"
    "                           [--min-time S] [--stencil N] [--kron-scale S]\n"
    "  --data-dir DIR     where the named matrices are (default NETSPARSE_DATA_DIR)\n"
    "  --matrices LIST    NotreDame_www, mdual, kronS, stencil, comma-separated\n"
    "  --ks LIST          dense widths K, each >= 1 (default 1,16,128)\n"
    "  --kernels LIST     spmm, sddmm, spmv (default all)\n"
    "  --tune-budget S    seconds per autotune search (default 4)\n"
    "  --min-time S       seconds of timed runs per implementation and case (default 0.3)\n"
    "  --stencil N        stencil of N^3 points x 3 dof (default 70)\n"
    "  --kron-scale S     Kronecker generator scale (default 18)\n"
    "Exit codes: 0 done, 2 a bad option.\n";

// -1: go on; else the exit code (0 after --help, 2 after a bad option).
int parse_options(int argc, char** argv, Options& o) {
  namespace nb = netsparse::bench;
  cli::App app{"bench_local_kernels"};
  nb::add_matrix_options(app, o.data_dir, o.matrices);
  app.add_option_function<std::string>("--ks", [&](const std::string& v) {
    o.ks.clear();
    for (long long k : nb::int_list("--ks", v, 1, 1 << 20)) o.ks.push_back(static_cast<int>(k));
  });
  app.add_option_function<std::string>("--kernels", [&](const std::string& v) {
    o.kernels = nb::member_list("--kernels", v, {"spmm", "sddmm", "spmv"});
  });
  app.add_option("--tune-budget", o.tune_budget)->check(cli::Range(0.0, 1e6));
  app.add_option("--min-time", o.min_time)->check(cli::Range(0.0, 1e6));
  app.add_option("--stencil", o.stencil_n)->check(cli::Range(1, 1 << 20));
  app.add_option("--kron-scale", o.kron_scale)->check(cli::Range(1, 40));
  return nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_local_kernels",
                                 kHelp, true);
}

// One implementation of a case: a label, its configuration text, and one run.
struct Impl {
  std::string name;
  std::string config;
  std::function<void()> run;
  double best = 1e30;
};

// Runs the implementations round-robin (one run each per round, after a warm-up round) and
// keeps each one's best time. Interleaving matters on a shared machine: load from other
// processes then hits every implementation alike instead of whichever ran during a burst.
// At least 3 rounds, and about min_time seconds per implementation.
void measure_interleaved(std::vector<Impl>& impls, double min_time) {
  for (Impl& impl : impls) impl.run();  // warm-up: page faults, caches, thread teams
  const Clock::time_point t0 = Clock::now();
  for (int round = 0; round < 50; ++round) {
    for (Impl& impl : impls) {
      const Clock::time_point r0 = Clock::now();
      impl.run();
      impl.best = std::min(impl.best, seconds_since(r0));
    }
    if (round >= 2 && seconds_since(t0) >= min_time * static_cast<double>(impls.size())) break;
  }
}

void fill(float* p, std::size_t n, unsigned seed) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<float>((i * 2654435761u + seed) % 1024) / 1024.0f - 0.5f;
}

// Largest |x - y| / (|y| + 1e-3 * max|y|): a sanity check that the timed runs computed the
// right thing, not a test.
double max_rel_diff(const float* x, const float* y, std::size_t n) {
  double scale = 0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, double{std::abs(y[i])});
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::abs(double{x[i]} - y[i]) / (std::abs(y[i]) + 1e-3 * scale));
  return worst;
}

struct NamedMatrix {
  std::string name;
  CsrMatrix csr;
};

std::optional<NamedMatrix> load(const std::string& name, const Options& o) {
  const Clock::time_point t0 = Clock::now();
  NamedMatrix m{name, {}};
  if (name == "NotreDame_www") {
    const auto path = netsparse::bench::data_file(o.data_dir, "NotreDame_www.mtx", name);
    if (!path) return std::nullopt;
    m.csr = read_matrix_market(*path);
  } else if (name == "mdual") {
    const auto path = netsparse::bench::data_file(o.data_dir, "mdual.graph", name);
    if (!path) return std::nullopt;
    m.csr = read_metis_graph(*path).adjacency;
  } else if (name == "kron18" || name.rfind("kron", 0) == 0) {
    KroneckerParams p;
    p.scale = o.kron_scale;
    m.name = "kron" + std::to_string(o.kron_scale);
    m.csr = generate_kronecker(p, 0, gidx_t{1} << p.scale);
  } else if (name == "stencil") {
    StencilParams p{o.stencil_n, o.stencil_n, o.stencil_n, 3};
    m.name = "stencil27_" + std::to_string(o.stencil_n) + "^3x3";
    m.csr = generate_stencil27(p, 0, o.stencil_n * o.stencil_n * o.stencil_n * 3);
  } else {
    std::printf("!!! unknown matrix '%s' (known: NotreDame_www, mdual, kron18, stencil)\n",
                name.c_str());
    return std::nullopt;
  }
  std::printf("# %s: %lld x %lld, %lld nonzeros (%.1f per row), loaded in %.2f s\n", m.name.c_str(),
              static_cast<long long>(m.csr.n_rows), static_cast<long long>(m.csr.n_cols),
              static_cast<long long>(m.csr.nnz()),
              m.csr.n_rows ? static_cast<double>(m.csr.nnz()) / m.csr.n_rows : 0.0,
              seconds_since(t0));
  std::fflush(stdout);
  return m;
}

// Collects result rows while the cases run (a one-line progress note per case) and prints the
// table at the end, when the triad measured after the kernels is known too.
class Reporter {
 public:
  // impls: tuned, base, then the baseline with 1 thread and (if threads > 1) with all threads.
  void add(const std::string& matrix, const char* kernel, int k, double flops, double bytes,
           const std::vector<Impl>& impls) {
    const double eigen1 = impls[2].best;
    const double eigen_n = impls.back().best;
    for (const Impl& r : impls)
      rows_.push_back({matrix, kernel, k, r.name, r.config, r.best, flops, bytes, eigen1 / r.best,
                       eigen_n / r.best});
    std::printf("#   %s %s K=%d: tuned %.3f ms, base %.3f ms, baseline %.3f ms (1t) %.3f ms\n",
                matrix.c_str(), kernel, k, impls[0].best * 1e3, impls[1].best * 1e3, eigen1 * 1e3,
                eigen_n * 1e3);
    std::fflush(stdout);
  }
  void print(double triad) const {
    std::printf("%-18s %-6s %4s %-10s %-36s %9s %8s %8s %7s %8s %8s\n", "matrix", "kernel", "K",
                "impl", "config", "ms", "GFLOP/s", "effGB/s", "%triad", "xEigen1", "xEigenN");
    for (const Row& r : rows_) {
      const double gbs = r.bytes / r.seconds / 1e9;
      std::printf("%-18s %-6s %4d %-10s %-36s %9.3f %8.2f %8.2f %6.1f%% %8.2f %8.2f\n",
                  r.matrix.c_str(), r.kernel, r.k, r.impl.c_str(), r.config.c_str(),
                  r.seconds * 1e3, r.flops / r.seconds / 1e9, gbs, 100.0 * gbs / triad, r.vs_eigen1,
                  r.vs_eigen_n);
    }
  }

 private:
  struct Row {
    std::string matrix;
    const char* kernel;
    int k;
    std::string impl;
    std::string config;
    double seconds;
    double flops;
    double bytes;
    double vs_eigen1;
    double vs_eigen_n;
  };
  std::vector<Row> rows_;
};

bool wants(const std::vector<std::string>& list, const char* item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

void run_matrix(const NamedMatrix& m, const Options& o, Reporter& rep, int threads) {
  const CsrMatrix& a = m.csr;
  const EigenCsr ea = netsparse::bench::to_eigen<EigenCsr>(a);
  const double nnz = static_cast<double>(a.nnz());
  const double rows = static_cast<double>(a.n_rows);
  const TiledMatrix base_layout(a, base_config());
  const double distinct_cols = static_cast<double>(base_layout.panel_columns(0).size());
  const double a_bytes = 8.0 * nnz + 4.0 * rows;

  const auto tuned_layout = [&](KernelKind kind, int k) {
    AutotuneOptions opt;
    opt.time_budget_seconds = o.tune_budget;
    const AutotuneResult r = autotune(a, kind, k, opt);
    std::printf("#   autotune %s K=%d: %s\n", to_string(kind), k, summary(r).c_str());
    return TiledMatrix(a, r.best);
  };
  // The baseline at 1 thread, and at `threads` threads when that differs.
  const auto add_baseline = [&](std::vector<Impl>& impls, const std::string& config,
                                const std::function<void(int)>& run) {
    for (const int t : {1, threads}) {
      impls.push_back({"eigen-" + std::to_string(t) + "t", config, [run, t] { run(t); }});
      if (threads == 1) break;
    }
  };
  const auto tiled_impls = [&](const TiledMatrix& tuned,
                               const std::function<void(const TiledMatrix&)>& run) {
    return std::vector<Impl>{
        {"tuned", to_string(tuned.config()), [&tuned, run] { run(tuned); }},
        {"base", to_string(base_layout.config()), [&, run] { run(base_layout); }}};
  };

  // Times the implementations side by side, says when the tiled result differs from the
  // baseline's, and reports the kernel (`bytes`: the traffic a kernel of this shape must move).
  const auto measure_and_report = [&](std::vector<Impl>& impls, const char* kernel, int k,
                                      const float* got, const float* want, std::size_t n,
                                      const char* baseline, double flops, double bytes) {
    measure_interleaved(impls, o.min_time);
    const double err = max_rel_diff(got, want, n);
    if (err > 1e-3) {
      std::printf("!!! %s result differs from %s: max rel diff %.3g\n", kernel, baseline, err);
    }
    rep.add(m.name, kernel, k, flops, bytes, impls);
  };

  for (const int k : o.ks) {
    if (wants(o.kernels, "spmm")) {
      DenseBuffer b_buf(a.n_cols * k), c_buf(a.n_rows * k), c_ref_buf(a.n_rows * k);
      DenseMap b(b_buf.data(), a.n_cols, k);
      DenseMap c(c_buf.data(), a.n_rows, k);
      DenseMap c_ref(c_ref_buf.data(), a.n_rows, k);
      fill(b.data(), b.size(), 1);
      fill(c.data(), c.size(), 0);
      fill(c_ref.data(), c_ref.size(), 0);
      const DenseConstView bv{b.data(), 0, k, a.n_cols};
      const TiledMatrix tuned = tuned_layout(KernelKind::spmm, k);
      std::vector<Impl> impls =
          tiled_impls(tuned, [&](const TiledMatrix& t) { spmm(t, bv, c.data(), k, k, false); });
      add_baseline(impls, "Eigen CSR x dense (RowMajor)", [&](int t) {
        Eigen::setNbThreads(t);
        c_ref.noalias() = ea * b;
      });
      measure_and_report(impls, "SpMM", k, c.data(), c_ref.data(), c.size(), "Eigen", 2.0 * nnz * k,
                         a_bytes + 4.0 * k * (distinct_cols + rows));
    }
    if (wants(o.kernels, "sddmm")) {
      DenseBuffer x_buf(a.n_rows * k), y_buf(a.n_cols * k), out_buf(a.nnz()), ref_buf(a.nnz());
      DenseMap x(x_buf.data(), a.n_rows, k);
      DenseMap y(y_buf.data(), a.n_cols, k);
      fill(x.data(), x.size(), 2);
      fill(y.data(), y.size(), 3);
      fill(out_buf.data(), out_buf.size(), 0);
      fill(ref_buf.data(), ref_buf.size(), 0);
      float* out = out_buf.data();
      float* out_ref = ref_buf.data();
      const DenseConstView yv{y.data(), 0, k, a.n_cols};
      const TiledMatrix tuned = tuned_layout(KernelKind::sddmm, k);
      std::vector<Impl> impls =
          tiled_impls(tuned, [&](const TiledMatrix& t) { sddmm(t, x.data(), k, yv, k, out); });
      // Eigen has no SDDMM: the baseline is a CSR row loop using Eigen's dot product,
      // OpenMP-parallel over rows like Eigen's own products.
      add_baseline(impls, "CSR loop + Eigen dot", [&](int t) {
#pragma omp parallel for schedule(dynamic, 256) num_threads(t)
        for (Eigen::Index r = 0; r < ea.outerSize(); ++r)
          for (int j = ea.outerIndexPtr()[r]; j < ea.outerIndexPtr()[r + 1]; ++j)
            out_ref[j] = ea.valuePtr()[j] * x.row(r).dot(y.row(ea.innerIndexPtr()[j]));
      });
      measure_and_report(impls, "SDDMM", k, out, out_ref, a.nnz(), "reference", 2.0 * nnz * k,
                         a_bytes + 4.0 * k * (rows + distinct_cols) + 4.0 * nnz);
    }
  }
  if (wants(o.kernels, "spmv")) {
    DenseBuffer x_buf(a.n_cols), y_buf(a.n_rows), y_ref_buf(a.n_rows);
    VectorMap x(x_buf.data(), a.n_cols);
    VectorMap y(y_buf.data(), a.n_rows);
    VectorMap y_ref(y_ref_buf.data(), a.n_rows);
    fill(x.data(), x.size(), 4);
    fill(y.data(), y.size(), 0);
    fill(y_ref.data(), y_ref.size(), 0);
    const DenseConstView xv{x.data(), 0, 1, a.n_cols};
    const TiledMatrix tuned = tuned_layout(KernelKind::spmv, 1);
    std::vector<Impl> impls =
        tiled_impls(tuned, [&](const TiledMatrix& t) { spmv(t, xv, y.data(), false); });
    add_baseline(impls, "Eigen CSR x vector", [&](int t) {
      Eigen::setNbThreads(t);
      y_ref.noalias() = ea * x;
    });
    measure_and_report(impls, "SpMV", 1, y.data(), y_ref.data(), y.size(), "Eigen", 2.0 * nnz,
                       a_bytes + 4.0 * (distinct_cols + rows));
  }
  Eigen::setNbThreads(threads);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int code = parse_options(argc, argv, o); code >= 0) return code;
  const int threads = omp_get_max_threads();
  const Clock::time_point t0 = Clock::now();
  std::printf(
      "# bench_local_kernels: %d OpenMP threads, kernel ISA %s, -march=%s, Eigen %d.%d.%d "
      "(SIMD: %s, OpenMP: %s), data dir %s\n",
      threads, active_kernel_isa().c_str(),
      *NETSPARSE_BENCH_ARCH ? NETSPARSE_BENCH_ARCH : "(compiler default)", EIGEN_WORLD_VERSION,
      EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse(),
#ifdef EIGEN_HAS_OPENMP
      "yes",
#else
      "no",
#endif
      o.data_dir.c_str());
  // The triad is measured before and after the kernels and the better figure is the yardstick:
  // on a shared machine either measurement may coincide with someone else's burst.
  const double triad_before = stream_triad_gbs();
  std::printf("# STREAM triad before (%d threads, 3 x 128 MiB doubles): %.2f GB/s\n", threads,
              triad_before);
  int failures = 0;
  Reporter rep;
  for (const std::string& name : o.matrices) {
    try {
      std::optional<NamedMatrix> m = load(name, o);
      if (m) run_matrix(*m, o, rep, threads);
    } catch (const std::exception& e) {
      std::printf("!!! %s failed: %s\n", name.c_str(), e.what());
      ++failures;
    }
  }
  const double triad_after = stream_triad_gbs();
  const double triad = std::max(triad_before, triad_after);
  std::printf("# STREAM triad after: %.2f GB/s; %%triad below is against %.2f GB/s\n", triad_after,
              triad);
  std::printf(
      "# timings: best of >= 3 interleaved rounds after a warm-up; xEigenN = baseline "
      "time with N threads / this time\n");
  rep.print(triad);
  std::printf("# total %.1f s\n", seconds_since(t0));
  return failures == 0 ? 0 : 1;
}
