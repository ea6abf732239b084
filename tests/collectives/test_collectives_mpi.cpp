// Collectives on real mpirun processes, through the public C API and C++ wrapper (and, for the
// reproducibility runs, the internal Communicator over the same transport with random receive
// delays injected). Every rank computes every rank's input, so each checks its result against
// the sequential reference itself, byte for byte.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>

#include "coll_test_util.hpp"
#include "collectives/communicator.hpp"
#include "collectives/fault_injection.hpp"
#include "mpi_test_util.hpp"
#include "netsparse/collectives_mpi.h"
#include "sparse_result.hpp"
#include "transport/transport_factory.hpp"

using namespace colltest;
namespace cl = netsparse::collectives;
namespace tr = netsparse::transport;

namespace {

using netsparse::test::world_rank;
using netsparse::test::world_size;

class CollMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_coll_attr attr{};
    attr.comp_mask = NS_COLL_ATTR_TIMEOUT | NS_COLL_ATTR_PACKET;
    attr.timeout_ms = 30000;
    attr.packet_bytes = 8192;  // many blocks at test sizes
    ASSERT_EQ(ns_coll_open_mpi(MPI_COMM_WORLD, &attr, &coll_), NS_OK) << ns_last_error();
  }
  void TearDown() override {
    if (coll_ != nullptr) {
      EXPECT_EQ(ns_coll_close(coll_), NS_OK) << ns_last_error();
    }
  }
  ns_coll* coll_ = nullptr;
};

}  // namespace

TEST_F(CollMpi, EveryTypeOpAndAlgorithmMatchesTheReference) {
  const int P = world_size(), me = world_rank();
  std::uint64_t seed = 1;
  for (int t = 0; t < cl::kDataTypeCount; ++t)
    for (int op = 0; op < 4; ++op)
      for (int algo = 0; algo < cl::kAlgorithmCount; ++algo)
        for (std::uint64_t count : {1ull, 5000ull}) {
          const auto type = static_cast<DataType>(t);
          const cl::Reducer red(type, static_cast<ReduceOp>(op));
          std::vector<Bytes> in;
          ++seed;
          for (int r = 0; r < P; ++r)
            in.push_back(make_input(type, static_cast<ReduceOp>(op), count, r, seed, true));
          const Bytes expected = tree_reference(red, in, count);
          Bytes out(expected.size(), std::byte{0x77});
          ns_allreduce_params p{};
          p.algorithm = algo;
          ASSERT_EQ(ns_allreduce(coll_, in[static_cast<std::size_t>(me)].data(), out.data(), count,
                                 t, op, &p),
                    NS_OK)
              << ns_last_error();
          ASSERT_TRUE(out == expected)
              << cl::to_string(type) << " op " << op << " algo " << algo << " count " << count;
          if (algo != 0) {
            EXPECT_EQ(ns_coll_last_algorithm(coll_), algo);
          }
        }
}

TEST_F(CollMpi, CxxWrapperInPlaceAndUserOperator) {
  netsparse::Collectives c(coll_);
  coll_ = nullptr;  // owned by the wrapper now
  const int P = c.size();
  std::vector<double> v(100000, 1.5);
  c.allreduce(std::span<double>(v), NS_OP_SUM);
  for (double x : v) ASSERT_EQ(x, 1.5 * P);
  EXPECT_GT(c.bytes_sent(), 0u);
  // A non-commutative user operator through the C API: the tree's order, every rank.
  ns_allreduce_params p{};
  p.user_fn = [](void* inout, const void* in, std::size_t n, int, void*) {
    auto* a = static_cast<std::int32_t*>(inout);
    const auto* b = static_cast<const std::int32_t*>(in);
    for (std::size_t i = 0; i < n; ++i)
      a[i] = static_cast<std::int32_t>(3u * static_cast<std::uint32_t>(a[i]) +
                                       static_cast<std::uint32_t>(b[i]));
  };
  p.user_op_id = 7;
  cl::UserOp user;
  user.fn = p.user_fn;
  std::vector<Bytes> in;
  for (int r = 0; r < P; ++r)
    in.push_back(make_input(DataType::kInt32, ReduceOp::kSum, 3000, r, 77, true));
  const Bytes expected =
      tree_reference(cl::Reducer(DataType::kInt32, ReduceOp::kUser, &user), in, 3000);
  Bytes out(expected.size());
  ASSERT_EQ(ns_allreduce(c.get(), in[static_cast<std::size_t>(c.rank())].data(), out.data(), 3000,
                         NS_DTYPE_INT32, NS_OP_USER, &p),
            NS_OK)
      << ns_last_error();
  EXPECT_TRUE(out == expected);
}

TEST_F(CollMpi, MismatchedDatatypeOrOpFailsEveryRankThenWorks) {
  const int me = world_rank();
  std::vector<float> x(4000, 1.0f), y(4000);
  // Rank 1 passes fp64 (reading the same bytes as half as many doubles).
  const int dtype = me == 1 ? NS_DTYPE_FP64 : NS_DTYPE_FP32;
  ASSERT_EQ(ns_allreduce(coll_, x.data(), y.data(), 2000, dtype, NS_OP_SUM, nullptr),
            NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("ranks disagree"), std::string::npos)
      << ns_last_error();
  ASSERT_EQ(ns_allreduce(coll_, x.data(), y.data(), 4000, NS_DTYPE_FP32,
                         me == world_size() - 1 ? NS_OP_MIN : NS_OP_SUM, nullptr),
            NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("ranks disagree"), std::string::npos);
  ASSERT_EQ(ns_allreduce(coll_, x.data(), y.data(), 4000, NS_DTYPE_FP32, NS_OP_SUM, nullptr), NS_OK)
      << ns_last_error();
  for (float v : y) ASSERT_EQ(v, static_cast<float>(world_size()));
  // A bad argument on one rank only: every rank fails alike.
  ASSERT_EQ(ns_allreduce(coll_, x.data(), y.data(), 4000, me == 0 ? 17 : NS_DTYPE_FP32, NS_OP_SUM,
                         nullptr),
            NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("rank 0: unknown datatype"), std::string::npos)
      << ns_last_error();
}

TEST_F(CollMpi, SparseWithHeavyDuplicationEveryByte) {
  const int P = world_size(), me = world_rank();
  const std::uint64_t n = 1 << 18;
  std::uint64_t seed = 500;
  for (std::uint64_t nnz : {0ull, 2600ull, 131072ull})  // ~0 %, 1 %, 50 % of n per rank
    for (int t : {NS_DTYPE_INT16, NS_DTYPE_FP32, NS_DTYPE_FP64})
      for (int output : {NS_SPARSE_OUTPUT_AUTO, NS_SPARSE_OUTPUT_SPARSE, NS_SPARSE_OUTPUT_DENSE}) {
        const auto type = static_cast<DataType>(t);
        std::vector<SparseInput> in;
        ++seed;
        for (int r = 0; r < P; ++r)
          in.push_back(make_sparse(type, n, nnz, 4, r, seed, seed % 2 == 0));
        const Bytes expected = sparse_reference(type, n, in);
        const SparseInput& mine = in[static_cast<std::size_t>(me)];
        // Half of the runs give a dense output buffer (MPI_Allreduce's recvbuf style), filled
        // with garbage first: it is scratch until the result is known.
        Bytes given(n * cl::element_size(type), std::byte{0xab});
        ns_sparse_params p{output, seed % 2 == 0 ? given.data() : nullptr};
        ns_sparse_result* res = nullptr;
        ASSERT_EQ(ns_sparse_allreduce(coll_, n, mine.idx.size(), mine.idx.data(),
                                      mine.values.data(), t, NS_OP_SUM, &p, &res),
                  NS_OK)
            << ns_last_error();
        const std::size_t es = cl::element_size(type);
        Bytes dense;
        densify_sparse_result(res, n, es, output, dense);
        ns_sparse_result_free(res);
        ASSERT_TRUE(dense == expected) << "nnz " << nnz << " dtype " << t << " output " << output;
      }
}

// A communicator over MPI whose receives are delayed at random (up to max_delay_us per packet,
// seeded per rank) in 2 KiB packets: arrival orders vary from run to run.
cl::Communicator delayed_communicator(std::uint32_t max_delay_us, std::uint64_t seed) {
  cl::FaultOptions f;
  f.max_delay_us = max_delay_us;
  f.seed = seed;
  auto t = std::make_unique<cl::FaultInjectingTransport>(
      tr::make_transport(tr::TransportKind::kMpi, MPI_COMM_WORLD), f);
  cl::Options o;
  o.timeout_ms = 30000;
  o.packet_bytes = 2048;
  return cl::Communicator(std::move(t), o);
}

// 100 runs of the reproducible allreduce with random receive delays (up to 300 us per packet):
// every run gives the fixed tree's bits; the inputs are order-sensitive (checked), so a design
// that combined in arrival order would fail here.
TEST(CollMpiReproducible, HundredRunsWithRandomDelaysAreBitwiseIdentical) {
  const int P = world_size(), me = world_rank();
  cl::Communicator c = delayed_communicator(300, 1234 + static_cast<std::uint64_t>(me));
  const std::uint64_t count = 6000;
  const cl::Reducer red(DataType::kFp32, ReduceOp::kSum);
  std::vector<Bytes> in;
  for (int r = 0; r < P; ++r)
    in.push_back(make_input(DataType::kFp32, ReduceOp::kSum, count, r, 9, false));
  const Bytes expected = tree_reference(red, in, count);
  if (P > 2) {
    ASSERT_NE(expected, right_fold_reference(red, in, count)) << "inputs not order-sensitive";
  }
  Bytes out(expected.size());
  for (int run = 0; run < 100; ++run) {
    cl::AllreduceArgs a;
    a.send = in[static_cast<std::size_t>(me)].data();
    a.recv = out.data();
    a.count = count;
    a.dtype = static_cast<int>(DataType::kFp32);
    a.op = static_cast<int>(ReduceOp::kSum);
    a.reproducible = true;
    ASSERT_EQ(c.allreduce(a), cl::Algorithm::kTree);
    ASSERT_TRUE(out == expected) << "run " << run;
  }
}

// The rest of the family through the C API, every datatype and operator, against the
// sequential references: reduce to every root (in place at the root every other time),
// reduce-scatter, broadcast from every root, all-gather (in place every other time); uneven and
// zero lengths.
TEST_F(CollMpi, FamilyEveryTypeAndOpMatchesTheReference) {
  const int P = world_size(), me = world_rank();
  const auto mine = [&](std::size_t r) { return r == static_cast<std::size_t>(me); };
  std::uint64_t seed = 700;
  for (int t = 0; t < cl::kDataTypeCount; ++t)
    for (int op = 0; op < 4; ++op)
      for (std::uint64_t count : {0ull, 1ull, 3001ull}) {
        ++seed;
        const auto type = static_cast<DataType>(t);
        const std::size_t es = cl::element_size(type);
        const cl::Reducer red(type, static_cast<ReduceOp>(op));
        const int root = static_cast<int>(seed % static_cast<std::uint64_t>(P));
        ns_allreduce_params p{};
        p.algorithm = static_cast<int>(seed % cl::kAlgorithmCount);
        // reduce
        std::vector<Bytes> in;
        for (int r = 0; r < P; ++r)
          in.push_back(make_input(type, static_cast<ReduceOp>(op), count, r, seed, true));
        const Bytes expected = count == 0 ? Bytes{} : tree_reference(red, in, count);
        Bytes out(count * es, std::byte{0x77});
        const bool in_place = me == root && seed % 2 == 0;
        if (in_place) out = in[static_cast<std::size_t>(me)];
        ASSERT_EQ(ns_reduce(coll_, in_place ? out.data() : in[std::size_t(me)].data(), out.data(),
                            count, t, op, root, &p),
                  NS_OK)
            << ns_last_error();
        if (me == root) {
          ASSERT_TRUE(out == expected) << "reduce " << t << " op " << op << " count " << count;
        }
        // reduce-scatter: every rank's vector of P * count elements
        std::vector<Bytes> whole;
        for (int r = 0; r < P; ++r)
          whole.push_back(make_input(type, static_cast<ReduceOp>(op), count * P, r, seed, true));
        const Bytes all = count == 0 ? Bytes{} : tree_reference(red, whole, count * P);
        Bytes part(count * es, std::byte{0x77});
        ASSERT_EQ(
            ns_reduce_scatter(coll_, whole[std::size_t(me)].data(), part.data(), count, t, op, &p),
            NS_OK)
            << ns_last_error();
        ASSERT_TRUE(part == Bytes(all.begin() + std::ptrdiff_t(std::size_t(me) * count * es),
                                  all.begin() + std::ptrdiff_t(std::size_t(me + 1) * count * es)))
            << "reduce_scatter " << t << " op " << op << " count " << count;
        // broadcast of the root's input
        Bytes b = mine(std::size_t(root)) ? in[std::size_t(root)] : Bytes(count * es);
        ASSERT_EQ(ns_bcast(coll_, b.data(), count, t, root), NS_OK) << ns_last_error();
        ASSERT_TRUE(b == in[std::size_t(root)]) << "bcast " << t << " count " << count;
        // all-gather of every rank's input
        Bytes gathered(count * es * std::size_t(P), std::byte{0x77}), concat;
        for (const Bytes& x : in) concat.insert(concat.end(), x.begin(), x.end());
        const std::byte* send = in[std::size_t(me)].data();
        if (seed % 2 == 1 && count > 0) {
          std::memcpy(gathered.data() + std::size_t(me) * count * es, send, count * es);
          send = gathered.data() + std::size_t(me) * count * es;
        }
        ASSERT_EQ(ns_allgather(coll_, send, gathered.data(), count, t), NS_OK) << ns_last_error();
        ASSERT_TRUE(gathered == concat) << "allgather " << t << " count " << count;
        ASSERT_EQ(ns_barrier(coll_), NS_OK) << ns_last_error();
      }
}

TEST_F(CollMpi, FamilyCxxWrappersAndMismatchesFailEveryRank) {
  netsparse::Collectives c(coll_);
  coll_ = nullptr;
  const int P = c.size(), me = c.rank();
  std::vector<double> x(10000, 1.0 + me), y(10000, -1.0);
  c.reduce(std::span<const double>(x), std::span<double>(y), P - 1, NS_OP_MAX);
  if (me == P - 1) {
    for (double v : y) ASSERT_EQ(v, static_cast<double>(P));
  }
  std::vector<double> whole(std::size_t(P) * 700, 2.0), part(700);
  c.reduce_scatter(std::span<const double>(whole), std::span<double>(part), NS_OP_SUM,
                   {NS_ALLREDUCE_AUTO, true});
  for (double v : part) ASSERT_EQ(v, 2.0 * P);
  std::vector<std::int32_t> b(999, me == 0 ? 42 : 0);
  c.broadcast(std::span<std::int32_t>(b), 0);
  for (auto v : b) ASSERT_EQ(v, 42);
  std::vector<std::int16_t> mine(5, static_cast<std::int16_t>(me)), all(std::size_t(P) * 5);
  c.allgather(std::span<const std::int16_t>(mine), std::span<std::int16_t>(all));
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<std::int16_t>(i / 5));
  c.barrier();
  // Mismatched roots, counts and operations: NS_ERR_INVALID on every rank, then it works.
  if (P > 1) {
    EXPECT_EQ(ns_bcast(c.get(), b.data(), 999, NS_DTYPE_INT32, me == 1 ? 1 : 0), NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("ranks disagree"), std::string::npos)
        << ns_last_error();
    EXPECT_EQ(ns_reduce(c.get(), x.data(), y.data(), me == 0 ? 10 : 11, NS_DTYPE_FP64, NS_OP_SUM, 0,
                        nullptr),
              NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("ranks disagree"), std::string::npos);
    const ns_status_t s = me == 0
                              ? ns_barrier(c.get())
                              : ns_allgather(c.get(), mine.data(), all.data(), 5, NS_DTYPE_INT16);
    EXPECT_EQ(s, NS_ERR_INVALID);
    EXPECT_NE(std::string(ns_last_error()).find("has barrier"), std::string::npos)
        << ns_last_error();
  }
  EXPECT_EQ(ns_reduce(c.get(), x.data(), y.data(), 10, NS_DTYPE_FP64, NS_OP_SUM, P, nullptr),
            NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("root is not a rank"), std::string::npos)
      << ns_last_error();
  EXPECT_EQ(ns_bcast(nullptr, b.data(), 1, NS_DTYPE_INT32, 0), NS_ERR_INVALID);
  c.barrier();
}

// Eight non-blocking allreduces outstanding at once through the C API, of different sizes and
// datatypes, completed in reverse order (tests polled, then waits); every result the reference.
TEST_F(CollMpi, NonBlockingAllreducesCompleteOutOfOrder) {
  const int P = world_size(), me = world_rank();
  constexpr int kOps = 8;
  std::vector<std::vector<Bytes>> in(kOps);
  std::vector<Bytes> expected(kOps), out(kOps);
  std::vector<ns_coll_request*> req(kOps, nullptr);
  for (int k = 0; k < kOps; ++k) {
    const auto type = static_cast<DataType>(k % cl::kDataTypeCount);
    const auto op = static_cast<ReduceOp>(k % 4);
    const std::uint64_t count = k == 3 ? 0 : 1000 + 7919 * static_cast<std::uint64_t>(k % 3);
    for (int r = 0; r < P; ++r) in[k].push_back(make_input(type, op, count, r, 900 + k, true));
    expected[k] = count == 0 ? Bytes{} : tree_reference(cl::Reducer(type, op), in[k], count);
    out[k].assign(expected[k].size(), std::byte{0x77});
    ASSERT_EQ(ns_allreduce_start(coll_, in[k][std::size_t(me)].data(), out[k].data(), count,
                                 static_cast<int>(type), static_cast<int>(op), nullptr, &req[k]),
              NS_OK)
        << ns_last_error();
  }
  for (int k = kOps - 1; k >= 0; --k) {
    if (k % 2 == 0) {
      ASSERT_EQ(ns_coll_wait(&req[k]), NS_OK) << ns_last_error();
    } else {
      int done = 0;
      while (!done) ASSERT_EQ(ns_coll_test(&req[k], &done), NS_OK) << ns_last_error();
    }
    EXPECT_EQ(req[k], nullptr);
    ASSERT_TRUE(out[k] == expected[k]) << "operation " << k;
  }
  // A mismatch in one outstanding operation: that one fails on every rank, its neighbour not.
  std::vector<float> x(5000, 1.0f), y(5000), z(5000);
  ns_coll_request *bad = nullptr, *good = nullptr;
  ASSERT_EQ(ns_allreduce_start(coll_, x.data(), y.data(), me == P - 1 && P > 1 ? 4999 : 5000,
                               NS_DTYPE_FP32, NS_OP_SUM, nullptr, &bad),
            NS_OK);
  ASSERT_EQ(
      ns_allreduce_start(coll_, x.data(), z.data(), 5000, NS_DTYPE_FP32, NS_OP_SUM, nullptr, &good),
      NS_OK);
  ASSERT_EQ(ns_coll_wait(&good), NS_OK) << ns_last_error();
  for (float v : z) ASSERT_EQ(v, static_cast<float>(P));
  EXPECT_EQ(ns_coll_wait(&bad), P > 1 ? NS_ERR_INVALID : NS_OK) << ns_last_error();
  EXPECT_EQ(ns_coll_wait(&bad), NS_ERR_INVALID);  // freed: not a live request
}

// Eight reproducible allreduces at once, over and over, with random receive delays: every one
// the fixed tree's bits however they interleave.
TEST(CollMpiReproducible, ConcurrentNonBlockingRunsAreBitwiseIdentical) {
  const int P = world_size(), me = world_rank();
  cl::Communicator c = delayed_communicator(200, 4321 + static_cast<std::uint64_t>(me));
  const cl::Reducer red(DataType::kFp32, ReduceOp::kSum);
  constexpr int kOps = 8;
  std::vector<std::vector<Bytes>> in(kOps);
  std::vector<Bytes> expected(kOps), out(kOps);
  for (int k = 0; k < kOps; ++k) {
    const std::uint64_t count = 1500 + 500 * static_cast<std::uint64_t>(k);
    for (int r = 0; r < P; ++r)
      in[k].push_back(make_input(DataType::kFp32, ReduceOp::kSum, count, r, 40 + k, false));
    expected[k] = tree_reference(red, in[k], count);
    out[k].resize(expected[k].size());
  }
  for (int run = 0; run < 10; ++run) {
    std::vector<std::uint32_t> ids;
    for (int k = 0; k < kOps; ++k) {
      cl::AllreduceArgs a;
      a.send = in[k][std::size_t(me)].data();
      a.recv = out[k].data();
      a.count = in[k][0].size() / 4;
      a.dtype = static_cast<int>(DataType::kFp32);
      a.op = static_cast<int>(ReduceOp::kSum);
      a.reproducible = true;
      ids.push_back(c.start_allreduce(a));
    }
    for (int k = (run + me) % kOps, n = 0; n < kOps; ++n, k = (k + 3) % kOps) c.wait(ids[k]);
    for (int k = 0; k < kOps; ++k)
      ASSERT_TRUE(out[k] == expected[k]) << "run " << run << " op " << k;
  }
}

// Closing a communicator with a request outstanding orphans the request: its wait reports
// NS_ERR_STATE and frees it (it never reaches another communicator).
TEST(CollMpiRequests, CloseWithAnOutstandingRequestOrphansIt) {
  ns_coll* c = nullptr;
  ASSERT_EQ(ns_coll_open_mpi(MPI_COMM_WORLD, nullptr, &c), NS_OK) << ns_last_error();
  std::vector<double> x(1000, 1.0), y(1000);
  ns_coll_request* req = nullptr;
  ASSERT_EQ(
      ns_allreduce_start(c, x.data(), y.data(), 1000, NS_DTYPE_FP64, NS_OP_SUM, nullptr, &req),
      NS_OK)
      << ns_last_error();
  ASSERT_EQ(ns_coll_close(c), NS_OK) << ns_last_error();
  EXPECT_EQ(ns_coll_wait(&req), NS_ERR_STATE);
  EXPECT_NE(std::string(ns_last_error()).find("closed"), std::string::npos) << ns_last_error();
  EXPECT_EQ(req, nullptr);
  int done = 0;
  EXPECT_EQ(ns_coll_test(&req, &done), NS_ERR_INVALID);
}

// The non-blocking all-gather (the prefetch) against MPI_Allgather, bit for bit: six at once
// (fp32 and fp64, per-rank counts that are not multiples of a block, zero, one in place) with a
// non-blocking allreduce among them, completed in an order that differs by rank and round
// (polled with test or waited for); random bit patterns (NaNs included) must come back intact.
TEST_F(CollMpi, NonBlockingAllgatherMatchesMpiAllgatherInAnyOrder) {
  const int P = world_size(), me = world_rank();
  constexpr int kOps = 6;
  const std::uint64_t counts[kOps] = {1001, 0, 1, 5003, 2047, 777};
  std::mt19937_64 rng(77 + static_cast<std::uint64_t>(me));
  for (int round = 0; round < 3; ++round) {
    std::vector<Bytes> send(kOps), got(kOps), expected(kOps);
    std::vector<ns_coll_request*> req(kOps, nullptr);
    std::vector<int> dtype(kOps);
    std::vector<float> ones(4000, 1.0f), sum(4000, 0.0f);
    ns_coll_request* allreduce = nullptr;
    for (int k = 0; k < kOps; ++k) {
      dtype[k] = (k + round) % 2 == 0 ? NS_DTYPE_FP32 : NS_DTYPE_FP64;
      const std::size_t es = dtype[k] == NS_DTYPE_FP32 ? 4 : 8;
      const std::size_t bytes = counts[k] * es;
      send[k].resize(bytes);
      for (auto& b : send[k]) b = static_cast<std::byte>(rng());
      expected[k].resize(bytes * std::size_t(P));
      got[k].assign(bytes * std::size_t(P), std::byte{0x5a});
      ASSERT_EQ(MPI_Allgather(send[k].data(), static_cast<int>(bytes), MPI_BYTE, expected[k].data(),
                              static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
                MPI_SUCCESS);
      const bool in_place = k == 4;
      if (in_place) std::memcpy(got[k].data() + bytes * std::size_t(me), send[k].data(), bytes);
      const void* s = in_place ? got[k].data() + bytes * std::size_t(me) : send[k].data();
      ASSERT_EQ(ns_allgather_start(coll_, s, got[k].data(), counts[k], dtype[k], &req[k]), NS_OK)
          << ns_last_error();
      if (k == 2) {
        ASSERT_EQ(ns_allreduce_start(coll_, ones.data(), sum.data(), 4000, NS_DTYPE_FP32, NS_OP_SUM,
                                     nullptr, &allreduce),
                  NS_OK);
      }
    }
    // Completion order: a rotation by rank and round, stepping by 5 (coprime with 6).
    for (int n = 0, k = (me + round) % kOps; n < kOps; ++n, k = (k + 5) % kOps) {
      if ((k + me) % 2 == 0) {
        ASSERT_EQ(ns_coll_wait(&req[k]), NS_OK) << ns_last_error();
      } else {
        int done = 0;
        while (!done) ASSERT_EQ(ns_coll_test(&req[k], &done), NS_OK) << ns_last_error();
      }
      EXPECT_EQ(req[k], nullptr);
      ASSERT_TRUE(got[k] == expected[k]) << "round " << round << " operation " << k;
    }
    ASSERT_EQ(ns_coll_wait(&allreduce), NS_OK) << ns_last_error();
    for (float v : sum) ASSERT_EQ(v, static_cast<float>(P));
  }
}

// Refused arguments of the non-blocking all-gather: a wrong length throws in the C++ wrapper
// before anything collective; a NULL buffer or a bad datatype on one rank, or a count that
// differs, fails that request on every rank (its wait throws), and the communicator works on.
TEST_F(CollMpi, NonBlockingAllgatherBadArgumentsFailEveryRank) {
  netsparse::Collectives c(coll_);
  coll_ = nullptr;
  const int P = c.size(), me = c.rank();
  std::vector<double> mine(100, me), all(std::size_t(P) * 100),
      short_recv(std::size_t(P) * 100 - 1);
  EXPECT_THROW(c.allgather_start(std::span<const double>(mine), std::span<double>(short_recv)),
               netsparse::Error);
  EXPECT_EQ(ns_allgather_start(c.get(), mine.data(), all.data(), 100, NS_DTYPE_FP64, nullptr),
            NS_ERR_INVALID);
  EXPECT_NE(std::string(ns_last_error()).find("req is NULL"), std::string::npos);
  const auto expect_fails = [&](const void* send, void* recv, std::uint64_t count, int dtype,
                                const std::string& why) {
    ns_coll_request* r = nullptr;
    ASSERT_EQ(ns_allgather_start(c.get(), send, recv, count, dtype, &r), NS_OK) << ns_last_error();
    netsparse::CollRequest req(r);
    try {
      req.wait();
      ADD_FAILURE() << "no failure, expected: " << why;
    } catch (const netsparse::Error& e) {
      EXPECT_EQ(e.status(), NS_ERR_INVALID);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  const int last = P - 1;
  expect_fails(me == last ? nullptr : mine.data(), all.data(), 100, NS_DTYPE_FP64,
               "rank " + std::to_string(last) + ": a buffer is NULL");
  expect_fails(mine.data(), all.data(), 100, me == last ? 99 : NS_DTYPE_FP64, "unknown datatype");
  if (P > 1)
    expect_fails(mine.data(), all.data(), me == 0 ? 99 : 100, NS_DTYPE_FP64, "ranks disagree");
  netsparse::CollRequest ok =
      c.allgather_start(std::span<const double>(mine), std::span<double>(all));
  ok.wait();
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<double>(i / 100));
}
