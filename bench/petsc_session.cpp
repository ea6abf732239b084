#include "petsc_session.hpp"

#include <petscsys.h>

#include "netsparse/petsc.hpp"

namespace netsparse::bench {
namespace {

int finalize_petsc(MPI_Comm, int, void*, void*) {
  PetscFinalize();
  return MPI_SUCCESS;
}

}  // namespace

void ensure_petsc() {
  using petsc_detail::check;
  PetscBool up = PETSC_FALSE;
  check(PetscInitialized(&up), "PetscInitialized");
  if (up == PETSC_TRUE) return;
  check(PetscInitializeNoArguments(), "PetscInitializeNoArguments");
  int key = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_petsc, &key, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
}

double max_over_ranks(MPI_Comm comm, double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, comm);
  return v;
}

}  // namespace netsparse::bench
