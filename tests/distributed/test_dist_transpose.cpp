// The distributed transpose and C = A^T * B (dist_transpose.hpp): transpose() gives exactly the
// row blocks of the single-process transpose (square and rectangular fixtures, empty rows,
// ranks without rows); the transposed matrix works with every DistKernel mode and kernel; both
// ways of spmm_transposed match the double-precision reference in fp32 and fp64, on the original
// pattern and on sampled ones (set_pattern); bad input is refused on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "dist_transpose/local_transpose.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse {
namespace {

// The distributed tests' helpers (dist_test_util.hpp).
using namespace test;

// A wide rows x cols matrix (default 23 x 71) with empty rows and columns and irregular values
// (rectangular the other way from rect_general.mtx), built from its rows on every rank.
CsrMatrix wide_matrix(gidx_t rows = 23, gidx_t cols = 71) {
  CsrMatrix m;
  m.n_rows_global = m.n_rows = rows;
  m.n_cols = cols;
  m.row_ptr.push_back(0);
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    if (r % 5 != 3) {  // rows 3, 8, 13, 18 empty
      for (gidx_t c = (r * 7) % 11; c < m.n_cols; c += 3 + (r % 4)) {
        if (c % 10 == 9) continue;  // columns 9, 19, ... empty
        m.col_idx.push_back(c);
        m.values.push_back(0.1 + double((r * 131 + c * 17) % 97) / 97.0 - 0.5);
      }
    }
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col_idx.size()));
  }
  return m;
}

std::vector<Fixture>& fixtures() {
  static std::vector<Fixture> all = [] {
    std::vector<Fixture> v;
    // The fixtures of test_dist_kernels, and one more rectangular matrix.
    for (const std::string& spec : test::fixture_specs()) v.push_back(test::make_fixture(spec));
    // Rows and columns split differently: a wide matrix, and a 2 x 3 one that leaves ranks
    // without rows and without columns from 3 ranks on.
    for (const auto& [rows_n, cols_n] : {std::pair<gidx_t, gidx_t>{23, 71}, {2, 3}}) {
      Fixture w;
      w.name = "wide " + std::to_string(rows_n) + "x" + std::to_string(cols_n);
      w.whole = wide_matrix(rows_n, cols_n);
      const int p = test::world_size(), r = world_rank();
      RowPartition rows = RowPartition::equal_blocks(w.whole.n_rows, p);
      RowPartition cols = RowPartition::equal_blocks(w.whole.n_cols, p);
      w.dm = DistMatrix(MPI_COMM_WORLD, row_block(w.whole, rows.begin(r), rows.end(r)), rows, cols,
                        w.name);
      v.push_back(std::move(w));
    }
    // A square matrix on the balanced partition (boundaries not at equal blocks).
    Fixture b;
    b.name = "gen:kron:8 balanced-nnz";
    b.dm = load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:8", PartitionKind::balanced_nnz);
    b.whole = load_distributed_matrix(MPI_COMM_SELF, "gen:kron:8").local();
    v.push_back(std::move(b));
    return v;
  }();
  return all;
}

// The single-process transpose of a whole matrix (by definition: every (i, j, v) as (j, i, v)).
CsrMatrix reference_transpose(const CsrMatrix& a) {
  std::vector<std::vector<std::pair<gidx_t, double>>> rows(static_cast<std::size_t>(a.n_cols));
  for (gidx_t i = 0; i < a.n_rows; ++i) {
    for (std::int64_t x = a.row_ptr[i]; x < a.row_ptr[i + 1]; ++x) {
      rows[static_cast<std::size_t>(a.col_idx[x])].emplace_back(i, a.values[x]);
    }
  }
  CsrMatrix t;
  t.n_rows_global = t.n_rows = a.n_cols;
  t.n_cols = a.n_rows;
  t.row_ptr.push_back(0);
  for (const auto& r : rows) {
    for (const auto& [c, v] : r) {
      t.col_idx.push_back(c);
      t.values.push_back(v);
    }
    t.row_ptr.push_back(static_cast<std::int64_t>(t.col_idx.size()));
  }
  return t;
}

// The whole matrix whose rows are each rank's `local_rows` (for sampled patterns: every rank
// samples the whole matrix with the same seed, which gives the same rows, see sample_rows).
CsrMatrix sampled_whole(const Fixture& f, const SamplingParams& s, std::uint64_t seed) {
  return sample_rows(f.whole, s, seed);
}

// C = A^T * B in double, B(i, x) = operand_value(which, i, x); C's rows are this rank's columns.
std::vector<double> reference_at_b(const CsrMatrix& whole, gidx_t cb, gidx_t ce, int k, int which) {
  std::vector<double> c(static_cast<std::size_t>(ce - cb) * k, 0.0);
  for (gidx_t i = 0; i < whole.n_rows; ++i) {
    for (std::int64_t x = whole.row_ptr[i]; x < whole.row_ptr[i + 1]; ++x) {
      const gidx_t j = whole.col_idx[x];
      if (j < cb || j >= ce) continue;
      for (int y = 0; y < k; ++y) {
        c[(j - cb) * k + y] += whole.values[x] * double(test::operand_value(which, i, y));
      }
    }
  }
  return c;
}

// Runs C = A^T * B on `op` and returns the relative error against the reference of `whole`.
template <class T>
double run_transposed(const Fixture& f, TransposedSpmm& op, const CsrMatrix& whole, int which) {
  const int r = world_rank();
  const int k = op.k();
  const std::vector<float> b32 = operand_block(which, f.dm.rows().begin(r), f.dm.rows().end(r), k);
  const std::vector<T> b(b32.begin(), b32.end());
  std::vector<T> c(static_cast<std::size_t>(f.dm.cols().size(r)) * k, T(-7));
  op.spmm(b, c);
  return max_relative_error(
      c, reference_at_b(whole, f.dm.cols().begin(r), f.dm.cols().end(r), k, which));
}

TEST(DistTranspose, LocalCountingSortTransposesABlock) {
  const CsrMatrix m = wide_matrix();
  const CsrMatrix t = dist::local_transpose(m);
  test::expect_same_csr(t, reference_transpose(m), "local_transpose");
  test::expect_same_csr(dist::local_transpose(t), m, "local_transpose twice");
}

TEST(DistTranspose, BlocksEqualTheSingleProcessTranspose) {
  const int r = world_rank();
  for (const Fixture& f : fixtures()) {
    const DistMatrix at = transpose(f.dm);
    EXPECT_EQ(at.n_rows(), f.dm.n_cols()) << f.name;
    EXPECT_EQ(at.n_cols(), f.dm.n_rows()) << f.name;
    EXPECT_EQ(at.rows().offsets(), f.dm.cols().offsets()) << f.name;
    EXPECT_EQ(at.cols().offsets(), f.dm.rows().offsets()) << f.name;
    EXPECT_EQ(at.nnz_global(), f.dm.nnz_global()) << f.name;
    EXPECT_EQ(at.name(), f.dm.name() + "^T");
    const CsrMatrix want = reference_transpose(f.whole);
    test::expect_same_csr(at.local(), row_block(want, at.rows().begin(r), at.rows().end(r)),
                          f.name + " transposed");
    const DistMatrix att = transpose(at);
    test::expect_same_csr(att.local(), f.dm.local(), f.name + " transposed twice");
    // A changed pattern of the same rows.
    const SamplingParams s{0.5, 3};
    const CsrMatrix sampled = sample_rows(f.dm.local(), s, 11);
    const CsrMatrix want_s = reference_transpose(sampled_whole(f, s, 11));
    test::expect_same_csr(transpose_rows(f.dm, sampled),
                          row_block(want_s, at.rows().begin(r), at.rows().end(r)),
                          f.name + " sampled, transposed");
  }
}

// The transposed matrix is an ordinary DistMatrix: every mode and kernel on it.
TEST(DistTranspose, TransposedMatrixWorksWithEveryModeAndKernel) {
  for (const Fixture& f : fixtures()) {
    const DistMatrix at = transpose(f.dm);
    const int r = world_rank();
    const gidx_t rb = at.rows().begin(r), re = at.rows().end(r);
    const gidx_t cb = at.cols().begin(r), ce = at.cols().end(r);
    const CsrMatrix at_whole = reference_transpose(f.whole);
    const CsrMatrix ref_rows = row_block(at_whole, rb, re);
    for (CommMode mode : all_comm_modes()) {
      DistOptions o;
      o.mode = mode;
      o.tiling.col_panel = std::max<gidx_t>(1, at.n_cols() / 5);
      std::shared_ptr<RigEngine> engine = uses_rig_engine(mode) ? shared_engine() : nullptr;
      {
        DistKernel spmm(at, KernelKind::spmm, 5, o, engine);
        std::vector<float> b = operand_block(1, cb, ce, 5);
        std::vector<float> c(static_cast<std::size_t>(re - rb) * 5);
        if (mode == CommMode::ideal) spmm.replicate(b);
        spmm.spmm(b, c);
        EXPECT_LE(max_relative_error(c, test::reference_spmm(ref_rows, 5, 1)), kTolerance)
            << f.name << " spmm " << to_string(mode);
      }
      {
        DistKernel sddmm(at, KernelKind::sddmm, 3, o, engine);
        std::vector<float> y = operand_block(1, cb, ce, 3);
        std::vector<float> x = operand_block(2, rb, re, 3);
        std::vector<float> out(static_cast<std::size_t>(at.local().nnz()));
        if (mode == CommMode::ideal) sddmm.replicate(y);
        sddmm.sddmm(x, y, out);
        EXPECT_LE(max_relative_error(out, test::reference_sddmm(ref_rows, 3, 2, 1)), kTolerance)
            << f.name << " sddmm " << to_string(mode);
      }
      {
        DistKernel spmv(at, KernelKind::spmv, 1, o, engine);
        std::vector<float> x = operand_block(3, cb, ce, 1);
        std::vector<float> y(static_cast<std::size_t>(re - rb));
        if (mode == CommMode::ideal) spmv.replicate(x);
        spmv.spmv(x, y);
        EXPECT_LE(max_relative_error(y, test::reference_spmm(ref_rows, 1, 3)), kTolerance)
            << f.name << " spmv " << to_string(mode);
      }
    }
  }
}

// spmm_transposed both ways, fp32 and fp64, every fixture, K 1 and 7, then two sampled patterns
// on the same object.
TEST(DistTranspose, SpmmTransposedBothWaysMatchesTheReference) {
  for (const Fixture& f : fixtures()) {
    for (TransposedMethod method : {TransposedMethod::via_transpose, TransposedMethod::push}) {
      for (CommMode mode : {CommMode::netsparse, CommMode::su, CommMode::inspector_executor}) {
        if (method == TransposedMethod::push && mode != CommMode::netsparse) continue;
        for (ScalarType scalar : {ScalarType::f32, ScalarType::f64}) {
          for (int k : {1, 7}) {
            DistOptions o;
            o.mode = mode;
            o.scalar = scalar;
            o.dynamic_pattern = mode == CommMode::netsparse;
            const std::string what = f.name + " " + to_string(method) + " " + to_string(mode) +
                                     " " + std::string(to_string(scalar)) +
                                     " K=" + std::to_string(k);
            TransposedSpmm op(f.dm, k, o, method,
                              uses_rig_engine(mode) && method == TransposedMethod::via_transpose
                                  ? shared_engine()
                                  : nullptr);
            const double tol = scalar == ScalarType::f32 ? kTolerance : kF64Tolerance;
            const auto run = [&](const CsrMatrix& whole, int which) {
              return scalar == ScalarType::f32 ? run_transposed<float>(f, op, whole, which)
                                               : run_transposed<double>(f, op, whole, which);
            };
            EXPECT_LE(run(f.whole, 1), tol) << what;
            EXPECT_LE(run(f.whole, 2), tol) << what << " second run";
            const SamplingParams s{0.6, 4};
            for (std::uint64_t seed : {3u, 4u}) {
              op.set_pattern(sample_rows(f.dm.local(), s, seed));  // a temporary: copied
              EXPECT_GE(op.setup_seconds(), op.transpose_seconds());
              EXPECT_LE(run(sampled_whole(f, s, seed), 3), tol) << what << " sampled " << seed;
            }
          }
        }
      }
    }
  }
  // The one-shot functions.
  const Fixture& f = fixtures()[4];
  const int r = world_rank();
  const std::vector<float> b = operand_block(1, f.dm.rows().begin(r), f.dm.rows().end(r), 2);
  std::vector<float> c(static_cast<std::size_t>(f.dm.cols().size(r)) * 2);
  DistOptions o;
  o.mode = CommMode::su;
  spmm_transposed(f.dm, 2, b, c, o, TransposedMethod::push);
  const std::vector<double> want =
      reference_at_b(f.whole, f.dm.cols().begin(r), f.dm.cols().end(r), 2, 1);
  EXPECT_LE(max_relative_error(c, want), kTolerance);
  spmm_transposed(f.dm, 2, b, c, o);
  EXPECT_LE(max_relative_error(c, want), kTolerance);
}

// Push sends only the touched rows: a rank's partial rows for another owner never exceed the
// distinct columns its rows touch there.
TEST(DistTranspose, PushSendsOnlyTouchedRows) {
  const Fixture& f = fixtures()[2];  // road: few remote columns
  DistOptions o;
  o.mode = CommMode::su;
  TransposedSpmm op(f.dm, 4, o, TransposedMethod::push);
  EXPECT_EQ(op.kernel(), nullptr);
  EXPECT_LE(run_transposed<float>(f, op, f.whole, 1), kTolerance);
  const int r = world_rank();
  std::uint64_t remote_touched = 0;
  std::vector<char> seen(static_cast<std::size_t>(f.dm.n_cols()), 0);
  for (gidx_t c : f.dm.local().col_idx) {
    if ((c < f.dm.cols().begin(r) || c >= f.dm.cols().end(r)) && !seen[c]) {
      seen[c] = 1;
      ++remote_touched;
    }
  }
  std::uint64_t in_total = 0, payload = op.last_run_stats().payload_bytes_in;
  MPI_Allreduce(&payload, &in_total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::uint64_t touched_total = 0;
  MPI_Allreduce(&remote_touched, &touched_total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(in_total, touched_total * 4 * sizeof(float));
}

TEST(DistTranspose, BadInputIsRefusedOnEveryRank) {
  const Fixture& f = fixtures()[4];  // rect_general: 50 x 37, B and C differ in length
  const int r = world_rank();
  const std::size_t nb = static_cast<std::size_t>(f.dm.rows().size(r)) * 3;
  const std::size_t nc = static_cast<std::size_t>(f.dm.cols().size(r)) * 3;
  for (TransposedMethod method : {TransposedMethod::via_transpose, TransposedMethod::push}) {
    DistOptions o;
    o.mode = CommMode::su;
    TransposedSpmm op(f.dm, 3, o, method);
    std::vector<float> b(nb), c(nc);
    // B and C swapped (the shapes of A * B instead of A^T * B): wrong on every rank of a
    // non-square matrix.
    std::vector<float> b_as_cols(nc), c_as_rows(nb);
    try {
      op.spmm(b_as_cols, c_as_rows);
      ADD_FAILURE() << "no error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("needs B with"), std::string::npos) << e.what();
    }
    // Wrong on the last rank only: every rank throws.
    std::vector<float> short_c(nc - (r == test::world_size() - 1 && nc > 0 ? 1 : 0));
    if (test::all_ranks(f.dm.cols().size(test::world_size() - 1) > 0)) {
      EXPECT_THROW(op.spmm(b, short_c), std::invalid_argument) << to_string(method);
    }
    std::vector<double> b64(nb), c64(nc);
    EXPECT_THROW(op.spmm(b64, c64), std::invalid_argument);  // f32 kernel
    CsrMatrix other = f.dm.local();
    if (r == 0) other.n_cols += 1;  // a 50 x 38 block on rank 0 only
    EXPECT_THROW(op.set_pattern(other), std::invalid_argument) << to_string(method);
    op.spmm(b, c);  // still usable
  }
  CsrMatrix other = f.dm.local();
  if (r == 0) other.row_begin += 1;
  EXPECT_THROW((void)transpose_rows(f.dm, other), std::invalid_argument);
  EXPECT_THROW(TransposedSpmm(f.dm, 0, DistOptions{}), std::invalid_argument);
  EXPECT_STREQ(to_string(TransposedMethod::push), "push");
  EXPECT_STREQ(to_string(TransposedMethod::via_transpose), "transpose");
}

// ---- transpose_start (the non-blocking transpose) ---------------------------------------------

// The progress modes this job can run: thread needs MPI_THREAD_MULTIPLE, which the test main
// asks for (mpi_test_util.hpp); without it thread must be refused.
std::vector<TransposeProgress> progress_modes() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level == MPI_THREAD_MULTIPLE) return {TransposeProgress::calls, TransposeProgress::thread};
  return {TransposeProgress::calls};
}

void expect_same_dist(const DistMatrix& got, const DistMatrix& want, const std::string& what) {
  EXPECT_EQ(got.name(), want.name()) << what;
  EXPECT_EQ(got.rows().offsets(), want.rows().offsets()) << what;
  EXPECT_EQ(got.cols().offsets(), want.cols().offsets()) << what;
  EXPECT_EQ(got.nnz_global(), want.nnz_global()) << what;
  test::expect_same_csr(got.local(), want.local(), what);
}

// A random n_rows x n_cols matrix (the same on every rank: seeded), about `per_row` nonzeros a
// row, some rows empty.
CsrMatrix random_matrix(gidx_t n_rows, gidx_t n_cols, int per_row, std::uint64_t seed) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ULL + 1;
  const auto next = [&z] {
    z ^= z << 13;
    z ^= z >> 7;
    z ^= z << 17;
    return z;
  };
  CsrMatrix m;
  m.n_rows_global = m.n_rows = n_rows;
  m.n_cols = n_cols;
  m.row_ptr.push_back(0);
  for (gidx_t r = 0; r < n_rows; ++r) {
    const int n = static_cast<int>(next() % static_cast<std::uint64_t>(2 * per_row + 1));
    std::vector<gidx_t> cols;
    for (int i = 0; i < n; ++i) cols.push_back(static_cast<gidx_t>(next() % std::uint64_t(n_cols)));
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    for (gidx_t c : cols) {
      m.col_idx.push_back(c);
      m.values.push_back(static_cast<double>(next() % 2001) / 1000.0 - 1.0);
    }
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col_idx.size()));
  }
  return m;
}

// An uneven split of n over the ranks by weights: rank 1 gets nothing when there are more than
// two ranks, the last rank three shares, rank 0 one or two (by salt), the others one.
RowPartition uneven_partition(gidx_t n, int p, std::uint64_t salt) {
  std::vector<gidx_t> weights(static_cast<std::size_t>(p), 1);
  weights[0] = 1 + static_cast<gidx_t>(salt % 2);
  if (p > 2) weights[1] = 0;
  if (p > 1) weights[p - 1] = 3;
  gidx_t total = 0;
  for (gidx_t w : weights) total += w;
  std::vector<gidx_t> offsets(static_cast<std::size_t>(p) + 1, 0);
  gidx_t sum = 0;
  for (int q = 0; q < p; ++q) {
    sum += weights[q];
    offsets[q + 1] = n * sum / total;
  }
  return RowPartition::from_offsets(std::move(offsets));
}

TEST(DistTransposeAsync, EqualsTheSynchronousTransposeOnEveryFixture) {
  for (TransposeProgress progress : progress_modes()) {
    for (const Fixture& f : fixtures()) {
      const std::string what = f.name + " " + to_string(progress);
      PendingTranspose pending = transpose_start(f.dm, progress);
      EXPECT_EQ(pending.progress(), progress);
      EXPECT_EQ(pending.result(), nullptr) << what;
      const DistMatrix& at = pending.wait();
      EXPECT_EQ(pending.result(), &at) << what;
      EXPECT_EQ(&pending.wait(), &at) << what << ": a second wait gives the same object";
      EXPECT_TRUE(pending.test());
      expect_same_dist(at, transpose(f.dm), what);
    }
  }
}

TEST(DistTransposeAsync, RandomMatricesUnevenPartitionsAndEmptyRanks) {
  const int p = test::world_size(), r = world_rank();
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const gidx_t n_rows = 40 + static_cast<gidx_t>(seed * 37 % 90);
    const gidx_t n_cols = seed % 2 ? n_rows : 25 + static_cast<gidx_t>(seed * 53 % 120);
    const CsrMatrix whole = random_matrix(n_rows, n_cols, 1 + static_cast<int>(seed % 5), seed);
    const RowPartition rows = uneven_partition(n_rows, p, seed);
    const RowPartition cols =
        seed % 3 ? uneven_partition(n_cols, p, seed + 1) : RowPartition::equal_blocks(n_cols, p);
    const std::string name = "random " + std::to_string(seed);
    const DistMatrix a(MPI_COMM_WORLD, row_block(whole, rows.begin(r), rows.end(r)), rows, cols,
                       name);
    const DistMatrix want = transpose(a);
    const CsrMatrix want_whole = reference_transpose(whole);
    for (TransposeProgress progress : progress_modes()) {
      const std::string what = name + " " + to_string(progress);
      PendingTranspose pending = transpose_start(a, progress);
      const DistMatrix& at = pending.wait();
      expect_same_dist(at, want, what);
      test::expect_same_csr(at.local(), row_block(want_whole, cols.begin(r), cols.end(r)), what);
    }
  }
  if (p > 2) {  // the partitions above did leave rank 1 without rows
    EXPECT_EQ(uneven_partition(100, p, 1).size(1), 0);
  }
}

// Computation on the same communicator while the transpose is pending: SpMVs with A (blocking
// collectives on a.comm(), between which test() is called) give the reference result, and the
// transpose waited for afterwards equals the synchronous one. Two transposes in flight at once,
// completed in the opposite order, and one moved while pending, must not mix their messages.
TEST(DistTransposeAsync, ComputeOverlappedWhilePendingGivesTheSameResults) {
  const int r = world_rank();
  for (TransposeProgress progress : progress_modes()) {
    for (const Fixture& f : fixtures()) {
      if (f.dm.n_rows() != f.dm.n_cols()) continue;  // y = A x feeds the next x
      const std::string what = f.name + " " + to_string(progress);
      const DistMatrix want = transpose(f.dm);
      PendingTranspose first = transpose_start(f.dm, progress);
      PendingTranspose second = transpose_start(want, progress);  // (A^T)^T = A
      DistOptions o;
      o.mode = CommMode::inspector_executor;
      DistKernel spmv(f.dm, KernelKind::spmv, 1, o);
      std::vector<float> x = operand_block(3, f.dm.cols().begin(r), f.dm.cols().end(r), 1);
      std::vector<float> y(static_cast<std::size_t>(f.dm.rows().size(r)));
      spmv.spmv(x, y);
      (void)first.test();
      (void)second.test();
      EXPECT_LE(max_relative_error(
                    y, reference_spmm(row_block(f.whole, f.dm.rows().begin(r), f.dm.rows().end(r)),
                                      1, 3)),
                kTolerance)
          << what;
      PendingTranspose moved = std::move(first);
      EXPECT_FALSE(first.valid());
      EXPECT_THROW((void)first.test(), std::logic_error);
      for (int i = 0; i < 3; ++i) {
        spmv.spmv(y, x);
        (void)moved.test();
        spmv.spmv(x, y);
      }
      const DistMatrix& att = second.wait();
      EXPECT_EQ(att.name(), f.dm.name() + "^T^T") << what;
      EXPECT_EQ(att.rows().offsets(), f.dm.rows().offsets()) << what;
      test::expect_same_csr(att.local(), f.dm.local(), what + " (A^T)^T");
      expect_same_dist(moved.wait(), want, what);
    }
  }
}

TEST(DistTransposeAsync, DroppedWhilePendingLeavesNothingBehind) {
  const Fixture& f = fixtures()[0];
  for (TransposeProgress progress : progress_modes()) {
    { PendingTranspose dropped = transpose_start(f.dm, progress); }
    PendingTranspose reassigned = transpose_start(f.dm, progress);
    reassigned = transpose_start(f.dm, progress);  // the first one completes, then goes
    expect_same_dist(reassigned.wait(), transpose(f.dm), to_string(progress));
  }
}

TEST(DistTransposeAsync, RefusesWhatItCannotStart) {
  PendingTranspose none;
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(none.result(), nullptr);
  EXPECT_THROW((void)none.wait(), std::logic_error);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE) {
    EXPECT_THROW((void)transpose_start(fixtures()[0].dm, TransposeProgress::thread),
                 std::invalid_argument);
  }
  EXPECT_THROW((void)transpose_start(DistMatrix{}), std::invalid_argument);
  EXPECT_STREQ(to_string(TransposeProgress::thread), "thread");
  EXPECT_STREQ(to_string(TransposeProgress::calls), "calls");
}

}  // namespace
}  // namespace netsparse
