// netsparse on a changing pattern (RigVariant::direct, DistOptions::dynamic_pattern): nothing
// prepared per pattern; each run finds the CSR's distinct remote columns (SpMM / SpMV) or posts
// its column array as it is (SDDMM), while the local columns are computed.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/distinct_columns.hpp"
#include "distributed/modes/rig_exchange.hpp"

namespace netsparse::dist {

namespace {

template <class T>
class RigDirectExchange final : public RigExchangeBase<T> {
 public:
  using RigExchangeBase<T>::RigExchangeBase;

  bool needs_remote_panels() const noexcept override { return false; }
  bool direct_csr() const noexcept override { return true; }

  void setup(const Pattern& pat, const RunContext& rc) override { setup_direct(pat, rc); }

 private:
  NETSPARSE_RIG_EXCHANGE_BASE_NAMES;

  // ---- direct mode (DistOptions::dynamic_pattern) ----
  // Nothing is prepared per pattern: each run takes the CSR rows as they are.
  //   SpMM / SpMV: two streaming passes over the column stream find the distinct remote columns
  //     (a bitmap over the columns, DistinctColumns) and write the remote nonzeros renumbered
  //     onto them; the distinct list is
  //     gathered POSITIONAL into a compact buffer while the local columns are computed; the
  //     remote part is then computed from the compact buffer (cache-resident where a window
  //     over every column is not).
  //   SDDMM: its outputs follow the CSR's own order, so it posts the CSR's column array as it is
  //     (NS_SEND_REMOTE_ONLY, the engine's Idx Filter drops the repeats) into a window over
  //     every column.
  void setup_direct(const Pattern&, const RunContext& rc) {
    constexpr std::uint64_t kMaxBytes = std::uint64_t{2} << 30;
    const auto n_cols = static_cast<std::uint64_t>(rc.cols->n_rows());
    if (rc.kernel == KernelKind::sddmm) {
      const std::uint64_t window_bytes = n_cols * rc.row_bytes();
      if (window_bytes > kMaxBytes) {
        throw std::length_error(
            "netsparse SDDMM with a changing pattern gathers into a window over every column: " +
            std::to_string(window_bytes) +
            " bytes (n_cols x K x element size) exceeds the 2 GiB limit; use a fixed pattern "
            "(tiled, windowed) or a smaller K");
      }
      window_[0].resize(static_cast<std::size_t>(n_cols) * rc.k);
      return;
    }
    if (n_cols > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("netsparse with a changing pattern numbers columns in 32 bits: " +
                              std::to_string(n_cols) + " columns; use a fixed pattern");
    }
    if (distinct_.n_cols() != rc.cols->n_rows()) distinct_.reset(rc.cols->n_rows());
  }

  // The bulk pass: ghost_list_ = the distinct remote columns in ascending order, remote_ = the
  // remote nonzeros with their columns renumbered onto that list (DistinctColumns says why two
  // streaming passes over a bitmap and not one pass over a tag per column).
  void split_remote(const CsrMatrix& a, gidx_t cb, gidx_t ce) {
    const std::int64_t n = a.n_rows;
    remote_.n_rows_global = a.n_rows_global;
    remote_.row_begin = a.row_begin;
    remote_.n_rows = n;
    // Grown, never shrunk: a kernel reads row_ptr.back() nonzeros, the rest is spare room, and
    // growing again after a shrink would zero-fill megabytes every run.
    remote_.row_ptr.resize(static_cast<std::size_t>(n) + 1);
    if (remote_.col_idx.size() < static_cast<std::size_t>(a.nnz())) {
      remote_.col_idx.resize(static_cast<std::size_t>(a.nnz()));
      remote_.values.resize(static_cast<std::size_t>(a.nnz()));
    }
    ghost_list_.clear();
    const gidx_t* col = a.col_idx.data();
    const double* val = a.values.data();
    gidx_t* rcol = remote_.col_idx.data();
    double* rval = remote_.values.data();
    std::int64_t out = 0;
    remote_.row_ptr[0] = 0;
    // Pass 1: copy the remote nonzeros with their global columns, marking the columns. One
    // branch-free stream over every nonzero: each is written at `out` and kept by advancing
    // `out` only for a remote column (a local one is overwritten by the next), so neither a
    // per-row search for the local run nor a mispredicted branch per nonzero is paid.
    const auto local_width = static_cast<std::uint64_t>(ce - cb);
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t b = a.row_ptr[r], e = a.row_ptr[r + 1];
      for (std::int64_t j = b; j < e; ++j) {
        const gidx_t c = col[j];
        const bool remote = static_cast<std::uint64_t>(c - cb) >= local_width;
        distinct_.mark_if(c, remote);
        rcol[out] = c;
        rval[out] = val[j];
        out += remote ? 1 : 0;
      }
      remote_.row_ptr[static_cast<std::size_t>(r) + 1] = out;
    }
    // Pass 2: number the distinct columns and renumber the copied nonzeros onto them.
    distinct_.number(ghost_list_);
    for (std::int64_t j = 0; j < out; ++j) rcol[j] = distinct_.slot(rcol[j]);
    distinct_.clear();
    remote_.n_cols = static_cast<gidx_t>(ghost_list_.size());
  }

  void gather_and_compute(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                          Compute<T>&, CommStats& stats) override {
    RigEngine::Impl& e = impl();
    const CsrMatrix& a = *pat.direct;
    const ScopedProgressHook progress(e.hook());
    const int k = rc.k;
    const gidx_t cb = pat.col_begin, ce = pat.col_end;
    const gidx_t n_cols = rc.cols->n_rows();
    const bool compact = rc.kernel != KernelKind::sddmm;
    double t = now_seconds();
    const std::uint64_t batch = rc.options->batch;
    std::vector<ns_send_wr>& wrs = wrs_[0];
    wrs.clear();
    if (compact) {
      split_remote(a, cb, ce);
      const std::size_t need = ghost_list_.size() * static_cast<std::size_t>(k);
      if (window_[0].size() < need) window_[0].resize(need);
      const std::span<const std::uint64_t> idx =
          piece_idx(ghost_list_, e.piece_count(), piece_buf_[0]);
      const std::size_t piece_elems = static_cast<std::size_t>(k) / e.piece_count();
      positional_batches(idx, batch, piece_elems, [&](const ns_send_wr& wr) { wrs.push_back(wr); });
    } else {
      // Column ids are non-negative, so their int64 and uint64 representations agree.
      const std::span<const std::uint64_t> idx =
          piece_idx({reinterpret_cast<const std::uint64_t*>(a.col_idx.data()), a.col_idx.size()},
                    e.piece_count(), piece_buf_[0]);
      for (std::uint64_t off = 0; off < idx.size(); off += batch) {
        const std::uint64_t cnt = std::min<std::uint64_t>(batch, idx.size() - off);
        wrs.push_back(rig_wr(0, e.property_region(), idx.subspan(off, cnt),
                             std::span<T>(window_[0]), Layout::kIndexed, 0,
                             static_cast<std::uint64_t>(n_cols) * e.piece_count()));
        wrs.back().send_flags |= NS_SEND_REMOTE_ONLY;
      }
      if (!wrs.empty()) wrs.front().send_flags |= NS_SEND_NEW_EPOCH;
    }
    pending_[0] = 0;  // whatever a failed run left behind
    post_linked(wrs, 0, "netsparse");
    e.announce_round();
    stats.post_seconds += now_seconds() - t;
    // The local part while the gather runs (the kernels drive the engine between row chunks).
    t = now_seconds();
    const BasicDenseConstView<T> local{ops.b, cb, k, ce - cb};
    if (rc.kernel == KernelKind::sddmm) {
      sddmm_csr_columns(a, cb, ce, true, ops.x, k, local, k, ops.out);
    } else {
      spmm_csr_columns(a, cb, ce, true, local, ops.out, k, k, false);
    }
    const double t1 = wait_for_gathers(t, stats);
    if (rc.kernel == KernelKind::sddmm) {
      const BasicDenseConstView<T> window{window_[0].data(), 0, k, n_cols};
      sddmm_csr_columns(a, cb, ce, false, ops.x, k, window, k, ops.out);
    } else {
      const auto n_ghosts = static_cast<gidx_t>(ghost_list_.size());
      const BasicDenseConstView<T> ghosts{window_[0].data(), 0, k, n_ghosts};
      spmm_csr_columns(remote_, 0, n_ghosts, true, ghosts, ops.out, k, k, true);
    }
    stats.compute_seconds += now_seconds() - t1;
  }

  // SpMM / SpMV (split_remote): the set of the run's distinct remote columns, the list of them
  // (ascending), and the run's remote nonzeros renumbered onto that list.
  DistinctColumns distinct_;
  std::vector<std::uint64_t> ghost_list_;
  CsrMatrix remote_;
};

}  // namespace

NETSPARSE_RIG_EXCHANGE_FACTORY(make_rig_direct_exchange, RigDirectExchange);

}  // namespace netsparse::dist
