// Distributed SpGEMM (include/netsparse/spgemm.hpp): C = A * B over a 1D row partition, B's
// remote rows moved by the RIG engine (netsparse), by an all-gather (su) or by MPI
// point-to-point (inspector-executor); then the local Gustavson product (spgemm_local.cpp).
//
// Every mode computes on B' = a row set whose row numbers A's columns are renumbered onto:
// netsparse / inspector-executor: this rank's own rows of B, then the gathered ("ghost") rows
// in ascending global order; su: the whole of B (A's columns used as they are).
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "agreement/neighbours.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/engine_counters.hpp"
#include "distributed/rig_engine.hpp"
#include "distributed/spgemm_local.hpp"
#include "netsparse/netsparse.hpp"
#include "netsparse/spgemm.hpp"
#include "rig/finalize_hook.hpp"
#include "support/visibility.hpp"

namespace netsparse {

const char* to_string(SpgemmMode mode) noexcept {
  switch (mode) {
    case SpgemmMode::netsparse:
      return "netsparse";
    case SpgemmMode::su:
      return "su";
    case SpgemmMode::inspector_executor:
      return "inspector-executor";
  }
  return "?";
}

SpgemmMode parse_spgemm_mode(std::string_view name) {
  for (const SpgemmMode m :
       {SpgemmMode::netsparse, SpgemmMode::su, SpgemmMode::inspector_executor}) {
    if (name == to_string(m)) return m;
  }
  if (name == "ie") return SpgemmMode::inspector_executor;
  throw std::invalid_argument("unknown SpGEMM mode '" + std::string(name) +
                              "' (accepted: netsparse, su, inspector-executor (ie))");
}

namespace {

using dist::check_mpi;
using dist::now_seconds;

constexpr int kTagCount = 1;
constexpr int kTagRows = 2;
constexpr int kTagLengths = 3;
constexpr int kTagCols = 4;
constexpr int kTagValues = 5;

int to_int_count(std::int64_t n, const char* what) {
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

void wait_all(std::vector<MPI_Request>& requests) {
  if (requests.empty()) return;
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
  requests.clear();
}

}  // namespace

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

void DistSpgemm::Impl::find_ghosts() {
  const gidx_t own0 = b_rows.begin(rank);
  const gidx_t own1 = b_rows.end(rank);
  ghosts.clear();
  for (const gidx_t c : a_local.col_idx) {
    if (c < own0 || c >= own1) ghosts.push_back(c);
  }
  std::sort(ghosts.begin(), ghosts.end());
  ghosts.erase(std::unique(ghosts.begin(), ghosts.end()), ghosts.end());
  stats.remote_rows = ghosts.size();
}

void DistSpgemm::Impl::find_peers() {
  owners.clear();
  owner_ghosts.clear();
  for (std::size_t g = 0; g < ghosts.size(); ++g) {
    const int o = b_rows.owner(ghosts[g]);
    if (owners.empty() || owners.back() != o) {
      owners.push_back(o);
      owner_ghosts.emplace_back(static_cast<std::int64_t>(g), static_cast<std::int64_t>(g));
    }
    owner_ghosts.back().second = static_cast<std::int64_t>(g) + 1;
  }
  requesters = agreement::sources_of(comm, owners, deadline());
}

// B' = own rows then ghost rows (ghost_ptr / the ghost columns in bp_cols' tail are filled by the
// mode's pattern exchange before this), A's columns renumbered onto it.
void DistSpgemm::Impl::build_bprime() {
  const gidx_t own0 = b_rows.begin(rank);
  const gidx_t own1 = b_rows.end(rank);
  const std::int64_t n_own = b_local.n_rows;
  a_cols.resize(a_local.col_idx.size());
  for (std::size_t p = 0; p < a_local.col_idx.size(); ++p) {
    const gidx_t c = a_local.col_idx[p];
    if (c >= own0 && c < own1) {
      a_cols[p] = c - own0;
    } else {
      a_cols[p] = n_own + (std::lower_bound(ghosts.begin(), ghosts.end(), c) - ghosts.begin());
    }
  }
  const std::int64_t own_nnz = b_local.nnz();
  bp_ptr.assign(b_local.row_ptr.begin(), b_local.row_ptr.end());
  if (bp_ptr.empty()) bp_ptr.push_back(0);
  for (std::size_t g = 1; g < ghost_ptr.size(); ++g) bp_ptr.push_back(own_nnz + ghost_ptr[g]);
  // bp_cols: own columns then the ghosts' (already appended by the pattern exchange).
}

void DistSpgemm::Impl::refresh_local_values() {
  auto fill = [&](auto& a_vals, auto& bp_vals) {
    using T = typename std::decay_t<decltype(a_vals)>::value_type;
    a_vals.assign(a_local.values.begin(), a_local.values.end());
    if (options.mode == SpgemmMode::su) {
      bp_vals.resize(bp_cols.size());
      const auto off =
          static_cast<std::ptrdiff_t>(bp_ptr[static_cast<std::size_t>(b_rows.begin(rank))]);
      std::transform(b_local.values.begin(), b_local.values.end(), bp_vals.begin() + off,
                     [](double v) { return static_cast<T>(v); });
    } else {
      bp_vals.resize(bp_cols.size());
      std::transform(b_local.values.begin(), b_local.values.end(), bp_vals.begin(),
                     [](double v) { return static_cast<T>(v); });
    }
  };
  if (f32()) {
    fill(a_vals_f, bp_vals_f);
  } else {
    fill(a_vals_d, bp_vals_d);
  }
  if (options.mode == SpgemmMode::netsparse) {
    auto chunks = [&](auto& own) {
      using T = typename std::decay_t<decltype(own)>::value_type;
      own.assign(own_col_chunks.size(), T(0));
      for (std::int64_t r = 0; r < b_local.n_rows; ++r) {
        const std::uint64_t first = row_info[2 * static_cast<std::size_t>(r)] -
                                    static_cast<std::uint64_t>(chunk_part.begin(rank));
        for (std::int64_t q = b_local.row_ptr[r]; q < b_local.row_ptr[r + 1]; ++q) {
          own[first * static_cast<std::uint64_t>(chunk) +
              static_cast<std::uint64_t>(q - b_local.row_ptr[r])] =
              static_cast<T>(b_local.values[static_cast<std::size_t>(q)]);
        }
      }
    };
    if (f32()) {
      chunks(own_val_chunks_f);
    } else {
      chunks(own_val_chunks_d);
    }
  }
}

// ---- su: the whole of B on every rank -------------------------------------------------------

void DistSpgemm::Impl::pattern_su() {
  std::vector<int> row_counts(static_cast<std::size_t>(nranks)), row_displs(row_counts.size());
  for (int p = 0; p < nranks; ++p) {
    row_counts[static_cast<std::size_t>(p)] = to_int_count(b_rows.size(p), "a rank's rows");
    row_displs[static_cast<std::size_t>(p)] = to_int_count(b_rows.begin(p), "B's rows");
  }
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(b_rows.n_rows()));
  std::vector<std::int64_t> mine(static_cast<std::size_t>(b_local.n_rows));
  for (std::int64_t r = 0; r < b_local.n_rows; ++r) {
    mine[static_cast<std::size_t>(r)] = b_local.row_ptr[r + 1] - b_local.row_ptr[r];
  }
  check_mpi(MPI_Allgatherv(mine.data(), row_counts[static_cast<std::size_t>(rank)], MPI_INT64_T,
                           lengths.data(), row_counts.data(), row_displs.data(), MPI_INT64_T, comm),
            "MPI_Allgatherv");
  bp_ptr.assign(lengths.size() + 1, 0);
  for (std::size_t r = 0; r < lengths.size(); ++r) bp_ptr[r + 1] = bp_ptr[r] + lengths[r];
  std::vector<int> nnz_counts(row_counts.size()), nnz_displs(row_counts.size());
  for (int p = 0; p < nranks; ++p) {
    const auto b = static_cast<std::size_t>(b_rows.begin(p));
    const auto e = static_cast<std::size_t>(b_rows.end(p));
    nnz_counts[static_cast<std::size_t>(p)] =
        to_int_count(bp_ptr[e] - bp_ptr[b], "a rank's nonzeros");
    nnz_displs[static_cast<std::size_t>(p)] = to_int_count(bp_ptr[b], "B's nonzeros");
  }
  bp_cols.resize(static_cast<std::size_t>(bp_ptr.back()));
  check_mpi(MPI_Allgatherv(b_local.col_idx.data(), nnz_counts[static_cast<std::size_t>(rank)],
                           MPI_INT64_T, bp_cols.data(), nnz_counts.data(), nnz_displs.data(),
                           MPI_INT64_T, comm),
            "MPI_Allgatherv");
  a_cols.assign(a_local.col_idx.begin(), a_local.col_idx.end());
  const std::int64_t own = b_local.nnz();
  stats.remote_rows = static_cast<std::uint64_t>(b_rows.n_rows() - b_local.n_rows);
  stats.remote_nonzeros = static_cast<std::uint64_t>(bp_ptr.back() - own);
  stats.setup_bytes_in =
      static_cast<std::uint64_t>(b_rows.n_rows() - b_local.n_rows) * 8 + stats.remote_nonzeros * 8;
}

template <class T>
void DistSpgemm::Impl::values_su(std::vector<T>& bp_vals) {
  std::vector<int> counts(static_cast<std::size_t>(nranks)), displs(counts.size());
  for (int p = 0; p < nranks; ++p) {
    const auto b = static_cast<std::size_t>(b_rows.begin(p));
    const auto e = static_cast<std::size_t>(b_rows.end(p));
    counts[static_cast<std::size_t>(p)] = static_cast<int>(bp_ptr[e] - bp_ptr[b]);
    displs[static_cast<std::size_t>(p)] = static_cast<int>(bp_ptr[b]);
  }
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bp_vals.data(), counts.data(),
                           displs.data(), mpi_type<T>(), comm),
            "MPI_Allgatherv");
  stats.multiply_bytes_in = stats.remote_nonzeros * sizeof(T);
}

// ---- inspector-executor: the exact rows, point to point -------------------------------------

void DistSpgemm::Impl::pattern_ie() {
  check_mpi(MPI_Comm_dup(comm, &p2p), "MPI_Comm_dup");
  find_peers();
  std::vector<MPI_Request> reqs;
  // 1. how many rows each requester needs from this rank
  std::vector<std::int64_t> want(owners.size()), asked(requesters.size());
  for (std::size_t i = 0; i < owners.size(); ++i) {
    want[i] = owner_ghosts[i].second - owner_ghosts[i].first;
  }
  reqs.resize(owners.size() + requesters.size());
  for (std::size_t i = 0; i < requesters.size(); ++i) {
    check_mpi(MPI_Irecv(&asked[i], 1, MPI_INT64_T, requesters[i], kTagCount, p2p, &reqs[i]),
              "MPI_Irecv");
  }
  for (std::size_t i = 0; i < owners.size(); ++i) {
    check_mpi(MPI_Isend(&want[i], 1, MPI_INT64_T, owners[i], kTagCount, p2p,
                        &reqs[requesters.size() + i]),
              "MPI_Isend");
  }
  wait_all(reqs);
  // 2. which rows
  requested_rows.assign(requesters.size(), {});
  for (std::size_t i = 0; i < requesters.size(); ++i) {
    requested_rows[i].resize(static_cast<std::size_t>(asked[i]));
    reqs.emplace_back();
    check_mpi(MPI_Irecv(requested_rows[i].data(), to_int_count(asked[i], "a row list"), MPI_INT64_T,
                        requesters[i], kTagRows, p2p, &reqs.back()),
              "MPI_Irecv");
  }
  for (std::size_t i = 0; i < owners.size(); ++i) {
    reqs.emplace_back();
    check_mpi(MPI_Isend(ghosts.data() + owner_ghosts[i].first, to_int_count(want[i], "a row list"),
                        MPI_INT64_T, owners[i], kTagRows, p2p, &reqs.back()),
              "MPI_Isend");
  }
  wait_all(reqs);
  // 3. their lengths (the requested rows become local row numbers, checked)
  const gidx_t own0 = b_rows.begin(rank);
  std::vector<std::vector<std::int64_t>> lengths(requesters.size());
  requested_values.assign(requesters.size(), 0);
  for (std::size_t i = 0; i < requesters.size(); ++i) {
    for (std::int64_t& r : requested_rows[i]) {
      r -= own0;
      if (r < 0 || r >= b_local.n_rows) {
        throw std::logic_error("spgemm inspector-executor: rank " + std::to_string(requesters[i]) +
                               " asked for a row this rank does not own");
      }
      lengths[i].push_back(b_local.row_ptr[r + 1] - b_local.row_ptr[r]);
      requested_values[i] += lengths[i].back();
    }
  }
  std::vector<std::int64_t> ghost_len(ghosts.size());
  for (std::size_t i = 0; i < owners.size(); ++i) {
    reqs.emplace_back();
    check_mpi(MPI_Irecv(ghost_len.data() + owner_ghosts[i].first, static_cast<int>(want[i]),
                        MPI_INT64_T, owners[i], kTagLengths, p2p, &reqs.back()),
              "MPI_Irecv");
  }
  for (std::size_t i = 0; i < requesters.size(); ++i) {
    reqs.emplace_back();
    check_mpi(MPI_Isend(lengths[i].data(), static_cast<int>(lengths[i].size()), MPI_INT64_T,
                        requesters[i], kTagLengths, p2p, &reqs.back()),
              "MPI_Isend");
  }
  wait_all(reqs);
  ghost_ptr.assign(ghosts.size() + 1, 0);
  for (std::size_t g = 0; g < ghosts.size(); ++g) ghost_ptr[g + 1] = ghost_ptr[g] + ghost_len[g];
  // 4. their columns, straight into B's tail
  const std::int64_t own_nnz = b_local.nnz();
  bp_cols.assign(b_local.col_idx.begin(), b_local.col_idx.end());
  bp_cols.resize(static_cast<std::size_t>(own_nnz + ghost_ptr.back()));
  std::vector<std::vector<std::int64_t>> packed(requesters.size());
  for (std::size_t i = 0; i < requesters.size(); ++i) {
    for (const std::int64_t r : requested_rows[i]) {
      packed[i].insert(packed[i].end(), b_local.col_idx.begin() + b_local.row_ptr[r],
                       b_local.col_idx.begin() + b_local.row_ptr[r + 1]);
    }
    reqs.emplace_back();
    check_mpi(MPI_Isend(packed[i].data(), to_int_count(requested_values[i], "a column list"),
                        MPI_INT64_T, requesters[i], kTagCols, p2p, &reqs.back()),
              "MPI_Isend");
  }
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const std::int64_t g0 = owner_ghosts[i].first, g1 = owner_ghosts[i].second;
    reqs.emplace_back();
    check_mpi(MPI_Irecv(bp_cols.data() + own_nnz + ghost_ptr[static_cast<std::size_t>(g0)],
                        to_int_count(ghost_ptr[static_cast<std::size_t>(g1)] -
                                         ghost_ptr[static_cast<std::size_t>(g0)],
                                     "a column list"),
                        MPI_INT64_T, owners[i], kTagCols, p2p, &reqs.back()),
              "MPI_Irecv");
  }
  wait_all(reqs);
  stats.remote_nonzeros = static_cast<std::uint64_t>(ghost_ptr.back());
  stats.setup_bytes_in = 8 * (requesters.size() + ghosts.size() * 2) + 8 * stats.remote_nonzeros;
}

template <class T>
void DistSpgemm::Impl::values_ie(std::vector<T>& bp_vals) {
  std::vector<MPI_Request> reqs;
  reqs.reserve(owners.size() + requesters.size());
  const std::int64_t own_nnz = b_local.nnz();
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const auto g0 = static_cast<std::size_t>(owner_ghosts[i].first);
    const auto g1 = static_cast<std::size_t>(owner_ghosts[i].second);
    reqs.emplace_back();
    check_mpi(MPI_Irecv(bp_vals.data() + own_nnz + ghost_ptr[g0],
                        static_cast<int>(ghost_ptr[g1] - ghost_ptr[g0]), mpi_type<T>(), owners[i],
                        kTagValues, p2p, &reqs.back()),
              "MPI_Irecv");
  }
  std::vector<std::vector<T>> packed(requesters.size());
  for (std::size_t i = 0; i < requesters.size(); ++i) {
    packed[i].reserve(static_cast<std::size_t>(requested_values[i]));
    for (const std::int64_t r : requested_rows[i]) {
      for (std::int64_t q = b_local.row_ptr[r]; q < b_local.row_ptr[r + 1]; ++q) {
        packed[i].push_back(bp_vals[static_cast<std::size_t>(q)]);
      }
    }
    reqs.emplace_back();
    check_mpi(MPI_Isend(packed[i].data(), static_cast<int>(packed[i].size()), mpi_type<T>(),
                        requesters[i], kTagValues, p2p, &reqs.back()),
              "MPI_Isend");
  }
  wait_all(reqs);
  stats.multiply_bytes_in = stats.remote_nonzeros * sizeof(T);
}

// ---- netsparse: three fixed-size RIG passes ------------------------------------------------

void DistSpgemm::Impl::rig_gather(const void* base, std::uint64_t rows, std::uint32_t prop_bytes,
                                  std::uint32_t elem_bytes, const RowPartition& part,
                                  std::span<const std::uint64_t> idx, void* out, bool use_plans) {
  RigEngine::Impl& e = dist::RigEngineAccess::impl(*engine);
  // A region of the same shape moves to `base` before this rank enters the gather; the
  // allreduce is the fence: no rank posts before every rank has bound its block.
  e.bind_operand(base, rows, prop_bytes, part);
  int entered = 1;
  agreement::allreduce_within(&entered, 1, MPI_INT, MPI_MIN, comm, deadline());
  CommStats cs;
  e.begin_run(base, rows, prop_bytes, elem_bytes, part, /*rig_only=*/true, deadline());
  if (e.piece_count() != 1) {
    throw std::logic_error("spgemm: a chunk does not fit one engine message");
  }
  if (use_plans) {
    // As DistKernel's compact exchange: the pass that records the plans and the one that arms
    // their owners quiesce with the pattern's peers; later passes are pushed by the owners and
    // need no control message (a pusher is done once its pushes left).
    ++value_round;
    // plans_made, not plans.empty(): a rank that gathers nothing has no plan, yet it must
    // count the rounds like every rank (its requesters stop telling it once they push).
    if (!plans_made || plans_region != e.registrations()) {
      first_pushed_round = value_round + 2;
      plans_region = e.registrations();
    }
  }
  if (use_plans && value_round >= first_pushed_round) {
    e.quiesce_with({}, {});
  } else {
    e.quiesce_with(owners, requesters);
  }
  std::vector<ns_send_wr> wrs;
  auto* out_bytes = static_cast<std::byte*>(out);
  auto batches = [&](auto take) {
    for (std::uint64_t off = 0; off < idx.size(); off += options.batch) {
      const std::uint64_t cnt = std::min<std::uint64_t>(options.batch, idx.size() - off);
      take(rig_wr(0, e.property_region(), idx.subspan(off, cnt), out_bytes + off * prop_bytes,
                  cnt * prop_bytes, Layout::kPositional));
    }
  };
  if (use_plans) {
    // Plans record on their first start and replay afterwards (a region registered again, by
    // another kernel on the engine in between, makes them record afresh). The owners push this
    // round's armed lists now: the allreduce above is the fence (every rank has consumed its
    // previous pass's output before it entered).
    if (!plans_made) {
      batches([&](const ns_send_wr& wr) { plans.emplace_back(e.context(), wr); });
      plans_made = true;
    }
    netsparse::detail::check(ns_plan_push(e.context().get(), push_tag, value_round, nullptr),
                             "ns_plan_push");
    for (const GatherPlan& p : plans) {
      ns_send_wr wr = plan_wr(0, p, NS_SEND_SIGNALED | NS_SEND_PUSHED);
      wr.wr.plan.push_tag = push_tag;
      wr.wr.plan.push_round = value_round;
      wrs.push_back(wr);
    }
  } else {
    batches([&](const ns_send_wr& wr) { wrs.push_back(wr); });
  }
  std::size_t pending = wrs.size();
  for (std::size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
  ns_wc wc[64];
  auto drain = [&](bool block) {
    const std::size_t n = e.completions(wc, block, "spgemm netsparse");
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != NS_WC_SUCCESS) dist::throw_wc(wc[i], "spgemm netsparse");
      --pending;
    }
  };
  ns_send_wr* next = wrs.empty() ? nullptr : wrs.data();
  while (next != nullptr) {
    ns_send_wr* bad = nullptr;
    if (e.post(*next, &bad) == NS_OK) break;
    drain(true);  // the queue pair is full
    next = bad;
  }
  while (pending > 0) drain(true);
  e.announce_round();
  e.end_run(cs);
}

void DistSpgemm::Impl::pattern_netsparse() {
  if (!engine) engine = std::make_shared<RigEngine>(comm, options.engine);
  RigEngine::Impl& e = dist::RigEngineAccess::impl(*engine);
  push_tag = e.new_push_tag();  // every rank builds its products in the same order
  find_peers();
  // The chunk: agreed by every rank (the region's row size).
  unsigned limit = e.context().max_prop_bytes();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &limit, 1, MPI_UNSIGNED, MPI_MIN, comm), "MPI_Allreduce");
  const std::int64_t max_chunk =
      std::min<std::int64_t>(256, static_cast<std::int64_t>(std::bit_floor(limit / 8u)));
  std::int64_t want = options.chunk;
  std::int64_t range[2] = {-want, want};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_INT64_T, MPI_MAX, comm), "MPI_Allreduce");
  if (-range[0] != range[1]) {
    throw std::invalid_argument("spgemm: SpgemmOptions::chunk differs between ranks");
  }
  if (want > max_chunk) {
    throw std::invalid_argument("spgemm: chunk " + std::to_string(want) + " is above " +
                                std::to_string(max_chunk) +
                                " (256, or what one engine message carries)");
  }
  if (want == 0) {
    const std::int64_t brows = std::max<gidx_t>(1, b_rows.n_rows());
    std::int64_t b_nnz = b_local.nnz();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &b_nnz, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
    want = static_cast<std::int64_t>(
        std::bit_floor(static_cast<std::uint64_t>(std::max<std::int64_t>(1, b_nnz / brows))));
  }
  chunk = static_cast<int>(std::clamp<std::int64_t>(want, 1, std::max<std::int64_t>(1, max_chunk)));
  stats.chunk = chunk;
  // This rank's rows of B cut into whole chunks; the chunk partition follows the row partition.
  std::vector<std::int64_t> first_chunk(static_cast<std::size_t>(b_local.n_rows) + 1, 0);
  for (std::int64_t r = 0; r < b_local.n_rows; ++r) {
    const std::int64_t len = b_local.row_ptr[r + 1] - b_local.row_ptr[r];
    first_chunk[static_cast<std::size_t>(r) + 1] =
        first_chunk[static_cast<std::size_t>(r)] + (len + chunk - 1) / chunk;
  }
  const std::int64_t n_chunks = first_chunk.back();
  std::vector<std::int64_t> all_chunks(static_cast<std::size_t>(nranks));
  check_mpi(MPI_Allgather(&n_chunks, 1, MPI_INT64_T, all_chunks.data(), 1, MPI_INT64_T, comm),
            "MPI_Allgather");
  std::vector<gidx_t> offsets(static_cast<std::size_t>(nranks) + 1, 0);
  for (int p = 0; p < nranks; ++p) {
    offsets[static_cast<std::size_t>(p) + 1] =
        offsets[static_cast<std::size_t>(p)] + all_chunks[static_cast<std::size_t>(p)];
  }
  chunk_part = RowPartition::from_offsets(offsets);
  const auto c0 = static_cast<std::uint64_t>(chunk_part.begin(rank));
  // A buffer of at least one row: the engine is never handed a null block.
  row_info.assign(2 * static_cast<std::size_t>(std::max<std::int64_t>(1, b_local.n_rows)), 0);
  own_col_chunks.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, n_chunks) * chunk), -1);
  for (std::int64_t r = 0; r < b_local.n_rows; ++r) {
    row_info[2 * static_cast<std::size_t>(r)] =
        c0 + static_cast<std::uint64_t>(first_chunk[static_cast<std::size_t>(r)]);
    row_info[2 * static_cast<std::size_t>(r) + 1] =
        static_cast<std::uint64_t>(b_local.row_ptr[r + 1] - b_local.row_ptr[r]);
    std::copy(b_local.col_idx.begin() + b_local.row_ptr[r],
              b_local.col_idx.begin() + b_local.row_ptr[r + 1],
              own_col_chunks.begin() + first_chunk[static_cast<std::size_t>(r)] * chunk);
  }
  // Pass 1: (first chunk, length) of every ghost.
  std::vector<std::uint64_t> ghost_info(2 * std::max<std::size_t>(1, ghosts.size()));
  const std::span<const std::uint64_t> ghost_idx(
      reinterpret_cast<const std::uint64_t*>(ghosts.data()), ghosts.size());
  rig_gather(row_info.data(), static_cast<std::uint64_t>(b_local.n_rows), 16, 8, b_rows, ghost_idx,
             ghost_info.data(), false);
  ghost_ptr.assign(ghosts.size() + 1, 0);
  ghost_first_slot.assign(ghosts.size() + 1, 0);
  ghost_chunks.clear();
  for (std::size_t g = 0; g < ghosts.size(); ++g) {
    const auto len = static_cast<std::int64_t>(ghost_info[2 * g + 1]);
    const std::int64_t n = (len + chunk - 1) / chunk;
    ghost_ptr[g + 1] = ghost_ptr[g] + len;
    ghost_first_slot[g + 1] = ghost_first_slot[g] + n;
    for (std::int64_t k = 0; k < n; ++k) {
      ghost_chunks.push_back(ghost_info[2 * g] + static_cast<std::uint64_t>(k));
    }
  }
  // Pass 2: the ghosts' columns.
  const auto n_in = static_cast<std::size_t>(ghost_chunks.size()) * static_cast<std::size_t>(chunk);
  std::vector<std::int64_t> in_cols(std::max<std::size_t>(1, n_in));
  rig_gather(own_col_chunks.data(), static_cast<std::uint64_t>(n_chunks),
             static_cast<std::uint32_t>(chunk * 8), 8, chunk_part, ghost_chunks, in_cols.data(),
             false);
  const std::int64_t own_nnz = b_local.nnz();
  bp_cols.assign(b_local.col_idx.begin(), b_local.col_idx.end());
  bp_cols.resize(static_cast<std::size_t>(own_nnz + ghost_ptr.back()));
  for (std::size_t g = 0; g < ghosts.size(); ++g) {
    std::copy_n(in_cols.begin() + ghost_first_slot[g] * chunk, ghost_ptr[g + 1] - ghost_ptr[g],
                bp_cols.begin() + own_nnz + ghost_ptr[g]);
  }
  stats.remote_nonzeros = static_cast<std::uint64_t>(ghost_ptr.back());
  stats.setup_bytes_in = 16 * ghosts.size() + 8 * n_in;
}

template <class T>
void DistSpgemm::Impl::values_netsparse(std::vector<T>& bp_vals, std::vector<T>& own_chunks,
                                        std::vector<T>& in_chunks) {
  const auto n_in = ghost_chunks.size() * static_cast<std::size_t>(chunk);
  if (in_chunks.size() < std::max<std::size_t>(1, n_in)) {
    in_chunks.assign(std::max<std::size_t>(1, n_in), T(0));  // once, before any plan
  }
  rig_gather(own_chunks.data(), static_cast<std::uint64_t>(chunk_part.size(rank)),
             static_cast<std::uint32_t>(chunk * sizeof(T)), sizeof(T), chunk_part, ghost_chunks,
             in_chunks.data(), options.plans);
  const std::int64_t own_nnz = b_local.nnz();
  for (std::size_t g = 0; g < ghosts.size(); ++g) {
    std::copy_n(in_chunks.begin() + ghost_first_slot[g] * chunk, ghost_ptr[g + 1] - ghost_ptr[g],
                bp_vals.begin() + own_nnz + ghost_ptr[g]);
  }
  stats.multiply_bytes_in = n_in * sizeof(T);
}

// ---- setup and multiply ---------------------------------------------------------------------

void DistSpgemm::Impl::setup() {
  const double t0 = now_seconds();
  dist::check_local_spgemm_options(options.local);
  if (options.batch == 0) throw std::invalid_argument("spgemm: batch must be >= 1");
  if (options.chunk < 0) throw std::invalid_argument("spgemm: chunk must be >= 0");
  if (options.mode == SpgemmMode::su) {
    pattern_su();
  } else {
    find_ghosts();
    if (options.mode == SpgemmMode::inspector_executor) {
      pattern_ie();
    } else {
      pattern_netsparse();
    }
    build_bprime();
  }
  refresh_local_values();
  const double t1 = now_seconds();
  sym = dist::spgemm_symbolic(dist::CsrIndex{a_local.row_ptr, a_cols},
                              dist::CsrIndex{bp_ptr, bp_cols}, b_cols.n_rows(), options.local);
  stats.symbolic_seconds = now_seconds() - t1;
  stats.setup_seconds = now_seconds() - t0;
}

template <class T>
void DistSpgemm::Impl::numeric_into(std::vector<T>& a_vals, std::vector<T>& bp_vals,
                                    std::span<T> c_vals, bool c_size_ok) {
  std::exception_ptr refused;
  if (!values_error.empty()) {
    refused = std::make_exception_ptr(std::invalid_argument(values_error));
  } else if (!c_size_ok) {
    refused = std::make_exception_ptr(
        std::invalid_argument("DistSpgemm::multiply_values: rank " + std::to_string(rank) +
                              " got " + std::to_string(c_vals.size()) + " values for its " +
                              std::to_string(sym.nnz()) + " nonzeros of C"));
  }
  agreement::agree_on_failure(comm, refused, deadline());
  const double t0 = now_seconds();
  switch (options.mode) {
    case SpgemmMode::su:
      values_su(bp_vals);
      break;
    case SpgemmMode::inspector_executor:
      values_ie(bp_vals);
      break;
    case SpgemmMode::netsparse:
      if constexpr (std::is_same_v<T, float>) {
        values_netsparse(bp_vals, own_val_chunks_f, in_val_chunks_f);
      } else {
        values_netsparse(bp_vals, own_val_chunks_d, in_val_chunks_d);
      }
      break;
  }
  const double t1 = now_seconds();
  dist::spgemm_numeric<T>(sym, dist::CsrIndex{a_local.row_ptr, a_cols}, a_vals,
                          dist::CsrIndex{bp_ptr, bp_cols}, bp_vals, c_vals);
  stats.gather_seconds = t1 - t0;
  stats.numeric_seconds = now_seconds() - t1;
}

template <class T>
DistMatrix DistSpgemm::Impl::multiply(std::vector<T>& a_vals, std::vector<T>& bp_vals) {
  std::vector<T> c_vals(static_cast<std::size_t>(sym.nnz()));
  numeric_into<T>(a_vals, bp_vals, c_vals, true);
  CsrMatrix c;
  c.n_rows_global = a_local.n_rows_global;
  c.n_cols = b_cols.n_rows();
  c.row_begin = a_local.row_begin;
  c.n_rows = a_local.n_rows;
  c.row_ptr = sym.row_ptr;
  c.col_idx = sym.cols;
  c.values.assign(c_vals.begin(), c_vals.end());
  return DistMatrix(comm, std::move(c), a_rows, b_cols, name);
}

DistSpgemm::DistSpgemm(const DistMatrix& a, const DistMatrix& b, const SpgemmOptions& options,
                       std::shared_ptr<RigEngine> engine)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.comm = a.comm();
  s.rank = a.rank();
  s.nranks = a.nranks();
  s.options = options;
  s.engine = std::move(engine);
  // The shapes, checked on every rank (every rank holds both partitions whole).
  std::exception_ptr error;
  try {
    int same_comm = MPI_UNEQUAL;
    check_mpi(MPI_Comm_compare(a.comm(), b.comm(), &same_comm), "MPI_Comm_compare");
    if (same_comm != MPI_IDENT && same_comm != MPI_CONGRUENT) {
      throw std::invalid_argument("spgemm: A and B live on different communicators");
    }
    if (a.cols().offsets() != b.rows().offsets()) {
      throw std::invalid_argument("spgemm: A's column partition (" + std::to_string(a.n_cols()) +
                                  " columns) is not B's row partition (" +
                                  std::to_string(b.n_rows()) + " rows)");
    }
  } catch (...) {
    error = std::current_exception();
  }
  dist::agree_on_failure(s.comm, error);
  s.a_rows = a.rows();
  s.b_rows = b.rows();
  s.b_cols = b.cols();
  s.name = a.name() + "*" + b.name();
  s.a_local = a.local();
  s.b_local = b.local();
  dist::collective_call(s.comm, [&] { s.setup(); });
  s.finalize_hook = rig::FinalizeHook([&s] { s.release_mpi(); });
}

DistSpgemm::~DistSpgemm() = default;
DistSpgemm::DistSpgemm(DistSpgemm&&) noexcept = default;
DistSpgemm& DistSpgemm::operator=(DistSpgemm&&) noexcept = default;

DistMatrix DistSpgemm::multiply() {
  Impl& s = *impl_;
  return s.f32() ? s.multiply(s.a_vals_f, s.bp_vals_f) : s.multiply(s.a_vals_d, s.bp_vals_d);
}

void DistSpgemm::multiply_values(std::span<double> c_values) {
  Impl& s = *impl_;
  const bool fits = static_cast<std::int64_t>(c_values.size()) == s.sym.nnz();
  if (!s.f32()) {
    s.numeric_into<double>(s.a_vals_d, s.bp_vals_d, c_values, fits);
    return;
  }
  std::vector<float> c(fits ? c_values.size() : 0);
  s.numeric_into<float>(s.a_vals_f, s.bp_vals_f, c, fits);
  std::copy(c.begin(), c.end(), c_values.begin());
}

void DistSpgemm::update_values(std::span<const double> a_values, std::span<const double> b_values) {
  Impl& s = *impl_;
  if (a_values.size() != s.a_local.values.size() || b_values.size() != s.b_local.values.size()) {
    s.values_error = "DistSpgemm::update_values: rank " + std::to_string(s.rank) + " got " +
                     std::to_string(a_values.size()) + " / " + std::to_string(b_values.size()) +
                     " values for " + std::to_string(s.a_local.values.size()) + " / " +
                     std::to_string(s.b_local.values.size()) + " nonzeros of A / B";
    throw std::invalid_argument(s.values_error);
  }
  s.values_error.clear();
  s.a_local.values.assign(a_values.begin(), a_values.end());
  s.b_local.values.assign(b_values.begin(), b_values.end());
  s.refresh_local_values();
}

const SpgemmStats& DistSpgemm::stats() const noexcept {
  return impl_->stats;
}
std::int64_t DistSpgemm::local_nnz() const noexcept {
  return impl_->sym.nnz();
}

DistMatrix spgemm(const DistMatrix& a, const DistMatrix& b, const SpgemmOptions& options) {
  DistSpgemm product(a, b, options);
  return product.multiply();
}

}  // namespace netsparse
