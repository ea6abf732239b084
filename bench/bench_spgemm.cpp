// Distributed SpGEMM benchmark (include/netsparse/spgemm.hpp): C = A * A per matrix, in every
// SpgemmMode (netsparse, su, inspector-executor), with C's nnz, the setup (pattern exchange +
// symbolic phase) and the time per product (value exchange + numeric phase), each checked
// against a sequential reference. Exits 1 when a mode's C differs from the reference. Built
// with PETSc, PETSc's MatMatMult (MATMPIAIJ x MATMPIAIJ, same row and column split) runs too
// (`petsc` in --modes; on by default there): setup = to_petsc + MAT_INITIAL_MATRIX, product =
// MAT_REUSE_MATRIX, its C checked like the others (gather / numeric / bytes not split out).
// Built with CombBLAS, CombBLAS's 2-D SUMMA Mult_AnXBn_Synch (PlusTimes, fp64) runs too
// (`combblas`; on by default there) when np is a perfect square (else one line says it is
// skipped): setup = the bench's rows redistributed to CombBLAS's sqrt(p) x sqrt(p) blocks + the
// copy B of A, product = one whole Mult_AnXBn_Synch (nothing reused), C gathered back to the
// bench's rows and checked like the others.
//
//   mpirun -np 2 bench_spgemm [--matrix SPEC[,SPEC...]] [--modes netsparse,su,ie,petsc,combblas]
//       [--rounds N] [--iters M] [--dtype f64|f32] [--chunk C] [--no-plans] [--no-check]
//
// Timing: for each round (default 3), the modes take turns (interleaved, so load from other
// processes hits all alike); a mode's turn builds its DistSpgemm (setup, timed), runs one
// product returning C as a DistMatrix (untimed: netsparse records its value plan there; it is
// the C checked), then M (default 5) timed products of C's values (multiply_values: the value
// exchange and the numeric phase, no DistMatrix built). Per product: the slowest rank's mean of
// the M; the table gives the median over the rounds of the setup and of the product time, and
// of the slowest rank's gather (value exchange) and numeric times. The timed products' values
// must equal the checked C's. Reference: every rank builds the whole
// matrix alone and multiplies its own rows of A by the whole of B with local_spgemm (one
// process, no communication; the kernel itself is tested against a map-based definition in
// tests/distributed/test_spgemm.cpp): pattern exact, values within 1e-12 (f64) or 1e-5 (f32)
// relative to the row block's largest value.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/spgemm.hpp"
#include "spgemm_combblas.hpp"
#include "spgemm_petsc.hpp"

namespace {

using namespace netsparse;
namespace cli = netsparse::bench::cli;

struct Options {
  std::vector<std::string> matrices{"gen:kron:14"};
  std::vector<SpgemmMode> modes{SpgemmMode::netsparse, SpgemmMode::su,
                                SpgemmMode::inspector_executor};
  int rounds = 3;
  int iters = 5;
  ScalarType scalar = ScalarType::f64;
  int chunk = 0;
  bool plans = true;
  bool check = true;
  bool petsc = bench::kPetscMode;        // PETSc's MatMatMult too (when built with PETSc)
  bool combblas = bench::kCombblasMode;  // CombBLAS's Mult_AnXBn_Synch (built with CombBLAS)
};

const char* const kHelp =
    "usage: mpirun -np P bench_spgemm [options]\n"
    "  --matrix SPEC[,SPEC...]   matrices (gen:... or files), C = A*A each (gen:kron:14)\n"
    "  --modes LIST              netsparse,su,inspector-executor[,petsc][,combblas] (all)\n"
    "  --rounds N                rounds, modes interleaved in each (3)\n"
    "  --iters M                 timed products per mode and round (5)\n"
    "  --dtype f64|f32           value type (f64)\n"
    "  --chunk C                 netsparse's column/value chunk (0: chosen from B)\n"
    "  --no-plans                netsparse without gather plans\n"
    "  --no-check                skip the sequential reference (large matrices)\n"
    "exit codes: 0 every C matched the reference, 1 a mode's C differed, 2 a bad option\n";

// The command line (bench/common/cli.hpp): -1 to run with `o`, else the exit code (0 after
// --help, 2 after a bad option; rank 0 printed the help or the error).
int parse(int argc, char** argv, int rank, Options& o) {
  cli::App app("bench_spgemm");
  app.add_option_function<std::string>("--matrix", [&](const std::string& v) {
    o.matrices = bench::split(v);
    if (o.matrices.empty()) throw cli::ValidationError("--matrix", "needs at least one matrix");
  });
  app.add_option_function<std::string>("--modes", [&](const std::string& v) {
    o.modes.clear();
    o.petsc = false;
    o.combblas = false;
    for (const std::string& m : bench::split(v)) {
      if (m == "petsc") {
        if (!bench::kPetscMode) throw cli::ValidationError("--modes", "this build has no PETSc");
        o.petsc = true;
      } else if (m == "combblas") {
        if (!bench::kCombblasMode) {
          throw cli::ValidationError("--modes", "this build has no CombBLAS (libcombblas-dev)");
        }
        o.combblas = true;
      } else {
        try {
          o.modes.push_back(parse_spgemm_mode(m));
        } catch (const std::invalid_argument&) {
          throw cli::ValidationError("--modes", "unknown mode '" + m + "'");
        }
      }
    }
  });
  app.add_option("--rounds", o.rounds)->check(cli::Range(1, 1000));
  app.add_option("--iters", o.iters)->check(cli::Range(1, 1000000));
  app.add_option_function<std::string>("--dtype", [&](const std::string& d) {
    if (d != "f32" && d != "f64") throw cli::ValidationError("--dtype", "takes f32 or f64");
    o.scalar = d == "f32" ? ScalarType::f32 : ScalarType::f64;
  });
  app.add_option("--chunk", o.chunk)->check(cli::Range(0, 1 << 20));
  app.add_flag_callback("--no-plans", [&] { o.plans = false; });
  app.add_flag_callback("--no-check", [&] { o.check = false; });
  return bench::finish_command_line(bench::parse_command_line(app, argc, argv), "bench_spgemm",
                                    kHelp, rank == 0);
}

double max_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}
std::uint64_t sum_over_ranks(std::uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Whether this rank's block of C equals the reference block (agreed over the ranks).
bool matches(const CsrMatrix& got, const CsrMatrix& want, double tol) {
  bool ok = got.row_ptr == want.row_ptr && got.col_idx == want.col_idx;
  if (ok) {
    double scale = 0, err = 0;
    for (std::size_t x = 0; x < want.values.size(); ++x) {
      scale = std::max(scale, std::abs(want.values[x]));
      err = std::max(err, std::abs(got.values[x] - want.values[x]));
    }
    ok = err <= tol * std::max(scale, 1e-30);
  }
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v != 0;
}

// Whether the timed products gave the checked product's values on every rank.
bool all_equal(const std::vector<double>& a, const std::vector<double>& b) {
  int v = a == b ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v != 0;
}

struct ModeResult {
  std::vector<double> setup, product, gather, numeric;
  std::int64_t c_nnz = 0;
  std::uint64_t setup_bytes = 0, product_bytes = 0, remote_rows = 0;
  int chunk = 0;
  bool checked = false, ok = true;
};

int run(const Options& o) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  bool all_ok = true;
  // CombBLAS needs a square process grid: at other counts its mode is left out, said once.
  const std::string combblas_skipped = o.combblas ? bench::combblas_skip_reason(nranks) : "";
  const bool combblas = o.combblas && combblas_skipped.empty();
  if (rank == 0) {
    if (!combblas_skipped.empty()) {
      std::printf("# combblas skipped: %s\n", combblas_skipped.c_str());
    }
    std::printf("# bench_spgemm: C = A * A, np %d, %s, %d rounds x %d products, plans %s\n", nranks,
                o.scalar == ScalarType::f64 ? "f64" : "f32", o.rounds, o.iters,
                o.plans ? "on" : "off");
    std::printf("%-22s %-19s %12s %10s %12s %11s %11s %13s %13s %6s %s\n", "matrix", "mode",
                "C nnz", "setup s", "product s", "gather s", "numeric s", "setup MB in",
                "product MB in", "chunk", "check");
  }
  for (const std::string& spec : o.matrices) {
    const DistMatrix a = load_distributed_matrix(MPI_COMM_WORLD, spec);
    CsrMatrix want;
    if (o.check) {
      // The sequential reference: this rank's rows of A times the whole of B, one process.
      const CsrMatrix whole = load_distributed_matrix(MPI_COMM_SELF, spec).local();
      want = local_spgemm(a.local(), whole);
    }
    std::vector<ModeResult> results(o.modes.size());
    ModeResult petsc, cb;
    for (int round = 0; round < o.rounds; ++round) {
      for (std::size_t m = 0; m < o.modes.size(); ++m) {
        ModeResult& r = results[m];
        SpgemmOptions so;
        so.mode = o.modes[m];
        so.scalar = o.scalar;
        so.chunk = o.chunk;
        so.plans = o.plans;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        DistSpgemm product(a, a, so);
        r.setup.push_back(max_over_ranks(MPI_Wtime() - t0));
        // The first product outside the timing (netsparse: it records the value plan; every
        // mode: first touch of its buffers), returned as a DistMatrix for the check.
        const DistMatrix c = product.multiply();
        std::vector<double> values(static_cast<std::size_t>(product.local_nnz()));
        double gather = 0, numeric = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t1 = MPI_Wtime();
        for (int it = 0; it < o.iters; ++it) {
          product.multiply_values(values);
          gather += product.stats().gather_seconds;
          numeric += product.stats().numeric_seconds;
        }
        r.product.push_back(max_over_ranks((MPI_Wtime() - t1) / o.iters));
        r.gather.push_back(max_over_ranks(gather / o.iters));
        r.numeric.push_back(max_over_ranks(numeric / o.iters));
        r.c_nnz = c.nnz_global();
        r.setup_bytes = sum_over_ranks(product.stats().setup_bytes_in);
        r.product_bytes = sum_over_ranks(product.stats().multiply_bytes_in);
        r.remote_rows = sum_over_ranks(product.stats().remote_rows);
        r.chunk = product.stats().chunk;
        if (o.check && !r.checked) {
          r.checked = true;
          r.ok = matches(c.local(), want, o.scalar == ScalarType::f64 ? 1e-12 : 1e-5) &&
                 all_equal(values, c.local().values);
          all_ok = all_ok && r.ok;
        }
      }
      if constexpr (bench::kPetscMode) {
        if (o.petsc) {
          const bench::PetscSpgemmRun pr = bench::run_petsc_spgemm(a, o.iters);
          petsc.setup.push_back(pr.setup_seconds);
          petsc.product.push_back(pr.product_seconds);
          petsc.c_nnz = pr.c.nnz_global();
          if (o.check && !petsc.checked) {
            petsc.checked = true;
            petsc.ok = matches(pr.c.local(), want, o.scalar == ScalarType::f64 ? 1e-12 : 1e-5);
            all_ok = all_ok && petsc.ok;
          }
        }
      }
      if constexpr (bench::kCombblasMode) {
        if (combblas) {
          const bench::CombblasSpgemmRun cr = bench::run_combblas_spgemm(a, o.iters);
          cb.setup.push_back(cr.setup_seconds);
          cb.product.push_back(cr.product_seconds);
          cb.c_nnz = cr.c_nnz;
          if (o.check && !cb.checked) {
            cb.checked = true;
            cb.ok = matches(cr.c_rows, want, o.scalar == ScalarType::f64 ? 1e-12 : 1e-5);
            all_ok = all_ok && cb.ok;
          }
        }
      }
    }
    if (rank == 0) {
      if (o.petsc) {
        std::printf("%-22s %-19s %12lld %10.4f %12.5f %11s %11s %13s %13s %6s %s\n", spec.c_str(),
                    "petsc MatMatMult", static_cast<long long>(petsc.c_nnz), median(petsc.setup),
                    median(petsc.product), "-", "-", "-", "-", "-",
                    !o.check ? "-" : (petsc.ok ? "ok" : "MISMATCH"));
      }
      if (combblas) {
        std::printf("%-22s %-19s %12lld %10.4f %12.5f %11s %11s %13s %13s %6s %s\n", spec.c_str(),
                    "combblas Synch", static_cast<long long>(cb.c_nnz), median(cb.setup),
                    median(cb.product), "-", "-", "-", "-", "-",
                    !o.check ? "-" : (cb.ok ? "ok" : "MISMATCH"));
      }
      for (std::size_t m = 0; m < o.modes.size(); ++m) {
        const ModeResult& r = results[m];
        std::printf("%-22s %-19s %12lld %10.4f %12.5f %11.5f %11.5f %13.2f %13.2f %6d %s\n",
                    spec.c_str(), to_string(o.modes[m]), static_cast<long long>(r.c_nnz),
                    median(r.setup), median(r.product), median(r.gather), median(r.numeric),
                    r.setup_bytes / 1e6, r.product_bytes / 1e6, r.chunk,
                    !o.check ? "-" : (r.ok ? "ok" : "MISMATCH"));
      }
      // Ratios against inspector-executor (product and setup; > 1: faster than IE).
      std::size_t ie = o.modes.size();
      for (std::size_t m = 0; m < o.modes.size(); ++m) {
        if (o.modes[m] == SpgemmMode::inspector_executor) ie = m;
      }
      if (ie < o.modes.size() && o.petsc) {
        std::printf("# %s: petsc MatMatMult vs inspector-executor: product %.2fx, setup %.2fx\n",
                    spec.c_str(), median(results[ie].product) / median(petsc.product),
                    median(results[ie].setup) / median(petsc.setup));
      }
      if (ie < o.modes.size() && combblas) {
        std::printf("# %s: combblas Synch vs inspector-executor: product %.2fx, setup %.2fx\n",
                    spec.c_str(), median(results[ie].product) / median(cb.product),
                    median(results[ie].setup) / median(cb.setup));
      }
      if (ie < o.modes.size()) {
        for (std::size_t m = 0; m < o.modes.size(); ++m) {
          if (m == ie) continue;
          std::printf("# %s: %s vs inspector-executor: product %.2fx, setup %.2fx\n", spec.c_str(),
                      to_string(o.modes[m]),
                      median(results[ie].product) / median(results[m].product),
                      median(results[ie].setup) / median(results[m].setup));
        }
      }
      std::fflush(stdout);
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    // Every rank parses the same argv, so all leave alike on --help or a bad option.
    Options o;
    rc = parse(argc, argv, rank, o);
    if (rc < 0) rc = run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_spgemm: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
