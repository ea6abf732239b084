// A matrix on which task-packets' per-owner choice is known in advance (tests of the mode).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/dist_matrix.hpp"

namespace netsparse::test {

// P ranks x m rows, equal blocks, square. Every row has its diagonal. Besides:
//   even rank r: its first row reaches every column of rank (r+1)%P's block (1 row touched,
//                m distinct columns: sending the m nonzeros costs about 12 m B + 4K B, fetching
//                the rows 4 K m B, so task packets win from K = 4 on);
//   odd rank r:  every row reaches the first column of rank (r+1)%P's block (m rows touched,
//                1 distinct column: rows win);
//   every rank, P >= 3: every row reaches the first column of rank (r+2)%P's block (rows win).
// So at np 2 rank 0 sends task packets and rank 1 fetches rows, and from np 3 on rank 0 does both.
// Values: the even ranks' hub rows have values 1 on rank 0 (the Boolean packet format), others
// 0.25 + a row-dependent part; the rest 0.5.
inline CsrMatrix mixed_choice_block(int rank, int nranks, gidx_t m) {
  const gidx_t n = m * nranks;
  CsrMatrix a;
  a.n_rows_global = n;
  a.n_cols = n;
  a.row_begin = m * rank;
  a.n_rows = m;
  a.row_ptr.push_back(0);
  const gidx_t next = m * ((rank + 1) % nranks), after = m * ((rank + 2) % nranks);
  for (gidx_t i = 0; i < m; ++i) {
    const gidx_t row = a.row_begin + i;
    std::vector<std::pair<gidx_t, double>> entries{{row, 2.0}};
    if (nranks > 1) {
      if (rank % 2 == 0 && i == 0) {
        for (gidx_t c = 0; c < m; ++c) {
          entries.emplace_back(next + c, rank == 0 ? 1.0 : 0.25 + 0.001 * double(c % 7));
        }
      } else if (rank % 2 == 1) {
        entries.emplace_back(next, 0.5);
      }
      if (nranks >= 3) entries.emplace_back(after, 0.5);
    }
    std::sort(entries.begin(), entries.end());
    for (const auto& [c, v] : entries) {
      a.col_idx.push_back(c);
      a.values.push_back(v);
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col_idx.size()));
  }
  return a;
}

inline DistMatrix mixed_choice_matrix(MPI_Comm comm, gidx_t m) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  const RowPartition part = RowPartition::equal_blocks(m * nranks, nranks);
  return DistMatrix(comm, mixed_choice_block(rank, nranks, m), part, part, "mixed-choice");
}

// The same matrix whole (for the single-process reference).
inline CsrMatrix mixed_choice_whole(int nranks, gidx_t m) {
  CsrMatrix whole;
  whole.n_rows_global = m * nranks;
  whole.n_cols = m * nranks;
  whole.row_begin = 0;
  whole.n_rows = m * nranks;
  whole.row_ptr.push_back(0);
  for (int r = 0; r < nranks; ++r) {
    const CsrMatrix b = mixed_choice_block(r, nranks, m);
    for (gidx_t i = 0; i < b.n_rows; ++i) {
      whole.row_ptr.push_back(whole.row_ptr.back() + (b.row_ptr[i + 1] - b.row_ptr[i]));
    }
    whole.col_idx.insert(whole.col_idx.end(), b.col_idx.begin(), b.col_idx.end());
    whole.values.insert(whole.values.end(), b.values.begin(), b.values.end());
  }
  return whole;
}

}  // namespace netsparse::test
