/* NetSparse over MPI: open a context on a communicator. The transport (verbs RC queue pairs when
 * an active RDMA device exists, else MPI point-to-point) is chosen by attr->transport, or by
 * NETSPARSE_TRANSPORT=auto|verbs|mpi|inproc when it is NS_TRANSPORT_AUTO.
 *
 * Thread level (MPI_Query_thread):
 *   NS_PROGRESS_THREAD needs MPI_THREAD_MULTIPLE (the progress thread calls MPI while the
 *   application does), otherwise NS_ERR_MPI_THREAD_LEVEL.
 *   NS_PROGRESS_INLINE works with any level: MPI is then called only from the thread that calls
 *   ns_* on this context. With MPI_THREAD_SINGLE / FUNNELED that must be the main thread; with
 *   SERIALIZED the application must not call MPI concurrently with it.
 * The context works on a duplicate of comm, so application traffic never matches its own. */
#ifndef NETSPARSE_NETSPARSE_MPI_H
#define NETSPARSE_NETSPARSE_MPI_H

#include <mpi.h>

#include "netsparse/netsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over comm. NS_ERR_STATE if MPI is not initialized, NS_ERR_MPI_THREAD_LEVEL (see
 * above), NS_ERR_UNSUPPORTED when verbs is requested but unavailable, NS_ERR_TRANSPORT when the
 * transport cannot be set up; ns_last_error() says why. Before any other collective the ranks
 * agree on their arguments and environment: when one rank refuses (bad attribute or NETSPARSE_*
 * value, thread level, no verbs) or the ranks differ in what decides the collectives or must be
 * equal (transport, progress_mode, packet_bytes, flags, virtual_queues, concat_delay_ns,
 * NETSPARSE_MPI_SHM / _MPI_READS / _MPI_MESSAGE_BYTES / _IB_MAX_PACKET), every rank returns the
 * same status (NS_ERR_INVALID for a disagreement) with the same message naming the rank and the
 * setting. */
ns_status_t ns_open_mpi(MPI_Comm comm, const struct ns_context_attr* attr, ns_context** out);

/* Leaving a job that lost a rank. Open MPI 4.1 cannot report a dead rank: under mpirun
 * --enable-recovery a survivor waits for ever in its next MPI call that needs the dead rank, and
 * MPI_Finalize frees windows with a barrier it never joins (docs/api.md, "A peer that died, and
 * MPI_Finalize").
 *
 * ns_watch_host_peers: collective over comm. Until ns_finalize_or_exit or MPI_Finalize, a thread
 * of the library wakes every 200 ms (it sleeps in between: no core is taken) and checks that the
 * processes of comm's other ranks on this host still exist; when one is gone it records a peer
 * failure, flushes stdout, prints one line to stderr naming the rank and ends this process with
 * _exit(exit_code), whatever MPI call it is waiting in. Ranks on other hosts are not watched:
 * their death is seen by the library's own requests (the engine's watchdog) or not at all.
 * NS_ERR_STATE when MPI is not initialized or the process already watches.
 *
 * ns_finalize_or_exit: where the program would call MPI_Finalize, from the main thread. Flushes
 * stdout and stderr; then, when ns_peer_failed(), prints one line to stderr naming the failure
 * and ends the process with _exit(exit_code), without MPI_Finalize; otherwise stops the watch
 * and calls MPI_Finalize (which releases the library's open objects) and returns exit_code, for
 * `return ns_finalize_or_exit(code);` at the end of main. */
ns_status_t ns_watch_host_peers(MPI_Comm comm, int exit_code);
int ns_finalize_or_exit(int exit_code);

#ifdef __cplusplus
} /* extern "C" */

#include "netsparse/netsparse.hpp"

namespace netsparse {
// A context on an MPI communicator (collective); throws netsparse::Error.
inline Context open_mpi(MPI_Comm comm, const ContextAttr& attr = ContextAttr{}) {
  ns_context* ctx = nullptr;
  detail::check(ns_open_mpi(comm, attr.get(), &ctx), "ns_open_mpi");
  return Context(ctx);
}
}  // namespace netsparse
#endif

#endif /* NETSPARSE_NETSPARSE_MPI_H */
