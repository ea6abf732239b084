// Bringing your own data (interop.hpp): DistMatrix from CSR arrays (dense scatter / gather:
// dense_interop.cpp).
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

}  // namespace netsparse
