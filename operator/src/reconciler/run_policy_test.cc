#include "star/operator/reconciler/run_policy.h"

#include <gtest/gtest.h>

#include "star/kube/time.h"

namespace star::op {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

TEST(TimeLeft, CountsFromTheGivenTime) {
  const auto start = kube::ParseRfc3339("2024-05-01T12:00:00Z");
  ASSERT_TRUE(start.has_value());
  EXPECT_EQ(TimeLeft("2024-05-01T12:00:00Z", 60, *start + std::chrono::seconds(20)), milliseconds(40000));
  EXPECT_EQ(TimeLeft("2024-05-01T12:00:00Z", 60, *start + std::chrono::seconds(90)), milliseconds(-30000));
  EXPECT_FALSE(TimeLeft("", 60, *start).has_value()) << "not started";
  EXPECT_FALSE(TimeLeft("noon", 60, *start).has_value());
}

TEST(SoonerWait, ZeroMeansNoRequeue) {
  EXPECT_EQ(SoonerWait(milliseconds(0), milliseconds(5)), milliseconds(5));
  EXPECT_EQ(SoonerWait(milliseconds(7), milliseconds(0)), milliseconds(7));
  EXPECT_EQ(SoonerWait(milliseconds(7), milliseconds(5)), milliseconds(5));
  EXPECT_EQ(SoonerWait(milliseconds(0), milliseconds(0)), milliseconds(0));
}

TEST(StatusTimes, StartTimeIsSetWhenPodsAreCreatedFromNoneAndGoesOnSuspend) {
  const std::string now = "2024-05-01T12:00:00Z";
  PhaseDecision create;
  create.phase = api::JobPhase::kCreated;
  create.action = JobPodsAction::kCreateMissing;
  EXPECT_EQ(StatusTimes(json::object(), create, now), (json{{"startTime", now}}));
  EXPECT_TRUE(StatusTimes({{"startTime", "2024-01-01T00:00:00Z"}}, create, now).empty())
      << "a gang restart keeps the start";

  PhaseDecision suspend;
  suspend.phase = api::JobPhase::kSuspended;
  EXPECT_EQ(StatusTimes({{"startTime", "2024-01-01T00:00:00Z"}}, suspend, now), (json{{"startTime", nullptr}}))
      << "the deadline counts from the resume, as batch/v1 Job's does";
  EXPECT_TRUE(StatusTimes(json::object(), suspend, now).empty());
}

TEST(StatusTimes, CompletionTimeIsSetOnceOnAFinish) {
  const std::string now = "2024-05-01T12:00:00Z";
  for (api::JobPhase phase : {api::JobPhase::kSucceeded, api::JobPhase::kFailed}) {
    PhaseDecision d;
    d.phase = phase;
    EXPECT_EQ(StatusTimes(json::object(), d, now), (json{{"completionTime", now}}));
    EXPECT_TRUE(StatusTimes({{"completionTime", "2024-01-01T00:00:00Z"}}, d, now).empty());
  }
  PhaseDecision running;
  running.phase = api::JobPhase::kRunning;
  EXPECT_TRUE(StatusTimes(json::object(), running, now).empty());
}

}  // namespace
}  // namespace star::op
