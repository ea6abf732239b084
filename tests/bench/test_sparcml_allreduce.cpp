// The SparCML-style baseline of bench_allreduce (bench/sparcml_allreduce.hpp) against a
// sequential reference, on real mpirun processes: every rank computes every rank's input
// (unsorted, with repeats), so each checks its own result byte for byte (integer-valued sums:
// any order gives the same bits). Densities on both sides of the switch, the switch forced at
// the input and never taken, every rank count's pairing (np 2, 3, 5: a power of two and the
// extra ranks' hand-over).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "mpi_test_util.hpp"
#include "sparcml_allreduce.hpp"

namespace {

using netsparse::bench::sparcml_allreduce;
using netsparse::bench::SparcmlResult;
using netsparse::bench::SparcmlScratch;
using netsparse::test::world_rank;
using netsparse::test::world_size;

struct Input {
  std::vector<std::uint64_t> idx;
  std::vector<float> val;
};

// Rank r's entries: about density * n random indices in random order, a tenth of them repeated.
Input input_of(int r, std::uint64_t n, double density, unsigned seed) {
  std::mt19937_64 rng(seed * 7919u + static_cast<unsigned>(r) * 104729u + 1);
  Input in;
  const std::size_t m = static_cast<std::size_t>(density * static_cast<double>(n));
  for (std::size_t k = 0; k < m && n > 0; ++k) {
    in.idx.push_back(rng() % n);
    in.val.push_back(static_cast<float>(rng() % 9 + 1));
    if (rng() % 10 == 0) {
      in.idx.push_back(in.idx.back());
      in.val.push_back(static_cast<float>(rng() % 5 + 1));
    }
  }
  return in;
}

// Runs the baseline on this rank's input and checks the result against the sum of every rank's
// input computed here; returns the result (for checks of its representation). Rank r's density
// is density * (1 + r) when rank_scaled.
SparcmlResult check_against_reference(std::uint64_t n, double density, unsigned seed,
                                      double dense_fraction = 0.5, bool rank_scaled = false) {
  const int P = world_size(), me = world_rank();
  std::vector<float> reference(n, 0.0f);
  std::vector<char> touched(n, 0);
  Input mine;
  for (int r = 0; r < P; ++r) {
    Input in = input_of(r, n, rank_scaled ? density * (1 + r) : density, seed);
    for (std::size_t k = 0; k < in.idx.size(); ++k) {
      reference[in.idx[k]] += in.val[k];
      touched[in.idx[k]] = 1;
    }
    if (r == me) mine = std::move(in);
  }
  std::vector<float> dense(n, -1.0f);  // garbage the baseline must overwrite when dense
  SparcmlResult res;
  SparcmlScratch scratch;
  sparcml_allreduce(MPI_COMM_WORLD, n, mine.idx.size(), mine.idx.data(), mine.val.data(),
                    dense.data(), res, scratch, dense_fraction);
  if (res.dense) {
    EXPECT_EQ(dense, reference) << "n " << n << " density " << density << " switch at "
                                << dense_fraction;
  } else {
    std::vector<std::uint32_t> want_idx;
    std::vector<float> want_val;
    for (std::uint64_t i = 0; i < n; ++i)
      if (touched[i]) {
        want_idx.push_back(static_cast<std::uint32_t>(i));
        want_val.push_back(reference[i]);
      }
    EXPECT_EQ(res.idx, want_idx) << "n " << n << " density " << density;
    EXPECT_EQ(res.val, want_val) << "n " << n << " density " << density;
  }
  // Every rank ends with the same representation.
  int dense_here = res.dense ? 1 : 0, lo = 0, hi = 0;
  MPI_Allreduce(&dense_here, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&dense_here, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks disagree on the result's representation";
  return res;
}

TEST(SparcmlAllreduce, SparseThroughoutAtLowDensity) {
  const SparcmlResult res = check_against_reference(100000, 0.001, 1);
  EXPECT_FALSE(res.dense);
}

TEST(SparcmlAllreduce, SwitchesToDensePastBreakEven) {
  // 30 % per rank: the union passes 1/2 within the doubling at np >= 3 (sparse at np 2).
  check_against_reference(20000, 0.3, 2);
  // 150 % drawn with repeats (78 % distinct) per rank: dense from the input on.
  const SparcmlResult res = check_against_reference(20000, 1.5, 3);
  EXPECT_TRUE(res.dense);
  EXPECT_EQ(res.dense_from_step, 0);
}

TEST(SparcmlAllreduce, MixedRepresentationsAcrossPartners) {
  // A low threshold: ranks whose own input passes it go dense at once, the others do not, so
  // the steps mix a dense and a sparse partner.
  for (double fraction : {0.0, 0.0004, 0.002, 0.05, 2.0})
    check_against_reference(50000, 0.001, 4, fraction, true);
  if (world_size() > 1) {
    const SparcmlResult res = check_against_reference(50000, 0.3, 5, 2.0);
    EXPECT_FALSE(res.dense);  // never dense past a threshold above 1
  }
}

TEST(SparcmlAllreduce, EmptyAndTinyVectors) {
  check_against_reference(1, 1.0, 6);
  check_against_reference(7, 0.0, 7);  // no entries anywhere
  check_against_reference(0, 0.0, 8);
}

TEST(SparcmlAllreduce, RefusesAnIndexOutOfRange) {
  const std::uint64_t idx[] = {3, 10};
  const float val[] = {1, 2};
  std::vector<float> dense(10);
  SparcmlResult res;
  SparcmlScratch scratch;
  EXPECT_THROW(sparcml_allreduce(MPI_COMM_WORLD, 10, 2, idx, val, dense.data(), res, scratch),
               std::invalid_argument);
}

}  // namespace
