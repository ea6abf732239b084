// Collectives on in-process fabrics (ranks = threads): element operators, the packet decoders,
// and dense / sparse allreduce against sequential references, every byte, with and without
// random delivery delays; agreement failures; a rank that never joins or is killed.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <thread>

#include "coll_test_util.hpp"
#include "collectives/communicator.hpp"
#include "collectives/fault_injection.hpp"
#include "collectives/wire.hpp"
#include "inproc_ranks.hpp"
#include "transport/transport.hpp"

using namespace netsparse::collectives;
using namespace colltest;
namespace tr = netsparse::transport;

namespace {

// One dense allreduce on P ranks; every rank's result must equal `expected` byte for byte.
void check_dense(int P, DataType t, ReduceOp op, Algorithm algo, std::uint64_t count, bool exact,
                 bool reproducible, std::uint32_t delay_us, std::uint64_t seed, bool in_place,
                 const UserOp* user = nullptr) {
  const Reducer red(t, op, user);
  std::vector<Bytes> in;
  for (int r = 0; r < P; ++r) in.push_back(make_input(t, op, count, r, seed, exact));
  const Bytes expected = count == 0 ? Bytes{} : tree_reference(red, in, count);
  std::vector<Bytes> got(static_cast<std::size_t>(P));
  const auto outcome = run_ranks(
      P,
      [&](int r, Communicator& c) {
        Bytes& g = got[static_cast<std::size_t>(r)];
        g = in_place ? in[static_cast<std::size_t>(r)]
                     : Bytes(count * element_size(t), std::byte{0x5a});
        AllreduceArgs a;
        a.send = in_place ? g.data() : in[static_cast<std::size_t>(r)].data();
        a.recv = g.data();
        a.count = count;
        a.dtype = static_cast<int>(t);
        a.op = static_cast<int>(op);
        a.user = user;
        a.algorithm = static_cast<int>(algo);
        a.reproducible = reproducible;
        c.allreduce(a);
      },
      delay_us, seed);
  expect_all_ok(outcome);
  for (int r = 0; r < P; ++r)
    ASSERT_TRUE(got[static_cast<std::size_t>(r)] == expected)
        << "rank " << r << " P " << P << " " << to_string(t) << " " << to_string(op) << " "
        << to_string(algo) << " count " << count;
}

// A dense allreduce of count elements (every other argument at its default: no user op, the
// automatic algorithm, not reproducible).
AllreduceArgs dense_args(const void* send, void* recv, std::uint64_t count, DataType dtype,
                         ReduceOp op) {
  AllreduceArgs a;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = static_cast<int>(dtype);
  a.op = static_cast<int>(op);
  return a;
}

}  // namespace

TEST(ReduceOps, HalfConversionKnownValues) {
  EXPECT_EQ(double_to_half(1.0), 0x3c00);
  EXPECT_EQ(double_to_half(-2.0), 0xc000);
  EXPECT_EQ(double_to_half(65504.0), 0x7bff);
  EXPECT_EQ(double_to_half(65519.99), 0x7bff);
  EXPECT_EQ(double_to_half(65520.0), 0x7c00);  // halfway to 2^16: ties to even = inf
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(double_to_half(std::ldexp(0.5, -24)), 0x0000);  // tie to even (0)
  EXPECT_EQ(double_to_half(std::ldexp(1.5, -24)), 0x0002);  // tie to even (2)
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -14)), 0x0400);
  EXPECT_EQ(double_to_half(1.0 + std::ldexp(1.0, -11)), 0x3c00);  // tie: stays even
  EXPECT_EQ(double_to_half(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);
  EXPECT_EQ(double_to_half(-0.0), 0x8000);
  EXPECT_EQ(double_to_half(std::numeric_limits<double>::quiet_NaN()), 0x7e00);
  EXPECT_EQ(double_to_half(-std::numeric_limits<double>::infinity()), 0xfc00);
}

TEST(ReduceOps, HalfRoundTripsEveryValue) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const double d = half_to_double(static_cast<std::uint16_t>(h));
    if (std::isnan(d)) continue;
    ASSERT_EQ(double_to_half(d), h) << std::hex << h;
  }
}

TEST(ReduceOps, MinMaxAreSymmetricBitForBit) {
  const Reducer mn(DataType::kFp32, ReduceOp::kMin), mx(DataType::kFp32, ReduceOp::kMax);
  const float pairs[][2] = {
      {0.0f, -0.0f}, {1.0f, std::numeric_limits<float>::quiet_NaN()}, {-3.0f, 2.0f}};
  for (const auto& p : pairs) {
    float ab, ba, xab, xba;
    mn.combine(&ab, &p[0], &p[1], 1);
    mn.combine(&ba, &p[1], &p[0], 1);
    mx.combine(&xab, &p[0], &p[1], 1);
    mx.combine(&xba, &p[1], &p[0], 1);
    EXPECT_EQ(std::memcmp(&ab, &ba, 4), 0);
    EXPECT_EQ(std::memcmp(&xab, &xba, 4), 0);
  }
  float r;
  mn.combine(&r, &pairs[0][0], &pairs[0][1], 1);
  EXPECT_TRUE(std::signbit(r));
  mx.combine(&r, &pairs[0][0], &pairs[0][1], 1);
  EXPECT_FALSE(std::signbit(r));
}

TEST(ReduceOps, IntegersWrapAndHalfSumsRoundOnce) {
  const std::int8_t a = 120, b = 10;
  std::int8_t s;
  Reducer(DataType::kInt8, ReduceOp::kSum).combine(&s, &a, &b, 1);
  EXPECT_EQ(s, static_cast<std::int8_t>(-126));
  const std::uint16_t x = double_to_half(2048.0), y = double_to_half(1.0), z = double_to_half(3.0);
  std::uint16_t h;
  Reducer(DataType::kFp16, ReduceOp::kSum).combine(&h, &x, &y, 1);
  EXPECT_EQ(half_to_double(h), 2048.0);  // 2049 ties to even: 2048
  Reducer(DataType::kFp16, ReduceOp::kSum).combine(&h, &x, &z, 1);
  EXPECT_EQ(half_to_double(h), 2052.0);  // 2051 ties to even: 2052
}

TEST(Algorithm, FlareSelectionBySize) {
  EXPECT_EQ(choose_algorithm(64u << 10, false), Algorithm::kTree);
  EXPECT_EQ(choose_algorithm(128u << 10, false), Algorithm::kTree);
  EXPECT_EQ(choose_algorithm((128u << 10) + 1, false), Algorithm::kMultiBuffer2);
  EXPECT_EQ(choose_algorithm((256u << 10) + 1, false), Algorithm::kMultiBuffer4);
  EXPECT_EQ(choose_algorithm((512u << 10) + 1, false), Algorithm::kSingleBuffer);
  EXPECT_EQ(choose_algorithm(64u << 20, true), Algorithm::kTree);
}

TEST(SparseWire, DecoderChecksEverything) {
  wire::SparseLayout L;
  L.n = 1000;
  L.span = 300;
  L.blocks = 4;  // the last block holds 100
  L.value_bytes = 4;
  const std::uint32_t offs[3] = {0, 99, 299};
  const float vals[3] = {1, 2, 3};
  std::vector<std::byte> p(wire::kHeaderBytes + 3 * 8);
  wire::Header h{wire::Kind::kSparseContribution, wire::kFlagLast, 7, 1, 3, 0, 1, 0};
  ASSERT_EQ(wire::encode_sparse(h, offs, reinterpret_cast<const std::byte*>(vals), 4, p.data()),
            p.size());
  wire::SparseView v;
  ASSERT_EQ(wire::decode_sparse(p, L, &v), wire::DecodeError::kOk);
  EXPECT_EQ(v.offset(2), 299u);
  EXPECT_EQ(wire::decode_sparse(std::span(p).first(p.size() - 1), L, &v),
            wire::DecodeError::kTruncated);
  h.block = 3;  // 299 is outside the last block (100 long)
  wire::encode_sparse(h, offs, reinterpret_cast<const std::byte*>(vals), 4, p.data());
  EXPECT_EQ(wire::decode_sparse(p, L, &v), wire::DecodeError::kBadOffset);
  h.block = 4;
  wire::encode_sparse(h, offs, reinterpret_cast<const std::byte*>(vals), 4, p.data());
  EXPECT_EQ(wire::decode_sparse(p, L, &v), wire::DecodeError::kBadBlock);
  h.block = 1;
  h.packet_count = 2;  // the last packet of a block must be packet_count - 1
  wire::encode_sparse(h, offs, reinterpret_cast<const std::byte*>(vals), 4, p.data());
  EXPECT_EQ(wire::decode_sparse(p, L, &v), wire::DecodeError::kBadPacketSeq);
  // Dense encoding: [first, first + count) within the block; an empty block is header only.
  wire::Header d{wire::Kind::kSparseResult, wire::kFlagLast | wire::kFlagDense, 7, 3, 3, 0, 1, 98};
  std::vector<std::byte> q(wire::kHeaderBytes + 12);
  wire::encode_sparse_dense(d, reinterpret_cast<const std::byte*>(vals), 4, q.data());
  EXPECT_EQ(wire::decode_sparse(q, L, &v), wire::DecodeError::kBadCount);
  wire::Header e{wire::Kind::kSparseContribution, wire::kFlagLast, 7, 2, 0, 0, 1, 0};
  std::vector<std::byte> empty(wire::kHeaderBytes);
  wire::encode_header(e, empty.data());
  EXPECT_EQ(wire::decode_sparse(empty, L, &v), wire::DecodeError::kOk);
  empty[2] = std::byte{1};  // reserved
  EXPECT_EQ(wire::decode_sparse(empty, L, &v), wire::DecodeError::kUnknownKind);
}

TEST(DenseAllreduce, EveryTypeOpAndDesignMatchesTheReference) {
  const DataType types[] = {DataType::kInt8, DataType::kInt16, DataType::kInt32,
                            DataType::kFp16, DataType::kFp32,  DataType::kFp64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax};
  const Algorithm algos[] = {Algorithm::kAuto, Algorithm::kSingleBuffer, Algorithm::kMultiBuffer2,
                             Algorithm::kMultiBuffer4, Algorithm::kTree};
  std::uint64_t seed = 1;
  for (int P : {2, 3, 4})
    for (DataType t : types)
      for (ReduceOp op : ops)
        for (Algorithm a : algos)
          check_dense(P, t, op, a, 700, /*exact=*/true, false, 0, ++seed, false);
}

TEST(DenseAllreduce, EdgeSizesAndRankCounts) {
  for (int P : {1, 2, 5, 7})
    for (std::uint64_t count : {0ull, 1ull, 3ull, 119ull, 120ull, 1201ull})
      for (Algorithm a : {Algorithm::kSingleBuffer, Algorithm::kMultiBuffer4, Algorithm::kTree})
        check_dense(P, DataType::kFp32, ReduceOp::kSum, a, count, true, false, 0, count + 3, false);
}

TEST(DenseAllreduce, InPlace) {
  for (Algorithm a : {Algorithm::kSingleBuffer, Algorithm::kMultiBuffer2, Algorithm::kTree})
    check_dense(3, DataType::kInt32, ReduceOp::kSum, a, 1000, true, false, 0, 11, true);
  check_dense(4, DataType::kFp64, ReduceOp::kSum, Algorithm::kTree, 1000, false, true, 0, 12, true);
}

// The tree gives the fixed-order bits whatever the timing; the data is order-sensitive (another
// order gives other bits), so this can fail.
TEST(DenseAllreduce, TreeIsBitwiseReproducibleUnderRandomDelays) {
  for (DataType t : {DataType::kFp16, DataType::kFp32, DataType::kFp64}) {
    const int P = 4;
    const std::uint64_t count = 900;
    const Reducer red(t, ReduceOp::kSum);
    std::vector<Bytes> in;
    for (int r = 0; r < P; ++r) in.push_back(make_input(t, ReduceOp::kSum, count, r, 5, false));
    ASSERT_NE(tree_reference(red, in, count), right_fold_reference(red, in, count))
        << "inputs not order-sensitive";
    for (int run = 0; run < 8; ++run)
      check_dense(P, t, ReduceOp::kSum, Algorithm::kAuto, count, false, true, 300, 5, false);
  }
}

TEST(DenseAllreduce, NonCommutativeUserOperatorKeepsTheTreeOrder) {
  // inout = 3 * inout + in (wrapping): the order of the operands shows in the result.
  UserOp user;
  user.fn = [](void* inout, const void* in, std::size_t n, int, void*) {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t a, b;
      std::memcpy(&a, static_cast<char*>(inout) + 4 * i, 4);
      std::memcpy(&b, static_cast<const char*>(in) + 4 * i, 4);
      a = 3 * a + b;
      std::memcpy(static_cast<char*>(inout) + 4 * i, &a, 4);
    }
  };
  user.id = 42;
  for (int P : {2, 3, 4, 5})
    check_dense(P, DataType::kInt32, ReduceOp::kUser, Algorithm::kAuto, 500, true, false, 200,
                static_cast<std::uint64_t>(P), false, &user);
  // An arrival-order design with a non-commutative operator is refused, on every rank.
  const auto o = run_ranks(3, [&](int, Communicator& c) {
    std::int32_t x[4] = {1, 2, 3, 4}, y[4];
    AllreduceArgs a = dense_args(x, y, 4, DataType::kInt32, ReduceOp::kUser);
    a.user = &user;
    a.algorithm = static_cast<int>(Algorithm::kSingleBuffer);
    c.allreduce(a);
  });
  for (const auto& r : o) {
    EXPECT_TRUE(r.threw);
    EXPECT_EQ(r.failure, Failure::kInvalid) << r.what;
  }
}

TEST(DenseAllreduce, MismatchAndBadArgumentsFailEveryRankThenItWorksAgain) {
  const auto o = run_ranks(4, [](int r, Communicator& c) {
    std::vector<float> x(100, 1.0f), y(100);
    AllreduceArgs a =
        dense_args(x.data(), y.data(), r == 2 ? 99u : 100u, DataType::kFp32, ReduceOp::kSum);
    const auto call = [&] { c.allreduce(a); };
    expect_failure(call, Failure::kMismatch, "rank 2 has allreduce, count 99", "count mismatch");
    a.count = 100;
    a.op = r == 1 ? static_cast<int>(ReduceOp::kMax) : static_cast<int>(ReduceOp::kSum);
    expect_failure(call, Failure::kMismatch, "", "op mismatch");
    a.op = static_cast<int>(ReduceOp::kSum);
    a.recv = r == 3 ? nullptr : y.data();
    expect_failure(call, Failure::kInvalid, "rank 3: a buffer is NULL", "NULL buffer");
    a.recv = y.data();
    c.allreduce(a);  // the communicator is still usable
    for (float v : y)
      if (v != 4.0f) throw std::runtime_error("wrong sum after the failures");
  });
  expect_all_ok(o);
}

TEST(DenseAllreduce, RankThatNeverJoinsTimesOutAndBreaksTheCommunicator) {
  const auto o = run_ranks(
      3,
      [](int r, Communicator& c) {
        if (r == 2) return;  // never calls
        std::vector<double> x(5000, 1.0), y(5000);
        AllreduceArgs a = dense_args(x.data(), y.data(), 5000, DataType::kFp64, ReduceOp::kSum);
        try {
          c.allreduce(a);
        } catch (const CollectiveError& e) {
          if (e.failure() != Failure::kTimeout) throw;
          try {
            c.allreduce(a);
          } catch (const CollectiveError& e2) {
            if (e2.failure() == Failure::kBroken) throw std::runtime_error("expected");
          }
        }
      },
      0, 1, /*timeout_ms=*/300);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(o[static_cast<std::size_t>(r)].what, "expected");
  EXPECT_FALSE(o[2].threw);
}

TEST(DenseAllreduce, ReportedDeadPeerFailsTheOthersQuickly) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto o = run_ranks(
      3,
      [&](int r, Communicator& c) {
        if (r == 2) return;
        std::vector<float> x(3000, 1.0f), y(3000);
        AllreduceArgs a = dense_args(x.data(), y.data(), 3000, DataType::kFp32, ReduceOp::kSum);
        c.allreduce(a);
      },
      0, 1, /*timeout_ms=*/30000, 512,
      [&](tr::InprocFabric& f) { f.kill(2, tr::FailureVisibility::kReported); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(o[static_cast<std::size_t>(r)].threw);
    EXPECT_EQ(o[static_cast<std::size_t>(r)].failure, Failure::kPeerFailed)
        << o[static_cast<std::size_t>(r)].what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

namespace {
// Sorted input without its repeats (the first value of each index kept): strictly ascending.
SparseInput without_repeats(const SparseInput& s, std::size_t es) {
  SparseInput d;
  for (std::size_t k = 0; k < s.idx.size(); ++k) {
    if (k > 0 && s.idx[k] == s.idx[k - 1]) continue;
    d.idx.push_back(s.idx[k]);
    d.values.insert(d.values.end(), s.values.begin() + static_cast<std::ptrdiff_t>(k * es),
                    s.values.begin() + static_cast<std::ptrdiff_t>((k + 1) * es));
  }
  return d;
}

// distinct: sorted input made strictly ascending on every rank but those in `repeats_on`
// (a bit per rank), which keep their repeats.
void check_sparse(int P, DataType t, std::uint64_t n, std::uint64_t nnz, int dup, bool sorted,
                  SparseOutput output, std::uint32_t delay_us, std::uint64_t seed,
                  std::size_t packet_bytes = 512, bool distinct = false, unsigned repeats_on = 0) {
  std::vector<SparseInput> in;
  for (int r = 0; r < P; ++r) {
    in.push_back(make_sparse(t, n, nnz, dup, r, seed, sorted));
    if (distinct && sorted && ((repeats_on >> r) & 1u) == 0)
      in.back() = without_repeats(in.back(), element_size(t));
  }
  const Bytes expected = sparse_reference(t, n, in);
  const std::size_t es = element_size(t);
  std::vector<SparseResult> got(static_cast<std::size_t>(P));
  // Every other seed, a caller-given dense output full of garbage (scratch until the end).
  std::vector<Bytes> given(static_cast<std::size_t>(P), Bytes(n * es, std::byte{0xcd}));
  const auto o = run_ranks(
      P,
      [&](int r, Communicator& c) {
        const SparseInput& s = in[static_cast<std::size_t>(r)];
        SparseArgs a;
        a.n = n;
        a.nnz = s.idx.size();
        a.idx = s.idx.data();
        a.values = s.values.data();
        a.dtype = static_cast<int>(t);
        a.output = output;
        if (seed % 2 == 0) a.dense_out = given[static_cast<std::size_t>(r)].data();
        got[static_cast<std::size_t>(r)] = c.sparse_allreduce(a);
      },
      delay_us, seed, 20000, packet_bytes);
  expect_all_ok(o);
  for (int r = 0; r < P; ++r) {
    const SparseResult& g = got[static_cast<std::size_t>(r)];
    if (output == SparseOutput::kDense) {
      ASSERT_TRUE(g.dense);
    }
    if (output == SparseOutput::kSparse) {
      ASSERT_FALSE(g.dense);
    }
    Bytes dense(n * es);
    if (g.dense) {
      if (g.dense_external == nullptr) {
        ASSERT_EQ(g.values.size(), n * es);
      }
      if (n) std::memcpy(dense.data(), g.data(), n * es);
    } else {
      ASSERT_EQ(g.values.size(), g.indices.size() * es);
      for (std::size_t k = 0; k < g.indices.size(); ++k) {
        ASSERT_LT(g.indices[k], n);
        if (k > 0) {
          ASSERT_LT(g.indices[k - 1], g.indices[k]) << "indices not ascending";
        }
        std::memcpy(dense.data() + g.indices[k] * es, g.data() + k * es, es);
      }
    }
    ASSERT_TRUE(dense == expected)
        << "rank " << r << " P " << P << " " << to_string(t) << " n " << n << " nnz " << nnz;
  }
}
}  // namespace

// Strictly ascending input: the leaf sends its entries as they are and the root merges sorted
// runs (or, once a run is not ascending or a block turns dense, falls back to its accumulator):
// sparse and dense results, blocks filling up mid-way, arrival in random order, one rank with
// repeats among ascending ones.
TEST(SparseAllreduce, AscendingInputMergedAtTheRootMatchesTheReference) {
  std::uint64_t seed = 700;
  for (int P : {1, 2, 3, 5})
    for (DataType t : {DataType::kFp32, DataType::kInt32, DataType::kFp64})
      for (std::uint64_t nnz : {40ull, 600ull, 3000ull}) {
        check_sparse(P, t, 5000, nnz, 1, true, SparseOutput::kAuto, 30, seed++, 512, true);
        check_sparse(P, t, 5000, nnz, 1, true, SparseOutput::kSparse, 0, seed++, 512, true);
        if (P > 1)
          check_sparse(P, t, 5000, nnz, 1, true, SparseOutput::kAuto, 30, seed++, 512, true,
                       1u << (P - 1));
      }
}

TEST(SparseAllreduce, EveryTypeWithHeavyDuplicationMatchesTheReference) {
  const DataType types[] = {DataType::kInt8, DataType::kInt16, DataType::kInt32,
                            DataType::kFp16, DataType::kFp32,  DataType::kFp64};
  std::uint64_t seed = 100;
  for (int P : {1, 2, 3, 4})
    for (DataType t : types)
      for (bool sorted : {true, false})
        check_sparse(P, t, 20000, 600, 8, sorted, SparseOutput::kAuto, 0, ++seed);
}

TEST(SparseAllreduce, DensitiesOutputsAndDelays) {
  std::uint64_t seed = 200;
  for (std::uint64_t nnz : {0ull, 1ull, 50ull, 2000ull, 15000ull, 60000ull})
    for (SparseOutput out : {SparseOutput::kAuto, SparseOutput::kSparse, SparseOutput::kDense})
      check_sparse(3, DataType::kFp32, 30000, nnz, 2, nnz % 2 == 0, out, 100, ++seed);
  check_sparse(4, DataType::kInt32, 1, 10, 1, false, SparseOutput::kAuto, 0, 7);
  check_sparse(2, DataType::kFp64, 0, 0, 1, true, SparseOutput::kAuto, 0, 8);
  // Every entry the same index: the hash table's single slot, split over many packets.
  check_sparse(3, DataType::kInt32, 1000, 3000, 3000, false, SparseOutput::kSparse, 0, 9);
}

TEST(SparseAllreduce, OutOfRangeIndexAndWrongOpFailEveryRank) {
  const auto o = run_ranks(3, [](int r, Communicator& c) {
    std::vector<std::uint64_t> idx = {1, 2, r == 1 ? 100u : 3u};
    std::vector<float> v = {1, 2, 3};
    SparseArgs a;
    a.n = 100;
    a.nnz = 3;
    a.idx = idx.data();
    a.values = v.data();
    const auto call = [&] { c.sparse_allreduce(a); };
    expect_failure(call, Failure::kInvalid, "rank 1: an index is >= n", "out-of-range index");
    idx[2] = 3;
    a.op = static_cast<int>(ReduceOp::kMax);
    expect_failure(call, Failure::kInvalid, "", "max (sparse allreduce sums only)");
    a.op = static_cast<int>(ReduceOp::kSum);
    const SparseResult res = c.sparse_allreduce(a);
    if (res.dense || std::vector<std::uint64_t>(res.indices.begin(), res.indices.end()) !=
                         std::vector<std::uint64_t>{1, 2, 3})
      throw std::runtime_error("wrong result after the failures");
  });
  expect_all_ok(o);
}
