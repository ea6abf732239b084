// The GoogleTest main of every test binary launched with mpirun: MPI at the thread level
// NETSPARSE_TEST_THREAD_LEVEL (default MPI_THREAD_MULTIPLE: the RIG engine's progress thread
// calls MPI; a library that does not provide it fails the run), rank 0 prints the usual report,
// the other ranks print only their failures (prefixed with the rank), and the exit code is
// non-zero on every rank when any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "lsan_mpi.hpp"

#ifndef NETSPARSE_TEST_THREAD_LEVEL
#define NETSPARSE_TEST_THREAD_LEVEL MPI_THREAD_MULTIPLE
#endif

namespace {

class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  netsparse::test::lsan_disable();  // MPI_Init's one-time allocations (lsan_mpi.hpp)
  MPI_Init_thread(&argc, &argv, NETSPARSE_TEST_THREAD_LEVEL, &provided);
  netsparse::test::lsan_enable();
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = 0;
  if (provided < NETSPARSE_TEST_THREAD_LEVEL) {
    std::fprintf(stderr, "rank %d: MPI provides thread level %d, the tests need %d\n", rank,
                 provided, NETSPARSE_TEST_THREAD_LEVEL);
    failed = 1;
  } else {
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  }
  int worst = failed;
  MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst != 0 && failed == 0) std::fprintf(stderr, "rank %d: another rank failed\n", rank);
  // Leaks are checked while Open MPI's components are still loaded (lsan_mpi.hpp); everything
  // of ours is destroyed by now.
  netsparse::test::lsan_check_now();
  MPI_Finalize();
  return worst;
}
