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

TEST(EventOfLoopEvent, AStragglerIsAWarningNamingTheWorkerAndItsClassification) {
  const EventSpec ev = EventOfLoopEvent(
      MakeStragglerEvent(1, 2, {api::StragglerCause::kCompute, api::StragglerKind::kStatic, 2.0071}));
  EXPECT_EQ(ev.type, "Warning");
  EXPECT_EQ(ev.reason, "StragglerDetected");
  EXPECT_EQ(ev.message, "worker 2: cause=compute kind=static slowdown=2.01");
}

TEST(EventOfLoopEvent, JobWideChangesNameTheModeAndTheBatches) {
  const EventSpec mode = EventOfLoopEvent(MakeModeEvent(1, {api::SyncMode::kFixedK, 3, {{0, 1, 3, 2}}}));
  EXPECT_EQ(mode.type, "Normal");
  EXPECT_EQ(mode.reason, "SyncModeChanged");
  EXPECT_EQ(mode.message, "mode fixed_k k=3 [[0,1,3,2]]");
  const EventSpec batches = EventOfLoopEvent(MakeBatchesEvent(1, {32, 32, 16, 48}));
  EXPECT_EQ(batches.reason, "BatchesRebalanced");
  EXPECT_EQ(batches.message, "local batches [32,32,16,48]");
}

TEST(EventOfLoopEvent, RecoveryAndAmpAreNormalEventsOfTheWorker) {
  EXPECT_EQ(EventOfLoopEvent(MakeRecoveredEvent(1, 3)).reason, "StragglerRecovered");
  EXPECT_EQ(EventOfLoopEvent(MakeRecoveredEvent(1, 3)).message, "worker 3 recovered");
  EXPECT_EQ(EventOfLoopEvent(MakeAmpEvent(1, 0, true)).reason, "AmpEnabled");
  EXPECT_EQ(EventOfLoopEvent(MakeAmpEvent(1, 0, false)).message, "worker 0: mixed precision off");
}

TEST(TrackStragglers, KeepsWhenAStragglerStartedAndItsLatestClassificationAndForgetsItOnRecovery) {
  std::map<int, TrackedStraggler> straggling;
  int calls = 0;
  auto now = [&] { return "t" + std::to_string(++calls); };
  TrackStragglers(MakeStragglerEvent(1, 1, {api::StragglerCause::kCompute, api::StragglerKind::kDynamic, 2}),
                  &straggling, now);
  const StragglerFields reclassified{api::StragglerCause::kCommunication, api::StragglerKind::kStatic, 3.456};
  TrackStragglers(MakeStragglerEvent(2, 1, reclassified), &straggling, now);
  TrackStragglers(MakeModeEvent(2, {api::SyncMode::kAsgd, 4, {}}), &straggling, now);
  ASSERT_EQ(straggling.size(), 1u);
  EXPECT_EQ(straggling[1].fields, reclassified);
  EXPECT_EQ(straggling[1].since, "t1");
  TrackStragglers(MakeRecoveredEvent(3, 1), &straggling, now);
  EXPECT_TRUE(straggling.empty());
}

TEST(StragglerStatusOf, TakesTheClassificationWithTheSlowdownRoundedToTwoDecimals) {
  const api::StragglerStatus s = StragglerStatusOf(
      2, {{api::StragglerCause::kCommunication, api::StragglerKind::kStatic, 2.4961}, "2025-01-01T00:00:00Z"});
  EXPECT_EQ(s.worker, 2);
  EXPECT_EQ(s.cause, api::StragglerCause::kCommunication);
  EXPECT_EQ(s.kind, api::StragglerKind::kStatic);
  EXPECT_DOUBLE_EQ(s.slowdown, 2.5);
  EXPECT_EQ(s.since, "2025-01-01T00:00:00Z");
}

}  // namespace
}  // namespace star::op
