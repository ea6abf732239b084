// How many MPI collective calls this process made: the benchmark's scale counters ("collectives
// per run", issue 34). Counted with MPI's profiling interface, as mpiP and the PMPI tools do:
// bench/common/mpi_calls.cpp defines the collective entry points of MPI and forwards each to its
// PMPI_ name after counting it, so every caller in the executable -- the library's static
// components included -- is counted without a change to the library. Only calls on
// communicators of more than one rank count (a collective on MPI_COMM_SELF costs nothing).
#pragma once

#include <cstdint>

namespace netsparse::bench {

// Collective calls of this process so far (blocking and non-blocking collectives, communicator
// and window creation and destruction, which synchronise like one).
[[nodiscard]] std::uint64_t mpi_collective_calls() noexcept;

}  // namespace netsparse::bench
