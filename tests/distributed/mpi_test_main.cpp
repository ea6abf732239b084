// GoogleTest main for tests that run under mpirun: MPI_THREAD_MULTIPLE (the RIG engine's
// progress thread calls MPI), rank 0 prints the usual report, the other ranks print only their
// failures (prefixed with the rank), and the exit code is non-zero if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#if defined(__SANITIZE_ADDRESS__)
#define NETSPARSE_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NETSPARSE_TEST_LSAN 1
#endif
#endif
#ifdef NETSPARSE_TEST_LSAN
#include <sanitizer/lsan_interface.h>
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
#ifdef NETSPARSE_TEST_LSAN
  // MPI_Init keeps one-time allocations of components it then unloads; their frames cannot be
  // symbolized, so no suppression can name them. They are Open MPI's, not ours.
  __lsan_disable();
#endif
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
#ifdef NETSPARSE_TEST_LSAN
  __lsan_enable();
#endif
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#ifdef NETSPARSE_TEST_LSAN
  // Check leaks while Open MPI's components are still loaded (MPI_Finalize dlcloses them and
  // their allocations turn into unmatchable "<unknown module>" frames); ours are freed by now.
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
  return failed;
}
