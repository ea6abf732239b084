// The STREAM triad the single-node benchmarks measure as their memory-bandwidth yardstick, and
// their stopwatch. Header-only on purpose: the triad is compiled with its benchmark's own flags
// (-O3, OpenMP), as the kernels it is compared with are.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>

namespace netsparse::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// a = b + 3 c over three arrays of 2^24 doubles (3 x 128 MiB: 12x a 32 MiB L3), first touched
// by the threads that use their pages; the best of 20 repetitions, in GB/s (24 bytes an element).
inline double stream_triad_gbs() {
  const std::size_t n = std::size_t{1} << 24;
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  const double s = 3.0;
  double best = 1e30;
  for (int rep = 0; rep < 20; ++rep) {
    const Clock::time_point t0 = Clock::now();
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    best = std::min(best, seconds_since(t0));
  }
  if (a[n / 2] != 7.0) std::fprintf(stderr, "triad: wrong result %g\n", a[n / 2]);
  return 24.0 * static_cast<double>(n) / best / 1e9;
}

}  // namespace netsparse::bench
