/* Posting NS_WR_RIG work requests directly, the way a verbs program posts RDMA READs.
 *
 *   mpirun -np 2 rig_gather
 *
 * Every rank owns ROWS properties of K floats (property g holds g*1000 + j). Each rank gathers
 * GATHER pseudo-random properties owned by the next rank (with repeats, which the engine's
 * filter and coalescing absorb) with two chained RIG work requests:
 *   - POSITIONAL layout: the j-th idx's property lands at out + j * prop_bytes;
 *   - INDEXED layout into a window of the next rank's rows: property g lands at
 *     window + (g - window_base) * prop_bytes.
 * It polls both completions, checks every gathered value and prints the engine's statistics.
 * Every failure is printed with its status string (ns_status_str / ns_wc_status_str) and the
 * reason the library recorded (ns_last_error). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "netsparse/netsparse_mpi.h"

#define ROWS 4096
#define K 8
#define GATHER 2000

static int rank_id = 0;

/* Prints a failed call with its status string and reason; returns 1 (failed) or 0. */
static int failed(const char* call, ns_status_t s) {
  if (s >= 0) return 0;
  fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank_id, call, ns_status_str(s),
          ns_last_error());
  return 1;
}

int main(int argc, char** argv) {
  int provided = 0, nranks = 1, errors = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_id);
  /* A rank of this host that dies ends this one (exit 1) instead of leaving it waiting for ever
   * in MPI; ns_finalize_or_exit below leaves without MPI_Finalize after a peer failure. */
  ns_watch_host_peers(MPI_COMM_WORLD, 1);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  /* The distributed property array: rank p owns global rows [p * ROWS, (p + 1) * ROWS). */
  float* props = malloc(sizeof(float) * ROWS * K);
  uint64_t* offsets = malloc(sizeof(uint64_t) * (size_t)(nranks + 1));
  for (int p = 0; p <= nranks; ++p) offsets[p] = (uint64_t)p * ROWS;
  for (uint64_t r = 0; r < ROWS; ++r) {
    for (int j = 0; j < K; ++j) props[r * K + j] = (float)((offsets[rank_id] + r) * 1000 + j);
  }

  /* Idxs: GATHER rows of the next rank, chosen by a small LCG (repeats included). */
  const int peer = (rank_id + 1) % nranks;
  uint64_t* idx = malloc(sizeof(uint64_t) * GATHER);
  uint64_t lcg = 12345u + (uint64_t)rank_id;
  for (int i = 0; i < GATHER; ++i) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    idx[i] = offsets[peer] + (lcg >> 33) % (ROWS / 2);
  }
  float* positional = malloc(sizeof(float) * GATHER * K);
  float* window = malloc(sizeof(float) * ROWS * K);

  ns_context* ctx = NULL;
  ns_mr* mr = NULL;
  ns_cq* cq = NULL;
  ns_qp* qp = NULL;
  ns_status_t s = ns_open_mpi(MPI_COMM_WORLD, NULL, &ctx); /* NULL attr: all defaults */
  if (failed("ns_open_mpi", s)) MPI_Abort(MPI_COMM_WORLD, 1);
  s = ns_reg_props(ctx, props, ROWS, K * sizeof(float), offsets, &mr); /* collective */
  if (failed("ns_reg_props", s)) MPI_Abort(MPI_COMM_WORLD, 1);
  if (failed("ns_create_cq", ns_create_cq(ctx, 16, &cq)) ||
      failed("ns_create_qp", ns_create_qp(ctx, cq, 16, &qp))) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  struct ns_send_wr wr[2] = {0};
  wr[0].wr_id = 1;
  wr[0].next = &wr[1];
  wr[0].opcode = NS_WR_RIG;
  wr[0].send_flags = NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH; /* fresh Idx Filter epoch */
  wr[0].wr.rig.mr = mr;
  wr[0].wr.rig.idx = idx;
  wr[0].wr.rig.count = GATHER / 2;
  wr[0].wr.rig.out = positional;
  wr[0].wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
  wr[0].wr.rig.out_bytes = sizeof(float) * GATHER * K; /* checked before anything is written */

  wr[1].wr_id = 2;
  wr[1].next = NULL;
  wr[1].opcode = NS_WR_RIG;
  wr[1].send_flags = NS_SEND_SIGNALED;
  wr[1].wr.rig.mr = mr;
  wr[1].wr.rig.idx = idx + GATHER / 2;
  wr[1].wr.rig.count = GATHER - GATHER / 2;
  wr[1].wr.rig.out = window;
  wr[1].wr.rig.layout = NS_RIG_LAYOUT_INDEXED;
  wr[1].wr.rig.window_base = offsets[peer];
  wr[1].wr.rig.window_len = ROWS;
  wr[1].wr.rig.out_bytes = sizeof(float) * ROWS * K;

  struct ns_send_wr* bad = NULL;
  s = ns_post_send(qp, &wr[0], &bad);
  if (failed("ns_post_send", s)) {
    fprintf(stderr, "rank %d: rejected work request wr_id %llu\n", rank_id,
            bad ? (unsigned long long)bad->wr_id : 0ull);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  /* Poll both completions (ns_cq_wait backs off instead of spinning). */
  int done = 0;
  while (done < 2) {
    struct ns_wc wc[2];
    const int n = ns_cq_wait(cq, 2, wc, 10000);
    if (n < 0) {
      failed("ns_cq_wait", n);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (n == 0) {
      fprintf(stderr, "rank %d: no completion within 10 s\n", rank_id);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != NS_WC_SUCCESS) {
        fprintf(stderr, "rank %d: %s wr_id %llu completed with %s (vendor_err %u)\n", rank_id,
                ns_wr_opcode_str(wc[i].opcode), (unsigned long long)wc[i].wr_id,
                ns_wc_status_str(wc[i].status), wc[i].vendor_err);
        ++errors;
      }
    }
    done += n;
  }

  /* Check what arrived. */
  for (int i = 0; i < GATHER; ++i) {
    const float* got =
        i < GATHER / 2 ? positional + (size_t)i * K : window + (size_t)(idx[i] - offsets[peer]) * K;
    for (int j = 0; j < K; ++j) {
      if (got[j] != (float)(idx[i] * 1000 + (uint64_t)j)) {
        if (errors++ < 5) {
          fprintf(stderr, "rank %d: idx %llu element %d: got %g\n", rank_id,
                  (unsigned long long)idx[i], j, got[j]);
        }
      }
    }
  }

  /* Serve the peers until everybody is done, then read the statistics. */
  if (failed("ns_quiesce", ns_quiesce(ctx, 10000))) MPI_Abort(MPI_COMM_WORLD, 1);
  printf(
      "rank %d: gathered %d properties of %d B: %llu PRs sent, %llu filtered, %llu coalesced, "
      "%.1f PRs per packet, %llu wire bytes -- %s\n",
      rank_id, GATHER, (int)(K * sizeof(float)),
      (unsigned long long)ns_stat_get(ctx, NS_STAT_PRS_SENT),
      (unsigned long long)ns_stat_get(ctx, NS_STAT_PRS_FILTERED),
      (unsigned long long)ns_stat_get(ctx, NS_STAT_PRS_COALESCED), ns_stat_prs_per_packet(ctx),
      (unsigned long long)ns_stat_get(ctx, NS_STAT_WIRE_BYTES), errors ? "ERRORS" : "all correct");

  /* Teardown: queue pair, completion queue, region (collective), context. */
  if (failed("ns_destroy_qp", ns_destroy_qp(qp)) || failed("ns_destroy_cq", ns_destroy_cq(cq)) ||
      failed("ns_dereg_props", ns_dereg_props(mr)) || failed("ns_close", ns_close(ctx))) {
    errors++;
  }
  free(window);
  free(positional);
  free(idx);
  free(offsets);
  free(props);
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return ns_finalize_or_exit(errors == 0 ? 0 : 1);
}
