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
//     raw     contexts opened with the C API (ns_open_mpi, THREAD and INLINE progress) with a
//             completion queue, a queue pair and a registered region, left open at
//             MPI_Finalize; afterwards a post fails saying why, and the destroy calls and
//             ns_close succeed without calling MPI
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lsan_mpi.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/netsparse_mpi.h"

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

// One open C-API context with everything a RIG needs, and a gather that checks the engine
// works before MPI_Finalize.
struct RawContext {
  ns_context* ctx = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ns_mr* mr = nullptr;
  std::vector<float> block;  // this rank's rows (2 floats each)
  std::vector<std::uint64_t> idx;
  std::vector<float> out;
  ns_send_wr wr{};
};

bool open_raw(RawContext& r, int progress, int rank, int size) {
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS;
  attr.progress_mode = progress;
  if (ns_open_mpi(MPI_COMM_WORLD, &attr, &r.ctx) != NS_OK) return false;
  if (ns_create_cq(r.ctx, 64, &r.cq) != NS_OK) return false;
  if (ns_create_qp(r.ctx, r.cq, 16, &r.qp) != NS_OK) return false;
  constexpr std::uint64_t kRows = 50;
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(size) + 1);
  for (int q = 0; q <= size; ++q) offsets[q] = kRows * static_cast<std::uint64_t>(q);
  r.block.resize(2 * kRows);
  for (std::uint64_t i = 0; i < kRows; ++i) {
    r.block[2 * i] = static_cast<float>(kRows * rank + i);
    r.block[2 * i + 1] = -r.block[2 * i];
  }
  if (ns_reg_props(r.ctx, r.block.data(), kRows, 8, offsets.data(), &r.mr) != NS_OK) return false;
  // Every row of the next rank (wrapping), gathered positionally.
  const std::uint64_t first = kRows * static_cast<std::uint64_t>((rank + 1) % size);
  for (std::uint64_t i = 0; i < kRows; ++i) r.idx.push_back(first + i);
  r.out.assign(2 * kRows, 0.0f);
  r.wr.opcode = NS_WR_RIG;
  r.wr.send_flags = NS_SEND_SIGNALED;
  r.wr.wr.rig.mr = r.mr;
  r.wr.wr.rig.idx = r.idx.data();
  r.wr.wr.rig.count = r.idx.size();
  r.wr.wr.rig.out = r.out.data();
  r.wr.wr.rig.out_bytes = r.out.size() * sizeof(float);
  r.wr.wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
  if (ns_post_send(r.qp, &r.wr, nullptr) != NS_OK) return false;
  ns_wc wc{};
  const int n = ns_cq_wait(r.cq, 1, &wc, 30000);
  if (n != 1 || wc.status != NS_WC_SUCCESS) {
    std::fprintf(stderr, "raw: the gather did not complete (%d completions, status %s)\n", n,
                 n == 1 ? ns_wc_status_str(wc.status) : "-");
    return false;
  }
  for (std::uint64_t i = 0; i < kRows; ++i) {
    if (r.out[2 * i] != static_cast<float>(first + i)) {
      std::fprintf(stderr, "raw: row %llu gathered %g\n",
                   static_cast<unsigned long long>(first + i), r.out[2 * i]);
      return false;
    }
  }
  return true;
}

// After MPI_Finalize: posting fails with the reason, the rest releases cleanly.
bool use_after_finalize(RawContext& r) {
  bool ok = true;
  if (ns_post_send(r.qp, &r.wr, nullptr) == NS_OK) {
    std::fprintf(stderr, "raw: a post after MPI_Finalize was accepted\n");
    ok = false;
  } else if (std::strstr(ns_last_error(), "MPI_Finalize") == nullptr) {
    std::fprintf(stderr, "raw: unexpected error after MPI_Finalize: %s\n", ns_last_error());
    ok = false;
  }
  const auto expect_ok = [&](ns_status_t s, const char* call) {
    if (s == NS_OK) return;
    std::fprintf(stderr, "raw: %s after MPI_Finalize: %s\n", call, ns_last_error());
    ok = false;
  };
  ns_wc wc{};
  if (ns_poll_cq(r.cq, 1, &wc) < 0) {
    std::fprintf(stderr, "raw: ns_poll_cq after MPI_Finalize: %s\n", ns_last_error());
    ok = false;
  }
  expect_ok(ns_dereg_props(r.mr), "ns_dereg_props");
  expect_ok(ns_destroy_qp(r.qp), "ns_destroy_qp");
  expect_ok(ns_destroy_cq(r.cq), "ns_destroy_cq");
  expect_ok(ns_close(r.ctx), "ns_close");
  return ok;
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
  RawContext raw[2];
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
  } else if (what == "raw") {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int modes[2] = {NS_PROGRESS_THREAD, NS_PROGRESS_INLINE};
    for (int i = 0; i < 2; ++i) {
      if (!open_raw(raw[i], modes[i], rank, size)) {
        std::fprintf(stderr, "raw: context %d failed before MPI_Finalize: %s\n", i,
                     ns_last_error());
        ++failures;
      }
    }
  } else {
    if (rank == 0) std::fprintf(stderr, "usage: finalize_lifetime thread|inline|all|raw\n");
    MPI_Finalize();
    return 2;
  }

  test::lsan_check_now();  // before MPI_Finalize (lsan_mpi.hpp); the objects are still alive
  MPI_Finalize();
  // The destructors of a, reference, kernels and shared run after this line.
  if (what == "raw") {
    for (RawContext& r : raw) {
      if (r.ctx != nullptr && !use_after_finalize(r)) ++failures;
    }
  }
  if (rank == 0 && failures == 0) std::printf("finalize_lifetime %s: ok\n", what.c_str());
  return failures == 0 ? 0 : 1;
}
