// The Conveyors-style aggregator under real MPI ranks: delivery (every pushed item arrives
// exactly once at its destination), backpressure, termination, request/reply with two
// conveyors, back-to-back sessions with different item sizes, and misuse errors.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "conveyor/conveyor.hpp"
#include "mpi_test_util.hpp"

namespace netsparse::dist {
namespace {

using netsparse::test::world_rank;
using netsparse::test::world_size;

using netsparse::test::mix;

struct Item {
  std::uint32_t src;
  std::uint32_t seq;
  std::uint64_t payload;
};

// Rank s sends n_items(s) items; item i goes to dest(s, i) (self included).
int dest_of(int src, std::uint32_t i, int size) {
  return static_cast<int>(mix(std::uint64_t(src) * 1000003u + i) % std::uint64_t(size));
}
std::uint32_t n_items(int src) {
  return 500 + 137 * static_cast<std::uint32_t>(src);
}

// Runs one all-to-all session and checks that every rank got exactly its items.
void all_to_all_session(Conveyor& c) {
  const int rank = c.rank(), size = c.size();
  c.begin(sizeof(Item));
  std::uint32_t i = 0;
  const std::uint32_t n = n_items(rank);
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> got;
  std::uint64_t duplicates = 0, wrong_from = 0;
  while (c.advance(i == n)) {
    while (i < n) {
      Item item{static_cast<std::uint32_t>(rank), i, mix(rank * 7919u + i)};
      if (!c.push(&item, dest_of(rank, i, size))) break;
      ++i;
    }
    Item item{};
    int from = -1;
    while (c.pull(&item, &from)) {
      if (static_cast<int>(item.src) != from) ++wrong_from;
      if (!got.emplace(std::make_pair(item.src, item.seq), item.payload).second) ++duplicates;
    }
  }
  EXPECT_EQ(duplicates, 0u);
  EXPECT_EQ(wrong_from, 0u);
  // What should have arrived here, computed independently of the conveyor.
  std::size_t expected = 0;
  for (int s = 0; s < size; ++s) {
    for (std::uint32_t j = 0; j < n_items(s); ++j) {
      if (dest_of(s, j, size) != rank) continue;
      ++expected;
      const auto it = got.find({static_cast<std::uint32_t>(s), j});
      ASSERT_NE(it, got.end()) << "item " << j << " from rank " << s << " never arrived";
      EXPECT_EQ(it->second, mix(s * 7919u + j));
    }
  }
  EXPECT_EQ(got.size(), expected);
  EXPECT_FALSE(c.running());
}

TEST(Conveyor, DeliversEveryItemExactlyOnce) {
  Conveyor c(MPI_COMM_WORLD);
  all_to_all_session(c);
  EXPECT_EQ(c.stats().pushed, n_items(c.rank()));
}

TEST(Conveyor, TinyBuffersForceBackpressureAndStillDeliver) {
  ConveyorOptions o;
  o.buffer_bytes = 3 * sizeof(Item);  // three items per buffer
  o.buffers_per_link = 1;
  Conveyor c(MPI_COMM_WORLD, o);
  all_to_all_session(c);
  // With one 3-item buffer per link, pushing hundreds of items must have been refused at
  // least once on every rank that sends to a peer (only P == 1 has no peers).
  if (c.size() > 1) {
    EXPECT_GT(c.stats().refused, 0u);
    EXPECT_GT(c.stats().buffers_sent, 0u);
  }
}

TEST(Conveyor, BackToBackSessionsWithDifferentItemSizes) {
  Conveyor c(MPI_COMM_WORLD);
  for (int round = 0; round < 3; ++round) {
    // Round 1 uses 3-byte items: rank and a counter, packed.
    if (round == 1) {
      c.begin(3);
      const int rank = c.rank(), size = c.size();
      std::uint32_t i = 0;
      const std::uint32_t n = 100;
      std::vector<std::uint32_t> per_src(static_cast<std::size_t>(size), 0);
      while (c.advance(i == n)) {
        while (i < n) {
          const unsigned char item[3] = {static_cast<unsigned char>(rank),
                                         static_cast<unsigned char>(i & 0xff), 0x5a};
          if (!c.push(item, static_cast<int>((rank + i) % size))) break;
          ++i;
        }
        int from = -1;
        while (const std::byte* p = c.pull(&from)) {
          EXPECT_EQ(static_cast<int>(p[0]), from);
          EXPECT_EQ(static_cast<int>(p[2]), 0x5a);
          ++per_src[from];
        }
      }
      for (int s = 0; s < size; ++s) {
        std::uint32_t expected = 0;
        for (std::uint32_t j = 0; j < n; ++j) expected += (s + j) % size == std::uint32_t(rank);
        EXPECT_EQ(per_src[s], expected) << "from rank " << s;
      }
    } else {
      all_to_all_session(c);
    }
  }
}

// Index gather: rank r holds table[r][j] = value(r, j); every rank asks for random (owner, j)
// and must receive the right values. Two conveyors, the reply side done when the request side
// is complete; refused replies are unpulled.
TEST(Conveyor, RequestReplyGather) {
  ConveyorOptions o;
  o.buffer_bytes = 64;  // small: replies get refused, exercising unpull
  o.buffers_per_link = 1;
  Conveyor requests(MPI_COMM_WORLD, o), replies(MPI_COMM_WORLD, o);
  const int rank = world_rank(), size = world_size();
  constexpr std::uint32_t kTable = 1000, kQueries = 3000;
  const auto value = [](int owner, std::uint32_t j) { return mix(owner * 131071u + j); };
  struct Req {
    std::uint32_t slot, j;
  };
  struct Rep {
    std::uint32_t slot, pad;
    std::uint64_t v;
  };
  std::vector<int> q_owner(kQueries);
  std::vector<std::uint32_t> q_j(kQueries);
  for (std::uint32_t q = 0; q < kQueries; ++q) {
    q_owner[q] = static_cast<int>(mix(rank * 31u + q) % std::uint64_t(size));
    q_j[q] = static_cast<std::uint32_t>(mix(q * 17u + rank) % kTable);
  }
  std::vector<std::uint64_t> answer(kQueries, 0);
  std::vector<int> answered(kQueries, 0);
  requests.begin(sizeof(Req));
  replies.begin(sizeof(Rep));
  std::uint32_t q = 0;
  bool more_req = true, more_rep = true;
  while (more_req || more_rep) {
    while (q < kQueries) {
      Req r{q, q_j[q]};
      if (!requests.push(&r, q_owner[q])) break;
      ++q;
    }
    more_req = requests.advance(q == kQueries);
    int from = -1;
    Req r{};
    while (requests.pull(&r, &from)) {
      Rep rep{r.slot, 0, value(rank, r.j)};
      if (!replies.push(&rep, from)) {
        requests.unpull();
        break;
      }
    }
    more_rep = replies.advance(!more_req);
    Rep rep{};
    while (replies.pull(&rep, &from)) {
      if (rep.slot >= kQueries) {  // no ASSERT: leaving the loop would strand the peers
        ADD_FAILURE() << "reply for unknown slot " << rep.slot;
        continue;
      }
      EXPECT_EQ(from, q_owner[rep.slot]);
      answer[rep.slot] = rep.v;
      ++answered[rep.slot];
    }
  }
  std::uint32_t wrong = 0, missing = 0, twice = 0;
  for (std::uint32_t k = 0; k < kQueries; ++k) {
    missing += answered[k] == 0;
    twice += answered[k] > 1;
    wrong += answered[k] == 1 && answer[k] != value(q_owner[k], q_j[k]);
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(twice, 0u);
  EXPECT_EQ(wrong, 0u);
}

TEST(Conveyor, MisuseIsReportedNotUndefined) {
  Conveyor c(MPI_COMM_WORLD);
  const int item = 1;
  EXPECT_THROW((void)c.push(&item, 0), std::logic_error);  // no session
  EXPECT_THROW(c.begin(0), std::invalid_argument);
  EXPECT_THROW(c.begin(20000), std::invalid_argument);  // larger than a buffer
  int from = 0;
  EXPECT_EQ(c.pull(&from), nullptr);
  EXPECT_FALSE(c.advance(true));  // no session: nothing to do
  c.begin(sizeof item);
  EXPECT_THROW((void)c.push(&item, c.size()), std::out_of_range);
  EXPECT_THROW((void)c.push(&item, -1), std::out_of_range);
  EXPECT_THROW(c.unpull(), std::logic_error);
  EXPECT_THROW(c.begin(sizeof item), std::logic_error);  // still running
  while (c.advance(true)) {
    while (c.pull(&from) != nullptr) {
    }
  }
  EXPECT_THROW((void)c.push(&item, 0), std::logic_error);  // session complete
  ConveyorOptions bad;
  bad.buffers_per_link = 0;
  EXPECT_THROW(Conveyor(MPI_COMM_WORLD, bad), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse::dist
