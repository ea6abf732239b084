// Local transpose benchmark: MeNDA's merge transpose against scanTrans, mergeTrans (Wang et
// al.) and Eigen's transpose, and the outer-product SpMV against the row-wise CSR SpMV, with a
// STREAM triad measured in the same run as the bandwidth yardstick. Prints tables; exits 1 if
// any implementation's result differs (so the ctest smoke run checks correctness too).
//
//   bench_transpose [--data-dir DIR] [--matrices LIST] [--rounds N] [--leaves LIST]
//                   [--no-spmv] [--check-input]
//
// Matrices: gen:kron:S (Graph500 Kronecker, edge factor 16), NotreDame_www (Matrix Market) and
// mdual (METIS graph) from ${NETSPARSE_DATA_DIR:-~/.cache/netsparse/matrices}
// (scripts/fetch-matrices.sh); a missing file is reported and skipped. Default:
// gen:kron:20,NotreDame_www,mdual. Threads: OMP_NUM_THREADS (our methods and the triad; Eigen's
// transpose is sequential). --leaves: the merge method at each listed leaf count (the first is
// also the one in the ratios; default kDefaultTransposeLeaves).
//
// Timing: every implementation of a matrix runs once as warm-up, then --rounds (default 9)
// rounds round-robin (interleaved, so load from other processes hits all alike); the median
// is reported. Our transposes write into an output CsrMatrix reused across runs
// (transpose_into: steady state, no allocation) and skip the input check unless
// --check-input; "merge (fresh)" is the one-call transpose() with its check and allocation.
// Eigen: `t = a.transpose()` from a RowMajor SparseMatrix<double> to a RowMajor one (it
// allocates t each time), with 64-bit indices (the same bytes as ours) and with Eigen's
// default 32-bit ones.
//
// Byte model (compulsory traffic, the same for every implementation): read row_ptr, col_idx,
// values (8 B each per entry) and write the transpose's (GB/s = that / time). SpMV: the matrix
// (16 B per nonzero + 8 B per pointer) + x and y once. Triad: a[i] = b[i] + s c[i], 24 B per
// element, 3 x 128 MiB, best of 20, before and after; the better one is the reference.
#include <omp.h>

#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
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
#include "netsparse/transpose.hpp"
#include "stats.hpp"
#include "stream_triad.hpp"

namespace cli = netsparse::bench::cli;  // the command-line interface (cli.hpp)

namespace {

using namespace netsparse;
using netsparse::bench::Clock;
using netsparse::bench::seconds_since;
using netsparse::bench::stream_triad_gbs;
using Eigen64 = Eigen::SparseMatrix<double, Eigen::RowMajor, std::int64_t>;
using Eigen32 = Eigen::SparseMatrix<double, Eigen::RowMajor, int>;

struct Options {
  std::string data_dir;
  std::vector<std::string> matrices{"gen:kron:20", "NotreDame_www", "mdual"};
  int rounds = 9;
  std::vector<int> leaves{kDefaultTransposeLeaves};
  bool spmv = true;
  bool check_input = false;
};

const char* const kHelp =
    "usage: bench_transpose [--data-dir DIR] [--matrices gen:kron:20,NotreDame_www,mdual]\n"
    "                       [--rounds N] [--leaves 64,16,...] [--no-spmv] [--check-input]\n"
    "  --data-dir DIR     where the named matrices are (default NETSPARSE_DATA_DIR)\n"
    "  --matrices LIST    generator specs or matrix names, comma-separated\n"
    "  --rounds N         interleaved rounds; the median is reported (default 9)\n"
    "  --leaves LIST      MeNDA merge-tree leaf counts, each >= 2\n"
    "  --no-spmv          skip the outer-product vs row-wise SpMV comparison\n"
    "  --check-input      also check each input matrix\n"
    "Exit codes: 0 every result agreed, 1 a result differs, 2 a bad option.\n";

// A bad matrix found after parsing: the same one line and exit code as a bad option.
[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "bench_transpose: %s (see --help)\n", msg.c_str());
  std::exit(2);
}

// -1: go on; else the exit code (0 after --help, 2 after a bad option).
int parse(int argc, char** argv, Options& o) {
  namespace nb = netsparse::bench;
  cli::App app{"bench_transpose"};
  nb::add_matrix_options(app, o.data_dir, o.matrices);
  app.add_option("--rounds", o.rounds)->check(cli::Range(1, 1000000));
  app.add_option_function<std::string>("--leaves", [&](const std::string& v) {
    o.leaves.clear();
    for (long long l : nb::int_list("--leaves", v, 2, 1 << 20))
      o.leaves.push_back(static_cast<int>(l));
  });
  app.add_flag_callback("--no-spmv", [&] { o.spmv = false; });
  app.add_flag("--check-input", o.check_input);
  return nb::finish_command_line(nb::parse_command_line(app, argc, argv), "bench_transpose", kHelp,
                                 true);
}

struct Impl {
  std::string name;
  std::function<void()> run;
  double bytes = 0;
  std::vector<double> times;
  [[nodiscard]] double median() const { return netsparse::bench::median(times); }
};

void measure(std::vector<Impl>& impls, int rounds) {
  for (Impl& impl : impls) impl.run();  // warm-up: page faults, thread teams
  for (int r = 0; r < rounds; ++r)
    for (Impl& impl : impls) {
      const Clock::time_point t0 = Clock::now();
      impl.run();
      impl.times.push_back(seconds_since(t0));
    }
}

std::optional<std::pair<std::string, CsrMatrix>> load(const std::string& spec, const Options& o) {
  const Clock::time_point t0 = Clock::now();
  std::string name = spec;
  CsrMatrix m;
  const auto file = [&](const std::string& f) {
    return netsparse::bench::data_file(o.data_dir, f, spec);
  };
  if (spec == "NotreDame_www") {
    const auto path = file("NotreDame_www.mtx");
    if (!path) return std::nullopt;
    m = read_matrix_market(*path);
  } else if (spec == "mdual") {
    const auto path = file("mdual.graph");
    if (!path) return std::nullopt;
    m = read_metis_graph(*path).adjacency;
  } else if (spec.rfind("gen:kron:", 0) == 0) {
    KroneckerParams p;
    try {
      p.scale = std::stoi(spec.substr(9));
    } catch (const std::logic_error&) {
      usage("bad matrix " + spec);
    }
    name = "kron" + std::to_string(p.scale);
    m = generate_kronecker(p, 0, gidx_t{1} << p.scale);
  } else {
    usage("unknown matrix '" + spec + "' (gen:kron:S, NotreDame_www, mdual)");
  }
  std::printf("# %s: %lld x %lld, %lld nonzeros (%.1f per row), loaded in %.2f s\n", name.c_str(),
              static_cast<long long>(m.n_rows), static_cast<long long>(m.n_cols),
              static_cast<long long>(m.nnz()),
              m.n_rows ? static_cast<double>(m.nnz()) / static_cast<double>(m.n_rows) : 0.0,
              seconds_since(t0));
  std::fflush(stdout);
  return std::make_pair(name, std::move(m));
}

bool same(const CsrMatrix& x, const CsrMatrix& y) {
  return x.n_rows == y.n_rows && x.n_cols == y.n_cols && x.row_ptr == y.row_ptr &&
         x.col_idx == y.col_idx && x.values == y.values;
}

template <class E>
bool same(const E& e, const CsrMatrix& y) {
  return e.rows() == y.n_rows && e.nonZeros() == y.nnz() &&
         std::equal(y.row_ptr.begin(), y.row_ptr.end(), e.outerIndexPtr()) &&
         std::equal(y.col_idx.begin(), y.col_idx.end(), e.innerIndexPtr()) &&
         std::equal(y.values.begin(), y.values.end(), e.valuePtr());
}

struct Row {
  std::string matrix, impl;
  double seconds, bytes;
};

// What the run prints at its end: the table of every implementation's median and the ratios.
struct Report {
  std::vector<Row> rows;
  std::vector<std::string> ratio_lines;
  bool ok = true;  // every result agreed with the reference

  void add_ratio_line(const std::string& line) {
    ratio_lines.push_back(line);
    std::printf("#   %s\n", line.c_str());
    std::fflush(stdout);
  }
};

void print_header(const Options& o, int threads) {
  std::printf(
      "# bench_transpose: %d OpenMP threads, median of %d interleaved rounds; Eigen %d.%d.%d "
      "(%s); input check in timed runs: %s\n",
      threads, o.rounds, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
      Eigen::SimdInstructionSetsInUse(), o.check_input ? "on" : "off");
}

// The transposes of a: merge at each leaf count, scanTrans, mergeTrans, Eigen (64- and 32-bit
// indices), the one-call merge; each checked against want (scanTrans, computed once up front).
void bench_transposes(const std::string& name, const CsrMatrix& a, const CsrMatrix& want,
                      const Options& o, Report& report) {
  const double nnz = static_cast<double>(a.nnz());
  const double t_bytes = 32.0 * nnz + 8.0 * static_cast<double>(a.n_rows + 1) +
                         8.0 * static_cast<double>(a.n_cols + 1);
  const Eigen64 e64 = netsparse::bench::to_eigen<Eigen64>(a);
  const Eigen32 e32 = netsparse::bench::to_eigen<Eigen32>(a);
  Eigen64 et64;
  Eigen32 et32;
  std::vector<CsrMatrix> outs(o.leaves.size() + 3);
  CsrMatrix fresh;
  std::vector<Impl> impls;
  for (std::size_t i = 0; i < o.leaves.size(); ++i) {
    const TransposeOptions opt{
        .method = TransposeMethod::merge, .leaves = o.leaves[i], .check_input = o.check_input};
    impls.push_back({"merge l=" + std::to_string(o.leaves[i]),
                     [&a, &outs, i, opt] { transpose_into(a, outs[i], opt); },
                     t_bytes,
                     {}});
  }
  const std::size_t k = o.leaves.size();
  impls.push_back({"scanTrans",
                   [&, k] {
                     transpose_into(
                         a, outs[k],
                         {.method = TransposeMethod::scan, .check_input = o.check_input});
                   },
                   t_bytes,
                   {}});
  impls.push_back(
      {"mergeTrans",
       [&, k] {
         transpose_into(a, outs[k + 1],
                        {.method = TransposeMethod::merge_trans_cpu, .check_input = o.check_input});
       },
       t_bytes,
       {}});
  impls.push_back({"Eigen (int64)", [&] { et64 = e64.transpose(); }, t_bytes, {}});
  impls.push_back({"Eigen (int32)", [&] { et32 = e32.transpose(); }, t_bytes, {}});
  impls.push_back(
      {"merge (fresh)",
       [&] { fresh = transpose(a, {.method = TransposeMethod::merge, .leaves = o.leaves[0]}); },
       t_bytes,
       {}});
  measure(impls, o.rounds);
  for (std::size_t i = 0; i < k + 2; ++i)
    if (!same(outs[i], want)) {
      std::printf("!!! %s: %s result differs from the reference\n", name.c_str(),
                  impls[i].name.c_str());
      report.ok = false;
    }
  if (!same(fresh, want) || !same(et64, want) || !same(et32, want)) {
    std::printf("!!! %s: fresh merge or Eigen result differs\n", name.c_str());
    report.ok = false;
  }
  for (const Impl& impl : impls)
    report.rows.push_back({name, impl.name, impl.median(), impl.bytes});
  const double merge = impls[0].median(), scan = impls[k].median(), mtrans = impls[k + 1].median(),
               eig = impls[k + 2].median(), eig32 = impls[k + 3].median();
  char line[512];
  std::snprintf(line, sizeof line,
                "%-14s merge(l=%d) vs Eigen64 %.2fx, vs Eigen32 %.2fx, vs scanTrans %.2fx, "
                "vs mergeTrans %.2fx",
                name.c_str(), o.leaves[0], eig / merge, eig32 / merge, scan / merge,
                mtrans / merge);
  report.add_ratio_line(line);
}

// Largest relative difference of y from y_ref (1 + |y_ref| in the denominator).
template <class T>
double max_relative_error(const std::vector<T>& y, const std::vector<T>& y_ref) {
  double err = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    err = std::max(err, double{std::abs(y[i] - y_ref[i])} / (1.0 + std::abs(y_ref[i])));
  return err;
}

// SpMV of a: the outer product on at (A^T) against the row-wise CSR kernel and the SPADE-tiled
// one, in f64 and f32; the outer and tiled results are checked against the row-wise ones.
void bench_spmv(const std::string& name, const CsrMatrix& a, const CsrMatrix& at, const Options& o,
                Report& report) {
  std::vector<double> xd(static_cast<std::size_t>(a.n_cols)),
      yd(static_cast<std::size_t>(a.n_rows)), yd_ref(yd.size());
  for (std::size_t i = 0; i < xd.size(); ++i)
    xd[i] = static_cast<double>((i * 2654435761u) % 1024) / 1024.0 - 0.5;
  std::vector<float> xf(xd.begin(), xd.end()), yf(yd.size()), yf_ref(yd.size());
  const Clock::time_point p0 = Clock::now();
  OuterSpmv plan(at, {.leaves = o.leaves[0]});
  const double plan_s = seconds_since(p0);
  const double s_bytes =
      16.0 * static_cast<double>(a.nnz()) + 8.0 * static_cast<double>(a.n_cols + 1);
  const double vec = static_cast<double>(a.n_rows + a.n_cols);
  std::vector<Impl> sp;
  sp.push_back({"row-wise f64",
                [&] {
                  spmm_csr_columns(a, 0, a.n_cols, true,
                                   DenseConstViewF64{xd.data(), 0, 1, a.n_cols}, yd_ref.data(), 1,
                                   1, false);
                },
                s_bytes + 8 * vec,
                {}});
  sp.push_back({"outer f64",
                [&] { plan.run(std::span<const double>(xd), std::span<double>(yd)); },
                s_bytes + 8 * vec,
                {}});
  sp.push_back({"row-wise f32",
                [&] {
                  spmm_csr_columns(a, 0, a.n_cols, true, DenseConstView{xf.data(), 0, 1, a.n_cols},
                                   yf_ref.data(), 1, 1, false);
                },
                s_bytes + 4 * vec,
                {}});
  sp.push_back({"outer f32",
                [&] { plan.run(std::span<const float>(xf), std::span<float>(yf)); },
                s_bytes + 4 * vec,
                {}});
  // The SPADE-tiled SpMV (base configuration: RP 256, all columns), the row-wise kernel
  // the distributed layer uses for fixed patterns.
  const TiledMatrix t64(a, base_config(), ScalarType::f64), t32(a, base_config());
  std::vector<double> yd_t(yd.size());
  std::vector<float> yf_t(yd.size());
  sp.push_back({"tiled f64",
                [&] {
                  spmv(t64, DenseConstViewF64{xd.data(), 0, 1, a.n_cols}, yd_t.data(), false);
                },
                s_bytes + 8 * vec,
                {}});
  sp.push_back({"tiled f32",
                [&] {
                  spmv(t32, DenseConstView{xf.data(), 0, 1, a.n_cols}, yf_t.data(), false);
                },
                s_bytes + 4 * vec,
                {}});
  measure(sp, o.rounds);
  const double err_d = std::max(max_relative_error(yd, yd_ref), max_relative_error(yd_t, yd_ref));
  const double err_f = std::max(max_relative_error(yf, yf_ref), max_relative_error(yf_t, yf_ref));
  if (err_d > 1e-10 || err_f > 1e-3) {
    std::printf("!!! %s: outer-product SpMV differs from row-wise: %.3g (f64) %.3g (f32)\n",
                name.c_str(), err_d, err_f);
    report.ok = false;
  }
  for (const Impl& impl : sp)
    report.rows.push_back({name, "SpMV " + impl.name, impl.median(), impl.bytes});
  char line[512];
  std::snprintf(line, sizeof line,
                "%-14s SpMV outer/row-wise (CSR) time: f64 %.2fx, f32 %.2fx; outer/tiled: f64 "
                "%.2fx, f32 %.2fx (plan build %.2f ms)",
                name.c_str(), sp[1].median() / sp[0].median(), sp[3].median() / sp[2].median(),
                sp[1].median() / sp[4].median(), sp[3].median() / sp[5].median(), plan_s * 1e3);
  report.add_ratio_line(line);
}

// The table (median, GB/s, share of the better STREAM triad) and the ratio lines.
void print_report(const Report& report, double triad_before, double triad_after) {
  const double triad = std::max(triad_before, triad_after);
  std::printf("# STREAM triad after: %.2f GB/s; %%triad below is against %.2f GB/s\n", triad_after,
              triad);
  std::printf("%-14s %-20s %10s %8s %7s\n", "matrix", "impl", "median ms", "GB/s", "%triad");
  for (const Row& r : report.rows) {
    const double gbs = r.bytes / r.seconds / 1e9;
    std::printf("%-14s %-20s %10.3f %8.2f %6.1f%%\n", r.matrix.c_str(), r.impl.c_str(),
                r.seconds * 1e3, gbs, 100.0 * gbs / triad);
  }
  std::printf("ratios (time of the other / time of merge; > 1 = merge faster):\n");
  for (const std::string& l : report.ratio_lines) std::printf("  %s\n", l.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int code = parse(argc, argv, o); code >= 0) return code;
  const int threads = std::max(1, omp_get_max_threads());
  print_header(o, threads);
  const double triad_before = stream_triad_gbs();
  std::printf("# STREAM triad before (%d threads): %.2f GB/s\n", threads, triad_before);
  std::fflush(stdout);
  Report report;
  for (const std::string& spec : o.matrices) {
    const auto loaded = load(spec, o);
    if (!loaded) continue;
    const auto& [name, a] = *loaded;
    const CsrMatrix want = transpose(a, {.method = TransposeMethod::scan});
    bench_transposes(name, a, want, o, report);
    if (o.spmv) bench_spmv(name, a, want, o, report);
  }
  print_report(report, triad_before, stream_triad_gbs());
  return report.ok ? 0 : 1;
}
