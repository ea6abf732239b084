// LeakSanitizer around MPI for every MPI test program (the GoogleTest main, mpi_gtest_main.cpp,
// and the programs with their own main): MPI_Init's one-time allocations are not tracked, and the
// leak check runs before MPI_Finalize, whose dlclose of Open MPI's components turns their
// allocations into unmatchable "<unknown module>" frames. No-ops without ASan.
#pragma once

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

namespace netsparse::test {

inline void lsan_disable() {
#ifdef NETSPARSE_TEST_LSAN
  __lsan_disable();
#endif
}
inline void lsan_enable() {
#ifdef NETSPARSE_TEST_LSAN
  __lsan_enable();
#endif
}
// Checks for leaks now (objects still referenced from the stack are not leaks); none at exit.
inline void lsan_check_now() {
#ifdef NETSPARSE_TEST_LSAN
  __lsan_do_leak_check();
#endif
}

}  // namespace netsparse::test
