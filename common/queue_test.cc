// The module queue: bulk pops, close-to-stop, and a bound that makes the
// producer wait for the consumer instead of growing.
#include "common/queue.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace rocefab {
namespace {

TEST(Queue, PopsInBulkAndStopsWhenClosedAndDrained) {
  Queue<int> q;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q.Push(i), 0);
  std::vector<int> out;
  EXPECT_TRUE(q.PopAll(&out, std::chrono::microseconds(0), 3));
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2}));
  q.Close();
  EXPECT_EQ(q.Push(9), -1) << "a closed queue drops";
  out.clear();
  EXPECT_TRUE(q.PopAll(&out, std::chrono::seconds(1)));
  EXPECT_EQ(out, (std::vector<int>{3, 4}));
  out.clear();
  EXPECT_FALSE(q.PopAll(&out, std::chrono::seconds(1)));
}

TEST(Queue, AFullQueueHoldsTheProducerUntilTheConsumerTakes) {
  Queue<int> q(10);
  EXPECT_EQ(q.Push(1, 6), 0);
  EXPECT_EQ(q.Push(2, 6), 0);  // 12 >= 10: full now
  std::promise<int64_t> waited;
  std::thread producer([&] { waited.set_value(q.Push(3, 1)); });
  auto future = waited.get_future();
  EXPECT_EQ(future.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "the producer must wait while the queue is full";
  std::vector<int> out;
  ASSERT_TRUE(q.PopAll(&out, std::chrono::seconds(1), 1));
  EXPECT_GE(future.get(), 0);
  producer.join();
  EXPECT_EQ(q.weight(), 7u);
}

TEST(Queue, ClosingReleasesAWaitingProducer) {
  Queue<int> q(1);
  q.Push(1);
  auto pushed = std::async(std::launch::async, [&] { return q.Push(2); });
  q.Close();
  EXPECT_EQ(pushed.get(), -1);
}

}  // namespace
}  // namespace rocefab
