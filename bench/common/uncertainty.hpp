// How sure a benchmark's numbers are: quantiles, bootstrap intervals of a median and of a ratio
// of medians, and the verdict a comparison of two modes may state ("faster", "slower", "within
// noise") decided from the ratio's interval, not from two medians (docs/benchmarks.md,
// "Verdicts and their uncertainty"). No MPI: every function works on the samples rank 0 holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace netsparse::bench {

// The q-quantile of `v` (0 <= q <= 1), interpolated linearly between order statistics (R's
// type 7: q = 0.5 is the median, 0.25 / 0.75 the quartiles). NaNs are left out; 0 when nothing
// is left.
double quantile(std::vector<double> v, double q);

struct Interval {
  double lo = 0, hi = 0;
};

// The bootstrap's fixed settings: the same samples always give the same interval.
inline constexpr std::uint64_t kBootstrapSeed = 0x6e65747370617273ULL;
inline constexpr int kBootstrapResamples = 2000;
inline constexpr double kConfidence = 0.95;
// The fewest samples a verdict is drawn from. Per-iteration times: below 6 no distribution-free
// 95 % interval for a median exists (all n samples fall on one side of it with probability
// 2 x 0.5^n >= 0.0625 for n <= 5). One-off costs (setup, first run: one sample per round): 3.
inline constexpr std::size_t kMinIterations = 6;
inline constexpr std::size_t kMinOnceSamples = 3;

// Groups of samples (a mode's per-iteration times, its setups, ...). `statistic` sees one
// resample of every group: each group drawn independently, with replacement, at its own size.
using SampleGroups = std::vector<std::vector<double>>;
using Statistic = std::function<double(const SampleGroups&)>;

// The percentile bootstrap interval of `statistic` at `level`, over `resamples` resamples drawn
// with a generator seeded with `seed` (splitmix64; the draws do not depend on the standard
// library). Empty groups stay empty.
Interval bootstrap_interval(const SampleGroups& groups, const Statistic& statistic,
                            double level = kConfidence, int resamples = kBootstrapResamples,
                            std::uint64_t seed = kBootstrapSeed);

// The bootstrap interval of the median of `x` ({m, m} for a single sample).
Interval median_interval(const std::vector<double>& x);

enum class Verdict { faster, slower, within_noise, too_few_samples };
const char* to_string(Verdict v);

// A comparison of A against B: ratio = A's statistic / B's (< 1: A takes less time), its
// interval and what it allows to say about A.
struct RatioVerdict {
  double ratio = 0;
  Interval ci;
  Verdict verdict = Verdict::too_few_samples;
};

// The verdict of a ratio of times (A / B) whose interval is `ci`: "faster" when the whole
// interval lies below 1, "slower" when it lies above 1, else "within noise"; "too few samples"
// when `enough` is false.
Verdict decide(Interval ci, bool enough);

// A's time against B's from their per-iteration samples: the ratio of the medians, bootstrapped
// by resampling each side's pooled iterations; too few samples below kMinIterations on a side.
RatioVerdict compare_medians(const std::vector<double>& a, const std::vector<double>& b);

// The general form: `ratio` computes A / B from the groups (A's first, B's after them, as the
// caller arranges); `enough` says whether the groups hold enough samples for a verdict.
RatioVerdict compare_ratio(const SampleGroups& groups, const Statistic& ratio, bool enough);

// The ratio's farthest distance from 1 within its interval, in percent: the "x" of "within
// noise (±x %)".
double noise_percent(const RatioVerdict& v);

// The words for A against B, before B's name: "1.08x faster (1.02-1.15x) than",
// "1.21x slower (1.10-1.33x) than", "within noise (±4.1 %) of", "not resolved (too few samples)
// against".
std::string describe(const RatioVerdict& v);

// The same without the object's preposition, for lists: "1.08x faster (1.02-1.15x)", "within
// noise (±4.1 %)", "not resolved (too few samples)".
std::string describe_short(const RatioVerdict& v);

}  // namespace netsparse::bench
