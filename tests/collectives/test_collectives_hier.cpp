// The hierarchical allreduce (issue 39 item 1) on real mpirun processes with virtual hosts
// (NETSPARSE_RANKS_PER_HOST, set by the ctest): every datatype and operator against the
// sequential reference, uneven and zero lengths, in place; the exact inter-host byte bound
// against the flat allreduce on the same layout; sparse; reproducible bits; refusals that reach
// every rank of every host. Two communicators per test: one forced flat, one forced
// hierarchical (NETSPARSE_COLL_HIERARCHY, read when each opens). With racks
// (NETSPARSE_HOSTS_PER_RACK, several racks of several hosts) the hierarchical one goes through
// one switch per rack, and CollHierRacks compares it with the host level alone ("hosts").
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "coll_test_util.hpp"
#include "collectives/communicator.hpp"
#include "collectives/fault_injection.hpp"
#include "collectives/hierarchical_mpi.hpp"
#include "hosts/topology.hpp"
#include "mpi_test_util.hpp"
#include "netsparse/collectives_mpi.h"
#include "sparse_result.hpp"

using namespace colltest;
namespace cl = netsparse::collectives;

namespace {

using netsparse::test::world_rank;
using netsparse::test::world_size;

ns_coll* open_with(const char* mode, std::uint32_t packet_bytes = 8192) {
  setenv("NETSPARSE_COLL_HIERARCHY", mode, 1);
  ns_coll_attr attr{};
  attr.comp_mask = NS_COLL_ATTR_TIMEOUT | NS_COLL_ATTR_PACKET;
  attr.timeout_ms = 30000;
  attr.packet_bytes = packet_bytes;  // many blocks at test sizes
  ns_coll* c = nullptr;
  EXPECT_EQ(ns_coll_open_mpi(MPI_COMM_WORLD, &attr, &c), NS_OK) << ns_last_error();
  unsetenv("NETSPARSE_COLL_HIERARCHY");
  return c;
}

std::uint64_t sum_over_ranks(std::uint64_t mine) {
  std::uint64_t all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

class CollHier : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = netsparse::dist::Topology::build(MPI_COMM_WORLD);
    r_ = static_cast<int>(topo_.ranks_of(topo_.host()).size());
    racks_ = topo_.nracks() > 1 && topo_.nracks() < topo_.nhosts();
    hosts_per_rack_ = topo_.nhosts() / topo_.nracks();
    flat_ = open_with("flat");
    hier_ = open_with("hierarchical");
    ASSERT_NE(flat_, nullptr);
    ASSERT_NE(hier_, nullptr);
    ASSERT_EQ(ns_coll_hierarchical(flat_), 0);
    ASSERT_EQ(ns_coll_hierarchical(hier_), racks_ ? 2 : 1);
  }
  void TearDown() override {
    if (hier_ != nullptr) {
      EXPECT_EQ(ns_coll_close(hier_), NS_OK) << ns_last_error();
    }
    if (flat_ != nullptr) {
      EXPECT_EQ(ns_coll_close(flat_), NS_OK) << ns_last_error();
    }
  }
  // Whether hosts and racks are both powers of two in size (reproducible mode then gives the flat
  // tree's bits).
  bool tree_aligned() const {
    return (r_ & (r_ - 1)) == 0 && (!racks_ || (hosts_per_rack_ & (hosts_per_rack_ - 1)) == 0);
  }
  netsparse::dist::Topology topo_;
  int r_ = 1;
  bool racks_ = false;
  int hosts_per_rack_ = 1;
  ns_coll* flat_ = nullptr;
  ns_coll* hier_ = nullptr;
};

}  // namespace

TEST_F(CollHier, TheLayoutChoosesHierarchicalUnlessForcedFlat) {
  {  // the C++ wrapper over the hierarchical handle (it closes it; reopened below)
    netsparse::Collectives h(hier_);
    EXPECT_TRUE(h.hierarchical());
    std::vector<float> v(5000, 1.0f);
    h.allreduce(std::span<float>(v));
    EXPECT_EQ(v[4999], static_cast<float>(world_size()));
    EXPECT_EQ(h.inter_host_bytes(), ns_coll_inter_host_bytes(hier_));
    if (topo_.is_leader()) {
      EXPECT_GT(h.inter_host_bytes(), 0u);
    }
    hier_ = nullptr;  // h closes it
  }
  hier_ = open_with("hierarchical");

  ASSERT_GT(topo_.nhosts(), 1) << "run with NETSPARSE_RANKS_PER_HOST below np";
  ASSERT_GT(r_, 1);
  ns_coll* automatic = open_with("auto");
  ASSERT_NE(automatic, nullptr);
  EXPECT_EQ(ns_coll_hierarchical(automatic), racks_ ? 2 : 1);
  EXPECT_EQ(ns_coll_close(automatic), NS_OK);
  // Ranks that disagree on the setting are refused on every rank.
  setenv("NETSPARSE_COLL_HIERARCHY", world_rank() == 1 ? "flat" : "auto", 1);
  ns_coll* c = nullptr;
  EXPECT_EQ(ns_coll_open_mpi(MPI_COMM_WORLD, nullptr, &c), NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("NETSPARSE_COLL_HIERARCHY"), std::string::npos)
      << ns_last_error();
  unsetenv("NETSPARSE_COLL_HIERARCHY");
}

TEST_F(CollHier, EveryTypeOpLengthAndInPlaceMatchesTheReference) {
  const int P = world_size(), me = world_rank();
  std::uint64_t seed = 3;
  for (int t = 0; t < cl::kDataTypeCount; ++t)
    for (int op = 0; op < 4; ++op)
      for (std::uint64_t count : {0ull, 1ull, 777ull, 12347ull})
        for (int variant = 0; variant < 2; ++variant) {
          const bool in_place = variant == 1;
          const bool reproducible = (t + op) % 2 == 0;
          const auto type = static_cast<DataType>(t);
          const cl::Reducer red(type, static_cast<ReduceOp>(op));
          std::vector<Bytes> in;
          ++seed;
          for (int r = 0; r < P; ++r)
            in.push_back(make_input(type, static_cast<ReduceOp>(op), count, r, seed, true));
          const Bytes expected = tree_reference(red, in, count);
          Bytes out(expected.size(), std::byte{0x77});
          if (in_place) out = in[static_cast<std::size_t>(me)];
          ns_allreduce_params p{};
          p.flags = reproducible ? unsigned{NS_ALLREDUCE_REPRODUCIBLE} : 0u;
          const void* send = in_place ? out.data() : in[static_cast<std::size_t>(me)].data();
          ASSERT_EQ(ns_allreduce(hier_, send, out.data(), count, t, op, &p), NS_OK)
              << ns_last_error();
          ASSERT_TRUE(out == expected) << cl::to_string(type) << " op " << op << " count " << count
                                       << (in_place ? " in place" : "");
        }
}

// The goal of issue 39: inter-host bytes at most 1/r of the flat allreduce's, counted exactly
// (every packet to a rank of another host, headers included), summed over the ranks.
TEST_F(CollHier, InterHostBytesAreAtMostOneOverRanksPerHostOfFlat) {
  const int me = world_rank();
  const bool leader = topo_.is_leader();
  for (std::uint64_t count : {0ull, 1ull, 5000ull, 300000ull}) {
    std::vector<float> x(count, 1.0f + static_cast<float>(me)), y(count);
    ASSERT_EQ(ns_allreduce(flat_, x.data(), y.data(), count, NS_DTYPE_FP32, NS_OP_SUM, nullptr),
              NS_OK)
        << ns_last_error();
    const std::uint64_t flat = sum_over_ranks(ns_coll_inter_host_bytes(flat_));
    std::vector<float> z(count);
    ASSERT_EQ(ns_allreduce(hier_, x.data(), z.data(), count, NS_DTYPE_FP32, NS_OP_SUM, nullptr),
              NS_OK)
        << ns_last_error();
    ASSERT_TRUE(y == z) << count;
    const std::uint64_t mine = ns_coll_inter_host_bytes(hier_);
    if (!leader) {
      EXPECT_EQ(mine, 0u) << "only the host leaders send between hosts";
    }
    const std::uint64_t hier = sum_over_ranks(mine);
    EXPECT_GT(flat, 0u);
    EXPECT_GT(hier, 0u);
    EXPECT_LE(hier * static_cast<std::uint64_t>(r_), flat)
        << "count " << count << ": hierarchical " << hier << " B, flat " << flat << " B, r " << r_;
    if (me == 0)
      std::printf("inter-host bytes, %llu fp32: flat %llu, hierarchical %llu (r = %d)\n",
                  static_cast<unsigned long long>(count), static_cast<unsigned long long>(flat),
                  static_cast<unsigned long long>(hier), r_);
  }
}

// Reproducible mode: the host's tree, then the leaders' tree. Repeated runs give the same bits,
// and with hosts of 2^k consecutive ranks the flat tree's bits (the same pairs in the same
// order). Inputs are order-sensitive (checked), so an arrival-order sum would differ.
TEST_F(CollHier, ReproducibleBitsAreRepeatableAndEqualTheFlatTree) {
  const int P = world_size(), me = world_rank();
  for (int t : {NS_DTYPE_FP16, NS_DTYPE_FP32, NS_DTYPE_FP64}) {
    const auto type = static_cast<DataType>(t);
    const std::uint64_t count = 20000;
    const cl::Reducer red(type, ReduceOp::kSum);
    std::vector<Bytes> in;
    for (int r = 0; r < P; ++r) in.push_back(make_input(type, ReduceOp::kSum, count, r, 41, false));
    const Bytes expected = tree_reference(red, in, count);
    ASSERT_NE(expected, right_fold_reference(red, in, count)) << "inputs not order-sensitive";
    ns_allreduce_params p{};
    p.flags = NS_ALLREDUCE_REPRODUCIBLE;
    Bytes flat(expected.size());
    ASSERT_EQ(ns_allreduce(flat_, in[static_cast<std::size_t>(me)].data(), flat.data(), count, t,
                           NS_OP_SUM, &p),
              NS_OK);
    Bytes first;
    for (int run = 0; run < 10; ++run) {
      Bytes out(expected.size());
      ASSERT_EQ(ns_allreduce(hier_, in[static_cast<std::size_t>(me)].data(), out.data(), count, t,
                             NS_OP_SUM, &p),
                NS_OK)
          << ns_last_error();
      if (run == 0) first = out;
      ASSERT_TRUE(out == first) << "run " << run;
    }
    if (tree_aligned()) {
      EXPECT_TRUE(first == flat) << "dtype " << t;
      EXPECT_TRUE(first == expected) << "dtype " << t;
    }
  }
}

TEST_F(CollHier, SparseMatchesTheReferenceWithFewerInterHostBytes) {
  const int P = world_size(), me = world_rank();
  const std::uint64_t n = 1 << 17;
  std::uint64_t seed = 900;
  for (std::uint64_t nnz : {0ull, 1300ull, 65536ull})
    for (int t : {NS_DTYPE_INT32, NS_DTYPE_FP32, NS_DTYPE_FP64})
      for (int output : {NS_SPARSE_OUTPUT_AUTO, NS_SPARSE_OUTPUT_SPARSE, NS_SPARSE_OUTPUT_DENSE}) {
        const auto type = static_cast<DataType>(t);
        const std::size_t es = cl::element_size(type);
        std::vector<SparseInput> in;
        ++seed;
        for (int r = 0; r < P; ++r) in.push_back(make_sparse(type, n, nnz, 4, r, seed, true));
        const Bytes expected = sparse_reference(type, n, in);
        const SparseInput& mine = in[static_cast<std::size_t>(me)];
        std::uint64_t inter[2] = {0, 0};
        for (int which = 0; which < 2; ++which) {
          ns_coll* c = which == 0 ? flat_ : hier_;
          Bytes given(n * es, std::byte{0xab});
          ns_sparse_params p{output, seed % 2 == 0 ? given.data() : nullptr};
          ns_sparse_result* res = nullptr;
          ASSERT_EQ(ns_sparse_allreduce(c, n, mine.idx.size(), mine.idx.data(), mine.values.data(),
                                        t, NS_OP_SUM, &p, &res),
                    NS_OK)
              << ns_last_error();
          inter[which] = sum_over_ranks(ns_coll_inter_host_bytes(c));
          Bytes dense;
          densify_sparse_result(res, n, es, output, dense);
          ns_sparse_result_free(res);
          ASSERT_TRUE(dense == expected)
              << (which ? "hierarchical" : "flat") << " nnz " << nnz << " dtype " << t;
        }
        EXPECT_LE(inter[1], inter[0]) << "nnz " << nnz << " dtype " << t;
      }
}

// Bad or mismatched arguments on one rank (a leader or not) fail the call on every rank of every
// host with NS_ERR_INVALID, and the communicator works afterwards.
TEST_F(CollHier, RefusalsAndMismatchesReachEveryRankOfEveryHost) {
  const int P = world_size(), me = world_rank();
  std::vector<float> x(4000, 1.0f), y(4000);
  const int last = P - 1;  // a non-leader of the last host (r > 1)
  // A count that differs on one rank (inside a host).
  ASSERT_EQ(ns_allreduce(hier_, x.data(), y.data(), me == last ? 3000 : 4000, NS_DTYPE_FP32,
                         NS_OP_SUM, nullptr),
            NS_ERR_INVALID);
  // The last host learns it in its host step, the others from the leaders' step (hosts of one
  // rank have no host step); with racks, from their rack's step or between the switches.
  const char* const path = r_ > 1 && topo_.host() == topo_.host_of(last) ? "inside this host"
                           : racks_                                      ? "rack"
                                    : "between the host leaders";
  EXPECT_NE(std::string(ns_last_error()).find(path), std::string::npos) << ns_last_error();
  // A count that differs between hosts (the same inside each host).
  ASSERT_EQ(ns_allreduce(hier_, x.data(), y.data(), topo_.host() == 0 ? 4000 : 3999, NS_DTYPE_FP32,
                         NS_OP_SUM, nullptr),
            NS_ERR_INVALID);
  // With racks, the other racks hear it as the first rack's switch refusing the switches' step.
  const char* const why =
      racks_ && topo_.rack() != 0 ? "step of a hierarchical operation failed" : "disagree";
  EXPECT_NE(std::string(ns_last_error()).find(why), std::string::npos) << ns_last_error();
  // A NULL receive buffer on a non-leader (its host step, a reduce, does not need it).
  ASSERT_EQ(ns_allreduce(hier_, x.data(), me == last ? nullptr : y.data(), 4000, NS_DTYPE_FP32,
                         NS_OP_SUM, nullptr),
            NS_ERR_INVALID);
  // A bad operator on a leader.
  ASSERT_EQ(ns_allreduce(hier_, x.data(), y.data(), 4000, NS_DTYPE_FP32,
                         me == topo_.leader_of(topo_.nhosts() - 1) ? 99 : NS_OP_SUM, nullptr),
            NS_ERR_INVALID);
  // Sparse: an index out of range on one rank.
  const std::uint64_t idx[2] = {3, me == last ? 5000ull : 7ull};
  const float vals[2] = {1.0f, 2.0f};
  ns_sparse_result* res = nullptr;
  ASSERT_EQ(ns_sparse_allreduce(hier_, 4000, 2, idx, vals, NS_DTYPE_FP32, NS_OP_SUM, nullptr, &res),
            NS_ERR_INVALID);
  ASSERT_EQ(ns_sparse_allreduce(hier_, topo_.host() == 0 ? 4000 : 4001, 2, idx, vals, NS_DTYPE_FP32,
                                NS_OP_SUM, nullptr, &res),
            NS_ERR_INVALID);
  // Still usable.
  ASSERT_EQ(ns_allreduce(hier_, x.data(), y.data(), 4000, NS_DTYPE_FP32, NS_OP_SUM, nullptr), NS_OK)
      << ns_last_error();
  for (float v : y) ASSERT_EQ(v, static_cast<float>(P));
}

// Reproducible mode under random receive delays (up to 200 us per packet on both the host's and
// the leaders' transports): 20 runs, the same bits each time -- the flat tree's with hosts of 2^k
// ranks. The inputs are order-sensitive (checked), so an arrival-order combine would differ.
TEST(CollHierReproducible, RandomDelaysGiveTheSameBitsEveryRun) {
  const int P = world_size(), me = world_rank();
  netsparse::dist::Topology topo = netsparse::dist::Topology::build(MPI_COMM_WORLD);
  const int r = static_cast<int>(topo.ranks_of(topo.host()).size());
  cl::Options o;
  o.timeout_ms = 30000;
  o.packet_bytes = 2048;
  const auto delayed = [&](std::unique_ptr<netsparse::transport::Transport> t, bool across) {
    cl::FaultOptions f;
    f.max_delay_us = 200;
    f.seed = 77 + static_cast<std::uint64_t>(me) * 2 + (across ? 1 : 0);
    return std::unique_ptr<netsparse::transport::Transport>(
        std::make_unique<cl::FaultInjectingTransport>(std::move(t), f));
  };
  auto hier = cl::make_hierarchy(topo, netsparse::transport::TransportKind::kMpi, o, delayed);
  const std::uint64_t count = 6000;
  const cl::Reducer red(DataType::kFp32, ReduceOp::kSum);
  std::vector<Bytes> in;
  for (int k = 0; k < P; ++k)
    in.push_back(make_input(DataType::kFp32, ReduceOp::kSum, count, k, 19, false));
  const Bytes expected = tree_reference(red, in, count);
  ASSERT_NE(expected, right_fold_reference(red, in, count)) << "inputs not order-sensitive";
  Bytes first;
  for (int run = 0; run < 20; ++run) {
    Bytes out(expected.size());
    cl::AllreduceArgs a;
    a.send = in[static_cast<std::size_t>(me)].data();
    a.recv = out.data();
    a.count = count;
    a.dtype = static_cast<int>(DataType::kFp32);
    a.op = static_cast<int>(ReduceOp::kSum);
    a.reproducible = true;
    ASSERT_EQ(hier->allreduce(a), cl::Algorithm::kTree);
    if (run == 0) first = out;
    ASSERT_TRUE(out == first) << "run " << run;
  }
  if ((r & (r - 1)) == 0) {
    EXPECT_TRUE(first == expected);
  }
}

// Non-blocking allreduces through the hierarchy (ns_allreduce_start on a layout of several ranks
// per host): five of different types, lengths and operators started back to back, one of them
// reproducible, tested in reverse order with a blocking call in between; each against the
// sequential reference, the reproducible one bit for bit against the blocking hierarchical call.
// Through the C++ hierarchy alone (no racks): a non-blocking allreduce sends exactly the
// inter-host bytes of the blocking one (the same steps), so it does go through the hosts.
TEST_F(CollHier, NonBlockingGoesThroughTheHostsAndCompletesInAnyOrder) {
  const int P = world_size(), me = world_rank();
  struct Case {
    DataType type;
    ReduceOp op;
    std::uint64_t count;
    bool reproducible;
  };
  const Case cases[] = {{DataType::kFp32, ReduceOp::kSum, 20000, false},
                        {DataType::kInt32, ReduceOp::kMax, 777, false},
                        {DataType::kFp64, ReduceOp::kSum, 6000, true},
                        {DataType::kInt8, ReduceOp::kMin, 0, false},
                        {DataType::kFp32, ReduceOp::kProd, 3001, false}};
  constexpr int kCases = 5;
  std::vector<Bytes> send(kCases), recv(kCases), expected(kCases);
  std::vector<ns_coll_request*> req(kCases, nullptr);
  for (int k = 0; k < kCases; ++k) {
    const Case& c = cases[k];
    std::vector<Bytes> in;
    // Exact values (any combining order gives the reference's bits), but the reproducible case's,
    // spread over magnitudes: it must equal the blocking call's bits, not just the reference.
    for (int r = 0; r < P; ++r)
      in.push_back(make_input(c.type, c.op, c.count, r, 50 + k, !c.reproducible));
    const cl::Reducer red(c.type, c.op);
    expected[static_cast<std::size_t>(k)] = tree_reference(red, in, c.count);
    send[static_cast<std::size_t>(k)] = in[static_cast<std::size_t>(me)];
    recv[static_cast<std::size_t>(k)].assign(expected[static_cast<std::size_t>(k)].size(),
                                             std::byte{0});
    ns_allreduce_params p{};
    if (c.reproducible) p.flags = NS_ALLREDUCE_REPRODUCIBLE;
    ASSERT_EQ(ns_allreduce_start(hier_, send[static_cast<std::size_t>(k)].data(),
                                 recv[static_cast<std::size_t>(k)].data(), c.count,
                                 static_cast<int>(c.type), static_cast<int>(c.op), &p,
                                 &req[static_cast<std::size_t>(k)]),
              NS_OK)
        << ns_last_error();
  }
  // A blocking call while they are outstanding: it completes them first, keeps their results.
  std::vector<float> x(1000, 1.0f), y(1000);
  ASSERT_EQ(ns_allreduce(hier_, x.data(), y.data(), 1000, NS_DTYPE_FP32, NS_OP_SUM, nullptr), NS_OK)
      << ns_last_error();
  for (float v : y) ASSERT_EQ(v, static_cast<float>(P));
  for (int k = kCases - 1; k >= 0; --k) {
    int done = 0;
    for (int spins = 0; !done; ++spins) {
      ASSERT_EQ(ns_coll_test(&req[static_cast<std::size_t>(k)], &done), NS_OK) << ns_last_error();
      ASSERT_LT(spins, 10000000) << "request " << k << " never completed";
    }
    EXPECT_EQ(req[static_cast<std::size_t>(k)], nullptr);
    const Case& c = cases[k];
    if (c.reproducible) {  // the blocking hierarchical call's bits
      Bytes blocking(expected[static_cast<std::size_t>(k)].size());
      ns_allreduce_params p{};
      p.flags = NS_ALLREDUCE_REPRODUCIBLE;
      ASSERT_EQ(ns_allreduce(hier_, send[static_cast<std::size_t>(k)].data(), blocking.data(),
                             c.count, static_cast<int>(c.type), static_cast<int>(c.op), &p),
                NS_OK);
      EXPECT_TRUE(recv[static_cast<std::size_t>(k)] == blocking) << "case " << k;
      continue;
    }
    EXPECT_TRUE(recv[static_cast<std::size_t>(k)] == expected[static_cast<std::size_t>(k)])
        << "case " << k;
  }
  if (racks_) return;
  netsparse::dist::Topology topo = netsparse::dist::Topology::build(MPI_COMM_WORLD);
  cl::Options o;
  o.timeout_ms = 30000;
  o.packet_bytes = 8192;
  auto hier = cl::make_hierarchy(topo, netsparse::transport::TransportKind::kMpi, o);
  const std::uint64_t count = 50000;
  std::vector<float> a(count, 1.0f), b(count), c(count);
  cl::AllreduceArgs args;
  args.send = a.data();
  args.count = count;
  args.dtype = static_cast<int>(DataType::kFp32);
  args.op = static_cast<int>(ReduceOp::kSum);
  args.recv = b.data();
  hier->allreduce(args);
  const std::uint64_t blocking = hier->last_stats().inter_host_bytes;
  const auto upper_total = [&] {
    return hier->leaders() != nullptr ? hier->leaders()->inter_host_bytes_total() : 0;
  };
  const std::uint64_t before = upper_total();
  args.recv = c.data();
  const std::uint32_t id = hier->start_allreduce(args);
  hier->wait(id);
  EXPECT_EQ(upper_total() - before, blocking) << "rank " << me;
  EXPECT_GT(sum_over_ranks(blocking), 0u);
  for (std::uint64_t i = 0; i < count; ++i) ASSERT_EQ(c[i], static_cast<float>(P)) << i;
}

// The racks' switches (issue 39 item 1, Flare's one aggregation per rack): with several racks of
// several hosts, the hierarchical allreduce's leaders reduce to their rack's switch (its first
// host's leader), the switches allreduce between racks and send the result down. Against the
// host level alone ("hosts": the leaders' flat step) and the flat allreduce on the same layout:
// the same results, dense and sparse; only the switches send between racks; the bytes that leave
// the racks at most 1/m of the host level's with m hosts per rack (Flare's point), the inter-host
// bytes no more than the host level's (exact counts, summed over the ranks).
TEST(CollHierRacks, OnlyTheSwitchesSendBetweenRacksAndNoMoreThanTheHostLevel) {
  netsparse::dist::Topology topo = netsparse::dist::Topology::build(MPI_COMM_WORLD);
  ASSERT_GT(topo.nracks(), 1) << "run with NETSPARSE_HOSTS_PER_RACK below the hosts";
  ASSERT_LT(topo.nracks(), topo.nhosts());
  const int me = world_rank(), P = world_size();
  ns_coll* modes[3] = {open_with("flat"), open_with("hosts"), open_with("hierarchical")};
  for (ns_coll* c : modes) ASSERT_NE(c, nullptr);
  ASSERT_EQ(ns_coll_hierarchical(modes[1]), 1);
  ASSERT_EQ(ns_coll_hierarchical(modes[2]), 2);
  int first = topo.host();  // the rack's first host: its leader is the rack's switch
  while (first > 0 && topo.rack_of_host(first - 1) == topo.rack()) --first;
  const bool is_switch = topo.is_leader() && topo.host() == first;
  const char* const names[3] = {"flat", "hosts", "racks"};
  for (std::uint64_t count : {1ull, 5000ull, 300000ull}) {
    std::vector<float> x(count);
    for (std::uint64_t i = 0; i < count; ++i)
      x[i] = static_cast<float>((me * 7 + static_cast<int>(i % 13)) % 5);
    std::vector<float> out[3];
    std::uint64_t rack_bytes[3], host_bytes[3];
    for (int m = 0; m < 3; ++m) {
      out[m].assign(count, -1.0f);
      ASSERT_EQ(
          ns_allreduce(modes[m], x.data(), out[m].data(), count, NS_DTYPE_FP32, NS_OP_SUM, nullptr),
          NS_OK)
          << names[m] << ": " << ns_last_error();
      const std::uint64_t mine = ns_coll_inter_rack_bytes(modes[m]);
      if (m == 2 && !is_switch) {
        EXPECT_EQ(mine, 0u) << "only the racks' switches send between racks";
      }
      rack_bytes[m] = sum_over_ranks(mine);
      host_bytes[m] = sum_over_ranks(ns_coll_inter_host_bytes(modes[m]));
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < P; ++r)
        want += static_cast<float>((r * 7 + static_cast<int>(i % 13)) % 5);
      ASSERT_EQ(out[2][i], want) << "racks, element " << i;
      ASSERT_EQ(out[1][i], want) << "hosts, element " << i;
    }
    const auto m = static_cast<std::uint64_t>(topo.nhosts() / topo.nracks());
    EXPECT_GT(rack_bytes[2], 0u);
    EXPECT_LE(rack_bytes[2] * m, rack_bytes[1]) << "count " << count << ", " << m << " hosts/rack";
    EXPECT_LE(rack_bytes[1], rack_bytes[0]) << "count " << count;
    EXPECT_LE(host_bytes[2], host_bytes[1]) << "count " << count;
    if (me == 0)
      std::printf(
          "%llu fp32: inter-rack bytes flat %llu, hosts %llu, racks %llu; inter-host "
          "bytes flat %llu, hosts %llu, racks %llu\n",
          static_cast<unsigned long long>(count), static_cast<unsigned long long>(rack_bytes[0]),
          static_cast<unsigned long long>(rack_bytes[1]),
          static_cast<unsigned long long>(rack_bytes[2]),
          static_cast<unsigned long long>(host_bytes[0]),
          static_cast<unsigned long long>(host_bytes[1]),
          static_cast<unsigned long long>(host_bytes[2]));
  }
  // Sparse: the same sums, and again only the switches send between racks.
  const std::uint64_t n = 1 << 16;
  std::vector<std::uint64_t> idx;
  std::vector<float> vals;
  for (std::uint64_t i = static_cast<std::uint64_t>(me) % 7; i < n; i += 97) {
    idx.push_back(i);
    vals.push_back(1.0f);
  }
  std::vector<float> dense[2];
  for (int m = 1; m < 3; ++m) {
    ns_sparse_params p{NS_SPARSE_OUTPUT_DENSE, nullptr};
    ns_sparse_result* res = nullptr;
    ASSERT_EQ(ns_sparse_allreduce(modes[m], n, idx.size(), idx.data(), vals.data(), NS_DTYPE_FP32,
                                  NS_OP_SUM, &p, &res),
              NS_OK)
        << names[m] << ": " << ns_last_error();
    Bytes bytes;
    densify_sparse_result(res, n, sizeof(float), NS_SPARSE_OUTPUT_DENSE, bytes);
    ns_sparse_result_free(res);
    dense[m - 1].resize(n);
    std::memcpy(dense[m - 1].data(), bytes.data(), n * sizeof(float));
    if (m == 2 && !is_switch) {
      EXPECT_EQ(ns_coll_inter_rack_bytes(modes[m]), 0u);
    }
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < P; ++r) want += (i % 97 == static_cast<std::uint64_t>(r) % 7) ? 1.0f : 0.0f;
    ASSERT_EQ(dense[1][i], want) << "sparse through the racks, element " << i;
    ASSERT_EQ(dense[0][i], want) << "sparse, host level, element " << i;
  }
  for (ns_coll* c : modes) EXPECT_EQ(ns_coll_close(c), NS_OK) << ns_last_error();
}
