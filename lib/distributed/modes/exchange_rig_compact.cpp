// netsparse on a fixed pattern (RigVariant::compact, the default): the distinct remote columns
// gathered POSITIONAL straight into a compact buffer, as gather plans (recorded on the first
// run, replayed afterwards) unless DistOptions::plans is off; the remote part is computed
// renumbered onto the buffer (the inspector-executor's ghost layout, built once).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "distributed/ghosts.hpp"
#include "distributed/modes/rig_exchange.hpp"

namespace netsparse::dist {

namespace {

template <class T>
class RigCompactExchange final : public RigExchangeBase<T> {
 public:
  using RigExchangeBase<T>::RigExchangeBase;

  bool needs_remote_panels() const noexcept override { return false; }

  void setup(const Pattern& pat, const RunContext& rc) override {
    // A fixed pattern: gather the distinct remote columns straight into a compact buffer
    // (POSITIONAL), computed with the remote part renumbered onto it, as the
    // inspector-executor does (same kernel, same cache behaviour); the setup is paid once.
    plans_.clear();  // they gather into the window resized below
    plans_made_ = false;
    push_tag_ = impl().new_push_tag();
    ghosts_.build(pat.remote_csr, rc.cols->n_rows(), pat.local_part.config(), rc.scalar());
    find_pattern_peers(std::span<const gidx_t>(ghosts_.ghosts()), rc);
    window_[0].resize(ghosts_.ghosts().size() * static_cast<std::size_t>(rc.k));
    window_[1].clear();
  }

  // ---- compact mode (a fixed pattern, distinct columns) ----
  void gather_and_compute(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                          Compute<T>& compute, CommStats& stats) override {
    RigEngine::Impl& e = impl();
    const ScopedProgressHook progress(e.hook());
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const std::vector<gidx_t>& ghosts = ghosts_.ghosts();
    double t = now_seconds();
    std::vector<ns_send_wr>& wrs = wrs_[0];
    wrs.clear();
    // Column ids are non-negative, so their int64 and uint64 representations agree.
    const std::span<const std::uint64_t> idx =
        piece_idx({reinterpret_cast<const std::uint64_t*>(ghosts.data()), ghosts.size()},
                  e.piece_count(), piece_buf_[0]);
    const std::size_t piece_elems = k / e.piece_count();
    const std::uint64_t batch = rc.options->batch;
    // A plan per batch, created on the first run (a region must be registered): they record on
    // their first start and replay afterwards (a region registered again re-records them).
    const bool use_plans = rc.options->plans;
    if (use_plans && !plans_made_) {
      positional_batches(idx, batch, piece_elems,
                         [&](const ns_send_wr& wr) { plans_.emplace_back(e.context(), wr); });
      plans_made_ = true;
    }
    if (use_plans) {
      // Owner-pushed replays (ns_plan_push): this rank's armed lists go to their requesters now
      // (the run's argument agreement is the fence: every rank has entered this run, done with
      // the previous one's output), and its own starts ask nobody once armed.
      e.push_replays(plans_, push_tag_, round_, wrs);
    } else {
      positional_batches(idx, batch, piece_elems, [&](const ns_send_wr& wr) { wrs.push_back(wr); });
    }
    pending_[0] = 0;  // whatever a failed run left behind
    post_linked(wrs, 0, "netsparse");
    e.announce_round();
    stats.post_seconds += now_seconds() - t;
    t = now_seconds();
    compute.local(pat, rc, ops);
    const double t1 = wait_for_gathers(t, stats);
    compute.remote_all(
        ghosts_.compact(), rc, ops,
        BasicDenseConstView<T>{window_[0].data(), 0, rc.k, static_cast<gidx_t>(ghosts.size())});
    compute.finish(pat, rc, ops);
    stats.compute_seconds += now_seconds() - t1;
  }

 protected:
  // Pushed runs need no control message: every row of the run is pushed by its owner, and a
  // pusher is done once its pushes left. The run that records the plans and the one that arms
  // their owners quiesce with the pattern's peers.
  void choose_quiesce_peers(const RunContext& rc) override {
    const bool use_plans = rc.options->plans;
    // plans_made_, not plans_.empty(): a rank that gathers nothing has no plan but must still
    // enter the pushed runs with the others (it kept quiescing with requesters that had stopped
    // telling it, and the third run timed out).
    if (use_plans && (!plans_made_ || impl().registrations() != plans_region_)) {
      first_pushed_round_ = round_ + 2;  // recorded in this run, armed in the next
      plans_region_ = impl().registrations();
    }
    if (use_plans && round_ >= first_pushed_round_) {
      impl().quiesce_with({}, {});
    } else {
      RigExchangeBase<T>::choose_quiesce_peers(rc);
    }
  }

 private:
  NETSPARSE_RIG_EXCHANGE_BASE_NAMES;
  // Pushed replays: this exchange's tag, the first run whose plans are armed, and the region
  // registration they recorded on (a region registered again records them afresh).
  std::uint32_t push_tag_ = 0;
  std::uint32_t first_pushed_round_ = 2;
  std::uint64_t plans_region_ = 0;

  GhostLayout ghosts_;
  std::vector<GatherPlan> plans_;  // one per batch of the ghost list
  bool plans_made_ = false;        // plans_ was built (empty on a rank without ghosts)
};

}  // namespace

NETSPARSE_RIG_EXCHANGE_FACTORY(make_rig_compact_exchange, RigCompactExchange);

}  // namespace netsparse::dist
