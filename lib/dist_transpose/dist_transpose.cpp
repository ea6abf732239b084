// Distributed transpose and C = A^T * B (dist_transpose.hpp): via the transposed matrix and a
// DistKernel, or push-based (partial rows of C reduced at their owners).
#include "netsparse/dist_transpose.hpp"

#include <omp.h>
#include <array>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "concat/wire_model.hpp"
#include "dist_transpose/dist_transpose_steps.hpp"
#include "dist_transpose/local_transpose.hpp"
#include "distributed/deadlines.hpp"
#include "support/enum_names.hpp"
#include "support/visibility.hpp"

namespace netsparse {

using dist::check_mpi;
using dist::collective_call;

namespace {

void check_block(const char* call, const DistMatrix& a, const CsrMatrix& rows) {
  if (auto problem = dist::transpose_block_problem(call, a, rows)) {
    throw std::invalid_argument(*problem);
  }
}

// The transposed block of `block` (rows of A over rows_part, global columns over cols_part):
// rows [cols_part.begin(rank), cols_part.end(rank)) of A^T, global columns = A's rows.
// One MPI_Alltoall of the counts and one MPI_Alltoallv of the packed runs between the two local
// steps (dist_transpose_steps.hpp).
CsrMatrix transpose_block(MPI_Comm comm, const RowPartition& rows_part,
                          const RowPartition& cols_part, const CsrMatrix& block) {
  const int rank = dist::comm_rank(comm);
  const int nranks = dist::comm_size(comm);
  const dist::PackedTranspose packed = dist::pack_transpose(cols_part, block);
  std::vector<int> send_counts(nranks), send_displs(nranks), recv_counts(nranks),
      recv_displs(nranks);
  for (int q = 0; q < nranks; ++q) {
    send_counts[q] = dist::to_mpi_count(std::uint64_t(packed.offsets[q + 1] - packed.offsets[q]),
                                        "transpose: nonzeros to one owner");
    send_displs[q] =
        dist::to_mpi_count(std::uint64_t(packed.offsets[q]), "transpose: send displacement");
  }
  check_mpi(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm),
            "MPI_Alltoall");
  std::vector<std::int64_t> from(static_cast<std::size_t>(nranks));
  std::uint64_t total = 0;
  for (int q = 0; q < nranks; ++q) {
    recv_displs[q] = dist::to_mpi_count(total, "transpose: receive displacement");
    total += static_cast<std::uint64_t>(recv_counts[q]);
    from[static_cast<std::size_t>(q)] = recv_counts[q];
  }
  std::vector<dist::TransposeEntry> got(total);
  dist::ByteBlockType item(sizeof(dist::TransposeEntry));
  check_mpi(MPI_Alltoallv(packed.entries.data(), send_counts.data(), send_displs.data(), item.get(),
                          got.data(), recv_counts.data(), recv_displs.data(), item.get(), comm),
            "MPI_Alltoallv");
  return dist::merge_transpose(rank, rows_part, cols_part, got, from);
}

}  // namespace

DistMatrix transpose(const DistMatrix& a) {
  collective_call(a.comm(), [&] { check_block("transpose", a, a.local()); });
  CsrMatrix t = transpose_block(a.comm(), a.rows(), a.cols(), a.local());
  return DistMatrix(a.comm(), std::move(t), a.cols(), a.rows(), a.name() + "^T");
}

CsrMatrix transpose_rows(const DistMatrix& a, const CsrMatrix& local_rows) {
  collective_call(a.comm(), [&] { check_block("transpose_rows", a, local_rows); });
  return transpose_block(a.comm(), a.rows(), a.cols(), local_rows);
}

constexpr auto kTransposedMethodNames = std::to_array<support::EnumName<TransposedMethod>>({
    {TransposedMethod::via_transpose, "transpose"},
    {TransposedMethod::push, "push"},
});

const char* to_string(TransposedMethod method) noexcept {
  return support::name_of<kTransposedMethodNames>(method, "unknown");
}

// ---- TransposedSpmm ---------------------------------------------------------------------------

struct NETSPARSE_LOCAL TransposedSpmm::Impl {
  const DistMatrix* a = nullptr;
  int k = 1;
  DistOptions options;
  TransposedMethod method = TransposedMethod::via_transpose;
  double setup_seconds = 0, transpose_seconds = 0;

  // via_transpose: A^T (its local block replaced by set_pattern) and its kernel. The kernel may
  // borrow the block (DistOptions::dynamic_pattern), so the block lives here.
  std::unique_ptr<DistMatrix> at;
  CsrMatrix at_rows;
  std::unique_ptr<DistKernel> kernel;

  // push: the touched columns of this rank's rows, grouped by owner (sorted, so each owner's
  // are one run [send_begin[q], send_begin[q + 1]) of `touched`), the partial-row CSR over them
  // (row t = touched[t]: local rows of B and values), and what arrives here: per source rank,
  // the local rows of C the partial rows add to, in the order they arrive.
  std::vector<gidx_t> touched;
  std::vector<std::int64_t> t_ptr;
  std::vector<lidx_t> t_row;
  std::vector<double> t_val;
  std::vector<float> t_val32;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<gidx_t> recv_rows;  // local rows of C
  CommStats last, total;
  MPI_Datatype row_type = MPI_DATATYPE_NULL;
  std::vector<unsigned char> send_buf, recv_buf;

  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (row_type != MPI_DATATYPE_NULL && !finalized) MPI_Type_free(&row_type);
  }

  void plan_push(const CsrMatrix& rows);
  template <class T>
  void run_push(std::span<const T> b, std::span<T> c);
};

void TransposedSpmm::Impl::plan_push(const CsrMatrix& rows) {
  const DistMatrix& m = *a;
  const int nranks = m.nranks();
  const CsrMatrix lt = dist::local_transpose(rows);  // row j = column j of the block
  touched.clear();
  t_ptr.assign(1, 0);
  t_row.clear();
  t_val.clear();
  send_counts.assign(static_cast<std::size_t>(nranks), 0);
  for (gidx_t j = 0; j < lt.n_rows; ++j) {
    if (lt.row_ptr[j + 1] == lt.row_ptr[j]) continue;
    touched.push_back(j);
    for (std::int64_t i = lt.row_ptr[j]; i < lt.row_ptr[j + 1]; ++i) {
      t_row.push_back(static_cast<lidx_t>(lt.col_idx[i]));
      t_val.push_back(lt.values[i]);
    }
    t_ptr.push_back(static_cast<std::int64_t>(t_row.size()));
  }
  t_val32.assign(t_val.begin(), t_val.end());
  // Owners: touched is sorted, so each owner's columns are one run.
  send_displs.assign(static_cast<std::size_t>(nranks) + 1, 0);
  {
    std::size_t t = 0;
    for (int q = 0; q < nranks; ++q) {
      const std::size_t first = t;
      while (t < touched.size() && touched[t] < m.cols().end(q)) ++t;
      send_counts[static_cast<std::size_t>(q)] =
          dist::to_mpi_count(t - first, "spmm_transposed (push) rows to one owner");
      send_displs[static_cast<std::size_t>(q) + 1] = static_cast<int>(t);
    }
  }
  // Which rows of C arrive from each source (once per pattern): the touched column ids.
  std::vector<std::vector<gidx_t>> ids(static_cast<std::size_t>(nranks));
  for (int q = 0; q < nranks; ++q) {
    ids[static_cast<std::size_t>(q)].assign(touched.begin() + send_displs[q],
                                            touched.begin() + send_displs[q + 1]);
  }
  recv_rows = dist::exchange_all_to_all(m.comm(), ids, &recv_counts);
  const gidx_t cb = m.cols().begin(m.rank());
  for (gidx_t& r : recv_rows) r -= cb;
  recv_displs.assign(static_cast<std::size_t>(nranks) + 1, 0);
  for (int q = 0; q < nranks; ++q) recv_displs[q + 1] = recv_displs[q] + recv_counts[q];
}

template <class T>
void TransposedSpmm::Impl::run_push(std::span<const T> b, std::span<T> c) {
  const DistMatrix& m = *a;
  const double t0 = dist::now_seconds();
  const std::size_t kk = static_cast<std::size_t>(k);
  const std::int64_t n_touched = static_cast<std::int64_t>(touched.size());
  send_buf.resize(touched.size() * kk * sizeof(T));
  recv_buf.resize(recv_rows.size() * kk * sizeof(T));
  T* partial = reinterpret_cast<T*>(send_buf.data());
  const auto* vals = [&] {
    if constexpr (std::is_same_v<T, float>) {
      return t_val32.data();
    } else {
      return t_val.data();
    }
  }();
  // Partial rows: C_partial[j] = sum_i A[i, j] * B[i] over this rank's rows i.
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int64_t t = 0; t < n_touched; ++t) {
    T* out = partial + static_cast<std::size_t>(t) * kk;
    std::fill(out, out + kk, T(0));
    for (std::int64_t i = t_ptr[t]; i < t_ptr[t + 1]; ++i) {
      const T v = vals[i];
      const T* brow = b.data() + static_cast<std::size_t>(t_row[i]) * kk;
      for (std::size_t x = 0; x < kk; ++x) out[x] += v * brow[x];
    }
  }
  const double t1 = dist::now_seconds();
  check_mpi(
      MPI_Alltoallv(partial, send_counts.data(), send_displs.data(), row_type, recv_buf.data(),
                    recv_counts.data(), recv_displs.data(), row_type, m.comm()),
      "MPI_Alltoallv");
  const double t2 = dist::now_seconds();
  // Sum at the owner, in source-rank order (deterministic). Each source sends a row at most
  // once, so rows of one source never collide: parallel within a source.
  std::fill(c.begin(), c.end(), T(0));
  const T* in = reinterpret_cast<const T*>(recv_buf.data());
  for (int q = 0; q < m.nranks(); ++q) {
    const std::int64_t first = recv_displs[q], last_row = recv_displs[q + 1];
#pragma omp parallel for schedule(static)
    for (std::int64_t r = first; r < last_row; ++r) {
      T* out = c.data() + static_cast<std::size_t>(recv_rows[r]) * kk;
      const T* src = in + static_cast<std::size_t>(r) * kk;
      for (std::size_t x = 0; x < kk; ++x) out[x] += src[x];
    }
  }
  const double t3 = dist::now_seconds();
  CommStats s;
  s.runs = 1;
  const std::uint64_t row_bytes = kk * sizeof(T);
  for (int q = 0; q < m.nranks(); ++q) {
    if (q == m.rank() || send_counts[q] == 0) continue;
    s.messages_sent += 1;
    s.bytes_sent += concat::mpi_message_wire_bytes(std::uint64_t(send_counts[q]) * row_bytes);
  }
  for (int q = 0; q < m.nranks(); ++q) {
    if (q != m.rank()) s.payload_bytes_in += std::uint64_t(recv_counts[q]) * row_bytes;
  }
  s.wait_seconds = t2 - t1;
  s.compute_seconds = (t1 - t0) + (t3 - t2);
  last = s;
  total.runs += 1;
  total.bytes_sent += s.bytes_sent;
  total.payload_bytes_in += s.payload_bytes_in;
  total.messages_sent += s.messages_sent;
  total.wait_seconds += s.wait_seconds;
  total.compute_seconds += s.compute_seconds;
}

TransposedSpmm::TransposedSpmm(const DistMatrix& a, int k, const DistOptions& options,
                               TransposedMethod method, std::shared_ptr<RigEngine> engine)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  // First, before any collective: the ranks agree on the arguments (one small allreduce), so a
  // rank with another K, method, dtype or mode fails every rank with one std::invalid_argument
  // naming it; agreed, the check below throws alike everywhere. (via_transpose: DistKernel then
  // agrees on every option.)
  {
    agreement::Agreement agreed;
    agreed.field("K", std::to_string(k));
    agreed.field("the method",
                 method == TransposedMethod::via_transpose ? "via_transpose" : "push");
    agreed.field("the dtype", std::string(to_string(options.scalar)));
    agreed.field("the mode", to_string(options.mode));
    agreed.field("a RigEngine passed", engine != nullptr ? "true" : "false");
    agreement::agree_on_call(a.comm(), "TransposedSpmm", std::move(agreed), nullptr);
  }
  if (k < 1) {
    throw std::invalid_argument("TransposedSpmm: K must be >= 1, got " + std::to_string(k));
  }
  s.a = &a;
  s.k = k;
  s.options = options;
  s.method = method;
  const double t0 = dist::now_seconds();
  if (method == TransposedMethod::via_transpose) {
    s.at = std::make_unique<DistMatrix>(transpose(a));
    s.transpose_seconds = dist::now_seconds() - t0;
    s.kernel = std::make_unique<DistKernel>(*s.at, KernelKind::spmm, k, options, std::move(engine));
  } else {
    check_mpi(MPI_Type_contiguous(k, options.scalar == ScalarType::f32 ? MPI_FLOAT : MPI_DOUBLE,
                                  &s.row_type),
              "MPI_Type_contiguous");
    check_mpi(MPI_Type_commit(&s.row_type), "MPI_Type_commit");
    collective_call(a.comm(), [&] { check_block("TransposedSpmm", a, a.local()); });
    s.plan_push(a.local());
    s.transpose_seconds = dist::now_seconds() - t0;
  }
  s.setup_seconds = dist::now_seconds() - t0;
}

TransposedSpmm::~TransposedSpmm() = default;
TransposedSpmm::TransposedSpmm(TransposedSpmm&&) noexcept = default;
TransposedSpmm& TransposedSpmm::operator=(TransposedSpmm&&) noexcept = default;

void TransposedSpmm::set_pattern(const CsrMatrix& local_rows) {
  Impl& s = *impl_;
  const double t0 = dist::now_seconds();
  if (s.method == TransposedMethod::via_transpose) {
    s.at_rows = transpose_rows(*s.a, local_rows);
    s.transpose_seconds = dist::now_seconds() - t0;
    s.kernel->set_pattern(s.at_rows);
  } else {
    collective_call(s.a->comm(),
                    [&] { check_block("TransposedSpmm::set_pattern", *s.a, local_rows); });
    s.plan_push(local_rows);
    s.transpose_seconds = dist::now_seconds() - t0;
  }
  s.setup_seconds = dist::now_seconds() - t0;
}

namespace {
template <class T>
void run_transposed(TransposedSpmm::Impl& s, std::span<const T> b, std::span<T> c) {
  const DistMatrix& a = *s.a;
  collective_call(a.comm(), [&] {
    if (s.options.scalar != scalar_type_of<T>) {
      throw std::invalid_argument(
          std::string("spmm_transposed: the kernel computes in ") +
          std::string(to_string(s.options.scalar)) + " but the operands are " +
          std::string(to_string(scalar_type_of<T>)) + " (set DistOptions::scalar)");
    }
    const std::uint64_t want_b = std::uint64_t(a.rows().size(a.rank())) * s.k;
    const std::uint64_t want_c = std::uint64_t(a.cols().size(a.rank())) * s.k;
    if (b.size() != want_b || c.size() != want_c) {
      throw std::invalid_argument(
          "spmm_transposed (rank " + std::to_string(a.rank()) + "): C = A^T * B with A " +
          std::to_string(a.n_rows()) + " x " + std::to_string(a.n_cols()) +
          " and K = " + std::to_string(s.k) + " needs B with " + std::to_string(want_b) +
          " elements (" + std::to_string(a.rows().size(a.rank())) +
          " rows of A here x K) and C with " + std::to_string(want_c) + " (" +
          std::to_string(a.cols().size(a.rank())) + " columns of A here x K); got B " +
          std::to_string(b.size()) + ", C " + std::to_string(c.size()));
    }
  });
  if (s.method == TransposedMethod::via_transpose) {
    s.kernel->spmm(b, c);
  } else {
    s.run_push(b, c);
  }
}
}  // namespace

void TransposedSpmm::spmm(std::span<const float> b_local, std::span<float> c_local) {
  run_transposed(*impl_, b_local, c_local);
}
void TransposedSpmm::spmm(std::span<const double> b_local, std::span<double> c_local) {
  run_transposed(*impl_, b_local, c_local);
}

TransposedMethod TransposedSpmm::method() const noexcept {
  return impl_->method;
}
int TransposedSpmm::k() const noexcept {
  return impl_->k;
}
double TransposedSpmm::setup_seconds() const noexcept {
  return impl_->setup_seconds;
}
double TransposedSpmm::transpose_seconds() const noexcept {
  return impl_->transpose_seconds;
}
const CommStats& TransposedSpmm::last_run_stats() const noexcept {
  return impl_->kernel ? impl_->kernel->last_run_stats() : impl_->last;
}
const CommStats& TransposedSpmm::total_stats() const noexcept {
  return impl_->kernel ? impl_->kernel->total_stats() : impl_->total;
}
void TransposedSpmm::reset_stats() noexcept {
  if (impl_->kernel) impl_->kernel->reset_stats();
  impl_->last = {};
  impl_->total = {};
}
DistKernel* TransposedSpmm::kernel() noexcept {
  return impl_->kernel.get();
}

void spmm_transposed(const DistMatrix& a, int k, std::span<const float> b_local,
                     std::span<float> c_local, const DistOptions& options,
                     TransposedMethod method) {
  TransposedSpmm(a, k, options, method).spmm(b_local, c_local);
}
void spmm_transposed(const DistMatrix& a, int k, std::span<const double> b_local,
                     std::span<double> c_local, const DistOptions& options,
                     TransposedMethod method) {
  TransposedSpmm(a, k, options, method).spmm(b_local, c_local);
}

}  // namespace netsparse
