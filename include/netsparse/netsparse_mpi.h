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
