// Internals of netsparse_transpose shared by the merge transpose and the outer-product SpMV:
// the software merge tree (a loser tree over l leaves), the nnz-balanced bands of output
// indices, and aligned scratch buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "netsparse/csr.hpp"

namespace netsparse::transpose_detail {

inline constexpr std::uint64_t kNoKey = std::numeric_limits<std::uint64_t>::max();

// One software prefetch per stream buffer: when a leaf's cursor enters a new cache line, the
// line after it is requested, so each stream has at most one line in flight ahead of its
// cursor (MeNDA's stall-reducing prefetch with one outstanding request per prefetch buffer).
template <class T>
inline void prefetch_next_line(const T* p) noexcept {
  if ((reinterpret_cast<std::uintptr_t>(p) & 63u) == 0)
    __builtin_prefetch(reinterpret_cast<const char*>(p) + 64, 0, 0);
}

// Scratch arrays of the loser tree, sized for l leaves (allocated once per thread).
struct TreeScratch {
  explicit TreeScratch(int leaves)
      : lose_key(static_cast<std::size_t>(leaves)),
        lose_leaf(static_cast<std::size_t>(leaves)),
        win_key(static_cast<std::size_t>(2 * leaves)),
        win_leaf(static_cast<std::size_t>(2 * leaves)) {}
  std::vector<std::uint64_t> lose_key;  // internal nodes 1..k-1: the loser of the match
  std::vector<int> lose_leaf;
  std::vector<std::uint64_t> win_key;  // build only: the winner of each position 1..2k-1
  std::vector<int> win_leaf;
};

// Merges the k sorted leaves of `leaves` into `sink`, `total` elements in all. Leaves provides
//   std::uint64_t head(int i)                          the first key of leaf i (kNoKey if empty)
//   std::uint64_t pop(int i, std::uint64_t key, Sink&)  emits leaf i's current element (whose
//                                                       key is `key`), advances, returns the
//                                                       next key or kNoKey
// A loser tree (positions k..2k-1 are the leaves, node i plays 2i and 2i+1; any k >= 2): each
// internal node keeps the key and leaf of the loser of its match, so a pop replays one
// leaf-to-root path with one compare and conditional moves per level, and the node loads
// along the path do not depend on each other (the path is fixed by the leaf popped).
template <class Leaves, class Sink>
inline void merge_leaves(Leaves& leaves, int k, Sink& sink, std::int64_t total, TreeScratch& ts) {
  if (total <= 0) return;
  if (k == 1) {
    std::uint64_t key = leaves.head(0);
    for (std::int64_t n = 0; n < total; ++n) key = leaves.pop(0, key, sink);
    return;
  }
  std::uint64_t* lkey = ts.lose_key.data();
  int* lleaf = ts.lose_leaf.data();
  std::uint64_t* wkey = ts.win_key.data();
  int* wleaf = ts.win_leaf.data();
  for (int i = 0; i < k; ++i) {
    wkey[k + i] = leaves.head(i);
    wleaf[k + i] = i;
  }
  for (int i = k - 1; i >= 1; --i) {
    const int a = 2 * i, b = 2 * i + 1;
    const bool b_wins = wkey[b] < wkey[a];
    const int win = b_wins ? b : a, lose = b_wins ? a : b;
    lkey[i] = wkey[lose];
    lleaf[i] = wleaf[lose];
    wkey[i] = wkey[win];
    wleaf[i] = wleaf[win];
  }
  std::uint64_t key = wkey[1];
  int w = wleaf[1];
  for (std::int64_t n = 0; n < total; ++n) {
    key = leaves.pop(w, key, sink);
    for (int node = (w + k) >> 1; node >= 1; node >>= 1) {
      const std::uint64_t nk = lkey[node];
      const int nl = lleaf[node];
      const bool swap = nk < key;
      lkey[node] = swap ? key : nk;
      lleaf[node] = swap ? w : nl;
      key = swap ? nk : key;
      w = swap ? nl : w;
    }
  }
}

// Leaves over sorted streams: leaf i is the positions [leaf[i].p, leaf[i].e) of the arrays a
// Source reads, which provides
//   Leaf                          a leaf's cursor p and end e (and what else its keys need)
//   key(const Leaf&, p)           the key at position p
//   value(const Leaf&, p)         the value at position p, as the sink takes it
//   keys, values                  the arrays behind both, prefetched as the cursor moves on
// (the transpose's first pass over CSR rows, the outer-product SpMV's over scaled columns, and
// the later passes of both over intermediate (key, value) streams).
template <class Source>
struct StreamLeaves {
  using Leaf = typename Source::Leaf;
  Source source;
  Leaf* leaf;
  std::uint64_t head(int i) const {
    const Leaf& s = leaf[i];
    return s.p < s.e ? source.key(s, s.p) : kNoKey;
  }
  template <class Sink>
  std::uint64_t pop(int i, std::uint64_t k, Sink& sink) {
    Leaf& s = leaf[i];
    std::int64_t p = s.p;
    sink.put(k, source.value(s, p));
    s.p = ++p;
    prefetch_next_line(source.keys + p);
    prefetch_next_line(source.values + p);
    return p < s.e ? source.key(s, p) : kNoKey;
  }
};

// The streams of a later merge pass: intermediate (key, value) pairs in a buffer.
template <class T>
struct PairStreams {
  struct Leaf {
    std::int64_t p, e;
  };
  const std::uint64_t* keys;
  const T* values;
  std::uint64_t key(const Leaf&, std::int64_t p) const { return keys[p]; }
  T value(const Leaf&, std::int64_t p) const { return values[p]; }
};
template <class T>
using PairLeaves = StreamLeaves<PairStreams<T>>;

// A contiguous band [lo, hi) of output indices (A's columns for the transpose, A's rows for
// the outer-product SpMV) holding the nonzeros [off, off + nnz) of the output.
struct Band {
  gidx_t lo = 0;
  gidx_t hi = 0;
  std::int64_t off = 0;
  std::int64_t nnz = 0;
};

// `threads` bands over [0, a.n_cols) with about equal nonzero counts: a histogram of the
// columns over 2^s-wide buckets (about 4096 buckets per thread, one parallel pass over
// col_idx), cut where the running count reaches t * nnz / threads. Exact offsets; balance to
// a bucket (a single column heavier than a share stays in one band).
std::vector<Band> nnz_bands(const CsrMatrix& a, int threads);

// Uninitialized, 64-byte aligned array (no value-initialization pass over big buffers).
template <class T>
struct FreeDeleter {
  void operator()(T* p) const noexcept { std::free(p); }
};
template <class T>
using AlignedArray = std::unique_ptr<T[], FreeDeleter<T>>;
template <class T>
AlignedArray<T> make_aligned_array(std::size_t n) {
  const std::size_t bytes = ((std::max<std::size_t>(n, 1) * sizeof(T)) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return AlignedArray<T>(static_cast<T*>(p));
}

int resolve_threads(int threads, const char* who);

}  // namespace netsparse::transpose_detail
