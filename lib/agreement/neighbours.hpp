// Who sends to me: the reverse of a sparse communication pattern, found without an O(ranks)
// array. Every rank knows the ranks it will send to (a pattern's owners); the ranks that will
// send to it follow from the non-blocking consensus of Hoefler, Siebert and Lumsdaine (NBX,
// "Scalable communication protocols for dynamic sparse data exchange", PPoPP 2010): a
// synchronous send to each target, then an MPI_Ibarrier entered once all of them were received;
// when the barrier completes, every message has been received. O(targets + sources) messages
// and memory per rank; an MPI_Alltoall of flags would cost every rank O(ranks) memory and
// O(ranks) messages.
#pragma once

#include <mpi.h>

#include <chrono>
#include <span>
#include <vector>

namespace netsparse::agreement {

// Collective over comm: the ranks that listed this rank among their `targets` (ascending, each
// once). Targets must be ranks of comm (std::invalid_argument otherwise, on this rank: agree on
// it before, as the callers' argument agreement does); repeats count once, this rank itself is
// allowed. A rank that never joins makes the others throw std::runtime_error after `deadline`
// (deadline <= 0: wait for ever). Uses a private duplicate of comm (no tag of the caller's is
// matched).
[[nodiscard]] std::vector<int> sources_of(MPI_Comm comm, std::span<const int> targets,
                                          std::chrono::milliseconds deadline = {});

}  // namespace netsparse::agreement
