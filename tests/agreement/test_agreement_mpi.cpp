// Agreement over real MPI ranks (mpirun -np 3): the two-round settlement and the failure
// agreement of collective calls.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi.hpp"
#include "agreement/neighbours.hpp"
#include "mpi_test_util.hpp"
#include "netsparse/sparse_error.hpp"

namespace ag = netsparse::agreement;
using netsparse::test::world_rank;
using netsparse::test::world_size;

TEST(AgreementMpi, SettlesEqualSettings) {
  ag::Agreement a;
  a.field("k", 16u);
  const ag::Verdict v = ag::settle_over_mpi(a, MPI_COMM_WORLD);
  EXPECT_TRUE(v.ok()) << v.reason;
}

TEST(AgreementMpi, EveryRankSeesTheSameDisagreement) {
  const int last = world_size() - 1;
  ag::Agreement a;
  a.field("k", world_rank() == last ? 32u : 16u);
  const ag::Verdict v = ag::settle_over_mpi(a, MPI_COMM_WORLD);
  if (last == 0) {
    EXPECT_TRUE(v.ok());
    return;
  }
  EXPECT_EQ(v.reason, "ranks disagree on k: rank 0 has 16, rank " + std::to_string(last) +
                          " has 32 (it must be the same on every rank)");
}

// Records of different sizes (ranks in different calls): every rank throws, nothing gathered.
TEST(AgreementMpi, RecordsOfDifferentSizesAreRefusedBeforeTheGather) {
  ag::Agreement a;
  a.field("k", 16u);
  if (world_rank() == world_size() - 1) a.field("extra", 1u);
  if (world_size() == 1) return;
  EXPECT_THROW((void)ag::settle_over_mpi(a, MPI_COMM_WORLD), std::logic_error);
}

// agree_on_call: a refusal wins; otherwise the first differing field, as an invalid_argument
// with the call's name, on every rank; nothing thrown when they agree.
TEST(AgreementMpi, AgreeOnCallNamesTheCallAndTheField) {
  const int last = world_size() - 1;
  const auto agreed = [&](std::uint64_t k) {
    ag::Agreement a;
    a.field("K", k);
    return a;
  };
  EXPECT_NO_THROW(ag::agree_on_call(MPI_COMM_WORLD, "f", agreed(4), nullptr));
  if (last == 0) return;
  try {
    ag::collective_call_agreed(MPI_COMM_WORLD, "f", agreed(world_rank() == last ? 8 : 4), [] {});
    ADD_FAILURE() << "no rank threw";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "f: the ranks disagree on K: rank 0 has 4, rank " +
                                         std::to_string(last) +
                                         " has 8 (it must be the same on every rank)");
  }
  try {
    ag::collective_call_agreed(MPI_COMM_WORLD, "f", agreed(world_rank() == last ? 8 : 4), [&] {
      if (world_rank() == last) throw std::overflow_error("too big");
    });
    ADD_FAILURE() << "no rank threw";
  } catch (const std::overflow_error& e) {
    EXPECT_EQ(std::string(e.what()), "too big");
  }
}

TEST(AgreementMpi, EveryRankSeesTheRefusal) {
  const int last = world_size() - 1;
  ag::Agreement a;
  if (world_rank() == last) a.refuse(-6, "no device here");
  const ag::Verdict v = ag::settle_over_mpi(a, MPI_COMM_WORLD);
  EXPECT_TRUE(v.refused);
  EXPECT_EQ(v.status, -6);
  EXPECT_EQ(v.reason, "rank " + std::to_string(last) + ": no device here");
}

TEST(AgreementMpi, FailureAgreementCopiesTheLowestFailingRanksException) {
  const int last = world_size() - 1;
  // A ParseError keeps its file, line and reason on every rank.
  try {
    ag::collective_call(MPI_COMM_WORLD, [&] {
      if (world_rank() == last) throw netsparse::ParseError("a:b.mtx", 7, "bad: header");
    });
    ADD_FAILURE() << "no rank threw";
  } catch (const netsparse::ParseError& e) {
    EXPECT_EQ(e.file(), "a:b.mtx");
    EXPECT_EQ(e.line(), 7);
    EXPECT_EQ(e.reason(), "bad: header");
  }
  // A runtime error names the failing rank on the others; the failing rank keeps its own.
  try {
    ag::collective_call(MPI_COMM_WORLD, [&] {
      if (world_rank() == last) throw std::runtime_error("disk gone");
    });
    ADD_FAILURE() << "no rank threw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              world_rank() == last ? "disk gone" : "rank " + std::to_string(last) + ": disk gone");
  }
  EXPECT_THROW(ag::collective_call(MPI_COMM_WORLD,
                                   [&] {
                                     if (world_rank() == 0) throw std::invalid_argument("k < 1");
                                   }),
               std::invalid_argument);
  EXPECT_EQ(ag::collective_call(MPI_COMM_WORLD, [] { return 42; }), 42);
}

TEST(AgreementMpi, CheckMpiNamesTheCall) {
  EXPECT_NO_THROW(ag::check_mpi(MPI_SUCCESS, "MPI_Barrier"));
  try {
    ag::check_mpi(MPI_ERR_COMM, "MPI_Barrier");
    ADD_FAILURE() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("MPI_Barrier failed: ", 0), 0u) << e.what();
  }
}

// sources_of (NBX): the reverse of a random sparse pattern equals what an MPI_Alltoall of flags
// says, repeated targets and the rank itself included, for several patterns in a row (the
// rounds must not mix); an empty pattern gives nobody; a bad target is refused.
TEST(AgreementMpi, SourcesOfReversesASparsePattern) {
  const int size = world_size(), rank = world_rank();
  for (unsigned seed = 1; seed <= 5; ++seed) {
    std::vector<int> targets;
    for (int t = 0; t < size; ++t) {
      const unsigned h = (seed * 2654435761u) ^ static_cast<unsigned>(rank * 40503 + t * 9973);
      if (h % 3 == 0) targets.push_back(t);
      if (h % 7 == 0) targets.push_back(t);  // a repeat
    }
    std::vector<int> flags(static_cast<std::size_t>(size), 0), incoming(flags.size(), 0);
    for (const int t : targets) flags[static_cast<std::size_t>(t)] = 1;
    ASSERT_EQ(MPI_Alltoall(flags.data(), 1, MPI_INT, incoming.data(), 1, MPI_INT, MPI_COMM_WORLD),
              MPI_SUCCESS);
    std::vector<int> expected;
    for (int s = 0; s < size; ++s) {
      if (incoming[static_cast<std::size_t>(s)] != 0) expected.push_back(s);
    }
    EXPECT_EQ(ag::sources_of(MPI_COMM_WORLD, targets, std::chrono::seconds(60)), expected)
        << "seed " << seed;
  }
  EXPECT_TRUE(ag::sources_of(MPI_COMM_WORLD, {}, std::chrono::seconds(60)).empty());
  const int bad[] = {size};
  EXPECT_THROW((void)ag::sources_of(MPI_COMM_SELF, bad), std::invalid_argument);
}
