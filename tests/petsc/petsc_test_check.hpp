// What the PETSc interop test programs share: a failed check is printed with the rank and
// counted (the program reports the sum over ranks at the end), a failed PETSc call throws.
#pragma once

#include <petscsys.h>

#include <cstdio>
#include <string>

#include "netsparse/petsc.hpp"

namespace petsc_test {

inline int rank = 0;
inline int failures = 0;

inline void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

inline void check(PetscErrorCode e, const char* call) {
  netsparse::petsc_detail::check(e, call);
}

}  // namespace petsc_test
