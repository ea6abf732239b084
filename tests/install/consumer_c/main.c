/* A C-only consumer of the installed package: compiles netsparse_mpi.h as C (so <mpi.h> must
 * come with NetSparse::netsparse through MPI::MPI_C), links with the C linker, runs without
 * mpirun. */
#include <stdio.h>
#include <string.h>

#include "netsparse/config.h"
#include "netsparse/netsparse_mpi.h"

int main(void) {
  /* Referenced, not called: the MPI entry point must resolve in libnetsparse. */
  ns_status_t (*open_mpi)(MPI_Comm, const struct ns_context_attr*, ns_context**) = &ns_open_mpi;
  const char* v = ns_version_string();
  if (open_mpi == NULL || strcmp(v, NETSPARSE_VERSION_STRING) != 0) {
    fprintf(stderr, "version mismatch: library %s, headers %s\n", v, NETSPARSE_VERSION_STRING);
    return 1;
  }
  printf("netsparse %s C-only consumer OK\n", v);
  return 0;
}
