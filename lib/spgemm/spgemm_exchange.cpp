// How DistSpgemm's modes move B's remote rows (spgemm_impl.hpp): su all-gathers the whole of B,
// inspector-executor exchanges the exact rows point to point, netsparse gathers them in three
// fixed-size RIG passes (docs/architecture.md, "SpGEMM moves variable-length rows...").
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
#include "netsparse/netsparse.hpp"
#include "netsparse/spgemm.hpp"
#include "rig/finalize_hook.hpp"
#include "spgemm/spgemm_impl.hpp"
#include "spgemm/spgemm_local.hpp"
#include "support/visibility.hpp"

namespace netsparse {

using namespace spgemm_detail;

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
    e.push_replays(plans, push_tag, value_round, wrs);
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

// The numeric phase (spgemm.cpp) runs in either precision.
template void DistSpgemm::Impl::values_su<float>(std::vector<float>&);
template void DistSpgemm::Impl::values_su<double>(std::vector<double>&);
template void DistSpgemm::Impl::values_ie<float>(std::vector<float>&);
template void DistSpgemm::Impl::values_ie<double>(std::vector<double>&);
template void DistSpgemm::Impl::values_netsparse<float>(std::vector<float>&, std::vector<float>&,
                                                        std::vector<float>&);
template void DistSpgemm::Impl::values_netsparse<double>(std::vector<double>&, std::vector<double>&,
                                                         std::vector<double>&);

}  // namespace netsparse
