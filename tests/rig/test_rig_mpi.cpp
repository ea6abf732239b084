// RIG engine over real processes (mpirun -np 2, 3, 4): every byte under both progress modes,
// ablations and layouts; error completions; RDMA_READ; statistics summed over ranks; a peer that
// stops responding; the application using MPI at the same time. The transport is the one
// NETSPARSE_TRANSPORT / auto selects (MPI here, verbs in the soft-RoCE guest).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "mpi_test_util.hpp"
#include "netsparse/netsparse_mpi.h"
#include "rig_test_util.hpp"
#include "rig_wr.hpp"

using namespace rigtest;

namespace {

using netsparse::test::world_rank;
using netsparse::test::world_size;

struct RankSetup : RankRig {
  std::uint64_t total = 0;
  std::uint32_t P = 0;
  int rank = 0, size = 0;

  bool open(const ns_context_attr& attr, std::uint32_t prop, bool uneven) {
    rank = world_rank();
    size = world_size();
    P = prop;
    total = 173ull * static_cast<std::uint64_t>(size) + 5;
    offsets = uneven ? uneven_offsets(size, total, 17) : equal_offsets(size, total);
    block = make_block(offsets[rank], offsets[rank + 1], P);
    ns_status_t s = ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx);
    EXPECT_EQ(s, NS_OK) << ns_last_error();
    if (s != NS_OK) return false;
    s = ns_reg_props(ctx, block.data(), offsets[rank + 1] - offsets[rank], P, offsets.data(), &mr);
    EXPECT_EQ(s, NS_OK) << ns_last_error();
    EXPECT_EQ(ns_create_cq(ctx, 256, &cq), NS_OK);
    EXPECT_EQ(ns_create_qp(ctx, cq, 128, &qp), NS_OK);
    return s == NS_OK;
  }
  void close() {
    EXPECT_EQ(ns_destroy_qp(qp), NS_OK) << ns_last_error();
    EXPECT_EQ(ns_destroy_cq(cq), NS_OK) << ns_last_error();
    EXPECT_EQ(ns_close(ctx), NS_OK) << ns_last_error();
  }
};

using rigtest::rig_wr;
ns_send_wr rig(std::uint64_t id, ns_mr* mr, const std::vector<std::uint64_t>& idx, void* out,
               int layout, std::uint64_t base = 0, std::uint64_t len = 0) {
  return rig_wr(id, mr, idx, out, layout, base, len);
}

ns_context_attr attr_of(int progress, std::uint32_t flags, std::uint32_t watchdog_ms = 30000) {
  ns_context_attr a{};
  a.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_FLAGS | NS_CTX_ATTR_WATCHDOG;
  a.progress_mode = progress;
  a.flags = flags;
  a.watchdog_ms = watchdog_ms;
  return a;
}

nlohmann::json stats_of(ns_context* ctx) {
  return nlohmann::json::parse(stats_json_text(ctx));
}

std::uint64_t sum_over_ranks(std::uint64_t v) {
  std::uint64_t s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

void gather_and_check(RankSetup& s, int layout, std::uint64_t seed) {
  const int kWrs = 3;
  std::vector<std::vector<std::uint64_t>> idx(kWrs);
  std::vector<std::vector<std::uint8_t>> out(kWrs);
  std::vector<ns_send_wr> w;
  for (int k = 0; k < kWrs; ++k) {
    idx[k] = dup_heavy_idx(
        s.total, 2500, 12,
        seed + 101u * static_cast<std::uint64_t>(s.rank) + static_cast<std::uint64_t>(k));
    if (layout == NS_RIG_LAYOUT_INDEXED) {
      out[k].assign(s.total * s.P, 0xEE);
      w.push_back(
          rig(static_cast<std::uint64_t>(k), s.mr, idx[k], out[k].data(), layout, 0, s.total));
    } else {
      out[k].assign(idx[k].size() * s.P, 0xEE);
      w.push_back(rig(static_cast<std::uint64_t>(k), s.mr, idx[k], out[k].data(), layout));
    }
  }
  for (int k = 0; k + 1 < kWrs; ++k) w[k].next = &w[k + 1];
  ASSERT_EQ(ns_post_send(s.qp, w.data(), nullptr), NS_OK) << ns_last_error();
  for (const ns_wc& wc : wait_completions(s.cq, kWrs))
    EXPECT_EQ(wc.status, NS_WC_SUCCESS) << ns_wc_status_str(wc.status);
  int errors = 0;
  for (int k = 0; k < kWrs && errors < 5; ++k) {
    for (std::size_t j = 0; j < idx[k].size() && errors < 5; ++j) {
      const std::uint64_t row = idx[k][j];
      const std::uint8_t* p =
          layout == NS_RIG_LAYOUT_INDEXED ? out[k].data() + row * s.P : out[k].data() + j * s.P;
      const std::string e = check_prop(p, row, s.P);
      if (!e.empty()) {
        ADD_FAILURE() << "rank " << s.rank << " wr " << k << " pos " << j << ": " << e;
        ++errors;
      }
    }
  }
}

}  // namespace

struct MpiCase {
  int progress;
  std::uint32_t flags;
  int layout;
  std::uint32_t P;
  bool uneven;
};
void PrintTo(const MpiCase& c, std::ostream* os) {
  *os << (c.progress == NS_PROGRESS_INLINE ? "inline" : "thread") << " flags " << c.flags
      << " layout " << c.layout << " P " << c.P << (c.uneven ? " uneven" : "");
}
class MpiGather : public ::testing::TestWithParam<MpiCase> {};

TEST_P(MpiGather, EveryByteAndStatsAcrossRanks) {
  const MpiCase c = GetParam();
  RankSetup s;
  ASSERT_TRUE(s.open(attr_of(c.progress, c.flags), c.P, c.uneven));
  gather_and_check(s, c.layout, 1234);
  EXPECT_EQ(ns_quiesce(s.ctx, 30000), NS_OK) << ns_last_error();
  // After quiesce nobody needs anybody: plain MPI collectives are safe even in INLINE mode.
  const auto req = stat(s.ctx, NS_STAT_PRS_REQUESTED);
  EXPECT_EQ(req, stat(s.ctx, NS_STAT_PRS_FILTERED) + stat(s.ctx, NS_STAT_PRS_COALESCED) +
                     stat(s.ctx, NS_STAT_PRS_LOCAL) + stat(s.ctx, NS_STAT_PRS_SENT));
  EXPECT_EQ(req, 3u * 2500u);
  EXPECT_EQ(sum_over_ranks(stat(s.ctx, NS_STAT_PRS_SENT)),
            sum_over_ranks(stat(s.ctx, NS_STAT_SERVER_PRS)));
  EXPECT_EQ(stat(s.ctx, NS_STAT_MALFORMED), 0u);
  if (c.flags & NS_CTX_NO_CONCAT) {
    EXPECT_DOUBLE_EQ(ns_stat_prs_per_packet(s.ctx), 1.0);
  }
  s.close();
}

INSTANTIATE_TEST_SUITE_P(
    Modes, MpiGather,
    ::testing::Values(
        MpiCase{NS_PROGRESS_THREAD, 0, NS_RIG_LAYOUT_POSITIONAL, 64, false},
        MpiCase{NS_PROGRESS_INLINE, 0, NS_RIG_LAYOUT_INDEXED, 64, true},
        MpiCase{NS_PROGRESS_THREAD, NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE, NS_RIG_LAYOUT_INDEXED, 4,
                false},
        MpiCase{NS_PROGRESS_INLINE, NS_CTX_NO_CONCAT, NS_RIG_LAYOUT_POSITIONAL, 100, false},
        MpiCase{NS_PROGRESS_THREAD, NS_CTX_NO_COALESCE, NS_RIG_LAYOUT_POSITIONAL, 1024, true}));

// NS_CTX_UNCHECKED is this rank's choice: ranks that differ in it open, gather and close
// together (ns_open_mpi leaves it out of the agreed flags).
TEST(Mpi, UncheckedIsLocalNotAgreed) {
  RankSetup s;
  const std::uint32_t mine =
      world_rank() % 2 == 1 ? static_cast<std::uint32_t>(NS_CTX_UNCHECKED) : 0u;
  ASSERT_TRUE(s.open(attr_of(NS_PROGRESS_THREAD, mine), 16, false));
  gather_and_check(s, NS_RIG_LAYOUT_POSITIONAL, 99);
  EXPECT_EQ(ns_quiesce(s.ctx, 30000), NS_OK) << ns_last_error();
  s.close();
}

TEST(Mpi, OutOfRangeIdxAndRdmaRead) {
  RankSetup s;
  ASSERT_TRUE(s.open(attr_of(NS_PROGRESS_THREAD, 0), 20, false));
  const std::vector<std::uint64_t> bad = {1, s.total + 3, 2};
  std::vector<std::uint8_t> o(bad.size() * s.P);
  auto w = rig(7, s.mr, bad, o.data(), NS_RIG_LAYOUT_POSITIONAL);
  ASSERT_EQ(ns_post_send(s.qp, &w, nullptr), NS_OK);
  auto wc = wait_completions(s.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, NS_WC_REM_INV_REQ);
  // One RDMA_READ per row of the next rank's block (the vanilla SA path).
  const int peer = (s.rank + 1) % s.size;
  std::vector<std::uint64_t> rows;
  for (std::uint64_t r = s.offsets[peer]; r < s.offsets[peer + 1]; r += 2) rows.push_back(r);
  std::vector<std::uint8_t> out(rows.size() * s.P);
  std::vector<ns_send_wr> reads(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    reads[k] = read_wr(k, s.mr, rows[k], out.data() + k * s.P, s.P);
    reads[k].next = k + 1 < rows.size() ? &reads[k + 1] : nullptr;
  }
  ASSERT_EQ(ns_post_send(s.qp, reads.data(), nullptr), NS_OK) << ns_last_error();
  for (const ns_wc& c : wait_completions(s.cq, rows.size())) EXPECT_EQ(c.status, NS_WC_SUCCESS);
  for (std::size_t k = 0; k < rows.size(); ++k)
    EXPECT_EQ(check_prop(out.data() + k * s.P, rows[k], s.P), "");
  EXPECT_EQ(ns_quiesce(s.ctx, 30000), NS_OK);
  EXPECT_GE(sum_over_ranks(stat(s.ctx, NS_STAT_INVALID_PRS)), 1u);
  s.close();
}

// ns_open_mpi agrees collectively before anything else: settings that must match, and a rank
// whose arguments are refused, fail every rank with the same message (nobody hangs).
TEST(Mpi, OpenAgreesOnSettingsAcrossRanks) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_FAIL() << "needs at least 2 ranks";
  ns_context* ctx = nullptr;
  // Different packet sizes.
  ns_context_attr a{};
  a.comp_mask = NS_CTX_ATTR_PACKET;
  a.packet_bytes = rank == 1 ? 4096 : 1500;
  EXPECT_EQ(ns_open_mpi(MPI_COMM_WORLD, &a, &ctx), NS_ERR_INVALID);
  EXPECT_EQ(ctx, nullptr);
  const std::string msg = ns_last_error();
  EXPECT_NE(msg.find("ranks disagree on packet_bytes: rank 0 has 1500, rank 1 has 4096"),
            std::string::npos)
      << msg;
  // One rank passes an invalid attribute: everyone fails naming that rank.
  ns_context_attr b{};
  if (rank == size - 1) {
    b.comp_mask = NS_CTX_ATTR_FLAGS;
    b.flags = 1u << 30;
  }
  EXPECT_EQ(ns_open_mpi(MPI_COMM_WORLD, &b, &ctx), NS_ERR_INVALID);
  const std::string msg2 = ns_last_error();
  EXPECT_NE(msg2.find("rank " + std::to_string(size - 1) + ": ns_context_attr.flags"),
            std::string::npos)
      << msg2;
  // Settings beyond the memory budget: refused before anything is allocated, on every rank.
  ns_context_attr c{};
  c.comp_mask = NS_CTX_ATTR_UNITS | NS_CTX_ATTR_PENDING;
  c.num_client_units = 1024;
  c.num_server_units = 1;
  c.pending_entries = 1u << 20;
  EXPECT_EQ(ns_open_mpi(MPI_COMM_WORLD, &c, &ctx), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("memory budget"), std::string::npos)
      << ns_last_error();
  // And the same communicator still opens with agreeing settings.
  ASSERT_EQ(ns_open_mpi(MPI_COMM_WORLD, nullptr, &ctx), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_close(ctx), NS_OK);
}

// A host layout the rings cannot be built on is refused by ns_open_mpi's own agreement (the
// rings no longer agree on it themselves): every rank fails with the same message, and a
// disagreeing value is named like any agreed setting. The communicator stays usable.
TEST(Mpi, OpenRefusesAHostLayoutThatCannotWorkOnEveryRank) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_FAIL() << "needs at least 2 ranks";
  const char* saved = std::getenv("NETSPARSE_RANKS_PER_HOST");
  const std::string kept = saved != nullptr ? saved : "";
  const auto restore = [&] {
    if (saved != nullptr) {
      setenv("NETSPARSE_RANKS_PER_HOST", kept.c_str(), 1);
    } else {
      unsetenv("NETSPARSE_RANKS_PER_HOST");
    }
  };
  ns_context* ctx = nullptr;
  // The MPI transport (the layout is its host rings'; where an RDMA device is active, as in the
  // soft-RoCE guest, AUTO would pick verbs, which has no rings and no layout to refuse).
  ns_context_attr mpi{};
  mpi.comp_mask = NS_CTX_ATTR_TRANSPORT;
  mpi.transport = NS_TRANSPORT_MPI;
  ASSERT_EQ(setenv("NETSPARSE_RANKS_PER_HOST", std::to_string(size + 1).c_str(), 1), 0);
  const ns_status_t s = ns_open_mpi(MPI_COMM_WORLD, &mpi, &ctx);
  const std::string msg = ns_last_error();
  restore();
  EXPECT_EQ(s, NS_ERR_INVALID);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(
      msg.find("NETSPARSE_RANKS_PER_HOST=" + std::to_string(size + 1) +
               " does not divide the job's " + std::to_string(size) + " ranks into whole hosts"),
      std::string::npos)
      << msg;
  ASSERT_EQ(setenv("NETSPARSE_RANKS_PER_HOST", rank == 0 ? "1" : std::to_string(size).c_str(), 1),
            0);
  const ns_status_t s2 = ns_open_mpi(MPI_COMM_WORLD, &mpi, &ctx);
  const std::string msg2 = ns_last_error();
  restore();
  EXPECT_EQ(s2, NS_ERR_INVALID);
  EXPECT_NE(msg2.find("ranks disagree on NETSPARSE_RANKS_PER_HOST"), std::string::npos) << msg2;
  ASSERT_EQ(ns_open_mpi(MPI_COMM_WORLD, &mpi, &ctx), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_close(ctx), NS_OK);
}

// NS_CTX_NO_HOST_RINGS: the context's MPI transport leaves its intra-host shared-memory rings
// out (what node-wide NetSparse's leaders need on virtual hosts), without touching the
// environment, and the engine still gathers every byte; without the flag the rings are there
// unless NETSPARSE_MPI_SHM=0 (the ctest runs both ways). The transport says which in
// ns_stats_json's transport_detail.
TEST(Mpi, NoHostRingsFlagSendsEveryFrameThroughMpi) {
  if (world_size() < 2) GTEST_FAIL() << "needs at least 2 ranks";
  const char* shm = std::getenv("NETSPARSE_MPI_SHM");
  const bool rings_by_default = shm == nullptr || std::string(shm) != "0";
  for (const bool flag : {false, true}) {
    ns_context_attr attr{};
    attr.comp_mask = NS_CTX_ATTR_FLAGS;
    attr.flags = flag ? static_cast<std::uint32_t>(NS_CTX_NO_HOST_RINGS) : 0u;
    RankSetup s;
    if (!s.open(attr, 24, false)) return;
    const nlohmann::json stats = stats_of(s.ctx);
    const std::string detail = stats.value("transport_detail", std::string("(none)"));
    const bool rings = detail.find("shared-memory rings") != std::string::npos;
    // Rings are the MPI transport's (verbs, in the soft-RoCE guest, has none either way).
    const bool mpi = stats.value("transport", std::string()) == "mpi";
    EXPECT_EQ(rings, mpi && !flag && rings_by_default) << "flag " << flag << ": " << detail;
    EXPECT_EQ(getenv("NETSPARSE_MPI_SHM") == nullptr, shm == nullptr);  // left as it was
    gather_and_check(s, NS_RIG_LAYOUT_INDEXED, 77);  // every byte, through whichever path
    EXPECT_EQ(ns_quiesce(s.ctx, 10000), NS_OK) << ns_last_error();
    s.close();
  }
}

// Answers whose rows do not fit in the shared-memory ring to the requester (4000 B properties,
// the smallest rings: 512 KiB for 64 KiB frames, ~700 KB per owner and gather) are packed
// straight into the ring as far as the requester has drained it, the rest at later engine steps:
// a plan replay's (PlanUnit) and a plain gather's compact reads (ServerUnit). Every byte arrives,
// under both progress modes, and no row is packed into the outbox's queue (plans.rows_queued and
// compact.rows_queued stay 0; packing a whole answer at once queued what did not fit: a copy into
// the queue, then another into the ring).
TEST(Mpi, AnswersLargerThanTheRingArePackedIntoItInParts) {
  if (world_size() < 2) GTEST_FAIL() << "needs at least 2 ranks";
  // ~4 KiB rows whose one-row response (32 B header) still fits the verbs transport's 4 KiB
  // messages in the soft-RoCE guest.
  constexpr std::uint32_t kProp = 4000;
  ::setenv("NETSPARSE_MPI_SHM_RING_BYTES", "262144", 1);
  for (const int progress : {NS_PROGRESS_INLINE, NS_PROGRESS_THREAD}) {
    RankSetup s;
    if (!s.open(attr_of(progress, 0), kProp, false)) break;
    std::vector<std::uint64_t> idx;  // every remote row, some twice
    for (std::uint64_t r = 0; r < s.total; ++r) {
      if (r < s.offsets[s.rank] || r >= s.offsets[s.rank + 1]) idx.push_back(r);
    }
    for (std::uint64_t r = 0; r < s.total; r += 7) idx.push_back(r);
    std::vector<std::uint8_t> out(idx.size() * s.P);
    const auto run_and_check = [&](ns_send_wr w, const char* what, int start) {
      std::fill(out.begin(), out.end(), std::uint8_t{0xEE});
      ASSERT_EQ(ns_post_send(s.qp, &w, nullptr), NS_OK) << ns_last_error();
      for (const ns_wc& wc : wait_completions(s.cq, 1))
        EXPECT_EQ(wc.status, NS_WC_SUCCESS) << what << ": " << ns_wc_status_str(wc.status);
      int errors = 0;
      for (std::size_t j = 0; j < idx.size() && errors < 5; ++j) {
        const std::string e = check_prop(out.data() + j * s.P, idx[j], s.P);
        if (!e.empty()) {
          ADD_FAILURE() << "rank " << s.rank << " " << what << " " << start << " pos " << j << ": "
                        << e;
          ++errors;
        }
      }
    };
    ns_send_wr wr = rig(1, s.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    ns_plan* plan = nullptr;
    ASSERT_EQ(ns_plan_create(s.ctx, &wr, &plan), NS_OK) << ns_last_error();
    for (int start = 0; start < 4; ++start) {  // the first records, three replays
      ns_send_wr go = netsparse::detail::work_request(10 + start, NS_WR_RIG_PLAN, NS_SEND_SIGNALED);
      go.wr.plan.plan = plan;
      run_and_check(go, "plan start", start);
      ns_send_wr fresh = wr;  // the same gather through the per-request path
      fresh.send_flags |= NS_SEND_NEW_EPOCH;
      run_and_check(fresh, "gather", start);
      EXPECT_EQ(ns_quiesce(s.ctx, 30000), NS_OK) << ns_last_error();
    }
    EXPECT_EQ(stat(s.ctx, NS_STAT_PLAN_REPLAYS), 3u);
    EXPECT_EQ(sum_over_ranks(stat(s.ctx, NS_STAT_PLAN_ROWS)),
              sum_over_ranks(stat(s.ctx, NS_STAT_PLAN_ROWS_SERVED)));
    const nlohmann::json stats = stats_of(s.ctx);
    const std::uint64_t plan_queued = stats["plans"]["rows_queued"].get<std::uint64_t>();
    const std::uint64_t read_queued = stats["compact"]["rows_queued"].get<std::uint64_t>();
    if (stats.value("transport_detail", std::string()).find("shared-memory rings") !=
        std::string::npos) {
      EXPECT_EQ(plan_queued, 0u) << "replay rows were packed into the outbox's queue";
      EXPECT_EQ(read_queued, 0u) << "compact-read rows were packed into the outbox's queue";
    } else {  // verbs (the soft-RoCE guest) or no rings: the transport lends no memory
      EXPECT_EQ(plan_queued, stat(s.ctx, NS_STAT_PLAN_ROWS_SERVED));
      EXPECT_EQ(read_queued, stat(s.ctx, NS_STAT_SERVER_PRS));
    }
    EXPECT_EQ(ns_plan_destroy(plan), NS_OK) << ns_last_error();
    s.close();
  }
  ::unsetenv("NETSPARSE_MPI_SHM_RING_BYTES");
}

// ns_reg_props agrees collectively before registering: properties of different sizes, a refused
// argument on one rank (prop_bytes 0) and different partitions fail every rank with the same
// message; afterwards a correct registration still works.
TEST(Mpi, RegisterAgreesOnPropertiesAndPartition) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ns_context* ctx = nullptr;
  ASSERT_EQ(ns_open_mpi(MPI_COMM_WORLD, nullptr, &ctx), NS_OK) << ns_last_error();
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(size) + 1);
  for (int p = 0; p <= size; ++p) offsets[static_cast<std::size_t>(p)] = 10u * p;
  std::vector<std::uint8_t> block(10 * 16);
  ns_mr* mr = nullptr;
  EXPECT_EQ(ns_reg_props(ctx, block.data(), 10, rank == 1 ? 16 : 8, offsets.data(), &mr),
            NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error())
                .find("ranks disagree on prop_bytes: rank 0 has 8, rank 1 "
                      "has 16"),
            std::string::npos)
      << ns_last_error();
  EXPECT_EQ(ns_reg_props(ctx, block.data(), 10, rank == size - 1 ? 0 : 8, offsets.data(), &mr),
            NS_ERR_INVALID);
  EXPECT_NE(
      std::string(ns_last_error()).find("rank " + std::to_string(size - 1) + ": prop_bytes is 0"),
      std::string::npos)
      << ns_last_error();
  std::vector<std::uint64_t> other = offsets;
  if (rank == 0) {  // the same total, another cut
    other[1] = 9;
  }
  const std::uint64_t mine = other[static_cast<std::size_t>(rank) + 1] - other[rank];
  EXPECT_EQ(ns_reg_props(ctx, block.data(), mine, 8, other.data(), &mr), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("ranks disagree on row_offsets"), std::string::npos)
      << ns_last_error();
  ASSERT_EQ(ns_reg_props(ctx, block.data(), 10, 8, offsets.data(), &mr), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_dereg_props(mr), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_close(ctx), NS_OK);
}

TEST(Mpi, ApplicationUsesMpiConcurrently) {
  RankSetup s;
  ASSERT_TRUE(s.open(attr_of(NS_PROGRESS_THREAD, 0), 16, false));
  // The progress thread talks on its private communicator while this thread runs collectives.
  std::uint64_t acc = 0;
  const auto idx = dup_heavy_idx(s.total, 20000, 16, 5 + static_cast<std::uint64_t>(s.rank));
  std::vector<std::uint8_t> out(idx.size() * s.P);
  auto w = rig(1, s.mr, idx, out.data(), NS_RIG_LAYOUT_POSITIONAL);
  ASSERT_EQ(ns_post_send(s.qp, &w, nullptr), NS_OK);
  for (int k = 0; k < 200; ++k) {
    std::uint64_t one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    acc += sum;
  }
  EXPECT_EQ(acc, 200u * static_cast<std::uint64_t>(s.size));
  for (const ns_wc& c : wait_completions(s.cq, 1)) EXPECT_EQ(c.status, NS_WC_SUCCESS);
  for (std::size_t j = 0; j < idx.size(); j += 7)
    EXPECT_EQ(check_prop(out.data() + j * s.P, idx[j], s.P), "");
  MPI_Barrier(MPI_COMM_WORLD);  // threaded progress keeps serving peers during it
  s.close();
}

TEST(Mpi, PeerThatStopsRespondingGivesTimeoutsNotHangs) {
  constexpr std::uint32_t kWatchdogMs = 300;
  RankSetup s;
  ASSERT_TRUE(s.open(attr_of(NS_PROGRESS_INLINE, 0, kWatchdogMs), 8, false));
  const int silent = s.size - 1;
  if (s.rank == silent) {
    // Stops driving its engine (INLINE mode: nobody answers for it) for several watchdog periods.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * kWatchdogMs));
  } else {
    std::vector<std::uint64_t> rows;
    for (std::uint64_t r = s.offsets[silent]; r < s.offsets[silent + 1]; r += 4) rows.push_back(r);
    std::vector<std::uint8_t> out(rows.size() * s.P);
    auto w = rig(1, s.mr, rows, out.data(), NS_RIG_LAYOUT_POSITIONAL);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(ns_post_send(s.qp, &w, nullptr), NS_OK);
    auto wc = wait_completions(s.cq, 1, 10000);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, NS_WC_WATCHDOG_TIMEOUT) << ns_wc_status_str(wc[0].status);
    std::printf("[rank %d] timeout completion after %lld ms (watchdog %u ms)\n", s.rank,
                static_cast<long long>(ms), kWatchdogMs);
  }
  s.close();  // survivors tear down locally; the silent rank's quiesce times out, then it does too
  MPI_Barrier(MPI_COMM_WORLD);
}
