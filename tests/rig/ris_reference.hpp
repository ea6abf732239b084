// What the scatter-reduce tests (in-process and mpirun) post and what they expect: value rows
// from a seed, update lists with heavy duplication, and the sequential reference of one node's
// rows (every node's WRs applied one record at a time, with the engine's own combine_row).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "netsparse/netsparse.h"
#include "rig/scatter_unit.hpp"
#include "rig_test_util.hpp"

namespace rigtest {

inline std::uint32_t elem_bytes(int datatype) {
  return datatype == NS_RIS_FLOAT32 || datatype == NS_RIS_INT32 ? 4 : 8;
}

// Element e of a value or initial row, from a seed. Floats are multiples of 1/4 in [-32, 32]:
// every sum of a few thousand of them is exact in fp32 and fp64, so the result does not depend
// on the order the owner receives packets in; integers are full-range (sums wrap, which is
// order-free too).
inline void fill_element(std::byte* at, int datatype, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  const double small = static_cast<double>(static_cast<std::int64_t>(x % 257) - 128) / 4.0;
  switch (datatype) {
    case NS_RIS_FLOAT32: {
      const auto v = static_cast<float>(small);
      std::memcpy(at, &v, 4);
      return;
    }
    case NS_RIS_FLOAT64:
      std::memcpy(at, &small, 8);
      return;
    case NS_RIS_INT32: {
      const auto v = static_cast<std::uint32_t>(x >> 7);
      std::memcpy(at, &v, 4);
      return;
    }
    default:
      std::memcpy(at, &x, 8);
  }
}

inline void fill_row(std::byte* row, std::uint32_t P, int datatype, std::uint64_t seed) {
  const std::uint32_t e = elem_bytes(datatype);
  for (std::uint32_t k = 0; k < P / e; ++k) fill_element(row + k * e, datatype, seed * 131 + k);
}

// The updates node `rank` posts as WR `w`: count idxs, about half from 8 hot rows (heavy
// duplication within and across WRs and nodes), the rest uniform; values from the seed.
struct Updates {
  std::vector<std::uint64_t> idx;
  std::vector<std::byte> values;
};
inline Updates make_updates(int rank, int w, std::uint64_t total, std::size_t count,
                            std::uint32_t P, int datatype) {
  Updates u;
  u.idx = dup_heavy_idx(total, count, 8, 1000u * static_cast<std::uint64_t>(rank) + w);
  u.values.resize(count * P);
  for (std::size_t j = 0; j < count; ++j) {
    fill_row(u.values.data() + j * P, P, datatype, (std::uint64_t(rank) << 40) ^ (w << 24) ^ j);
  }
  return u;
}

// This node's rows [begin, begin + rows) after every node's kWrs WRs of `count` updates, from
// `init` (the rows before).
inline std::vector<std::byte> ris_reference(std::vector<std::byte> init, std::uint64_t begin,
                                            std::uint64_t rows, int nodes, int wrs,
                                            std::uint64_t total, std::size_t count, std::uint32_t P,
                                            int op, int datatype) {
  for (int src = 0; src < nodes; ++src) {
    for (int w = 0; w < wrs; ++w) {
      const Updates u = make_updates(src, w, total, count, P, datatype);
      for (std::size_t j = 0; j < count; ++j) {
        if (u.idx[j] < begin || u.idx[j] >= begin + rows) continue;
        netsparse::rig::combine_row(init.data() + (u.idx[j] - begin) * P, u.values.data() + j * P,
                                    P, op, datatype);
      }
    }
  }
  return init;
}

}  // namespace rigtest
