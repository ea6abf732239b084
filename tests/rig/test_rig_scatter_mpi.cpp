// Remote Indexed Scatter-Reduce over real processes (mpirun -np 2, 3, 4): every rank posts
// several NS_WR_RIS with heavy duplication into every rank's rows (fp64 sums, int32 sums, int64
// max), then every byte of every rank's rows is compared with the sequential reference; an
// out-of-range idx fails its WR and changes no byte anywhere. THREAD or INLINE progress (argv[1]).
// Prints "ris_mpi: PASS" from rank 0 when every rank passed.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_util.hpp"
#include "netsparse/netsparse_mpi.h"
#include "rig_wr.hpp"
#include "ris_reference.hpp"

namespace {

struct Case {
  std::uint32_t P;
  int op, datatype;
};

int run_case(ns_context* ctx, const Case& c, int rank, int size) {
  constexpr int kWrs = 3;
  constexpr std::size_t kCount = 4000;
  int failures = 0;
  const std::uint64_t total = 157ull * static_cast<std::uint64_t>(size) + 3;
  const std::vector<std::uint64_t> offsets = rigtest::uneven_offsets(size, total, 23);
  const std::uint64_t begin = offsets[static_cast<std::size_t>(rank)];
  const std::uint64_t rows = offsets[static_cast<std::size_t>(rank) + 1] - begin;
  std::vector<std::byte> block(std::max<std::uint64_t>(1, rows) * c.P);
  for (std::uint64_t r = 0; r < rows; ++r) {
    rigtest::fill_row(block.data() + r * c.P, c.P, c.datatype, begin + r);
  }
  const std::vector<std::byte> initial = block;
  rigtest::RankQueues queues;
  if (!rigtest::open_queues(ctx, block.data(), rows, c.P, offsets.data(), 16, 16, rank, &queues)) {
    return 1;
  }
  const auto [mr, cq, qp] = queues;
  std::vector<rigtest::Updates> mine;
  for (int w = 0; w < kWrs; ++w) {
    mine.push_back(rigtest::make_updates(rank, w, total, kCount, c.P, c.datatype));
  }
  std::vector<ns_send_wr> wrs(kWrs + 1);
  for (int w = 0; w < kWrs; ++w) {
    const rigtest::Updates& u = mine[static_cast<std::size_t>(w)];
    ns_send_wr& wr = wrs[static_cast<std::size_t>(w)];
    wr = rigtest::ris_wr(static_cast<std::uint64_t>(w), mr, u.idx.data(), kCount, u.values.data(),
                         u.values.size(), c.op, c.datatype);
    wr.next = &wrs[static_cast<std::size_t>(w) + 1];
  }
  // The last WR of the chain carries an idx one past the end: it fails, and writes nothing.
  rigtest::Updates bad = rigtest::make_updates(rank, 99, total, 50, c.P, c.datatype);
  bad.idx[40] = total;
  wrs[kWrs] = wrs[0];
  wrs[kWrs].wr_id = 99;
  wrs[kWrs].wr.ris.idx = bad.idx.data();
  wrs[kWrs].wr.ris.count = bad.idx.size();
  wrs[kWrs].wr.ris.values = bad.values.data();
  wrs[kWrs].wr.ris.values_bytes = bad.values.size();
  wrs[kWrs].next = nullptr;
  ns_send_wr* bad_wr = nullptr;
  if (ns_post_send(qp, wrs.data(), &bad_wr) != NS_OK) {
    std::fprintf(stderr, "rank %d: post: %s\n", rank, ns_last_error());
    return 1;
  }
  for (int got = 0; got < kWrs + 1;) {
    ns_wc wc{};
    if (ns_cq_wait(cq, 1, &wc, 30000) != 1) {
      std::fprintf(stderr, "rank %d: no completion (%s)\n", rank, ns_last_error());
      return 1;
    }
    ++got;
    const int want = wc.wr_id == 99 ? NS_WC_LOC_INV_REQ : NS_WC_SUCCESS;
    if (wc.status != want || wc.opcode != NS_WR_RIS || (wc.wr_id == 99 && wc.count != 40)) {
      std::fprintf(stderr, "rank %d: WR %llu: %s (count %llu)\n", rank,
                   static_cast<unsigned long long>(wc.wr_id), ns_wc_status_str(wc.status),
                   static_cast<unsigned long long>(wc.count));
      ++failures;
    }
  }
  if (ns_quiesce(ctx, 30000) != NS_OK) {
    std::fprintf(stderr, "rank %d: quiesce: %s\n", rank, ns_last_error());
    ++failures;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::byte> want = rigtest::ris_reference(initial, begin, rows, size, kWrs,
                                                             total, kCount, c.P, c.op, c.datatype);
  for (std::uint64_t r = 0; r < rows; ++r) {
    if (std::memcmp(block.data() + r * c.P, want.data() + r * c.P, c.P) != 0) {
      if (failures < 5) {
        std::fprintf(stderr, "rank %d: row %llu differs from the reference (P %u op %d type %d)\n",
                     rank, static_cast<unsigned long long>(begin + r), c.P, c.op, c.datatype);
      }
      ++failures;
    }
  }
  if (ns_stat_get(ctx, NS_STAT_SCATTER_COMBINED) == 0) {
    std::fprintf(stderr, "rank %d: no update was combined locally\n", rank);
    ++failures;
  }
  if (ns_destroy_qp(qp) != NS_OK || ns_destroy_cq(cq) != NS_OK || ns_dereg_props(mr) != NS_OK) {
    std::fprintf(stderr, "rank %d: teardown: %s\n", rank, ns_last_error());
    ++failures;
  }
  ns_stats_reset(ctx);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const netsparse::test::World world = netsparse::test::init_world(argc, argv);
  const int rank = world.rank, size = world.size;
  const bool inline_progress = argc > 1 && std::string(argv[1]) == "inline";
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_WATCHDOG;
  attr.progress_mode = inline_progress ? NS_PROGRESS_INLINE : NS_PROGRESS_THREAD;
  attr.watchdog_ms = 30000;
  ns_context* ctx = nullptr;
  int failures = 0;
  if (ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx) != NS_OK) {
    std::fprintf(stderr, "rank %d: ns_open_mpi: %s\n", rank, ns_last_error());
    failures = 1;
  } else {
    for (const Case c : {Case{8, NS_RIS_SUM, NS_RIS_FLOAT64}, Case{4, NS_RIS_SUM, NS_RIS_INT32},
                         Case{64, NS_RIS_MAX, NS_RIS_INT64}}) {
      failures += run_case(ctx, c, rank, size);
    }
    if (ns_close(ctx) != NS_OK) {
      std::fprintf(stderr, "rank %d: ns_close: %s\n", rank, ns_last_error());
      ++failures;
    }
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("ris_mpi: %s (%d failures)\n", all == 0 ? "PASS" : "FAIL", all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
