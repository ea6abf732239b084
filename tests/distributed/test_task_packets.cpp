// task-packets (exchange_task.cpp): results against the single-process reference (fp32 and fp64,
// SpMM at several K, SpMV, SDDMM), the per-owner choice on a matrix where it is known (tasks for
// some owners, rows for others, on the same rank), its statistics, the packet checks, and a
// forged triple on the wire refused on every rank with nothing lost (the kernel runs right
// afterwards). The forgery is real: this binary interposes MPI_Isend (the MPI profiling
// interface) and, when asked, corrupts the next task packet a rank sends.
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "dist_test_util.hpp"
#include "distributed/modes/owner_ways.hpp"
#include "distributed/modes/task_packet.hpp"
#include "mpi_test_util.hpp"
#include "netsparse/distributed.hpp"
#include "task_test_util.hpp"

namespace {

// The forgery: what to do to the next task packet this rank sends (none, a column past the
// owner's rows, a slot past the reply).
enum class Forge { none, column, slot };
Forge g_forge = Forge::none;
std::deque<std::vector<unsigned char>> g_forged;  // the corrupted copies, alive until the end

}  // namespace

extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag,
                         MPI_Comm comm, MPI_Request* request) {
  namespace task = netsparse::dist::task;
  if (g_forge != Forge::none && tag == task::kTagTasks && type == MPI_BYTE &&
      count >= static_cast<int>(task::kHeaderBytes + 8)) {
    auto& copy = g_forged.emplace_back(static_cast<const unsigned char*>(buf),
                                       static_cast<const unsigned char*>(buf) + count);
    task::Header h;
    std::memcpy(&h, copy.data(), sizeof h);
    const std::uint32_t bad = g_forge == Forge::column ? 0xfffffff0u : h.slots;
    // The last triple's column or slot.
    const std::size_t at =
        task::kHeaderBytes + (g_forge == Forge::column ? h.tasks * 4u : 0u) + (h.tasks - 1) * 4u;
    std::memcpy(copy.data() + at, &bad, 4);
    g_forge = Forge::none;
    return PMPI_Isend(copy.data(), count, type, dest, tag, comm, request);
  }
  return PMPI_Isend(buf, count, type, dest, tag, comm, request);
}

namespace netsparse::test {
namespace {

template <class T>
std::vector<T> operand_as(int which, gidx_t b, gidx_t e, int k) {
  const std::vector<float> f = operand_block(which, b, e, k);
  return std::vector<T>(f.begin(), f.end());
}

// One kernel of task-packets on `dm` against the double reference from `whole`'s rows; returns
// the kernel's total statistics.
template <class T>
CommStats check_against_reference(const DistMatrix& dm, const CsrMatrix& whole, KernelKind kernel,
                                  int k, const std::string& what) {
  DistOptions o;
  o.mode = CommMode::task_packets;
  o.scalar = scalar_type_of<T>;
  const double tolerance = std::is_same_v<T, float> ? kTolerance : kF64Tolerance;
  DistKernel kern(dm, kernel, k, o);
  const int rank = dm.rank();
  const CsrMatrix block = row_block(whole, dm.rows().begin(rank), dm.rows().end(rank));
  const gidx_t cb = dm.cols().begin(rank), ce = dm.cols().end(rank);
  for (int run = 0; run < 2; ++run) {  // a second run with another operand: nothing stale
    const int which = 1 + run;
    if (kernel == KernelKind::sddmm) {
      const std::vector<T> x = operand_as<T>(3, dm.rows().begin(rank), dm.rows().end(rank), k);
      const std::vector<T> y = operand_as<T>(which, cb, ce, k);
      std::vector<T> out(static_cast<std::size_t>(dm.local().nnz()));
      kern.sddmm(x, y, out);
      EXPECT_LE(max_relative_error(out, reference_sddmm(block, k, 3, which)), tolerance) << what;
    } else {
      const std::vector<T> b = operand_as<T>(which, cb, ce, k);
      std::vector<T> c(static_cast<std::size_t>(dm.rows().size(rank)) * k, T(7));
      if (kernel == KernelKind::spmv) {
        kern.spmv(b, c);
      } else {
        kern.spmm(b, c);
      }
      EXPECT_LE(max_relative_error(c, reference_spmm(block, k, which)), tolerance) << what;
    }
  }
  return kern.total_stats();
}

TEST(TaskPackets, EveryKernelMatchesTheReference) {
  for (const std::string& spec :
       {std::string("gen:kron:8"), std::string("gen:stencil:6:5:4:2"),
        std::string("gen:road:17:13:0.05"), data_path("distributed/small_symmetric.mtx")}) {
    const Fixture f = make_fixture(spec);
    for (int k : {1, 16, 128}) {
      check_against_reference<float>(f.dm, f.whole, KernelKind::spmm, k,
                                     spec + " f32 SpMM K=" + std::to_string(k));
      check_against_reference<double>(f.dm, f.whole, KernelKind::spmm, k,
                                      spec + " f64 SpMM K=" + std::to_string(k));
    }
    check_against_reference<float>(f.dm, f.whole, KernelKind::spmv, 1, spec + " f32 SpMV");
    check_against_reference<double>(f.dm, f.whole, KernelKind::spmv, 1, spec + " f64 SpMV");
    check_against_reference<float>(f.dm, f.whole, KernelKind::sddmm, 8, spec + " f32 SDDMM");
  }
}

// The per-owner choice on the matrix built for it (task_test_util.hpp): the expected owners
// choose tasks, the others rows, and the result is right either way.
TEST(TaskPackets, PerOwnerChoiceMixesTasksAndRows) {
  const int p = world_size(), rank = world_rank();
  constexpr gidx_t m = 200;
  const DistMatrix dm = mixed_choice_matrix(MPI_COMM_WORLD, m);
  const CsrMatrix whole = mixed_choice_whole(p, m);
  const std::uint64_t task_owners = p > 1 && rank % 2 == 0 ? 1 : 0;
  const std::uint64_t row_owners = p == 1 ? 0 : (rank % 2 == 1 ? 1 : 0) + (p >= 3 ? 1 : 0);
  for (int k : {16, 128}) {
    for (const CommStats& s :
         {check_against_reference<float>(dm, whole, KernelKind::spmm, k, "mixed f32"),
          check_against_reference<double>(dm, whole, KernelKind::spmm, k, "mixed f64")}) {
      EXPECT_EQ(s.runs, 2u);
      EXPECT_EQ(s.task_owners, 2 * task_owners) << "K=" << k;
      EXPECT_EQ(s.row_owners, 2 * row_owners) << "K=" << k;
    }
  }
  // K = 1: a triple is bigger than the row it replaces, so every owner is fetched.
  const CommStats spmv = check_against_reference<float>(dm, whole, KernelKind::spmv, 1, "spmv");
  EXPECT_EQ(spmv.task_owners, 0u);
  EXPECT_EQ(spmv.row_owners, 2 * (row_owners + task_owners));
  // SDDMM's output is per nonzero: always rows.
  const CommStats sddmm = check_against_reference<float>(dm, whole, KernelKind::sddmm, 16, "sddmm");
  EXPECT_EQ(sddmm.task_owners, 0u);
  EXPECT_EQ(sddmm.row_owners, 2 * (row_owners + task_owners));
}

// NETSPARSE_TASK_PACKETS forces the choice (A/B runs): rows fetches from every owner (what
// inspector-executor does), tasks sends task packets to every owner SpMM reaches, and the result
// is right either way; a value it does not know is refused, naming the variable.
TEST(TaskPackets, TheChoiceCanBeForced) {
  const int p = world_size(), rank = world_rank();
  constexpr gidx_t m = 200;
  const DistMatrix dm = mixed_choice_matrix(MPI_COMM_WORLD, m);
  const CsrMatrix whole = mixed_choice_whole(p, m);
  const std::uint64_t owners =
      p == 1 ? 0 : (rank % 2 == 0 ? 1 : 0) + (rank % 2 == 1 ? 1 : 0) + (p >= 3 ? 1 : 0);
  struct Restore {
    ~Restore() { unsetenv("NETSPARSE_TASK_PACKETS"); }
  } restore;
  setenv("NETSPARSE_TASK_PACKETS", "rows", 1);
  const CommStats rows = check_against_reference<float>(dm, whole, KernelKind::spmm, 16, "rows");
  EXPECT_EQ(rows.task_owners, 0u);
  EXPECT_EQ(rows.row_owners, 2 * owners);
  setenv("NETSPARSE_TASK_PACKETS", "tasks", 1);
  const CommStats tasks = check_against_reference<float>(dm, whole, KernelKind::spmm, 16, "tasks");
  EXPECT_EQ(tasks.task_owners, 2 * owners);
  EXPECT_EQ(tasks.row_owners, 0u);
  setenv("NETSPARSE_TASK_PACKETS", "sometimes", 1);
  DistOptions o;
  o.mode = CommMode::task_packets;
  try {
    DistKernel kern(dm, KernelKind::spmm, 16, o);
    ADD_FAILURE() << "an unknown NETSPARSE_TASK_PACKETS was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("NETSPARSE_TASK_PACKETS"), std::string::npos) << e.what();
  }
}

// NETSPARSE_TASK_PACKETS=block: every owner's whole block, sent from its operand, and the result
// right; each block is one message of the owner's rows, every one of them counted as received.
TEST(TaskPackets, BlockWayFetchesWholeBlocks) {
  const int p = world_size(), rank = world_rank();
  constexpr gidx_t m = 200;
  const DistMatrix dm = mixed_choice_matrix(MPI_COMM_WORLD, m);
  const CsrMatrix whole = mixed_choice_whole(p, m);
  const std::uint64_t owners = p == 1 ? 0 : (p >= 3 ? 2 : 1);
  struct Restore {
    ~Restore() { unsetenv("NETSPARSE_TASK_PACKETS"); }
  } restore;
  setenv("NETSPARSE_TASK_PACKETS", "block", 1);
  for (const int k : {1, 16}) {
    const KernelKind kernel = k == 1 ? KernelKind::spmv : KernelKind::spmm;
    const CommStats f32 = check_against_reference<float>(dm, whole, kernel, k, "block f32");
    const CommStats f64 = check_against_reference<double>(dm, whole, kernel, k, "block f64");
    for (const CommStats& s : {f32, f64}) {
      EXPECT_EQ(s.block_owners, 2 * owners) << "K=" << k;
      EXPECT_EQ(s.row_owners + s.task_owners, 0u) << "K=" << k;
    }
    EXPECT_EQ(f32.payload_bytes_in, 2 * owners * m * k * sizeof(float)) << "K=" << k;
    EXPECT_EQ(f64.payload_bytes_in, 2 * owners * m * k * sizeof(double)) << "K=" << k;
  }
  const CommStats sddmm = check_against_reference<float>(dm, whole, KernelKind::sddmm, 8, "sddmm");
  EXPECT_EQ(sddmm.block_owners, 2 * owners);
  (void)rank;
}

// The decisions of the tuning by measurement on replayed traces: per owner the cheapest way
// measured (ties to the earlier way tried, nothing measured: rows), and the mix kept unless a
// uniform way's slowest rank was strictly faster. The same trace gives the same choice.
TEST(TaskPackets, OwnerWayDecisionsOnATrace) {
  using dist::task::kNotMeasured;
  using dist::task::Way;
  constexpr double x = kNotMeasured;
  const std::vector<std::array<double, 3>> cost = {
      {3.0, 1.0, 2.0},  // tasks cheapest
      {1.0, 1.0, 1.0},  // a tie: rows, tried first
      {x, x, 0.5},      // only the block measured
      {x, x, x},        // nothing measured: rows
      {2.0, 3.0, 1.5},  // block cheapest
  };
  const std::vector<Way> all = {Way::rows, Way::tasks, Way::block};
  const std::vector<Way> want = {Way::tasks, Way::rows, Way::block, Way::rows, Way::block};
  EXPECT_EQ(dist::task::cheapest_ways(cost, all), want);
  EXPECT_EQ(dist::task::cheapest_ways(cost, all), dist::task::cheapest_ways(cost, all));
  // SDDMM tries no task packets: the tasks column is not looked at.
  const std::vector<Way> no_tasks = {Way::rows, Way::block};
  const std::vector<Way> want_no_tasks = {Way::block, Way::rows, Way::block, Way::rows, Way::block};
  EXPECT_EQ(dist::task::cheapest_ways(cost, no_tasks), want_no_tasks);
  // The bytes model's ways, rows, tasks, block, then the mix: a change must win by the margin.
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{3, 3, 2, 4, 1}), 4u);  // the mix
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{3, 3, 1, 4, 1}), 2u);  // a tie: earlier
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{3, 1, 0.5, 2, x}), 2u);
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{1, 2, 1, x, 2}), 0u);
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{1, 0.97, 2, 2, 0.96}), 0u);  // < 5 %
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{1, 0.97, 2, 2, 0.95}), 4u);
  EXPECT_EQ(dist::task::kept_trial(std::vector<double>{1, 0.97, 2, 2, 0.96}, 0.0), 4u);
}

// DistOptions::tune_owners: the first fifteen runs are the trials (the bytes model's ways,
// rows, tasks, block, the mix; a warm-up and tune_runs = 2 measured runs each; block only for
// owners this rank needs half the rows of),
// every one right; then the ways stay fixed run after run; a new pattern tunes again. Also by
// NETSPARSE_TASK_PACKETS=measure; the variable must be the same on every rank.
TEST(TaskPackets, OwnerWaysTunedByMeasurement) {
  const int p = world_size(), rank = world_rank();
  constexpr gidx_t m = 200;
  constexpr int k = 16;
  const DistMatrix dm = mixed_choice_matrix(MPI_COMM_WORLD, m);
  const CsrMatrix whole = mixed_choice_whole(p, m);
  const CsrMatrix block = row_block(whole, dm.rows().begin(rank), dm.rows().end(rank));
  const std::uint64_t owners = p == 1 ? 0 : (p >= 3 ? 2 : 1);
  // Even ranks need all m rows of the next rank's block: the block trial takes it.
  const std::uint64_t block_able = p > 1 && rank % 2 == 0 ? 1 : 0;
  DistOptions o;
  o.mode = CommMode::task_packets;
  o.tune_owners = true;
  DistKernel kern(dm, KernelKind::spmm, k, o);
  const gidx_t cb = dm.cols().begin(rank), ce = dm.cols().end(rank);
  const auto run = [&](int which) {
    const std::vector<float> b = operand_block(which, cb, ce, k);
    std::vector<float> c(static_cast<std::size_t>(m) * k, 7.0f);
    kern.spmm(b, c);
    EXPECT_LE(max_relative_error(c, reference_spmm(block, k, which)), kTolerance)
        << "run with operand " << which;
    return kern.last_run_stats();
  };
  struct Expect {
    std::uint64_t rows, tasks, blocks;
  };
  // The bytes model sends the even ranks' hub row as task packets (PerOwnerChoiceMixes...).
  const std::uint64_t hub = block_able;
  const Expect trials[] = {
      {owners - hub, hub, 0}, {owners, 0, 0}, {0, owners, 0}, {owners - block_able, 0, block_able}};
  for (int i = 0; i < 12; ++i) {
    const CommStats s = run(1 + i % 3);
    const Expect& e = trials[i / 3];
    EXPECT_EQ(s.owner_trial_runs, 1u) << "run " << i;
    EXPECT_EQ(s.row_owners, e.rows) << "run " << i;
    EXPECT_EQ(s.task_owners, e.tasks) << "run " << i;
    EXPECT_EQ(s.block_owners, e.blocks) << "run " << i;
  }
  for (int i = 12; i < 15; ++i) {
    const CommStats s = run(1 + i % 3);
    EXPECT_EQ(s.owner_trial_runs, 1u) << "the mix's run " << i;
    EXPECT_EQ(s.row_owners + s.task_owners + s.block_owners, owners) << "run " << i;
  }
  const CommStats fixed = run(2);
  EXPECT_EQ(fixed.owner_trial_runs, 0u);
  EXPECT_EQ(fixed.row_owners + fixed.task_owners + fixed.block_owners, owners);
  for (int i = 0; i < 3; ++i) {
    const CommStats s = run(3 - i);
    EXPECT_EQ(s.owner_trial_runs, 0u);
    EXPECT_EQ(s.row_owners, fixed.row_owners) << "the ways changed after the choice";
    EXPECT_EQ(s.task_owners, fixed.task_owners) << "the ways changed after the choice";
    EXPECT_EQ(s.block_owners, fixed.block_owners) << "the ways changed after the choice";
  }
  kern.set_pattern(dm.local());
  EXPECT_EQ(run(1).owner_trial_runs, 1u) << "a new pattern tunes again";

  struct Restore {
    ~Restore() { unsetenv("NETSPARSE_TASK_PACKETS"); }
  } restore;
  setenv("NETSPARSE_TASK_PACKETS", "measure", 1);
  const CommStats measured = check_against_reference<float>(dm, whole, KernelKind::spmm, k, "env");
  EXPECT_EQ(measured.owner_trial_runs, 2u);
  if (p > 1) {
    // One rank measuring and the others not would run different setups: refused on every rank.
    if (rank == 1) unsetenv("NETSPARSE_TASK_PACKETS");
    DistOptions plain;
    plain.mode = CommMode::task_packets;
    const std::string msg =
        invalid_argument_message([&] { DistKernel split(dm, KernelKind::spmm, k, plain); });
    const bool named = msg.find("NETSPARSE_TASK_PACKETS") != std::string::npos;
    EXPECT_TRUE(all_ranks(named)) << msg;
  }
}

// The bytes counted are the wire model's for the messages sent: a task packet and partial sums
// where tasks were chosen, fewer bytes than inspector-executor on the same pattern.
TEST(TaskPackets, MovesFewerBytesThanInspectorExecutorWhereItChoseTasks) {
  ASSERT_GE(world_size(), 2) << "registered at np 2-4 (nothing remote on one rank)";
  constexpr gidx_t m = 200;
  constexpr int k = 64;
  const DistMatrix dm = mixed_choice_matrix(MPI_COMM_WORLD, m);
  const auto bytes_of = [&](CommMode mode) {
    DistOptions o;
    o.mode = mode;
    DistKernel kern(dm, KernelKind::spmm, k, o);
    const int rank = dm.rank();
    const std::vector<float> b = operand_block(1, dm.cols().begin(rank), dm.cols().end(rank), k);
    std::vector<float> c(static_cast<std::size_t>(dm.rows().size(rank)) * k);
    kern.spmm(b, c);
    std::uint64_t bytes = kern.total_stats().bytes_sent;
    MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return bytes;
  };
  const std::uint64_t tasks = bytes_of(CommMode::task_packets);
  const std::uint64_t ie = bytes_of(CommMode::inspector_executor);
  EXPECT_LT(tasks, ie);
  // Rank 0's hub row: m unit-valued triples (8 B each + 16 B header) to rank 1 and one partial
  // sum back instead of m rows of K floats; the rest is inspector-executor's.
  // Every even rank's hub row (values 1 on rank 0 only: the Boolean format there).
  std::uint64_t saved = 0;
  for (int r = 0; r < world_size(); r += 2) {
    saved += (50 + m * k * 4) - (50 + dist::task::packet_bytes(m, r == 0, 4)) -
             (50 + std::uint64_t{k} * 4);
  }
  EXPECT_EQ(ie - tasks, saved);
}

TEST(TaskPackets, PacketChecksRefuseForgedPackets) {
  namespace task = dist::task;
  // A good packet: 2 slots, 3 triples with values, for an owner of 10 rows.
  std::vector<std::byte> good(task::packet_bytes(3, false, sizeof(float)));
  const task::Header h{task::kMagic, 0, 2, 3};
  std::memcpy(good.data(), &h, sizeof h);
  const std::uint32_t slots[3] = {0, 0, 1}, cols[3] = {9, 0, 4};
  const float vals[3] = {1.5f, -2.0f, 0.5f};
  std::memcpy(good.data() + 16, slots, 12);
  std::memcpy(good.data() + 28, cols, 12);
  std::memcpy(good.data() + 40, vals, 12);
  EXPECT_EQ(task::check_packet<float>(good, 2, 3, false, 10), "");
  std::vector<float> b(10 * 2), sums(2 * 2, 99.0f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i);
  task::apply_packet<float>(good, b.data(), 2, sums.data());
  EXPECT_EQ(sums,
            (std::vector<float>{1.5f * 18 - 2.0f * 0, 1.5f * 19 - 2.0f * 1, 0.5f * 8, 0.5f * 9}));
  // Each forgery alone is refused with its reason.
  const auto forged = [&](std::size_t at, std::uint32_t v) {
    std::vector<std::byte> p = good;
    std::memcpy(p.data() + at, &v, 4);
    return task::check_packet<float>(p, 2, 3, false, 10);
  };
  EXPECT_NE(forged(28 + 8, 10).find("column 10 outside the owner's 10 rows"), std::string::npos);
  EXPECT_NE(forged(16 + 4, 2).find("slot 2 outside the 2 slots"), std::string::npos);
  EXPECT_NE(forged(0, 0).find("magic"), std::string::npos);
  EXPECT_NE(forged(8, 3).find("differs from the setup"), std::string::npos);
  EXPECT_NE(forged(4, task::kUnitValues).find("differs from the setup"), std::string::npos);
  EXPECT_NE(task::check_packet<float>(std::span(good).first(good.size() - 1), 2, 3, false, 10)
                .find("bytes, the setup announced"),
            std::string::npos);
  EXPECT_NE(task::check_packet<float>(good, 2, 3, false, 9).find("column 9"), std::string::npos);
}

// A forged triple on the wire: the owner refuses the whole packet (never reads outside its rows),
// the sender learns it from the empty reply, every rank throws the same error, and the kernel
// then runs right: nothing was lost or left in flight.
TEST(TaskPackets, ForgedTripleOnTheWireIsRefusedOnEveryRank) {
  const int p = world_size(), rank = world_rank();
  ASSERT_GE(p, 2) << "registered at np 2-4";
  constexpr gidx_t m = 200;
  constexpr int k = 16;
  const DistMatrix dm = mixed_choice_matrix(MPI_COMM_WORLD, m);
  const CsrMatrix whole = mixed_choice_whole(p, m);
  const CsrMatrix block = row_block(whole, dm.rows().begin(rank), dm.rows().end(rank));
  DistOptions o;
  o.mode = CommMode::task_packets;
  DistKernel kern(dm, KernelKind::spmm, k, o);
  const std::vector<float> b = operand_block(1, dm.cols().begin(rank), dm.cols().end(rank), k);
  std::vector<float> c(static_cast<std::size_t>(m) * k);
  for (Forge forge : {Forge::column, Forge::slot}) {
    if (rank == 0) g_forge = forge;  // rank 0 sends task packets to rank 1 (task_test_util.hpp)
    std::string what;
    try {
      kern.spmm(b, c);
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    EXPECT_EQ(g_forge, Forge::none) << "the forgery was not sent";
    // Every rank fails the run; the owner (rank 1) says why, the forger that its packet was
    // refused, the others carry the lowest failing rank's (the forger's) text.
    EXPECT_NE(what.find("refused"), std::string::npos) << what;
    if (rank == 1) {
      EXPECT_NE(what.find("refused the task packet of rank 0"), std::string::npos) << what;
      EXPECT_NE(what.find(forge == Forge::column ? "column 4294967280 outside the owner's 200 rows"
                                                 : "slot 1 outside the 1 slots"),
                std::string::npos)
          << what;
    } else {
      EXPECT_NE(what.find("rank 1 refused our task packet"), std::string::npos) << what;
    }
    kern.spmm(b, c);
    EXPECT_LE(max_relative_error(c, reference_spmm(block, k, 1)), kTolerance);
  }
}

}  // namespace
}  // namespace netsparse::test
