// Sparse x sparse products (SpGEMM): C = A * B with both operands sparse, locally and over a
// 1D row partition (dist_matrix.hpp).
//
//   DistMatrix a = load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:14");
//   SpgemmOptions opt;  opt.mode = SpgemmMode::netsparse;
//   DistSpgemm product(a, a, opt);       // collective: B's remote rows' pattern, symbolic phase
//   DistMatrix c = product.multiply();   // collective: B's remote values, numeric phase
//
// A is an n x m matrix distributed by rows, B an m x k matrix distributed by rows with B.rows()
// the same partition as A.cols() (a square matrix times itself always qualifies). Row i of C
// needs row j of B for every nonzero (i, j) of A: the rows of B owned elsewhere are the
// variable-length properties each rank gathers. C is returned distributed like A (its rows()
// are A.rows(), its cols() B.cols()). C's pattern is the structural product: an entry whose
// products cancel to 0.0 is kept (stored as 0.0), so the pattern never depends on values.
//
// The product is split the classic way: the constructor gathers the pattern of the remote rows
// of B and computes C's pattern (symbolic phase), each multiply() gathers their values and
// computes C's values (numeric phase). A fixed pattern with changing values (update_values)
// repeats only the second half, which is what the RIG engine's gather plans replay.
//
// Communication modes (SpgemmMode):
//   netsparse           the RIG engine, in three fixed-size passes over the same engine: the
//                       needed rows' (first chunk, length) -- one 16-byte property per row of
//                       B -- then their column indices and (each multiply) their values, as
//                       chunks of `chunk` entries (the owner's rows cut into whole chunks, the
//                       last one of a row padded). Every pass is a POSITIONAL NS_WR_RIG of the
//                       distinct needed rows (the engine filters and coalesces repeats as
//                       usual); the value pass is a learned gather plan, replayed by every
//                       later multiply and, from the third on, pushed by the owners unasked
//                       (ns_plan_push, as DistKernel's netsparse). docs/architecture.md, "SpGEMM".
//   su                  every rank all-gathers the whole of B (MPI_Allgatherv: the pattern once,
//                       the values every multiply).
//   inspector-executor  the exact needed rows by MPI point-to-point: the setup sends each owner
//                       the list of its rows a rank needs and receives their lengths and columns;
//                       every multiply, each owner packs those rows' values and sends them.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "netsparse/csr.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/scalar.hpp"

namespace netsparse {

// ---- local SpGEMM ---------------------------------------------------------------------------

// Gustavson's row-by-row product with SPADE's row-panel tiling: rows are processed in panels of
// `row_panel` rows (one OpenMP task each). A panel's columns lie in a window: from the smallest
// to the largest column of the B rows it touches (a banded matrix's panel spans a few thousand
// columns). Each panel picks its symbolic accumulator from its estimated output width -- the
// widest row's upper bound (the sum of the lengths of the B rows it touches, at most B's column
// count) -- and that window:
//   dense: a stamp array over the window (O(1) per product): when the estimate is at least
//          n_cols / dense_divisor or the window takes at most 1 MiB of stamps;
//   hash:  otherwise (narrow rows spread over a wide matrix): an open-addressing table of twice
//          the estimate (rounded up to a power of two).
// The numeric phase adds the products into a value per column of the window (PETSc's dense
// axpy, the row then gathered in C's sorted order) when the panel is dense or its window takes at
// most 1 MiB of values, else walks C's sorted row alongside each B row (no table). Every path
// accumulates each output entry in the same order (A's row order, then B's, from zero), so all
// give bit-identical results.
enum class SpgemmAccumulator { automatic, dense, hash };
[[nodiscard]] const char* to_string(SpgemmAccumulator accumulator) noexcept;

struct LocalSpgemmOptions {
  int row_panel = 256;  // >= 1
  SpgemmAccumulator accumulator = SpgemmAccumulator::automatic;
  int dense_divisor = 16;  // >= 1; automatic: dense when the estimate >= n_cols / dense_divisor
};

// C = A * B on one process, in fp64: a's global column c names row c of b, so b must hold the
// whole of B (b.row_begin == 0, b.n_rows == b.n_rows_global == a.n_cols). C has a's rows
// (row_begin, n_rows, n_rows_global) and b.n_cols columns, sorted unique columns per row.
// Throws std::invalid_argument when the shapes do not fit or the options are out of range.
[[nodiscard]] CsrMatrix local_spgemm(const CsrMatrix& a, const CsrMatrix& b,
                                     const LocalSpgemmOptions& options = {});

// ---- distributed SpGEMM ---------------------------------------------------------------------

enum class SpgemmMode { netsparse, su, inspector_executor };
[[nodiscard]] const char* to_string(SpgemmMode mode) noexcept;  // "netsparse", "su", ...
// Throws std::invalid_argument naming the accepted names.
[[nodiscard]] SpgemmMode parse_spgemm_mode(std::string_view name);

struct SpgemmOptions {
  SpgemmMode mode = SpgemmMode::netsparse;
  // Precision of the numeric phase and of the values moved (the returned C holds them in
  // double, as every CsrMatrix does).
  ScalarType scalar = ScalarType::f64;
  LocalSpgemmOptions local{};
  // netsparse: entries per chunk of a B row (a power of two); 0 = automatic: the largest power
  // of two not above B's average row length (at least 1, at most 256 and what one engine
  // message carries). Must be the same on every rank.
  int chunk = 0;
  // netsparse: idxs per RIG work request.
  std::uint64_t batch = 8192;
  // netsparse: the value pass is a gather plan (recorded by the first multiply, replayed by
  // the later ones); false: a plain RIG gather every multiply.
  bool plans = true;
  // netsparse: the engine opened when none is passed to DistSpgemm.
  EngineOptions engine{};
};

// Per-rank statistics of a DistSpgemm.
struct SpgemmStats {
  double setup_seconds = 0;             // the constructor (pattern gather + symbolic), this rank
  double symbolic_seconds = 0;          // the symbolic phase alone
  double gather_seconds = 0;            // last multiply: getting the remote values
  double numeric_seconds = 0;           // last multiply: the numeric phase
  std::uint64_t remote_rows = 0;        // rows of B this rank uses but does not own
  std::uint64_t remote_nonzeros = 0;    // their nonzeros
  std::uint64_t setup_bytes_in = 0;     // bytes the setup received (pattern), this rank
  std::uint64_t multiply_bytes_in = 0;  // bytes the last multiply received (values, padding)
  int chunk = 0;                        // netsparse: entries per chunk (0 in other modes)
};

class DistSpgemm {
 public:
  // Collective. a.cols() must be the same partition as b.rows() and both on the same
  // communicator (else std::invalid_argument on every rank). Both matrices' local blocks are
  // copied: a and b need not outlive this object, but their communicator must. `engine`
  // (netsparse) may be null: one is opened from options.engine.
  DistSpgemm(const DistMatrix& a, const DistMatrix& b, const SpgemmOptions& options,
             std::shared_ptr<RigEngine> engine = {});
  ~DistSpgemm();
  DistSpgemm(DistSpgemm&&) noexcept;
  DistSpgemm& operator=(DistSpgemm&&) noexcept;

  // C = A * B with the current values. Collective.
  [[nodiscard]] DistMatrix multiply();
  // C's values alone, on the pattern fixed by the setup (the repeated product without building a
  // DistMatrix): this rank's local_nnz() values, in the CSR order of multiply()'s C.local().
  // Collective; a wrong length is refused with std::invalid_argument on every rank.
  void multiply_values(std::span<double> c_values);
  // New values for the same patterns: this rank's a.local().values and b.local().values
  // (nnz entries each). Local; std::invalid_argument on a wrong length (checked on every rank
  // by the next multiply: a rank that refused makes every rank throw there).
  void update_values(std::span<const double> a_values, std::span<const double> b_values);

  [[nodiscard]] const SpgemmStats& stats() const noexcept;
  // C's nonzeros on this rank (known after the setup).
  [[nodiscard]] std::int64_t local_nnz() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One C = A * B (a DistSpgemm built and multiplied once). Collective.
[[nodiscard]] DistMatrix spgemm(const DistMatrix& a, const DistMatrix& b,
                                const SpgemmOptions& options = {});

}  // namespace netsparse
