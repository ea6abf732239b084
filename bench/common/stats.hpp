// The statistics every benchmark reports: medians over rounds, the slowest rank's value; and
// the MPI start every MPI benchmark shares.
#pragma once

#include <mpi.h>

#include <vector>

namespace netsparse::bench {

// MPI_COMM_WORLD after MPI_Init_thread at `required` (by default MPI_THREAD_MULTIPLE: the
// engine's progress thread calls MPI): this rank, the number of ranks and the thread level
// provided (checked by the caller where it matters).
struct World {
  int rank = 0, size = 1, provided = 0;
};
World init_world(int& argc, char**& argv, int required = MPI_THREAD_MULTIPLE);

// The start of an MPI benchmark whose ranks all parse the same argv: init_world(required), then
// parse(argc, argv, rank, options) on every rank (rank 0 prints --help and errors; -1 means run,
// else an exit code). exit_code >= 0: leave main with it, MPI already finalized.
struct JobStart {
  World world;
  int exit_code = -1;
};
template <class Options>
JobStart start_job(int& argc, char**& argv, int (*parse)(int, char**, int rank, Options&),
                   Options& options, int required = MPI_THREAD_MULTIPLE) {
  JobStart s{init_world(argc, argv, required)};
  s.exit_code = parse(argc, argv, s.world.rank, options);
  if (s.exit_code >= 0) MPI_Finalize();
  return s;
}

// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
double median(std::vector<double> v);

// `v` reduced over the ranks of `comm` with `op` (every rank gets the result; collective).
double reduce_over_ranks(double v, MPI_Op op, MPI_Comm comm = MPI_COMM_WORLD);

// The slowest rank's time (or the largest value) over `comm` (collective).
double max_over_ranks(double v, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace netsparse::bench
