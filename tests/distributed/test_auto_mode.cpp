// CommMode::automatic ("auto", lib/distributed/auto_mode.cpp): every run -- the trials included --
// gives byte for byte what the kernel of the mode that ran it gives, and the reference; every
// rank chooses the same; the choice is the lowest max-over-ranks median (forced times, also where
// the ranks' own fastest differ); a new pattern or retune() tunes again; bad options are refused
// on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "distributed/auto_mode.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse {
namespace {

using namespace test;

constexpr int kTuneRuns = 2;
constexpr int kCandidates = static_cast<int>(std::size(dist::kAutoCandidates));
// The task-packets candidate (the last) first chooses its owner pairs' ways by its own trials
// (DistOptions::tune_owners): a warm-up and tune_runs measured runs on the bytes model's ways,
// as many per way (rows, tasks, block; SDDMM has no tasks), then for the mix; auto does not
// count those runs.
constexpr int kTaskCandidate = kCandidates - 1;
constexpr int owner_trial_runs(KernelKind kernel) {
  return (kernel == KernelKind::sddmm ? 4 : 5) * (kTuneRuns + 1);
}
constexpr int trial_runs(KernelKind kernel) {
  return kCandidates * (kTuneRuns + 1) + owner_trial_runs(kernel);
}
constexpr int kTrialRuns = trial_runs(KernelKind::spmm);
// A dynamic pattern: no owner trials.
constexpr int kDynamicTrialRuns = kCandidates * (kTuneRuns + 1);

const Fixture& fixture(const std::string& spec) {
  static std::map<std::string, Fixture> all;
  auto it = all.find(spec);
  if (it == all.end()) it = all.emplace(spec, make_fixture(spec)).first;
  return it->second;
}

// The modes' trials only (the tests of DistOptions::tune_engine's knob variants set it).
DistOptions auto_options() {
  DistOptions o;
  o.mode = CommMode::automatic;
  o.tune_runs = kTuneRuns;
  o.tiling.row_panel = 16;
  o.tune_engine = false;
  return o;
}

bool same_everywhere(long long v) {
  long long lo = v, hi = v;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The candidate index of run `i` of a tuning whose trials start at run 0.
int candidate_of_run(const DistKernel& kern, KernelKind kernel, int i) {
  if (i < trial_runs(kernel)) return std::min(i / (kTuneRuns + 1), kTaskCandidate);
  const AutoTuning& t = kern.auto_tuning();
  for (int c = 0; c < kCandidates; ++c) {
    if (t.candidates[c].mode == t.chosen) return c;
  }
  return -1;
}

TEST(AutoMode, NamesParseAndList) {
  EXPECT_EQ(parse_comm_mode("auto"), CommMode::automatic);
  EXPECT_STREQ(to_string(CommMode::automatic), "auto");
  bool listed = false;
  for (CommMode m : all_comm_modes()) listed = listed || m == CommMode::automatic;
  EXPECT_TRUE(listed);
}

// Every run, the trials' too, is byte for byte the run of a kernel of the mode that ran it (and
// within the tolerance of the single-process reference); after the choice every rank agrees.
TEST(AutoMode, EveryRunIsTheRunningModesResult) {
  struct Case {
    const char* spec;
    KernelKind kernel;
    int k;
  };
  for (const Case& c :
       {Case{"gen:kron:8", KernelKind::spmm, 5}, Case{"gen:stencil:6:5:4:2", KernelKind::sddmm, 3},
        Case{"gen:kron:8", KernelKind::spmv, 1}}) {
    const Fixture& f = fixture(c.spec);
    const std::string where = std::string(c.spec) + " " + to_string(c.kernel);
    DistKernel automatic(f.dm, c.kernel, c.k, auto_options());
    EXPECT_EQ(automatic.mode(), CommMode::automatic);
    EXPECT_EQ(automatic.chosen_mode(), CommMode::automatic) << where;
    std::vector<std::unique_ptr<DistKernel>> fixed;
    for (CommMode m : dist::kAutoCandidates) {
      DistOptions o = auto_options();
      o.mode = m;
      fixed.push_back(std::make_unique<DistKernel>(f.dm, c.kernel, c.k, o));
    }
    const int trials = trial_runs(c.kernel);
    const int owner_trials_end = kTaskCandidate * (kTuneRuns + 1) + owner_trial_runs(c.kernel);
    for (int i = 0; i < trials + 3; ++i) {
      const int which = 1 + i % 3;
      // The results of the three modes agree to the bit on these operands, so which kernel ran
      // is told by what it moved: the NetSparse candidate's engine sends frames only in its
      // runs, and the property bytes received are each mode's own (su: the whole operand).
      // Before the last trial run: the engine is alive (the losers go once the last one ran).
      const bool engine_alive = i + 1 < trials;
      const std::uint64_t moved_before =
          engine_alive ? automatic.engine()->stat(NS_STAT_MOVED_BYTES) : 0;
      const std::vector<float> got = run_kernel_once(automatic, f.dm, f.dm.local(), which);
      const std::uint64_t got_payload = automatic.last_run_stats().payload_bytes_in;
      const bool engine_moved =
          engine_alive && automatic.engine()->stat(NS_STAT_MOVED_BYTES) > moved_before;
      const int cand = candidate_of_run(automatic, c.kernel, i);
      ASSERT_GE(cand, 0) << where;
      const CommStats& got_stats = automatic.last_run_stats();
      const bool owner_trial = cand == kTaskCandidate && i < owner_trials_end;
      EXPECT_EQ(got_stats.owner_trial_runs, owner_trial ? 1u : 0u) << where << " run " << i;
      if (cand == kTaskCandidate) {
        // Its ways per owner are chosen by measured times: no fixed kernel is bound to run the
        // same ways. What it fetched and sent is its own: a task-packets run, every pair in
        // one way (or none: no remote nonzero), within the reference's tolerance (below).
        std::uint64_t owners = 0;
        for (const std::uint64_t u : fixed[0]->volume().unique_remote_per_owner) {
          owners += u > 0 ? 1 : 0;
        }
        EXPECT_EQ(got_stats.task_owners + got_stats.row_owners + got_stats.block_owners, owners)
            << where << " run " << i;
      } else {
        const std::vector<float> want = run_kernel_once(*fixed[cand], f.dm, f.dm.local(), which);
        EXPECT_TRUE(all_ranks(same_bytes(got, want)))
            << where << " run " << i << " (" << to_string(fixed[cand]->mode()) << ")";
        EXPECT_EQ(got_payload, fixed[cand]->last_run_stats().payload_bytes_in)
            << where << " run " << i << " (" << to_string(fixed[cand]->mode()) << ")";
      }
      if (engine_alive) {
        EXPECT_EQ(engine_moved, cand == 0) << where << " run " << i;
      }
      EXPECT_LE(max_relative_error(got, kernel_reference(automatic, f.dm.local(), which)),
                kTolerance)
          << where << " run " << i;
      EXPECT_EQ(automatic.auto_tuning().tuned, i + 1 >= trials) << where << " run " << i;
    }
    const AutoTuning& t = automatic.auto_tuning();
    EXPECT_EQ(t.tunings, 1);
    EXPECT_EQ(t.trial_runs, trials);
    EXPECT_EQ(automatic.chosen_mode(), t.chosen);
    EXPECT_NE(t.chosen, CommMode::automatic);
    EXPECT_TRUE(same_everywhere(static_cast<long long>(t.chosen))) << where;
    for (const AutoTuning::Candidate& cand : t.candidates) {
      EXPECT_EQ(cand.run_seconds.size(), static_cast<std::size_t>(kTuneRuns));
      EXPECT_GT(cand.seconds, 0.0);
      long long bits = 0;
      std::memcpy(&bits, &cand.seconds, sizeof bits);
      EXPECT_TRUE(same_everywhere(bits)) << where << ": the compared times differ between ranks";
    }
    EXPECT_NE(automatic.auto_tuning_json().find(std::string("\"chosen\": \"") +
                                                to_string(t.chosen) + "\""),
              std::string::npos);
  }
}

// The choice from forced per-rank times: the lowest max-over-ranks median, also where rank 0's
// own fastest (netsparse) and rank 1's (inspector-executor) are neither the winner (su).
TEST(AutoMode, ChoosesTheLowestMaxOverRanksMedian) {
  const Fixture& f = fixture("gen:kron:8");
  const int r = world_rank();
  struct Forced {
    std::vector<double> rank0, rank1, others;
    CommMode winner;
  };
  for (const Forced& c :
       {Forced{{1, 5, 3, 9}, {4, 2, 3, 9}, {1, 1, 1, 1}, CommMode::su},
        Forced{{3, 1, 2, 4}, {3, 1, 2, 4}, {3, 1, 2, 4}, CommMode::inspector_executor},
        Forced{{1, 2, 2, 3}, {1, 1, 2, 3}, {0.5, 0.5, 0.5, 0.5}, CommMode::netsparse},
        Forced{{3, 3, 3, 2}, {1, 3, 3, 2}, {3, 3, 3, 0.5}, CommMode::task_packets}}) {
    DistKernel kern(f.dm, KernelKind::spmm, 4, auto_options());
    dist::AutoAccess::force_seconds(kern, r == 0 ? c.rank0 : r == 1 ? c.rank1 : c.others);
    EXPECT_NE(kern.engine(), nullptr);  // the NetSparse candidate's, while it is alive
    for (int i = 0; i < kTrialRuns; ++i) (void)run_kernel_once(kern, f.dm, f.dm.local(), 1);
    const AutoTuning& t = kern.auto_tuning();
    ASSERT_TRUE(t.tuned);
    const CommMode want = c.winner == CommMode::netsparse ? t.candidates[0].mode : c.winner;
    EXPECT_EQ(kern.chosen_mode(), want);
    // One rank alone does not decide: the compared value is the max over ranks.
    if (world_size() > 1) {
      EXPECT_DOUBLE_EQ(t.candidates[0].seconds, std::max(c.rank0[0], c.rank1[0]));
    }
    // The losers are gone: no engine once NetSparse lost.
    EXPECT_EQ(kern.engine() == nullptr, c.winner != CommMode::netsparse);
    const std::vector<float> got = run_kernel_once(kern, f.dm, f.dm.local(), 2);
    EXPECT_LE(max_relative_error(got, kernel_reference(kern, f.dm.local(), 2)), kTolerance);
  }
}

// A new fixed pattern tunes again (its runs computed on it), so does retune(); a changing pattern
// (dynamic_pattern) keeps the choice.
TEST(AutoMode, RetunesOnANewPatternAndOnRequest) {
  const Fixture& f = fixture("gen:kron:8");
  DistKernel kern(f.dm, KernelKind::spmm, 3, auto_options());
  dist::AutoAccess::force_seconds(kern, {3, 2, 1, 4});  // su first
  for (int i = 0; i < kTrialRuns; ++i) (void)run_kernel_once(kern, f.dm, f.dm.local(), 1);
  ASSERT_EQ(kern.chosen_mode(), CommMode::su);
  const CsrMatrix sampled = sample_rows(f.dm.local(), SamplingParams{0.5, 0}, 7);
  kern.set_pattern(sampled);
  EXPECT_FALSE(kern.auto_tuning().tuned);
  EXPECT_EQ(kern.chosen_mode(), CommMode::automatic);
  dist::AutoAccess::force_seconds(kern, {3, 1, 2, 4});  // inspector-executor now
  for (int i = 0; i < kTrialRuns; ++i) {
    const std::vector<float> got = run_kernel_once(kern, f.dm, sampled, 1 + i % 3);
    EXPECT_LE(max_relative_error(got, kernel_reference(kern, sampled, 1 + i % 3)), kTolerance)
        << "trial run " << i << " on the new pattern";
  }
  EXPECT_EQ(kern.chosen_mode(), CommMode::inspector_executor);
  EXPECT_EQ(kern.auto_tuning().tunings, 2);
  kern.retune();
  EXPECT_FALSE(kern.auto_tuning().tuned);
  dist::AutoAccess::force_seconds(kern, {1, 2, 3, 4});
  for (int i = 0; i < kTrialRuns; ++i) (void)run_kernel_once(kern, f.dm, sampled, 1);
  EXPECT_EQ(kern.chosen_mode(), kern.auto_tuning().candidates[0].mode);
  EXPECT_EQ(kern.auto_tuning().tunings, 3);
  const std::vector<float> got = run_kernel_once(kern, f.dm, sampled, 2);
  EXPECT_LE(max_relative_error(got, kernel_reference(kern, sampled, 2)), kTolerance);

  DistOptions dyn = auto_options();
  dyn.dynamic_pattern = true;
  DistKernel changing(f.dm, KernelKind::spmm, 3, dyn);
  dist::AutoAccess::force_seconds(changing, {3, 1, 2, 4});
  for (int i = 0; i < kDynamicTrialRuns + 2; ++i) {
    const CsrMatrix rows = sample_rows(f.dm.local(), SamplingParams{0.6, 0}, i);
    changing.set_pattern(rows);
    const std::vector<float> out = run_kernel_once(changing, f.dm, rows, 1);
    EXPECT_LE(max_relative_error(out, kernel_reference(changing, rows, 1)), kTolerance)
        << "run " << i;
  }
  EXPECT_EQ(changing.chosen_mode(), CommMode::inspector_executor);
  EXPECT_EQ(changing.auto_tuning().tunings, 1);
}

// DistOptions::tune_engine: when a NetSparse engine wins the modes, its knob variants (batch
// / 8 and x 8, no concatenation delay, 4 KiB packets, units 1/1) are tried next, each for a
// warm-up and tune_runs runs, every run's result the reference's; the fastest is kept (the
// winner itself when no variant is faster), a mode other than NetSparse winning tries none, and
// a variant that won is the NetSparse candidate of the next tuning.
TEST(AutoMode, TunesTheWinningEnginesKnobsNext) {
  const Fixture& f = fixture("gen:kron:8");
  DistOptions o = auto_options();
  o.tune_engine = true;
  const std::vector<std::string> knobs = {
      "",         "", "", "", "batch 1024", "batch 65536", "concat delay 0 ns", "packet 4096 B",
      "units 1/1"};
  const int n = static_cast<int>(knobs.size());
  const int runs = n * (kTuneRuns + 1) + owner_trial_runs(KernelKind::spmm);
  struct Forced {
    std::vector<double> seconds;
    std::string chosen_knobs;
  };
  for (const Forced& c : {Forced{{1, 2, 3, 4, 2, 2, 0.5, 2, 2}, "concat delay 0 ns"},
                          Forced{{1, 2, 3, 4, 5, 5, 5, 5, 5}, ""},
                          Forced{{1, 2, 3, 4, 2, 0.25, 2, 2, 2}, "batch 65536"}}) {
    DistKernel kern(f.dm, KernelKind::spmm, 4, o);
    dist::AutoAccess::force_seconds(kern, c.seconds);
    for (int i = 0; i < runs; ++i) {
      EXPECT_FALSE(kern.auto_tuning().tuned) << "run " << i;
      const std::vector<float> got = run_kernel_once(kern, f.dm, f.dm.local(), 1 + i % 3);
      EXPECT_LE(max_relative_error(got, kernel_reference(kern, f.dm.local(), 1 + i % 3)),
                kTolerance)
          << "trial run " << i;
    }
    const AutoTuning& t = kern.auto_tuning();
    ASSERT_TRUE(t.tuned);
    ASSERT_EQ(t.candidates.size(), knobs.size());
    for (int i = 0; i < n; ++i) EXPECT_EQ(t.candidates[i].knobs, knobs[i]) << "candidate " << i;
    EXPECT_EQ(t.trial_runs, runs);
    EXPECT_EQ(t.chosen, t.candidates[0].mode);
    EXPECT_EQ(t.chosen_knobs, c.chosen_knobs);
    EXPECT_NE(kern.engine(), nullptr);
    EXPECT_NE(kern.auto_tuning_json().find("\"chosen_knobs\": \"" + c.chosen_knobs + "\""),
              std::string::npos)
        << kern.auto_tuning_json();
    const std::vector<float> got = run_kernel_once(kern, f.dm, f.dm.local(), 2);
    EXPECT_LE(max_relative_error(got, kernel_reference(kern, f.dm.local(), 2)), kTolerance);
    if (c.chosen_knobs.empty()) continue;
    // A new pattern tunes again; the variant that won is now the NetSparse candidate.
    const CsrMatrix sampled = sample_rows(f.dm.local(), SamplingParams{0.5, 0}, 3);
    kern.set_pattern(sampled);
    ASSERT_EQ(kern.auto_tuning().candidates.size(), std::size(dist::kAutoCandidates));
    EXPECT_EQ(kern.auto_tuning().candidates[0].knobs, c.chosen_knobs);
    dist::AutoAccess::force_seconds(kern, {3, 2, 1, 4});  // su: no variants this time
    for (int i = 0; i < kTrialRuns; ++i) {
      const std::vector<float> out = run_kernel_once(kern, f.dm, sampled, 1);
      EXPECT_LE(max_relative_error(out, kernel_reference(kern, sampled, 1)), kTolerance)
          << "trial run " << i << " on the new pattern";
    }
    EXPECT_TRUE(kern.auto_tuning().tuned);
    EXPECT_EQ(kern.chosen_mode(), CommMode::su);
    EXPECT_TRUE(kern.auto_tuning().chosen_knobs.empty());
    EXPECT_EQ(kern.auto_tuning().candidates.size(), std::size(dist::kAutoCandidates));
  }
}

TEST(AutoMode, BadOptionsRefusedOnEveryRank) {
  const Fixture& f = fixture("gen:kron:8");
  for (int runs : {0, -1, dist::kMaxTuneRuns + 1}) {
    DistOptions o = auto_options();
    o.tune_runs = runs;
    const std::string msg =
        invalid_argument_message([&] { DistKernel kern(f.dm, KernelKind::spmm, 2, o); });
    const bool named = msg.find("tune_runs") != std::string::npos;
    EXPECT_TRUE(named) << msg;
    EXPECT_TRUE(all_ranks(named)) << "tune_runs " << runs;
  }
  DistOptions split = auto_options();
  if (world_rank() % 2 == 1) split.tune_runs = 3;
  const std::string msg =
      invalid_argument_message([&] { DistKernel kern(f.dm, KernelKind::spmm, 2, split); });
  const bool named = world_size() == 1 ||
                     msg.find("the ranks disagree on DistOptions::tune_runs") != std::string::npos;
  EXPECT_TRUE(all_ranks(named)) << msg;
  // retune() is auto's: every rank refuses it on another mode.
  DistOptions su = auto_options();
  su.mode = CommMode::su;
  DistKernel fixed(f.dm, KernelKind::spmm, 2, su);
  bool refused = false;
  try {
    fixed.retune();
  } catch (const std::logic_error&) {
    refused = true;
  }
  EXPECT_TRUE(all_ranks(refused));
}

}  // namespace
}  // namespace netsparse
