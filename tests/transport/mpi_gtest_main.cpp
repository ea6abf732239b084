// main() for transport tests launched with mpirun: every rank runs the same tests; the exit code
// is non-zero on every rank when any rank failed. The thread level requested is
// NETSPARSE_TEST_THREAD_LEVEL (default MPI_THREAD_MULTIPLE).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#ifndef NETSPARSE_TEST_THREAD_LEVEL
#define NETSPARSE_TEST_THREAD_LEVEL MPI_THREAD_MULTIPLE
#endif

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, NETSPARSE_TEST_THREAD_LEVEL, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Ranks other than 0 print failures only: N copies of every "[ OK ]" line are noise. Set
  // before InitGoogleTest, which picks the printer.
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (worst != 0 && rc == 0) std::fprintf(stderr, "rank %d: another rank failed\n", rank);
  return worst;
}
