// sa-vanilla (RigVariant::vanilla): one NS_WR_RDMA_READ through the RIG engine per remote
// nonzero, per column panel (no de-duplication, no aggregation); its region is read one-sidedly,
// so a moved operand is registered again collectively (not rebound).
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/modes/rig_exchange.hpp"
#include "distributed/panel_stream.hpp"

namespace netsparse::dist {

namespace {

template <class T>
class RigVanillaExchange final : public RigExchangeBase<T> {
 public:
  using RigExchangeBase<T>::RigExchangeBase;

  // Its region is read one-sidedly: re-registered collectively, never rebound.
  void bind_operand(const void*, const RunContext&) override {}

  void setup(const Pattern& pat, const RunContext& rc) override {
    this->size_panel_windows(pat, rc);
  }

 protected:
  bool rig_only() const noexcept override { return false; }
  void account(const EngineCounters& before, const EngineCounters& after,
               CommStats& stats) override {
    RigEngine::Impl& e = impl();
    // RDMA READs leave the engine's packet counters alone; model each as the paper's lone PR:
    // a 78 B request packet and a 78 B + property response packet.
    const std::uint64_t reads = after.rdma_reads - before.rdma_reads;
    stats.requests += reads;
    stats.messages_sent += 2 * reads;
    stats.bytes_sent += reads * concat::lone_read_wire_bytes(e.bytes_per_piece());
    stats.payload_bytes_in += reads * e.bytes_per_piece();
  }

  void gather_and_compute(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                          Compute<T>& compute, CommStats& stats) override {
    RigEngine::Impl& e = impl();
    const ScopedProgressHook progress(e.hook());
    const std::int64_t max_out = rc.options->max_outstanding_reads;
    constexpr std::size_t kChain = 64;  // reads per doorbell
    std::vector<ns_send_wr>& chain = wrs_[0];
    compute.local(pat, rc, ops);
    pending_[0] = pending_[1] = 0;
    T* window = window_[0].data();
    const std::size_t k = static_cast<std::size_t>(rc.k);
    for (int panel : pat.remote_panels) {
      const gidx_t wbase = pat.remote_part.col_panel_range(panel).begin;
      const double t0 = now_seconds();
      PanelIdxStream s(pat.remote_part, panel, false);
      while (s.valid()) {
        chain.clear();
        while (s.valid() && chain.size() < kChain &&
               pending_[0] + static_cast<std::int64_t>(chain.size()) < max_out) {
          const gidx_t idx = s.idx();
          T* row = window + static_cast<std::size_t>(idx - wbase) * k;
          for (std::uint32_t c = 0; c < e.piece_count();
               ++c) {  // one read per piece of the property
            chain.push_back(rdma_read_wr(0, e.property_region(),
                                         static_cast<std::uint64_t>(idx) * e.piece_count() + c,
                                         row + c * (k / e.piece_count()), e.bytes_per_piece()));
          }
          s.next();
        }
        if (chain.empty()) {
          drain(true, "sa-vanilla");  // max_out reads in flight
          continue;
        }
        post_linked(chain, 0, "sa-vanilla");
        drain(false, "sa-vanilla");
      }
      while (pending_[0] > 0) drain(true, "sa-vanilla");
      stats.wait_seconds += now_seconds() - t0;
      const IndexRange w = pat.remote_part.col_panel_range(panel);
      compute.remote_panel(pat, rc, ops, panel,
                           BasicDenseConstView<T>{window, w.begin, rc.k, w.size()});
    }
    compute.finish(pat, rc, ops);
  }

 private:
  NETSPARSE_RIG_EXCHANGE_BASE_NAMES;
};

}  // namespace

NETSPARSE_RIG_EXCHANGE_FACTORY(make_rig_vanilla_exchange, RigVanillaExchange);

}  // namespace netsparse::dist
