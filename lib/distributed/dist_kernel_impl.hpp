// DistKernel's state (include/netsparse/distributed.hpp): its pattern, mode, precision, engine and
// statistics; shared by dist_kernel.cpp (the checked entry points) and dist_kernel_pattern.cpp
// (the pattern's tiling and volume).
#pragma once

#include <mpi.h>

#include <memory>
#include <type_traits>

#include "distributed/auto_mode.hpp"
#include "distributed/compute.hpp"
#include "distributed/exchange.hpp"
#include "distributed/pattern.hpp"
#include "distributed/run_context.hpp"
#include "netsparse/distributed.hpp"
#include "rig/finalize_hook.hpp"
#include "support/visibility.hpp"

namespace netsparse {

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
  // The job's hosts when the mode routes or counts by host (declared before the exchange, which
  // borrows it through RunContext::topology, so it outlives the exchange).
  std::unique_ptr<dist::Topology> topology;
  std::unique_ptr<dist::ExchangeBase> exchange;  // a dist::Exchange<T> of options.scalar's T
  // CommMode::automatic: the candidates' kernels instead of an exchange (auto_mode.hpp); every
  // run, set_pattern and accessor of the mode's state goes to the kernel it runs on.
  std::unique_ptr<dist::AutoSelector> tuner;
  MPI_Datatype row_type = MPI_DATATYPE_NULL;
  double setup_seconds = 0;
  double plan_seconds = 0;
  double remote_tiling_seconds = 0;  // part of build_pattern that belongs to the plan
  TileTuning tile_tuning;            // DistOptions::autotune_tiles
  CommStats last, total;
  mutable bool volume_known = false;
  mutable PatternVolume volume;

  // Releases the MPI resources (the exchange's, the datatype): by the destructor, or at the start
  // of MPI_Finalize for a kernel still alive then (finalize_hook); afterwards nothing calls MPI.
  rig::FinalizeHook finalize_hook;
  void release_mpi() noexcept {
    exchange.reset();  // before the datatype, the topology and the engine it may use
    topology.reset();
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
    rc.topology = topology.get();
    return rc;
  }

  void build_pattern();
  // ideal with DistOptions::dynamic_pattern: the pattern split and laid out in one pass
  // (TiledMatrix::split_columns), the rows borrowed like netsparse's, so ideal's floor on a
  // changing pattern pays what netsparse's path pays for its layout, not the full tiler.
  [[nodiscard]] bool splits_once() const noexcept {
    return options.dynamic_pattern && options.mode == CommMode::ideal;
  }
  void build_pattern_once(const CsrMatrix& rows);
  ColumnSplit once_split;  // build_pattern_once's arrays between patterns
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

}  // namespace netsparse
