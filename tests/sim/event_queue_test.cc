#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace libra::sim {
namespace {

std::vector<std::string> Drain(EventQueue<std::string>& queue) {
  std::vector<std::string> out;
  while (!queue.empty()) out.push_back(queue.Pop().payload);
  return out;
}

TEST(EventQueueTest, OrdersByTimeThenRankThenInsertion) {
  // Earlier times first; at one time lower ranks first; at one time and rank, insertion order.
  EventQueue<std::string> queue;
  queue.Push(2.0, 0, "t2 r0");
  queue.Push(1.0, 3, "t1 r3 first");
  queue.Push(1.0, 1, "t1 r1");
  queue.Push(1.0, 3, "t1 r3 second");
  queue.Push(0.5, 9, "t0.5 r9");
  queue.Push(1.0, 3, "t1 r3 third");
  EXPECT_EQ(queue.size(), 6u);
  EXPECT_EQ(queue.next_time(), 0.5);
  EXPECT_EQ(Drain(queue), (std::vector<std::string>{"t0.5 r9", "t1 r1", "t1 r3 first",
                                                    "t1 r3 second", "t1 r3 third", "t2 r0"}));
}

TEST(EventQueueTest, PopAdvancesNowAndReturnsTheEntry) {
  // now() is 0 before the first pop and then the time of the last popped event; entries carry
  // their time, rank and insertion number.
  EventQueue<std::string> queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.now(), 0.0);
  queue.Push(3.0, 2, "a");
  queue.Push(1.5, 4, "b");
  const auto first = queue.Pop();
  EXPECT_EQ(first.payload, "b");
  EXPECT_EQ(first.at, 1.5);
  EXPECT_EQ(first.rank, 4);
  EXPECT_EQ(first.seq, 1u);
  EXPECT_EQ(queue.now(), 1.5);
  // Pushing at the current time is allowed and comes before later events.
  queue.Push(1.5, 9, "c");
  EXPECT_EQ(queue.Pop().payload, "c");
  EXPECT_EQ(queue.Pop().payload, "a");
  EXPECT_EQ(queue.now(), 3.0);
  EXPECT_TRUE(queue.empty());
}

TEST(EventQueueTest, InsertionOrderSurvivesInterleavedPops) {
  // Insertion numbers keep growing across pops, so ties stay first-in first-out.
  EventQueue<std::string> queue;
  queue.Push(1.0, 0, "a");
  queue.Push(0.0, 0, "start");
  EXPECT_EQ(queue.Pop().payload, "start");
  queue.Push(1.0, 0, "b");
  queue.Push(1.0, 0, "c");
  EXPECT_EQ(Drain(queue), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(EventQueueTest, PopsInKeyOrderUnderRandomPushesAndPops) {
  // Thousands of interleaved pushes and pops, with many equal times and ranks: every pop is the
  // least (time, rank, insertion) of what is queued, as a sorted reference says.
  EventQueue<int> queue;
  std::vector<std::tuple<double, int, int>> queued;  // (time, rank, insertion)
  std::mt19937 rng(7);
  int pushed = 0;
  int popped = 0;
  for (int round = 0; round < 20000; ++round) {
    if (queued.empty() || rng() % 3 != 0) {
      const double at = queue.now() + static_cast<double>(rng() % 16) * 0.25;
      const int rank = static_cast<int>(rng() % 4);
      queue.Push(at, rank, pushed);
      queued.emplace_back(at, rank, pushed++);
    } else {
      const auto least = std::min_element(queued.begin(), queued.end());
      const auto entry = queue.Pop();
      ASSERT_EQ(entry.payload, std::get<2>(*least)) << "pop " << popped;
      EXPECT_EQ(entry.at, std::get<0>(*least));
      EXPECT_EQ(entry.rank, std::get<1>(*least));
      EXPECT_EQ(entry.seq, static_cast<uint64_t>(std::get<2>(*least)));
      queued.erase(least);
      ++popped;
    }
    ASSERT_EQ(queue.size(), queued.size());
  }
  EXPECT_GT(popped, 5000);
}

TEST(EventQueueDeathTest, PushingInThePastAborts) {
  // An event before the last popped time would break causality: it is a bug and aborts.
  EventQueue<std::string> queue;
  queue.Push(5.0, 0, "x");
  queue.Pop();
  EXPECT_DEATH(queue.Push(4.0, 0, "late"), "check failed: at >= now_: event at 4 is before now 5");
}

}  // namespace
}  // namespace libra::sim
