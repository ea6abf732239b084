// CSR kernels over one column part (spmm_csr_columns, sddmm_csr_columns) against a plain
// reference: every K class (vector widths, K = 1, odd K), inside and outside parts with ranges
// at the edges and in the middle, store and accumulate, empty rows, every ISA variant, the
// progress hook, and the view checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "netsparse/local_kernels.hpp"
#include "random_csr.hpp"
#include "sparse/csr_part.hpp"

namespace netsparse {
namespace {

using test::random_csr;
using test::random_dense;

// csr_part_bounds (its shortcuts for rows on one side of lo or hi) against two binary searches,
// on random sorted rows and every lo <= hi around and inside them.
TEST(CsrPartBounds, EqualsTwoBinarySearches) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<gidx_t> col(static_cast<std::size_t>(rng() % 9));
    for (gidx_t& c : col) c = static_cast<gidx_t>(rng() % 24);
    std::sort(col.begin(), col.end());
    col.erase(std::unique(col.begin(), col.end()), col.end());
    const std::int64_t e = std::ssize(col);
    for (gidx_t lo = -1; lo <= 25; ++lo) {
      for (gidx_t hi = lo; hi <= 26; ++hi) {
        const PartBounds got = csr_part_bounds(col.data(), 0, e, lo, hi);
        const std::int64_t l = std::lower_bound(col.begin(), col.end(), lo) - col.begin();
        const std::int64_t h = std::lower_bound(col.begin() + l, col.end(), hi) - col.begin();
        ASSERT_EQ(got.lo_at, l) << "trial " << trial << " [" << lo << ", " << hi << ")";
        ASSERT_EQ(got.hi_at, h) << "trial " << trial << " [" << lo << ", " << hi << ")";
      }
    }
  }
}

bool in_part(gidx_t c, gidx_t lo, gidx_t hi, bool inside) {
  return (c >= lo && c < hi) == inside;
}

std::vector<float> ref_spmm(const CsrMatrix& a, gidx_t lo, gidx_t hi, bool inside,
                            const std::vector<float>& b, int k, std::vector<float> c,
                            bool accumulate) {
  for (gidx_t r = 0; r < a.n_rows; ++r) {
    std::vector<double> acc(static_cast<std::size_t>(k), 0.0);
    for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
      if (!in_part(a.col_idx[j], lo, hi, inside)) continue;
      for (int kk = 0; kk < k; ++kk) acc[kk] += double(a.values[j]) * b[a.col_idx[j] * k + kk];
    }
    for (int kk = 0; kk < k; ++kk) {
      float& out = c[r * k + kk];
      out = static_cast<float>(accumulate ? out + acc[kk] : acc[kk]);
    }
  }
  return c;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double tol = 1e-4 * std::max(1.0, std::abs(double(want[i])));
    if (std::abs(double(got[i]) - want[i]) > tol) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
      ++bad;
    }
  }
}

struct Case {
  gidx_t lo, hi;
  bool inside;
};

TEST(CsrKernels, SpmmPartsMatchTheReferenceForEveryKAndIsa) {
  test::RandomCsrSpec spec;
  spec.n_rows = 700;  // several row chunks
  spec.n_cols = 900;
  spec.max_row_nnz = 40;
  spec.empty_row_fraction = 0.2;
  spec.seed = 3;
  const CsrMatrix a = random_csr(spec);
  const std::vector<Case> cases = {{0, 900, true},    {0, 900, false}, {300, 600, true},
                                   {300, 600, false}, {0, 250, false}, {650, 900, false},
                                   {-5, 2000, true},  {450, 450, true}};
  for (const std::string& isa : supported_kernel_isas()) {
    set_kernel_isa(isa);
    for (int k : {1, 3, 16, 32, 128, 200}) {
      const auto b = random_dense(static_cast<std::size_t>(a.n_cols) * k, 11 + k);
      const DenseConstView view{b.data(), 0, k, a.n_cols};
      for (const Case& cs : cases) {
        for (bool accumulate : {false, true}) {
          std::vector<float> c = random_dense(static_cast<std::size_t>(a.n_rows) * k, 5);
          const auto want = ref_spmm(a, cs.lo, cs.hi, cs.inside, b, k, c, accumulate);
          spmm_csr_columns(a, cs.lo, cs.hi, cs.inside, view, c.data(), k, k, accumulate);
          expect_close(c, want,
                       isa + " K=" + std::to_string(k) + " [" + std::to_string(cs.lo) + "," +
                           std::to_string(cs.hi) + ") " + (cs.inside ? "inside" : "outside") +
                           (accumulate ? " +=" : " ="));
        }
      }
    }
  }
  set_kernel_isa(supported_kernel_isas().back());
}

TEST(CsrKernels, ViewsOfOnlyThePartAreEnough) {
  test::RandomCsrSpec spec;
  spec.n_rows = 50;
  spec.n_cols = 400;
  spec.seed = 9;
  const CsrMatrix a = random_csr(spec);
  const int k = 16;
  const auto b = random_dense(static_cast<std::size_t>(a.n_cols) * k, 1);
  // Only rows [100, 300) of B, given as a view based at 100: the inside part [100, 300) reads
  // nothing else.
  const DenseConstView part{b.data() + 100 * k, 100, k, 200};
  std::vector<float> c(static_cast<std::size_t>(a.n_rows) * k);
  spmm_csr_columns(a, 100, 300, true, part, c.data(), k, k, false);
  expect_close(c, ref_spmm(a, 100, 300, true, b, k, std::vector<float>(c.size()), false), "part");
  // The outside part needs columns below 100 and above 300: the same view is refused.
  EXPECT_THROW(spmm_csr_columns(a, 100, 300, false, part, c.data(), k, k, false),
               std::invalid_argument);
  EXPECT_THROW(spmm_csr_columns(a, 0, 400, true, DenseConstView{b.data(), 0, k - 1, 400}, c.data(),
                                k, k, false),
               std::invalid_argument);
  EXPECT_THROW(
      spmm_csr_columns(a, 0, 400, true, DenseConstView{b.data(), 0, k, 400}, nullptr, k, k, false),
      std::invalid_argument);
}

TEST(CsrKernels, SddmmPartsWriteOnlyTheirNonzeros) {
  test::RandomCsrSpec spec;
  spec.n_rows = 300;
  spec.n_cols = 500;
  spec.max_row_nnz = 30;
  spec.seed = 4;
  const CsrMatrix a = random_csr(spec);
  for (int k : {1, 16, 7}) {
    const auto x = random_dense(static_cast<std::size_t>(a.n_rows) * k, 2);
    const auto y = random_dense(static_cast<std::size_t>(a.n_cols) * k, 3);
    const DenseConstView yv{y.data(), 0, k, a.n_cols};
    std::vector<float> out(static_cast<std::size_t>(a.nnz()), -7.0f);
    sddmm_csr_columns(a, 100, 350, true, x.data(), k, yv, k, out.data());
    for (gidx_t r = 0; r < a.n_rows; ++r) {
      for (std::int64_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
        const gidx_t c = a.col_idx[j];
        if (c >= 100 && c < 350) {
          double dot = 0;
          for (int kk = 0; kk < k; ++kk) dot += double(x[r * k + kk]) * y[c * k + kk];
          EXPECT_NEAR(out[j], a.values[j] * dot, 1e-4 * std::max(1.0, std::abs(dot)));
        } else {
          EXPECT_EQ(out[j], -7.0f) << "nonzero outside the part written";
        }
      }
    }
    // The other part completes the output.
    sddmm_csr_columns(a, 100, 350, false, x.data(), k, yv, k, out.data());
    for (float v : out) EXPECT_NE(v, -7.0f);
  }
}

int g_ticks = 0;
void count_tick(void*) {
  ++g_ticks;
}

TEST(CsrKernels, TheProgressHookRunsBetweenRowChunks) {
  test::RandomCsrSpec spec;
  spec.n_rows = 2000;
  spec.n_cols = 100;
  const CsrMatrix a = random_csr(spec);
  const auto b = random_dense(static_cast<std::size_t>(a.n_cols) * 16, 1);
  std::vector<float> c(static_cast<std::size_t>(a.n_rows) * 16);
  g_ticks = 0;
  {
    ScopedProgressHook hook(ProgressHook{&count_tick, nullptr});
    spmm_csr_columns(a, 0, 100, true, DenseConstView{b.data(), 0, 16, 100}, c.data(), 16, 16,
                     false);
  }
  EXPECT_GE(g_ticks, 1);
  const int seen = g_ticks;
  spmm_csr_columns(a, 0, 100, true, DenseConstView{b.data(), 0, 16, 100}, c.data(), 16, 16, false);
  EXPECT_EQ(g_ticks, seen) << "no hook outside the scope";
}

}  // namespace
}  // namespace netsparse
