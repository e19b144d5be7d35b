#include "reconciler/loop_events.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

JobSnapshot LeftSsgdWithAStraggler(int64_t epoch) {
  JobSnapshot s;
  s.workers = 4;
  s.mode = api::SyncMode::kFixedK;
  s.epoch = epoch;
  s.stragglers.push_back({});
  return s;
}

TEST(NextReallocationStep, PlansOncePerDecisionEpochWhileRunningOutOfSsgdWithStragglers) {
  const auto snap = LeftSsgdWithAStraggler(3);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, snap, false, std::nullopt), ReallocationStep::kPlan);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, snap, false, 2), ReallocationStep::kPlan);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, snap, false, 3), ReallocationStep::kNone);
}

TEST(NextReallocationStep, UndoesAPlanWhenTheJobIsBackInSsgdOrNotRunning) {
  auto snap = LeftSsgdWithAStraggler(3);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kSucceeded, snap, true, 3), ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(false, api::JobPhase::kRunning, snap, true, 3), ReallocationStep::kUndo);
  snap.mode = api::SyncMode::kSsgd;
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, snap, true, 3), ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, std::nullopt, true, 3), ReallocationStep::kUndo);
}

TEST(NextReallocationStep, KeepsAPlanInForceAndPlansNothingWithoutStragglers) {
  auto snap = LeftSsgdWithAStraggler(3);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, snap, true, 1), ReallocationStep::kNone);
  snap.stragglers.clear();
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRunning, snap, false, std::nullopt), ReallocationStep::kNone);
}

TEST(EventOfLoopEvent, AStragglerIsAWarningNamingTheWorkerAndItsDetail) {
  TimelineEvent e;
  e.event = "straggler";
  e.worker = 2;
  e.detail = "cause=compute kind=static slowdown=2.01";
  const EventSpec ev = EventOfLoopEvent(e);
  EXPECT_EQ(ev.type, "Warning");
  EXPECT_EQ(ev.reason, "StragglerDetected");
  EXPECT_EQ(ev.message, "worker 2: cause=compute kind=static slowdown=2.01");
  EXPECT_TRUE(CallsForReallocation(e));
}

TEST(TrackStragglers, KeepsWhenAStragglerStartedAndForgetsItOnRecovery) {
  std::map<int, std::pair<std::string, std::string>> straggling;
  int calls = 0;
  auto now = [&] { return "t" + std::to_string(++calls); };
  TimelineEvent e;
  e.event = "straggler";
  e.worker = 1;
  e.detail = "a";
  TrackStragglers(e, &straggling, now);
  e.detail = "b";
  TrackStragglers(e, &straggling, now);
  EXPECT_EQ(straggling[1], std::make_pair(std::string("b"), std::string("t1")));
  e.event = "recovered";
  TrackStragglers(e, &straggling, now);
  EXPECT_TRUE(straggling.empty());
  EXPECT_FALSE(CallsForReallocation(e));
}

}  // namespace
}  // namespace star::op
