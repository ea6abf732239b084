// Bringing your own data (interop.hpp): DistMatrix from CSR arrays, dense scatter / gather.
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

#include "distributed/mpi_util.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

namespace {

using dist::check_mpi;

// Runs check() on every rank. If any rank threw, EVERY rank throws the exception of the lowest
// rank that threw (that rank its own, the others a copy with the same kind and text), so the
// message is the same everywhere.
template <class F>
void checked_on_every_rank(MPI_Comm comm, F&& check) {
  std::exception_ptr error;
  try {
    check();
  } catch (...) {
    error = std::current_exception();
  }
  const int rank = dist::comm_rank(comm);
  int lowest = error ? rank : INT_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (lowest == INT_MAX) return;
  dist::agree_on_failure(comm, rank == lowest ? error : nullptr);
}

// Values every rank must pass alike: the same reduction on every rank finds the first one that
// differs, so every rank throws the same message.
struct Agreed {
  std::string name;
  std::int64_t value;
};
void require_agreement(MPI_Comm comm, const char* fn, const std::vector<Agreed>& values,
                       const std::string& hint) {
  const std::size_t n = values.size();
  std::vector<std::int64_t> v(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    v[2 * i] = values[i].value;
    v[2 * i + 1] = values[i].value == INT64_MIN ? INT64_MAX : -values[i].value;
  }
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_MAX, comm),
      "MPI_Allreduce");
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t hi = v[2 * i], lo = -v[2 * i + 1];
    if (hi != lo) {
      throw std::invalid_argument(std::string(fn) + ": the ranks disagree on " + values[i].name +
                                  " (from " + std::to_string(lo) + " to " + std::to_string(hi) +
                                  " over the ranks)" + hint);
    }
  }
}

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument(what);
}

// Offsets of a partition (nparts + 1 entries from 0 to n, non-decreasing); throws naming `what`.
void check_offsets(const std::string& fn, const char* what, std::span<const gidx_t> offsets,
                   int nparts, gidx_t n, const char* n_name) {
  if (offsets.size() != static_cast<std::size_t>(nparts) + 1) {
    fail(fn + ": " + what + " has " + std::to_string(offsets.size()) +
         " entries, it needs nranks + 1 = " + std::to_string(nparts + 1));
  }
  if (offsets[0] != 0) {
    fail(fn + ": " + what + "[0] is " + std::to_string(offsets[0]) + ", it must be 0");
  }
  for (int p = 0; p < nparts; ++p) {
    if (offsets[p + 1] < offsets[p]) {
      fail(fn + ": " + what + " decreases at rank " + std::to_string(p) + " (" + what + "[" +
           std::to_string(p) + "] = " + std::to_string(offsets[p]) + ", " + what + "[" +
           std::to_string(p + 1) + "] = " + std::to_string(offsets[p + 1]) + ")");
    }
  }
  if (n >= 0 && offsets[nparts] != n) {
    fail(fn + ": " + what + "[nranks] is " + std::to_string(offsets[nparts]) + ", it must be " +
         n_name + " = " + std::to_string(n));
  }
}

// Calls f(row_ptr, col_idx, values) with the arrays' real element types.
template <class F>
decltype(auto) with_arrays(const CsrArrays& a, F&& f) {
  const auto with_values = [&](const auto* rp, const auto* ci) -> decltype(auto) {
    if (a.value_type() == CsrArrays::ValueType::f32) {
      return f(rp, ci, static_cast<const float*>(a.values()));
    }
    return f(rp, ci, static_cast<const double*>(a.values()));
  };
  const auto with_cols = [&](const auto* rp) -> decltype(auto) {
    if (a.col_idx_type() == CsrArrays::IndexType::i32) {
      return with_values(rp, static_cast<const std::int32_t*>(a.col_idx()));
    }
    return with_values(rp, static_cast<const std::int64_t*>(a.col_idx()));
  };
  if (a.row_ptr_type() == CsrArrays::IndexType::i32) {
    return with_cols(static_cast<const std::int32_t*>(a.row_ptr()));
  }
  return with_cols(static_cast<const std::int64_t*>(a.row_ptr()));
}

// The structure of CSR arrays of `n` rows: sizes, row_ptr[0] == 0, non-decreasing, the last
// offset equals the entries. `where` prefixes the messages.
void check_structure(const std::string& where, const CsrArrays& a, gidx_t n) {
  if (a.row_ptr_size() != static_cast<std::size_t>(n) + 1) {
    fail(where + ": row_ptr has " + std::to_string(a.row_ptr_size()) + " entries, " +
         std::to_string(n) + " rows need " + std::to_string(n + 1));
  }
  if (a.col_idx_size() != a.values_size()) {
    fail(where + ": col_idx has " + std::to_string(a.col_idx_size()) + " entries but values has " +
         std::to_string(a.values_size()));
  }
  with_arrays(a, [&](const auto* rp, const auto*, const auto*) {
    if (rp[0] != 0) {
      fail(where + ": row_ptr[0] is " + std::to_string(rp[0]) +
           ", it must be 0 (0-based CSR; convert 1-based arrays first)");
    }
    for (gidx_t r = 0; r < n; ++r) {
      if (rp[r + 1] < rp[r]) {
        fail(where + ": row_ptr decreases at row " + std::to_string(r) + " (row_ptr[" +
             std::to_string(r) + "] = " + std::to_string(rp[r]) + ", row_ptr[" +
             std::to_string(r + 1) + "] = " + std::to_string(rp[r + 1]) + ")");
      }
    }
    if (static_cast<std::uint64_t>(rp[n]) != a.col_idx_size()) {
      fail(where + ": row_ptr[" + std::to_string(n) + "] is " + std::to_string(rp[n]) +
           " but col_idx and values have " + std::to_string(a.col_idx_size()) + " entries");
    }
  });
}

// Rows [first, first + count) of structurally valid arrays as the block of global rows
// [row_begin, row_begin + count) of an n_rows_global x n_cols matrix, columns checked and
// ordered. `row_name(r)` names row r of the arrays in messages.
template <class RowName>
CsrMatrix assemble_rows(const std::string& fn, const CsrArrays& a, gidx_t first, gidx_t count,
                        gidx_t row_begin, gidx_t n_rows_global, gidx_t n_cols, ColumnOrder order,
                        const RowName& row_name) {
  CsrMatrix m;
  m.n_rows_global = n_rows_global;
  m.n_cols = n_cols;
  m.row_begin = row_begin;
  m.n_rows = count;
  m.row_ptr.assign(static_cast<std::size_t>(count) + 1, 0);
  with_arrays(a, [&](const auto* rp, const auto* ci, const auto* val) {
    const std::int64_t base = rp[first];
    const std::int64_t entries = static_cast<std::int64_t>(rp[first + count]) - base;
    m.col_idx.reserve(static_cast<std::size_t>(entries));
    m.values.reserve(static_cast<std::size_t>(entries));
    std::vector<std::int64_t> order_of;  // positions of an unsorted row, sorted by column
    for (gidx_t r = first; r < first + count; ++r) {
      const std::int64_t b = rp[r], e = rp[r + 1];
      bool sorted = true;
      for (std::int64_t i = b; i < e; ++i) {
        const std::int64_t c = ci[i];
        if (c < 0 || c >= n_cols) {
          fail(fn + ": " + row_name(r) + ": col_idx[" + std::to_string(i) +
               "] = " + std::to_string(c) + " is out of range [0, " + std::to_string(n_cols) + ")");
        }
        if (i > b && c <= static_cast<std::int64_t>(ci[i - 1])) {
          if (order == ColumnOrder::require_sorted) {
            if (c == static_cast<std::int64_t>(ci[i - 1])) {
              fail(fn + ": " + row_name(r) + " repeats column " + std::to_string(c) + " (col_idx[" +
                   std::to_string(i - 1) + "] and col_idx[" + std::to_string(i) +
                   "]); ColumnOrder::require_sorted refuses repeats (sort_and_sum would add "
                   "them)");
            }
            fail(fn + ": " + row_name(r) + " is not sorted: col_idx[" + std::to_string(i) +
                 "] = " + std::to_string(c) + " follows " + std::to_string(ci[i - 1]) +
                 "; ColumnOrder::require_sorted needs strictly increasing columns "
                 "(sort_and_sum would sort them)");
          }
          sorted = false;
        }
      }
      if (sorted) {
        for (std::int64_t i = b; i < e; ++i) {
          m.col_idx.push_back(static_cast<gidx_t>(ci[i]));
          m.values.push_back(static_cast<double>(val[i]));
        }
      } else {
        // Sorted by column, repeats summed in the order given (a stable sort keeps it).
        order_of.resize(static_cast<std::size_t>(e - b));
        std::iota(order_of.begin(), order_of.end(), b);
        std::stable_sort(order_of.begin(), order_of.end(),
                         [&](std::int64_t x, std::int64_t y) { return ci[x] < ci[y]; });
        using V = std::remove_cv_t<std::remove_pointer_t<decltype(val)>>;
        for (std::size_t j = 0; j < order_of.size();) {
          const std::int64_t c = ci[order_of[j]];
          V sum = val[order_of[j]];  // in the input's precision
          std::size_t t = j + 1;
          for (; t < order_of.size() && ci[order_of[t]] == c; ++t) sum += val[order_of[t]];
          m.col_idx.push_back(static_cast<gidx_t>(c));
          m.values.push_back(static_cast<double>(sum));
          j = t;
        }
      }
      m.row_ptr[static_cast<std::size_t>(r - first) + 1] =
          static_cast<std::int64_t>(m.col_idx.size());
    }
  });
  return m;
}

RowPartition column_partition(const CsrImportOptions& options, const RowPartition& rows,
                              gidx_t n_cols, int nranks) {
  if (!options.col_offsets.empty()) return RowPartition::from_offsets(options.col_offsets);
  if (rows.n_rows() == n_cols) return rows;
  return RowPartition::equal_blocks(n_cols, nranks);
}

// Agreed on by every rank: the column offsets' size (stage 1) and values (stage 3).
void add_col_offsets(std::vector<Agreed>& v, const CsrImportOptions& options) {
  for (std::size_t i = 0; i < options.col_offsets.size(); ++i) {
    v.push_back({"col_offsets[" + std::to_string(i) + "]", options.col_offsets[i]});
  }
}

const char* const kSameMatrixHint = "; every rank must pass the same whole matrix";

}  // namespace

DistMatrix from_global_csr(MPI_Comm comm, gidx_t n_rows, gidx_t n_cols, const CsrArrays& whole,
                           const CsrImportOptions& options) {
  const std::string fn = "from_global_csr";
  const int nranks = dist::comm_size(comm);
  const int rank = dist::comm_rank(comm);
  // 1. The shape, alike on every rank (decided by the same reduction everywhere).
  require_agreement(
      comm, fn.c_str(),
      {{"n_rows", n_rows},
       {"n_cols", n_cols},
       {"the number of entries (col_idx size)", static_cast<std::int64_t>(whole.col_idx_size())},
       {"the number of col_offsets", static_cast<std::int64_t>(options.col_offsets.size())}},
      kSameMatrixHint);
  // 2. The arrays' structure and the options.
  checked_on_every_rank(comm, [&] {
    if (n_rows < 0 || n_cols < 0) {
      fail(fn + ": the shape " + std::to_string(n_rows) + " x " + std::to_string(n_cols) +
           " is negative");
    }
    check_structure(fn, whole, n_rows);
    if (!options.col_offsets.empty()) {
      check_offsets(fn, "col_offsets", options.col_offsets, nranks, n_cols, "n_cols");
    }
  });
  std::vector<Agreed> content;
  add_col_offsets(content, options);
  if (!content.empty()) require_agreement(comm, fn.c_str(), content, "");
  // 3. The partition: the same computation on every rank.
  RowPartition rows = RowPartition::equal_blocks(n_rows, nranks);
  if (options.partition == PartitionKind::balanced_nnz) {
    std::vector<std::int64_t> row_ptr(static_cast<std::size_t>(n_rows) + 1);
    with_arrays(whole, [&](const auto* rp, const auto*, const auto*) {
      std::copy(rp, rp + n_rows + 1, row_ptr.begin());
    });
    rows = RowPartition::balanced_by_nnz(row_ptr, nranks);
  }
  RowPartition cols = column_partition(options, rows, n_cols, nranks);
  // 4. This rank's rows, checked (the lowest rank with a bad row reports the first one).
  CsrMatrix local;
  checked_on_every_rank(comm, [&] {
    local =
        assemble_rows(fn, whole, rows.begin(rank), rows.size(rank), rows.begin(rank), n_rows,
                      n_cols, options.columns, [](gidx_t r) { return "row " + std::to_string(r); });
  });
  return DistMatrix(comm, std::move(local), std::move(rows), std::move(cols), options.name);
}

namespace {

DistMatrix from_local_impl(MPI_Comm comm, const std::vector<gidx_t>* given_offsets, gidx_t n_cols,
                           const CsrArrays& local_rows, const CsrImportOptions& options) {
  const std::string fn = "from_local_csr";
  const int nranks = dist::comm_size(comm);
  const int rank = dist::comm_rank(comm);
  const std::string on_rank = fn + " (rank " + std::to_string(rank) + ")";
  // An empty row_ptr is a block without rows.
  const gidx_t n_local =
      local_rows.row_ptr_size() == 0 ? 0 : static_cast<gidx_t>(local_rows.row_ptr_size()) - 1;
  // 1. Sizes alike on every rank.
  std::vector<Agreed> sizes = {
      {"n_cols", n_cols},
      {"the number of col_offsets", static_cast<std::int64_t>(options.col_offsets.size())}};
  if (given_offsets != nullptr) {
    sizes.push_back(
        {"the number of row_offsets", static_cast<std::int64_t>(given_offsets->size())});
  }
  require_agreement(comm, fn.c_str(), sizes, "");
  // 2. This rank's arrays and the options.
  checked_on_every_rank(comm, [&] {
    if (n_cols < 0) fail(fn + ": n_cols is " + std::to_string(n_cols) + ", it must be >= 0");
    if (local_rows.row_ptr_size() == 0) {
      if (local_rows.col_idx_size() != 0 || local_rows.values_size() != 0) {
        fail(on_rank + ": row_ptr is empty but col_idx / values are not");
      }
    } else {
      check_structure(on_rank, local_rows, n_local);
    }
    if (given_offsets != nullptr) {
      check_offsets(fn, "row_offsets", *given_offsets, nranks, -1, "");
    }
    if (!options.col_offsets.empty()) {
      check_offsets(fn, "col_offsets", options.col_offsets, nranks, n_cols, "n_cols");
    }
  });
  // 3. The row offsets: given (and alike everywhere), or from every rank's row count.
  std::vector<gidx_t> offsets;
  if (given_offsets != nullptr) {
    offsets = *given_offsets;
  } else {
    std::vector<gidx_t> counts(static_cast<std::size_t>(nranks));
    check_mpi(MPI_Allgather(&n_local, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, comm),
              "MPI_Allgather");
    offsets.assign(static_cast<std::size_t>(nranks) + 1, 0);
    for (int p = 0; p < nranks; ++p) offsets[p + 1] = offsets[p] + counts[p];
  }
  std::vector<Agreed> content;
  if (given_offsets != nullptr) {
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      content.push_back({"row_offsets[" + std::to_string(i) + "]", offsets[i]});
    }
  }
  add_col_offsets(content, options);
  if (!content.empty()) require_agreement(comm, fn.c_str(), content, "");
  RowPartition rows = RowPartition::from_offsets(std::move(offsets));
  const gidx_t n_rows = rows.n_rows();
  RowPartition cols = column_partition(options, rows, n_cols, nranks);
  // 4. The block matches the offsets; its entries are valid.
  CsrMatrix local;
  checked_on_every_rank(comm, [&] {
    if (n_local != rows.size(rank)) {
      fail(on_rank + ": local_rows has " + std::to_string(n_local) +
           " rows, row_offsets give this rank " + std::to_string(rows.size(rank)) + " (rows [" +
           std::to_string(rows.begin(rank)) + ", " + std::to_string(rows.end(rank)) + "))");
    }
    if (n_local == 0) {
      local.n_rows_global = n_rows;
      local.n_cols = n_cols;
      local.row_begin = rows.begin(rank);
      local.row_ptr.assign(1, 0);
      return;
    }
    const gidx_t row_begin = rows.begin(rank);
    local = assemble_rows(
        fn, local_rows, 0, n_local, row_begin, n_rows, n_cols, options.columns, [&](gidx_t r) {
          return "rank " + std::to_string(rank) + ", local row " + std::to_string(r) +
                 " (global row " + std::to_string(row_begin + r) + ")";
        });
  });
  return DistMatrix(comm, std::move(local), std::move(rows), std::move(cols), options.name);
}

}  // namespace

DistMatrix from_local_csr(MPI_Comm comm, std::span<const gidx_t> row_offsets, gidx_t n_cols,
                          const CsrArrays& local_rows, const CsrImportOptions& options) {
  const std::vector<gidx_t> offsets(row_offsets.begin(), row_offsets.end());
  return from_local_impl(comm, &offsets, n_cols, local_rows, options);
}

DistMatrix from_local_csr(MPI_Comm comm, gidx_t n_cols, const CsrArrays& local_rows,
                          const CsrImportOptions& options) {
  return from_local_impl(comm, nullptr, n_cols, local_rows, options);
}

// ---- dense operands ---------------------------------------------------------------------------

namespace {

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
