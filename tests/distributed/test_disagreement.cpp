// Ranks that disagree on a collective entry's arguments (issue 37): one rank (the last) passes
// another kernel, K, dtype, mode, operand shape, matrix specification, partition or shape. Every
// rank must throw std::invalid_argument naming the argument, nothing computed, and an agreed call
// right after must still work -- in every communication mode, within one launch.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse::test {
namespace {

constexpr int kK = 4;

// The rank that differs: the last, so rank 0's value is the one the message quotes first.
bool is_odd_rank() {
  return world_rank() == world_size() - 1;
}

const Fixture& kron() {
  static const Fixture f = make_fixture("gen:kron:7");
  return f;
}

DistOptions options_for(CommMode mode) {
  DistOptions o;
  o.mode = mode;
  return o;
}

std::shared_ptr<RigEngine> engine_for(CommMode mode) {
  return uses_rig_engine(mode) ? shared_engine() : nullptr;
}

// `message` (this rank's invalid_argument, see invalid_argument_message) names `argument`, and so
// does every other rank's.
void expect_refused_everywhere(const std::string& message, const std::string& argument,
                               const std::string& where) {
  const bool named = message.find(argument) != std::string::npos &&
                     message.find("(no exception)") == std::string::npos &&
                     message.find("(wrong exception type)") == std::string::npos;
  EXPECT_TRUE(named) << where << ": rank " << world_rank() << " got: " << message;
  EXPECT_TRUE(all_ranks(named)) << where << ": not every rank refused naming " << argument;
}

// One spmm run of `kern` (the ideal mode replicates the operand first).
template <class T>
void run_spmm(DistKernel& kern, CommMode mode, const std::vector<T>& b, std::vector<T>& c) {
  if (mode == CommMode::ideal) kern.replicate(b);
  kern.spmm(b, c);
}

// An agreed spmm on `kern` computes the reference product.
void expect_agreed_run_works(DistKernel& kern, CommMode mode, const std::string& where) {
  const Fixture& f = kron();
  const int r = world_rank();
  const std::vector<float> b = operand_block(1, f.dm.cols().begin(r), f.dm.cols().end(r), kK);
  std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(r)) * kK, -7.0f);
  run_spmm(kern, mode, b, c);
  EXPECT_LE(max_relative_error(c, reference_spmm(f.dm.local(), kK, 1)), kTolerance) << where;
}

TEST(Disagreement, KernelArgumentsInEveryMode) {
  const Fixture& f = kron();
  const std::span<const CommMode> modes = all_comm_modes();
  for (std::size_t m = 0; m < modes.size(); ++m) {
    const CommMode mode = modes[m];
    const std::string where = to_string(mode);
    const DistOptions agreed = options_for(mode);
    const auto construct = [&](KernelKind kind, int k, const DistOptions& o) {
      return invalid_argument_message([&] { DistKernel kern(f.dm, kind, k, o, engine_for(mode)); });
    };
    // The kernel kind.
    expect_refused_everywhere(
        construct(is_odd_rank() ? KernelKind::sddmm : KernelKind::spmm, kK, agreed),
        "the ranks disagree on the kernel: rank 0 has SpMM", where + " kind");
    // K.
    expect_refused_everywhere(construct(KernelKind::spmm, is_odd_rank() ? 2 * kK : kK, agreed),
                              "the ranks disagree on K: rank 0 has 4", where + " K");
    // The dtype.
    DistOptions f64 = agreed;
    if (is_odd_rank()) f64.scalar = ScalarType::f64;
    expect_refused_everywhere(construct(KernelKind::spmm, kK, f64),
                              "the ranks disagree on the dtype: rank 0 has f32", where + " dtype");
    // The mode (the next one in the list on the odd rank).
    DistOptions other_mode = agreed;
    if (is_odd_rank()) other_mode.mode = modes[(m + 1) % modes.size()];
    expect_refused_everywhere(construct(KernelKind::spmm, kK, other_mode),
                              "the ranks disagree on the mode", where + " mode");
    // An option.
    DistOptions other_batch = agreed;
    if (is_odd_rank()) other_batch.batch = agreed.batch + 1;
    expect_refused_everywhere(construct(KernelKind::spmm, kK, other_batch),
                              "the ranks disagree on DistOptions::batch", where + " batch");

    // Agreed, the kernel is built; then runs whose operands differ on one rank.
    DistKernel kern(f.dm, KernelKind::spmm, kK, agreed, engine_for(mode));
    const int r = world_rank();
    const int k_mine = is_odd_rank() ? 2 * kK : kK;
    {
      const std::vector<float> b(static_cast<std::size_t>(f.dm.cols().size(r)) * k_mine, 1.0f);
      std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(r)) * k_mine);
      const std::string named = mode == CommMode::ideal ? "'s operand has" : "'s B has";
      expect_refused_everywhere(invalid_argument_message([&] { run_spmm(kern, mode, b, c); }),
                                "rank " + std::to_string(world_size() - 1) + named,
                                where + " operand shape");
    }
    if (is_odd_rank()) {
      const std::vector<double> b(static_cast<std::size_t>(f.dm.cols().size(r)) * kK, 1.0);
      std::vector<double> c(static_cast<std::size_t>(f.dm.rows().size(r)) * kK);
      expect_refused_everywhere(invalid_argument_message([&] { run_spmm(kern, mode, b, c); }),
                                "the operands are f64", where + " operand dtype");
    } else {
      const std::vector<float> b(static_cast<std::size_t>(f.dm.cols().size(r)) * kK, 1.0f);
      std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(r)) * kK);
      expect_refused_everywhere(invalid_argument_message([&] { run_spmm(kern, mode, b, c); }),
                                "the operands are f64", where + " operand dtype");
    }
    // The refusals computed nothing and left the kernel usable: an agreed run is right.
    expect_agreed_run_works(kern, mode, where + " after the refusals");
  }
}

TEST(Disagreement, TransposedSpmmKAndMethod) {
  const Fixture& f = kron();
  const DistOptions su = options_for(CommMode::su);
  expect_refused_everywhere(
      invalid_argument_message(
          [&] { TransposedSpmm t(f.dm, is_odd_rank() ? 2 * kK : kK, su, TransposedMethod::push); }),
      "TransposedSpmm: the ranks disagree on K: rank 0 has 4", "K");
  expect_refused_everywhere(
      invalid_argument_message([&] {
        TransposedSpmm t(f.dm, kK, su,
                         is_odd_rank() ? TransposedMethod::via_transpose : TransposedMethod::push);
      }),
      "TransposedSpmm: the ranks disagree on the method: rank 0 has push", "method");
}

TEST(Disagreement, MatrixSpecificationAndPartition) {
  const std::string odd = is_odd_rank() ? "gen:kron:8" : "gen:kron:7";
  expect_refused_everywhere(
      invalid_argument_message([&] { (void)load_distributed_matrix(MPI_COMM_WORLD, odd); }),
      "the ranks disagree on the matrix specification: rank 0 has "
      "gen:kron:7",
      "specification");
  const PartitionKind partition =
      is_odd_rank() ? PartitionKind::balanced_nnz : PartitionKind::equal_rows;
  expect_refused_everywhere(
      invalid_argument_message(
          [&] { (void)load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:7", partition); }),
      "the ranks disagree on the partition: rank 0 has equal-rows", "partition");
  expect_refused_everywhere(
      invalid_argument_message([&] {
        (void)read_distributed_matrix_market(
            MPI_COMM_WORLD, data_path("distributed/small_symmetric.mtx"), partition);
      }),
      "read_distributed_matrix_market: the ranks disagree on the partition", "file partition");
  KroneckerParams params;
  params.scale = 7;
  if (is_odd_rank()) params.seed = 2;
  expect_refused_everywhere(
      invalid_argument_message([&] { (void)generate_distributed(MPI_COMM_WORLD, params); }),
      "generate_distributed: the ranks disagree on the generator", "generator parameters");
  // Agreed, loading still works and is the matrix asked for.
  const DistMatrix a = load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:7");
  EXPECT_EQ(a.n_rows(), 128);
}

// A DistMatrix built from parts: an empty block of an n x n matrix with `rows` on this rank.
DistMatrix empty_matrix(gidx_t n, const RowPartition& rows) {
  const int r = world_rank();
  CsrMatrix local;
  local.n_rows_global = n;
  local.n_cols = n;
  local.row_begin = rows.begin(r);
  local.n_rows = rows.size(r);
  local.row_ptr.assign(static_cast<std::size_t>(local.n_rows) + 1, 0);
  return DistMatrix(MPI_COMM_WORLD, std::move(local), rows,
                    RowPartition::equal_blocks(n, world_size()), "empty");
}

TEST(Disagreement, DistMatrixShapeAndPartition) {
  const int p = world_size();
  const gidx_t n = is_odd_rank() ? 13 : 12;
  expect_refused_everywhere(
      invalid_argument_message([&] { (void)empty_matrix(n, RowPartition::equal_blocks(n, p)); }),
      "DistMatrix: the ranks disagree on the shape: rank 0 has 12 x 12", "shape");
  // Same shape, the odd rank moves a boundary (each rank's block still matches its partition).
  std::vector<gidx_t> offsets = RowPartition::equal_blocks(12, p).offsets();
  if (is_odd_rank()) offsets[1] += 1;
  expect_refused_everywhere(invalid_argument_message([&] {
                              (void)empty_matrix(12, RowPartition::from_offsets(offsets));
                            }),
                            "DistMatrix: the ranks disagree on the row partition", "partition");
  const DistMatrix agreed = empty_matrix(12, RowPartition::equal_blocks(12, p));
  EXPECT_EQ(agreed.nnz_global(), 0);
}

}  // namespace
}  // namespace netsparse::test
