/* Opening a collectives communicator on an MPI communicator (collective over comm), and the C++
 * wrapper's factory. The transport is chosen like ns_open_mpi's (attr->transport, or
 * NETSPARSE_TRANSPORT for AUTO: verbs when an active RDMA port exists, else MPI with the
 * intra-host shared-memory rings); the communicator works on a duplicate of comm. Any MPI thread
 * level works: the collectives call MPI only from the calling thread. */
#ifndef NETSPARSE_COLLECTIVES_MPI_H
#define NETSPARSE_COLLECTIVES_MPI_H

#include <mpi.h>

#include "netsparse/collectives.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NS_ERR_STATE if MPI is not initialized, NS_ERR_INVALID for a bad attribute (on any rank:
 * every rank fails alike), NS_ERR_UNSUPPORTED when verbs is asked for but unavailable,
 * NS_ERR_TRANSPORT when the transport cannot be set up. */
ns_status_t ns_coll_open_mpi(MPI_Comm comm, const struct ns_coll_attr* attr, ns_coll** out);

#ifdef __cplusplus
} /* extern "C" */

#include "netsparse/collectives.hpp"

namespace netsparse {
inline Collectives open_collectives(MPI_Comm comm, const ns_coll_attr* attr = nullptr) {
  ns_coll* c = nullptr;
  detail::check(ns_coll_open_mpi(comm, attr, &c), "ns_coll_open_mpi");
  return Collectives(c);
}
}  // namespace netsparse
#endif

#endif /* NETSPARSE_COLLECTIVES_MPI_H */
