// CommMode::automatic (DistKernel in "auto" mode): the candidates, their trials and the choice.
// An auto DistKernel owns one AutoSelector instead of an exchange; the selector owns one complete
// DistKernel per candidate mode (its own pattern, exchange and engine), built when its trials
// start, and runs every call of the kernel on one of them: during the trials on the candidate
// whose turn it is, afterwards on the winner.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "support/visibility.hpp"

namespace netsparse::dist {

// The candidate modes, in trial order: NetSparse first (resolved by its kernel), then the MPI
// baselines that win where NetSparse does not: inspector-executor (a few large neighbours), su
// (small or dense-ish operands, where one allgather beats any index traffic), and task-packets
// with each owner pair's way (rows, whole block, task packets) chosen by its own trials
// (DistOptions::tune_owners; on a dynamic pattern it keeps its bytes model: no pair trials).
inline constexpr CommMode kAutoCandidates[] = {CommMode::netsparse, CommMode::inspector_executor,
                                               CommMode::su, CommMode::task_packets};
inline constexpr int kMaxTuneRuns = 100;

class NETSPARSE_LOCAL AutoSelector {
 public:
  // Collective (every rank of a.comm()): copies `a` and builds the first candidate.
  AutoSelector(const DistMatrix& a, KernelKind kernel, int k, const DistOptions& options,
               std::shared_ptr<RigEngine> engine);

  // One collective run of the kernel: `call` runs it on the kernel given. A call that throws
  // (refused arguments: every rank throws alike) leaves the trials where they were.
  void run(const std::function<void(DistKernel&)>& call);
  // Collective. A fixed pattern: tunes again on it (the winner or the current candidate is
  // kept, the others are rebuilt on their turn). DistOptions::dynamic_pattern: the pattern
  // changes every run by design, so the choice (or the trials under way) carries over: the
  // built candidates get the rows (borrowed, as any dynamic kernel borrows them).
  void set_pattern(const CsrMatrix& rows);
  // Collective: the trials start again (the winner kept as the candidate of its slot).
  void retune();

  [[nodiscard]] const AutoTuning& tuning() const noexcept { return tuning_; }
  // The statistics of the last run (kept here: a trial's kernel may be gone after the choice).
  [[nodiscard]] const CommStats& last_stats() const noexcept { return last_; }
  // The kernel the next run uses (built if its turn has come: collective).
  [[nodiscard]] DistKernel& current();
  // Local, no building: the winner, else the latest candidate built (for the accessors).
  [[nodiscard]] const DistKernel& in_use() const noexcept;
  // The rows the kernel computes on now (for the pattern's volume).
  [[nodiscard]] const CsrMatrix& rows() const noexcept { return *latest_; }
  // The engine of the live netsparse candidate, if any.
  [[nodiscard]] const std::shared_ptr<RigEngine>& engine() const noexcept { return engine_; }
  // Test hook (AutoAccess): the per-candidate times this rank contributes to its choices from now
  // on instead of its measured medians (one per candidate, trial order); empty: measured.
  void force_seconds(std::vector<double> seconds) { forced_ = std::move(seconds); }

 private:
  // What a slot builds: the modes' candidates (kAutoCandidates), then the engine knobs'
  // variants of the winner (DistOptions::tune_engine).
  struct Spec {
    DistOptions options;
    std::string knobs;  // empty for a mode's candidate
  };
  void start_trials();
  std::size_t build_slot(std::size_t from);  // the first slot >= from that builds, or size
  void choose();
  // After the modes' choice: slots for the winner's knob variants, and their trials next.
  // Returns whether any was added.
  bool add_engine_variants(std::size_t winner);
  void refresh_engine();

  DistMatrix base_;                    // the pattern the candidates are built from
  const CsrMatrix* latest_ = nullptr;  // the rows in use (base_'s or, dynamic, the caller's)
  KernelKind kernel_;
  int k_;
  DistOptions options_;
  std::shared_ptr<RigEngine> given_engine_;
  std::vector<Spec> specs_;                           // per candidate
  std::vector<std::unique_ptr<DistKernel>> kernels_;  // per candidate; null = not built / freed
  std::size_t slot_ = 0;                              // the candidate of the next trial run
  int runs_in_slot_ = 0;                              // its runs so far (the first is the warm-up)
  std::ptrdiff_t chosen_ = -1;
  bool variants_added_ = false;  // this tuning's knob variants are in the slots
  // dynamic_pattern: each candidate's set_pattern time since the last run, charged to its next
  // timed run (a pattern per run: its setup is part of what a run costs).
  std::vector<double> pending_setup_;
  std::vector<double> forced_;
  std::shared_ptr<RigEngine> engine_;
  AutoTuning tuning_;
  CommStats last_;
};

// The test hook's door (a friend of DistKernel): forces the times an auto kernel's rank
// contributes to its choices (AutoSelector::force_seconds). std::logic_error for a kernel
// that is not auto.
class AutoAccess {
 public:
  static void force_seconds(DistKernel& kernel, std::vector<double> seconds);
};

}  // namespace netsparse::dist
