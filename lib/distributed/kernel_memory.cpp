// A DistKernel's memory check before anything is built (kernel_memory.hpp).
#include "distributed/kernel_memory.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "support/memory.hpp"

namespace netsparse {
namespace {

// The operand rows this rank will hold besides its own block, at least: the whole operand for
// the modes that replicate it (su, ideal), else the distinct columns of its rows outside its
// block (every other mode keeps those rows, as ghosts, windows or a compact buffer). A cheap
// upper bound first; the exact count (a sorted copy of the remote columns) only when the bound
// is large enough to matter.
std::uint64_t operand_rows_held(const DistMatrix& a, CommMode mode, std::uint64_t row_bytes,
                                std::uint64_t available) {
  const CsrMatrix& m = a.local();
  const auto n_cols = static_cast<std::uint64_t>(m.n_cols);
  if (mode == CommMode::su || mode == CommMode::ideal) return n_cols;
  const gidx_t own_begin = a.cols().begin(a.rank()), own_end = a.cols().end(a.rank());
  const auto remote = [&](gidx_t c) { return c < own_begin || c >= own_end; };
  const auto remote_nnz =
      static_cast<std::uint64_t>(std::count_if(m.col_idx.begin(), m.col_idx.end(), remote));
  const std::uint64_t bound =
      std::min(remote_nnz, n_cols - static_cast<std::uint64_t>(own_end - own_begin));
  if (row_bytes == 0 || bound <= available / row_bytes) return bound;
  std::vector<gidx_t> columns;
  columns.reserve(remote_nnz);
  std::copy_if(m.col_idx.begin(), m.col_idx.end(), std::back_inserter(columns), remote);
  std::sort(columns.begin(), columns.end());
  return static_cast<std::uint64_t>(std::unique(columns.begin(), columns.end()) - columns.begin());
}

}  // namespace

// Refuses (support::OutOfMemory, naming the size) a kernel whose operand rows cannot fit in the
// memory available: checked before the engine, the pattern or any buffer is built.
void check_operand_memory(const DistMatrix& a, int k, const DistOptions& o) {
  if (k < 1) return;  // refused after the agreement
  const std::uint64_t element = o.scalar == ScalarType::f32 ? sizeof(float) : sizeof(double);
  const std::uint64_t row_bytes = element * static_cast<std::uint64_t>(k);
  const support::MemoryLimit limit = support::available_memory();
  const std::uint64_t rows = operand_rows_held(a, o.mode, row_bytes, limit.bytes);
  // Saturating: an absurd K times many rows must not wrap to a small number.
  const std::uint64_t need =
      rows != 0 && row_bytes > UINT64_MAX / rows ? UINT64_MAX : rows * row_bytes;
  support::require_memory("DistKernel on rank " + std::to_string(a.rank()), need,
                          "the operand rows it holds besides its own (" + std::to_string(rows) +
                              " rows x K " + std::to_string(k) + " x " + std::to_string(element) +
                              " B, " +
                              (o.mode == CommMode::su || o.mode == CommMode::ideal
                                   ? std::string("the whole operand in mode ") + to_string(o.mode)
                                   : std::string("its rows' distinct remote columns")) +
                              ")");
}

}  // namespace netsparse
