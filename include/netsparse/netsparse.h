/* NetSparse public C API: a Remote Indexed Gather (RIG) verb beside a plain RDMA READ, in the
 * style of libibverbs.
 *
 *   open a context (in-process fabric or MPI communicator: netsparse_mpi.h)
 *   -> register the local property array (collective)
 *   -> create completion queues and queue pairs
 *   -> ns_post_send(qp, chain of ns_send_wr, &bad_wr)   opcode NS_WR_RIG, NS_WR_RDMA_READ or
 *                                                        NS_WR_RIS (scatter-reduce)
 *   -> ns_poll_cq(cq, n, wc)                             status per work request
 *
 * Every call returns an ns_status_t (0 ok, negative error) or documents otherwise; the reason of
 * the last failure of the calling thread is in ns_last_error(). Layouts, statuses, threading and
 * examples: docs/api.md.
 *
 * Pure C11 (and C++) header; no MPI or verbs header is needed to use it. */
#ifndef NETSPARSE_NETSPARSE_H
#define NETSPARSE_NETSPARSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status -------------------------------------------------------------------------------- */
typedef int ns_status_t; /* 0 ok, 1 in progress, negative = error */
enum {
  NS_OK = 0,
  NS_INPROGRESS = 1,
  NS_ERR_INVALID = -1,          /* invalid argument (see ns_last_error) */
  NS_ERR_NO_MEMORY = -2,        /* allocation failed */
  NS_ERR_NO_RESOURCE = -3,      /* queue full: poll completions (progress) and retry */
  NS_ERR_TRANSPORT = -4,        /* the transport failed (device, MPI, peer) */
  NS_ERR_TIMEOUT = -5,          /* a wait ran out of time */
  NS_ERR_UNSUPPORTED = -6,      /* not available in this build or on this transport */
  NS_ERR_MPI_THREAD_LEVEL = -7, /* the MPI library does not provide the thread level needed */
  NS_ERR_NOT_REGISTERED = -8,   /* no property region registered */
  NS_ERR_STATE = -9             /* wrong state (object busy, already registered, ...) */
};
/* Static text of a status; "unknown status" for values not listed above. */
const char* ns_status_str(ns_status_t s);
/* Why the last failing NetSparse call of this thread failed (file-free, human readable). Valid
 * until the next failing call on this thread. "" if nothing failed yet. */
const char* ns_last_error(void);
const char* ns_version_string(void); /* defined by the shared library (libnetsparse) */
/* 1 once this process saw a peer fail: a work request timed out (NS_WC_WATCHDOG_TIMEOUT) or
 * found a dead peer (NS_WC_TRANSPORT_ERR), a transport saw a peer's process vanish, or a
 * collective step of the library gave up on a rank that never joined; else 0. Never reset.
 * MPI_Finalize may then wait for ever on the dead rank: see ns_finalize_or_exit
 * (netsparse_mpi.h). */
int ns_peer_failed(void);

/* ---- objects ------------------------------------------------------------------------------- */
typedef struct ns_context ns_context; /* one engine: progress thread, units, transport */
typedef struct ns_cq ns_cq;           /* completion queue */
typedef struct ns_qp ns_qp;           /* queue pair: a bounded command ring towards the engine */
typedef struct ns_mr ns_mr;           /* the registered (distributed) property array */
typedef struct ns_fabric ns_fabric;   /* in-process fabric: N nodes = threads of this process */
typedef struct ns_plan ns_plan;       /* a learned gather plan (ns_plan_create) */

enum ns_transport {
  NS_TRANSPORT_AUTO = 0,
  NS_TRANSPORT_MPI,
  NS_TRANSPORT_VERBS,
  NS_TRANSPORT_INPROC
};
enum ns_progress_mode {
  NS_PROGRESS_THREAD = 0, /* a progress thread per context: the emulated NIC */
  NS_PROGRESS_INLINE = 1, /* no thread: ns_poll_cq / ns_cq_wait / ns_progress drive the engine */
  /* The default: a progress thread only where a core is free for it (cores this rank may use >
   * OpenMP threads, and MPI_THREAD_MULTIPLE where MPI is the transport), else INLINE. In-process
   * fabrics (threads of one process) resolve to THREAD. ns_stats_json says what was chosen.
   * INLINE chosen by AUTO with MPI_THREAD_MULTIPLE gets a standby thread that serves the peers
   * while the application makes no library call (NETSPARSE_PROGRESS_STANDBY_US, docs/api.md). */
  NS_PROGRESS_AUTO = 2
};
/* Ablations (switch one mechanism off), and the transport's intra-host shortcut. */
enum ns_context_flags {
  NS_CTX_NO_FILTER = 1u << 0,   /* no Idx Filter (and no per-WR positional de-duplication) */
  NS_CTX_NO_COALESCE = 1u << 1, /* a PR for an idx already pending is sent again */
  NS_CTX_NO_CONCAT = 1u << 2,   /* every PR leaves in its own packet */
  /* The MPI transport sends every frame through MPI, never through its shared-memory rings
   * between ranks of one host (NETSPARSE_MPI_SHM=0 for this context only): for ranks that stand
   * for different hosts, e.g. virtual hosts on one machine. */
  NS_CTX_NO_HOST_RINGS = 1u << 3,
  /* A trusted caller's fast path (rdma-core's inlined ops, bale's RECKLESS): the context's
   * queue pairs and completion queues are handles whose value carries the choice, so
   * ns_post_send and ns_poll_cq use them without the live-handle registry and ns_post_send does
   * not validate the work requests. An argument the default path would refuse is then undefined
   * behaviour (as in verbs), as is a handle used after its destroy. What peers send is checked
   * as always. Local: ranks need not agree on it. */
  NS_CTX_UNCHECKED = 1u << 4
};
enum ns_context_attr_mask {
  NS_CTX_ATTR_TRANSPORT = 1u << 0,
  NS_CTX_ATTR_UNITS = 1u << 1,
  NS_CTX_ATTR_PROGRESS = 1u << 2,
  NS_CTX_ATTR_PACKET = 1u << 3,
  NS_CTX_ATTR_DELAY = 1u << 4,
  NS_CTX_ATTR_PENDING = 1u << 5,
  NS_CTX_ATTR_WATCHDOG = 1u << 6,
  NS_CTX_ATTR_FLAGS = 1u << 7,
  NS_CTX_ATTR_BATCH = 1u << 8,
  NS_CTX_ATTR_VIRTUAL_QUEUES = 1u << 9,
  NS_CTX_ATTR_WIRE = 1u << 10
};
/* How RIG requests and answers travel (docs/protocol.md). */
enum ns_wire {
  /* The software wire (default): one 32 B header per packet, requests as packed 4 B rows,
   * answers as rows in request order with no per-PR header. */
  NS_WIRE_COMPACT = 0,
  /* The paper's NIC packet format (Fig. 6): an 18 B header per PR on requests and answers.
   * Used by the cluster emulator and its switch; also with virtual_queues (paper §7.2). */
  NS_WIRE_PAPER = 1
};
/* Context parameters. Only the fields named in comp_mask are read; the others take their
 * default, so a zeroed struct (or NULL) means "all defaults" and the struct can grow. */
struct ns_context_attr {
  uint64_t comp_mask;    /* ns_context_attr_mask bits of the fields that are set */
  int transport;         /* enum ns_transport; AUTO honours NETSPARSE_TRANSPORT */
  int num_client_units;  /* default 2 (1..1024) */
  int num_server_units;  /* default 2 (1..1024) */
  int progress_mode;     /* enum ns_progress_mode, default AUTO */
  uint32_t packet_bytes; /* concatenation queue capacity, default 1500; capped by the transport */
  uint64_t concat_delay_ns; /* expiration delay of a concatenation queue, default 2000 */
  uint32_t
      pending_entries; /* Pending PR Table entries (PRs in flight) per client unit, default 8192 */
  uint32_t
      watchdog_ms;    /* per RIG work request, measured from ns_post_send; default 5000; 0 = off */
  uint32_t flags;     /* ns_context_flags (ablations), default 0 */
  uint32_t idx_chunk; /* idxs a client unit processes per engine step, default 4096 */
  int virtual_queues; /* nonzero: virtualized concatenation queues (paper §7.2), default 0 */
  int wire;           /* enum ns_wire, default NS_WIRE_COMPACT; must agree across ranks */
};

/* ---- in-process fabric (tests, emulation) -------------------------------------------------- */
ns_status_t ns_fabric_create(int nodes, ns_fabric** out);
void ns_fabric_destroy(ns_fabric* fabric); /* after every context on it is closed */
/* Test hook: node dies silently (its packets vanish; survivors only notice by their watchdog). */
ns_status_t ns_fabric_kill_node(ns_fabric* fabric, int node);
/* As above, but the survivors' transport reports the failure (like RC verbs after retries). */
ns_status_t ns_fabric_kill_node_reported(ns_fabric* fabric, int node);

/* ---- context ------------------------------------------------------------------------------- */
/* Node `node` of the fabric; each node is opened once (typically from its own thread). */
ns_status_t ns_open_inproc(ns_fabric* fabric, int node, const struct ns_context_attr* attr,
                           ns_context** out);
/* ns_open_mpi(MPI_Comm, attr, out) is declared in netsparse_mpi.h. */
/* Destroys the context. If a property region is still registered it is deregistered first
 * (collective then, see ns_dereg_props). Fails with NS_ERR_STATE while queue pairs or
 * completion queues exist. */
ns_status_t ns_close(ns_context* ctx);
int ns_rank(const ns_context* ctx);
int ns_size(const ns_context* ctx);
const char* ns_transport_name(const ns_context* ctx); /* "inproc", "mpi" or "verbs" */
/* The progress model the context runs: NS_PROGRESS_THREAD or NS_PROGRESS_INLINE (what AUTO
 * resolved to); -1 for NULL. */
int ns_progress_mode_of(const ns_context* ctx);
/* The largest prop_bytes ns_reg_props accepts on this context: one response packet carrying one
 * property must fit one transport message (MPI: NETSPARSE_MPI_MESSAGE_BYTES; verbs: the receive
 * buffer). Larger properties are split by the caller into pieces of at most this size (the
 * distributed kernels do it). 0 for NULL or a closed context. */
uint32_t ns_max_prop_bytes(const ns_context* ctx);

/* INLINE mode: runs the engine once (poll the transport, step every unit, watchdog). Returns the
 * amount of work done (0 = idle) or a negative ns_status_t. A no-op returning 0 in THREAD mode.
 * In INLINE mode the engine also serves the peers' requests only while some thread calls this
 * (or ns_poll_cq / ns_cq_wait / ns_quiesce). */
int ns_progress(ns_context* ctx);
/* Collective and non-blocking for the peers: keeps serving them until every live node has
 * called ns_quiesce (and has no work request in flight). Afterwards no peer needs this node's
 * engine until it posts again, so the application may block in its own collectives (e.g. an
 * MPI_Barrier in INLINE mode). Peers known to have failed are not waited for.
 * NS_ERR_TIMEOUT after timeout_ms (< 0: wait forever). */
ns_status_t ns_quiesce(ns_context* ctx, int timeout_ms);
/* Split phase: announces this node's quiesce without waiting (the engine tells the peers as soon
 * as none of this node's work requests is in flight); the next ns_quiesce waits for that round.
 * Lets a node that has all its data go on computing while its peers learn it needs nothing
 * more, so the final ns_quiesce costs no round trip. */
ns_status_t ns_quiesce_start(ns_context* ctx);
/* Split phase, non-blocking: *done = 1 when the round ns_quiesce_start announced is complete on
 * this node (this node's work requests are done and every live peer is done with it), else 0.
 * Runs no engine step. Once it says 1, no peer needs this node's engine until the next round,
 * and the ns_quiesce that ends the round returns at once: an INLINE application may stop
 * calling ns_progress for the rest of its computation. NS_ERR_STATE when no round is announced
 * (no ns_quiesce_start since the last ns_quiesce). */
ns_status_t ns_quiesce_test(ns_context* ctx, int* done);
/* The peers of the following quiesce rounds, until changed (both counts -1: every node, the
 * default). This node tells the n_tell nodes of `tell` that it is done, and its rounds complete
 * once each live node of `wait_for` has told it: a round costs one control message per pattern
 * peer instead of one per node of the job. Consistency is the caller's: node a lists b in
 * wait_for exactly when b lists a in tell (tell = the nodes this node posts requests to,
 * wait_for = the nodes that post requests to it); a node waited for that never tells makes the
 * round time out. This node itself is ignored in either list, repeats count once.
 * NS_ERR_INVALID for a node out of range or one count of -1 without the other; NS_ERR_STATE
 * while a round is announced and not waited for. ns_dereg_props always quiesces with every
 * node. */
ns_status_t ns_quiesce_peers(ns_context* ctx, const int* tell, int n_tell, const int* wait_for,
                             int n_wait);

/* ---- property region ----------------------------------------------------------------------- */
/* Collective. The local property array: local_rows rows of prop_bytes bytes each at base (row r
 * of this node is global row row_offsets[rank] + r). row_offsets has size + 1 entries: node p
 * owns global rows [row_offsets[p], row_offsets[p + 1]) (the 1D partition; equal blocks are
 * detected and solved in O(1), otherwise O(log size)). One region per context at a time; base
 * must stay valid and unchanged (it is read by peers) until ns_dereg_props. */
ns_status_t ns_reg_props(ns_context* ctx, void* base, uint64_t local_rows, uint32_t prop_bytes,
                         const uint64_t* row_offsets, ns_mr** out);
/* Registration flags (ns_reg_props_ex); every node must pass the same. */
enum ns_mr_flags {
  /* Read by the RIG verbs only (NS_WR_RIG, NS_WR_RIG_PLAN, NS_WR_RIS): no transport window or
   * memory registration exposes the region to one-sided reads (NS_WR_RDMA_READ on it is
   * refused), so ns_rebind_props can move it without a collective. */
  NS_MR_RIG_ONLY = 1u << 0
};
/* ns_reg_props with flags (ns_mr_flags); collective. */
ns_status_t ns_reg_props_ex(ns_context* ctx, void* base, uint64_t local_rows, uint32_t prop_bytes,
                            const uint64_t* row_offsets, uint32_t flags, ns_mr** out);
/* Local, not collective: the rows of an NS_MR_RIG_ONLY region are read (and scatter-reduced
 * into) at base from now on; same local_rows and prop_bytes. Only while no peer reads the
 * region: after a quiesce round, before any peer can start the next one. NS_ERR_INVALID for a
 * region registered without NS_MR_RIG_ONLY (peers' one-sided reads would still see the old
 * buffer: deregister and register instead) or a NULL base; NS_ERR_STATE while this node's own
 * work requests on it are in flight. */
ns_status_t ns_rebind_props(ns_mr* mr, void* base);
/* Collective: quiesces (see ns_quiesce), then releases the region. Fails with NS_ERR_STATE while
 * work requests on it are in flight. After a peer failure the teardown is local. */
ns_status_t ns_dereg_props(ns_mr* mr);
uint32_t ns_mr_prop_bytes(const ns_mr* mr);
uint64_t ns_mr_total_rows(const ns_mr* mr); /* row_offsets[size] */

/* ---- queues -------------------------------------------------------------------------------- */
ns_status_t ns_create_cq(ns_context* ctx, int cqe, ns_cq** out);
ns_status_t ns_destroy_cq(ns_cq* cq); /* NS_ERR_STATE while a queue pair uses it */
/* max_send_wr: work requests that may be outstanding (posted, not yet completed) at once. */
ns_status_t ns_create_qp(ns_context* ctx, ns_cq* send_cq, int max_send_wr, ns_qp** out);
ns_status_t ns_destroy_qp(ns_qp* qp); /* NS_ERR_STATE while work requests are outstanding */

/* ---- work requests ------------------------------------------------------------------------- */
/* NS_WR_RIG_PLAN: start a gather plan (ns_plan_create): the same gather again, recorded once and
 * replayed in bulk. NS_WR_RIS: Remote Indexed Scatter-Reduce, the dual of RIG (docs/api.md). */
enum ns_wr_opcode { NS_WR_RIG = 0, NS_WR_RDMA_READ = 1, NS_WR_RIG_PLAN = 2, NS_WR_RIS = 3 };
/* NS_WR_RIS: how a value combines into its row, element by element (integers wrap). */
enum ns_ris_op { NS_RIS_SUM = 0, NS_RIS_MIN = 1, NS_RIS_MAX = 2 };
/* NS_WR_RIS: the elements of a row (prop_bytes must be a multiple of their size). */
enum ns_ris_datatype { NS_RIS_FLOAT32 = 0, NS_RIS_FLOAT64 = 1, NS_RIS_INT32 = 2, NS_RIS_INT64 = 3 };
enum ns_rig_layout {
  /* Property of idx i goes to out + (i - window_base) * prop_bytes; every idx must lie in
   * [window_base, window_base + window_len) (else NS_WC_LOC_INV_REQ). Uses the Idx Filter. */
  NS_RIG_LAYOUT_INDEXED = 0,
  /* Property of the j-th idx goes to out + j * prop_bytes (repeats are filled locally). */
  NS_RIG_LAYOUT_POSITIONAL = 1
};
enum ns_send_flags {
  NS_SEND_SIGNALED = 1u << 0,  /* a completion also on success (errors always complete) */
  NS_SEND_NEW_EPOCH = 1u << 1, /* reset the Idx Filter before this WR (waits for earlier WRs) */
  /* RIG: idxs this node owns are skipped (their output is left untouched; the caller reads them
   * from its own block). Lets a caller post a raw column-index array (e.g. a CSR's) without
   * first extracting the remote columns. Counted as local PRs. */
  NS_SEND_REMOTE_ONLY = 1u << 2,
  /* NS_WR_RIG_PLAN: the owners push this start's rows (ns_plan_push with wr.plan.push_tag)
   * instead of being asked for them. The first such start of a recording asks as usual and arms
   * its owners; from the next start on no request leaves this node, and rows an owner pushed
   * before the start was posted are already in place. See ns_plan_push for when an owner may
   * push. */
  NS_SEND_PUSHED = 1u << 3,
  /* NS_WR_RIG and NS_WR_RIS: a hint, like an MPI info key: the caller states that this WR's
   * idxs are distinct. RIG: the engine neither filters nor coalesces them (no Idx Filter word is
   * read or written per idx: a random memory access saved per request). RIS: the scatter unit
   * does not combine repeats locally (no table of the WR's idxs: a hash probe per record saved).
   * Never changes a result: if an idx repeats anyway, each occurrence is requested and answered
   * (RIG), or sent and applied in the WR's order (RIS), like any other -- only the traffic of
   * the repeat is not saved -- and a RIG WR leaves the Idx Filter's rows as it found them. */
  NS_SEND_UNIQUE = 1u << 4
};
struct ns_send_wr {
  uint64_t wr_id;          /* echoed in the completion */
  struct ns_send_wr* next; /* chain; NULL ends it */
  int opcode;              /* enum ns_wr_opcode */
  unsigned send_flags;     /* enum ns_send_flags */
  union {
    struct {
      ns_mr* mr;
      const uint64_t* idx; /* count global row ids; read by the engine until completion */
      uint64_t count;      /* < 2^40 */
      void* out;           /* written by the engine until completion */
      int layout;          /* enum ns_rig_layout */
      uint64_t window_base, window_len; /* INDEXED only */
      /* Bytes the caller owns at `out` (like a verbs SGE's length). Checked before anything is
       * written: at least count x prop_bytes (POSITIONAL) or window_len x prop_bytes (INDEXED),
       * else NS_ERR_INVALID. Required: 0 is too small for any non-empty gather. */
      uint64_t out_bytes;
    } rig;
    struct {
      ns_mr* mr;
      uint64_t idx;
      void* out;          /* one property */
      uint64_t out_bytes; /* bytes at `out`: at least prop_bytes, else NS_ERR_INVALID */
    } rdma_read;
    struct {
      struct ns_plan* plan; /* NS_WR_RIG_PLAN: the gather to run (flags: NS_SEND_SIGNALED,
                             * NS_SEND_PUSHED) */
      uint32_t push_tag;    /* NS_SEND_PUSHED: the tag the owners push it under ... */
      uint32_t push_round;  /* ... and the round it belongs to (see ns_plan_push) */
    } plan;
    /* NS_WR_RIS: row idx[j] of the region (on its owner) becomes op(row, values row j), for
     * every j; repeated idxs are combined on this node first. The owner applies each packet
     * whole, on its engine thread: atomic with respect to every other RIS and RIG on the
     * region. An idx >= the region's total rows fails the WR (NS_WC_LOC_INV_REQ, wc.count =
     * its position) before anything is written anywhere. Flags: NS_SEND_SIGNALED only. */
    struct {
      ns_mr* mr;
      const uint64_t* idx;   /* count global row ids; read until completion */
      uint64_t count;        /* < 2^40 */
      const void* values;    /* count rows of prop_bytes bytes; read until completion */
      uint64_t values_bytes; /* bytes at `values`: at least count x prop_bytes */
      int op;                /* enum ns_ris_op */
      int datatype;          /* enum ns_ris_datatype */
    } ris;
  } wr;
};
/* Validates and queues the chain. Stops at the first WR that is invalid (NS_ERR_INVALID) or does
 * not fit (NS_ERR_NO_RESOURCE: max_send_wr outstanding); *bad_wr then points at it and the WRs
 * before it are posted. One doorbell per chain. Thread-safe (one lock per chain per QP). */
ns_status_t ns_post_send(ns_qp* qp, struct ns_send_wr* wr, struct ns_send_wr** bad_wr);

/* ---- gather plans ---------------------------------------------------------------------------
 * A plan is one RIG gather the application repeats (a fixed sparsity pattern: same idx list, same
 * output), like MPI_Send_init. ns_plan_create copies the idx list of `wr` (an NS_WR_RIG valid on
 * the registered region; `out` must stay valid while the plan lives). Each start is a work
 * request {opcode NS_WR_RIG_PLAN, wr.plan.plan} posted with ns_post_send; its completion has
 * opcode NS_WR_RIG_PLAN. The first start (and the first after the region is registered again)
 * runs the RIG path and records, per owner, which rows it sends and where they land; every later
 * start replays that recording in bulk: one request per owner, rows packed without per-property
 * headers. The output is what a fresh NS_WR_RIG with the same arguments would write. One start
 * of a plan at a time (NS_ERR_INVALID while one is in flight). Local: no collective. */
ns_status_t ns_plan_create(ns_context* ctx, const struct ns_send_wr* wr, ns_plan** out);
/* NS_ERR_STATE while a start is in flight. */
ns_status_t ns_plan_destroy(ns_plan* plan);
/* Owner side of NS_SEND_PUSHED: answers now, without being asked, the start of round `round` of
 * every plan list a peer armed with `tag` in an earlier round (its first pushed start, of round
 * r, asks as usual and arms; the start of round q > r is pushed as the peer's start r + (q - r)),
 * packing this node's rows as they are when the call is made; *lists (may be NULL) = how many
 * lists were pushed. Rounds: every node numbers them alike and starts each pushed plan once per
 * round (wr.plan.push_round). Call it once per round, when this node's rows are in place for
 * the round AND every peer is done with the output of its previous start (rows may land before
 * the peer posts its start: e.g. after a collective that every node enters only once its
 * previous round is consumed, as DistKernel's argument agreement). While its owners push, every
 * start of a plan carries NS_SEND_PUSHED (a start without it asks again and disarms the owners'
 * lists, but rows pushed for it too would land twice and fail it). A peer's pushed start whose
 * owner never pushes completes by the watchdog. Local: no collective. */
ns_status_t ns_plan_push(ns_context* ctx, uint32_t tag, uint32_t round, int* lists);

/* ---- completions --------------------------------------------------------------------------- */
enum ns_wc_status {
  NS_WC_SUCCESS = 0,
  NS_WC_WATCHDOG_TIMEOUT, /* not done within watchdog_ms; the output is invalid */
  NS_WC_REM_INV_REQ,      /* some idx is outside the owner's registered rows */
  NS_WC_TRANSPORT_ERR,    /* the transport failed or a needed peer is known dead */
  NS_WC_WR_FLUSH_ERR,     /* flushed (context torn down) */
  NS_WC_LOC_INV_REQ       /* some idx is outside the WR's window (INDEXED) */
};
const char* ns_wc_status_str(int status); /* "unknown status" fallback */
const char* ns_wr_opcode_str(int opcode); /* "unknown opcode" fallback */
struct ns_wc {
  uint64_t wr_id;
  int status;          /* enum ns_wc_status */
  int opcode;          /* enum ns_wr_opcode */
  uint32_t vendor_err; /* 0, or a transport error detail */
  uint64_t count;      /* SUCCESS: idxs gathered; LOC_INV_REQ: position of the offending idx */
};
/* Up to num_entries completions; >= 0 = how many, < 0 = ns_status_t. Never blocks. Drives the
 * engine in INLINE mode. Thread-safe. Completions of one QP may come out of post order. */
int ns_poll_cq(ns_cq* cq, int num_entries, struct ns_wc* wc);
/* As ns_poll_cq, but waits up to timeout_ms (< 0: forever) for at least one completion, backing
 * off (spin, yield, then sleep) instead of burning a core. 0 = timed out. */
int ns_cq_wait(ns_cq* cq, int num_entries, struct ns_wc* wc, int timeout_ms);

/* ---- statistics (the paper's Table 7) ------------------------------------------------------ */
enum ns_stat {
  NS_STAT_PRS_REQUESTED, /* idxs classified by the client units = the four below */
  NS_STAT_PRS_FILTERED,  /* dropped: already fetched (Idx Filter / earlier position in the WR) */
  NS_STAT_PRS_COALESCED, /* dropped: already pending in the same unit */
  NS_STAT_PRS_LOCAL,     /* owned by this node: copied locally */
  NS_STAT_PRS_SENT,      /* read PRs sent */
  NS_STAT_READ_PACKETS,
  NS_STAT_RESPONSE_PACKETS,
  NS_STAT_READ_BYTES,     /* wire bytes of read packets (with the 50 B upper-layer model) */
  NS_STAT_RESPONSE_BYTES, /* wire bytes of response packets */
  NS_STAT_HEADER_BYTES,   /* upper layer 50 + concatenation 14 per packet + 18 per PR */
  NS_STAT_PAYLOAD_BYTES,  /* property bytes in responses; HEADER + PAYLOAD == WIRE */
  NS_STAT_WIRE_BYTES,
  NS_STAT_STALLS,          /* a client unit stopped because its Pending PR Table was full */
  NS_STAT_EXPIRATIONS,     /* concatenation queues sent because their expiration time passed */
  NS_STAT_TIMEOUTS,        /* work requests completed by the watchdog */
  NS_STAT_RDMA_READS,      /* NS_WR_RDMA_READ issued */
  NS_STAT_SERVER_PRS,      /* read PRs answered by this node's server units (invalid ones too) */
  NS_STAT_INVALID_PRS,     /* read PRs answered as invalid (idx outside the registered rows) */
  NS_STAT_MALFORMED,       /* packets or PRs dropped by validation (decode error, bad unit, plan or
                              scatter-reduce packet, ...) */
  NS_STAT_STALE_RESPONSES, /* responses that matched no pending entry (dropped) */
  NS_STAT_FRAMES,          /* transport messages sent: each frames one or more packets */
  /* Gather plans (ns_plan_create): their traffic is not in the Table 7 counters above. */
  NS_STAT_PLAN_RECORDS,     /* recordings kept (a plan's RIG gather that succeeded) */
  NS_STAT_PLAN_REPLAYS,     /* plan starts served from a recording */
  NS_STAT_PLAN_ROWS,        /* properties landed by replays */
  NS_STAT_PLAN_PACKETS,     /* plan packets sent (lists, starts, rows, refusals) */
  NS_STAT_PLAN_BYTES,       /* their bytes as sent: 32 B header per packet + body */
  NS_STAT_PLAN_WIRE_BYTES,  /* the same with the paper's 50 B upper-layer model per packet */
  NS_STAT_PLAN_ROWS_SERVED, /* properties this node packed for its peers' replays */
  /* The bytes really moved. The Table 7 counters above price RIG traffic in the paper's packet
   * format whatever the wire; these count what this transport carried. */
  NS_STAT_MOVED_BYTES,     /* bytes of every frame sent (RIG, plans, control), as sent */
  NS_STAT_COMPACT_PACKETS, /* compact-wire packets sent (reads, rows, refusals) */
  NS_STAT_COMPACT_BYTES,   /* their bytes as sent: 32 B header per packet + body */
  /* Scatter-reduce (NS_WR_RIS): not in the Table 7 counters either. */
  NS_STAT_SCATTER_RECORDS,  /* (idx, value) pairs posted */
  NS_STAT_SCATTER_COMBINED, /* of those, folded into an earlier pair of the same idx locally */
  NS_STAT_SCATTER_LOCAL,    /* distinct rows of this node applied by its own engine */
  NS_STAT_SCATTER_SENT,     /* distinct rows sent to their owners */
  NS_STAT_SCATTER_PACKETS,  /* scatter packets sent (updates and acknowledgements) */
  NS_STAT_SCATTER_BYTES,    /* their bytes as sent: 32 B header per packet + records */
  NS_STAT_SCATTER_APPLIED,  /* rows this node applied for its peers */
  /* Gauges: the engine's queues at the moment of the call (ns_stats_reset leaves them). Bounded
   * by the configuration while the engine keeps up; bench_soak prints them per interval. */
  NS_STAT_COMMANDS_ACTIVE, /* work requests posted and not yet completed */
  NS_STAT_FILTER_COMMANDS, /* of those, on the row filter and admitted (completion order) */
  NS_STAT_WC_BACKLOG,      /* completions waiting for room in their completion queue */
  NS_STAT_PRS_IN_FLIGHT,   /* Pending PR Table entries in use (all client units) */
  NS_STAT_PRS_BUFFERED,    /* PRs waiting in concatenation queues */
  NS_STAT_FRAMES_QUEUED,   /* frames waiting for the transport to take them */
  NS_STAT__COUNT
};
const char* ns_stat_name(int which); /* "prs_requested", ...; NULL if out of range */
uint64_t ns_stat_get(const ns_context* ctx, int which); /* 0 for unknown `which` */
double ns_stat_prs_per_packet(const ns_context* ctx);   /* mean PRs per packet, both types */
void ns_stats_reset(ns_context* ctx);
/* Writes the statistics as one JSON object (snprintf semantics: returns the length it needs,
 * excluding the NUL; output truncated if len is too small; negative on error). */
int ns_stats_json(const ns_context* ctx, char* buf, size_t len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NETSPARSE_NETSPARSE_H */
