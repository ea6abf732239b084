#include "uncertainty.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace netsparse::bench {

namespace {

// splitmix64: a fixed, portable stream (std::uniform_int_distribution differs between
// standard libraries, so the same seed would not give the same interval everywhere).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // An index in [0, n): the high half of a 64 x 64-bit product (Lemire's multiply-shift).
  std::size_t below(std::size_t n) {
    return static_cast<std::size_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
};

std::string ratio_words(const RatioVerdict& v) {
  char buf[96];
  if (v.verdict == Verdict::faster) {
    std::snprintf(buf, sizeof buf, "%.2fx faster (%.2f-%.2fx)", 1 / v.ratio, 1 / v.ci.hi,
                  1 / v.ci.lo);
  } else if (v.verdict == Verdict::slower) {
    std::snprintf(buf, sizeof buf, "%.2fx slower (%.2f-%.2fx)", v.ratio, v.ci.lo, v.ci.hi);
  } else if (v.verdict == Verdict::within_noise) {
    std::snprintf(buf, sizeof buf, "within noise (±%.1f %%)", noise_percent(v));
  } else {
    std::snprintf(buf, sizeof buf, "not resolved (too few samples)");
  }
  return buf;
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  // NaN has no place in an order (std::sort's comparisons would be inconsistent and may run past
  // the ends): a 0 / 0 of a bootstrap resample drawing only zero times is left out.
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const std::size_t below = static_cast<std::size_t>(std::floor(pos));
  const std::size_t above = std::min(below + 1, v.size() - 1);
  // Equal neighbours first: between two infinities (x / 0 resamples) the interpolation is NaN.
  if (v[above] == v[below]) return v[below];
  return v[below] + (pos - static_cast<double>(below)) * (v[above] - v[below]);
}

Interval bootstrap_interval(const SampleGroups& groups, const Statistic& statistic, double level,
                            int resamples, std::uint64_t seed) {
  SplitMix64 rng{seed};
  SampleGroups drawn(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) drawn[g].resize(groups[g].size());
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(std::max(resamples, 1)));
  for (int r = 0; r < std::max(resamples, 1); ++r) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::vector<double>& from = groups[g];
      for (double& x : drawn[g]) x = from[rng.below(from.size())];
    }
    values.push_back(statistic(drawn));
  }
  const double tail = (1 - level) / 2;
  return {quantile(values, tail), quantile(values, 1 - tail)};
}

Interval median_interval(const std::vector<double>& x) {
  return bootstrap_interval({x}, [](const SampleGroups& g) { return quantile(g[0], 0.5); });
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::faster:
      return "faster";
    case Verdict::slower:
      return "slower";
    case Verdict::within_noise:
      return "within noise";
    case Verdict::too_few_samples:
      return "too few samples";
  }
  return "?";
}

Verdict decide(Interval ci, bool enough) {
  if (!enough) return Verdict::too_few_samples;
  if (ci.hi < 1) return Verdict::faster;
  if (ci.lo > 1) return Verdict::slower;
  return Verdict::within_noise;
}

RatioVerdict compare_ratio(const SampleGroups& groups, const Statistic& ratio, bool enough) {
  RatioVerdict v;
  v.ratio = ratio(groups);
  v.ci = bootstrap_interval(groups, ratio);
  v.verdict = decide(v.ci, enough && std::isfinite(v.ratio) && v.ratio > 0);
  return v;
}

RatioVerdict compare_medians(const std::vector<double>& a, const std::vector<double>& b) {
  const bool enough = a.size() >= kMinIterations && b.size() >= kMinIterations;
  return compare_ratio(
      {a, b}, [](const SampleGroups& g) { return quantile(g[0], 0.5) / quantile(g[1], 0.5); },
      enough);
}

double noise_percent(const RatioVerdict& v) {
  return 100 * std::max(v.ci.hi - 1, 1 - v.ci.lo);
}

std::string describe_short(const RatioVerdict& v) {
  return ratio_words(v);
}

std::string describe(const RatioVerdict& v) {
  switch (v.verdict) {
    case Verdict::faster:
    case Verdict::slower:
      return ratio_words(v) + " than";
    case Verdict::within_noise:
      return ratio_words(v) + " of";
    case Verdict::too_few_samples:
      break;
  }
  return ratio_words(v) + " against";
}

}  // namespace netsparse::bench
