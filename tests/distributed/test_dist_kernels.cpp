// Every communication mode x kernel x K gives the single-process result (double-precision
// reference on the whole matrix, fp tolerance), on generated matrices and Matrix Market
// fixtures (square and rectangular), across repeated runs whose operand changes in place, with
// changing sparsity, with the engine's ablation switches and inline progress; plus the traffic
// each RIG configuration must generate and the API's error reporting.
#include <gtest/gtest.h>
#include <mpi.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/matrix_market.hpp"

namespace netsparse {
namespace {

// The distributed tests' helpers (dist_test_util.hpp).
using namespace test;

std::vector<Fixture>& fixtures() {
  static std::vector<Fixture> all = [] {
    std::vector<Fixture> v;
    for (const std::string& spec : test::fixture_specs()) v.push_back(make_fixture(spec));
    return v;
  }();
  return all;
}

// Runs `kernel` in `mode` twice (the operand changes in place between the runs, as in an
// iterative method) and returns the worst relative error against the reference. T is the
// operands' precision (options.scalar must match).
template <class T = float>
double run_and_compare(const Fixture& f, KernelKind kernel, int k, const DistOptions& options,
                       std::shared_ptr<RigEngine> engine, const CsrMatrix* pattern = nullptr,
                       DistKernel* reuse = nullptr) {
  const DistMatrix& dm = f.dm;
  const int r = world_rank();
  const CsrMatrix& local = pattern != nullptr ? *pattern : dm.local();
  std::unique_ptr<DistKernel> own;
  if (reuse == nullptr) {
    own = std::make_unique<DistKernel>(dm, kernel, k, options, engine);
    if (pattern != nullptr) own->set_pattern(*pattern);
    reuse = own.get();
  }
  DistKernel& kern = *reuse;
  const gidx_t cb = dm.cols().begin(r), ce = dm.cols().end(r);
  const gidx_t rb = dm.rows().begin(r), re = dm.rows().end(r);
  // The reference rows: this rank's block of the (possibly sampled) whole matrix.
  CsrMatrix ref_rows = local;
  double worst = 0;
  std::vector<T> b(static_cast<std::size_t>(ce - cb) * k);
  for (int which : {1, 3}) {
    const std::vector<float> values = operand_block(which, cb, ce, k);
    std::copy(values.begin(), values.end(), b.begin());  // same buffer, new values
    if (options.mode == CommMode::ideal) kern.replicate(b);
    switch (kernel) {
      case KernelKind::spmm: {
        std::vector<T> c(static_cast<std::size_t>(re - rb) * k, T(-7));
        kern.spmm(b, c);
        worst = std::max(worst, max_relative_error(c, test::reference_spmm(ref_rows, k, which)));
        break;
      }
      case KernelKind::spmv: {
        std::vector<T> y(static_cast<std::size_t>(re - rb), T(-7));
        kern.spmv(b, y);
        worst = std::max(worst, max_relative_error(y, test::reference_spmm(ref_rows, 1, which)));
        break;
      }
      case KernelKind::sddmm: {
        const std::vector<float> x32 = operand_block(which + 1, rb, re, k);
        const std::vector<T> x(x32.begin(), x32.end());
        std::vector<T> out(static_cast<std::size_t>(local.nnz()), T(-7));
        kern.sddmm(x, b, out);
        worst = std::max(
            worst, max_relative_error(out, test::reference_sddmm(ref_rows, k, which + 1, which)));
        break;
      }
    }
  }
  return worst;
}

struct KernelK {
  KernelKind kernel;
  int k;
};
const KernelK kKernelKs[] = {{KernelKind::spmm, 1},   {KernelKind::spmm, 5},
                             {KernelKind::spmm, 16},  {KernelKind::sddmm, 3},
                             {KernelKind::sddmm, 16}, {KernelKind::spmv, 1}};

DistOptions options_for(CommMode mode) {
  DistOptions o;
  o.mode = mode;
  o.batch = 37;                   // several work requests per panel
  o.tiling.row_panel = 16;        // several row panels even on small matrices
  o.max_outstanding_reads = 16;   // sa-vanilla hits its limit
  o.conveyor_buffer_bytes = 100;  // conveyors refuse pushes
  o.conveyor_buffers_per_link = 1;
  return o;
}

TEST(DistKernels, EveryModeKernelAndKMatchesTheReference) {
  for (const Fixture& f : fixtures()) {
    for (const KernelK& kk : kKernelKs) {
      for (CommMode mode : all_comm_modes()) {
        // Small windows: several column panels per rank, double buffering in use.
        DistOptions o = options_for(mode);
        o.tiling.col_panel = std::max<gidx_t>(1, f.dm.n_cols() / 7);
        const double err = run_and_compare(f, kk.kernel, kk.k, o, shared_engine());
        EXPECT_LE(err, kTolerance)
            << f.name << " " << to_string(kk.kernel) << " K=" << kk.k << " " << to_string(mode);
      }
    }
  }
}

// Double precision end to end (DistOptions::scalar = f64): every mode, kernel and K, with
// several column panels, against the double reference at a tolerance fp32 cannot meet.
TEST(DistKernels, DoublePrecisionEveryModeKernelAndK) {
  for (const Fixture& f : fixtures()) {
    for (const KernelK& kk : kKernelKs) {
      for (CommMode mode : all_comm_modes()) {
        DistOptions o = options_for(mode);
        o.scalar = ScalarType::f64;
        o.tiling.col_panel = std::max<gidx_t>(1, f.dm.n_cols() / 7);
        const double err = run_and_compare<double>(f, kk.kernel, kk.k, o, shared_engine());
        EXPECT_LE(err, kF64Tolerance)
            << f.name << " f64 " << to_string(kk.kernel) << " K=" << kk.k << " " << to_string(mode);
      }
    }
  }
}

// The same tolerance is out of fp32's reach on these fixtures (the test above discriminates).
TEST(DistKernels, Fp32MissesTheF64Tolerance) {
  const Fixture& f = fixtures()[3];  // small_symmetric.mtx: values with 17 significant digits
  const double err = run_and_compare(f, KernelKind::spmm, 16, options_for(CommMode::su), nullptr);
  EXPECT_GT(err, 1e3 * kF64Tolerance);
  EXPECT_LE(err, kTolerance);
}

TEST(DistKernels, DoublePrecisionChangingSparsityAndCompactPaths) {
  const SamplingParams sampling{0.5, 0};
  for (const Fixture& f : fixtures()) {
    // netsparse on a changing pattern (the CSR kernels) and the ablation's per-nonzero stream.
    DistOptions o = options_for(CommMode::netsparse);
    o.scalar = ScalarType::f64;
    o.dynamic_pattern = true;
    DistKernel kern(f.dm, KernelKind::spmm, 16, o, shared_engine());
    for (std::uint64_t iteration = 0; iteration < 2; ++iteration) {
      const CsrMatrix sampled = sample_rows(f.dm.local(), sampling, 5 + iteration);
      kern.set_pattern(sampled);
      EXPECT_LE(run_and_compare<double>(f, KernelKind::spmm, 16, o, nullptr, &sampled, &kern),
                kF64Tolerance)
          << f.name << " direct iteration " << iteration;
    }
    DistOptions n = options_for(CommMode::netsparse);
    n.scalar = ScalarType::f64;
    n.rig_idx = RigIdxSource::nonzeros;
    EXPECT_LE(run_and_compare<double>(f, KernelKind::sddmm, 16, n, shared_engine()), kF64Tolerance)
        << f.name << " per-nonzero idx stream";
  }
}

TEST(DistKernels, PrecisionMismatchIsRefusedOnEveryRank) {
  const Fixture& f = fixtures()[0];
  const int r = world_rank();
  DistOptions o = options_for(CommMode::netsparse);
  o.scalar = ScalarType::f64;
  DistKernel kern(f.dm, KernelKind::spmm, 4, o, shared_engine());
  EXPECT_EQ(kern.scalar(), ScalarType::f64);
  std::vector<float> b(static_cast<std::size_t>(f.dm.cols().size(r)) * 4);
  std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(r)) * 4);
  try {
    kern.spmm(b, c);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the kernel computes in f64 but the operands are f32"),
              std::string::npos)
        << e.what();
  }
  // The kernel stays usable with the right type.
  std::vector<double> b64(b.size(), 1.0), c64(c.size());
  kern.spmm(b64, c64);
}

TEST(DistKernels, AutomaticWindowAndPointToPointInspectorExecutor) {
  for (const Fixture& f : fixtures()) {
    for (CommMode mode : {CommMode::netsparse, CommMode::su_panel, CommMode::inspector_executor,
                          CommMode::sa_opt}) {
      DistOptions o;
      o.mode = mode;
      o.ie_point_to_point = true;
      const double err = run_and_compare(f, KernelKind::spmm, 16, o, shared_engine());
      EXPECT_LE(err, kTolerance) << f.name << " " << to_string(mode);
    }
  }
}

TEST(DistKernels, RigIdxStreamsAndAblationsAgree) {
  // The per-nonzero idx stream (filter and coalescing remove the repeats) with every mechanism
  // switched off one by one, and inline progress: all must give the same result.
  const std::uint32_t flag_sets[] = {0, NS_CTX_NO_FILTER, NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE,
                                     NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT};
  const Fixture& f = fixtures()[0];
  for (std::uint32_t flags : flag_sets) {
    for (int progress : {NS_PROGRESS_THREAD, NS_PROGRESS_INLINE}) {
      EngineOptions eo;
      eo.flags = flags;
      eo.progress = progress;
      eo.client_units = 3;
      auto engine = std::make_shared<RigEngine>(MPI_COMM_WORLD, eo);
      for (RigIdxSource source : {RigIdxSource::nonzeros, RigIdxSource::unique_columns}) {
        DistOptions o = options_for(CommMode::netsparse);
        o.rig_idx = source;
        o.tiling.col_panel = 40;
        for (const KernelK& kk : {KernelK{KernelKind::spmm, 16}, KernelK{KernelKind::sddmm, 5}}) {
          const double err = run_and_compare(f, kk.kernel, kk.k, o, engine);
          EXPECT_LE(err, kTolerance) << "flags " << flags << " progress " << progress << " source "
                                     << static_cast<int>(source);
        }
      }
      DistOptions vanilla = options_for(CommMode::sa_vanilla);
      EXPECT_LE(run_and_compare(f, KernelKind::spmm, 5, vanilla, engine), kTolerance)
          << "sa-vanilla, flags " << flags << " progress " << progress;
    }
  }
}

// Sum over ranks.
std::uint64_t total(std::uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

TEST(DistKernels, RequestCountsFollowTheMechanisms) {
  const Fixture& f = fixtures()[0];  // Kronecker: many repeated remote columns
  const int k = 4;
  const auto requests_of = [&](CommMode mode, RigIdxSource source, std::uint32_t flags) {
    EngineOptions eo;
    eo.flags = flags;
    auto engine = std::make_shared<RigEngine>(MPI_COMM_WORLD, eo);
    DistOptions o = options_for(mode);
    o.rig_idx = source;
    DistKernel kern(f.dm, KernelKind::spmm, k, o, engine);
    std::vector<float> b =
        operand_block(1, f.dm.cols().begin(world_rank()), f.dm.cols().end(world_rank()), k);
    std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(world_rank())) * k);
    kern.spmm(b, c);
    return std::make_pair(kern.last_run_stats().requests, kern.volume());
  };
  const auto [unique_reqs, vol] = requests_of(CommMode::netsparse, RigIdxSource::unique_columns, 0);
  const auto [raw_reqs, vol2] =
      requests_of(CommMode::netsparse, RigIdxSource::nonzeros,
                  NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT);
  const auto [filtered_reqs, vol3] = requests_of(CommMode::netsparse, RigIdxSource::nonzeros, 0);
  const auto [vanilla_reqs, vol4] = requests_of(CommMode::sa_vanilla, RigIdxSource::nonzeros, 0);
  const auto [opt_reqs, vol5] = requests_of(CommMode::sa_opt, RigIdxSource::nonzeros, 0);
  const auto [conv_reqs, vol6] = requests_of(CommMode::sa_conveyors, RigIdxSource::nonzeros, 0);
  // Unique columns: each distinct remote column once. No filter / coalescing: every remote
  // nonzero. Filter + coalescing: in between (coalescing works per client unit only).
  EXPECT_EQ(unique_reqs, vol.unique_remote_cols);
  EXPECT_EQ(raw_reqs, vol.remote_nonzeros);
  EXPECT_GE(filtered_reqs, vol.unique_remote_cols);
  EXPECT_LE(filtered_reqs, vol.remote_nonzeros);
  EXPECT_EQ(vanilla_reqs, vol.remote_nonzeros);
  EXPECT_EQ(conv_reqs, vol.remote_nonzeros);
  EXPECT_EQ(opt_reqs, vol.unique_remote_cols);
  // The volume against the whole matrix: distinct remote columns counted independently.
  const int r = world_rank();
  const gidx_t cb = f.dm.cols().begin(r), ce = f.dm.cols().end(r);
  const CsrMatrix mine = row_block(f.whole, f.dm.rows().begin(r), f.dm.rows().end(r));
  std::vector<gidx_t> remote;
  for (gidx_t c : mine.col_idx) {
    if (c < cb || c >= ce) remote.push_back(c);
  }
  const std::uint64_t remote_nnz = remote.size();
  std::sort(remote.begin(), remote.end());
  remote.erase(std::unique(remote.begin(), remote.end()), remote.end());
  EXPECT_EQ(vol.remote_nonzeros, remote_nnz);
  EXPECT_EQ(vol.unique_remote_cols, remote.size());
  if (world_size() > 1) {
    // Kronecker rows repeat columns: the mechanisms have something to remove.
    EXPECT_LT(total(vol.unique_remote_cols), total(vol.remote_nonzeros));
    const MinimumTraffic m =
        minimum_traffic(DistKernel(f.dm, KernelKind::spmm, k, options_for(CommMode::su)), 1500);
    EXPECT_EQ(m.property_bytes, vol.unique_remote_cols * 4 * k);
    EXPECT_GT(total(m.wire_bytes), total(m.property_bytes));
  }
}

TEST(DistKernels, ChangingSparsityEveryMode) {
  const Fixture& f = fixtures()[0];
  const SamplingParams sampling{0.6, 5};
  for (CommMode mode : all_comm_modes()) {
    for (const KernelK& kk : {KernelK{KernelKind::spmm, 8}, KernelK{KernelKind::sddmm, 4}}) {
      DistOptions o = options_for(mode);
      DistKernel kern(f.dm, kk.kernel, kk.k, o, uses_rig_engine(mode) ? shared_engine() : nullptr);
      for (std::uint64_t iteration = 0; iteration < 3; ++iteration) {
        const CsrMatrix sampled = sample_rows(f.dm.local(), sampling, iteration);
        kern.set_pattern(sampled);
        EXPECT_GE(kern.setup_seconds(), 0.0);
        const double err = run_and_compare(f, kk.kernel, kk.k, o, nullptr, &sampled, &kern);
        EXPECT_LE(err, kTolerance) << to_string(mode) << " iteration " << iteration;
      }
    }
  }
}

// DistOptions::dynamic_pattern: netsparse computes on the sampled CSR rows directly (borrowed,
// no tiling; the raw column list posted with NS_SEND_REMOTE_ONLY). Every fixture, kernel and K,
// several patterns in a row on one kernel object, against the single-process reference.
TEST(DistKernels, ChangingSparsityDirectNetsparse) {
  const SamplingParams sampling{0.5, 0};
  for (const Fixture& f : fixtures()) {
    for (const KernelK& kk : kKernelKs) {
      for (int progress : {NS_PROGRESS_AUTO, NS_PROGRESS_THREAD}) {
        EngineOptions eo;
        eo.progress = progress;
        auto engine = progress == NS_PROGRESS_AUTO
                          ? shared_engine()
                          : std::make_shared<RigEngine>(MPI_COMM_WORLD, eo);
        DistOptions o = options_for(CommMode::netsparse);
        o.dynamic_pattern = true;
        DistKernel kern(f.dm, kk.kernel, kk.k, o, engine);
        for (std::uint64_t iteration = 0; iteration < 3; ++iteration) {
          // The second pattern is empty: no local, no remote nonzeros.
          const CsrMatrix sampled = sample_rows(
              f.dm.local(), iteration == 1 ? SamplingParams{0.0, 0} : sampling, 17 + iteration);
          kern.set_pattern(sampled);
          const double err = run_and_compare(f, kk.kernel, kk.k, o, nullptr, &sampled, &kern);
          EXPECT_LE(err, kTolerance) << f.name << " " << to_string(kk.kernel) << " K=" << kk.k
                                     << " progress " << progress << " iteration " << iteration;
          // Requests never exceed the sampled pattern's remote nonzeros, and the repeats of a
          // Kronecker pattern are removed by the engine.
          EXPECT_LE(kern.last_run_stats().requests, kern.volume().remote_nonzeros);
          EXPECT_GE(kern.last_run_stats().requests, kern.volume().unique_remote_cols);
        }
      }
    }
  }
}

// ideal with DistOptions::dynamic_pattern lays each pattern out in one pass
// (TiledMatrix::split_columns, the rows borrowed) instead of the full tiler: every fixture,
// kernel and K, f32 and f64, several patterns in a row on one kernel object (the split's arrays
// reused), including an empty pattern (no nonzeros at all), against the reference.
TEST(DistKernels, ChangingSparsityIdealSplitsOnce) {
  for (const Fixture& f : fixtures()) {
    for (const KernelK& kk : kKernelKs) {
      DistOptions o = options_for(CommMode::ideal);
      o.dynamic_pattern = true;
      DistKernel kern(f.dm, kk.kernel, kk.k, o, nullptr);
      DistOptions o64 = o;
      o64.scalar = ScalarType::f64;
      DistKernel kern64(f.dm, kk.kernel, kk.k, o64, nullptr);
      for (const double keep : {0.5, 0.0, 1.0, 0.3}) {
        const CsrMatrix sampled = sample_rows(f.dm.local(), SamplingParams{keep, 0}, 23);
        kern.set_pattern(sampled);
        EXPECT_LE(run_and_compare(f, kk.kernel, kk.k, o, nullptr, &sampled, &kern), kTolerance)
            << f.name << " " << to_string(kk.kernel) << " K=" << kk.k << " keep " << keep;
        kern64.set_pattern(sampled);
        EXPECT_LE(run_and_compare<double>(f, kk.kernel, kk.k, o64, nullptr, &sampled, &kern64),
                  kF64Tolerance)
            << f.name << " f64 " << to_string(kk.kernel) << " K=" << kk.k << " keep " << keep;
      }
    }
  }
}

// Operands that alternate between two buffers (x_{k+1} = A x_k with two vectors): every run is
// right, and the RIG modes register their operand once and rebind it locally when it moves
// (no collective, no new registration; the engine's "region" statistics count both), while
// sa-vanilla, whose peers read the operand one-sidedly, registers each new buffer.
TEST(DistKernels, PingPongOperandsRebindTheRegion) {
  const Fixture& f = fixtures().front();
  const DistMatrix& dm = f.dm;
  const int r = world_rank();
  const gidx_t cb = dm.cols().begin(r), ce = dm.cols().end(r);
  const gidx_t rb = dm.rows().begin(r), re = dm.rows().end(r);
  struct Case {
    const char* name;
    CommMode mode;
    bool dynamic;
    RigIdxSource idx;
  };
  const Case cases[] = {
      {"netsparse (plans)", CommMode::netsparse, false, RigIdxSource::unique_columns},
      {"netsparse panels", CommMode::netsparse, false, RigIdxSource::nonzeros},
      {"netsparse changing", CommMode::netsparse, true, RigIdxSource::unique_columns},
      {"sa-vanilla", CommMode::sa_vanilla, false, RigIdxSource::unique_columns}};
  // With a progress thread a peer that entered the run first is answered at once: the operand
  // must have moved before this rank entered the run.
  for (const Case& c : cases) {
    for (const auto& [k, progress] :
         {std::pair{1, NS_PROGRESS_AUTO}, std::pair{16, NS_PROGRESS_AUTO},
          std::pair{16, NS_PROGRESS_THREAD}}) {
      SCOPED_TRACE(std::string(c.name) + " K=" + std::to_string(k) + " progress " +
                   std::to_string(progress));
      EngineOptions eo;
      eo.progress = progress;
      auto engine = std::make_shared<RigEngine>(MPI_COMM_WORLD, eo);
      DistOptions o = options_for(c.mode);
      o.dynamic_pattern = c.dynamic;
      o.rig_idx = c.idx;
      DistKernel kern(dm, k == 1 ? KernelKind::spmv : KernelKind::spmm, k, o, engine);
      if (c.dynamic) kern.set_pattern(dm.local());
      // Two buffers; after each run the one just read gets the next values in place (the next
      // iterate), so every run reads new values, from the other buffer.
      int seeds[2] = {1, 3};
      std::vector<float> buffers[2];
      for (int w : {0, 1}) buffers[w] = operand_block(seeds[w], cb, ce, k);
      for (int run = 0; run < 4; ++run) {
        const int which = run % 2;
        std::vector<float> out(static_cast<std::size_t>(re - rb) * k, -7.0f);
        if (k == 1) {
          kern.spmv(buffers[which], out);
        } else {
          kern.spmm(buffers[which], out);
        }
        const double err =
            max_relative_error(out, test::reference_spmm(dm.local(), k, seeds[which]));
        EXPECT_LE(err, kTolerance) << "run " << run;
        seeds[which] += 4;
        const std::vector<float> next = operand_block(seeds[which], cb, ce, k);
        std::copy(next.begin(), next.end(), buffers[which].begin());
      }
      const nlohmann::json region = nlohmann::json::parse(engine->stats_json())["region"];
      const bool one_sided = c.mode == CommMode::sa_vanilla;
      EXPECT_EQ(region.value("registrations", -1), one_sided ? 4 : 1) << region;
      EXPECT_EQ(region.value("rebinds", -1), one_sided ? 0 : 3) << region;
    }
  }
}

// A rank that gathers nothing (rank 0 of owner_only_arrow.mtx: its rows touch only its own
// columns) but serves every other rank, through six runs of one kernel: the recording run, the
// arming run and pushed runs. It used to keep quiescing with its requesters after they had
// stopped telling it (no plan of its own), and the third run timed out on every rank.
TEST(DistKernels, ARankWithoutGhostsFollowsThePushedRuns) {
  const Fixture f = make_fixture(data_path("distributed/owner_only_arrow.mtx"));
  for (const CommMode mode : {CommMode::netsparse_rank, CommMode::netsparse}) {
    for (const KernelK kk : {KernelK{KernelKind::spmv, 1}, KernelK{KernelKind::spmm, 4}}) {
      DistOptions o = options_for(mode);
      o.engine.watchdog_ms = 10000;  // a hang fails the test well inside ctest's timeout
      DistKernel kern(f.dm, kk.kernel, kk.k, o, nullptr);
      for (int pair = 0; pair < 3; ++pair) {  // two runs each
        EXPECT_LT(run_and_compare(f, kk.kernel, kk.k, o, nullptr, nullptr, &kern), 1e-5)
            << to_string(mode) << " " << to_string(kk.kernel) << " runs " << 2 * pair << "-"
            << 2 * pair + 1;
      }
    }
  }
}

TEST(DistKernels, ErrorsAreReportedOnEveryRank) {
  const Fixture& f = fixtures()[1];
  const int r = world_rank();
  const gidx_t nb = f.dm.cols().size(r), nc = f.dm.rows().size(r);
  DistOptions ideal;
  ideal.mode = CommMode::ideal;
  DistKernel kern(f.dm, KernelKind::spmm, 4, ideal);
  std::vector<float> b(static_cast<std::size_t>(nb) * 4), c(static_cast<std::size_t>(nc) * 4);
  EXPECT_THROW(kern.spmm(b, c), std::logic_error);          // ideal needs replicate() first
  std::vector<float> short_b(b.size() + (r == 0 ? 1 : 0));  // wrong on rank 0 only
  EXPECT_THROW(kern.spmm(short_b, c), std::invalid_argument);
  EXPECT_THROW(kern.sddmm(c, b, c), std::logic_error);  // an SpMM kernel
  DistOptions su;
  su.mode = CommMode::su;
  DistKernel su_kern(f.dm, KernelKind::spmm, 4, su);
  EXPECT_THROW(su_kern.replicate(b), std::logic_error);
  EXPECT_THROW(DistKernel(f.dm, KernelKind::spmm, 0, su), std::invalid_argument);
  EXPECT_THROW(DistKernel(f.dm, KernelKind::spmv, 2, su), std::invalid_argument);
  CsrMatrix other_rows = f.dm.local();
  if (r == world_size() - 1) other_rows.row_begin += 1;  // wrong on one rank only
  EXPECT_THROW(su_kern.set_pattern(other_rows), std::invalid_argument);
  EXPECT_THROW((void)parse_comm_mode("rdma"), std::invalid_argument);
  EXPECT_EQ(parse_comm_mode("su-panel"), CommMode::su_panel);
  EXPECT_EQ(parse_comm_mode("ie"), CommMode::inspector_executor);
  for (CommMode m : all_comm_modes()) EXPECT_EQ(parse_comm_mode(to_string(m)), m);
}

}  // namespace
}  // namespace netsparse

// The shared engine must close before MPI_Finalize (collective teardown): a global test
// environment releases it after the last test.
namespace {
class ReleaseSharedEngine : public testing::Environment {
 public:
  void TearDown() override { netsparse::test::shared_engine().reset(); }
};
const testing::Environment* const kRelease =
    testing::AddGlobalTestEnvironment(new ReleaseSharedEngine);
}  // namespace
