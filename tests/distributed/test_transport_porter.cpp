// The Conveyor and RequestReply over TransportPorter on an in-process fabric: node threads of
// one process, no MPI. The same checks as the MPI tests (every item exactly once, every answer
// correct, items to self, backpressure, idle ranks, back-to-back sessions), plus what only this
// porter has: a transport that refuses packets (tiny mailboxes) and peers one session ahead.
#include "conveyor/transport_porter.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "conveyor/conveyor.hpp"
#include "conveyor/request_reply.hpp"
#include "transport/transport.hpp"

namespace netsparse::dist {
namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Runs body(rank) on `nodes` threads and joins them.
void on_nodes(int nodes, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nodes; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

struct Item {
  std::uint32_t src;
  std::uint32_t seq;
  std::uint64_t payload;
};

// One all-to-all session on c: rank sends n(rank) items, item i to dest(rank, i) (self
// included); checks every item arrived exactly once.
void all_to_all(Conveyor& c, std::uint32_t salt) {
  const int rank = c.rank(), size = c.size();
  const auto n = [&](int r) { return 300 + 71 * static_cast<std::uint32_t>(r) + salt; };
  const auto dest = [&](int r, std::uint32_t i) {
    return static_cast<int>(mix(r * 1000003u + i + salt) % static_cast<std::uint64_t>(size));
  };
  c.begin(sizeof(Item));
  std::uint32_t i = 0;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> got;
  std::uint64_t duplicates = 0, wrong_from = 0;
  while (c.advance(i == n(rank))) {
    for (; i < n(rank); ++i) {
      const Item item{static_cast<std::uint32_t>(rank), i, mix(rank * 7919u + i + salt)};
      if (!c.push(&item, dest(rank, i))) break;
    }
    Item item{};
    int from = -1;
    while (c.pull(&item, &from)) {
      wrong_from += static_cast<int>(item.src) != from;
      duplicates += !got.emplace(std::make_pair(item.src, item.seq), item.payload).second;
    }
  }
  EXPECT_EQ(duplicates, 0u);
  EXPECT_EQ(wrong_from, 0u);
  std::size_t expected = 0;
  for (int s = 0; s < size; ++s) {
    for (std::uint32_t j = 0; j < n(s); ++j) {
      if (dest(s, j) != rank) continue;
      ++expected;
      const auto it = got.find({static_cast<std::uint32_t>(s), j});
      if (it == got.end()) {
        ADD_FAILURE() << "rank " << rank << ": item " << j << " from " << s << " never arrived";
      } else {
        EXPECT_EQ(it->second, mix(s * 7919u + j + salt));
      }
    }
  }
  EXPECT_EQ(got.size(), expected);
  EXPECT_FALSE(c.running());
}

class TransportPorterNodes : public testing::TestWithParam<int> {};

TEST_P(TransportPorterNodes, ConveyorDeliversEveryItemExactlyOnceSessionAfterSession) {
  const int nodes = GetParam();
  transport::InprocOptions fo;
  fo.max_packet_bytes = 1024;
  fo.mailbox_packets = 4;  // tiny: the transport refuses packets, the porter retries them
  transport::InprocFabric fabric(nodes, fo);
  on_nodes(nodes, [&](int rank) {
    ConveyorOptions o;
    o.buffer_bytes = 1024 - TransportPorter::kHeadroomBytes - sizeof(Conveyor::BufferHeader);
    Conveyor c(std::make_unique<TransportPorter>(fabric.endpoint(rank)), o);
    // Back to back: fast ranks start the next session while others finish this one.
    for (std::uint32_t round = 0; round < 6; ++round) all_to_all(c, round);
  });
}

TEST_P(TransportPorterNodes, ConveyorTinyBuffersBackpressure) {
  const int nodes = GetParam();
  transport::InprocFabric fabric(nodes);
  on_nodes(nodes, [&](int rank) {
    ConveyorOptions o;
    o.buffer_bytes = 2 * sizeof(Item);
    o.buffers_per_link = 1;
    Conveyor c(std::make_unique<TransportPorter>(fabric.endpoint(rank)), o);
    all_to_all(c, 0);
    if (nodes > 1) {
      EXPECT_GT(c.stats().refused, 0u);
    }
  });
}

// Index gather over two fabrics (one per direction), like the MPI RequestReply tests.
TEST_P(TransportPorterNodes, RequestReplyEveryAnswerCorrect) {
  const int nodes = GetParam();
  transport::InprocOptions fo;
  fo.mailbox_packets = 8;
  transport::InprocFabric requests(nodes, fo), replies(nodes, fo);
  on_nodes(nodes, [&](int rank) {
    ConveyorOptions o;
    o.buffer_bytes = 96;  // a few items per buffer: many buffers, refusals both ways
    o.buffers_per_link = 1;
    RequestReply rr(std::make_unique<TransportPorter>(requests.endpoint(rank)),
                    std::make_unique<TransportPorter>(replies.endpoint(rank)), o, o);
    const auto value = [](int owner, std::uint32_t j) { return mix(owner * 131071u + j); };
    const auto answer = [&](const std::byte* request, int, std::byte* reply) {
      std::uint32_t q[2];
      std::memcpy(q, request, 8);
      const std::uint64_t v[2] = {q[0], value(rank, q[1])};
      std::memcpy(reply, v, 16);
    };
    for (int round = 0; round < 3; ++round) {
      // Rank 0 asks nothing in round 1; round 2 asks only oneself.
      const std::uint32_t n = (round == 1 && rank == 0) ? 0 : 2000;
      std::vector<int> owner(n);
      std::vector<std::uint32_t> row(n);
      for (std::uint32_t q = 0; q < n; ++q) {
        owner[q] = round == 2 ? rank : static_cast<int>(mix(rank * 31u + q + round) % nodes);
        row[q] = static_cast<std::uint32_t>(mix(q * 17u + rank) % 1000);
      }
      std::vector<int> answered(n, 0);
      std::uint64_t wrong = 0;
      rr.begin(8, 16);
      std::uint32_t q = 0;
      while (rr.advance(q == n, answer)) {
        for (; q < n; ++q) {
          const std::uint32_t request[2] = {q, row[q]};
          if (!rr.push(request, owner[q])) break;
        }
        int from = -1;
        std::uint64_t reply[2];
        while (rr.pull(reply, &from)) {
          if (reply[0] >= n) {
            ++wrong;
            continue;
          }
          ++answered[reply[0]];
          wrong += from != owner[reply[0]] || reply[1] != value(owner[reply[0]], row[reply[0]]);
        }
      }
      std::uint64_t missing = 0, twice = 0;
      for (int a : answered) {
        missing += a == 0;
        twice += a > 1;
      }
      EXPECT_EQ(missing, 0u) << "rank " << rank << " round " << round;
      EXPECT_EQ(twice, 0u) << "rank " << rank << " round " << round;
      EXPECT_EQ(wrong, 0u) << "rank " << rank << " round " << round;
      EXPECT_FALSE(rr.running());
    }
    if (nodes > 1) {
      EXPECT_GT(rr.replies().stats().refused, 0u);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Nodes, TransportPorterNodes, testing::Values(1, 2, 3, 5));

// Two nodes driven from one thread, step by step: node 0 completes session 1 and sends a
// session-2 buffer before node 1 has taken node 0's END of session 1. Node 1 must hold that
// buffer (not count it in session 1) and deliver it in session 2.
TEST(TransportPorter, ABufferOneSessionEarlyIsHeldForTheNextSession) {
  transport::InprocFabric fabric(2);
  ConveyorOptions o;
  o.buffer_bytes = 64;  // 8 items of 8 B
  auto p0 = std::make_unique<TransportPorter>(fabric.endpoint(0));
  auto p1 = std::make_unique<TransportPorter>(fabric.endpoint(1));
  TransportPorter* porter1 = p1.get();
  Conveyor c0(std::move(p0), o), c1(std::move(p1), o);
  c0.begin(8);
  c1.begin(8);
  EXPECT_TRUE(c1.advance(true));  // node 1 sends its END of session 1
  EXPECT_TRUE(c0.advance(true));  // node 0 sends its END (and may take node 1's)
  int from = -1;
  while (c0.advance(true)) {
    ASSERT_EQ(c0.pull(&from), nullptr);
  }
  // Node 0 is in session 2 and fills a buffer for node 1 (sent when full).
  c0.begin(8);
  for (std::uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(c0.push(&i, 1));
  EXPECT_EQ(c0.stats().buffers_sent, 2u);  // END of session 1, the full buffer of session 2
  // Node 1 finishes session 1: END arrives, then the early buffer, held.
  while (c1.advance(true)) {
    ASSERT_EQ(c1.pull(&from), nullptr);
  }
  EXPECT_EQ(porter1->held_early(), 1u);
  // Session 2 on node 1: the held buffer's 8 items, then nothing more.
  c1.begin(8);
  std::uint64_t sum = 0, n = 0;
  bool more0 = true, more1 = true;
  while (more0 || more1) {
    more0 = c0.advance(true);
    more1 = c1.advance(true);
    std::uint64_t v = 0;
    while (c1.pull(&v, &from)) {
      EXPECT_EQ(from, 0);
      sum += v;
      ++n;
    }
    EXPECT_EQ(c0.pull(&from), nullptr);
  }
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(sum, 28u);
}

TEST(TransportPorter, BuffersLargerThanAPacketAreRefusedAtBegin) {
  transport::InprocOptions fo;
  fo.max_packet_bytes = 256;
  transport::InprocFabric fabric(1, fo), other(1, fo);
  ConveyorOptions o;
  o.buffer_bytes = 256;  // + 16 B header + 8 B headroom > 256
  Conveyor c(std::make_unique<TransportPorter>(fabric.endpoint(0)), o);
  EXPECT_THROW(c.begin(8), std::invalid_argument);
  EXPECT_FALSE(c.running());
  o.buffer_bytes = 256 - 24;
  Conveyor fits(std::make_unique<TransportPorter>(other.endpoint(0)), o);
  fits.begin(8);
  EXPECT_TRUE(fits.push("abcdefgh", 0));  // to oneself
  int from = -1;
  while (fits.advance(true)) {
    while (fits.pull(&from) != nullptr) {
    }
  }
  EXPECT_EQ(fits.stats().pulled, 1u);
}

}  // namespace
}  // namespace netsparse::dist
