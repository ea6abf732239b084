// task-packets' ways per owner pair (exchange_task.cpp) and the two decisions of their tuning
// by measurement (DistOptions::tune_owners), kept apart from the exchange so a trace of measured
// costs can be replayed into them (tests/distributed/test_task_packets.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace netsparse::dist::task {

// An owner pair's way (the setup announcement's first word).
enum class Way : std::uint32_t {
  rows = 0,   // the distinct rows needed, packed by the owner (inspector-executor's fetch)
  tasks = 1,  // task packets to the owner, partial sums back
  block = 2,  // the owner's whole block, sent from its operand without packing
};
inline constexpr std::array<Way, 3> kWays{Way::rows, Way::tasks, Way::block};  // trial order
inline constexpr double kNotMeasured = std::numeric_limits<double>::infinity();

// Per owner, the way of lowest measured cost among `tried` (costs indexed by Way; a way not
// measured for that owner is kNotMeasured); ties and owners with nothing measured go to the
// earlier way in `tried`, else rows.
[[nodiscard]] inline std::vector<Way> cheapest_ways(std::span<const std::array<double, 3>> cost,
                                                    std::span<const Way> tried) {
  std::vector<Way> mix(cost.size(), Way::rows);
  for (std::size_t i = 0; i < cost.size(); ++i) {
    double best = kNotMeasured;
    for (const Way w : tried) {
      const double c = cost[i][static_cast<std::size_t>(w)];
      if (c < best) {
        best = c;
        mix[i] = w;
      }
    }
  }
  return mix;
}

// What a change of ways must win before it is kept: the trials' medians on this 2-core machine
// spread by a few per cent between runs of the same ways (docs/benchmarks.md, "Per owner pair").
inline constexpr double kKeepMargin = 0.05;

// `slowest`: the slowest rank's median run per trial round -- the default ways (the bytes
// model) first, then each uniform way, then the mix. The round kept: the fastest, if it beats
// the default by at least `margin` (ties to the earlier round); else the default (0).
[[nodiscard]] inline std::size_t kept_trial(std::span<const double> slowest,
                                            double margin = kKeepMargin) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < slowest.size(); ++i) {
    if (slowest[i] < slowest[best]) best = i;
  }
  return slowest[best] <= (1.0 - margin) * slowest[0] ? best : 0;
}

}  // namespace netsparse::dist::task
