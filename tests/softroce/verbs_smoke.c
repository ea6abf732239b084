/*
 * verbs_smoke: a 2-rank MPI + libibverbs smoke test for a soft-RoCE (rxe), RoCE or
 * InfiniBand device.
 *
 * MPI is only the bootstrap channel: the ranks swap their queue-pair addresses with
 * MPI_Sendrecv. The data then moves over one reliable-connected (RC) QP per rank: an RDMA
 * WRITE into the peer's memory, an RDMA READ from the peer's memory and a SEND matched by a
 * posted RECV. Every transfer is checked byte by byte against a pattern that depends on the
 * sending rank and the operation, so a transfer that lands in the wrong place, arrives from
 * the wrong rank or is short cannot pass.
 *
 * Usage: mpirun -np 2 verbs_smoke [DEVICE [GID_INDEX]]
 *   DEVICE     verbs device name (default: $NETSPARSE_VERBS_DEVICE, else the first device)
 *   GID_INDEX  RoCE GID index (default: the first RoCE v2 GID holding an IPv4 address)
 * Exit status 0 and "verbs_smoke: PASS" from rank 0 when every check passed on both ranks.
 */
#define _XOPEN_SOURCE 700 /* clock_gettime, posix_memalign, lrand48 */

#include <errno.h>
#include <infiniband/verbs.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Several MTU-sized packets per transfer, so segmentation and reassembly are exercised. */
enum { kRegionBytes = 256 * 1024 };
/* Generous: software RoCE under full-system emulation moves only tens of MB/s. */
enum { kCompletionTimeoutSeconds = 60 };

/* Regions of the one registered buffer; each transfer has its own source and target. */
enum Region {
  kWriteSource,
  kWriteTarget, /* the peer RDMA-WRITEs here */
  kReadSource,  /* the peer RDMA-READs from here */
  kReadTarget,
  kSendSource,
  kRecvTarget,
  kRegionCount
};

/* Which operation a pattern belongs to; mixed into the pattern bytes. */
enum Operation { kOpWrite = 1, kOpRead = 2, kOpSend = 3 };

/* What a rank needs to know about its peer's QP and memory. Sent as raw bytes: both ranks
 * run the same binary on the same machine type. */
struct Endpoint {
  uint64_t buffer_address;
  uint32_t rkey;
  uint32_t qp_num;
  uint32_t psn;
  uint16_t lid;
  uint8_t gid[16];
};

static int g_rank = -1;

static void die(const char* what, int error) {
  fprintf(stderr, "verbs_smoke: rank %d: %s failed: %s\n", g_rank, what,
          error ? strerror(error) : "unknown error");
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* not reached */
}

static uint8_t pattern_byte(size_t offset, int rank, enum Operation op) {
  /* Varies with every input so shifted, truncated or mixed-up data shows up. */
  return (uint8_t)(offset * 131u + (offset >> 8) * 7u + (unsigned)rank * 29u + (unsigned)op * 71u);
}

static void fill_pattern(uint8_t* region, int rank, enum Operation op) {
  for (size_t i = 0; i < kRegionBytes; ++i) region[i] = pattern_byte(i, rank, op);
}

/* Returns 1 when region holds the pattern of (rank, op); reports the first difference. */
static int check_pattern(const uint8_t* region, int rank, enum Operation op, const char* what) {
  for (size_t i = 0; i < kRegionBytes; ++i) {
    const uint8_t expected = pattern_byte(i, rank, op);
    if (region[i] != expected) {
      fprintf(stderr, "verbs_smoke: rank %d: %s: byte %zu is 0x%02x, expected 0x%02x\n", g_rank,
              what, i, region[i], expected);
      return 0;
    }
  }
  return 1;
}

static double monotonic_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Waits for the completion of work request wr_id; aborts on error status or timeout. */
static void wait_completion(struct ibv_cq* cq, uint64_t wr_id, enum ibv_wc_opcode opcode,
                            uint32_t* byte_len) {
  const double deadline = monotonic_seconds() + kCompletionTimeoutSeconds;
  for (;;) {
    struct ibv_wc wc;
    const int polled = ibv_poll_cq(cq, 1, &wc);
    if (polled < 0) die("ibv_poll_cq", EIO);
    if (polled == 1) {
      if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "verbs_smoke: rank %d: work request %llu completed with status %s\n",
                g_rank, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (wc.wr_id != wr_id || wc.opcode != opcode) {
        fprintf(stderr,
                "verbs_smoke: rank %d: unexpected completion (wr_id %llu opcode %d), waiting for "
                "wr_id %llu opcode %d\n",
                g_rank, (unsigned long long)wc.wr_id, (int)wc.opcode, (unsigned long long)wr_id,
                (int)opcode);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (byte_len) *byte_len = wc.byte_len;
      return;
    }
    if (monotonic_seconds() > deadline) {
      fprintf(stderr, "verbs_smoke: rank %d: no completion for work request %llu within %d s\n",
              g_rank, (unsigned long long)wr_id, kCompletionTimeoutSeconds);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

static struct ibv_device* pick_device(struct ibv_device** devices, int count, const char* name) {
  if (count == 0) {
    fprintf(stderr, "verbs_smoke: rank %d: no verbs device (is rdma_rxe set up?)\n", g_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!name) return devices[0];
  for (int i = 0; i < count; ++i)
    if (strcmp(ibv_get_device_name(devices[i]), name) == 0) return devices[i];
  fprintf(stderr, "verbs_smoke: rank %d: verbs device %s not found\n", g_rank, name);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return NULL;
}

/* First RoCE v2 GID that maps an IPv4 address (::ffff:a.b.c.d), or -1. Stops at the first
 * match: the table has up to 1024 entries and most are empty. */
static int find_ipv4_roce_v2_gid(struct ibv_context* context, uint8_t port, int table_length) {
  static const uint8_t kIpv4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  for (int index = 0; index < table_length; ++index) {
    struct ibv_gid_entry entry;
    if (ibv_query_gid_ex(context, port, (uint32_t)index, &entry, 0) != 0) continue;
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 &&
        memcmp(entry.gid.raw, kIpv4MappedPrefix, sizeof kIpv4MappedPrefix) == 0)
      return index;
  }
  return -1;
}

static void post_rdma(struct ibv_qp* qp, enum ibv_wr_opcode opcode, uint64_t wr_id,
                      const struct ibv_mr* mr, uint8_t* local, uint64_t remote_address,
                      uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)local, .length = kRegionBytes, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = opcode,
                           .send_flags = IBV_SEND_SIGNALED};
  if (opcode != IBV_WR_SEND) {
    wr.wr.rdma.remote_addr = remote_address;
    wr.wr.rdma.rkey = rkey;
  }
  struct ibv_send_wr* bad = NULL;
  const int error = ibv_post_send(qp, &wr, &bad);
  if (error) die("ibv_post_send", error);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (g_rank == 0) fprintf(stderr, "verbs_smoke: needs exactly 2 ranks, got %d\n", size);
    MPI_Finalize();
    return 2;
  }
  const int peer = 1 - g_rank;
  const char* device_name = argc > 1 ? argv[1] : getenv("NETSPARSE_VERBS_DEVICE");
  const int requested_gid_index = argc > 2 ? atoi(argv[2]) : -1;
  const uint8_t port = 1;

  int device_count = 0;
  struct ibv_device** devices = ibv_get_device_list(&device_count);
  if (!devices) die("ibv_get_device_list", errno);
  struct ibv_device* device = pick_device(devices, device_count, device_name);
  struct ibv_context* context = ibv_open_device(device);
  if (!context) die("ibv_open_device", errno);
  struct ibv_port_attr port_attr;
  int error = ibv_query_port(context, port, &port_attr);
  if (error) die("ibv_query_port", error);
  if (port_attr.state != IBV_PORT_ACTIVE) {
    fprintf(stderr, "verbs_smoke: rank %d: %s port %u is %s, not ACTIVE\n", g_rank,
            ibv_get_device_name(device), port, ibv_port_state_str(port_attr.state));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* RoCE addresses ports by GID (a global route header is mandatory); InfiniBand by LID. */
  const int is_roce = port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  int gid_index = requested_gid_index;
  if (is_roce && gid_index < 0) {
    gid_index = find_ipv4_roce_v2_gid(context, port, port_attr.gid_tbl_len);
    if (gid_index < 0) {
      fprintf(stderr,
              "verbs_smoke: rank %d: no RoCE v2 GID with an IPv4 address on %s; give the GID "
              "index as the second argument\n",
              g_rank, ibv_get_device_name(device));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  struct ibv_pd* pd = ibv_alloc_pd(context);
  if (!pd) die("ibv_alloc_pd", errno);
  uint8_t* buffer = NULL;
  error = posix_memalign((void**)&buffer, 4096, (size_t)kRegionBytes * kRegionCount);
  if (error) die("posix_memalign", error);
  memset(buffer, 0, (size_t)kRegionBytes * kRegionCount);
  uint8_t* region[kRegionCount];
  for (int r = 0; r < kRegionCount; ++r) region[r] = buffer + (size_t)r * kRegionBytes;
  struct ibv_mr* mr =
      ibv_reg_mr(pd, buffer, (size_t)kRegionBytes * kRegionCount,
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr) die("ibv_reg_mr", errno);
  struct ibv_cq* send_cq = ibv_create_cq(context, 8, NULL, NULL, 0);
  if (!send_cq) die("ibv_create_cq", errno);
  struct ibv_cq* recv_cq = ibv_create_cq(context, 8, NULL, NULL, 0);
  if (!recv_cq) die("ibv_create_cq", errno);
  struct ibv_qp_init_attr qp_init = {
      .send_cq = send_cq,
      .recv_cq = recv_cq,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  struct ibv_qp* qp = ibv_create_qp(pd, &qp_init);
  if (!qp) die("ibv_create_qp", errno);

  struct ibv_qp_attr attr = {
      .qp_state = IBV_QPS_INIT,
      .pkey_index = 0,
      .port_num = port,
      .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  error = ibv_modify_qp(qp, &attr,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (error) die("ibv_modify_qp(INIT)", error);

  /* The receive is posted before the peer can possibly send (the QP is not even connected). */
  struct ibv_sge recv_sge = {
      .addr = (uintptr_t)region[kRecvTarget], .length = kRegionBytes, .lkey = mr->lkey};
  struct ibv_recv_wr recv_wr = {.wr_id = 100, .sg_list = &recv_sge, .num_sge = 1};
  struct ibv_recv_wr* bad_recv = NULL;
  error = ibv_post_recv(qp, &recv_wr, &bad_recv);
  if (error) die("ibv_post_recv", error);

  fill_pattern(region[kWriteSource], g_rank, kOpWrite);
  fill_pattern(region[kReadSource], g_rank, kOpRead);
  fill_pattern(region[kSendSource], g_rank, kOpSend);

  srand48((long)time(NULL) * 2 + g_rank);
  struct Endpoint local = {.buffer_address = (uintptr_t)buffer,
                           .rkey = mr->rkey,
                           .qp_num = qp->qp_num,
                           .psn = (uint32_t)lrand48() & 0xffffff,
                           .lid = port_attr.lid};
  if (is_roce) {
    union ibv_gid gid;
    error = ibv_query_gid(context, port, gid_index, &gid);
    if (error) die("ibv_query_gid", error);
    memcpy(local.gid, gid.raw, sizeof local.gid);
  }
  struct Endpoint remote;
  MPI_Sendrecv(&local, sizeof local, MPI_BYTE, peer, 0, &remote, sizeof remote, MPI_BYTE, peer, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);

  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = port_attr.active_mtu;
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = port;
  if (is_roce) {
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    attr.ah_attr.grh.hop_limit = 1;
    memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
  } else {
    attr.ah_attr.dlid = remote.lid;
  }
  error = ibv_modify_qp(qp, &attr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (error) die("ibv_modify_qp(RTR)", error);

  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.sq_psn = local.psn;
  attr.max_rd_atomic = 1;
  error = ibv_modify_qp(qp, &attr,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (error) die("ibv_modify_qp(RTS)", error);
  /* Both QPs must be ready to receive before either side sends. */
  MPI_Barrier(MPI_COMM_WORLD);

  const uint64_t peer_write_target = remote.buffer_address + (uint64_t)kWriteTarget * kRegionBytes;
  const uint64_t peer_read_source = remote.buffer_address + (uint64_t)kReadSource * kRegionBytes;
  int ok = 1;

  /* RDMA WRITE. The completion means the peer acknowledged the data; the barrier then tells
   * the peer that its target region is complete. */
  post_rdma(qp, IBV_WR_RDMA_WRITE, 1, mr, region[kWriteSource], peer_write_target, remote.rkey);
  wait_completion(send_cq, 1, IBV_WC_RDMA_WRITE, NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  ok &= check_pattern(region[kWriteTarget], peer, kOpWrite, "RDMA WRITE target");

  /* RDMA READ: the peer's CPU takes no part; the data is ours once the completion is. */
  post_rdma(qp, IBV_WR_RDMA_READ, 2, mr, region[kReadTarget], peer_read_source, remote.rkey);
  wait_completion(send_cq, 2, IBV_WC_RDMA_READ, NULL);
  ok &= check_pattern(region[kReadTarget], peer, kOpRead, "RDMA READ target");

  /* SEND into the peer's posted RECV. Receive completions have their own CQ, so the peer's
   * SEND cannot be mistaken for one of ours however far ahead the peer runs. */
  post_rdma(qp, IBV_WR_SEND, 3, mr, region[kSendSource], 0, 0);
  wait_completion(send_cq, 3, IBV_WC_SEND, NULL);
  uint32_t received_bytes = 0;
  wait_completion(recv_cq, 100, IBV_WC_RECV, &received_bytes);
  if (received_bytes != kRegionBytes) {
    fprintf(stderr, "verbs_smoke: rank %d: RECV got %u bytes, expected %d\n", g_rank,
            received_bytes, kRegionBytes);
    ok = 0;
  }
  ok &= check_pattern(region[kRecvTarget], peer, kOpSend, "RECV target");

  printf(
      "verbs_smoke: rank %d: %s port %u gid index %d qpn %u -> peer qpn %u: RDMA WRITE, "
      "RDMA READ, SEND/RECV of %d bytes each: %s\n",
      g_rank, ibv_get_device_name(device), port, gid_index, local.qp_num, remote.qp_num,
      kRegionBytes, ok ? "ok" : "MISMATCH");
  fflush(stdout);

  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  /* Nobody tears down its QP while the peer might still be using it. */
  MPI_Barrier(MPI_COMM_WORLD);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(recv_cq);
  ibv_destroy_cq(send_cq);
  ibv_dereg_mr(mr);
  free(buffer);
  ibv_dealloc_pd(pd);
  ibv_close_device(context);
  ibv_free_device_list(devices);
  if (g_rank == 0) printf("verbs_smoke: %s\n", all_ok ? "PASS" : "FAIL");
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
