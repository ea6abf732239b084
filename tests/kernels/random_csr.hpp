// Test helper: random CSR row blocks with controllable holes (empty rows, empty column bands)
// and random dense operands. Deterministic for a given seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/tiled.hpp"

namespace netsparse::test {

struct RandomCsrSpec {
  gidx_t n_rows = 100;
  gidx_t n_cols = 100;
  gidx_t row_begin = 0;
  gidx_t n_rows_global = -1;  // -1: row_begin + n_rows
  int max_row_nnz = 12;       // row lengths uniform in [1, max_row_nnz] (capped by columns)
  double empty_row_fraction = 0.1;
  IndexRange empty_rows{};  // local rows forced empty (e.g. a whole row panel)
  IndexRange empty_cols{};  // global columns never used (e.g. whole column panels)
  std::uint64_t seed = 1;
};

inline CsrMatrix random_csr(const RandomCsrSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  CsrMatrix m;
  m.n_rows = spec.n_rows;
  m.n_cols = spec.n_cols;
  m.row_begin = spec.row_begin;
  m.n_rows_global = spec.n_rows_global < 0 ? spec.row_begin + spec.n_rows : spec.n_rows_global;
  m.row_ptr.assign(1, 0);
  std::vector<gidx_t> usable;
  for (gidx_t c = 0; c < spec.n_cols; ++c)
    if (c < spec.empty_cols.begin || c >= spec.empty_cols.end) usable.push_back(c);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_real_distribution<float> value(0.25f, 1.0f);
  std::vector<gidx_t> row;
  for (gidx_t r = 0; r < spec.n_rows; ++r) {
    const bool forced_empty = r >= spec.empty_rows.begin && r < spec.empty_rows.end;
    if (!forced_empty && !usable.empty() && unit(rng) >= spec.empty_row_fraction) {
      const auto cap = static_cast<gidx_t>(std::min<std::size_t>(spec.max_row_nnz, usable.size()));
      const gidx_t len = std::uniform_int_distribution<gidx_t>(1, cap)(rng);
      row.clear();
      std::sample(usable.begin(), usable.end(), std::back_inserter(row), len, rng);
      std::sort(row.begin(), row.end());
      for (const gidx_t c : row) {
        m.col_idx.push_back(c);
        // Both signs, bounded away from zero so no product vanishes by accident.
        m.values.push_back(unit(rng) < 0.5 ? -value(rng) : value(rng));
      }
    }
    m.row_ptr.push_back(std::ssize(m.col_idx));
  }
  return m;
}

inline std::vector<float> random_dense(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace netsparse::test
