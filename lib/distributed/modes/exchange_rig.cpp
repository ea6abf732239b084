// netsparse's per-panel RIG exchange (RigVariant::panels, RigIdxSource::nonzeros: the paper's
// setting, for ablations): NS_WR_RIG per column panel of the remote part, INDEXED into a panel
// window, double-buffered (the next panel's gather in flight while the current computes); and
// make_rig_exchange, which picks one of the four RIG variants (modes/rig_exchange.hpp).
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/modes/rig_exchange.hpp"
#include "distributed/panel_stream.hpp"

namespace netsparse::dist {

namespace {

template <class T>
class RigPanelsExchange final : public RigExchangeBase<T> {
 public:
  using RigExchangeBase<T>::RigExchangeBase;

  void setup(const Pattern& pat, const RunContext& rc) override {
    find_pattern_peers(pat, rc);
    this->size_panel_windows(pat, rc);
    nonzero_idx_.clear();
    nonzero_ptr_.assign(1, 0);
    if (rc.options->rig_idx == RigIdxSource::nonzeros) {
      // The per-nonzero idx stream of each remote panel, in tile order (what the paper's host
      // posts: the NIC filters and coalesces the repeats).
      for (int j : pat.remote_panels) {
        for (PanelIdxStream s(pat.remote_part, j, false); s.valid(); s.next()) {
          nonzero_idx_.push_back(static_cast<std::uint64_t>(s.idx()));
        }
        nonzero_ptr_.push_back(nonzero_idx_.size());
      }
    }
  }

 private:
  NETSPARSE_RIG_EXCHANGE_BASE_NAMES;

  void post_panel(const Pattern& pat, const RunContext& rc, std::size_t slot_j, int panel_pos,
                  bool new_epoch) {
    RigEngine::Impl& e = impl();
    const int panel = pat.remote_panels[panel_pos];
    std::span<const std::uint64_t> idx;
    if (rc.options->rig_idx == RigIdxSource::nonzeros) {
      idx = std::span<const std::uint64_t>(nonzero_idx_)
                .subspan(nonzero_ptr_[panel_pos],
                         nonzero_ptr_[panel_pos + 1] - nonzero_ptr_[panel_pos]);
    } else {
      const auto cols = pat.remote_part.panel_columns(panel);
      // Column ids are non-negative, so their int64 and uint64 representations agree.
      idx = {reinterpret_cast<const std::uint64_t*>(cols.data()), cols.size()};
    }
    const IndexRange w = pat.remote_part.col_panel_range(panel);
    const std::uint64_t batch = rc.options->batch;
    const std::uint64_t pieces = e.piece_count();
    idx = piece_idx(idx, pieces, piece_buf_[slot_j & 1]);
    std::vector<ns_send_wr>& wrs = wrs_[slot_j & 1];
    wrs.clear();
    for (std::uint64_t off = 0; off < idx.size(); off += batch) {
      const std::uint64_t n = std::min<std::uint64_t>(batch, idx.size() - off);
      wrs.push_back(rig_wr(slot_j, e.property_region(), idx.subspan(off, n),
                           std::span<T>(window_[slot_j & 1]), Layout::kIndexed,
                           static_cast<std::uint64_t>(w.begin) * pieces,
                           static_cast<std::uint64_t>(w.size()) * pieces));
    }
    if (wrs.empty()) return;
    if (new_epoch) wrs.front().send_flags |= NS_SEND_NEW_EPOCH;
    post_linked(wrs, slot_j & 1, "netsparse");
  }

  void gather_and_compute(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                          Compute<T>& compute, CommStats& stats) override {
    RigEngine::Impl& e = impl();
    const auto n = pat.remote_panels.size();
    // The operand may have changed since the last run: a new Idx Filter epoch at the start.
    // With per-nonzero idxs every panel starts its own epoch, so the filter (whose entries
    // must share one output mapping) serves each panel's window; distinct panels never share
    // a column, so nothing is lost.
    const bool epoch_per_panel = rc.options->rig_idx == RigIdxSource::nonzeros;
    // Without a progress thread the kernels drive the engine between tiles (see Impl::hook).
    const ScopedProgressHook progress(impl().hook());
    pending_[0] = pending_[1] = 0;
    double t = now_seconds();
    if (n > 0) post_panel(pat, rc, 0, 0, true);
    stats.post_seconds += now_seconds() - t;
    t = now_seconds();
    compute.local(pat, rc, ops);
    stats.compute_seconds += now_seconds() - t;
    for (std::size_t j = 0; j < n; ++j) {
      t = now_seconds();
      if (j + 1 < n) post_panel(pat, rc, j + 1, static_cast<int>(j + 1), epoch_per_panel);
      const double t0 = now_seconds();
      stats.post_seconds += t0 - t;
      while (pending_[j & 1] > 0) drain(true, "netsparse");
      // Everything this rank needs has arrived: tell the peers now, so the quiesce at the end
      // of the run costs no round trip while this rank computes its last panel.
      if (j + 1 == n) e.announce_round();
      const double t1 = now_seconds();
      stats.wait_seconds += t1 - t0;
      const int panel = pat.remote_panels[j];
      const IndexRange w = pat.remote_part.col_panel_range(panel);
      compute.remote_panel(pat, rc, ops, panel,
                           BasicDenseConstView<T>{window_[j & 1].data(), w.begin, rc.k, w.size()});
      stats.compute_seconds += now_seconds() - t1;
    }
    compute.finish(pat, rc, ops);
  }

  std::vector<std::uint64_t> nonzero_idx_;
  std::vector<std::size_t> nonzero_ptr_;
};

}  // namespace

NETSPARSE_RIG_EXCHANGE_FACTORY(make_rig_panels_exchange, RigPanelsExchange);

template <class T>
std::unique_ptr<Exchange<T>> make_rig_exchange(std::shared_ptr<RigEngine> engine,
                                               RigVariant variant) {
  switch (variant) {
    case RigVariant::vanilla:
      return make_rig_vanilla_exchange<T>(std::move(engine));
    case RigVariant::panels:
      return make_rig_panels_exchange<T>(std::move(engine));
    case RigVariant::compact:
      return make_rig_compact_exchange<T>(std::move(engine));
    case RigVariant::direct:
      return make_rig_direct_exchange<T>(std::move(engine));
  }
  return nullptr;
}
template std::unique_ptr<Exchange<float>> make_rig_exchange<float>(std::shared_ptr<RigEngine>,
                                                                   RigVariant);
template std::unique_ptr<Exchange<double>> make_rig_exchange<double>(std::shared_ptr<RigEngine>,
                                                                     RigVariant);

}  // namespace netsparse::dist
