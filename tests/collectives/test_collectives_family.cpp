// The dense family beyond allreduce (reduce, reduce-scatter, broadcast, all-gather, barrier) on
// in-process fabrics (ranks = threads), every byte against sequential references: every
// datatype and operator, 1 to 5 ranks, uneven and zero lengths, in place, random delivery
// delays; agreement failures on every rank; ranks that never join or die.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "coll_test_util.hpp"
#include "collectives/communicator.hpp"
#include "inproc_ranks.hpp"

using namespace netsparse::collectives;
using namespace colltest;

namespace {

AllreduceArgs args(const void* send, void* recv, std::uint64_t count, DataType t, ReduceOp op,
                   Algorithm algo = Algorithm::kAuto, int root = 0) {
  AllreduceArgs a;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = static_cast<int>(t);
  a.op = static_cast<int>(op);
  a.algorithm = static_cast<int>(algo);
  a.root = root;
  return a;
}

// A reduce to `root` of count elements; the root's recv must equal the tree's reduction byte for
// byte, the other ranks' recv (given, garbage) must stay untouched.
void check_reduce(int P, DataType t, ReduceOp op, Algorithm algo, std::uint64_t count, int root,
                  bool exact, bool reproducible, std::uint32_t delay_us, std::uint64_t seed,
                  bool in_place) {
  const Reducer red(t, op);
  std::vector<Bytes> in;
  for (int r = 0; r < P; ++r) in.push_back(make_input(t, op, count, r, seed, exact));
  const Bytes expected = count == 0 ? Bytes{} : tree_reference(red, in, count);
  const Bytes garbage(count * element_size(t), std::byte{0x5a});
  std::vector<Bytes> got(static_cast<std::size_t>(P));
  const auto o = run_ranks(
      P,
      [&](int r, Communicator& c) {
        Bytes& g = got[static_cast<std::size_t>(r)];
        g = in_place && r == root ? in[static_cast<std::size_t>(r)] : garbage;
        AllreduceArgs a = args(in_place && r == root ? g.data() : in[std::size_t(r)].data(),
                               g.data(), count, t, op, algo, root);
        a.reproducible = reproducible;
        c.reduce(a);
      },
      delay_us, seed);
  expect_all_ok(o);
  for (int r = 0; r < P; ++r)
    ASSERT_TRUE(got[static_cast<std::size_t>(r)] == (r == root ? expected : garbage))
        << "rank " << r << " root " << root << " P " << P << " " << to_string(t) << " "
        << to_string(op) << " " << to_string(algo) << " count " << count;
}

// A reduce-scatter of count elements per rank: rank r's recv = elements [r count, (r+1) count)
// of the tree's reduction of the P vectors of P count elements.
void check_reduce_scatter(int P, DataType t, ReduceOp op, Algorithm algo, std::uint64_t count,
                          bool exact, bool reproducible, std::uint32_t delay_us, std::uint64_t seed,
                          bool in_place) {
  const Reducer red(t, op);
  const std::size_t es = element_size(t);
  const std::uint64_t whole = count * static_cast<std::uint64_t>(P);
  std::vector<Bytes> in;
  for (int r = 0; r < P; ++r) in.push_back(make_input(t, op, whole, r, seed, exact));
  const Bytes expected = whole == 0 ? Bytes{} : tree_reference(red, in, whole);
  std::vector<Bytes> got(static_cast<std::size_t>(P));
  const auto o = run_ranks(
      P,
      [&](int r, Communicator& c) {
        Bytes& g = got[static_cast<std::size_t>(r)];
        Bytes own = in[static_cast<std::size_t>(r)];  // in place: the result replaces own part
        g.assign(count * es, std::byte{0x5a});
        std::byte* recv = in_place ? own.data() + std::size_t(r) * count * es : g.data();
        AllreduceArgs a = args(own.data(), recv, count, t, op, algo);
        a.reproducible = reproducible;
        c.reduce_scatter(a);
        if (in_place && count > 0) std::memcpy(g.data(), recv, count * es);
      },
      delay_us, seed);
  expect_all_ok(o);
  for (int r = 0; r < P; ++r) {
    const Bytes want(
        expected.begin() + static_cast<std::ptrdiff_t>(std::size_t(r) * count * es),
        expected.begin() + static_cast<std::ptrdiff_t>(std::size_t(r + 1) * count * es));
    ASSERT_TRUE(got[static_cast<std::size_t>(r)] == want)
        << "rank " << r << " P " << P << " " << to_string(t) << " " << to_string(op) << " "
        << to_string(algo) << " count " << count;
  }
}

void check_broadcast(int P, DataType t, std::uint64_t count, int root, std::uint32_t delay_us,
                     std::uint64_t seed) {
  const Bytes data = make_input(t, ReduceOp::kSum, count, root, seed, false);
  std::vector<Bytes> got(static_cast<std::size_t>(P));
  const auto o = run_ranks(
      P,
      [&](int r, Communicator& c) {
        Bytes& g = got[static_cast<std::size_t>(r)];
        g = r == root ? data : Bytes(data.size(), std::byte{0x5a});
        c.broadcast(g.data(), count, static_cast<int>(t), root);
      },
      delay_us, seed);
  expect_all_ok(o);
  for (int r = 0; r < P; ++r)
    ASSERT_TRUE(got[static_cast<std::size_t>(r)] == data)
        << "rank " << r << " root " << root << " P " << P << " count " << count;
}

void check_allgather(int P, DataType t, std::uint64_t count, std::uint32_t delay_us,
                     std::uint64_t seed, bool in_place) {
  const std::size_t es = element_size(t);
  std::vector<Bytes> in;
  Bytes expected;
  for (int r = 0; r < P; ++r) {
    in.push_back(make_input(t, ReduceOp::kSum, count, r, seed, false));
    expected.insert(expected.end(), in.back().begin(), in.back().end());
  }
  std::vector<Bytes> got(static_cast<std::size_t>(P));
  const auto o = run_ranks(
      P,
      [&](int r, Communicator& c) {
        Bytes& g = got[static_cast<std::size_t>(r)];
        g.assign(expected.size(), std::byte{0x5a});
        const std::byte* send = in[static_cast<std::size_t>(r)].data();
        if (in_place) {
          if (count > 0) std::memcpy(g.data() + std::size_t(r) * count * es, send, count * es);
          send = g.data() + std::size_t(r) * count * es;
        }
        c.allgather(send, g.data(), count, static_cast<int>(t));
      },
      delay_us, seed);
  expect_all_ok(o);
  for (int r = 0; r < P; ++r)
    ASSERT_TRUE(got[static_cast<std::size_t>(r)] == expected)
        << "rank " << r << " P " << P << " " << to_string(t) << " count " << count;
}

}  // namespace

// Exact inputs: every design gives the tree's bits; 1 to 5 ranks, uneven lengths (777 elements
// in blocks of 60 to 480), one element, none.
TEST(Reduce, EveryTypeOpDesignAndRootMatchesTheReference) {
  std::uint64_t seed = 1;
  for (int P : {1, 2, 3, 5})
    for (int t = 0; t < kDataTypeCount; ++t)
      for (int op = 0; op < 4; ++op) {
        ++seed;
        const auto algo = static_cast<Algorithm>(seed % kAlgorithmCount);
        for (std::uint64_t count : {0ull, 1ull, 777ull})
          check_reduce(P, static_cast<DataType>(t), static_cast<ReduceOp>(op), algo, count,
                       static_cast<int>(seed % static_cast<std::uint64_t>(P)), true, false, 0, seed,
                       false);
      }
}

TEST(Reduce, InPlaceAtTheRootAndFourRanksWithDelays) {
  for (int root : {0, 3})
    for (int algo = 0; algo < kAlgorithmCount; ++algo)
      check_reduce(4, DataType::kFp64, ReduceOp::kSum, static_cast<Algorithm>(algo), 3001, root,
                   true, false, 100, static_cast<std::uint64_t>(7 + algo), true);
}

// Order-sensitive inputs, random delays: the reproducible reduce gives the fixed tree's bits.
TEST(Reduce, ReproducibleIsBitwiseIdenticalUnderRandomDelays) {
  const Reducer red(DataType::kFp32, ReduceOp::kSum);
  std::vector<Bytes> in;
  for (int r = 0; r < 5; ++r)
    in.push_back(make_input(DataType::kFp32, ReduceOp::kSum, 900, r, 3, false));
  ASSERT_NE(tree_reference(red, in, 900), right_fold_reference(red, in, 900));
  for (std::uint64_t seed = 1; seed <= 6; ++seed)
    check_reduce(5, DataType::kFp32, ReduceOp::kSum, Algorithm::kAuto, 900, 2, false, true, 300,
                 seed, false);
}

TEST(ReduceScatter, EveryTypeOpAndDesignMatchesTheReference) {
  std::uint64_t seed = 100;
  for (int P : {1, 2, 3, 5})
    for (int t = 0; t < kDataTypeCount; ++t)
      for (int op = 0; op < 4; ++op) {
        ++seed;
        const auto algo = static_cast<Algorithm>(seed % kAlgorithmCount);
        for (std::uint64_t count : {0ull, 1ull, 301ull})
          check_reduce_scatter(P, static_cast<DataType>(t), static_cast<ReduceOp>(op), algo, count,
                               true, false, 0, seed, seed % 2 == 0);
      }
}

TEST(ReduceScatter, ReproducibleIsBitwiseIdenticalUnderRandomDelays) {
  for (int P : {3, 4, 5})
    check_reduce_scatter(P, DataType::kFp64, ReduceOp::kSum, Algorithm::kAuto, 401, false, true,
                         300, static_cast<std::uint64_t>(P), P == 4);
}

TEST(Broadcast, EveryTypeRootAndLengthWithAndWithoutDelays) {
  std::uint64_t seed = 200;
  for (int P : {1, 2, 3, 4, 5})
    for (int t = 0; t < kDataTypeCount; ++t)
      for (std::uint64_t count : {0ull, 1ull, 1001ull}) {
        ++seed;
        check_broadcast(P, static_cast<DataType>(t), count,
                        static_cast<int>(seed % static_cast<std::uint64_t>(P)),
                        seed % 3 == 0 ? 100 : 0, seed);
      }
}

TEST(Allgather, EveryTypeAndLengthInPlaceAndWithDelays) {
  std::uint64_t seed = 300;
  for (int P : {1, 2, 3, 4, 5})
    for (int t = 0; t < kDataTypeCount; ++t)
      for (std::uint64_t count : {0ull, 1ull, 333ull}) {
        ++seed;
        check_allgather(P, static_cast<DataType>(t), count, seed % 3 == 0 ? 100 : 0, seed,
                        seed % 2 == 0);
      }
}

// No rank leaves the barrier before the last one entered it.
TEST(Barrier, NobodyLeavesBeforeTheLastArrives) {
  for (int P : {1, 2, 5}) {
    std::atomic<int> entered{0};
    std::atomic<int> early{0};
    const auto o = run_ranks(P, [&](int r, Communicator& c) {
      for (int round = 0; round < 3; ++round) {
        if (r == round % P) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        entered.fetch_add(1);
        c.barrier();
        if (entered.load() < (round + 1) * P) early.fetch_add(1);
        c.barrier();  // nobody starts the next round's count before everyone checked
      }
    });
    expect_all_ok(o);
    EXPECT_EQ(early.load(), 0) << "P " << P;
  }
}

TEST(Barrier, RankThatNeverJoinsTimesOut) {
  const auto o = run_ranks(
      3,
      [](int r, Communicator& c) {
        if (r == 1) return;
        c.barrier();
      },
      0, 1, /*timeout_ms=*/300);
  for (int r : {0, 2}) {
    EXPECT_TRUE(o[std::size_t(r)].threw);
    EXPECT_EQ(o[std::size_t(r)].failure, Failure::kTimeout) << o[std::size_t(r)].what;
    EXPECT_NE(o[std::size_t(r)].what.find("no descriptor from rank 1"), std::string::npos)
        << o[std::size_t(r)].what;
  }
}

// Different roots, counts, operations or a bad argument on one rank: every rank fails with the
// same kind of error, and the communicator keeps working.
TEST(Family, MismatchAndBadArgumentsFailEveryRankThenItWorksAgain) {
  const auto o = run_ranks(4, [](int r, Communicator& c) {
    std::vector<float> x(400, 1.0f), y(400);
    expect_failure(
        [&] {
          c.reduce(args(x.data(), y.data(), 100, DataType::kFp32, ReduceOp::kSum, Algorithm::kAuto,
                        r == 3 ? 1 : 0));
        },
        Failure::kMismatch, "rank 3 has reduce, count 100, root 1", "root mismatch");
    expect_failure(
        [&] { c.broadcast(x.data(), r == 2 ? 99 : 100, static_cast<int>(DataType::kFp32), 0); },
        Failure::kMismatch, "rank 2 has broadcast, count 99", "count mismatch");
    expect_failure(
        [&] {
          if (r == 1)
            c.allgather(x.data(), y.data(), 100, static_cast<int>(DataType::kFp32));
          else
            c.reduce_scatter(args(x.data(), y.data(), 100, DataType::kFp32, ReduceOp::kSum));
        },
        Failure::kMismatch, "has all-gather", "different operations");
    expect_failure(
        [&] {
          c.reduce_scatter(args(x.data(), y.data(), 100, DataType::kFp32,
                                r == 0 ? ReduceOp::kMax : ReduceOp::kSum));
        },
        Failure::kMismatch, "ranks disagree", "op mismatch");
    expect_failure(
        [&] {
          c.reduce(args(x.data(), y.data(), 100, DataType::kFp32, ReduceOp::kSum, Algorithm::kAuto,
                        r == 2 ? 4 : 0));
        },
        Failure::kInvalid, "rank 2: root is not a rank", "root out of range");
    expect_failure([&] { c.broadcast(x.data(), 100, static_cast<int>(DataType::kFp32), -1); },
                   Failure::kInvalid, "root is not a rank", "negative root");
    expect_failure(
        [&] {
          c.allgather(r == 1 ? nullptr : x.data(), y.data(), 100,
                      static_cast<int>(DataType::kFp32));
        },
        Failure::kInvalid, "rank 1: a buffer is NULL", "NULL send");
    expect_failure(
        [&] {
          c.allgather(x.data(), r == 0 ? x.data() + 1 : y.data(), 100,
                      static_cast<int>(DataType::kFp32));
        },
        Failure::kInvalid, "rank 0: send and receive buffers overlap", "overlap");
    expect_failure(
        [&] {
          c.reduce_scatter(args(x.data(), x.data() + 3, 100, DataType::kFp32, ReduceOp::kSum));
        },
        Failure::kInvalid, "overlap", "reduce-scatter overlap");
    expect_failure([&] { c.broadcast(x.data(), 100, r == 3 ? 42 : 4, 0); }, Failure::kInvalid,
                   "rank 3: unknown datatype", "bad datatype");
    // Still usable: a reduce whose non-roots pass no recv at all, then a barrier.
    std::fill(x.begin(), x.end(), static_cast<float>(r));
    c.reduce(args(x.data(), r == 1 ? y.data() : nullptr, 400, DataType::kFp32, ReduceOp::kSum,
                  Algorithm::kAuto, 1));
    if (r == 1)
      for (float v : y)
        if (v != 6.0f) throw std::runtime_error("wrong reduce after the failures");
    c.barrier();
  });
  expect_all_ok(o);
}

// A peer reported dead mid-way fails every other rank's call with kPeerFailed, whatever the
// operation (the victim's part is needed by each: it is the broadcast's root).
TEST(Family, ReportedDeadPeerFailsTheOthers) {
  for (int which = 0; which < 5; ++which) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto o = run_ranks(
        3,
        [&](int r, Communicator& c) {
          if (r == 2) return;
          std::vector<float> x(9000, 1.0f), y(9000 * 3);
          switch (which) {
            case 0:
              c.reduce(args(x.data(), y.data(), 3000, DataType::kFp32, ReduceOp::kSum,
                            Algorithm::kAuto, 0));
              break;
            case 1:
              c.reduce_scatter(args(x.data(), y.data(), 3000, DataType::kFp32, ReduceOp::kSum));
              break;
            case 2:
              c.broadcast(x.data(), 3000, static_cast<int>(DataType::kFp32), 2);
              break;
            case 3:
              c.allgather(x.data(), y.data(), 3000, static_cast<int>(DataType::kFp32));
              break;
            default:
              c.barrier();
          }
        },
        0, 1, /*timeout_ms=*/30000, 512,
        [&](tr::InprocFabric& f) { f.kill(2, tr::FailureVisibility::kReported); });
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(o[static_cast<std::size_t>(r)].threw) << "operation " << which;
      EXPECT_EQ(o[static_cast<std::size_t>(r)].failure, Failure::kPeerFailed)
          << o[static_cast<std::size_t>(r)].what;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  }
}

// ---- non-blocking allreduce ---------------------------------------------------------------

namespace {
// Runs `ops` non-blocking allreduces of the given counts at once on P ranks, each rank waiting
// for them in its own random order (the last started first on rank 0), with random delivery
// delays; every result must be the tree's, bit for bit (order-sensitive inputs, reproducible).
void check_concurrent(int P, const std::vector<std::uint64_t>& counts, bool reproducible,
                      std::uint32_t delay_us, std::uint64_t seed) {
  const DataType t = DataType::kFp64;
  const Reducer red(t, ReduceOp::kSum);
  const std::size_t n = counts.size();
  std::vector<std::vector<Bytes>> in(n);
  std::vector<Bytes> expected(n);
  for (std::size_t k = 0; k < n; ++k) {
    for (int r = 0; r < P; ++r)
      in[k].push_back(make_input(t, ReduceOp::kSum, counts[k], r, seed + k, !reproducible));
    expected[k] = counts[k] == 0 ? Bytes{} : tree_reference(red, in[k], counts[k]);
  }
  std::vector<std::vector<Bytes>> got(static_cast<std::size_t>(P), std::vector<Bytes>(n));
  const auto o = run_ranks(
      P,
      [&](int r, Communicator& c) {
        std::vector<std::uint32_t> ids;
        for (std::size_t k = 0; k < n; ++k) {
          Bytes& g = got[std::size_t(r)][k];
          g.assign(counts[k] * element_size(t), std::byte{0x5a});
          AllreduceArgs a =
              args(in[k][std::size_t(r)].data(), g.data(), counts[k], t, ReduceOp::kSum);
          a.reproducible = reproducible;
          ids.push_back(c.start_allreduce(a));
          if (c.outstanding() != k + 1) throw std::runtime_error("outstanding miscounted");
        }
        // Completion order: reversed on rank 0, a random permutation elsewhere.
        std::vector<std::size_t> order(n);
        for (std::size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
        if (r != 0) std::shuffle(order.begin(), order.end(), std::mt19937_64(seed * 7 + r));
        for (std::size_t k : order) {
          if (k % 2 == 0) {
            c.wait(ids[k]);
          } else {
            while (!c.test(ids[k])) {
            }
          }
        }
        if (c.outstanding() != 0) throw std::runtime_error("requests left outstanding");
      },
      delay_us, seed);
  expect_all_ok(o);
  for (int r = 0; r < P; ++r)
    for (std::size_t k = 0; k < n; ++k)
      ASSERT_TRUE(got[std::size_t(r)][k] == expected[k])
          << "rank " << r << " operation " << k << " count " << counts[k] << " P " << P;
}

Options with_in_flight(int n) {
  Options o;
  o.timeout_ms = 20000;
  o.packet_bytes = 512;
  o.max_in_flight = n;
  return o;
}
}  // namespace

TEST(NonBlocking, ConcurrentAllreducesCompleteInAnyOrder) {
  check_concurrent(3, {20000, 1, 0, 3001, 777, 5}, false, 0, 11);
  check_concurrent(5, {4000, 9, 1000, 2}, false, 100, 12);
  check_concurrent(1, {10, 0, 3}, false, 0, 13);
}

// Eight reproducible allreduces outstanding at once under random delays: each the fixed tree's
// bits, whatever the interleaving (operation numbers keep their packets apart, each has its own
// scratch).
TEST(NonBlocking, ReproducibleIsBitwiseIdenticalUnderAnyInterleaving) {
  for (std::uint64_t seed : {21ull, 22ull, 23ull})
    check_concurrent(4, {3000, 1200, 5000, 17, 2500, 900, 4000, 64}, true, 200, seed);
}

// Mismatched counts in one of several outstanding operations fail that one on every rank; the
// others complete, and the communicator stays usable. A blocking call in between progresses the
// outstanding ones too.
TEST(NonBlocking, MismatchFailsOnlyThatOperationOnEveryRank) {
  const auto o = run_ranks(3, [](int r, Communicator& c) {
    std::vector<float> x(3000, 1.0f), y0(3000), y1(3000), y2(3000), y3(3000);
    const std::uint32_t a =
        c.start_allreduce(args(x.data(), y0.data(), 3000, DataType::kFp32, ReduceOp::kSum));
    const std::uint32_t b = c.start_allreduce(
        args(x.data(), y1.data(), r == 1 ? 2999 : 3000, DataType::kFp32, ReduceOp::kSum));
    c.allreduce(args(x.data(), y2.data(), 3000, DataType::kFp32, ReduceOp::kSum));
    const std::uint32_t d =
        c.start_allreduce(args(x.data(), y3.data(), 3000, DataType::kFp32, ReduceOp::kMax));
    c.wait(d);
    expect_failure([&] { c.wait(b); }, Failure::kMismatch, "rank 1 has allreduce, count 2999",
                   "count mismatch in a non-blocking operation");
    c.wait(a);
    for (std::size_t i = 0; i < 3000; ++i)
      if (y0[i] != 3.0f || y2[i] != 3.0f || y3[i] != 1.0f)
        throw std::runtime_error("wrong result beside the failed operation");
    // Released: waiting again is refused locally.
    try {
      c.wait(b);
      throw std::runtime_error("a released request was waited for again");
    } catch (const std::invalid_argument&) {
    }
  });
  expect_all_ok(o);
}

// An in-flight limit of 1 and of 2 with more operations started: start progresses the others
// until there is room (never more running than the limit), nothing deadlocks, every result is
// right.
TEST(NonBlocking, InFlightLimitIsHonoured) {
  for (int limit : {1, 2}) {
    tr::InprocFabric fabric(3);
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int r = 0; r < 3; ++r)
      comms.push_back(std::make_unique<Communicator>(fabric.endpoint(r), with_in_flight(limit)));
    std::vector<std::string> errors(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        try {
          Communicator& c = *comms[std::size_t(r)];
          std::vector<std::vector<std::int32_t>> x(6, std::vector<std::int32_t>(2000, r + 1)),
              y(6, std::vector<std::int32_t>(2000));
          std::vector<std::uint32_t> ids;
          for (int k = 0; k < 6; ++k) {
            ids.push_back(c.start_allreduce(args(x[std::size_t(k)].data(), y[std::size_t(k)].data(),
                                                 2000, DataType::kInt32, ReduceOp::kSum)));
            if (c.in_flight() > static_cast<std::size_t>(limit))
              throw std::runtime_error("more operations in flight than the limit");
          }
          for (int k = 5; k >= 0; --k) c.wait(ids[std::size_t(k)]);
          for (const auto& v : y)
            for (std::int32_t e : v)
              if (e != 6) throw std::runtime_error("wrong sum");
        } catch (const std::exception& e) {
          errors[std::size_t(r)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[std::size_t(r)], "") << "limit " << limit;
  }
}

// A peer reported dead fails every outstanding operation on every other rank.
TEST(NonBlocking, DeadPeerFailsEveryOutstandingOperation) {
  const auto o = run_ranks(
      3,
      [](int r, Communicator& c) {
        if (r == 2) return;
        std::vector<float> x(3000, 1.0f), y(3000 * 4);
        std::vector<std::uint32_t> ids;
        for (int k = 0; k < 4; ++k)
          ids.push_back(c.start_allreduce(
              args(x.data(), y.data() + 3000 * k, 3000, DataType::kFp32, ReduceOp::kSum)));
        int failed = 0;
        for (std::uint32_t id : ids) {
          try {
            c.wait(id);
          } catch (const CollectiveError& e) {
            if (e.failure() == Failure::kPeerFailed) ++failed;
          }
        }
        if (failed != 4) throw std::runtime_error("not every outstanding operation failed");
      },
      0, 1, /*timeout_ms=*/30000, 512,
      [&](tr::InprocFabric& f) { f.kill(2, tr::FailureVisibility::kReported); });
  expect_all_ok(o);
}

// Non-blocking all-gathers with random receive delays, several outstanding, mixed with
// allreduces, waited for in an order of each rank's own: every one the rank-order concatenation.
TEST(NonBlocking, AllgathersAndAllreducesOutstandingTogetherUnderDelays) {
  const auto o = run_ranks(
      3,
      [](int r, Communicator& c) {
        constexpr int kOps = 6;
        std::vector<std::vector<double>> mine(kOps), all(kOps);
        std::vector<float> ones(2500, 1.0f), sum(2500);
        std::vector<std::uint32_t> ids;
        for (int k = 0; k < kOps; ++k) {
          const std::size_t n = 100 + 997 * static_cast<std::size_t>(k);
          mine[k].resize(n);
          for (std::size_t i = 0; i < n; ++i) mine[k][i] = 1000.0 * r + static_cast<double>(i);
          all[k].assign(3 * n, -1.0);
          ids.push_back(c.start_allgather(mine[k].data(), all[k].data(), n,
                                          static_cast<int>(DataType::kFp64)));
          if (k == 1)
            ids.push_back(c.start_allreduce(
                args(ones.data(), sum.data(), 2500, DataType::kFp32, ReduceOp::kSum)));
        }
        for (int n = 0, k = r % kOps; n < kOps; ++n, k = (k + 5) % kOps)
          c.wait(ids[std::size_t(k < 2 ? k : k + 1)]);
        c.wait(ids[2]);
        for (int k = 0; k < kOps; ++k)
          for (std::size_t i = 0; i < all[k].size(); ++i) {
            const std::size_t n = mine[k].size();
            if (all[k][i] != 1000.0 * static_cast<double>(i / n) + static_cast<double>(i % n))
              throw std::runtime_error("wrong element " + std::to_string(i) + " of all-gather " +
                                       std::to_string(k));
          }
        for (float v : sum)
          if (v != 3.0f) throw std::runtime_error("wrong allreduce sum");
      },
      150, 5);
  expect_all_ok(o);
}
