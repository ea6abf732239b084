// main() for transport tests launched with mpirun: every rank runs the same tests; the exit code
// is non-zero on every rank when any rank failed. The thread level requested is
// NETSPARSE_TEST_THREAD_LEVEL (default MPI_THREAD_MULTIPLE).
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

#ifndef NETSPARSE_TEST_THREAD_LEVEL
#define NETSPARSE_TEST_THREAD_LEVEL MPI_THREAD_MULTIPLE
#endif

int main(int argc, char** argv) {
  int provided = 0;
#ifdef NETSPARSE_TEST_LSAN
  // MPI_Init loads every component, keeps one-time allocations of those it then unloads, and
  // their frames can no longer be symbolized (so lsan.supp cannot name them): not our leaks.
  __lsan_disable();
#endif
  MPI_Init_thread(&argc, &argv, NETSPARSE_TEST_THREAD_LEVEL, &provided);
#ifdef NETSPARSE_TEST_LSAN
  __lsan_enable();
#endif
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Ranks other than 0 print failures only: N copies of every "[ OK ]" line are noise. Set
  // before InitGoogleTest, which picks the printer.
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#ifdef NETSPARSE_TEST_LSAN
  // Check for leaks now, while Open MPI's components are still loaded: MPI_Finalize dlcloses
  // them, after which their one-time allocations show up as "<unknown module>" frames that no
  // suppression can match. Everything of ours is destroyed by now, so nothing real is missed;
  // the check runs once, so the exit-time check is skipped.
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
  if (worst != 0 && rc == 0) std::fprintf(stderr, "rank %d: another rank failed\n", rank);
  return worst;
}
