// Neighbour sampling of a block of rows (sample_rows), as GNN training samples.
#include "netsparse/dist_matrix.hpp"

#include <omp.h>
#include <unistd.h>
#include <array>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "netsparse/coo.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "sparse/csr_part.hpp"
#include "support/enum_names.hpp"
#include "support/hash.hpp"

namespace netsparse {

namespace {

using support::mix64;

// A hash of (seed, row, column) with full avalanche in each argument.
inline std::uint64_t sample_hash(std::uint64_t seed, gidx_t row, gidx_t col) noexcept {
  std::uint64_t h = mix64(seed + support::kGoldenGamma);
  h = mix64(h ^ (static_cast<std::uint64_t>(row) * 0xd1b54a32d192ed03ULL));
  return mix64(h ^ (static_cast<std::uint64_t>(col) * 0x8cb92ba72f3d8dd7ULL));
}

}  // namespace

CsrMatrix sample_rows(const CsrMatrix& rows, const SamplingParams& params, std::uint64_t seed) {
  if (!(params.keep_fraction >= 0.0 && params.keep_fraction <= 1.0)) {
    throw std::invalid_argument("sample_rows: keep_fraction must be in [0, 1], got " +
                                std::to_string(params.keep_fraction));
  }
  if (params.max_per_row < 0) {
    throw std::invalid_argument("sample_rows: max_per_row must be >= 0");
  }
  // A nonzero is kept when its hash is below the threshold (exactly all for fraction 1).
  const bool keep_all = params.keep_fraction >= 1.0;
  // (2^64 itself does not convert: fraction 1 is keep_all and never compares.)
  const auto threshold =
      keep_all
          ? std::numeric_limits<std::uint64_t>::max()
          : static_cast<std::uint64_t>(params.keep_fraction * 18446744073709551616.0 /* 2^64 */);
  const auto cap = static_cast<std::size_t>(params.max_per_row);

  CsrMatrix out = csr_with_rows_of(rows);

  // Selects the kept positions of row r into `kept` (column order). With a cap, the kept
  // nonzeros with the smallest hashes survive; ties are impossible in practice and broken by
  // column.
  const auto select = [&](gidx_t r, std::vector<std::pair<std::uint64_t, std::int64_t>>& scratch,
                          std::vector<std::int64_t>& kept) {
    kept.clear();
    scratch.clear();
    const gidx_t grow = rows.row_begin + r;
    for (std::int64_t i = rows.row_ptr[r]; i < rows.row_ptr[r + 1]; ++i) {
      const std::uint64_t h = sample_hash(seed, grow, rows.col_idx[i]);
      if (keep_all || h < threshold) scratch.emplace_back(h, i);
    }
    if (cap > 0 && scratch.size() > cap) {
      std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(cap),
                       scratch.end());
      scratch.resize(cap);
    }
    for (const auto& [h, i] : scratch) kept.push_back(i);
    std::sort(kept.begin(), kept.end());
  };

  // Calls body(r, kept) for every row r with its kept positions, rows in parallel (the
  // selection is redone per pass: counting, then filling).
  const auto for_each_row = [&](const auto& body) {
#pragma omp parallel
    {
      std::vector<std::pair<std::uint64_t, std::int64_t>> scratch;
      std::vector<std::int64_t> kept;
#pragma omp for schedule(dynamic, 1024)
      for (gidx_t r = 0; r < rows.n_rows; ++r) {
        select(r, scratch, kept);
        body(r, kept);
      }
    }
  };

  for_each_row([&](gidx_t r, const std::vector<std::int64_t>& kept) {
    out.row_ptr[r + 1] = static_cast<std::int64_t>(kept.size());
  });
  for (gidx_t r = 0; r < rows.n_rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];
  out.col_idx.resize(static_cast<std::size_t>(out.row_ptr.back()));
  out.values.resize(static_cast<std::size_t>(out.row_ptr.back()));
  for_each_row([&](gidx_t r, const std::vector<std::int64_t>& kept) {
    std::int64_t o = out.row_ptr[r];
    for (std::int64_t i : kept) {
      out.col_idx[o] = rows.col_idx[i];
      out.values[o] = rows.values[i];
      ++o;
    }
  });
  return out;
}

}  // namespace netsparse
