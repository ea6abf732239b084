// Dense tiles and the pipelined A (X W) of include/netsparse/dense_tiles.hpp, timed against the
// sparse tile kernel on this machine:
//   1. density sweep: a rows x rows block with uniformly random nonzeros at density d, every
//      tile dense (HybridMatrix with a threshold below d: all GEMM) against all sparse
//      (TiledMatrix): ns per nonzero and the ratio, per K and tile size. The crossover is the
//      density from which GEMM wins: the threshold to give HybridMatrix.
//   2. A (X W): X W first then SpMM, against X W per column panel just before the panel's SpMM,
//      on a banded block (a reordered graph's local block) and a uniformly random one.
//
//   bench_dense_tiles [--rows N] [--ks LIST] [--tiles LIST] [--min-time S]
// Times: best of rounds, each round at least --min-time seconds of repeated calls, on the
// threads OpenMP gives (OMP_NUM_THREADS).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "netsparse/dense_tiles.hpp"

namespace {

using netsparse::CsrMatrix;
using netsparse::gidx_t;

std::vector<int> int_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

// Seconds per call: best of 3 rounds of at least min_time each.
double time_call(const std::function<void()>& f, double min_time) {
  double best = 1e30;
  f();
  for (int round = 0; round < 3; ++round) {
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      f();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < min_time);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

// n x n; each entry present with probability d (band > 0: only within |r - c| < band).
CsrMatrix random_block(gidx_t n, double d, gidx_t band, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CsrMatrix m;
  m.n_rows = m.n_cols = m.n_rows_global = n;
  m.row_ptr.assign(1, 0);
  for (gidx_t r = 0; r < n; ++r) {
    const gidx_t lo = band > 0 ? std::max<gidx_t>(0, r - band + 1) : 0;
    const gidx_t hi = band > 0 ? std::min(n, r + band) : n;
    for (gidx_t c = lo; c < hi; ++c) {
      if (unit(rng) < d) {
        m.col_idx.push_back(c);
        m.values.push_back(unit(rng));
      }
    }
    m.row_ptr.push_back(std::ssize(m.col_idx));
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  gidx_t rows = 2048;
  std::vector<int> ks{16, 64}, tiles{32, 64, 128};
  double min_time = 0.05;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows") {
      rows = std::atoll(argv[i + 1]);
    } else if (a == "--ks") {
      ks = int_list(argv[i + 1]);
    } else if (a == "--tiles") {
      tiles = int_list(argv[i + 1]);
    } else if (a == "--min-time") {
      min_time = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bench_dense_tiles: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::printf("bench_dense_tiles: %lld x %lld blocks, f32, %d OpenMP threads\n",
              static_cast<long long>(rows), static_cast<long long>(rows), omp_get_max_threads());
  std::printf("\n1. every tile dense (GEMM) vs sparse tile kernel: ns per nonzero\n");
  std::printf("  %4s %5s %8s %10s %10s %8s\n", "K", "tile", "density", "sparse", "dense",
              "dense/sp");
  for (const int k : ks) {
    std::vector<float> b(static_cast<std::size_t>(rows * k), 0.5f), c(b.size());
    for (const int tile : tiles) {
      for (const double d : {0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0}) {
        const CsrMatrix m = random_block(rows, d, 0, 7);
        const netsparse::TiledMatrix sparse(m, {}, netsparse::ScalarType::f32);
        netsparse::DenseTileOptions o;
        o.tile_rows = tile;
        o.tile_cols = tile;
        o.min_density = d / 4;  // every tile dense
        const netsparse::HybridMatrix hybrid(m, o, netsparse::ScalarType::f32);
        const netsparse::DenseConstView view{b.data(), 0, k, rows};
        const double ts =
            time_call([&] { netsparse::spmm(sparse, view, c.data(), k, k, false); }, min_time);
        const double td =
            time_call([&] { netsparse::spmm(hybrid, view, c.data(), k, k, false); }, min_time);
        const double nnz = static_cast<double>(m.nnz());
        std::printf("  %4d %5d %8.2f %10.3f %10.3f %8.2f\n", k, tile, d, ts / nnz * 1e9,
                    td / nnz * 1e9, td / ts);
      }
    }
  }
  std::printf("\n2. A (X W), F = K: X W first vs per column panel (ms per product)\n");
  std::printf("  %-22s %4s %6s %10s %10s %8s\n", "block", "K", "panel", "whole", "pipelined",
              "pipe/whole");
  const gidx_t n = rows * 16;  // larger than the caches at K = 64: 32k rows x 256 B
  for (const int k : ks) {
    for (const auto& [name, band] : {std::pair<const char*, gidx_t>{"banded (reordered)", 64},
                                     std::pair<const char*, gidx_t>{"uniform random", 0}}) {
      const CsrMatrix m = random_block(n, band > 0 ? 10.0 / (2 * band) : 10.0 / n, band, 9);
      std::vector<float> x(static_cast<std::size_t>(n * k), 0.25f),
          w(static_cast<std::size_t>(k * k), 0.5f), c(static_cast<std::size_t>(n * k));
      std::vector<float> scratch;
      for (const gidx_t panel : {gidx_t{1024}, gidx_t{4096}}) {
        netsparse::TileConfig cfg;
        cfg.col_panel = panel;
        const netsparse::TiledMatrix a(m, cfg, netsparse::ScalarType::f32);
        const netsparse::DenseConstView xv{x.data(), 0, k, n};
        const double whole = time_call(
            [&] { netsparse::spmm_xw(a, xv, k, w.data(), k, c.data(), k, false, scratch); },
            min_time);
        const double piped = time_call(
            [&] { netsparse::spmm_xw(a, xv, k, w.data(), k, c.data(), k, true, scratch); },
            min_time);
        std::printf("  %-22s %4d %6lld %10.3f %10.3f %8.2f\n", name, k,
                    static_cast<long long>(panel), whole * 1e3, piped * 1e3, piped / whole);
      }
    }
  }
  return 0;
}
