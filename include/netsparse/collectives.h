/* NetSparse collectives: dense and sparse allreduce over the library's own transports (the
 * intra-host shared-memory rings, MPI point-to-point, verbs RC queue pairs), in the style of the
 * verbs-like API of netsparse.h (status codes, ns_last_error()).
 *
 *   ns_coll_open_mpi(comm, attr, &coll)            collective (netsparse/collectives_mpi.h)
 *   ns_allreduce(coll, send, recv, count, dtype, op, params)
 *   ns_sparse_allreduce(coll, n, nnz, idx, values, dtype, op, params, &result)
 *   ns_reduce(coll, send, recv, count, dtype, op, root, params)
 *   ns_reduce_scatter(coll, send, recv, recvcount, dtype, op, params)
 *   ns_bcast(coll, buffer, count, dtype, root)
 *   ns_allgather(coll, send, recv, sendcount, dtype)
 *   ns_barrier(coll)
 *   ns_allreduce_start(coll, send, recv, count, dtype, op, params, &req)   non-blocking
 *   ns_allgather_start(coll, send, recv, sendcount, dtype, &req)           non-blocking
 *   ns_coll_test(&req, &done) / ns_coll_wait(&req)
 *   ns_coll_close(coll)
 *
 * Every rank calls the collectives in the same order. Arguments are agreed before data counts:
 * a refused argument on one rank, or ranks passing different datatype / op / count, fail the
 * call on EVERY rank with the same message (NS_ERR_INVALID); the communicator stays usable. A
 * The same holds for the whole family: ranks calling different operations, or passing different
 * counts, datatypes, operators or roots, are refused on every rank. A
 * peer that dies or stops answering fails the call (NS_ERR_TRANSPORT when the transport
 * reports it, NS_ERR_TIMEOUT at the deadline, never a hang); the communicator is then broken
 * (later calls: NS_ERR_STATE) and should be closed. Design, wire format: docs/collectives.md.
 *
 * Pure C11 header. */
#ifndef NETSPARSE_COLLECTIVES_H
#define NETSPARSE_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include "netsparse/netsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ns_coll ns_coll; /* a communicator for collectives: its own transport */

enum ns_dtype {
  NS_DTYPE_INT8 = 0,
  NS_DTYPE_INT16 = 1,
  NS_DTYPE_INT32 = 2,
  NS_DTYPE_FP16 = 3, /* IEEE binary16 in uint16_t; combined in double, rounded to nearest even */
  NS_DTYPE_FP32 = 4,
  NS_DTYPE_FP64 = 5
};
/* Integers wrap on overflow. min / max: -0 orders before +0, any NaN gives a NaN. */
enum ns_op { NS_OP_SUM = 0, NS_OP_PROD = 1, NS_OP_MIN = 2, NS_OP_MAX = 3, NS_OP_USER = 4 };

/* Flare's aggregation designs (docs/collectives.md). */
enum ns_allreduce_algorithm {
  NS_ALLREDUCE_AUTO = 0,          /* by size: > 512 KiB single, > 256 KiB 4 buffers,
                                     > 128 KiB 2 buffers, else tree; tree if reproducible */
  NS_ALLREDUCE_SINGLE_BUFFER = 1, /* one accumulator per block, arrival order */
  NS_ALLREDUCE_MULTI_BUFFER_2 = 2,
  NS_ALLREDUCE_MULTI_BUFFER_4 = 3,
  NS_ALLREDUCE_TREE = 4 /* fixed pairwise tree over the ranks: bitwise reproducible */
};
enum ns_allreduce_flags {
  /* The same bits whatever the arrival order: the fixed tree (an explicit other algorithm is
   * refused). */
  NS_ALLREDUCE_REPRODUCIBLE = 1u << 0
};

/* A user operator: inout[i] = inout[i] op in[i], i < count; inout is the left operand (the
 * lower ranks' side). dtype is the call's enum ns_dtype. */
typedef void (*ns_user_op_fn)(void* inout, const void* in, size_t count, int dtype,
                              void* user_data);

struct ns_allreduce_params {
  int algorithm;  /* enum ns_allreduce_algorithm */
  unsigned flags; /* enum ns_allreduce_flags */
  /* NS_OP_USER only: */
  ns_user_op_fn user_fn;
  void* user_data;
  int user_commutative; /* nonzero: arrival-order designs allowed; else always the tree */
  uint32_t user_op_id;  /* names the operator; must be the same on every rank */
};

enum ns_coll_attr_mask {
  NS_COLL_ATTR_TRANSPORT = 1u << 0,
  NS_COLL_ATTR_TIMEOUT = 1u << 1,
  NS_COLL_ATTR_PACKET = 1u << 2,
  NS_COLL_ATTR_MAX_IN_FLIGHT = 1u << 3
};
struct ns_coll_attr {
  uint64_t comp_mask;     /* ns_coll_attr_mask bits of the fields that are set */
  int transport;          /* enum ns_transport (AUTO honours NETSPARSE_TRANSPORT); not INPROC */
  uint32_t timeout_ms;    /* deadline of one call, default 60000 */
  uint32_t packet_bytes;  /* default: the transport's largest message, at most 65536 */
  uint32_t max_in_flight; /* non-blocking operations outstanding at once, default 8 (1-1024) */
};

ns_status_t ns_coll_close(ns_coll* coll);
int ns_coll_rank(const ns_coll* coll);
int ns_coll_size(const ns_coll* coll);
const char* ns_coll_transport_name(const ns_coll* coll);
uint64_t ns_coll_bytes_sent(const ns_coll* coll); /* transport bytes of the last call */
/* Packet bytes (collective headers included) this rank sent to ranks of other hosts during
 * the last call, counted exactly per packet (hosts: NETSPARSE_RANKS_PER_HOST, else the ranks
 * sharing memory). */
uint64_t ns_coll_inter_host_bytes(const ns_coll* coll);
/* The same for ranks of other racks (NETSPARSE_HOSTS_PER_RACK; one rack of every host by
 * default): what leaves this rank's rack through its switch. */
uint64_t ns_coll_inter_rack_bytes(const ns_coll* coll);
/* 1 when ns_allreduce and ns_sparse_allreduce run hierarchically (inside each host, across
 * hosts between one leader per host, down inside the host: NETSPARSE_COLL_HIERARCHY), 2 when
 * the leaders' step also goes through one switch per rack (several racks of several hosts), 0
 * when flat, -1 for a handle that is not live. */
int ns_coll_hierarchical(const ns_coll* coll);
/* The algorithm the last ns_allreduce, ns_reduce or ns_reduce_scatter ran (enum
 * ns_allreduce_algorithm); -1 if none or the last call was another collective. */
int ns_coll_last_algorithm(const ns_coll* coll);
const char* ns_allreduce_algorithm_str(int algorithm);

/* Collective. recv may equal send (in place); otherwise they must not overlap. params may be
 * NULL (AUTO, no flags). On failure the contents of recv are undefined. */
ns_status_t ns_allreduce(ns_coll* coll, const void* send, void* recv, uint64_t count, int dtype,
                         int op, const struct ns_allreduce_params* params);

/* ---- the rest of the dense family (the allreduce's blocks, designs and agreement) -----------
 * Every datatype and operator of ns_allreduce (params as there; NULL: AUTO, no flags). */

/* Collective. The reduction of every rank's send lands in recv at root only (recv is ignored
 * elsewhere and may be NULL). In place at the root: send == recv. NS_ALLREDUCE_REPRODUCIBLE
 * gives the same bits as the reproducible ns_allreduce. */
ns_status_t ns_reduce(ns_coll* coll, const void* send, void* recv, uint64_t count, int dtype,
                      int op, int root, const struct ns_allreduce_params* params);
/* Collective (MPI_Reduce_scatter_block). send holds size * recvcount elements; rank r gets
 * elements [r * recvcount, (r + 1) * recvcount) of their reduction in recv. In place: recv ==
 * send + rank * recvcount elements (this rank's own part of send). */
ns_status_t ns_reduce_scatter(ns_coll* coll, const void* send, void* recv, uint64_t recvcount,
                              int dtype, int op, const struct ns_allreduce_params* params);
/* Collective. count elements of buffer at root are copied into buffer on every rank. */
ns_status_t ns_bcast(ns_coll* coll, void* buffer, uint64_t count, int dtype, int root);
/* Collective. recv (size * sendcount elements) gets every rank's send in rank order. In place:
 * send == recv + rank * sendcount elements. */
ns_status_t ns_allgather(ns_coll* coll, const void* send, void* recv, uint64_t sendcount,
                         int dtype);
/* Collective. Returns once every rank has called it (NS_ERR_TIMEOUT after the deadline). */
ns_status_t ns_barrier(ns_coll* coll);

/* ---- non-blocking allreduce (MPI-request style) ------------------------------------------
 * ns_allreduce_start starts the collective and returns at once with a request; the operation
 * progresses inside any call on the same communicator (another start, a test, a wait, a
 * blocking collective) and completes when its request is tested or waited for. Several may be
 * outstanding (ns_coll_attr.max_in_flight; one more start first progresses the others until
 * one completes) and they complete in any order; each has its operation number on the wire,
 * so their packets never mix. Every rank starts the same operations in the same order (the
 * blocking calls in between count). send and recv must stay valid, and send unchanged, until
 * the request completes. The reproducible mode gives the same bits as the blocking call, however
 * the operations interleave. A failure (refused or mismatched arguments, a dead peer, the
 * deadline from the start) is returned by the test or wait that completes the request. */
typedef struct ns_coll_request ns_coll_request;
ns_status_t ns_allreduce_start(ns_coll* coll, const void* send, void* recv, uint64_t count,
                               int dtype, int op, const struct ns_allreduce_params* params,
                               ns_coll_request** req);
/* Non-blocking ns_allgather (prefetch: the next partition's data gathered while this one
 * computes), the same requests, in-flight limit and ordering rules as ns_allreduce_start; send
 * and recv stay valid, send unchanged and recv unread, until the request completes. The bits
 * are MPI_Allgather's (copies only). */
ns_status_t ns_allgather_start(ns_coll* coll, const void* send, void* recv, uint64_t sendcount,
                               int dtype, ns_coll_request** req);
/* Progresses the communicator once. *done = 1 when the operation has completed: the request is
 * freed, *req set to NULL, and the operation's status returned (NS_OK, or its failure). *done =
 * 0: NS_OK, test again later. */
ns_status_t ns_coll_test(ns_coll_request** req, int* done);
/* Progresses until the operation completes; frees the request (*req = NULL); its status. */
ns_status_t ns_coll_wait(ns_coll_request** req);

/* ---- sparse allreduce --------------------------------------------------------------------- */
typedef struct ns_sparse_result ns_sparse_result;
enum ns_sparse_output {
  NS_SPARSE_OUTPUT_AUTO = 0,
  NS_SPARSE_OUTPUT_SPARSE = 1,
  NS_SPARSE_OUTPUT_DENSE = 2
};
struct ns_sparse_params {
  int output;      /* enum ns_sparse_output: AUTO = dense when that is the smaller form */
  void* dense_out; /* optional, n elements: a dense result is left here (as MPI_Allreduce's
                      recvbuf: no allocation; ns_sparse_result_values then points here);
                      used as scratch when the result comes out sparse */
};
/* Collective. Sums vectors of length n given as nnz (idx, value) entries per rank (indices < n,
 * any order, repeats summed; op must be NS_OP_SUM: absent entries are zeros). The result is
 * the same on every rank, in *out (free with ns_sparse_result_free). */
ns_status_t ns_sparse_allreduce(ns_coll* coll, uint64_t n, uint64_t nnz, const uint64_t* idx,
                                const void* values, int dtype, int op,
                                const struct ns_sparse_params* params, ns_sparse_result** out);
int ns_sparse_result_is_dense(const ns_sparse_result* r);
/* Entries stored: n when dense. */
uint64_t ns_sparse_result_size(const ns_sparse_result* r);
/* Ascending indices of a sparse result; NULL when dense. */
const uint64_t* ns_sparse_result_indices(const ns_sparse_result* r);
const void* ns_sparse_result_values(const ns_sparse_result* r);
void ns_sparse_result_free(ns_sparse_result* r);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NETSPARSE_COLLECTIVES_H */
