// netsparse on a changing pattern (RigVariant::direct, DistOptions::dynamic_pattern): nothing
// prepared per pattern; each run splits the CSR rows in one pass into the tiled layout of its
// local and remote parts, the remote part renumbered onto its distinct columns
// (TiledMatrix::split_columns; SpMM / SpMV), or posts its column array as it is (SDDMM), and
// the local columns are computed while the gather runs.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/modes/rig_exchange.hpp"
#include "netsparse/tiled.hpp"

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
  //   SpMM / SpMV: one streaming pass (TiledMatrix::split_columns) lays the rows out as the
  //     tiled kernels' local and remote parts, the remote one renumbered onto the run's
  //     distinct remote columns, which are gathered POSITIONAL into a compact buffer while the
  //     local part is computed; the remote part is then computed from the compact buffer
  //     (cache-resident where a window over every column is not). The tiled kernels on the
  //     split beat the row-wise CSR kernels on the unsplit rows (32-bit columns and T values
  //     instead of 64-bit and double, no per-row search for the local run, every nonzero's B
  //     row prefetched): docs/benchmarks.md, "Changing sparsity without a tiling penalty".
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
      TiledMatrix::split_columns(a, cb, ce, true, scalar_type_of<T>, split_, false);
      ghost_list_.assign(split_.outside_columns.begin(), split_.outside_columns.end());
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
    const gidx_t n_rows = a.n_rows;
    if (rc.kernel == KernelKind::sddmm) {
      sddmm_csr_columns(a, cb, ce, true, ops.x, k, local, k, ops.out);
    } else if (split_.inside.nnz() == 0) {
      std::fill_n(ops.out, n_rows * k, T{0});
    } else if (rc.kernel == KernelKind::spmv) {
      spmv(split_.inside, local, ops.out, false);
    } else {
      spmm(split_.inside, local, ops.out, k, k, false);
    }
    const double t1 = wait_for_gathers(t, stats);
    if (rc.kernel == KernelKind::sddmm) {
      const BasicDenseConstView<T> window{window_[0].data(), 0, k, n_cols};
      sddmm_csr_columns(a, cb, ce, false, ops.x, k, window, k, ops.out);
    } else if (split_.outside.nnz() > 0) {
      const auto n_ghosts = static_cast<gidx_t>(ghost_list_.size());
      const BasicDenseConstView<T> ghosts{window_[0].data(), 0, k, n_ghosts};
      if (rc.kernel == KernelKind::spmv) {
        spmv(split_.outside, ghosts, ops.out, true);
      } else {
        spmm(split_.outside, ghosts, ops.out, k, k, true);
      }
    }
    stats.compute_seconds += now_seconds() - t1;
  }

  // SpMM / SpMV: the run's split (its arrays reused from run to run) and its distinct remote
  // columns as the gather's idxs.
  ColumnSplit split_;
  std::vector<std::uint64_t> ghost_list_;
};

}  // namespace

NETSPARSE_RIG_EXCHANGE_FACTORY(make_rig_direct_exchange, RigDirectExchange);

}  // namespace netsparse::dist
