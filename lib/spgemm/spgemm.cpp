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
#include "netsparse/netsparse.hpp"
#include "netsparse/spgemm.hpp"
#include "rig/finalize_hook.hpp"
#include "spgemm/spgemm_impl.hpp"
#include "spgemm/spgemm_local.hpp"
#include "support/enum_names.hpp"
#include "support/visibility.hpp"

namespace netsparse {

constexpr auto kSpgemmModeNames = std::to_array<support::EnumName<SpgemmMode>>({
    {SpgemmMode::netsparse, "netsparse"},
    {SpgemmMode::su, "su"},
    {SpgemmMode::inspector_executor, "inspector-executor"},
});

const char* to_string(SpgemmMode mode) noexcept {
  return support::name_of<kSpgemmModeNames>(mode, "?");
}

SpgemmMode parse_spgemm_mode(std::string_view name) {
  if (const auto mode = support::value_named<kSpgemmModeNames>(name)) return *mode;
  if (name == "ie") return SpgemmMode::inspector_executor;
  throw std::invalid_argument("unknown SpGEMM mode '" + std::string(name) +
                              "' (accepted: netsparse, su, inspector-executor (ie))");
}

using spgemm_detail::check_mpi;
using spgemm_detail::now_seconds;

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
