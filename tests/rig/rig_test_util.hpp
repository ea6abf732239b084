// Helpers shared by the RIG engine tests: property contents that are a function of (global row,
// byte) so that any misplaced, truncated or stale byte is caught; partitions; index streams with
// heavy duplication; waiting for completions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "netsparse/netsparse.hpp"

namespace rigtest {

// ns_stats_json whole (netsparse::stats_json: retried until it fits, since a progress thread may
// change the statistics between the size query and the copy). Empty on an error.
inline std::string stats_json_text(const ns_context* ctx) {
  try {
    return netsparse::stats_json(ctx);
  } catch (const netsparse::Error&) {
    return {};
  }
}

// Byte b of global row r. Rows differ in (almost) every byte, so a property written to the wrong
// place, or one byte off, is caught.
inline std::uint8_t prop_byte(std::uint64_t row, std::uint32_t b) {
  std::uint64_t x =
      (row + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t{b} + 7) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<std::uint8_t>(x);
}

// The local block [begin, end) of the property array.
inline std::vector<std::uint8_t> make_block(std::uint64_t begin, std::uint64_t end,
                                            std::uint32_t P) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>((end - begin) * P));
  for (std::uint64_t r = begin; r < end; ++r) {
    for (std::uint32_t b = 0; b < P; ++b) v[(r - begin) * P + b] = prop_byte(r, b);
  }
  return v;
}

// Empty string when the P bytes at p are row's property; otherwise a description of the mismatch.
inline std::string check_prop(const std::uint8_t* p, std::uint64_t row, std::uint32_t P) {
  for (std::uint32_t b = 0; b < P; ++b) {
    if (p[b] != prop_byte(row, b)) {
      return "row " + std::to_string(row) + " byte " + std::to_string(b) + ": got " +
             std::to_string(p[b]) + ", want " + std::to_string(prop_byte(row, b));
    }
  }
  return {};
}

// Equal blocks (ceil(total / nodes) each, last one shorter).
inline std::vector<std::uint64_t> equal_offsets(int nodes, std::uint64_t total) {
  const std::uint64_t b =
      (total + static_cast<std::uint64_t>(nodes) - 1) / static_cast<std::uint64_t>(nodes);
  std::vector<std::uint64_t> off(static_cast<std::size_t>(nodes) + 1);
  for (int p = 0; p <= nodes; ++p)
    off[static_cast<std::size_t>(p)] =
        std::min<std::uint64_t>(b * static_cast<std::uint64_t>(p), total);
  return off;
}

// Uneven blocks (some possibly empty), reproducible from seed.
inline std::vector<std::uint64_t> uneven_offsets(int nodes, std::uint64_t total,
                                                 std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> cuts(static_cast<std::size_t>(nodes) - 1);
  for (auto& c : cuts) c = rng() % (total + 1);
  std::sort(cuts.begin(), cuts.end());
  if (nodes > 2) cuts[1] = cuts[0];  // one empty block
  std::vector<std::uint64_t> off{0};
  off.insert(off.end(), cuts.begin(), cuts.end());
  off.push_back(total);
  return off;
}

// count idxs in [0, total): about half from a hot set of `hot` rows, the rest uniform.
inline std::vector<std::uint64_t> dup_heavy_idx(std::uint64_t total, std::size_t count,
                                                std::size_t hot, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> hot_rows(hot);
  for (auto& h : hot_rows) h = rng() % total;
  std::vector<std::uint64_t> idx(count);
  for (auto& i : idx) i = (rng() & 1) != 0 ? hot_rows[rng() % hot] : rng() % total;
  return idx;
}

// Waits for exactly n completions (at most timeout_ms each); fails the test on a hang.
inline std::vector<ns_wc> wait_completions(ns_cq* cq, std::size_t n, int timeout_ms = 20000) {
  std::vector<ns_wc> all;
  ns_wc wc[16];
  while (all.size() < n) {
    const int want = static_cast<int>(std::min<std::size_t>(16, n - all.size()));
    const int got = ns_cq_wait(cq, want, wc, timeout_ms);
    if (got < 0) {
      ADD_FAILURE() << "ns_cq_wait: " << ns_status_str(got) << " " << ns_last_error();
      break;
    }
    if (got == 0) {
      ADD_FAILURE() << "no completion within " << timeout_ms << " ms (" << all.size() << "/" << n
                    << " received)";
      break;
    }
    all.insert(all.end(), wc, wc + got);
  }
  return all;
}

inline std::uint64_t stat(const ns_context* ctx, int which) {
  return ns_stat_get(ctx, which);
}

}  // namespace rigtest
