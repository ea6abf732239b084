// Small helpers of the tests that run under mpirun.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdio>

namespace netsparse::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// SplitMix64's finalizer: deterministic, well-spread test values from an index (every rank
// computes any rank's values).
inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// MPI_Init_thread at MPI_THREAD_MULTIPLE for the test programs with their own main (the RIG
// engine's progress thread calls MPI); this rank and the world size. The caller checks
// `provided` where it matters.
struct World {
  int rank = 0, size = 0, provided = 0;
};
inline World init_world(int& argc, char**& argv) {
  World w;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &w.provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  return w;
}

// The verdict of a program whose last rank is made to fail, collective over `survivors` (every
// other rank of a world of `size`): rank 0 prints "<program>: PASS|FAIL (k of n survivors
// reported, f failed checks)", PASS when all n = size - 1 survivors reported and no check
// failed. The line the test's pass and fail expressions read: under orte_enable_recovery
// mpirun's exit code says nothing.
inline void print_survivors_verdict(const char* program, int failures, int size,
                                    MPI_Comm survivors) {
  int reported[2] = {failures, 1}, total[2] = {0, 0};  // {failures, survivors that reported}
  MPI_Allreduce(reported, total, 2, MPI_INT, MPI_SUM, survivors);
  if (world_rank() == 0)
    std::printf("%s: %s (%d of %d survivors reported, %d failed checks)\n", program,
                total[0] == 0 && total[1] == size - 1 ? "PASS" : "FAIL", total[1], size - 1,
                total[0]);
  std::fflush(stdout);
}

}  // namespace netsparse::test
