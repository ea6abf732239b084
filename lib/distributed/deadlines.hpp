// Deadlines of a run's waits and its clock.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>

#include "netsparse/distributed.hpp"

namespace netsparse::dist {

// netsparse-node's and task-packets' deadline for every wait of a run (its host barrier, the
// leaders' quiesces and completions; task-packets' messages; the run's argument agreement in
// DistKernel): 2 x the engine watchdog + 1 s,
// or 120 s without one. A rank that died makes the run throw after it instead of hanging.
inline std::chrono::milliseconds watchdog_wait_deadline(std::uint32_t watchdog_ms) {
  return std::chrono::milliseconds(watchdog_ms > 0 ? 2 * std::int64_t{watchdog_ms} + 1000 : 120000);
}
inline std::chrono::milliseconds node_wait_deadline(const DistOptions& options) {
  return watchdog_wait_deadline(options.engine.watchdog_ms);
}

// Seconds since an arbitrary origin (MPI_Wtime).
inline double now_seconds() {
  return MPI_Wtime();
}

}  // namespace netsparse::dist
