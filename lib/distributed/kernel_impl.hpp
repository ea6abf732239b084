// Internals of DistKernel: the tiled pattern shared by all modes and the per-mode exchange
// strategies (one class per communication mode, chosen once at construction).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "concat/wire_model.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/netsparse.hpp"
#include "netsparse/scalar.hpp"

namespace netsparse::dist {

// The local rows' pattern, tiled the way the mode computes it.
//   whole:  one TiledMatrix of all local nonzeros (ideal, su: the whole operand is present).
//   split:  local_part = nonzeros in columns this rank owns (computed in place on the local block
//           of the operand), remote_part = the others, tiled in column panels of `window` columns
//           (the unit of gathering). For SDDMM the split outputs are scattered back to CSR order.
struct Pattern {
  // Direct mode (Exchange::direct_csr): the caller's rows, borrowed, computed with the CSR
  // kernels; nothing below is built (no split, no tiling: a pattern that changes every run must
  // not pay an inspector's work).
  const CsrMatrix* direct = nullptr;
  bool split = false;
  gidx_t window = 0;                  // column panel width of remote_part
  gidx_t col_begin = 0, col_end = 0;  // columns (operand rows) this rank owns
  TiledMatrix whole;
  TiledMatrix local_part;
  TiledMatrix remote_part;  // empty when the mode does not need it (needs_remote_panels)
  CsrMatrix remote_csr;     // the remote nonzeros in CSR order (inspector-executor renumbers it)
  // SDDMM scatter: CSR row pointers of the original rows and of the two parts, and per row the
  // number of remote nonzeros left of the local column range.
  std::vector<std::int64_t> row_ptr, local_row_ptr, remote_row_ptr, remote_left;
  std::vector<int> remote_panels;  // column panels of remote_part holding nonzeros, in order
};

// Everything a run needs besides the pattern.
struct RunContext {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int nranks = 1;
  const RowPartition* rows = nullptr;
  const RowPartition* cols = nullptr;
  KernelKind kernel = KernelKind::spmm;
  int k = 1;
  MPI_Datatype row_type = MPI_DATATYPE_NULL;  // K contiguous elements of options->scalar
  const DistOptions* options = nullptr;

  // The operands' precision (DistOptions::scalar), and the bytes of one operand row (property).
  [[nodiscard]] ScalarType scalar() const noexcept { return options->scalar; }
  [[nodiscard]] std::uint64_t row_bytes() const noexcept {
    return static_cast<std::uint64_t>(k) * scalar_bytes(scalar());
  }
};

// One run's operands: b = this rank's block of the column-indexed operand; x = SDDMM's
// row-indexed operand; out = C / y (rows x K) or SDDMM's per-nonzero output (CSR order).
// T is the precision the kernel computes in (float or double); the exchanges, the compute
// helpers and the operands are templates on it, instantiated for both.
template <class T>
struct Operands {
  const T* b = nullptr;
  const T* x = nullptr;
  T* out = nullptr;
};

// Compute helpers shared by the modes (kernel dispatch + the SDDMM scatter buffers).
template <class T>
class Compute {
 public:
  // Everything at once when every operand row is at hand (`full` holds all n_cols rows): the
  // same computation as the gathering modes, without communication (ideal, su).
  void all_present(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, const T* full);
  // The local part, in place on the operand's local block (first call of a split run: it
  // initializes the output).
  void local(const Pattern& pat, const RunContext& rc, const Operands<T>& ops);
  // One column panel of remote_part with a view of the gathered rows (accumulates).
  void remote_panel(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, int panel,
                    BasicDenseConstView<T> view);
  // All of a (renumbered) remote matrix at once (inspector-executor's compact ghost matrix).
  void remote_all(const TiledMatrix& remote, const RunContext& rc, const Operands<T>& ops,
                  BasicDenseConstView<T> view);
  // Last call of a split run (SDDMM: scatters the two parts into CSR order).
  void finish(const Pattern& pat, const RunContext& rc, const Operands<T>& ops);

 private:
  std::vector<T> local_out_, remote_out_;  // SDDMM outputs of the split parts
};

// The part of an exchange that does not depend on the precision (setup moves no operand).
class ExchangeBase {
 public:
  virtual ~ExchangeBase() = default;
  // Whether the mode computes the remote part panel by panel (remote_part / remote_panels);
  // otherwise only remote_csr is built and the mode tiles it its own way.
  [[nodiscard]] virtual bool needs_remote_panels() const noexcept { return true; }
  // Whether the mode computes on the caller's CSR rows directly (Pattern::direct).
  [[nodiscard]] virtual bool direct_csr() const noexcept { return false; }
  // The pattern changed (collective).
  virtual void setup(const Pattern& pat, const RunContext& rc) = 0;
  // Local, before this rank enters a run (inside DistKernel's argument agreement, once the
  // arguments checked out here): the run's operand block is `operand`. A mode whose peers read
  // this rank's operand through a registration points it there now, while no peer can read it
  // yet (they only post once every rank has entered the run); a moved operand then needs no
  // collective. Default: nothing.
  virtual void bind_operand(const void* operand, const RunContext& rc) {
    (void)operand;
    (void)rc;
  }
};

template <class T>
class Exchange : public ExchangeBase {
 public:
  // One collective run; adds to `stats`.
  virtual void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                   Compute<T>& compute, CommStats& stats) = 0;
  // ideal only.
  virtual void replicate(const RunContext& rc, std::span<const T> operand_local);
};

// Defines the factory `name<T>()` of the exchange class template `Class` of a mode's file (in
// its anonymous namespace) and instantiates it for float and double; used at the end of each
// exchange_*.cpp, after the class, inside namespace netsparse::dist.
#define NETSPARSE_EXCHANGE_FACTORY(name, Class)            \
  template <class T>                                       \
  std::unique_ptr<Exchange<T>> name() {                    \
    return std::make_unique<Class<T>>();                   \
  }                                                        \
  template std::unique_ptr<Exchange<float>> name<float>(); \
  template std::unique_ptr<Exchange<double>> name<double>()

template <class T>
std::unique_ptr<Exchange<T>> make_su_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_su_panel_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_ideal_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_ie_exchange();
// node-aware-ie (exchange_node_ie.cpp): the three-step node-aware exchange over the job's hosts
// (Topology::build(comm), overridable by NETSPARSE_RANKS_PER_HOST / NETSPARSE_HOSTS_PER_RACK).
template <class T>
std::unique_ptr<Exchange<T>> make_node_ie_exchange();
// netsparse-node (exchange_node_rig.cpp): node-wide NetSparse over the same hosts: one Idx
// Filter and property store per host in shared memory, one RIG engine per host at its leader.
template <class T>
std::unique_ptr<Exchange<T>> make_node_rig_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_conveyor_exchange(bool prefilter);
// task-packets (exchange_task.cpp): per owner, task packets (the sparse work sent to the owner,
// partial sums back) where they move fewer bytes than fetching its rows, else the rows.
template <class T>
std::unique_ptr<Exchange<T>> make_task_exchange();
// How the RIG engine modes gather.
enum class RigVariant {
  vanilla,  // sa-vanilla: one NS_WR_RDMA_READ per remote nonzero
  panels,   // the per-nonzero idx stream per column panel, INDEXED (RigIdxSource::nonzeros)
  compact,  // a fixed pattern: the distinct remote columns into a compact buffer, POSITIONAL
            // (RigIdxSource::unique_columns), as gather plans unless DistOptions::plans is off
  direct,   // DistOptions::dynamic_pattern: the CSR's own column array, NS_SEND_REMOTE_ONLY
};
template <class T>
std::unique_ptr<Exchange<T>> make_rig_exchange(std::shared_ptr<RigEngine> engine,
                                               RigVariant variant);
// The context attributes of an engine opened for `options` (RigEngine's, and the host leaders'
// engine of netsparse-node).
ContextAttr engine_context_attr(const EngineOptions& options);
// Throws the failure of a work request (status, opcode, vendor error) for the mode `mode`.
[[noreturn]] void throw_wc(const ns_wc& wc, const char* mode);

// The engine's counters a run reads before and after, from RigEngine::stat or Context::stat
// (netsparse-node's leader engine). Plan traffic (replays) is counted with the paper's 50 B
// upper-layer model per packet, like the RIG packets, so wire bytes compare across modes; each
// replayed row is a property received.
struct EngineCounters {
  std::uint64_t wire = 0, packets = 0, frames = 0, prs_sent = 0, rdma_reads = 0, plan_rows = 0;
  template <class Engine>
  static EngineCounters read(const Engine& e) {
    EngineCounters c;
    c.wire = e.stat(NS_STAT_WIRE_BYTES) + e.stat(NS_STAT_PLAN_WIRE_BYTES);
    c.packets = e.stat(NS_STAT_READ_PACKETS) + e.stat(NS_STAT_RESPONSE_PACKETS) +
                e.stat(NS_STAT_PLAN_PACKETS);
    c.frames = e.stat(NS_STAT_FRAMES);
    c.prs_sent = e.stat(NS_STAT_PRS_SENT);
    c.rdma_reads = e.stat(NS_STAT_RDMA_READS);
    c.plan_rows = e.stat(NS_STAT_PLAN_ROWS);
    return c;
  }
};

// Byte accounting: every mode prices its wire bytes with the one wire model
// (concat/wire_model.hpp: MPI messages, NetSparse packets, the paper's lone PR).

// netsparse-node's and task-packets' deadline for every wait of a run (its host barrier, the
// leaders' quiesces and completions; task-packets' messages; the run's argument agreement in
// DistKernel): 2 x the engine watchdog + 1 s,
// or 120 s without one. A rank that died makes the run throw after it instead of hanging.
inline std::chrono::milliseconds watchdog_wait_deadline(std::uint32_t watchdog_ms) {
  return std::chrono::milliseconds(watchdog_ms > 0 ? 2 * std::int64_t{watchdog_ms} + 1000 : 120000);
}
inline std::chrono::milliseconds node_wait_deadline(const DistOptions& options) {
  return watchdog_wait_deadline(options.engine.watchdog_ms);
}

// Seconds since an arbitrary origin (MPI_Wtime).
inline double now_seconds() {
  return MPI_Wtime();
}

}  // namespace netsparse::dist
