// Objects alive at MPI_Finalize (internal).
//
// A DistKernel or RigEngine declared in main usually outlives MPI_Finalize: its destructor then
// runs after MPI is gone, and a RIG engine's progress thread may still be calling MPI while
// MPI_Finalize tears it down. So every object that holds MPI resources registers a FinalizeHook
// with a teardown. The first hook arms an attribute on MPI_COMM_SELF whose delete callback MPI
// runs at the very start of MPI_Finalize (MPI-2.2 and later, section "Allowing User Functions
// at Process Termination"), while MPI still works: the callback runs the teardowns of every live
// object in reverse order of registration (a kernel before the engine it was built with), so
// they release their MPI resources collectively, exactly as their destructors would have. What
// is left for the destructors after that is plain memory: they call no MPI.
//
// The teardowns are collective over the objects' communicators, as their destructors are: every
// rank must reach MPI_Finalize with the same live objects (what SPMD code does naturally).
#pragma once

#include <cstdint>
#include <functional>

namespace netsparse::rig {

class FinalizeHook {
 public:
  FinalizeHook() = default;
  // Registers `teardown` (arming the MPI_COMM_SELF attribute on first use; MPI must be
  // initialized). It runs at most once: at the start of MPI_Finalize, unless this hook is
  // destroyed or released first. It must not throw (exceptions are swallowed).
  explicit FinalizeHook(std::function<void()> teardown);
  ~FinalizeHook();
  FinalizeHook(const FinalizeHook&) = delete;
  FinalizeHook& operator=(const FinalizeHook&) = delete;
  FinalizeHook(FinalizeHook&& other) noexcept;
  FinalizeHook& operator=(FinalizeHook&& other) noexcept;

  // Unregisters without running the teardown (the owner is tearing down itself).
  void release() noexcept;

 private:
  std::uint64_t id_ = 0;  // 0: not registered
};

// True once MPI_Finalize has started (our callback ran) or finished: MPI must not be called.
[[nodiscard]] bool mpi_finalizing() noexcept;

// Live registered hooks (for tests).
[[nodiscard]] int live_finalize_hooks() noexcept;

}  // namespace netsparse::rig
