// CommMode::automatic: the candidates' trials and the one-collective choice (auto_mode.hpp), and
// DistKernel's auto entry points (chosen_mode, auto_tuning, retune).
#include "distributed/auto_mode.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "agreement/mpi.hpp"
#include "agreement/mpi_util.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/dist_kernel_impl.hpp"
#include "support/memory.hpp"

namespace netsparse {
namespace dist {

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

AutoSelector::AutoSelector(const DistMatrix& a, KernelKind kernel, int k,
                           const DistOptions& options, std::shared_ptr<RigEngine> engine)
    : base_(a),
      latest_(&base_.local()),
      kernel_(kernel),
      k_(k),
      options_(options),
      given_engine_(std::move(engine)),
      kernels_(std::size(kAutoCandidates)) {
  tuning_.tune_runs = options.tune_runs;
  for (const CommMode m : kAutoCandidates) {
    DistOptions o = options;
    o.mode = m;
    o.tune_owners = m == CommMode::task_packets;
    specs_.push_back(Spec{o, {}});
  }
  tuning_.candidates.resize(kernels_.size());
  start_trials();
  // The first candidate now: the kernel's setup errors surface at construction, as any mode's.
  slot_ = build_slot(0);
  if (slot_ == kernels_.size()) {
    throw std::runtime_error("DistKernel (auto): no candidate mode can run this kernel here");
  }
}

void AutoSelector::start_trials() {
  // The modes' slots again: a knob variant that won (the one kernel alive past them) becomes
  // the NetSparse candidate, with its options.
  const std::size_t modes = std::size(kAutoCandidates);
  for (std::size_t i = modes; i < kernels_.size(); ++i) {
    if (!kernels_[i]) continue;
    kernels_[0] = std::move(kernels_[i]);
    specs_[0] = specs_[i];
  }
  kernels_.resize(modes);
  specs_.resize(modes);
  tuning_.candidates.resize(modes);
  variants_added_ = false;
  chosen_ = -1;
  slot_ = 0;
  runs_in_slot_ = 0;
  tuning_.tuned = false;
  tuning_.chosen = CommMode::automatic;
  tuning_.chosen_knobs.clear();
  tuning_.setup_seconds = 0;
  tuning_.trial_seconds = 0;
  tuning_.trial_runs = 0;
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    AutoTuning::Candidate& c = tuning_.candidates[i];
    c.mode = kernels_[i] ? kernels_[i]->mode() : specs_[i].options.mode;
    c.knobs = specs_[i].knobs;
    c.skipped = false;
    c.run_seconds.clear();
    c.seconds = 0;
    c.setup_seconds = 0;
  }
}

std::size_t AutoSelector::build_slot(std::size_t from) {
  for (std::size_t i = from; i < kernels_.size(); ++i) {
    if (kernels_[i]) return i;
    AutoTuning::Candidate& c = tuning_.candidates[i];
    if (c.skipped) continue;
    const DistOptions& o = specs_[i].options;
    const double t0 = now_seconds();
    try {
      // Only the NetSparse candidates run on an engine the caller brought (their variants
      // change no engine knob then: add_engine_variants).
      kernels_[i] = std::make_unique<DistKernel>(
          base_, kernel_, k_, o, o.mode == CommMode::netsparse ? given_engine_ : nullptr);
      if (latest_ != &base_.local()) kernels_[i]->set_pattern(*latest_);
    } catch (const support::OutOfMemory&) {
      // Refused on every rank alike (the kernel's memory check rides in its agreement): this
      // candidate cannot run here, the others may.
      kernels_[i].reset();
      c.skipped = true;
      continue;
    }
    c.setup_seconds = now_seconds() - t0;
    c.mode = kernels_[i]->mode();
    tuning_.setup_seconds += c.setup_seconds;
    refresh_engine();
    return i;
  }
  return kernels_.size();
}

DistKernel& AutoSelector::current() {
  while (chosen_ < 0) {
    slot_ = build_slot(slot_);
    if (slot_ < kernels_.size()) return *kernels_[slot_];
    choose();  // the remaining candidates could not be built (or knob variants come next)
  }
  return *kernels_[static_cast<std::size_t>(chosen_)];
}

const DistKernel& AutoSelector::in_use() const noexcept {
  if (chosen_ >= 0) return *kernels_[static_cast<std::size_t>(chosen_)];
  std::size_t i = std::min(slot_, kernels_.size() - 1);
  while (i > 0 && !kernels_[i]) --i;
  while (!kernels_[i]) ++i;  // one is always built: the constructor builds the first
  return *kernels_[i];
}

void AutoSelector::run(const std::function<void(DistKernel&)>& call) {
  if (chosen_ >= 0) {
    DistKernel& winner = *kernels_[static_cast<std::size_t>(chosen_)];
    call(winner);
    last_ = winner.last_run_stats();
    return;
  }
  DistKernel& trial = current();
  const bool chose_now = chosen_ >= 0;
  const double t0 = now_seconds();
  call(trial);
  double seconds = now_seconds() - t0;
  if (!chose_now && slot_ < pending_setup_.size()) {
    seconds += pending_setup_[slot_];  // dynamic patterns: its set_pattern for this run
  }
  std::fill(pending_setup_.begin(), pending_setup_.end(), 0.0);
  last_ = trial.last_run_stats();
  if (chose_now) return;  // current() chose: this was the winner's first steady run
  tuning_.trial_seconds += seconds;
  ++tuning_.trial_runs;
  // A candidate still choosing its owner pairs' ways (task-packets): its own trial, not one of
  // auto's (the same on every rank: the pair trials' steps are).
  if (last_.owner_trial_runs > 0) return;
  if (runs_in_slot_ > 0) tuning_.candidates[slot_].run_seconds.push_back(seconds);
  if (++runs_in_slot_ > tuning_.tune_runs) {
    runs_in_slot_ = 0;
    if (++slot_ == kernels_.size()) choose();
  }
}

// One allreduce: every rank contributes its median per candidate, the max over ranks is what a
// candidate costs the job (the slowest rank sets the pace of a collective kernel), and every
// rank then takes the same lowest -- ties to the earlier candidate -- from the same numbers.
void AutoSelector::choose() {
  const double t0 = now_seconds();
  const std::size_t n = kernels_.size();
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<double> seconds(n, kNone);
  for (std::size_t i = 0; i < n; ++i) {
    const AutoTuning::Candidate& c = tuning_.candidates[i];
    // A candidate already out (a mode that lost before the knob variants ran) competes no more.
    if (c.skipped || c.run_seconds.empty() || !kernels_[i]) continue;
    seconds[i] = i < forced_.size() ? forced_[i] : median_of(c.run_seconds);
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, seconds.data(), static_cast<int>(n), MPI_DOUBLE, MPI_MAX,
                          base_.comm()),
            "MPI_Allreduce");
  std::size_t best = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (seconds[i] < kNone && (best == n || seconds[i] < seconds[best])) best = i;
  }
  if (best == n) throw std::logic_error("DistKernel (auto): no candidate was timed");
  for (std::size_t i = 0; i < n; ++i) {
    if (seconds[i] < kNone) tuning_.candidates[i].seconds = seconds[i];
    if (i != best) kernels_[i].reset();  // the losers' patterns, buffers and engines go now
  }
  tuning_.trial_seconds += now_seconds() - t0;
  // A NetSparse engine won the modes: its knobs next, on the same kernel and pattern.
  if (add_engine_variants(best)) {
    slot_ = n;
    runs_in_slot_ = 0;
    refresh_engine();
    return;
  }
  chosen_ = static_cast<std::ptrdiff_t>(best);
  refresh_engine();
  tuning_.tuned = true;
  tuning_.chosen = kernels_[best]->mode();
  tuning_.chosen_knobs = specs_[best].knobs;
  ++tuning_.tunings;
}

bool AutoSelector::add_engine_variants(std::size_t winner) {
  if (!options_.tune_engine || variants_added_) return false;
  const CommMode m = kernels_[winner]->mode();
  if (m != CommMode::netsparse_rank && m != CommMode::netsparse_node) return false;
  variants_added_ = true;
  const std::size_t before = specs_.size();
  const DistOptions base = specs_[winner].options;  // a copy: specs_ grows below
  // Knobs of the engine's context need an engine of their own: not with one the caller brought.
  const bool own_engine = !(given_engine_ && base.mode == CommMode::netsparse);
  const auto add = [&](DistOptions o, std::string knobs) {
    specs_.push_back(Spec{std::move(o), std::move(knobs)});
    kernels_.emplace_back();
    AutoTuning::Candidate c;
    c.mode = specs_.back().options.mode;
    c.knobs = specs_.back().knobs;
    tuning_.candidates.push_back(std::move(c));
  };
  const std::string winner_knobs = specs_[winner].knobs;
  const std::string prefix = winner_knobs.empty() ? "" : winner_knobs + ", ";
  // The paper's batch size (Fig. 15): fewer, larger work requests or more, smaller ones.
  for (const std::uint64_t batch : {std::max<std::uint64_t>(64, base.batch / 8), base.batch * 8}) {
    if (batch == base.batch) continue;
    DistOptions o = base;
    o.batch = batch;
    add(o, prefix + "batch " + std::to_string(batch));
  }
  if (own_engine) {
    // The concatenation delay (Fig. 17): a packet leaves as soon as it is posted.
    if (base.engine.delay_ns != 0) {
      DistOptions o = base;
      o.engine.delay_ns = 0;
      add(o, prefix + "concat delay 0 ns");
    }
    // Larger packets (the paper's 1500 B MTU against a jumbo-ish 4 KiB).
    if (base.engine.packet_bytes != 4096) {
      DistOptions o = base;
      o.engine.packet_bytes = 4096;
      add(o, prefix + "packet 4096 B");
    }
    // Fewer RIG units (each a pipeline the progress driver steps: on few cores, fewer to step).
    if (base.engine.client_units != 1 || base.engine.server_units != 1) {
      DistOptions o = base;
      o.engine.client_units = 1;
      o.engine.server_units = 1;
      add(o, prefix + "units 1/1");
    }
  }
  return specs_.size() > before;
}

void AutoSelector::refresh_engine() {
  // The winner's engine once chosen; while the trials run, the latest candidate's built that
  // has one (the NetSparse candidate's, or the knob variant under trial).
  if (chosen_ >= 0) {
    engine_ = kernels_[static_cast<std::size_t>(chosen_)]->engine();
    return;
  }
  engine_ = nullptr;
  for (const auto& kernel : kernels_) {
    if (kernel && kernel->engine()) engine_ = kernel->engine();
  }
}

void AutoSelector::set_pattern(const CsrMatrix& rows) {
  if (options_.dynamic_pattern) {
    // A pattern per run: what a candidate costs per run is its set_pattern and its run (IE
    // and su redo their setup here, netsparse prepares nothing), so each one's set_pattern
    // time is added to its next timed run (measured: without it auto chose IE at 1.40 ms a
    // run whose set_pattern cost 3.3 ms more, 2.3x netsparse's steady time).
    pending_setup_.resize(kernels_.size(), 0.0);
    for (std::size_t i = 0; i < kernels_.size(); ++i) {
      if (!kernels_[i]) continue;
      const double t0 = now_seconds();
      kernels_[i]->set_pattern(rows);
      pending_setup_[i] += now_seconds() - t0;
    }
    latest_ = &rows;
    return;
  }
  // The kernel kept: the winner, else the first candidate built. Its set_pattern checks the rows
  // (every rank refuses alike) before anything else changes.
  std::size_t keep = 0;
  if (chosen_ >= 0) {
    keep = static_cast<std::size_t>(chosen_);
  } else {
    while (!kernels_[keep]) ++keep;
  }
  const double t0 = now_seconds();
  kernels_[keep]->set_pattern(rows);
  const double kept_setup = now_seconds() - t0;
  base_ = DistMatrix(base_.comm(), rows, base_.rows(), base_.cols(), base_.name());
  latest_ = &base_.local();
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (i != keep) kernels_[i].reset();
  }
  start_trials();  // a knob variant kept moves to the NetSparse candidate's slot
  keep = 0;
  while (!kernels_[keep]) ++keep;
  tuning_.candidates[keep].setup_seconds = kept_setup;
  tuning_.setup_seconds = kept_setup;
  refresh_engine();
}

void AutoSelector::retune() {
  start_trials();
}

void AutoAccess::force_seconds(DistKernel& kernel, std::vector<double> seconds) {
  if (!kernel.impl_->tuner) throw std::logic_error("AutoAccess::force_seconds: not an auto kernel");
  kernel.impl_->tuner->force_seconds(std::move(seconds));
}

}  // namespace dist

// ---- DistKernel's auto entry points ------------------------------------------------------------

CommMode DistKernel::chosen_mode() const noexcept {
  const Impl& s = *impl_;
  return s.tuner ? s.tuner->tuning().chosen : s.options.mode;
}

const AutoTuning& DistKernel::auto_tuning() const noexcept {
  static const AutoTuning kNotAuto{};
  return impl_->tuner ? impl_->tuner->tuning() : kNotAuto;
}

void DistKernel::retune() {
  Impl& s = *impl_;
  agreement::Agreement agreed;
  agreed.field("the call", "retune");
  agreement::collective_call_agreed(s.comm, "DistKernel::retune", std::move(agreed), [&] {
    if (!s.tuner) {
      throw std::logic_error(std::string("DistKernel::retune is only for the auto mode (this "
                                         "kernel runs ") +
                             to_string(s.options.mode) + ")");
    }
  });
  s.tuner->retune();
}

std::string DistKernel::auto_tuning_json() const {
  const AutoTuning& t = auto_tuning();
  const auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", std::isfinite(v) ? v : 0.0);
    return std::string(buf);
  };
  const auto quoted = [](CommMode m) { return std::string("\"") + to_string(m) + "\""; };
  std::string j = "{\"tuned\": " + std::string(t.tuned ? "true" : "false") +
                  ", \"chosen\": " + quoted(t.chosen) + ", \"chosen_knobs\": \"" + t.chosen_knobs +
                  "\"" + ", \"tune_runs\": " + std::to_string(t.tune_runs) +
                  ", \"tunings\": " + std::to_string(t.tunings) +
                  ", \"setup_seconds\": " + num(t.setup_seconds) +
                  ", \"trial_seconds\": " + num(t.trial_seconds) +
                  ", \"trial_runs\": " + std::to_string(t.trial_runs) + ", \"candidates\": [";
  for (std::size_t i = 0; i < t.candidates.size(); ++i) {
    const AutoTuning::Candidate& c = t.candidates[i];
    j += std::string(i == 0 ? "" : ", ") + "{\"mode\": " + quoted(c.mode) + ", \"knobs\": \"" +
         c.knobs + "\", \"skipped\": " + (c.skipped ? "true" : "false") +
         ", \"seconds\": " + num(c.seconds) + ", \"setup_seconds\": " + num(c.setup_seconds) +
         ", \"run_seconds\": [";
    for (std::size_t r = 0; r < c.run_seconds.size(); ++r) {
      j += (r == 0 ? "" : ", ") + num(c.run_seconds[r]);
    }
    j += "]}";
  }
  return j + "]}";
}

}  // namespace netsparse
