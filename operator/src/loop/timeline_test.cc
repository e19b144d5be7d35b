#include "star/operator/timeline.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

// The strings below are the `star local` report's timeline contract: they must not change.

TEST(TimelineEvent, StragglerRendersCauseKindAndSlowdownToTwoDecimals) {
  const TimelineEvent e = MakeStragglerEvent(
      12.5, 2, {api::StragglerCause::kCompute, api::StragglerKind::kStatic, 2.0149});
  EXPECT_EQ(e.kind, EventKind::kStraggler);
  EXPECT_EQ(EventName(e.kind), "straggler");
  EXPECT_EQ(e.worker, 2);
  EXPECT_EQ(e.t, 12.5);
  EXPECT_EQ(EventDetail(e), "cause=compute kind=static slowdown=2.01");
  EXPECT_EQ(e.straggler.slowdown, 2.0149) << "the typed slowdown is not rounded";
  const TimelineEvent c = MakeStragglerEvent(
      1, 0, {api::StragglerCause::kCommunication, api::StragglerKind::kDynamic, 3});
  EXPECT_EQ(EventDetail(c), "cause=communication kind=dynamic slowdown=3");
}

TEST(TimelineEvent, RecoveredAndAmpEventsHaveNoDetail) {
  EXPECT_EQ(EventName(MakeRecoveredEvent(1, 3).kind), "recovered");
  EXPECT_EQ(EventName(MakeAmpEvent(1, 3, true).kind), "amp_on");
  EXPECT_EQ(EventName(MakeAmpEvent(1, 3, false).kind), "amp_off");
  EXPECT_EQ(MakeAmpEvent(1, 3, false).kind, EventKind::kAmpOff);
  for (const TimelineEvent& e : {MakeRecoveredEvent(1, 3), MakeAmpEvent(1, 3, true)}) {
    EXPECT_EQ(EventDetail(e), "");
    EXPECT_EQ(e.worker, 3);
  }
}

TEST(TimelineEvent, ModeRendersKAndGroupsOnlyForFixedKAndGroups) {
  EXPECT_EQ(EventDetail(MakeModeEvent(1, {api::SyncMode::kSsgd, 4, {}})), "ssgd k=4");
  EXPECT_EQ(EventDetail(MakeModeEvent(1, {api::SyncMode::kAsgd, 1, {}})), "asgd k=1");
  EXPECT_EQ(EventDetail(MakeModeEvent(1, {api::SyncMode::kFixedK, 3, {{0, 1, 3, 2}}})),
            "fixed_k k=3 [[0,1,3,2]]");
  const TimelineEvent g = MakeModeEvent(1, {api::SyncMode::kGroups, 4, {{0, 1}, {2}}});
  EXPECT_EQ(EventDetail(g), "groups k=4 [[0,1],[2]]");
  EXPECT_EQ(EventName(g.kind), "mode");
  EXPECT_EQ(g.worker, -1);
  EXPECT_EQ(g.mode.groups, (std::vector<std::vector<int>>{{0, 1}, {2}}));
}

TEST(TimelineEvent, BatchesRenderAsAList) {
  const TimelineEvent e = MakeBatchesEvent(1, {32, 32, 16, 48});
  EXPECT_EQ(EventName(e.kind), "batches");
  EXPECT_EQ(e.worker, -1);
  EXPECT_EQ(EventDetail(e), "[32,32,16,48]");
  EXPECT_EQ(e.batches, (std::vector<int64_t>{32, 32, 16, 48}));
}

TEST(TimelineEvent, TargetReachedRendersTheTargetAsTheRuntimeDid) {
  const TimelineEvent e = MakeTargetReachedEvent(41.5, {0.8125, 0.8});
  EXPECT_EQ(EventName(e.kind), "target_reached");
  EXPECT_EQ(e.worker, -1);
  EXPECT_EQ(e.t, 41.5);
  EXPECT_EQ(EventDetail(e), "accuracy >= 0.800");
  EXPECT_EQ(e.target, (TargetFields{0.8125, 0.8}));
}

TEST(TimelineEvent, SelectorFallbackIsAJobWideEventWhoseDetailIsTheReason) {
  const TimelineEvent e = MakeSelectorFallbackEvent(0, "cannot open /m.json");
  EXPECT_EQ(EventName(e.kind), "selector_fallback");
  EXPECT_EQ(e.worker, -1);
  EXPECT_EQ(e.t, 0);
  EXPECT_EQ(EventDetail(e), "cannot open /m.json");
}

TEST(TimelineEvent, ScheduleNamesTheDepthsThePredictionAndTheSlowLinksStages) {
  const TimelineEvent e = MakeScheduleEvent(12.5, {{8, 8, 2, 1}, 0.2951, 0.3366, 1});
  EXPECT_EQ(EventName(e.kind), "schedule");
  EXPECT_EQ(e.worker, -1);
  EXPECT_EQ(EventDetail(e), "warmup=[8,8,2,1] predicted=0.295s static=0.337s slow_link=stage1-stage2");
  const TimelineEvent back = MakeScheduleEvent(20, {{}, 0.2, 0.2, -1});
  EXPECT_EQ(EventDetail(back), "warmup=static predicted=0.200s static=0.200s");
}

TEST(TimelineEvent, EveryKindHasANameAndOnlyItsFieldsMakeADetail) {
  for (EventKind k : {EventKind::kStraggler, EventKind::kRecovered, EventKind::kMode,
                      EventKind::kAmpOn, EventKind::kAmpOff, EventKind::kBatches,
                      EventKind::kTargetReached, EventKind::kSelectorFallback, EventKind::kSchedule}) {
    TimelineEvent e;
    e.kind = k;
    e.batches = {1, 2};
    e.reason = "why";
    EXPECT_NE(EventName(k), "unknown");
    EXPECT_EQ(EventDetail(e).empty(),
              k == EventKind::kRecovered || k == EventKind::kAmpOn || k == EventKind::kAmpOff)
        << EventName(k);
  }
}

}  // namespace
}  // namespace star::op
