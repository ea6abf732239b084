// A C++-only consumer of the installed package: compiles against netsparse_mpi.h (so <mpi.h>
// must come with NetSparse::netsparse through MPI::MPI_CXX), links, and runs without mpirun.
#include <cstdio>
#include <cstring>

#include "netsparse/config.h"
#include "netsparse/netsparse_mpi.h"

int main() {
  // Referenced, not called: the MPI entry point must resolve in libnetsparse.
  auto* open_mpi = &ns_open_mpi;
  const char* v = ns_version_string();
  if (open_mpi == nullptr || std::strcmp(v, NETSPARSE_VERSION_STRING) != 0) {
    std::fprintf(stderr, "version mismatch: library %s, headers %s\n", v, NETSPARSE_VERSION_STRING);
    return 1;
  }
  std::printf("netsparse %s C++-only consumer OK\n", v);
  return 0;
}
