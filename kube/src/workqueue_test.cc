// The work queue: dedup, re-adds while processing, rate-limited backoff, delayed adds,
// shutdown.
#include <gtest/gtest.h>

#include <future>

#include "star/kube/workqueue.h"

namespace star::kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueueTest, AKeyAddedTwiceIsQueuedOnce) {
  WorkQueue q;
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(1s), "a");
  EXPECT_EQ(q.Get(1s), "b");
  EXPECT_EQ(q.Get(0ms), std::nullopt);
}

TEST(WorkQueueTest, AKeyAddedWhileProcessingIsQueuedAgainAfterDone) {
  WorkQueue q;
  q.Add("a");
  ASSERT_EQ(q.Get(1s), "a");
  q.Add("a");
  q.Add("a");
  EXPECT_EQ(q.Len(), 0u) << "not handed out twice at once";
  EXPECT_EQ(q.Get(0ms), std::nullopt);
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(q.Get(1s), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, AStrayDoneDoesNotQueueAKeyTwice) {
  WorkQueue q;
  q.Add("a");
  q.Done("a");  // "a" is queued, not being processed
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(q.Get(1s), "a");
  EXPECT_EQ(q.Get(0ms), std::nullopt);
}

TEST(WorkQueueTest, RateLimitedBackoffDoublesUpToTheCapAndForgetResetsIt) {
  WorkQueue q(WorkQueue::Options{10ms, 100ms});
  EXPECT_EQ(q.NextBackoff("a"), 10ms);
  std::vector<std::chrono::milliseconds> delays;
  for (int i = 0; i < 6; ++i) {
    delays.push_back(q.NextBackoff("a"));
    q.AddRateLimited("a");
  }
  EXPECT_EQ(delays, (std::vector<std::chrono::milliseconds>{10ms, 20ms, 40ms, 80ms, 100ms, 100ms}));
  EXPECT_EQ(q.Failures("a"), 6);
  EXPECT_EQ(q.Failures("b"), 0);
  EXPECT_EQ(q.Get(10s), "a") << "re-added once its backoff passed";
  q.Forget("a");
  EXPECT_EQ(q.Failures("a"), 0);
  EXPECT_EQ(q.NextBackoff("a"), 10ms);
}

TEST(WorkQueueTest, ARateLimitedKeyIsNotReadyAtOnce) {
  WorkQueue q(WorkQueue::Options{std::chrono::hours(1), std::chrono::hours(2)});
  q.AddRateLimited("a");
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(q.Get(0ms), std::nullopt);
  q.Add("a");
  EXPECT_EQ(q.Get(0ms), "a") << "a direct Add does not wait for the backoff";
}

TEST(WorkQueueTest, DelayedKeysComeOutInTheOrderTheyBecomeDue) {
  WorkQueue q;
  q.AddAfter("late", 400ms);
  q.AddAfter("soon", 100ms);
  q.Add("now");
  q.AddAfter("also-now", 0ms);
  EXPECT_EQ(q.Get(10s), "now");
  EXPECT_EQ(q.Get(10s), "also-now");
  EXPECT_EQ(q.Get(10s), "soon");
  EXPECT_EQ(q.Get(10s), "late");
}

TEST(WorkQueueTest, ShutDownUnblocksAWaitingGet) {
  WorkQueue q;
  auto got = std::async(std::launch::async, [&] { return q.Get(10s); });
  ASSERT_EQ(got.wait_for(50ms), std::future_status::timeout) << "Get waits while the queue is empty";
  q.ShutDown();
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), std::nullopt);
  q.Add("a");
  EXPECT_EQ(q.Get(0ms), std::nullopt) << "nothing after ShutDown";
}

}  // namespace
}  // namespace star::kube
