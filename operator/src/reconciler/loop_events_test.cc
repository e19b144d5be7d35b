#include "reconciler/loop_events.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

// A job whose loop (number `loop`) asks at `revision` for `needs` (workers 0.. in order).
JobSnapshot Needing(int64_t loop, int64_t revision, int needs) {
  JobSnapshot s;
  s.workers = 4;
  s.loop = loop;
  s.needs.revision = revision;
  for (int w = 0; w < needs; ++w) s.needs.workers.push_back({w, api::StragglerCause::kCompute, 2.0});
  return s;
}

constexpr api::JobPhase kRunning = api::JobPhase::kRunning;

TEST(NextReallocationStep, PlansEachNewRequestThatListsWorkersWhateverTheSyncMode) {
  JobSnapshot snap = Needing(1, 1, 1);
  EXPECT_EQ(snap.mode, api::SyncMode::kSsgd);
  EXPECT_EQ(NextReallocationStep(true, kRunning, snap, false, std::nullopt), ReallocationStep::kPlan);
  EXPECT_EQ(NextReallocationStep(true, kRunning, snap, false, NeedsRevision{1, 1}), ReallocationStep::kNone)
      << "acted on already";
  snap = Needing(1, 2, 2);
  EXPECT_EQ(NextReallocationStep(true, kRunning, snap, true, NeedsRevision{1, 1}), ReallocationStep::kPlan)
      << "the request changed: planned again";
  EXPECT_EQ(NextReallocationStep(true, kRunning, snap, true, NeedsRevision{7, 2}), ReallocationStep::kPlan)
      << "the same revision of another (older) loop";
}

TEST(NextReallocationStep, UndoesAPlanWhenTheRequestBecomesEmpty) {
  EXPECT_EQ(NextReallocationStep(true, kRunning, Needing(1, 2, 0), true, NeedsRevision{1, 1}),
            ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(true, kRunning, Needing(1, 2, 0), false, NeedsRevision{1, 1}),
            ReallocationStep::kNone)
      << "no plan to undo";
}

TEST(NextReallocationStep, UndoesAPlanWhenTheJobStopsRunningOrReallocationIsOffOrTheJobIsGone) {
  const JobSnapshot snap = Needing(1, 1, 1);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRestarting, snap, true, NeedsRevision{1, 1}),
            ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kSucceeded, snap, true, NeedsRevision{1, 1}),
            ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(false, kRunning, snap, true, NeedsRevision{1, 1}), ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(true, kRunning, std::nullopt, true, NeedsRevision{1, 1}), ReallocationStep::kUndo);
  EXPECT_EQ(NextReallocationStep(true, api::JobPhase::kRestarting, snap, false, std::nullopt), ReallocationStep::kNone);
}

TEST(NextReallocationStep, KeepsAPlanWhileANewLoopHasAskedNothingYet) {
  // A restarted operator (nothing acted on) or a replaced loop: revision 0, empty.
  EXPECT_EQ(NextReallocationStep(true, kRunning, Needing(2, 0, 0), true, std::nullopt), ReallocationStep::kNone);
  EXPECT_EQ(NextReallocationStep(true, kRunning, Needing(2, 0, 0), true, NeedsRevision{1, 3}), ReallocationStep::kNone);
  EXPECT_EQ(NextReallocationStep(true, kRunning, Needing(2, 1, 1), true, std::nullopt), ReallocationStep::kPlan);
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

TEST(EventOfLoopEvent, TargetReachedNamesTheAccuracyTheTargetAndTheJobTime) {
  const EventSpec ev = EventOfLoopEvent(MakeTargetReachedEvent(312.46, {0.8512, 0.85}));
  EXPECT_EQ(ev.type, "Normal");
  EXPECT_EQ(ev.reason, "TargetAccuracyReached");
  EXPECT_EQ(ev.message, "accuracy 0.851 reached the target 0.850 at 312.5 s");
}

TEST(EventOfLoopEvent, ASelectorFallbackIsAWarningNamingWhyTheLearnedSelectorIsUnavailable) {
  const EventSpec ev = EventOfLoopEvent(MakeSelectorFallbackEvent(0, "cannot open /m.json"));
  EXPECT_EQ(ev.type, "Warning");
  EXPECT_EQ(ev.reason, "LearnedSelectorUnavailable");
  EXPECT_EQ(ev.message,
            "selector ML: the learned selector is unavailable (cannot open /m.json); the heuristic "
            "selects the mode");
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
