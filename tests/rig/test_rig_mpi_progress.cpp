// AUTO progress under a real launcher: the mode a context resolves to follows the cores the
// rank may use (taskset in the ctest definitions) and the OpenMP threads, and the engine works
// in it (every rank gathers every other rank's rows).
//   test_rig_mpi_progress EXPECTED     EXPECTED = inline | thread
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mpi_test_util.hpp"
#include "netsparse/netsparse_mpi.h"
#include "rig_wr.hpp"
#include "stats_json.hpp"

int main(int argc, char** argv) {
  const netsparse::test::World world = netsparse::test::init_world(argc, argv);
  const int rank = world.rank, size = world.size;
  int failures = 0;
  const std::string expected = argc > 1 ? argv[1] : "";
  const int want = expected == "thread" ? NS_PROGRESS_THREAD : NS_PROGRESS_INLINE;
  if (expected != "thread" && expected != "inline") {
    std::fprintf(stderr, "usage: test_rig_mpi_progress inline|thread\n");
    ++failures;
  }
  ns_context* ctx = nullptr;
  if (ns_open_mpi(MPI_COMM_WORLD, nullptr, &ctx) != NS_OK) {  // defaults: AUTO
    std::fprintf(stderr, "rank %d: ns_open_mpi: %s\n", rank, ns_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int got = ns_progress_mode_of(ctx);
  // ns_stats_json whole, and the reason AUTO gave in it ("" when absent).
  const std::string json = netsparse::test::stats_json_whole(ctx);
  const nlohmann::json stats = nlohmann::json::parse(json, nullptr, false);
  const std::string reason =
      stats.is_object() ? stats.value(nlohmann::json::json_pointer("/config/progress_reason"), "")
                        : "";
  if (got != want) {
    std::fprintf(stderr, "rank %d: AUTO chose %s, expected %s; %s\n", rank,
                 got == NS_PROGRESS_THREAD ? "thread" : "inline", expected.c_str(), json.c_str());
    ++failures;
  }
  // No free core, and MPI_THREAD_MULTIPLE (init_world asks for it): INLINE with a standby
  // thread (NETSPARSE_PROGRESS_STANDBY_US, 1000 by default); a progress thread needs none.
  const std::uint64_t standby_us =
      stats.is_object() ? stats.value(nlohmann::json::json_pointer("/config/standby_us"), 0ull)
                        : 0ull;
  const bool want_standby = got == NS_PROGRESS_INLINE && world.provided >= MPI_THREAD_MULTIPLE;
  if ((standby_us != 0) != want_standby) {
    std::fprintf(stderr, "rank %d: standby_us %llu, expected %s; %s\n", rank,
                 static_cast<unsigned long long>(standby_us), want_standby ? "> 0" : "0",
                 json.c_str());
    ++failures;
  }
  if (reason.rfind("auto: ", 0) != 0) {
    std::fprintf(stderr, "rank %d: no AUTO reason in %s\n", rank, json.c_str());
    ++failures;
  }
  // A gather of every row of every other rank, in the chosen mode.
  const std::uint32_t P = 16;
  const std::uint64_t rows = 500;
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(size) + 1);
  for (int p = 0; p <= size; ++p) offsets[static_cast<std::size_t>(p)] = rows * p;
  std::vector<std::uint32_t> block(rows * P / 4);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint32_t w = 0; w < P / 4; ++w)
      block[r * P / 4 + w] = static_cast<std::uint32_t>((rank * rows + r) * 7 + w);
  rigtest::RankQueues queues;
  if (!rigtest::open_queues(ctx, block.data(), rows, P, offsets.data(), 16, 16, rank, &queues)) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const auto [mr, cq, qp] = queues;
  std::vector<std::uint64_t> idx;
  for (std::uint64_t i = 0; i < rows * size; ++i) idx.push_back((i * 7919) % (rows * size));
  std::vector<std::uint32_t> out(idx.size() * P / 4);
  ns_send_wr w = rigtest::rig_wr(0, mr, idx, out.data());
  if (ns_post_send(qp, &w, nullptr) != NS_OK) ++failures;
  ns_wc wc{};
  if (ns_cq_wait(cq, 1, &wc, 30000) != 1 || wc.status != NS_WC_SUCCESS) {
    std::fprintf(stderr, "rank %d: gather did not complete: %s\n", rank,
                 ns_wc_status_str(wc.status));
    ++failures;
  }
  for (std::size_t j = 0; j < idx.size(); ++j) {
    for (std::uint32_t k = 0; k < P / 4; ++k) {
      if (out[j * P / 4 + k] != static_cast<std::uint32_t>(idx[j] * 7 + k)) {
        if (failures++ < 3) std::fprintf(stderr, "rank %d: position %zu wrong\n", rank, j);
      }
    }
  }
  if (ns_destroy_qp(qp) != NS_OK || ns_destroy_cq(cq) != NS_OK || ns_dereg_props(mr) != NS_OK ||
      ns_close(ctx) != NS_OK) {
    std::fprintf(stderr, "rank %d: teardown: %s\n", rank, ns_last_error());
    ++failures;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("progress_auto: %s (%s)\n", all == 0 ? "PASS" : "FAIL", expected.c_str());
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
