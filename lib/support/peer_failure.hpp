// The process's record that a peer failed: a work request timed out or found its peer dead, a
// transport saw a peer's process vanish, or a bounded collective step gave up on a rank that
// never joined. Once recorded, MPI_Finalize may wait for ever on the dead rank (Open MPI 4.1
// frees its windows with a barrier), so ns_finalize_or_exit leaves with _exit instead
// (docs/api.md, "A peer that died, and MPI_Finalize"). Set from any thread; never cleared.
#pragma once

#include <cstdint>
#include <string>

namespace netsparse::support {

// Records a peer failure; the first `what` is kept for the exit message.
void record_peer_failure(const char* what) noexcept;
[[nodiscard]] bool peer_failure_recorded() noexcept;
// How many peer failures were recorded so far: an engine compares it with the count at its
// creation to learn whether a peer failed during its life (PeerHealth's presume-dead evidence).
[[nodiscard]] std::uint64_t peer_failure_count() noexcept;
// What the first recorded failure was ("" when none).
[[nodiscard]] std::string peer_failure_what();

}  // namespace netsparse::support
