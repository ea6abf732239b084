// SpGEMM (spgemm.hpp): the local kernel against a plain map-based reference with both
// accumulators and several row panels; the distributed product C = A * B in every mode (netsparse,
// su, inspector-executor), fp64 and fp32, against the reference of the whole matrices -- the
// pattern exactly, the values within tolerance -- on the distributed fixtures, rectangular
// products, rows that are all remote, B rows of many chunks, empty rows and ranks, and on new
// values with the same pattern (the netsparse value pass replays its gather plan); bad input is
// refused on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/spgemm.hpp"
#include "spgemm/spgemm_local.hpp"

namespace netsparse {
namespace {

using namespace test;

// C = A * B by definition, row by row through an ordered map (b: the whole of B).
CsrMatrix reference_product(const CsrMatrix& a, const CsrMatrix& b) {
  CsrMatrix c;
  c.n_rows_global = a.n_rows_global;
  c.n_rows = a.n_rows;
  c.row_begin = a.row_begin;
  c.n_cols = b.n_cols;
  c.row_ptr.push_back(0);
  for (gidx_t i = 0; i < a.n_rows; ++i) {
    std::map<gidx_t, double> acc;
    for (std::int64_t p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
      const gidx_t j = a.col_idx[p];
      for (std::int64_t q = b.row_ptr[j]; q < b.row_ptr[j + 1]; ++q) {
        acc[b.col_idx[q]] += a.values[p] * b.values[q];
      }
    }
    for (const auto& [col, v] : acc) {
      c.col_idx.push_back(col);
      c.values.push_back(v);
    }
    c.row_ptr.push_back(static_cast<std::int64_t>(c.col_idx.size()));
  }
  return c;
}

// A random rows x cols matrix: row lengths in [0, max_len] (about empty_fraction of the rows
// empty), values in +-[0.25, 1).
CsrMatrix random_matrix(gidx_t rows, gidx_t cols, int max_len, double empty_fraction,
                        std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CsrMatrix m;
  m.n_rows_global = m.n_rows = rows;
  m.n_cols = cols;
  m.row_ptr.push_back(0);
  std::vector<gidx_t> all(static_cast<std::size_t>(cols)), row;
  for (gidx_t c = 0; c < cols; ++c) all[static_cast<std::size_t>(c)] = c;
  for (gidx_t r = 0; r < rows; ++r) {
    if (cols > 0 && unit(rng) >= empty_fraction) {
      const auto len =
          std::uniform_int_distribution<gidx_t>(1, std::min<gidx_t>(max_len, cols))(rng);
      row.clear();
      std::sample(all.begin(), all.end(), std::back_inserter(row), len, rng);
      std::sort(row.begin(), row.end());
      for (const gidx_t c : row) {
        m.col_idx.push_back(c);
        m.values.push_back((unit(rng) < 0.5 ? -1 : 1) * (0.25 + 0.75 * unit(rng)));
      }
    }
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col_idx.size()));
  }
  return m;
}

void expect_same_product(const CsrMatrix& got, const CsrMatrix& want, double tolerance,
                         const std::string& what) {
  ASSERT_EQ(got.n_rows, want.n_rows) << what;
  ASSERT_EQ(got.row_begin, want.row_begin) << what;
  ASSERT_EQ(got.n_cols, want.n_cols) << what;
  ASSERT_EQ(got.row_ptr, want.row_ptr) << what << ": row lengths differ";
  ASSERT_EQ(got.col_idx, want.col_idx) << what << ": pattern differs";
  double scale = 0, err = 0;
  for (std::size_t x = 0; x < want.values.size(); ++x) {
    scale = std::max(scale, std::abs(want.values[x]));
    err = std::max(err, std::abs(got.values[x] - want.values[x]));
  }
  EXPECT_LE(err, tolerance * std::max(scale, 1e-30)) << what;
}

// ---- the local kernel ------------------------------------------------------------------------

TEST(LocalSpgemm, BothAccumulatorsMatchTheReference) {
  for (const auto& [rows, inner, cols, max_len, seed] :
       std::vector<std::tuple<gidx_t, gidx_t, gidx_t, int, int>>{{50, 40, 60, 6, 1},
                                                                 {200, 300, 5000, 12, 2},
                                                                 {33, 7, 3, 4, 3},
                                                                 {0, 5, 5, 3, 4},
                                                                 {17, 0, 9, 3, 5}}) {
    const CsrMatrix a = random_matrix(rows, inner, max_len, 0.15, seed);
    const CsrMatrix b = random_matrix(inner, cols, max_len, 0.15, seed + 100);
    const CsrMatrix want = reference_product(a, b);
    CsrMatrix dense_c;
    for (const SpgemmAccumulator acc :
         {SpgemmAccumulator::dense, SpgemmAccumulator::hash, SpgemmAccumulator::automatic}) {
      for (const int panel : {1, 7, 256}) {
        LocalSpgemmOptions o;
        o.accumulator = acc;
        o.row_panel = panel;
        const CsrMatrix got = local_spgemm(a, b, o);
        const std::string what = std::to_string(rows) + "x" + std::to_string(inner) + "x" +
                                 std::to_string(cols) + " " + to_string(acc) + " panel " +
                                 std::to_string(panel);
        expect_same_product(got, want, 1e-14, what);
        // Both accumulators add each entry's products in the same order: bit-identical.
        if (acc == SpgemmAccumulator::dense && panel == 1) dense_c = got;
        EXPECT_EQ(got.values, dense_c.values) << what;
      }
    }
  }
}

// Rows of `rows` x `cols`: lengths in [1, max_len] (about empty_fraction of the rows empty),
// columns drawn with replacement from [col_lo, col_hi) and sorted -- so a row may repeat a column
// (kept: the kernel adds both) -- and values in +-[0.25, 1).
struct IndexMatrix {
  std::vector<std::int64_t> ptr{0}, cols;
  std::vector<double> values;
  [[nodiscard]] dist::CsrIndex index() const { return {ptr, cols}; }
};
IndexMatrix random_index_matrix(gidx_t rows, gidx_t col_lo, gidx_t col_hi, int max_len,
                                double empty_fraction, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<gidx_t> col(col_lo, col_hi - 1);
  IndexMatrix m;
  std::vector<gidx_t> row;
  for (gidx_t r = 0; r < rows; ++r) {
    if (unit(rng) >= empty_fraction) {
      row.resize(static_cast<std::size_t>(std::uniform_int_distribution<int>(1, max_len)(rng)));
      for (gidx_t& c : row) c = col(rng);
      std::sort(row.begin(), row.end());
      for (const gidx_t c : row) {
        m.cols.push_back(c);
        m.values.push_back((unit(rng) < 0.5 ? -1 : 1) * (0.25 + 0.75 * unit(rng)));
      }
    }
    m.ptr.push_back(static_cast<std::int64_t>(m.cols.size()));
  }
  return m;
}

// C = A * B in T by definition (an ordered map per row): the same additions in the same order
// as the kernel (A's row order, then B's, from zero), so its values are the kernel's bits.
template <class T>
void reference_in(const IndexMatrix& a, const IndexMatrix& b, std::vector<std::int64_t>& ptr,
                  std::vector<gidx_t>& cols, std::vector<T>& values) {
  ptr.assign(1, 0);
  cols.clear();
  values.clear();
  for (std::size_t i = 0; i + 1 < a.ptr.size(); ++i) {
    std::map<gidx_t, T> acc;
    for (std::int64_t p = a.ptr[i]; p < a.ptr[i + 1]; ++p) {
      const auto j = static_cast<std::size_t>(a.cols[static_cast<std::size_t>(p)]);
      for (std::int64_t q = b.ptr[j]; q < b.ptr[j + 1]; ++q) {
        acc[b.cols[static_cast<std::size_t>(q)]] +=
            static_cast<T>(a.values[static_cast<std::size_t>(p)]) *
            static_cast<T>(b.values[static_cast<std::size_t>(q)]);
      }
    }
    for (const auto& [c, v] : acc) {
      cols.push_back(c);
      values.push_back(v);
    }
    ptr.push_back(static_cast<std::int64_t>(cols.size()));
  }
}

template <class T>
void expect_kernel_matches_bitwise(const IndexMatrix& a, const IndexMatrix& b, gidx_t n_cols,
                                   const std::string& what, bool dense_too = true) {
  std::vector<std::int64_t> want_ptr;
  std::vector<gidx_t> want_cols;
  std::vector<T> want;
  reference_in<T>(a, b, want_ptr, want_cols, want);
  const std::vector<T> a_vals(a.values.begin(), a.values.end());
  const std::vector<T> b_vals(b.values.begin(), b.values.end());
  for (const SpgemmAccumulator acc :
       {SpgemmAccumulator::dense, SpgemmAccumulator::hash, SpgemmAccumulator::automatic}) {
    if (acc == SpgemmAccumulator::dense && !dense_too) continue;
    for (const int panel : {1, 5, 256}) {
      LocalSpgemmOptions o;
      o.accumulator = acc;
      o.row_panel = panel;
      const std::string how = what + (sizeof(T) == 4 ? " f32 " : " f64 ") + to_string(acc) +
                              " panel " + std::to_string(panel);
      const dist::SpgemmSymbolic sym = dist::spgemm_symbolic(a.index(), b.index(), n_cols, o);
      ASSERT_EQ(sym.row_ptr, want_ptr) << how << ": row lengths differ";
      ASSERT_EQ(sym.cols, want_cols) << how << ": pattern differs";
      // Garbage in C's values first: every path must write every entry.
      std::vector<T> got(static_cast<std::size_t>(sym.nnz()), T(7));
      dist::spgemm_numeric<T>(sym, a.index(), a_vals, b.index(), b_vals, got);
      EXPECT_EQ(got, want) << how;
      // Twice on the same pattern (DistSpgemm's repeated multiply): the accumulators were left
      // zeroed, so the same bits again.
      dist::spgemm_numeric<T>(sym, a.index(), a_vals, b.index(), b_vals, got);
      EXPECT_EQ(got, want) << how << " (repeated)";
    }
  }
}

// The paths the column window selects, each against a reference computed in the same precision
// (bit for bit): a value window at an offset (a band of columns far from 0), the sorted walk (a
// window wider than 1 MiB of values: narrow rows spread over 400,000 columns), very long rows
// (the symbolic phase's stamp scan instead of a sort), empty rows, and repeated columns in B's
// rows; f64 and f32, every accumulator option, panels of 1, 5 and 256 rows.
TEST(LocalSpgemm, ColumnWindowsWalksAndLongRowsMatchTheReferenceBitForBit) {
  struct Case {
    const char* what;
    gidx_t a_rows, inner, n_cols, b_lo, b_hi;
    int a_len, b_len;
  };
  for (const Case& c : std::vector<Case>{{"band at 250000", 300, 400, 400000, 250000, 252000, 8, 9},
                                         {"wide, narrow rows", 300, 400, 400000, 0, 400000, 5, 6},
                                         {"long rows", 70, 500, 3000, 0, 3000, 400, 300},
                                         {"repeats", 120, 60, 90, 0, 90, 12, 40}}) {
    const IndexMatrix a = random_index_matrix(c.a_rows, 0, c.inner, c.a_len, 0.2, 11);
    const IndexMatrix b = random_index_matrix(c.inner, c.b_lo, c.b_hi, c.b_len, 0.2, 12);
    expect_kernel_matches_bitwise<double>(a, b, c.n_cols, c.what);
    expect_kernel_matches_bitwise<float>(a, b, c.n_cols, c.what);
  }
  // Columns beyond 32 bits (3e9; a forced dense accumulator would span that window, so only
  // hash and automatic): the hash table and the sorted walk.
  const gidx_t huge = 3'000'000'000;
  const IndexMatrix a = random_index_matrix(80, 0, 90, 6, 0.2, 13);
  const IndexMatrix b = random_index_matrix(90, 0, huge, 7, 0.2, 14);
  expect_kernel_matches_bitwise<double>(a, b, huge, "64-bit columns", false);
  expect_kernel_matches_bitwise<float>(a, b, huge, "64-bit columns", false);
}

// A product large enough (4.4 million entries: 35 MB of f64, 17.6 MB of f32) that C's values
// are written with streaming stores, against a dense reference summing in the kernel's order.
template <class T>
void expect_large_product_exact() {
  const gidx_t rows = 4400, inner = 20, cols = 1000;
  IndexMatrix a, b;
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (gidx_t i = 0; i < rows; ++i) {
    for (gidx_t k = 0; k < inner; ++k) {
      a.cols.push_back(k);
      a.values.push_back(unit(rng));
    }
    a.ptr.push_back(static_cast<std::int64_t>(a.cols.size()));
  }
  for (gidx_t k = 0; k < inner; ++k) {
    for (gidx_t j = 0; j < cols; ++j) {
      b.cols.push_back(j);
      b.values.push_back(unit(rng));
    }
    b.ptr.push_back(static_cast<std::int64_t>(b.cols.size()));
  }
  const std::vector<T> a_vals(a.values.begin(), a.values.end());
  const std::vector<T> b_vals(b.values.begin(), b.values.end());
  const dist::SpgemmSymbolic sym = dist::spgemm_symbolic(a.index(), b.index(), cols, {});
  ASSERT_EQ(sym.nnz(), rows * cols);
  std::vector<T> got(static_cast<std::size_t>(sym.nnz()), T(7));
  dist::spgemm_numeric<T>(sym, a.index(), a_vals, b.index(), b_vals, got);
  std::int64_t wrong = 0;
  for (gidx_t i = 0; i < rows; ++i) {
    for (gidx_t j = 0; j < cols; ++j) {
      T want = 0;
      for (gidx_t k = 0; k < inner; ++k) {
        want += a_vals[static_cast<std::size_t>(i * inner + k)] *
                b_vals[static_cast<std::size_t>(k * cols + j)];
      }
      wrong += got[static_cast<std::size_t>(i * cols + j)] != want ? 1 : 0;
    }
  }
  EXPECT_EQ(wrong, 0) << (sizeof(T) == 4 ? "f32" : "f64");
}

TEST(LocalSpgemm, LargeProductWithStreamingStoresIsExact) {
  expect_large_product_exact<double>();
  expect_large_product_exact<float>();
}

TEST(LocalSpgemm, RefusesBadShapesAndOptions) {
  const CsrMatrix a = random_matrix(5, 6, 3, 0, 1);
  const CsrMatrix b = random_matrix(7, 4, 3, 0, 2);  // 7 rows: not a's 6 columns
  EXPECT_NE(invalid_argument_message([&] { (void)local_spgemm(a, b); }).find("a.n_cols"),
            std::string::npos);
  const CsrMatrix b6 = random_matrix(6, 4, 3, 0, 2);
  LocalSpgemmOptions o;
  o.row_panel = 0;
  EXPECT_NE(invalid_argument_message([&] { (void)local_spgemm(a, b6, o); }).find("row_panel"),
            std::string::npos);
}

// ---- the distributed product -----------------------------------------------------------------

// A distributed from its whole matrix (rows split by `rows`, columns by `cols`).
DistMatrix distribute(const CsrMatrix& whole, const RowPartition& rows, const RowPartition& cols,
                      const std::string& name) {
  const int r = world_rank();
  return DistMatrix(MPI_COMM_WORLD, row_block(whole, rows.begin(r), rows.end(r)), rows, cols, name);
}

// A pair (A, B) with the whole matrices for the reference.
struct ProductCase {
  std::string name;
  DistMatrix a, b;
  CsrMatrix a_whole, b_whole;
};

ProductCase square_case(const std::string& spec) {
  ProductCase pc;
  Fixture f = make_fixture(spec);
  pc.name = spec + " squared";
  pc.a = f.dm;
  pc.b = f.dm;
  pc.a_whole = f.whole;
  pc.b_whole = f.whole;
  return pc;
}

ProductCase pair_case(const std::string& name, const CsrMatrix& a, const CsrMatrix& b) {
  ProductCase pc;
  pc.name = name;
  const int p = world_size();
  const RowPartition rows = RowPartition::equal_blocks(a.n_rows, p);
  const RowPartition inner = RowPartition::equal_blocks(a.n_cols, p);
  const RowPartition cols = RowPartition::equal_blocks(b.n_cols, p);
  pc.a = distribute(a, rows, inner, name + " A");
  pc.b = distribute(b, inner, cols, name + " B");
  pc.a_whole = a;
  pc.b_whole = b;
  return pc;
}

// Every row of A uses only rows of B owned by other ranks (the next rank's block, cyclically),
// and a few B rows (the first of each block) are long: many chunks each.
ProductCase all_remote_case() {
  const int p = world_size();
  const gidx_t block = 9;
  const gidx_t n = block * p;
  CsrMatrix a;
  a.n_rows_global = a.n_rows = a.n_cols = n;
  a.row_ptr.push_back(0);
  for (gidx_t i = 0; i < n; ++i) {
    const gidx_t next = ((i / block + 1) % p) * block;
    for (gidx_t c = next; c < next + block; c += 1 + (i % 3)) {
      a.col_idx.push_back(c);
      a.values.push_back(0.5 + 0.01 * double((i * 7 + c) % 13));
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col_idx.size()));
  }
  CsrMatrix b = random_matrix(n, 3 * n, 5, 0.2, 77);
  // Long rows: row 0 of every block holds every other column (3n / 2 entries).
  CsrMatrix long_b;
  long_b.n_rows_global = long_b.n_rows = n;
  long_b.n_cols = b.n_cols;
  long_b.row_ptr.push_back(0);
  for (gidx_t r = 0; r < n; ++r) {
    if (r % block == 0) {
      for (gidx_t c = r % 2; c < b.n_cols; c += 2) {
        long_b.col_idx.push_back(c);
        long_b.values.push_back(-0.3 + 0.001 * double(c));
      }
    } else {
      for (std::int64_t q = b.row_ptr[r]; q < b.row_ptr[r + 1]; ++q) {
        long_b.col_idx.push_back(b.col_idx[q]);
        long_b.values.push_back(b.values[q]);
      }
    }
    long_b.row_ptr.push_back(static_cast<std::int64_t>(long_b.col_idx.size()));
  }
  return pair_case("all-remote rows, long B rows", a, long_b);
}

// Every row of A names the same four columns (each rank's gathers are all repeats after the
// first), and half of B's rows are empty.
ProductCase repeated_columns_case() {
  const gidx_t n = 40;
  CsrMatrix a;
  a.n_rows_global = a.n_rows = a.n_cols = n;
  a.row_ptr.push_back(0);
  for (gidx_t i = 0; i < n; ++i) {
    if (i % 6 != 5) {
      for (const gidx_t c : {gidx_t{3}, gidx_t{17}, gidx_t{26}, gidx_t{38}}) {
        a.col_idx.push_back(c);
        a.values.push_back(1.0 + 0.1 * double(i % 5));
      }
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col_idx.size()));
  }
  return pair_case("repeated columns, empty rows", a, random_matrix(n, n, 8, 0.5, 5));
}

// Rank 0's rows of A use only its own rows of B, every other rank's rows use rank 0's: rank 0
// gathers nothing but serves everyone (it must still count the value plan's rounds like its
// peers, or it waits for requesters that stopped telling it once the owners push).
ProductCase one_sided_case() {
  const int p = world_size();
  const gidx_t block = 4;
  const gidx_t n = block * p;
  CsrMatrix a;
  a.n_rows_global = a.n_rows = a.n_cols = n;
  a.row_ptr.push_back(0);
  for (gidx_t i = 0; i < n; ++i) {
    for (gidx_t c = i % 2; c < block; c += 2) {
      a.col_idx.push_back(c);
      a.values.push_back(0.25 + 0.125 * double(i % 7));
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col_idx.size()));
  }
  return pair_case("one-sided (rank 0 gathers nothing)", a, random_matrix(n, n, 6, 0, 21));
}

std::vector<ProductCase>& cases() {
  static std::vector<ProductCase> all = [] {
    std::vector<ProductCase> v;
    for (const std::string& spec :
         {std::string("gen:kron:8"), std::string("gen:stencil:6:5:4:2"),
          std::string("gen:road:17:13:0.05"), data_path("distributed/small_symmetric.mtx")}) {
      v.push_back(square_case(spec));
    }
    // A rectangular A times its transpose (B's rows follow A's columns).
    {
      Fixture f = make_fixture(data_path("distributed/rect_general.mtx"));
      ProductCase pc;
      pc.name = "rect_general * rect_general^T";
      pc.a = f.dm;
      pc.b = transpose(f.dm);
      pc.a_whole = f.whole;
      pc.b_whole = transpose(load_distributed_matrix(MPI_COMM_SELF, f.name)).local();
      v.push_back(std::move(pc));
    }
    v.push_back(pair_case("random 60x45 * 45x70", random_matrix(60, 45, 9, 0.1, 11),
                          random_matrix(45, 70, 11, 0.1, 12)));
    // Fewer rows than ranks at np 3-4: ranks without rows of A or of B.
    v.push_back(pair_case("random 2x3 * 3x5", random_matrix(2, 3, 2, 0, 13),
                          random_matrix(3, 5, 3, 0, 14)));
    v.push_back(all_remote_case());
    v.push_back(repeated_columns_case());
    v.push_back(one_sided_case());
    return v;
  }();
  return all;
}

void check_case(const ProductCase& pc, const SpgemmOptions& o, const std::string& label) {
  const CsrMatrix want_whole = reference_product(pc.a_whole, pc.b_whole);
  const CsrMatrix want =
      row_block(want_whole, pc.a.rows().begin(world_rank()), pc.a.rows().end(world_rank()));
  DistSpgemm product(pc.a, pc.b, o);
  EXPECT_EQ(product.local_nnz(), want.nnz()) << label;
  const DistMatrix c = product.multiply();
  EXPECT_EQ(c.rows().offsets(), pc.a.rows().offsets()) << label;
  EXPECT_EQ(c.cols().offsets(), pc.b.cols().offsets()) << label;
  EXPECT_EQ(c.nnz_global(), want_whole.nnz()) << label;
  const double tol = o.scalar == ScalarType::f64 ? kF64Tolerance : kTolerance;
  expect_same_product(c.local(), want, tol, label);
  // Later products (netsparse: the plan's replay, asked on the second, pushed by the owners
  // from the third on) give the same values.
  for (int run = 2; run <= 5; ++run) {
    std::vector<double> values(static_cast<std::size_t>(product.local_nnz()), -7.0);
    product.multiply_values(values);
    EXPECT_EQ(values, c.local().values) << label << " (product " << run << ")";
  }
}

TEST(DistSpgemm, EveryModeMatchesTheReference) {
  for (const ProductCase& pc : cases()) {
    for (const SpgemmMode mode :
         {SpgemmMode::netsparse, SpgemmMode::su, SpgemmMode::inspector_executor}) {
      for (const ScalarType scalar : {ScalarType::f64, ScalarType::f32}) {
        SpgemmOptions o;
        o.mode = mode;
        o.scalar = scalar;
        check_case(
            pc, o,
            pc.name + " " + to_string(mode) + " " + (scalar == ScalarType::f64 ? "f64" : "f32"));
      }
    }
  }
}

// netsparse's chunking: one entry per chunk (many chunks per row), a chunk wider than every
// row (each row padded into one), small batches (many work requests), plans off, the hash
// accumulator everywhere, and a shared engine that a DistKernel uses in between.
TEST(DistSpgemm, NetsparseChunksBatchesAndPlans) {
  for (const ProductCase& pc : cases()) {
    // Chunks 1 and 64 with plans, 2 without (three configurations keep the test's time down
    // under sanitizers).
    for (const auto& [chunk, plans] :
         {std::pair{1, true}, std::pair{2, false}, std::pair{64, true}}) {
      {
        SpgemmOptions o;
        o.mode = SpgemmMode::netsparse;
        o.chunk = chunk;
        o.plans = plans;
        o.batch = 3;
        o.local.accumulator = SpgemmAccumulator::hash;
        check_case(pc, o, pc.name + " chunk " + std::to_string(chunk) + (plans ? " plans" : ""));
      }
    }
  }
}

TEST(DistSpgemm, NewValuesSamePattern) {
  for (const ProductCase& pc : cases()) {
    for (const SpgemmMode mode :
         {SpgemmMode::netsparse, SpgemmMode::su, SpgemmMode::inspector_executor}) {
      SpgemmOptions o;
      o.mode = mode;
      DistSpgemm product(pc.a, pc.b, o, mode == SpgemmMode::netsparse ? shared_engine() : nullptr);
      (void)product.multiply();
      // Scaled A, B with a sign pattern: a product of stale values would differ.
      CsrMatrix a2 = pc.a_whole, b2 = pc.b_whole;
      for (std::size_t x = 0; x < a2.values.size(); ++x) a2.values[x] *= (x % 2 ? -2.0 : 0.5);
      for (std::size_t x = 0; x < b2.values.size(); ++x) b2.values[x] *= (x % 3 ? 1.5 : -1.0);
      const int r = world_rank();
      const CsrMatrix a_block = row_block(a2, pc.a.rows().begin(r), pc.a.rows().end(r));
      const CsrMatrix b_block = row_block(b2, pc.b.rows().begin(r), pc.b.rows().end(r));
      product.update_values(a_block.values, b_block.values);
      // A DistKernel on the shared engine registers its own region in between: the plans
      // must record afresh, not replay onto a region that is gone.
      if (mode == SpgemmMode::netsparse && pc.a.n_rows() == pc.a.n_cols()) {
        DistOptions k;
        k.mode = CommMode::netsparse_rank;
        DistKernel spmv(pc.a, KernelKind::spmv, 1, k, shared_engine());
        std::vector<float> x(static_cast<std::size_t>(pc.a.cols().size(r)), 1.0f);
        std::vector<float> y(static_cast<std::size_t>(pc.a.rows().size(r)));
        spmv.spmv(x, y);
      }
      const DistMatrix c = product.multiply();
      const CsrMatrix want =
          row_block(reference_product(a2, b2), pc.a.rows().begin(r), pc.a.rows().end(r));
      expect_same_product(c.local(), want, kF64Tolerance,
                          pc.name + " " + to_string(mode) + " new values");
    }
  }
}

TEST(DistSpgemm, RefusesMismatchedPartitionsOnEveryRank) {
  const ProductCase& pc = cases()[5];  // random 60x45 * 45x70
  // B = A: A's 45 columns are not the 60 rows of A.
  const std::string msg =
      invalid_argument_message([&] { DistSpgemm bad(pc.a, pc.a, SpgemmOptions{}); });
  EXPECT_NE(msg.find("column partition"), std::string::npos) << msg;
  SpgemmOptions o;
  o.chunk = 1000;  // above 256
  EXPECT_NE(invalid_argument_message([&] { DistSpgemm bad(pc.a, pc.b, o); }).find("chunk"),
            std::string::npos);
}

TEST(DistSpgemm, WrongValueCountFailsTheNextMultiplyOnEveryRank) {
  const ProductCase& pc = cases()[5];
  for (const SpgemmMode mode : {SpgemmMode::netsparse, SpgemmMode::inspector_executor}) {
    SpgemmOptions o;
    o.mode = mode;
    DistSpgemm product(pc.a, pc.b, o);
    const std::vector<double> a_vals = pc.a.local().values;
    std::vector<double> b_vals = pc.b.local().values;
    if (world_rank() == 0) {
      b_vals.push_back(1.0);
      EXPECT_NE(invalid_argument_message([&] {
                  product.update_values(a_vals, b_vals);
                }).find("update_values"),
                std::string::npos);
    }
    const std::string msg = invalid_argument_message([&] { (void)product.multiply(); });
    EXPECT_NE(msg.find("update_values: rank 0"), std::string::npos) << msg;
    // Correct values again: the product works.
    product.update_values(a_vals, pc.b.local().values);
    const CsrMatrix want =
        row_block(reference_product(pc.a_whole, pc.b_whole), pc.a.rows().begin(world_rank()),
                  pc.a.rows().end(world_rank()));
    expect_same_product(product.multiply().local(), want, kF64Tolerance, "after refusal");
  }
}

TEST(DistSpgemm, MultiplyValuesRefusesAWrongLengthOnEveryRank) {
  const ProductCase& pc = cases()[5];
  DistSpgemm product(pc.a, pc.b, SpgemmOptions{});
  std::vector<double> values(static_cast<std::size_t>(product.local_nnz()) +
                             (world_rank() == world_size() - 1 ? 1 : 0));
  const std::string msg = invalid_argument_message([&] { product.multiply_values(values); });
  EXPECT_NE(msg.find("multiply_values: rank " + std::to_string(world_size() - 1)),
            std::string::npos)
      << msg;
  values.resize(static_cast<std::size_t>(product.local_nnz()));
  product.multiply_values(values);
  EXPECT_EQ(values, product.multiply().local().values);
}

TEST(DistSpgemm, ParsesModeNames) {
  EXPECT_EQ(parse_spgemm_mode("netsparse"), SpgemmMode::netsparse);
  EXPECT_EQ(parse_spgemm_mode("su"), SpgemmMode::su);
  EXPECT_EQ(parse_spgemm_mode("inspector-executor"), SpgemmMode::inspector_executor);
  EXPECT_EQ(parse_spgemm_mode("ie"), SpgemmMode::inspector_executor);
  EXPECT_NE(invalid_argument_message([] { (void)parse_spgemm_mode("bogus"); }).find("accepted"),
            std::string::npos);
}

}  // namespace
}  // namespace netsparse
