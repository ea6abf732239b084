// bench/common/uncertainty.hpp: the quantiles, bootstrap intervals and verdicts netsparse_bench
// reports. Fixed synthetic samples only: no timing is measured or asserted.
#include "uncertainty.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

namespace nb = netsparse::bench;

namespace {

// n samples around `centre`, spread +-`spread` (relative) by a fixed, uneven pattern.
std::vector<double> samples(double centre, double spread, int n, unsigned salt = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const double u = std::fmod(0.618033988749895 * (i + 1 + salt * 7), 1.0);  // in [0, 1)
    v.push_back(centre * (1 + spread * (2 * u - 1)));
  }
  return v;
}

TEST(Uncertainty, QuantileInterpolatesBetweenOrderStatistics) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(nb::quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(nb::quantile(v, 1.0), 4);
  EXPECT_DOUBLE_EQ(nb::quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(nb::quantile(v, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(nb::quantile({7}, 0.9), 7);
  EXPECT_DOUBLE_EQ(nb::quantile({}, 0.5), 0);
}

TEST(Uncertainty, MedianIntervalContainsTheMedian) {
  for (int n : {1, 2, 6, 15, 40}) {
    for (double spread : {0.0, 0.02, 0.3}) {
      const std::vector<double> v = samples(2.5e-3, spread, n);
      const double m = nb::quantile(v, 0.5);
      const nb::Interval ci = nb::median_interval(v);
      EXPECT_LE(ci.lo, m) << "n " << n << " spread " << spread;
      EXPECT_GE(ci.hi, m) << "n " << n << " spread " << spread;
      EXPECT_GE(ci.lo, nb::quantile(v, 0.0));
      EXPECT_LE(ci.hi, nb::quantile(v, 1.0));
    }
  }
  // A single sample: no spread to speak of.
  const nb::Interval one = nb::median_interval({3.0});
  EXPECT_EQ(one.lo, 3.0);
  EXPECT_EQ(one.hi, 3.0);
}

TEST(Uncertainty, IntervalWidensWithSpreadAndLevel) {
  const nb::Interval narrow = nb::median_interval(samples(1.0, 0.01, 30));
  const nb::Interval wide = nb::median_interval(samples(1.0, 0.2, 30));
  EXPECT_LT(narrow.hi - narrow.lo, wide.hi - wide.lo);
  const auto med = [](const nb::SampleGroups& g) { return nb::quantile(g[0], 0.5); };
  const std::vector<double> v = samples(1.0, 0.2, 30);
  const nb::Interval at80 = nb::bootstrap_interval({v}, med, 0.80);
  const nb::Interval at99 = nb::bootstrap_interval({v}, med, 0.99);
  EXPECT_LT(at80.hi - at80.lo, at99.hi - at99.lo);
}

TEST(Uncertainty, SameSeedSameInterval) {
  const std::vector<double> a = samples(1.0, 0.1, 20), b = samples(1.03, 0.1, 20, 3);
  const nb::RatioVerdict x = nb::compare_medians(a, b), y = nb::compare_medians(a, b);
  EXPECT_EQ(x.ci.lo, y.ci.lo);
  EXPECT_EQ(x.ci.hi, y.ci.hi);
  const auto ratio = [](const nb::SampleGroups& g) {
    return nb::quantile(g[0], 0.5) / nb::quantile(g[1], 0.5);
  };
  const nb::Interval other = nb::bootstrap_interval({a, b}, ratio, 0.95, 2000, 12345);
  EXPECT_TRUE(other.lo != x.ci.lo || other.hi != x.ci.hi) << "the seed is not used";
}

TEST(Uncertainty, IdenticalSamplesAreWithinNoise) {
  for (double spread : {0.0, 0.01, 0.1, 0.5}) {
    const std::vector<double> a = samples(4e-3, spread, 15);
    const nb::RatioVerdict v = nb::compare_medians(a, a);
    EXPECT_EQ(v.verdict, nb::Verdict::within_noise) << "spread " << spread;
    EXPECT_DOUBLE_EQ(v.ratio, 1.0);
    EXPECT_LE(v.ci.lo, 1.0);
    EXPECT_GE(v.ci.hi, 1.0);
    EXPECT_GE(nb::noise_percent(v), 0.0);
    EXPECT_EQ(nb::describe(v).rfind("within noise (±", 0), 0u) << nb::describe(v);
  }
}

TEST(Uncertainty, ClearlySeparatedSamplesAreFasterOrSlower) {
  const std::vector<double> fast = samples(2.0e-3, 0.05, 15), slow = samples(3.0e-3, 0.05, 15, 5);
  const nb::RatioVerdict f = nb::compare_medians(fast, slow);
  EXPECT_EQ(f.verdict, nb::Verdict::faster);
  EXPECT_LT(f.ci.hi, 1.0);
  EXPECT_LE(f.ci.lo, f.ratio);
  EXPECT_GE(f.ci.hi, f.ratio);
  EXPECT_NE(nb::describe(f).find("x faster ("), std::string::npos) << nb::describe(f);
  EXPECT_EQ(nb::describe(f).substr(nb::describe(f).size() - 5), " than") << nb::describe(f);
  const nb::RatioVerdict s = nb::compare_medians(slow, fast);
  EXPECT_EQ(s.verdict, nb::Verdict::slower);
  EXPECT_GT(s.ci.lo, 1.0);
  EXPECT_NE(nb::describe(s).find("slower"), std::string::npos) << nb::describe(s);
}

TEST(Uncertainty, OverlappingSamplesWithASmallShiftAreWithinNoise) {
  // 2 % apart with a +-30 % spread: no verdict may be drawn.
  const nb::RatioVerdict v = nb::compare_medians(samples(1.0, 0.3, 10), samples(1.02, 0.3, 10, 2));
  EXPECT_EQ(v.verdict, nb::Verdict::within_noise);
}

TEST(Uncertainty, TooFewSamplesGiveNoVerdict) {
  const std::vector<double> five_fast = samples(1.0, 0.01, 5), slow = samples(2.0, 0.01, 30);
  EXPECT_EQ(nb::compare_medians(five_fast, slow).verdict, nb::Verdict::too_few_samples);
  EXPECT_EQ(nb::compare_medians(slow, five_fast).verdict, nb::Verdict::too_few_samples);
  const std::vector<double> six_fast = samples(1.0, 0.01, 6);
  EXPECT_EQ(nb::compare_medians(six_fast, slow).verdict, nb::Verdict::faster);
  EXPECT_EQ(nb::describe(nb::compare_medians(five_fast, slow)),
            "not resolved (too few samples) against");
}

TEST(Uncertainty, DecideReadsTheWholeInterval) {
  EXPECT_EQ(nb::decide({0.90, 0.99}, true), nb::Verdict::faster);
  EXPECT_EQ(nb::decide({1.01, 1.20}, true), nb::Verdict::slower);
  EXPECT_EQ(nb::decide({0.95, 1.00}, true), nb::Verdict::within_noise);
  EXPECT_EQ(nb::decide({0.99, 1.05}, true), nb::Verdict::within_noise);
  EXPECT_EQ(nb::decide({0.5, 0.6}, false), nb::Verdict::too_few_samples);
  nb::RatioVerdict v;
  v.ratio = 1.01;
  v.ci = {0.97, 1.04};
  v.verdict = nb::Verdict::within_noise;
  EXPECT_NEAR(nb::noise_percent(v), 4.0, 1e-9);
  EXPECT_EQ(nb::describe_short(v), "within noise (±4.0 %)");
}

TEST(Uncertainty, GeneralRatioResamplesEveryGroup) {
  // A / B where A = setup + 10 x median(iterations): the setups decide here.
  const std::vector<double> a_setup = samples(10.0, 0.01, 3), a_iter = samples(1.0, 0.01, 10);
  const std::vector<double> b_setup = samples(20.0, 0.01, 3, 1), b_iter = samples(1.0, 0.01, 10, 2);
  const auto ratio = [](const nb::SampleGroups& g) {
    return (nb::quantile(g[0], 0.5) + 10 * nb::quantile(g[1], 0.5)) /
           (nb::quantile(g[2], 0.5) + 10 * nb::quantile(g[3], 0.5));
  };
  const nb::RatioVerdict v = nb::compare_ratio({a_setup, a_iter, b_setup, b_iter}, ratio, true);
  EXPECT_NEAR(v.ratio, 20.0 / 30.0, 0.01);
  EXPECT_EQ(v.verdict, nb::Verdict::faster);
  EXPECT_LE(v.ci.lo, v.ratio);
  EXPECT_GE(v.ci.hi, v.ratio);
}

// The cases issue 36 names, at the sample counts netsparse_bench pools: one round's 10 iterations
// and the default 5 rounds' 50. "Spread" is the half-width of the uniform pattern samples() draws
// from, so the interquartile range is about the spread: +-10 % is an IQR of ~10 %.
TEST(Uncertainty, ThreePercentInsideATenPercentSpreadIsWithinNoise) {
  for (int n : {10, 50}) {
    const std::vector<double> a = samples(1.00e-3, 0.10, n), b = samples(1.03e-3, 0.10, n, 4);
    const double iqr = (nb::quantile(a, 0.75) - nb::quantile(a, 0.25)) / nb::quantile(a, 0.5);
    EXPECT_GT(iqr, 0.08) << "n " << n;  // the spread is what the test says it is
    for (const nb::RatioVerdict& v : {nb::compare_medians(a, b), nb::compare_medians(b, a)}) {
      EXPECT_EQ(v.verdict, nb::Verdict::within_noise)
          << "n " << n << ": ratio " << v.ratio << " [" << v.ci.lo << ", " << v.ci.hi << "]";
      EXPECT_GE(nb::noise_percent(v), 3.0) << "the interval must reach past the 3 % difference";
      EXPECT_EQ(nb::describe_short(v).rfind("within noise (±", 0), 0u) << nb::describe_short(v);
    }
  }
}

TEST(Uncertainty, ACleanTwentyPercentWithATwoPercentSpreadIsFasterOrSlower) {
  for (int n : {10, 50}) {
    const std::vector<double> fast = samples(1.0e-3, 0.02, n), slow = samples(1.2e-3, 0.02, n, 4);
    const nb::RatioVerdict f = nb::compare_medians(fast, slow), s = nb::compare_medians(slow, fast);
    EXPECT_EQ(f.verdict, nb::Verdict::faster) << "n " << n;
    EXPECT_EQ(s.verdict, nb::Verdict::slower) << "n " << n;
    EXPECT_NEAR(f.ratio, 1 / 1.2, 0.02);
    EXPECT_NEAR(s.ratio, 1.2, 0.03);
    // The interval holds the ratio and stays within a few percent of it.
    EXPECT_LE(f.ci.lo, f.ratio);
    EXPECT_GE(f.ci.hi, f.ratio);
    EXPECT_LT(f.ci.hi - f.ci.lo, 0.06);
    EXPECT_EQ(nb::describe_short(s).substr(0, 13), "1.20x slower ") << nb::describe_short(s);
    EXPECT_EQ(nb::describe_short(f).substr(0, 13), "1.20x faster ") << nb::describe_short(f);
  }
}

TEST(Uncertainty, DegenerateInputs) {
  const std::vector<double> none, one = {1e-3}, ten = samples(1e-3, 0.05, 10);
  // Empty or a single sample on either side: no verdict, and the words say so.
  for (const auto& [a, b] : {std::pair{none, ten}, std::pair{ten, none}, std::pair{none, none},
                             std::pair{one, ten}, std::pair{one, one}}) {
    const nb::RatioVerdict v = nb::compare_medians(a, b);
    EXPECT_EQ(v.verdict, nb::Verdict::too_few_samples) << a.size() << " vs " << b.size();
    EXPECT_EQ(nb::describe_short(v), "not resolved (too few samples)");
  }
  EXPECT_EQ(nb::median_interval(none).lo, 0.0);
  EXPECT_EQ(nb::median_interval(none).hi, 0.0);
  // Zero spread: equal constants are within noise by nothing, different ones are resolved
  // exactly (every resample gives the same ratio).
  const std::vector<double> flat(10, 2e-3), flat_slower(10, 2.5e-3);
  const nb::RatioVerdict same = nb::compare_medians(flat, flat);
  EXPECT_EQ(same.verdict, nb::Verdict::within_noise);
  EXPECT_DOUBLE_EQ(nb::noise_percent(same), 0.0);
  EXPECT_EQ(nb::describe_short(same), "within noise (±0.0 %)");
  const nb::RatioVerdict apart = nb::compare_medians(flat, flat_slower);
  EXPECT_EQ(apart.verdict, nb::Verdict::faster);
  EXPECT_DOUBLE_EQ(apart.ci.lo, 0.8);
  EXPECT_DOUBLE_EQ(apart.ci.hi, 0.8);
  // All-zero times (a mode that did nothing): 0 / 0 is no ratio.
  const std::vector<double> zeros(10, 0.0);
  EXPECT_EQ(nb::compare_medians(zeros, zeros).verdict, nb::Verdict::too_few_samples);
  EXPECT_EQ(nb::compare_medians(ten, zeros).verdict, nb::Verdict::too_few_samples);
  // Mostly-zero times: some resamples are 0 / 0 (NaN), which the quantiles leave out; the
  // interval is still ordered and holds the ratio.
  std::vector<double> some_zero(11, 0.0);
  for (int i = 0; i < 6; ++i) some_zero[i] = 1e-3 * (1 + 0.01 * i);
  const nb::RatioVerdict mixed = nb::compare_medians(some_zero, some_zero);
  EXPECT_DOUBLE_EQ(mixed.ratio, 1.0);
  EXPECT_LE(mixed.ci.lo, 1.0);
  EXPECT_GE(mixed.ci.hi, 1.0);
  EXPECT_EQ(mixed.verdict, nb::Verdict::within_noise);
  EXPECT_DOUBLE_EQ(nb::quantile({std::nan(""), 3.0, 1.0}, 0.5), 2.0);
}

}  // namespace
