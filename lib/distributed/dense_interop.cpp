// Bringing your own data (interop.hpp): dense operands scattered from, gathered to and
// all-gathered over the ranks, checked on every rank alike.

#include "netsparse/interop.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "distributed/interop_checks.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

namespace {

using namespace dist::interop;  // the shared checks (interop_checks.hpp), check_mpi

template <class T>
MPI_Datatype mpi_scalar() {
  if constexpr (std::is_same_v<T, float>) {
    return MPI_FLOAT;
  } else {
    return MPI_DOUBLE;
  }
}

// k contiguous scalars: one row of the dense matrix.
class RowType {
 public:
  RowType(MPI_Datatype scalar, int k) {
    check_mpi(MPI_Type_contiguous(k, scalar, &type_), "MPI_Type_contiguous");
    check_mpi(MPI_Type_commit(&type_), "MPI_Type_commit");
  }
  ~RowType() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  RowType(const RowType&) = delete;
  RowType& operator=(const RowType&) = delete;
  MPI_Datatype get() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

enum class Op { scatter, gather, allgather };

constexpr auto kOpNames = std::to_array<support::EnumName<Op>>({
    {Op::scatter, "scatter_dense"},
    {Op::gather, "gather_dense"},
    {Op::allgather, "allgather_dense"},
});

const char* name_of(Op op) {
  return support::name_of<kOpNames>(op, "unknown operation");
}

// Checks shared by the three (collective: every rank throws the same message) and the MPI
// counts and displacements, in rows.
struct Layout {
  std::vector<int> counts, displs;
  int mine = 0;
};
Layout check_dense(Op op, MPI_Comm comm, const RowPartition& part, int k, std::size_t global_size,
                   bool global_checked_here, std::size_t local_size, int root) {
  const std::string fn = name_of(op);
  const int nranks = dist::comm_size(comm);
  const int rank = dist::comm_rank(comm);
  std::vector<Agreed> agreed = {{"k", k},
                                {"the partition's number of rows", part.n_rows()},
                                {"the partition's number of parts", part.nparts()}};
  if (op != Op::allgather) agreed.push_back({"root", root});
  require_agreement(comm, fn.c_str(), agreed, "");
  Layout layout;
  checked_on_every_rank(comm, [&] {
    if (k < 1) fail(fn + ": k must be >= 1, got " + std::to_string(k));
    if (part.nparts() != nranks) {
      fail(fn + ": the partition has " + std::to_string(part.nparts()) +
           " parts, the communicator " + std::to_string(nranks) + " ranks");
    }
    if (op != Op::allgather && (root < 0 || root >= nranks)) {
      fail(fn + ": root " + std::to_string(root) + " is not a rank of the communicator (0.." +
           std::to_string(nranks - 1) + ")");
    }
    const std::uint64_t want_global = static_cast<std::uint64_t>(part.n_rows()) * k;
    if (global_checked_here && global_size != want_global) {
      fail(fn + ": the global matrix " + (op == Op::allgather ? "" : "on the root ") + "has " +
           std::to_string(global_size) + " elements, " + std::to_string(part.n_rows()) +
           " rows x k = " + std::to_string(k) + " need " + std::to_string(want_global));
    }
    const std::uint64_t want_local = static_cast<std::uint64_t>(part.size(rank)) * k;
    if (local_size != want_local) {
      fail(fn + ": rank " + std::to_string(rank) + "'s block has " + std::to_string(local_size) +
           " elements, its " + std::to_string(part.size(rank)) + " rows (" +
           std::to_string(part.begin(rank)) + ".." + std::to_string(part.end(rank)) +
           ") x k = " + std::to_string(k) + " need " + std::to_string(want_local));
    }
    layout.counts.resize(static_cast<std::size_t>(nranks));
    layout.displs.resize(static_cast<std::size_t>(nranks));
    for (int p = 0; p < nranks; ++p) {
      layout.counts[p] = dist::to_mpi_count(static_cast<std::uint64_t>(part.size(p)),
                                            (fn + " rows per rank").c_str());
      layout.displs[p] = dist::to_mpi_count(static_cast<std::uint64_t>(part.begin(p)),
                                            (fn + " row offset").c_str());
    }
    layout.mine = layout.counts[rank];
  });
  return layout;
}

template <class T>
void scatter_impl(MPI_Comm comm, const RowPartition& part, int k, std::span<const T> global,
                  std::span<T> local, int root) {
  const bool is_root = dist::comm_rank(comm) == root;
  const Layout l =
      check_dense(Op::scatter, comm, part, k, global.size(), is_root, local.size(), root);
  const RowType row(mpi_scalar<T>(), k);
  check_mpi(MPI_Scatterv(is_root ? global.data() : nullptr, l.counts.data(), l.displs.data(),
                         row.get(), local.data(), l.mine, row.get(), root, comm),
            "MPI_Scatterv");
}

template <class T>
void gather_impl(MPI_Comm comm, const RowPartition& part, int k, std::span<const T> local,
                 std::span<T> global, int root) {
  const bool is_root = dist::comm_rank(comm) == root;
  const Layout l =
      check_dense(Op::gather, comm, part, k, global.size(), is_root, local.size(), root);
  const RowType row(mpi_scalar<T>(), k);
  check_mpi(MPI_Gatherv(local.data(), l.mine, row.get(), is_root ? global.data() : nullptr,
                        l.counts.data(), l.displs.data(), row.get(), root, comm),
            "MPI_Gatherv");
}

template <class T>
std::vector<T> allgather_impl(MPI_Comm comm, const RowPartition& part, int k,
                              std::span<const T> local) {
  const std::size_t global_size =
      k >= 1 ? static_cast<std::size_t>(part.n_rows()) * static_cast<std::size_t>(k) : 0;
  const Layout l = check_dense(Op::allgather, comm, part, k, global_size, false, local.size(), 0);
  std::vector<T> global(global_size);
  const RowType row(mpi_scalar<T>(), k);
  check_mpi(MPI_Allgatherv(local.data(), l.mine, row.get(), global.data(), l.counts.data(),
                           l.displs.data(), row.get(), comm),
            "MPI_Allgatherv");
  return global;
}

// This rank's block size, without throwing for bad arguments (the checks report them).
std::size_t block_elements(MPI_Comm comm, const RowPartition& part, int k) {
  const int rank = dist::comm_rank(comm);
  if (k < 1 || rank >= part.nparts()) return 0;
  return static_cast<std::size_t>(part.size(rank)) * static_cast<std::size_t>(k);
}

// The allocating forms: this rank's block (scatter) or, on the root, the whole operand (gather).
template <class T>
std::vector<T> scatter_new(MPI_Comm comm, const RowPartition& part, int k,
                           std::span<const T> global, int root) {
  std::vector<T> local(block_elements(comm, part, k));
  scatter_impl<T>(comm, part, k, global, local, root);
  return local;
}
template <class T>
std::vector<T> gather_new(MPI_Comm comm, const RowPartition& part, int k, std::span<const T> local,
                          int root) {
  std::vector<T> global;
  if (dist::comm_rank(comm) == root && k >= 1) {
    global.resize(static_cast<std::size_t>(part.n_rows()) * static_cast<std::size_t>(k));
  }
  gather_impl<T>(comm, part, k, local, global, root);
  return global;
}

}  // namespace

// The public overloads of <netsparse/interop.hpp>, one set per element type: each forwards to the
// template above that does the work (declared per type in the header, so the ABI has both).
#define NETSPARSE_DENSE_TRANSFERS(T)                                                            \
  std::vector<T> scatter_dense(MPI_Comm comm, const RowPartition& part, int k,                  \
                               std::span<const T> global, int root) {                           \
    return scatter_new<T>(comm, part, k, global, root);                                         \
  }                                                                                             \
  void scatter_dense(MPI_Comm comm, const RowPartition& part, int k, std::span<const T> global, \
                     std::span<T> local, int root) {                                            \
    scatter_impl<T>(comm, part, k, global, local, root);                                        \
  }                                                                                             \
  std::vector<T> gather_dense(MPI_Comm comm, const RowPartition& part, int k,                   \
                              std::span<const T> local, int root) {                             \
    return gather_new<T>(comm, part, k, local, root);                                           \
  }                                                                                             \
  void gather_dense(MPI_Comm comm, const RowPartition& part, int k, std::span<const T> local,   \
                    std::span<T> global, int root) {                                            \
    gather_impl<T>(comm, part, k, local, global, root);                                         \
  }                                                                                             \
  std::vector<T> allgather_dense(MPI_Comm comm, const RowPartition& part, int k,                \
                                 std::span<const T> local) {                                    \
    return allgather_impl<T>(comm, part, k, local);                                             \
  }

NETSPARSE_DENSE_TRANSFERS(float)
NETSPARSE_DENSE_TRANSFERS(double)
#undef NETSPARSE_DENSE_TRANSFERS

}  // namespace netsparse
