// The host layout the shared-memory rings (shm_rings.cpp) are built on: which ranks share this
// rank's host (real, or virtual hosts of NETSPARSE_RANKS_PER_HOST), and how much memory this
// rank's rings may take.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace netsparse::transport {

// This rank's host communicator (collective over `comm`); `machine`, when given and not null,
// is the ranks sharing memory already split, taken over. std::invalid_argument (the same reason
// on every rank) for a layout that cannot work. layout_agreed: the caller's own agreement has
// covered the layout (NETSPARSE_RANKS_PER_HOST agreed, virtual_host_refusal on every rank), so
// no allreduce of its own (issue 34: one collective less at every open).
MPI_Comm split_host(MPI_Comm comm, MPI_Comm* machine, bool layout_agreed = false);
// Why NETSPARSE_RANKS_PER_HOST cannot cut `comm` into virtual hosts inside the machines
// (`machine`: the ranks sharing this rank's memory), "" when it can or is unset. Local: this
// rank checks its own virtual host's members against its machine's group, so a caller must
// agree on the result (ns_open_mpi refuses with it in its one agreement).
std::string virtual_host_refusal(MPI_Comm comm, MPI_Comm machine);
// The bytes this rank's rings may take (warns once when rings of `stride` bytes to every rank
// of the host would not fit).
std::uint64_t ring_memory_limit(MPI_Comm host, int host_size, std::uint64_t stride);

}  // namespace netsparse::transport
