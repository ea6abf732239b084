#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "emulate/event_queue.hpp"

namespace {

using netsparse::emulate::EventQueue;
using netsparse::emulate::Picos;

TEST(EventQueue, RunsInTimeThenSchedulingOrder) {
  EventQueue q;
  std::vector<int> order;
  q.at(30, [&] { order.push_back(3); });
  q.at(10, [&] { order.push_back(1); });
  q.at(30, [&] { order.push_back(4); });  // same time: after the earlier-scheduled one
  q.at(20, [&] { order.push_back(2); });
  EXPECT_EQ(q.next_time(), 10u);
  EXPECT_EQ(q.run(), 4u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(q.now(), 30u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, ActionsScheduleMoreAndTimeNeverGoesBack) {
  EventQueue q;
  std::vector<std::pair<Picos, int>> log;
  q.at(5, [&] {
    log.emplace_back(q.now(), 0);
    q.after(0, [&] { log.emplace_back(q.now(), 2); });  // same time, runs after this one
    q.after(7, [&] { log.emplace_back(q.now(), 3); });
  });
  q.at(5, [&] { log.emplace_back(q.now(), 1); });
  q.run();
  EXPECT_EQ(log, (std::vector<std::pair<Picos, int>>{{5, 0}, {5, 1}, {5, 2}, {12, 3}}));
  EXPECT_THROW(q.at(11, [] {}), std::invalid_argument);
}

TEST(EventQueue, RunUntilStopsAtTheBound) {
  EventQueue q;
  int ran = 0;
  for (Picos t : {1, 2, 3, 10}) q.at(t, [&] { ++ran; });
  q.run_until(3);
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(q.now(), 3u);
  q.run_until(5);
  EXPECT_EQ(q.now(), 5u);
  EXPECT_EQ(q.pending(), 1u);
}

// Many events at random times (many ties): the order is by time, ties in scheduling order, and
// the same for two queues fed the same sequence.
TEST(EventQueue, OrderIsTotalAndReproducible) {
  auto trace = [](std::uint64_t seed) {
    EventQueue q;
    std::mt19937_64 rng(seed);
    std::vector<std::pair<Picos, int>> log;
    for (int i = 0; i < 5000; ++i) {
      const Picos t = rng() % 200;
      q.at(t, [&log, &q, i] { log.emplace_back(q.now(), i); });
    }
    q.run();
    return log;
  };
  const auto a = trace(7);
  EXPECT_EQ(a, trace(7));
  ASSERT_EQ(a.size(), 5000u);
  for (std::size_t i = 1; i < a.size(); ++i) {
    ASSERT_LE(a[i - 1].first, a[i].first);
    if (a[i - 1].first == a[i].first) {
      ASSERT_LT(a[i - 1].second, a[i].second);
    }
  }
}

}  // namespace
