#include "star/operator/reconciler/liveness.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ReconcileLiveness, AReconcileRunningPastTheLimitIsStuckUntilItEnds) {
  ReconcileLiveness live(2, seconds(300));
  const auto t0 = ReconcileLiveness::Clock::time_point() + seconds(1000);
  EXPECT_FALSE(live.Stuck(t0 + seconds(3600))) << "idle threads are never stuck";
  live.Begin(0, "ns/a", t0);
  live.Begin(1, "ns/b", t0 + seconds(20));
  EXPECT_FALSE(live.Stuck(t0 + seconds(300)));
  const std::optional<std::string> why = live.Stuck(t0 + seconds(312));
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "reconcile of ns/a running for 312 s (limit 300 s)");
  live.End(0);
  EXPECT_FALSE(live.Stuck(t0 + seconds(312))) << "ns/b has run 292 s: under the limit";
  live.End(1);
  live.Begin(1, "ns/c", t0 + seconds(400));
  EXPECT_FALSE(live.Stuck(t0 + seconds(400) + milliseconds(300000)));
  EXPECT_TRUE(live.Stuck(t0 + seconds(400) + milliseconds(300001)));
}

}  // namespace
}  // namespace star::op
