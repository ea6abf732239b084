// DistKernel: mode dispatch (the modes' names and resolution: comm_modes.cpp), the checked spmm /
// sddmm / spmv entry points (argument agreement), the statistics and the pattern's volume per host
// (minimum traffic and the line rate: traffic.cpp). Its state: dist_kernel_impl.hpp; the pattern's
// tiling and volume: dist_kernel_pattern.cpp; the compute helpers: compute.cpp.
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "agreement/mpi_util.hpp"
#include "config/settings.hpp"
#include "distributed/comm_modes.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/dist_kernel_impl.hpp"
#include "distributed/exchange.hpp"
#include "distributed/kernel_memory.hpp"
#include "hosts/topology.hpp"
#include "netsparse/distributed.hpp"
#include "rig/finalize_hook.hpp"
#include "support/enum_names.hpp"
#include "support/visibility.hpp"

namespace netsparse {

using dist::check_mpi;

template <class T>
void DistKernel::Impl::run(const dist::Operands<T>& ops) {
  last = CommStats{};
  typed_exchange<T>().run(pattern, run_context(), ops, compute<T>(), last);
  last.runs = 1;
  total += last;
}

namespace {

// The exchange of the kernel's mode, for operands of precision T.
template <class T>
std::unique_ptr<dist::ExchangeBase> make_exchange(DistKernel::Impl& s,
                                                  std::shared_ptr<RigEngine>& engine) {
  const DistOptions& options = s.options;
  switch (options.mode) {
    case CommMode::netsparse:  // resolved before (resolve_comm_mode): not seen here
    case CommMode::netsparse_rank:
    case CommMode::sa_vanilla:
      if (!engine) engine = std::make_shared<RigEngine>(s.comm, options.engine);
      s.engine = engine;
      return dist::make_rig_exchange<T>(
          engine, options.mode == CommMode::sa_vanilla              ? dist::RigVariant::vanilla
                  : options.dynamic_pattern                         ? dist::RigVariant::direct
                  : options.rig_idx == RigIdxSource::unique_columns ? dist::RigVariant::compact
                                                                    : dist::RigVariant::panels);
    case CommMode::su:
      return dist::make_su_exchange<T>();
    case CommMode::su_panel:
      return dist::make_su_panel_exchange<T>();
    case CommMode::sa_conveyors:
      return dist::make_conveyor_exchange<T>(false);
    case CommMode::sa_opt:
      return dist::make_conveyor_exchange<T>(true);
    case CommMode::inspector_executor:
      return dist::make_ie_exchange<T>();
    case CommMode::node_aware_ie:
      return dist::make_node_ie_exchange<T>();
    case CommMode::netsparse_node:
      return dist::make_node_rig_exchange<T>();
    case CommMode::task_packets:
      return dist::make_task_exchange<T>();
    case CommMode::ideal:
      return dist::make_ideal_exchange<T>();
    case CommMode::automatic:  // runs on its candidates' kernels (auto_mode.hpp): not seen here
      break;
  }
  throw std::invalid_argument("DistKernel: unknown communication mode");
}

}  // namespace

namespace {

// What every rank must pass DistKernel alike: the kernel, K, the precision, the mode and every
// option (each decides the exchange's collectives or the size of what it moves), the matrix's
// shape, and whether an engine was passed. In the order a disagreement is reported.
agreement::Agreement kernel_arguments(const DistMatrix& a, KernelKind kernel, int k,
                                      const DistOptions& o, bool engine_given,
                                      std::exception_ptr& env_error) {
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  agreement::Agreement agreed;
  agreed.field("the kernel", to_string(kernel));
  agreed.field("K", std::to_string(k));
  agreed.field("the dtype", std::string(to_string(o.scalar)));
  agreed.field("the mode", to_string(o.mode));
  agreed.field("the matrix", std::to_string(a.n_rows()) + " x " + std::to_string(a.n_cols()) +
                                 ", " + std::to_string(a.nnz_global()) + " nonzeros");
  agreed.field("a RigEngine passed", flag(engine_given));
  agreed.field("DistOptions::tiling",
               std::to_string(o.tiling.row_panel) + "/" + std::to_string(o.tiling.col_panel) + "/" +
                   flag(o.tiling.barriers) + "/" + std::to_string(o.tiling.barrier_group));
  agreed.field("DistOptions::batch", std::to_string(o.batch));
  agreed.field("DistOptions::dynamic_pattern", flag(o.dynamic_pattern));
  agreed.field("DistOptions::rig_idx", std::to_string(static_cast<int>(o.rig_idx)));
  agreed.field("DistOptions::plans", flag(o.plans));
  agreed.field("DistOptions::max_outstanding_reads", std::to_string(o.max_outstanding_reads));
  const EngineOptions& e = o.engine;
  agreed.field("DistOptions::engine",
               std::to_string(e.transport) + "/" + std::to_string(e.client_units) + "/" +
                   std::to_string(e.server_units) + "/" + std::to_string(e.progress) + "/" +
                   std::to_string(e.packet_bytes) + "/" + std::to_string(e.delay_ns) + "/" +
                   std::to_string(e.pending_entries) + "/" + std::to_string(e.idx_chunk) + "/" +
                   std::to_string(e.flags) + "/" + std::to_string(e.watchdog_ms));
  agreed.field("DistOptions::conveyor_buffer_bytes", std::to_string(o.conveyor_buffer_bytes));
  agreed.field("DistOptions::conveyor_buffers_per_link",
               std::to_string(o.conveyor_buffers_per_link));
  agreed.field("DistOptions::ie_point_to_point", flag(o.ie_point_to_point));
  agreed.field("DistOptions::rack_switch", flag(o.rack_switch));
  agreed.field("DistOptions::tune_runs", std::to_string(o.tune_runs));
  agreed.field("DistOptions::tune_engine", flag(o.tune_engine));
  agreed.field("DistOptions::tune_owners", flag(o.tune_owners));
  agreed.field("DistOptions::autotune_tiles",
               flag(o.autotune_tiles) + "/" + std::to_string(o.autotune_budget_seconds));
  // The variables netsparse-node decides its engines by (issue 34: agreed here, in the call's
  // one allreduce, instead of a collective of their own in the node-wide setup), and the one
  // task-packets decides its setups by (measure runs collective re-setups). A value the
  // configuration table refuses is this rank's refusal (env_error), named in the record too.
  const std::pair<config::Env, const char*> agreed_variables[] = {
      {config::Env::kNodeEngines, "NETSPARSE_NODE_ENGINES"},
      {config::Env::kRackSwitch, "NETSPARSE_RACK_SWITCH"},
      {config::Env::kTaskPackets, "NETSPARSE_TASK_PACKETS"}};
  for (const auto& [e, name] : agreed_variables) {
    std::string v;
    try {
      v = config::choice(e);
    } catch (...) {
      v = "(refused)";
      if (!env_error) env_error = std::current_exception();
    }
    agreed.field(name, v);
  }
  return agreed;
}

}  // namespace

DistKernel::DistKernel(const DistMatrix& a, KernelKind kernel, int k, const DistOptions& options,
                       std::shared_ptr<RigEngine> engine)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  // First, before any collective of the mode: the ranks agree on the arguments (one small
  // allreduce), so a rank passing another K, dtype, kind, mode or option fails every rank with
  // the same std::invalid_argument naming it instead of mismatching the exchange's collectives.
  // Agreed, the checks below throw alike on every rank.
  // The memory check rides in the same agreement: a rank whose operand rows cannot fit refuses,
  // and every rank throws its support::OutOfMemory before anything is built.
  std::exception_ptr no_memory;
  try {
    check_operand_memory(a, k, options);
  } catch (...) {
    no_memory = std::current_exception();
  }
  std::exception_ptr env_error;
  agreement::Agreement agreed =
      kernel_arguments(a, kernel, k, options, engine != nullptr, env_error);
  agreement::agree_on_call(a.comm(), "DistKernel", std::move(agreed),
                           no_memory ? no_memory : env_error);
  if (k < 1) throw std::invalid_argument("DistKernel: K must be >= 1, got " + std::to_string(k));
  if (kernel == KernelKind::spmv && k != 1) {
    throw std::invalid_argument("DistKernel: SpMV needs K == 1, got " + std::to_string(k));
  }
  if (options.batch < 1) throw std::invalid_argument("DistKernel: batch must be >= 1");
  if (options.autotune_tiles && !(options.autotune_budget_seconds > 0)) {
    throw std::invalid_argument("DistKernel: DistOptions::autotune_budget_seconds must be > 0");
  }
  if (options.max_outstanding_reads < 1) {
    throw std::invalid_argument("DistKernel: max_outstanding_reads must be >= 1");
  }
  s.comm = a.comm();
  s.rank = a.rank();
  s.nranks = a.nranks();
  s.rows = a.rows();
  s.cols = a.cols();
  s.kernel = kernel;
  s.k = k;
  s.options = options;
  if (options.mode == CommMode::automatic) {
    if (options.tune_runs < 1 || options.tune_runs > dist::kMaxTuneRuns) {
      throw std::invalid_argument(
          "DistKernel: DistOptions::tune_runs (auto's timed runs per candidate) must be in [1, " +
          std::to_string(dist::kMaxTuneRuns) + "], got " + std::to_string(options.tune_runs));
    }
    const double t0 = dist::now_seconds();
    s.tuner = std::make_unique<dist::AutoSelector>(a, kernel, k, options, std::move(engine));
    s.rows_in_use = &s.tuner->rows();
    s.setup_seconds = dist::now_seconds() - t0;
    return;
  }
  // One Topology per kernel (four collectives), for resolving `netsparse` and for the mode.
  if (dist::resolves_by_layout(options, engine != nullptr) || dist::routes_by_host(options.mode)) {
    s.topology = std::make_unique<dist::Topology>(dist::Topology::build(s.comm));
  }
  s.options.mode = dist::resolves_by_layout(options, engine != nullptr)
                       ? dist::resolve_by_layout(dist::layout_of(*s.topology))
                       : resolve_comm_mode(s.comm, options, engine != nullptr);
  if (!dist::routes_by_host(s.options.mode)) s.topology.reset();
  check_mpi(MPI_Type_contiguous(k, options.scalar == ScalarType::f32 ? MPI_FLOAT : MPI_DOUBLE,
                                &s.row_type),
            "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&s.row_type), "MPI_Type_commit");
  s.exchange = options.scalar == ScalarType::f32 ? make_exchange<float>(s, engine)
                                                 : make_exchange<double>(s, engine);
  set_pattern(a.local());
  // After the engine's own hook: at MPI_Finalize the kernel is released before its engine.
  s.finalize_hook = rig::FinalizeHook([&s] { s.release_mpi(); });
}

DistKernel::~DistKernel() = default;
DistKernel::DistKernel(DistKernel&&) noexcept = default;
DistKernel& DistKernel::operator=(DistKernel&&) noexcept = default;

void DistKernel::set_pattern(const CsrMatrix& local_rows) {
  Impl& s = *impl_;
  const double t0 = dist::now_seconds();
  if (s.tuner) {
    s.tuner->set_pattern(local_rows);
    s.rows_in_use = &s.tuner->rows();
    s.volume_known = false;
    s.setup_seconds = dist::now_seconds() - t0;
    return;
  }
  dist::collective_call(s.comm, [&] {
    if (local_rows.row_begin != s.rows.begin(s.rank) || local_rows.n_rows != s.rows.size(s.rank) ||
        local_rows.n_rows_global != s.rows.n_rows() || local_rows.n_cols != s.cols.n_rows()) {
      throw std::invalid_argument(
          "DistKernel::set_pattern: the rows must be this rank's block of the matrix (rows [" +
          std::to_string(s.rows.begin(s.rank)) + ", " + std::to_string(s.rows.end(s.rank)) +
          ") of " + std::to_string(s.rows.n_rows()) + " x " + std::to_string(s.cols.n_rows()) +
          ")");
    }
    // The caller's rows are checked (columns in range, each row's sorted) where they are first
    // read in full, before any buffer is indexed by them: build_pattern's split, or
    // TiledMatrix::split_columns for a pattern used once (dynamic_pattern, ideal's).
    s.volume_known = false;
    s.remote_tiling_seconds = 0;
    if (s.exchange->direct_csr()) {
      s.rows_in_use = &local_rows;  // borrowed (DistOptions::dynamic_pattern)
      s.pattern = dist::Pattern{};
      s.pattern.direct = &local_rows;
      s.pattern.col_begin = s.cols.begin(s.rank);
      s.pattern.col_end = s.cols.end(s.rank);
      s.pattern.window = s.cols.n_rows();
    } else if (s.splits_once()) {
      s.rows_in_use = &local_rows;  // borrowed, as in the direct mode
      s.build_pattern_once(local_rows);
    } else {
      s.csr = local_rows;
      s.rows_in_use = &s.csr;
      s.build_pattern();
    }
  });
  const double t_plan = dist::now_seconds();
  s.exchange->setup(s.pattern, s.run_context());
  const double t1 = dist::now_seconds();
  s.setup_seconds = t1 - t0;
  s.plan_seconds = s.remote_tiling_seconds + (t1 - t_plan);
}

namespace {
void check_size(const char* call, const char* what, std::size_t got, std::uint64_t want, int rank) {
  if (got != want) {
    throw std::invalid_argument(
        std::string("DistKernel::") + call + ": rank " + std::to_string(rank) + "'s " + what +
        " has " + std::to_string(got) + " elements, its block needs " + std::to_string(want));
  }
}

// The operands' precision must be the kernel's (DistOptions::scalar): the tiled values, the
// windows, the registered properties and the MPI row type were all built for it.
template <class T>
void check_scalar(const char* call, ScalarType kernel_scalar) {
  if (kernel_scalar != scalar_type_of<T>) {
    throw std::invalid_argument(std::string("DistKernel::") + call + ": the kernel computes in " +
                                std::string(to_string(kernel_scalar)) + " but the operands are " +
                                std::string(to_string(scalar_type_of<T>)) +
                                " (set DistOptions::scalar)");
  }
}

// Every rank checks the run's arguments and all agree on a failure. The modes whose exchange
// has deadlines (the RIG engine's watchdog, netsparse-node's and task-packets' waits) give up
// here too after their deadline when a rank never joins (it died between runs): their runs fail,
// they never hang (tests/distributed/test_rig_kill.cpp). The MPI collective modes keep the
// blocking agreement: their exchange would block on a dead rank anyway.
//
// The entry point and the operands' precision are agreed in the same allreduce (their digest
// rides with the failure flag: no extra collective per run); the operand shapes are checked on
// each rank against K and the partition, which the ranks agreed on at construction, and a rank
// refusing them fails every rank with its message.
template <class T, class F>
void agree_on_arguments(const DistKernel::Impl& s, const char* call, F&& f) {
  agreement::Agreement agreed;
  agreed.field("the call", call);
  agreed.field("the operands' dtype", std::string(to_string(scalar_type_of<T>)));
  const bool has_deadline = uses_rig_engine(s.options.mode) ||
                            s.options.mode == CommMode::netsparse_node ||
                            s.options.mode == CommMode::task_packets;
  agreement::collective_call_agreed(
      s.comm, std::string("DistKernel::") + call, std::move(agreed), f,
      has_deadline ? dist::node_wait_deadline(s.options) : std::chrono::milliseconds(0));
}

// An entry point's first checks: the kernel is `kind` (the entry point `call` is its) and
// computes in T.
template <class T>
void check_kernel(const DistKernel::Impl& s, KernelKind kind, const char* call) {
  if (s.kernel != kind) {
    throw std::logic_error(std::string("DistKernel::") + call + ": not an " + to_string(kind) +
                           " kernel");
  }
  check_scalar<T>(call, s.options.scalar);
}

// auto: the run goes to the kernel whose turn it is (a trial candidate or the winner), which
// checks and agrees on the arguments itself; its statistics are this kernel's.
template <class F>
bool run_auto(DistKernel::Impl& s, F&& call) {
  if (!s.tuner) return false;
  s.tuner->run(call);
  s.last = s.tuner->last_stats();
  s.last.runs = 1;
  s.total += s.last;
  return true;
}

template <class T>
void run_spmm(DistKernel::Impl& s, std::span<const T> b_local, std::span<T> c_local) {
  if (run_auto(s, [&](DistKernel& kern) { kern.spmm(b_local, c_local); })) return;
  agree_on_arguments<T>(s, "spmm", [&] {
    check_kernel<T>(s, KernelKind::spmm, "spmm");
    check_size("spmm", "B", b_local.size(), std::uint64_t(s.cols.size(s.rank)) * s.k, s.rank);
    check_size("spmm", "C", c_local.size(), std::uint64_t(s.rows.size(s.rank)) * s.k, s.rank);
    s.exchange->bind_operand(b_local.data(), s.run_context());
  });
  s.run(dist::Operands<T>{b_local.data(), nullptr, c_local.data()});
}

template <class T>
void run_sddmm(DistKernel::Impl& s, std::span<const T> x_local, std::span<const T> y_local,
               std::span<T> out) {
  if (run_auto(s, [&](DistKernel& kern) { kern.sddmm(x_local, y_local, out); })) return;
  agree_on_arguments<T>(s, "sddmm", [&] {
    check_kernel<T>(s, KernelKind::sddmm, "sddmm");
    check_size("sddmm", "X", x_local.size(), std::uint64_t(s.rows.size(s.rank)) * s.k, s.rank);
    check_size("sddmm", "Y", y_local.size(), std::uint64_t(s.cols.size(s.rank)) * s.k, s.rank);
    check_size("sddmm", "out", out.size(), static_cast<std::uint64_t>(s.rows_in_use->nnz()),
               s.rank);
    s.exchange->bind_operand(y_local.data(), s.run_context());
  });
  s.run(dist::Operands<T>{y_local.data(), x_local.data(), out.data()});
}

template <class T>
void run_spmv(DistKernel::Impl& s, std::span<const T> x_local, std::span<T> y_local) {
  if (run_auto(s, [&](DistKernel& kern) { kern.spmv(x_local, y_local); })) return;
  agree_on_arguments<T>(s, "spmv", [&] {
    check_kernel<T>(s, KernelKind::spmv, "spmv");
    check_size("spmv", "x", x_local.size(), static_cast<std::uint64_t>(s.cols.size(s.rank)),
               s.rank);
    check_size("spmv", "y", y_local.size(), static_cast<std::uint64_t>(s.rows.size(s.rank)),
               s.rank);
    s.exchange->bind_operand(x_local.data(), s.run_context());
  });
  s.run(dist::Operands<T>{x_local.data(), nullptr, y_local.data()});
}

template <class T>
void run_replicate(DistKernel::Impl& s, std::span<const T> operand_local) {
  agreement::Agreement agreed;
  agreed.field("the call", "replicate");
  agreed.field("the operands' dtype", std::string(to_string(scalar_type_of<T>)));
  agreement::collective_call_agreed(s.comm, "DistKernel::replicate", std::move(agreed), [&] {
    if (s.options.mode != CommMode::ideal) {
      throw std::logic_error("DistKernel::replicate is only for the ideal mode");
    }
    check_scalar<T>("replicate", s.options.scalar);
    check_size("replicate", "operand", operand_local.size(),
               std::uint64_t(s.cols.size(s.rank)) * s.k, s.rank);
  });
  s.typed_exchange<T>().replicate(s.run_context(), operand_local);
}
}  // namespace

void DistKernel::spmm(std::span<const float> b_local, std::span<float> c_local) {
  run_spmm(*impl_, b_local, c_local);
}
void DistKernel::spmm(std::span<const double> b_local, std::span<double> c_local) {
  run_spmm(*impl_, b_local, c_local);
}
void DistKernel::sddmm(std::span<const float> x_local, std::span<const float> y_local,
                       std::span<float> out) {
  run_sddmm(*impl_, x_local, y_local, out);
}
void DistKernel::sddmm(std::span<const double> x_local, std::span<const double> y_local,
                       std::span<double> out) {
  run_sddmm(*impl_, x_local, y_local, out);
}
void DistKernel::spmv(std::span<const float> x_local, std::span<float> y_local) {
  run_spmv(*impl_, x_local, y_local);
}
void DistKernel::spmv(std::span<const double> x_local, std::span<double> y_local) {
  run_spmv(*impl_, x_local, y_local);
}
void DistKernel::replicate(std::span<const float> operand_local) {
  run_replicate(*impl_, operand_local);
}
void DistKernel::replicate(std::span<const double> operand_local) {
  run_replicate(*impl_, operand_local);
}
ScalarType DistKernel::scalar() const noexcept {
  return impl_->options.scalar;
}

CommMode DistKernel::mode() const noexcept {
  return impl_->options.mode;
}
KernelKind DistKernel::kernel() const noexcept {
  return impl_->kernel;
}
int DistKernel::k() const noexcept {
  return impl_->k;
}
double DistKernel::plan_seconds() const noexcept {
  if (impl_->tuner) return impl_->tuner->in_use().plan_seconds();
  return impl_->plan_seconds;
}

const TileTuning& DistKernel::tile_tuning() const noexcept {
  if (impl_->tuner) return impl_->tuner->in_use().tile_tuning();
  return impl_->tile_tuning;
}
double DistKernel::setup_seconds() const noexcept {
  return impl_->setup_seconds;
}
const CommStats& DistKernel::last_run_stats() const noexcept {
  return impl_->last;
}
const CommStats& DistKernel::total_stats() const noexcept {
  return impl_->total;
}
void DistKernel::reset_stats() noexcept {
  impl_->last = {};
  impl_->total = {};
}
PatternVolume DistKernel::volume() const {
  if (!impl_->volume_known) impl_->compute_volume();
  return impl_->volume;
}
gidx_t DistKernel::window_columns() const noexcept {
  if (impl_->tuner) return impl_->tuner->in_use().window_columns();
  return impl_->pattern.window;
}
const std::shared_ptr<RigEngine>& DistKernel::engine() const noexcept {
  if (impl_->tuner) return impl_->tuner->engine();
  return impl_->engine;
}

// minimum_traffic and measure_line_rate: traffic.cpp.

}  // namespace netsparse
