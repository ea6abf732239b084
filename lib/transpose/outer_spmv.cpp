// Outer-product SpMV after MeNDA §3.6: y = sum_j A[:,j] x_j from the CSC form of A (the
// CsrMatrix of A^T), by merging the scaled columns by row index and adding equal indices as
// they leave each merge node.
#include <omp.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "netsparse/transpose.hpp"
#include "support/visibility.hpp"
#include "transpose/merge_tree.hpp"

namespace netsparse {

namespace {

namespace td = transpose_detail;
using namespace transpose_detail;  // the merge tree's pieces (merge_tree.hpp)

struct ColStream {
  std::int64_t b, e;  // positions of at's row j (A's column j) inside the band
  std::int64_t j;     // which x entry scales it
};

// First pass: at's rows scaled by x_j as they are read (MeNDA multiplies in the first
// iteration only).
template <class T>
struct ScaledColumnStreams {
  struct Leaf {
    std::int64_t p, e;
    T x;
  };
  const gidx_t* keys;  // the indices
  const double* values;
  std::uint64_t key(const Leaf&, std::int64_t p) const {
    return static_cast<std::uint64_t>(keys[p]);
  }
  T value(const Leaf& s, std::int64_t p) const { return static_cast<T>(values[p]) * s.x; }
};
template <class T>
using ScaledLeaves = StreamLeaves<ScaledColumnStreams<T>>;

// An intermediate (index, value) stream; equal indices (consecutive: the input is merged) are
// added.
template <class T>
struct ReduceSink {
  std::uint64_t* key;
  T* val;
  std::int64_t n = 0;
  std::uint64_t last = kNoKey;
  void put(std::uint64_t k, T v) {
    if (k == last) {
      val[n - 1] += v;
    } else {
      key[n] = k;
      val[n] = v;
      ++n;
      last = k;
    }
  }
};

// The root: the dense band of y, zeros where no index arrives.
template <class T>
struct DenseSink {
  T* y;  // y[i - base] is the entry of index i
  gidx_t base;
  gidx_t next;  // first index not yet written
  std::uint64_t last = kNoKey;
  void put(std::uint64_t k, T v) {
    if (k == last) {
      y[static_cast<gidx_t>(k) - base] += v;
    } else {
      const auto i = static_cast<gidx_t>(k);
      while (next < i) y[next++ - base] = T(0);
      y[i - base] = v;
      next = i + 1;
      last = k;
    }
  }
};

}  // namespace

struct NETSPARSE_LOCAL OuterSpmv::Impl {
  struct Part {
    Band band;
    std::vector<ColStream> streams;
    AlignedArray<std::uint64_t> key[2];
    AlignedArray<double> val[2];  // big enough for double; a float run uses it as float
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> children;
    std::unique_ptr<td::TreeScratch> tree;
  };

  const CsrMatrix* at = nullptr;
  int threads = 1;
  int leaves = 2;
  gidx_t min_col = 0, max_col = -1;  // over every nonzero (max < min: no nonzeros)
  std::vector<Part> parts;

  template <class T>
  struct Run;

  template <class T>
  void run(std::span<const T> x, std::span<T> y, gidx_t y_base);
};

// One band's merge for one call: the node recursion of the transpose, with reducing sinks.
template <class T>
struct OuterSpmv::Impl::Run {
  const CsrMatrix& at;
  Part& part;
  int leaves;
  const T* x;
  T* y;  // y[i - y_base] is the entry of index i
  gidx_t y_base;
  gidx_t write_lo, write_hi;
  std::int64_t cursor = 0;
  gidx_t next = 0;
  std::vector<typename ScaledLeaves<T>::Leaf> raw;
  std::vector<typename PairLeaves<T>::Leaf> buf;

  std::uint64_t* key_buffer(int depth) { return part.key[depth % 2].get(); }
  T* val_buffer(int depth) { return reinterpret_cast<T*>(part.val[depth % 2].get()); }

  void go() {
    next = write_lo;
    raw.resize(static_cast<std::size_t>(leaves));
    buf.resize(static_cast<std::size_t>(leaves));
    if (!part.streams.empty()) node(0, part.streams.size(), 0);
    while (next < write_hi) y[next++ - y_base] = T(0);
  }

  template <class Leaves>
  std::int64_t emit(Leaves& lv, int k, int depth, std::int64_t off, std::int64_t total) {
    if (depth == 0) {
      DenseSink<T> sink{y, y_base, next};
      td::merge_leaves(lv, k, sink, total, *part.tree);
      next = sink.next;
      return 0;
    }
    ReduceSink<T> sink{key_buffer(depth) + off, val_buffer(depth) + off};
    td::merge_leaves(lv, k, sink, total, *part.tree);
    return sink.n;
  }

  std::pair<std::int64_t, std::int64_t> node(std::size_t s0, std::size_t s1, int depth) {
    const auto m = static_cast<std::int64_t>(s1 - s0);
    const std::int64_t off = cursor;
    if (m <= leaves) {
      std::int64_t total = 0;
      for (std::int64_t i = 0; i < m; ++i) {
        const ColStream& s = part.streams[s0 + static_cast<std::size_t>(i)];
        raw[static_cast<std::size_t>(i)] = {s.b, s.e, x[s.j]};
        total += s.e - s.b;
      }
      cursor += total;
      ScaledLeaves<T> lv{{at.col_idx.data(), at.values.data()}, raw.data()};
      return {off, emit(lv, static_cast<int>(m), depth, off, total)};
    }
    std::int64_t chunk = 1;
    while (chunk * leaves < m) chunk *= leaves;
    auto& kids = part.children[static_cast<std::size_t>(depth)];
    int nk = 0;
    for (std::size_t c0 = s0; c0 < s1; c0 += static_cast<std::size_t>(chunk))
      kids[static_cast<std::size_t>(nk++)] =
          node(c0, std::min(s1, c0 + static_cast<std::size_t>(chunk)), depth + 1);
    std::int64_t total = 0;
    for (int i = 0; i < nk; ++i) {
      const auto& [o, len] = kids[static_cast<std::size_t>(i)];
      buf[static_cast<std::size_t>(i)] = {o, o + len};
      total += len;
    }
    PairLeaves<T> lv{{key_buffer(depth + 1), val_buffer(depth + 1)}, buf.data()};
    return {off, emit(lv, nk, depth, off, total)};
  }
};

template <class T>
void OuterSpmv::Impl::run(std::span<const T> x, std::span<T> y, gidx_t y_base) {
  constexpr const char* who = "netsparse::OuterSpmv::run";
  if (static_cast<gidx_t>(x.size()) != at->n_rows)
    throw std::invalid_argument(std::string(who) + ": x has " + std::to_string(x.size()) +
                                " entries, A has " + std::to_string(at->n_rows) +
                                " columns (rows of at)");
  const gidx_t y_end = y_base + static_cast<gidx_t>(y.size());
  if (max_col >= min_col && (min_col < y_base || max_col >= y_end))
    throw std::invalid_argument(std::string(who) + ": y covers indices [" + std::to_string(y_base) +
                                ", " + std::to_string(y_end) + "), A has nonzeros in rows [" +
                                std::to_string(min_col) + ", " + std::to_string(max_col + 1) + ")");
  const int nparts = static_cast<int>(parts.size());
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    try {
      for (int b = t; b < nparts; b += nt) {
        Part& part = parts[static_cast<std::size_t>(b)];
        const gidx_t lo = b == 0 ? y_base : std::max(part.band.lo, y_base);
        const gidx_t hi = b + 1 == nparts ? y_end : std::min(part.band.hi, y_end);
        Run<T> r{*at, part, leaves, x.data(), y.data(), y_base, lo, std::max(lo, hi), 0, 0, {}, {}};
        r.go();
      }
    } catch (...) {
#pragma omp critical(netsparse_outer_spmv_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

OuterSpmv::OuterSpmv(const CsrMatrix& at, const OuterSpmvOptions& options)
    : impl_(std::make_unique<Impl>()) {
  constexpr const char* who = "netsparse::OuterSpmv";
  Impl& im = *impl_;
  im.at = &at;
  im.threads = td::resolve_threads(options.threads, who);
  im.leaves = options.leaves == 0 ? kDefaultTransposeLeaves : options.leaves;
  if (im.leaves < 2)
    throw std::invalid_argument(std::string(who) +
                                ": the merge tree needs at least 2 leaves, got " +
                                std::to_string(options.leaves));
  check_csr(at, who);
  const std::int64_t* rp = at.row_ptr.data();
  const gidx_t* col = at.col_idx.data();
  gidx_t mn = at.n_cols, mx = -1;
  for (gidx_t j = 0; j < at.n_rows; ++j) {
    if (rp[j] == rp[j + 1]) continue;
    mn = std::min(mn, col[rp[j]]);
    mx = std::max(mx, col[rp[j + 1] - 1]);
  }
  im.min_col = mn;
  im.max_col = mx;
  const std::vector<Band> bands = td::nnz_bands(at, im.threads);
  im.parts.resize(bands.size());
  const int nparts = static_cast<int>(bands.size());
  const int leaves = im.leaves;
  std::exception_ptr error;
#pragma omp parallel num_threads(im.threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    try {
      for (int b = t; b < nparts; b += nt) {
        Impl::Part& part = im.parts[static_cast<std::size_t>(b)];
        part.band = bands[static_cast<std::size_t>(b)];
        const bool first = b == 0, last = b + 1 == nparts;
        for (gidx_t j = 0; j < at.n_rows; ++j) {
          std::int64_t s = rp[j], e = rp[j + 1];
          if (s == e) continue;
          if (!first) {
            if (col[e - 1] < part.band.lo) continue;
            s = std::lower_bound(col + s, col + e, part.band.lo) - col;
          }
          if (!last) {
            if (col[s] >= part.band.hi) continue;
            e = std::lower_bound(col + s, col + e, part.band.hi) - col;
          }
          if (s < e) part.streams.push_back({s, e, j});
        }
        const std::size_t n = part.streams.size();
        int depth = 1;
        for (std::size_t p = static_cast<std::size_t>(leaves); p < n;
             p *= static_cast<std::size_t>(leaves))
          ++depth;
        part.children.assign(
            static_cast<std::size_t>(depth) + 1,
            std::vector<std::pair<std::int64_t, std::int64_t>>(static_cast<std::size_t>(leaves)));
        part.tree = std::make_unique<td::TreeScratch>(leaves);
        if (n > static_cast<std::size_t>(leaves)) {
          const auto cap = static_cast<std::size_t>(part.band.nnz);
          for (int i = 0; i < 2; ++i) {
            part.key[i] = make_aligned_array<std::uint64_t>(cap);
            part.val[i] = make_aligned_array<double>(cap);
          }
        }
      }
    } catch (...) {
#pragma omp critical(netsparse_outer_spmv_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

OuterSpmv::~OuterSpmv() = default;
OuterSpmv::OuterSpmv(OuterSpmv&&) noexcept = default;
OuterSpmv& OuterSpmv::operator=(OuterSpmv&&) noexcept = default;

void OuterSpmv::run(std::span<const float> x, std::span<float> y, gidx_t y_base) {
  impl_->run<float>(x, y, y_base);
}
void OuterSpmv::run(std::span<const double> x, std::span<double> y, gidx_t y_base) {
  impl_->run<double>(x, y, y_base);
}
int OuterSpmv::threads() const noexcept {
  return impl_->threads;
}
int OuterSpmv::leaves() const noexcept {
  return impl_->leaves;
}

void spmv_outer(const CsrMatrix& at, std::span<const float> x, std::span<float> y, gidx_t y_base,
                const OuterSpmvOptions& options) {
  OuterSpmv(at, options).run(x, y, y_base);
}
void spmv_outer(const CsrMatrix& at, std::span<const double> x, std::span<double> y, gidx_t y_base,
                const OuterSpmvOptions& options) {
  OuterSpmv(at, options).run(x, y, y_base);
}

}  // namespace netsparse
