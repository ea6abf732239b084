// Helpers of the distributed tests: deterministic operands, single-process reference kernels in
// double precision, and the comparison of one rank's block against the reference.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "csr_blocks.hpp"
#include "csr_checks.hpp"
#include "mpi_test_util.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse::test {

inline std::string data_path(const std::string& rel) {
  return std::string(NETSPARSE_TEST_DATA_DIR) + "/" + rel;
}

// Result tolerances against the double-precision references.
inline constexpr double kTolerance = 2e-5;  // fp32 sums of a few hundred terms
// fp64 (DistOptions::scalar): the fixtures' Matrix Market values carry digits float cannot hold
// and every sum rounds, so a path that went through float anywhere misses this by far.
inline constexpr double kF64Tolerance = 1e-12;

// A matrix both distributed (under test) and whole (for the reference).
struct Fixture {
  std::string name;
  DistMatrix dm;
  CsrMatrix whole;
};

inline Fixture make_fixture(const std::string& spec) {
  Fixture f;
  f.name = spec;
  f.dm = load_distributed_matrix(MPI_COMM_WORLD, spec);
  // The whole matrix, built by one rank alone (the loaders are tested against the serial
  // readers and generators in test_dist_matrix).
  f.whole = load_distributed_matrix(MPI_COMM_SELF, spec).local();
  return f;
}

// The matrices every distributed kernel is tested on: a Kronecker graph, a stencil, a road
// grid, a symmetric and a rectangular Matrix Market file.
inline std::vector<std::string> fixture_specs() {
  return {"gen:kron:8", "gen:stencil:6:5:4:2", "gen:road:17:13:0.05",
          data_path("distributed/small_symmetric.mtx"), data_path("distributed/rect_general.mtx")};
}

// Value of element (global row, j) of dense operand `which`: in [-1, 1), not a simple pattern.
inline float operand_value(int which, gidx_t row, int j) {
  std::uint64_t z = static_cast<std::uint64_t>(row) * 0x9e3779b97f4a7c15ULL +
                    static_cast<std::uint64_t>(j) * 0xc2b2ae3d27d4eb4fULL +
                    static_cast<std::uint64_t>(which) * 0x165667b19e3779f9ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) / double(1 << 23) - 1.0);
}

// Rows [begin, end) of an operand with k columns.
inline std::vector<float> operand_block(int which, gidx_t begin, gidx_t end, int k) {
  std::vector<float> v(static_cast<std::size_t>(end - begin) * k);
  for (gidx_t r = begin; r < end; ++r) {
    for (int j = 0; j < k; ++j) v[(r - begin) * k + j] = operand_value(which, r, j);
  }
  return v;
}

// C = A * B for the rows of `a` (a row block with global columns), B(c, j) = operand_value(1..).
inline std::vector<double> reference_spmm(const CsrMatrix& a, int k, int which_b) {
  std::vector<double> c(static_cast<std::size_t>(a.n_rows) * k, 0.0);
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
      for (int j = 0; j < k; ++j) {
        c[r * k + j] += double(a.values[i]) * operand_value(which_b, a.col_idx[i], j);
      }
    }
  }
  return c;
}

// out_i = a_i * dot(X[row_i], Y[col_i]), X rows are global rows of `a`.
inline std::vector<double> reference_sddmm(const CsrMatrix& a, int k, int which_x, int which_y) {
  std::vector<double> out(static_cast<std::size_t>(a.nnz()), 0.0);
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
      double dot = 0;
      for (int j = 0; j < k; ++j) {
        dot += double(operand_value(which_x, a.row_begin + r, j)) *
               operand_value(which_y, a.col_idx[i], j);
      }
      out[i] = double(a.values[i]) * dot;
    }
  }
  return out;
}

// max |got - want| / max(max |want|, 1e-30): normwise relative error.
// One run of `kern` on operand `which` (SpMM, SpMV or SDDMM as the kernel is): its output.
inline std::vector<float> run_kernel_once(DistKernel& kern, const DistMatrix& dm,
                                          const CsrMatrix& rows, int which) {
  const int r = world_rank();
  const int k = kern.k();
  const std::vector<float> b = operand_block(which, dm.cols().begin(r), dm.cols().end(r), k);
  const gidx_t n_rows = dm.rows().size(r);
  if (kern.kernel() == KernelKind::sddmm) {
    const std::vector<float> x = operand_block(which + 1, dm.rows().begin(r), dm.rows().end(r), k);
    std::vector<float> out(static_cast<std::size_t>(rows.nnz()), -7.0f);
    kern.sddmm(x, b, out);
    return out;
  }
  std::vector<float> c(static_cast<std::size_t>(n_rows) * k, -7.0f);
  if (kern.kernel() == KernelKind::spmm) kern.spmm(b, c);
  if (kern.kernel() == KernelKind::spmv) kern.spmv(b, c);
  return c;
}

inline std::vector<double> kernel_reference(const DistKernel& kern, const CsrMatrix& rows,
                                            int which) {
  return kern.kernel() == KernelKind::sddmm ? reference_sddmm(rows, kern.k(), which + 1, which)
                                            : reference_spmm(rows, kern.k(), which);
}

template <class T>
double max_relative_error(const std::vector<T>& got, const std::vector<double>& want) {
  double scale = 0, err = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  const std::size_t n = std::min(got.size(), want.size());
  for (std::size_t i = 0; i < n; ++i) err = std::max(err, std::abs(double(got[i]) - want[i]));
  if (got.size() != want.size()) return INFINITY;
  return err / std::max(scale, 1e-30);
}

// What f threw: a std::invalid_argument's message, "(wrong exception type) <what>" for any other
// exception, "(no exception)" when it returned.
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(wrong exception type) ") + e.what();
  }
  return "(no exception)";
}

// True on every rank if `ok` is true on every rank (for decisions that must agree).
inline bool all_ranks(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v != 0;
}

// One RIG engine for all the tests of a binary (each engine's setup is collective and costs a
// round of agreements); a binary that needs it closed before MPI_Finalize resets it.
inline std::shared_ptr<RigEngine>& shared_engine() {
  static std::shared_ptr<RigEngine> engine =
      std::make_shared<RigEngine>(MPI_COMM_WORLD, EngineOptions{});
  return engine;
}

}  // namespace netsparse::test
