// DistSpgemm's state (include/netsparse/spgemm.hpp), shared by the product's two files:
// spgemm.cpp (setup, B' and the numeric phase, the public object) and spgemm_exchange.cpp (how
// each mode moves B's remote rows: su, inspector-executor, netsparse). Internal to lib/spgemm.
#pragma once

#include <mpi.h>
#include <chrono>
#include <cstdint>

#include <climits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/rig_engine.hpp"
#include "netsparse/netsparse.hpp"
#include "netsparse/spgemm.hpp"
#include "rig/finalize_hook.hpp"
#include "spgemm/spgemm_local.hpp"
#include "support/visibility.hpp"

namespace netsparse {

namespace spgemm_detail {

using dist::check_mpi;
using dist::now_seconds;

inline constexpr int kTagCount = 1;
inline constexpr int kTagRows = 2;
inline constexpr int kTagLengths = 3;
inline constexpr int kTagCols = 4;
inline constexpr int kTagValues = 5;

inline int to_int_count(std::int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) {
    throw std::overflow_error(std::string("spgemm: ") + what + " of " + std::to_string(n) +
                              " elements exceeds one MPI message");
  }
  return static_cast<int>(n);
}

template <class T>
MPI_Datatype mpi_type() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

inline void wait_all(std::vector<MPI_Request>& requests) {
  if (requests.empty()) return;
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
  requests.clear();
}

}  // namespace spgemm_detail

struct NETSPARSE_LOCAL DistSpgemm::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm p2p = MPI_COMM_NULL;  // inspector-executor: a private duplicate (its own tags)
  int rank = 0, nranks = 1;
  SpgemmOptions options;
  RowPartition a_rows = RowPartition::equal_blocks(0, 1);
  RowPartition b_rows = RowPartition::equal_blocks(0, 1);
  RowPartition b_cols = RowPartition::equal_blocks(0, 1);
  std::string name;
  CsrMatrix a_local, b_local;

  // B' and A renumbered onto it.
  std::vector<gidx_t> ghosts;                 // netsparse / IE: the remote rows of B, ascending
  std::vector<std::int64_t> ghost_ptr{0};     // their row pointer (ghost-relative)
  std::vector<std::int64_t> a_cols;           // A's columns as rows of B'
  std::vector<std::int64_t> bp_ptr, bp_cols;  // B'
  std::vector<float> a_vals_f, bp_vals_f;     // values in the numeric phase's precision
  std::vector<double> a_vals_d, bp_vals_d;
  dist::SpgemmSymbolic sym;
  SpgemmStats stats;
  std::string values_error;  // update_values refused (agreed on by the next multiply)

  // Owners this rank gathers from and ranks that gather from it (netsparse, IE).
  std::vector<int> owners, requesters;
  // IE: per owner, the ghost range [first, last); per requester, this rank's local rows it needs.
  std::vector<std::pair<std::int64_t, std::int64_t>> owner_ghosts;
  std::vector<std::vector<std::int64_t>> requested_rows;
  std::vector<std::int64_t> requested_values;  // values per requester

  // netsparse: the engine and the chunked layout of this rank's rows of B.
  std::shared_ptr<RigEngine> engine;
  int chunk = 0;
  RowPartition chunk_part = RowPartition::equal_blocks(0, 1);
  std::vector<std::uint64_t> row_info;       // per own row: global first chunk, length
  std::vector<std::int64_t> own_col_chunks;  // own rows' columns in chunks (padding -1)
  std::vector<float> own_val_chunks_f;       // own rows' values in chunks (padding 0)
  std::vector<double> own_val_chunks_d;
  std::vector<std::uint64_t> ghost_chunks;     // the chunks of every ghost, in ghost order
  std::vector<std::int64_t> ghost_first_slot;  // per ghost: its first chunk's slot in the buffer
  std::vector<float> in_val_chunks_f;
  std::vector<double> in_val_chunks_d;
  std::vector<GatherPlan> plans;
  // Owner-pushed replays (ns_plan_push): this product's tag, the value passes so far (the same
  // on every rank), the first one whose plans are armed, and the region registration they
  // recorded on (a region registered again records them afresh: two more asked passes).
  std::uint32_t push_tag = 0;
  std::uint32_t value_round = 0;
  std::uint32_t first_pushed_round = 2;
  std::uint64_t plans_region = 0;
  bool plans_made = false;

  rig::FinalizeHook finalize_hook;
  void release_mpi() noexcept {
    plans.clear();  // before the engine they were made on
    if (p2p != MPI_COMM_NULL) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Comm_free(&p2p);
      p2p = MPI_COMM_NULL;
    }
  }
  ~Impl() {
    finalize_hook.release();
    release_mpi();
  }

  [[nodiscard]] std::chrono::milliseconds deadline() const {
    return dist::watchdog_wait_deadline(options.engine.watchdog_ms);
  }
  [[nodiscard]] bool f32() const noexcept { return options.scalar == ScalarType::f32; }

  void setup();
  void find_ghosts();
  void find_peers();
  void build_bprime();
  void refresh_local_values();
  void pattern_su();
  void pattern_ie();
  void pattern_netsparse();
  template <class T>
  void values_su(std::vector<T>& bp_vals);
  template <class T>
  void values_ie(std::vector<T>& bp_vals);
  template <class T>
  void values_netsparse(std::vector<T>& bp_vals, std::vector<T>& own_chunks,
                        std::vector<T>& in_chunks);
  // C's values (this rank's sym.nnz()) into c_vals; `c_size_ok`: the caller's buffer fits
  // (agreed on with update_values' refusals before anything moves).
  template <class T>
  void numeric_into(std::vector<T>& a_vals, std::vector<T>& bp_vals, std::span<T> c_vals,
                    bool c_size_ok);
  template <class T>
  DistMatrix multiply(std::vector<T>& a_vals, std::vector<T>& bp_vals);

  // One POSITIONAL gather over the engine: rows `idx` of the region (this rank's `rows` rows of
  // prop_bytes at `base`, distributed by `part`) into `out`; `use_plans`: as gather plans.
  void rig_gather(const void* base, std::uint64_t rows, std::uint32_t prop_bytes,
                  std::uint32_t elem_bytes, const RowPartition& part,
                  std::span<const std::uint64_t> idx, void* out, bool use_plans);
};

}  // namespace netsparse
