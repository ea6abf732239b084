// Shared by the collectives tests: deterministic inputs per (rank, seed), and the sequential
// references (the fixed pairwise tree, the left-to-right order, the sparse sum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "collectives/reduce_ops.hpp"

namespace colltest {

using netsparse::collectives::DataType;
using netsparse::collectives::double_to_half;
using netsparse::collectives::element_size;
using netsparse::collectives::ReduceOp;
using netsparse::collectives::Reducer;

using Bytes = std::vector<std::byte>;

// `exact`: values whose sums and products stay exact in every datatype (small integers; for prod
// mostly 1 with a few 2 and -1), so that any combining order gives the same bits. Otherwise
// values spread over many magnitudes, so that the order shows in the low bits.
inline Bytes make_input(DataType t, ReduceOp op, std::uint64_t count, int rank, std::uint64_t seed,
                        bool exact) {
  const std::size_t es = element_size(t);
  Bytes out(count * es);
  std::mt19937_64 rng(seed * 1000003 + static_cast<std::uint64_t>(rank) * 7919 + 17);
  std::uniform_int_distribution<int> small(-9, 9);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-12, 12);
  for (std::uint64_t i = 0; i < count; ++i) {
    double v;
    if (op == ReduceOp::kProd) {
      const int r = static_cast<int>(rng() % 8);
      v = r == 0 ? 2.0 : r == 1 ? -1.0 : 1.0;
    } else if (exact || t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32) {
      v = small(rng);
    } else {
      v = std::ldexp(mant(rng), t == DataType::kFp16 ? expo(rng) / 2 : expo(rng));
    }
    std::byte* p = out.data() + i * es;
    switch (t) {
      case DataType::kInt8: {
        const auto x = static_cast<std::int8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DataType::kInt16: {
        const auto x = static_cast<std::int16_t>(v);
        std::memcpy(p, &x, 2);
        break;
      }
      case DataType::kInt32: {
        const auto x = static_cast<std::int32_t>(v * 1000);
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kFp16: {
        const std::uint16_t x = double_to_half(v);
        std::memcpy(p, &x, 2);
        break;
      }
      case DataType::kFp32: {
        const auto x = static_cast<float>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kFp64:
        std::memcpy(p, &v, 8);
        break;
    }
  }
  return out;
}

// The fixed pairwise tree: node (l, i) = (l-1, 2i) op (l-1, 2i+1), or (l-1, 2i) when it has no
// right sibling; the result is the root.
inline Bytes tree_reference(const Reducer& red, std::vector<Bytes> level, std::uint64_t count) {
  while (level.size() > 1) {
    std::vector<Bytes> up;
    for (std::size_t i = 0; i < level.size(); i += 2) {
      if (i + 1 == level.size()) {
        up.push_back(level[i]);
      } else {
        Bytes r(level[i].size());
        red.combine(r.data(), level[i].data(), level[i + 1].data(), count);
        up.push_back(std::move(r));
      }
    }
    level = std::move(up);
  }
  return level.at(0);
}

// v0 op (v1 op (v2 op ...)): another order than the tree's for three ranks or more, to show
// that the data is order-sensitive.
inline Bytes right_fold_reference(const Reducer& red, const std::vector<Bytes>& in,
                                  std::uint64_t count) {
  Bytes r = in.back();
  for (std::size_t k = in.size() - 1; k-- > 0;)
    red.combine(r.data(), in[k].data(), r.data(), count);
  return r;
}

// Sparse inputs with heavy duplication: nnz entries, indices drawn from a pool of about
// nnz / dup distinct ones; integer values (exact sums). Sorted or not.
struct SparseInput {
  std::vector<std::uint64_t> idx;
  Bytes values;
};
inline SparseInput make_sparse(DataType t, std::uint64_t n, std::uint64_t nnz, int dup, int rank,
                               std::uint64_t seed, bool sorted) {
  SparseInput s;
  std::mt19937_64 rng(seed * 31 + static_cast<std::uint64_t>(rank) * 1009 + 5);
  const std::uint64_t distinct = std::max<std::uint64_t>(1, nnz / static_cast<std::uint64_t>(dup));
  std::vector<std::uint64_t> pool(distinct);
  for (auto& p : pool) p = n == 0 ? 0 : rng() % n;
  s.idx.resize(nnz);
  for (auto& i : s.idx) i = pool[rng() % distinct];
  if (sorted) std::sort(s.idx.begin(), s.idx.end());
  s.values = make_input(t, ReduceOp::kSum, nnz, rank, seed + 99, true);
  return s;
}

// Dense sum of every rank's entries, with the library's own element sum (checked separately).
inline Bytes sparse_reference(DataType t, std::uint64_t n, const std::vector<SparseInput>& in) {
  const std::size_t es = element_size(t);
  const Reducer red(t, ReduceOp::kSum);
  Bytes d(n * es);
  for (const SparseInput& s : in)
    for (std::size_t k = 0; k < s.idx.size(); ++k)
      red.combine(d.data() + s.idx[k] * es, d.data() + s.idx[k] * es, s.values.data() + k * es, 1);
  return d;
}

}  // namespace colltest
