// MPI initialized without MPI_THREAD_MULTIPLE: a progress-thread context must be refused with
// NS_ERR_MPI_THREAD_LEVEL and a message naming the fix; an INLINE context must work.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "netsparse/netsparse_mpi.h"
#include "rig_wr.hpp"

static int failures = 0;
#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   ns_last_error());                                                    \
      ++failures;                                                                       \
    }                                                                                   \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int provided = 0, rank = 0, size = 0;
  MPI_Query_thread(&provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS;
  attr.progress_mode = NS_PROGRESS_THREAD;
  ns_context* ctx = nullptr;
  if (provided < MPI_THREAD_MULTIPLE) {
    CHECK(ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx) == NS_ERR_MPI_THREAD_LEVEL);
    CHECK(std::strstr(ns_last_error(), "MPI_THREAD_MULTIPLE") != nullptr);
    CHECK(std::strstr(ns_last_error(), "NS_PROGRESS_INLINE") != nullptr);
  } else {
    std::printf("MPI_Init gave MPI_THREAD_MULTIPLE: the refusal path cannot be exercised here\n");
  }
  attr.progress_mode = NS_PROGRESS_INLINE;
  CHECK(ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx) == NS_OK);
  if (ctx != nullptr) {
    const std::uint32_t P = 8;
    std::vector<std::uint64_t> offsets(static_cast<std::size_t>(size) + 1);
    for (int p = 0; p <= size; ++p)
      offsets[static_cast<std::size_t>(p)] = 10u * static_cast<std::uint64_t>(p);
    std::vector<std::uint8_t> block(10 * P);
    for (std::size_t i = 0; i < block.size(); ++i)
      block[i] = static_cast<std::uint8_t>(rank * 10 + i / P);
    ns_mr* mr = nullptr;
    ns_cq* cq = nullptr;
    ns_qp* qp = nullptr;
    CHECK(ns_reg_props(ctx, block.data(), 10, P, offsets.data(), &mr) == NS_OK);
    CHECK(ns_create_cq(ctx, 4, &cq) == NS_OK);
    CHECK(ns_create_qp(ctx, cq, 4, &qp) == NS_OK);
    const std::uint64_t row = static_cast<std::uint64_t>((rank + 1) % size) * 10 + 3;
    std::vector<std::uint8_t> out(P);
    ns_send_wr w = rigtest::rig_wr(1, mr, &row, 1, out.data());
    CHECK(ns_post_send(qp, &w, nullptr) == NS_OK);
    ns_wc wc{};
    CHECK(ns_cq_wait(cq, 1, &wc, 20000) == 1);
    CHECK(wc.status == NS_WC_SUCCESS);
    CHECK(out[0] == static_cast<std::uint8_t>(row));
    CHECK(ns_quiesce(ctx, 20000) == NS_OK);
    CHECK(ns_destroy_qp(qp) == NS_OK);
    CHECK(ns_destroy_cq(cq) == NS_OK);
    CHECK(ns_close(ctx) == NS_OK);
  }
  int worst = 0;
  MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == 0) std::printf("%s\n", worst == 0 ? "PASS" : "FAIL");
  return worst == 0 ? 0 : 1;
}
