// RequestReply (two conveyors and the answer callback) under real MPI ranks: every request is
// answered exactly once and correctly (to peers and to oneself), backpressure on both
// directions with tiny buffers, ranks that ask nothing, back-to-back sessions, misuse.
#include "conveyor/request_reply.hpp"
#include "mpi_test_util.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace netsparse::dist {
namespace {

using netsparse::test::world_rank;
using netsparse::test::world_size;

using netsparse::test::mix;

// The distributed table: rank `owner` holds value(owner, j) for j < kTable.
constexpr std::uint32_t kTable = 1000;
std::uint64_t value(int owner, std::uint32_t j) {
  return mix(std::uint64_t(owner) * 131071u + j);
}

struct Request {
  std::uint32_t query;  // the requester's query number: where the reply goes
  std::uint32_t j;      // the row asked for
};
// A reply of `words` 64-bit words: the query number, then value(owner, j) + w for w >= 1.
std::size_t reply_bytes(int words) {
  return sizeof(std::uint64_t) * static_cast<std::size_t>(words);
}

struct Outcome {
  std::uint64_t missing = 0, twice = 0, wrong = 0, wrong_from = 0;
};

// One gather session: `n` queries of this rank, query q to owner_of(q) for row row_of(q).
// Replies are `words` words long. Returns what went wrong (all zero when correct).
Outcome gather(RequestReply& rr, std::uint32_t n, const std::function<int(std::uint32_t)>& owner_of,
               int words) {
  const int rank = rr.rank();
  std::vector<int> owner(n);
  std::vector<std::uint32_t> row(n);
  for (std::uint32_t q = 0; q < n; ++q) {
    owner[q] = owner_of(q);
    row[q] = static_cast<std::uint32_t>(mix(q * 17u + rank) % kTable);
  }
  std::vector<int> answered(n, 0);
  Outcome out;
  const auto answer = [&](const std::byte* request, int, std::byte* reply) {
    Request r{};
    std::memcpy(&r, request, sizeof r);
    const std::uint64_t first = r.query;
    std::memcpy(reply, &first, 8);
    for (int w = 1; w < words; ++w) {
      const std::uint64_t v = value(rank, r.j) + static_cast<std::uint64_t>(w);
      std::memcpy(reply + 8 * w, &v, 8);
    }
  };
  rr.begin(sizeof(Request), reply_bytes(words));
  std::uint32_t q = 0;
  while (rr.advance(q == n, answer)) {
    for (; q < n; ++q) {
      const Request r{q, row[q]};
      if (!rr.push(&r, owner[q])) break;
    }
    int from = -1;
    while (const std::byte* reply = rr.pull(&from)) {
      std::uint64_t query = 0;
      std::memcpy(&query, reply, 8);
      if (query >= n) {  // no ASSERT: leaving the loop would strand the peers
        ++out.wrong;
        continue;
      }
      ++answered[query];
      out.wrong_from += from != owner[query];
      for (int w = 1; w < words; ++w) {
        std::uint64_t v = 0;
        std::memcpy(&v, reply + 8 * w, 8);
        out.wrong += v != value(owner[query], row[query]) + static_cast<std::uint64_t>(w);
      }
    }
  }
  for (std::uint32_t k = 0; k < n; ++k) {
    out.missing += answered[k] == 0;
    out.twice += answered[k] > 1;
  }
  EXPECT_FALSE(rr.running());
  return out;
}

void expect_correct(const Outcome& o) {
  EXPECT_EQ(o.missing, 0u);
  EXPECT_EQ(o.twice, 0u);
  EXPECT_EQ(o.wrong, 0u);
  EXPECT_EQ(o.wrong_from, 0u);
}

int random_owner(std::uint32_t q) {
  return static_cast<int>(mix(world_rank() * 31u + q) % std::uint64_t(world_size()));
}

TEST(RequestReply, EveryAnswerCorrectDefaultBuffers) {
  RequestReply rr(MPI_COMM_WORLD);
  expect_correct(gather(rr, 5000 + 311 * world_rank(), random_owner, 3));
  const ConveyorStats& req = rr.requests().stats();
  const ConveyorStats& rep = rr.replies().stats();
  EXPECT_EQ(req.pushed, 5000u + 311 * world_rank());
  EXPECT_EQ(rep.pulled, req.pushed);  // every reply pulled here, one per request
  // The wire model prices every buffer as an MPI message: its bytes + 50 B.
  EXPECT_EQ(wire_bytes(req), req.bytes_sent + 50 * req.buffers_sent);
}

TEST(RequestReply, ItemsToSelfOnly) {
  RequestReply rr(MPI_COMM_WORLD);
  expect_correct(gather(
      rr, 4000, [](std::uint32_t) { return world_rank(); }, 2));
  // Nothing left this rank but the END buffers (empty, one per peer and direction).
  EXPECT_EQ(rr.requests().stats().buffers_sent, static_cast<std::uint64_t>(world_size() - 1));
  EXPECT_EQ(rr.replies().stats().buffers_sent, static_cast<std::uint64_t>(world_size() - 1));
}

TEST(RequestReply, BackpressureWithTinyBuffersBothWays) {
  ConveyorOptions req, rep;
  req.buffer_bytes = 2 * sizeof(Request);  // two requests per buffer
  req.buffers_per_link = 1;
  rep.buffer_bytes = reply_bytes(4);  // one reply per buffer
  rep.buffers_per_link = 1;
  RequestReply rr(MPI_COMM_WORLD, req, rep);
  expect_correct(gather(rr, 3000, random_owner, 4));
  if (world_size() > 1) {
    EXPECT_GT(rr.requests().stats().refused, 0u);
    // Replies refused = requests put back (unpull) and answered later.
    EXPECT_GT(rr.replies().stats().refused, 0u);
  }
  // The self queue is bounded too: a rank asking only itself is refused and still completes.
  rr.reset_stats();
  expect_correct(gather(
      rr, 500, [](std::uint32_t) { return world_rank(); }, 4));
  EXPECT_GT(rr.requests().stats().refused + rr.replies().stats().refused, 0u);
}

TEST(RequestReply, RanksThatAskNothingStillAnswer) {
  RequestReply rr(MPI_COMM_WORLD);
  // Rank 0 asks nothing; the others ask rank 0 (and the rest) for everything.
  const std::uint32_t n = world_rank() == 0 ? 0 : 3000;
  expect_correct(gather(
      rr, n, [](std::uint32_t q) { return q % 2 == 0 ? 0 : static_cast<int>(q % world_size()); },
      2));
  EXPECT_EQ(rr.requests().stats().pushed, n);
  // Nobody asks anything: the session still completes everywhere.
  expect_correct(gather(rr, 0, random_owner, 2));
}

TEST(RequestReply, BackToBackSessionsWithDifferentSizes) {
  ConveyorOptions o;
  o.buffer_bytes = 1000;
  RequestReply rr(MPI_COMM_WORLD, o, o);
  for (int words : {1, 7, 2, 20, 3}) {
    expect_correct(gather(rr, 1500 + 100 * static_cast<std::uint32_t>(words), random_owner, words));
  }
}

TEST(RequestReply, MisuseIsReported) {
  ConveyorOptions o;
  o.buffer_bytes = 64;
  RequestReply rr(MPI_COMM_WORLD, o, o);
  EXPECT_THROW(rr.begin(8, 65), std::invalid_argument);  // a reply larger than a buffer
  EXPECT_THROW(rr.begin(0, 8), std::invalid_argument);
  EXPECT_FALSE(rr.running());  // a refused begin starts neither direction
  EXPECT_THROW((void)rr.push("12345678", 0), std::logic_error);  // no session
  const auto answer = [](const std::byte*, int, std::byte*) {};
  rr.begin(8, 8);
  EXPECT_THROW(rr.begin(8, 8), std::logic_error);  // still running
  EXPECT_THROW((void)rr.push("12345678", world_size()), std::out_of_range);
  while (rr.advance(true, answer)) {
  }
  EXPECT_FALSE(rr.running());
}

}  // namespace
}  // namespace netsparse::dist
