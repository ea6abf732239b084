// DistKernel: the communication modes' names, the compute helpers, pattern tiling and the
// column window, mode dispatch, the checked spmm / sddmm / spmv entry points, and the pattern's
// volume per rank and per host (minimum traffic and the line rate: traffic.cpp).
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distributed/kernel_impl.hpp"
#include "distributed/mpi_util.hpp"
#include "distributed/topology.hpp"
#include "netsparse/distributed.hpp"
#include "rig/finalize_hook.hpp"
#include "support/enum_names.hpp"
#include "support/visibility.hpp"

namespace netsparse {

using dist::check_mpi;

// ---- modes -----------------------------------------------------------------------------------

// In the order all_comm_modes() lists them.
constexpr auto kCommModeNames = std::to_array<support::EnumName<CommMode>>({
    {CommMode::netsparse, "netsparse"},
    {CommMode::su, "su"},
    {CommMode::su_panel, "su-panel"},
    {CommMode::sa_vanilla, "sa-vanilla"},
    {CommMode::sa_conveyors, "sa-conveyors"},
    {CommMode::sa_opt, "sa-opt"},
    {CommMode::inspector_executor, "inspector-executor"},
    {CommMode::node_aware_ie, "node-aware-ie"},
    {CommMode::netsparse_node, "netsparse-node"},
    {CommMode::ideal, "ideal"},
    {CommMode::task_packets, "task-packets"},
});
constexpr auto kAllModes = support::values_of<kCommModeNames>();

const char* to_string(CommMode mode) noexcept {
  return support::name_of<kCommModeNames>(mode, "unknown");
}

CommMode parse_comm_mode(std::string_view name) {
  if (const auto mode = support::value_named<kCommModeNames>(name)) return *mode;
  if (name == "ie") return CommMode::inspector_executor;
  throw std::invalid_argument("unknown communication mode '" + std::string(name) +
                              "' (accepted: " + support::names_joined<kCommModeNames>() + ")");
}

std::span<const CommMode> all_comm_modes() noexcept {
  return kAllModes;
}

bool uses_rig_engine(CommMode mode) noexcept {
  return mode == CommMode::netsparse || mode == CommMode::sa_vanilla;
}

// ---- compute helpers -------------------------------------------------------------------------

namespace dist {

template <class T>
void Exchange<T>::replicate(const RunContext&, std::span<const T>) {
  throw std::logic_error("DistKernel::replicate is only for the ideal mode");
}

template <class T>
void Compute<T>::all_present(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                             const T* full) {
  Operands<T> from_full = ops;
  from_full.b = full + pat.col_begin * rc.k;
  local(pat, rc, from_full);
  const BasicDenseConstView<T> view{full, 0, rc.k, rc.cols->n_rows()};
  for (int panel : pat.remote_panels) remote_panel(pat, rc, ops, panel, view);
  finish(pat, rc, ops);
}

template <class T>
void Compute<T>::local(const Pattern& pat, const RunContext& rc, const Operands<T>& ops) {
  const TiledMatrix& a = pat.local_part;
  const BasicDenseConstView<T> view{ops.b, pat.col_begin, rc.k, pat.col_end - pat.col_begin};
  switch (rc.kernel) {
    case KernelKind::spmm:
      if (a.n_rows() == 0) return;
      if (a.nnz() == 0) {
        std::fill_n(ops.out, a.n_rows() * rc.k, T{0});
        return;
      }
      spmm(a, view, ops.out, rc.k, rc.k, false);
      return;
    case KernelKind::spmv:
      if (a.n_rows() == 0) return;
      if (a.nnz() == 0) {
        std::fill_n(ops.out, a.n_rows(), T{0});
        return;
      }
      spmv(a, view, ops.out, false);
      return;
    case KernelKind::sddmm:
      local_out_.resize(static_cast<std::size_t>(a.nnz()));
      remote_out_.resize(pat.remote_csr.col_idx.size());
      if (a.nnz() == 0) return;
      sddmm(a, ops.x, rc.k, view, rc.k, local_out_.data());
      return;
  }
}

template <class T>
void Compute<T>::remote_panel(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                              int panel, BasicDenseConstView<T> view) {
  const TiledMatrix& a = pat.remote_part;
  switch (rc.kernel) {
    case KernelKind::spmm:
      spmm_col_panel(a, panel, view, ops.out, rc.k, rc.k);
      return;
    case KernelKind::spmv:
      spmv_col_panel(a, panel, view, ops.out);
      return;
    case KernelKind::sddmm:
      sddmm_col_panel(a, panel, ops.x, rc.k, view, rc.k, remote_out_.data());
      return;
  }
}

template <class T>
void Compute<T>::remote_all(const TiledMatrix& a, const RunContext& rc, const Operands<T>& ops,
                            BasicDenseConstView<T> view) {
  if (a.nnz() == 0) return;
  switch (rc.kernel) {
    case KernelKind::spmm:
      spmm(a, view, ops.out, rc.k, rc.k, true);
      return;
    case KernelKind::spmv:
      spmv(a, view, ops.out, true);
      return;
    case KernelKind::sddmm:
      sddmm(a, ops.x, rc.k, view, rc.k, remote_out_.data());
      return;
  }
}

template <class T>
void Compute<T>::finish(const Pattern& pat, const RunContext& rc, const Operands<T>& ops) {
  if (rc.kernel != KernelKind::sddmm) return;
  // Within a row the columns are sorted and the local range is contiguous, so the row's CSR
  // entries are [remote left | local | remote right]: three copies per row, no index array.
  const auto n_rows = static_cast<std::int64_t>(pat.row_ptr.size()) - 1;
  const T* loc = local_out_.data();
  const T* rem = remote_out_.data();
  T* out = ops.out;
#pragma omp parallel for schedule(static) if (n_rows > 4096)
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::int64_t o = pat.row_ptr[r];
    const std::int64_t rb = pat.remote_row_ptr[r];
    const std::int64_t re = pat.remote_row_ptr[r + 1];
    const std::int64_t lb = pat.local_row_ptr[r];
    const std::int64_t le = pat.local_row_ptr[r + 1];
    const std::int64_t left = pat.remote_left[r];
    std::copy(rem + rb, rem + rb + left, out + o);
    std::copy(loc + lb, loc + le, out + o + left);
    std::copy(rem + rb + left, rem + re, out + o + left + (le - lb));
  }
}

template class Exchange<float>;
template class Exchange<double>;
template class Compute<float>;
template class Compute<double>;

}  // namespace dist

// ---- DistKernel ------------------------------------------------------------------------------

struct NETSPARSE_LOCAL DistKernel::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, nranks = 1;
  RowPartition rows = RowPartition::equal_blocks(0, 1);
  RowPartition cols = RowPartition::equal_blocks(0, 1);
  KernelKind kernel = KernelKind::spmm;
  int k = 1;
  DistOptions options;
  std::shared_ptr<RigEngine> engine;
  CsrMatrix csr;  // the current pattern (a copy; direct modes borrow the caller's instead)
  const CsrMatrix* rows_in_use = &csr;
  dist::Pattern pattern;
  dist::Compute<float> compute_f32;  // the one of options.scalar's precision is used
  dist::Compute<double> compute_f64;
  std::unique_ptr<dist::ExchangeBase> exchange;  // a dist::Exchange<T> of options.scalar's T
  MPI_Datatype row_type = MPI_DATATYPE_NULL;
  double setup_seconds = 0;
  double plan_seconds = 0;
  double remote_tiling_seconds = 0;  // part of build_pattern that belongs to the plan
  CommStats last, total;
  mutable bool volume_known = false;
  mutable PatternVolume volume;

  // Releases the MPI resources (the exchange's, the datatype): by the destructor, or at the start
  // of MPI_Finalize for a kernel still alive then (finalize_hook); afterwards nothing calls MPI.
  rig::FinalizeHook finalize_hook;
  void release_mpi() noexcept {
    exchange.reset();  // before the datatype and the engine it may use
    if (row_type != MPI_DATATYPE_NULL) MPI_Type_free(&row_type);
    row_type = MPI_DATATYPE_NULL;
  }
  ~Impl() {
    finalize_hook.release();
    release_mpi();
  }

  dist::RunContext run_context() const {
    dist::RunContext rc;
    rc.comm = comm;
    rc.rank = rank;
    rc.nranks = nranks;
    rc.rows = &rows;
    rc.cols = &cols;
    rc.kernel = kernel;
    rc.k = k;
    rc.row_type = row_type;
    rc.options = &options;
    return rc;
  }

  void build_pattern();
  void compute_volume() const;
  template <class T>
  void run(const dist::Operands<T>& ops);
  template <class T>
  dist::Exchange<T>& typed_exchange() {
    return static_cast<dist::Exchange<T>&>(*exchange);
  }
  template <class T>
  dist::Compute<T>& compute() {
    if constexpr (std::is_same_v<T, float>) {
      return compute_f32;
    } else {
      return compute_f64;
    }
  }
};

namespace {

// Window (remote column panel) width: the option, or the widest window of at most 64 MiB.
// The profile (docs/benchmarks.md) decides: every column panel is one more pass of the kernel
// over C (5 passes instead of 2 cost kron:16 SpMM K=16 0.9 ms of 2.3 ms), whereas overlapping
// communication with computation needs no panels: all of a run's requests are posted before
// the local part is computed, and the engine answers and takes answers while it computes.
// Narrower windows remain for operands whose remote part exceeds the budget.
gidx_t choose_window(gidx_t n_cols, std::uint64_t row_bytes, gidx_t requested) {
  if (requested > 0) return std::min(requested, TiledMatrix::kMaxColPanelWidth);
  constexpr gidx_t kWindowBudgetBytes = gidx_t{64} << 20;
  const gidx_t by_bytes = std::max<gidx_t>(1, kWindowBudgetBytes / static_cast<gidx_t>(row_bytes));
  return std::min({by_bytes, std::max<gidx_t>(n_cols, 1), TiledMatrix::kMaxColPanelWidth});
}

}  // namespace

void DistKernel::Impl::build_pattern() {
  dist::Pattern& pat = pattern;
  pat = dist::Pattern{};
  pat.col_begin = cols.begin(rank);
  pat.col_end = cols.end(rank);
  pat.window = choose_window(cols.n_rows(), std::uint64_t(k) * scalar_bytes(options.scalar),
                             options.tiling.col_panel);
  TileConfig local_config = options.tiling;
  local_config.col_panel = 0;
  local_config.barriers = false;
  // Split the rows at the local column range (sorted columns: one contiguous range per row).
  const gidx_t cb = pat.col_begin, ce = pat.col_end;
  const gidx_t n = csr.n_rows;
  pat.row_ptr = csr.row_ptr;
  pat.local_row_ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  pat.remote_row_ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  pat.remote_left.assign(static_cast<std::size_t>(n), 0);
#pragma omp parallel for schedule(static) if (n > 4096)
  for (gidx_t r = 0; r < n; ++r) {
    const gidx_t* b = csr.col_idx.data() + csr.row_ptr[r];
    const gidx_t* e = csr.col_idx.data() + csr.row_ptr[r + 1];
    const gidx_t* lb = std::lower_bound(b, e, cb);
    const gidx_t* le = std::lower_bound(lb, e, ce);
    pat.remote_left[r] = lb - b;
    pat.local_row_ptr[r + 1] = le - lb;
    pat.remote_row_ptr[r + 1] = (lb - b) + (e - le);
  }
  for (gidx_t r = 0; r < n; ++r) {
    pat.local_row_ptr[r + 1] += pat.local_row_ptr[r];
    pat.remote_row_ptr[r + 1] += pat.remote_row_ptr[r];
  }
  CsrMatrix local_csr, remote_csr;
  for (CsrMatrix* m : {&local_csr, &remote_csr}) {
    m->n_rows_global = csr.n_rows_global;
    m->n_cols = csr.n_cols;
    m->row_begin = csr.row_begin;
    m->n_rows = csr.n_rows;
  }
  local_csr.row_ptr = pat.local_row_ptr;
  remote_csr.row_ptr = pat.remote_row_ptr;
  local_csr.col_idx.resize(static_cast<std::size_t>(local_csr.row_ptr.back()));
  local_csr.values.resize(local_csr.col_idx.size());
  remote_csr.col_idx.resize(static_cast<std::size_t>(remote_csr.row_ptr.back()));
  remote_csr.values.resize(remote_csr.col_idx.size());
#pragma omp parallel for schedule(static) if (n > 4096)
  for (gidx_t r = 0; r < n; ++r) {
    const std::int64_t b = csr.row_ptr[r], e = csr.row_ptr[r + 1];
    const std::int64_t left = pat.remote_left[r];
    const std::int64_t n_local = pat.local_row_ptr[r + 1] - pat.local_row_ptr[r];
    std::int64_t ro = pat.remote_row_ptr[r], lo = pat.local_row_ptr[r];
    for (std::int64_t i = b; i < e; ++i) {
      const bool is_local = i >= b + left && i < b + left + n_local;
      if (is_local) {
        local_csr.col_idx[lo] = csr.col_idx[i];
        local_csr.values[lo++] = csr.values[i];
      } else {
        remote_csr.col_idx[ro] = csr.col_idx[i];
        remote_csr.values[ro++] = csr.values[i];
      }
    }
  }
  pat.local_part = TiledMatrix(local_csr, local_config, options.scalar);
  TileConfig remote_config = local_config;
  remote_config.col_panel = pat.window;
  if (exchange->needs_remote_panels()) {
    const double t0 = dist::now_seconds();
    pat.remote_part = TiledMatrix(remote_csr, remote_config, options.scalar);
    remote_tiling_seconds = dist::now_seconds() - t0;
    for (int p = 0; p < pat.remote_part.n_col_panels(); ++p) {
      if (!pat.remote_part.panel_columns(p).empty()) pat.remote_panels.push_back(p);
    }
  }
  pat.remote_csr = std::move(remote_csr);
}

void DistKernel::Impl::compute_volume() const {
  // A bitmap over the columns: distinct remote columns, and how many per owner.
  const gidx_t n_cols = cols.n_rows();
  const gidx_t cb = cols.begin(rank), ce = cols.end(rank);
  std::vector<std::uint64_t> bits(static_cast<std::size_t>((n_cols + 63) / 64), 0);
  std::uint64_t remote_nnz = 0;
  for (const gidx_t c : rows_in_use->col_idx) {
    if (c >= cb && c < ce) continue;
    ++remote_nnz;
    bits[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
  std::vector<std::uint64_t>& unique_per_owner = volume.unique_remote_per_owner;
  unique_per_owner.assign(static_cast<std::size_t>(nranks), 0);
  std::uint64_t unique = 0;
  for (int q = 0; q < nranks; ++q) {
    std::uint64_t count = 0;
    for (gidx_t c = cols.begin(q); c < cols.end(q);) {
      // Whole words where possible.
      if ((c & 63) == 0 && c + 64 <= cols.end(q)) {
        count += static_cast<std::uint64_t>(std::popcount(bits[c >> 6]));
        c += 64;
      } else {
        count += (bits[c >> 6] >> (c & 63)) & 1;
        ++c;
      }
    }
    unique_per_owner[q] = count;
    unique += count;
  }
  volume.remote_nonzeros = remote_nnz;
  volume.unique_remote_cols = unique;
  volume.remote_rows_total = static_cast<std::uint64_t>(n_cols - (ce - cb));
  volume_known = true;
}

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
    case CommMode::netsparse:
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
  }
  throw std::invalid_argument("DistKernel: unknown communication mode");
}

}  // namespace

DistKernel::DistKernel(const DistMatrix& a, KernelKind kernel, int k, const DistOptions& options,
                       std::shared_ptr<RigEngine> engine)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  // Arguments are the same on every rank, so every rank throws the same error here.
  if (k < 1) throw std::invalid_argument("DistKernel: K must be >= 1, got " + std::to_string(k));
  if (kernel == KernelKind::spmv && k != 1) {
    throw std::invalid_argument("DistKernel: SpMV needs K == 1, got " + std::to_string(k));
  }
  if (options.batch < 1) throw std::invalid_argument("DistKernel: batch must be >= 1");
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
  dist::collective_call(s.comm, [&] {
    if (local_rows.row_begin != s.rows.begin(s.rank) || local_rows.n_rows != s.rows.size(s.rank) ||
        local_rows.n_rows_global != s.rows.n_rows() || local_rows.n_cols != s.cols.n_rows()) {
      throw std::invalid_argument(
          "DistKernel::set_pattern: the rows must be this rank's block of the matrix (rows [" +
          std::to_string(s.rows.begin(s.rank)) + ", " + std::to_string(s.rows.end(s.rank)) +
          ") of " + std::to_string(s.rows.n_rows()) + " x " + std::to_string(s.cols.n_rows()) +
          ")");
    }
    s.volume_known = false;
    s.remote_tiling_seconds = 0;
    if (s.exchange->direct_csr()) {
      s.rows_in_use = &local_rows;  // borrowed (DistOptions::dynamic_pattern)
      s.pattern = dist::Pattern{};
      s.pattern.direct = &local_rows;
      s.pattern.col_begin = s.cols.begin(s.rank);
      s.pattern.col_end = s.cols.end(s.rank);
      s.pattern.window = s.cols.n_rows();
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
void check_size(const char* call, const char* what, std::size_t got, std::uint64_t want) {
  if (got != want) {
    throw std::invalid_argument(std::string("DistKernel::") + call + ": " + what + " has " +
                                std::to_string(got) + " elements, this rank's block needs " +
                                std::to_string(want));
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
template <class F>
void agree_on_arguments(const DistKernel::Impl& s, F&& f) {
  if (uses_rig_engine(s.options.mode) || s.options.mode == CommMode::netsparse_node ||
      s.options.mode == CommMode::task_packets) {
    dist::collective_call_within(s.comm, dist::node_wait_deadline(s.options), f);
  } else {
    dist::collective_call(s.comm, f);
  }
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

template <class T>
void run_spmm(DistKernel::Impl& s, std::span<const T> b_local, std::span<T> c_local) {
  agree_on_arguments(s, [&] {
    check_kernel<T>(s, KernelKind::spmm, "spmm");
    check_size("spmm", "B", b_local.size(), std::uint64_t(s.cols.size(s.rank)) * s.k);
    check_size("spmm", "C", c_local.size(), std::uint64_t(s.rows.size(s.rank)) * s.k);
    s.exchange->bind_operand(b_local.data(), s.run_context());
  });
  s.run(dist::Operands<T>{b_local.data(), nullptr, c_local.data()});
}

template <class T>
void run_sddmm(DistKernel::Impl& s, std::span<const T> x_local, std::span<const T> y_local,
               std::span<T> out) {
  agree_on_arguments(s, [&] {
    check_kernel<T>(s, KernelKind::sddmm, "sddmm");
    check_size("sddmm", "X", x_local.size(), std::uint64_t(s.rows.size(s.rank)) * s.k);
    check_size("sddmm", "Y", y_local.size(), std::uint64_t(s.cols.size(s.rank)) * s.k);
    check_size("sddmm", "out", out.size(), static_cast<std::uint64_t>(s.rows_in_use->nnz()));
    s.exchange->bind_operand(y_local.data(), s.run_context());
  });
  s.run(dist::Operands<T>{y_local.data(), x_local.data(), out.data()});
}

template <class T>
void run_spmv(DistKernel::Impl& s, std::span<const T> x_local, std::span<T> y_local) {
  agree_on_arguments(s, [&] {
    check_kernel<T>(s, KernelKind::spmv, "spmv");
    check_size("spmv", "x", x_local.size(), static_cast<std::uint64_t>(s.cols.size(s.rank)));
    check_size("spmv", "y", y_local.size(), static_cast<std::uint64_t>(s.rows.size(s.rank)));
    s.exchange->bind_operand(x_local.data(), s.run_context());
  });
  s.run(dist::Operands<T>{x_local.data(), nullptr, y_local.data()});
}

template <class T>
void run_replicate(DistKernel::Impl& s, std::span<const T> operand_local) {
  dist::collective_call(s.comm, [&] {
    if (s.options.mode != CommMode::ideal) {
      throw std::logic_error("DistKernel::replicate is only for the ideal mode");
    }
    check_scalar<T>("replicate", s.options.scalar);
    check_size("replicate", "the operand", operand_local.size(),
               std::uint64_t(s.cols.size(s.rank)) * s.k);
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
  return impl_->plan_seconds;
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
  return impl_->pattern.window;
}
const std::shared_ptr<RigEngine>& DistKernel::engine() const noexcept {
  return impl_->engine;
}

HostLayout host_layout(MPI_Comm comm) {
  const dist::Topology topo = dist::Topology::build(comm);
  HostLayout l;
  l.hosts = topo.nhosts();
  l.racks = topo.nracks();
  l.virtual_hosts = topo.virtual_hosts();
  l.host = topo.host();
  l.rack = topo.rack();
  l.leader = topo.is_leader();
  return l;
}

HostVolume host_volume(const DistKernel& kernel) {
  const DistKernel::Impl& s = *kernel.impl_;
  const dist::Topology topo = dist::Topology::build(s.comm);
  // This rank's distinct rows owned on other hosts (sorted: one pass over a column bitmap).
  const gidx_t n_cols = s.cols.n_rows();
  std::vector<std::uint64_t> bits(static_cast<std::size_t>((n_cols + 63) / 64), 0);
  for (const gidx_t c : s.rows_in_use->col_idx) {
    if (topo.host_of(s.cols.owner(c)) != topo.host()) bits[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
  std::vector<gidx_t> mine;
  for (std::size_t w = 0; w < bits.size(); ++w) {
    for (std::uint64_t b = bits[w]; b != 0; b &= b - 1) {
      mine.push_back(static_cast<gidx_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(b))));
    }
  }
  // The host's union, at its leader.
  const MPI_Comm hc = topo.host_comm();
  const int hsize = dist::comm_size(hc), hrank = dist::comm_rank(hc);
  const int n = dist::to_mpi_count(mine.size(), "host_volume rows");
  std::vector<int> counts(static_cast<std::size_t>(hsize)), displs(hsize + 1, 0);
  check_mpi(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, hc), "MPI_Gather");
  for (int i = 0; i < hsize; ++i) {
    displs[i + 1] = dist::to_mpi_count(std::uint64_t(displs[i]) + std::uint64_t(counts[i]),
                                       "host_volume gathered rows");
  }
  std::vector<gidx_t> all(hrank == 0 ? static_cast<std::size_t>(displs.back()) : 0);
  dist::ByteBlockType item(sizeof(gidx_t));
  check_mpi(MPI_Gatherv(mine.data(), n, item.get(), all.data(), counts.data(), displs.data(),
                        item.get(), 0, hc),
            "MPI_Gatherv");
  std::sort(all.begin(), all.end());
  const auto host_rows =
      static_cast<std::uint64_t>(std::unique(all.begin(), all.end()) - all.begin());
  std::uint64_t sums[2] = {mine.size(), hrank == 0 ? host_rows : 0}, tail = sums[1];
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_UINT64_T, MPI_SUM, s.comm), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &tail, 1, MPI_UINT64_T, MPI_MAX, s.comm), "MPI_Allreduce");
  HostVolume v;
  v.hosts = topo.nhosts();
  v.racks = topo.nracks();
  v.virtual_hosts = topo.virtual_hosts();
  v.row_bytes = std::uint64_t(s.k) * scalar_bytes(s.options.scalar);
  v.rank_rows_total = sums[0];
  v.host_rows_total = sums[1];
  v.host_rows_tail = tail;
  return v;
}

// minimum_traffic and measure_line_rate: traffic.cpp.

}  // namespace netsparse
