// Objects alive at MPI_Finalize: main declares a DistMatrix, RIG engines and DistKernels as
// locals (natural RAII), runs kernels, and calls MPI_Finalize while they are still in scope; their
// destructors run after it. The program must exit 0 with nothing printed by MPI (ctest also fails
// on "MPI_FINALIZE" / "Segmentation" in the output).
//
//   finalize_lifetime thread|inline|all
//     thread  one netsparse kernel, its engine in NS_PROGRESS_THREAD
//     inline  one netsparse kernel, its engine in NS_PROGRESS_INLINE
//     all     kernels of every communication mode, two of them sharing an engine, and a
//             dynamic-pattern kernel
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lsan_mpi.hpp"
#include "netsparse/distributed.hpp"

namespace {

using namespace netsparse;

std::vector<float> operand(const DistMatrix& a, int k) {
  const gidx_t b = a.cols().begin(a.rank()), e = a.cols().end(a.rank());
  std::vector<float> v(static_cast<std::size_t>(e - b) * k);
  for (gidx_t r = b; r < e; ++r) {
    for (int j = 0; j < k; ++j) v[(r - b) * k + j] = static_cast<float>((r * 7 + j * 3) % 11) - 5;
  }
  return v;
}

// max |got - want| over every rank.
double max_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double d = got.size() == want.size() ? 0.0 : 1e30;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    d = std::fmax(d, std::fabs(double(got[i]) - want[i]));
  }
  MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  netsparse::test::lsan_disable();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  netsparse::test::lsan_enable();
  const std::string what = argc > 1 ? argv[1] : "all";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  constexpr int k = 4;

  // Everything below is still alive when MPI_Finalize is called.
  DistMatrix a = load_distributed_matrix(MPI_COMM_WORLD, "gen:stencil:6:6:6:1");
  std::vector<float> b = operand(a, k);
  std::vector<float> c_ref(static_cast<std::size_t>(a.rows().size(rank)) * k);
  DistOptions su;
  su.mode = CommMode::su;
  DistKernel reference(a, KernelKind::spmm, k, su);
  reference.spmm(b, c_ref);

  std::vector<std::unique_ptr<DistKernel>> kernels;
  std::shared_ptr<RigEngine> shared;
  std::vector<float> c(c_ref.size());
  int failures = 0;
  const auto check = [&](DistKernel& kernel, const char* name) {
    std::fill(c.begin(), c.end(), 0.0f);
    kernel.spmm(b, c);
    const double d = max_diff(c, c_ref);
    if (d > 1e-4) {
      if (rank == 0) std::fprintf(stderr, "%s: max |C - C_su| = %g\n", name, d);
      ++failures;
    }
  };
  if (what == "thread" || what == "inline") {
    DistOptions opt;
    opt.mode = CommMode::netsparse;
    opt.engine.progress = what == "thread" ? NS_PROGRESS_THREAD : NS_PROGRESS_INLINE;
    kernels.push_back(std::make_unique<DistKernel>(a, KernelKind::spmm, k, opt));
    check(*kernels.back(), what.c_str());
  } else if (what == "all") {
    EngineOptions eo;
    eo.progress = NS_PROGRESS_INLINE;
    shared = std::make_shared<RigEngine>(MPI_COMM_WORLD, eo);
    for (CommMode mode : all_comm_modes()) {
      DistOptions opt;
      opt.mode = mode;
      opt.engine.progress = NS_PROGRESS_THREAD;
      // netsparse and sa-vanilla share one engine; the others' engines are their own.
      kernels.push_back(std::make_unique<DistKernel>(a, KernelKind::spmm, k, opt,
                                                     uses_rig_engine(mode) ? shared : nullptr));
      if (mode == CommMode::ideal) kernels.back()->replicate(b);
      check(*kernels.back(), to_string(mode));
    }
    DistOptions dyn;
    dyn.mode = CommMode::netsparse;
    dyn.dynamic_pattern = true;
    kernels.push_back(std::make_unique<DistKernel>(a, KernelKind::spmm, k, dyn));
    check(*kernels.back(), "netsparse dynamic_pattern");
  } else {
    if (rank == 0) std::fprintf(stderr, "usage: finalize_lifetime thread|inline|all\n");
    MPI_Finalize();
    return 2;
  }

  test::lsan_check_now();  // before MPI_Finalize (lsan_mpi.hpp); the objects are still alive
  MPI_Finalize();
  // The destructors of a, reference, kernels and shared run after this line.
  if (rank == 0 && failures == 0) std::printf("finalize_lifetime %s: ok\n", what.c_str());
  return failures == 0 ? 0 : 1;
}
