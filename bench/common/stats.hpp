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

// The whole of an MPI benchmark's main whose ranks all parse the same argv: init_world(required),
// parse(argc, argv, rank, options) on every rank (rank 0 prints --help and errors; -1 means run,
// else the exit code, returned with MPI finalized), then body(options, world), then
// MPI_Finalize. The body's value is the process's exit code; it returns instead of finalizing.
template <class Options, class Body>
int run_job(int argc, char** argv, int (*parse)(int, char**, int rank, Options&), Body&& body,
            int required = MPI_THREAD_MULTIPLE) {
  const World world = init_world(argc, argv, required);
  Options options;
  if (const int exit_code = parse(argc, argv, world.rank, options); exit_code >= 0) {
    MPI_Finalize();
    return exit_code;
  }
  const int code = body(options, world);
  MPI_Finalize();
  return code;
}

// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
double median(std::vector<double> v);

// `v` reduced over the ranks of `comm` with `op` (every rank gets the result; collective).
double reduce_over_ranks(double v, MPI_Op op, MPI_Comm comm = MPI_COMM_WORLD);

// The slowest rank's time (or the largest value) over `comm` (collective).
double max_over_ranks(double v, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace netsparse::bench
