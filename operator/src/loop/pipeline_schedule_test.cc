// The loop on a 4-stage pipeline whose stages report their costs (api::PipelineReading):
// a slow link between two stages gets the pipeline model's warm-up depths, and the
// static schedule back when it recovers.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "star/core/pipeline/schedule.h"
#include "star/operator/control_loop.h"

namespace star::op {
namespace {

constexpr int kStages = 4, kMicro = 8, kWindow = 10;
constexpr double kCleanLink = 0.0003;  // seconds to send one message
constexpr double kSlowLink = 0.026;    // 32 KB through 10 Mbit/s
// Per stage, one micro-batch's forward and backward (the first stage holds the widest layer).
const pipeline::StageCost kStage[kStages] = {{0.007, 0.013}, {0.0025, 0.0045}, {0.0025, 0.0045}, {0.001, 0.002}};

api::TrainingJobSpec Spec(api::SyncPolicy policy = api::SyncPolicy::kAuto) {
  api::TrainingJobSpec s;
  s.workers.replicas = kStages;
  s.training.global_batch_size = 256;
  s.synchronization.policy = policy;
  s.parallelism = {kStages, kMicro, std::nullopt};
  s.mitigation.detection.window = kWindow;
  return s;
}

// The link between stages i and i + 1: `slow_link` is slow both ways, the others clean.
double LinkSeconds(int i, int slow_link) { return i == slow_link ? kSlowLink : kCleanLink; }

pipeline::PipelineCosts Costs(int slow_link);

// How long an iteration takes under the depths in force (empty: static).
using IterationTime = std::function<double(const std::vector<int>& warmup)>;

// Reports of iterations [from, to) from every stage, each stage's iteration taking
// `time` of the depths in force (the loop's latest decision from its apply iteration on);
// `slow_link` -1 for none.
void RunStages(JobControlLoop& loop, int64_t from, int64_t to, int slow_link, const IterationTime& time) {
  for (int64_t i = from; i < to; ++i) {
    const api::Decision* d = loop.current();
    const std::vector<int> warmup = d != nullptr && i >= d->apply_at_iteration ? d->warmup : std::vector<int>{};
    for (int w = 0; w < kStages; ++w) {
      const pipeline::StageCost& c = kStage[w];
      api::WorkerReport r;
      r.worker = w;
      r.iteration = i;
      r.time_seconds = 0.3 * static_cast<double>(i);
      r.local_batch = 256;
      r.compute_seconds = time(warmup);
      api::PipelineReading p{w, c.forward_seconds, c.backward_seconds, {}};
      if (w > 0) p.links.push_back({w - 1, LinkSeconds(w - 1, slow_link), 32768, 0});
      if (w < kStages - 1) p.links.push_back({w + 1, LinkSeconds(w, slow_link), 32768, 0});
      r.pipeline = p;
      ASSERT_TRUE(loop.Observe(r).ok());
    }
  }
}

// Iterations as the model has them for these links.
IterationTime AsModelled(int slow_link) {
  return [slow_link](const std::vector<int>& warmup) {
    const std::vector<int> w = warmup.empty() ? pipeline::OneFOneB(kStages, kMicro) : warmup;
    return *pipeline::IterationSeconds(Costs(slow_link), w);
  };
}

// Iterations the depths do not change (a link that bounds them by its throughput).
IterationTime Unchanged(double seconds) {
  return [seconds](const std::vector<int>&) { return seconds; };
}

void RunStages(JobControlLoop& loop, int64_t from, int64_t to, int slow_link) {
  RunStages(loop, from, to, slow_link, AsModelled(slow_link));
}

pipeline::PipelineCosts Costs(int slow_link) {
  pipeline::PipelineCosts c;
  c.stages.assign(kStage, kStage + kStages);
  for (int i = 0; i + 1 < kStages; ++i) c.links.push_back({LinkSeconds(i, slow_link), LinkSeconds(i, slow_link)});
  c.micro_batches = kMicro;
  return c;
}

std::vector<TimelineEvent> Schedules(const JobControlLoop& loop) {
  std::vector<TimelineEvent> out;
  for (const TimelineEvent& e : loop.timeline()) {
    if (e.kind == EventKind::kSchedule) out.push_back(e);
  }
  return out;
}

TEST(PipelineSchedule, ASlowLinkGetsTheModelsDepthsAndTheStaticScheduleBackWhenItRecovers) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunStages(*loop, 1, 40, -1);
  EXPECT_EQ(loop->current(), nullptr) << "a clean pipeline keeps its static schedule";

  RunStages(*loop, 40, 100, 1);
  auto plan = pipeline::ChooseWarmup(Costs(1), std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_LT(plan->predicted_seconds, 0.95 * plan->static_seconds) << "the scenario must pay";
  ASSERT_NE(loop->current(), nullptr);
  const api::Decision adapted = *loop->current();
  EXPECT_EQ(adapted.warmup, plan->warmup);
  EXPECT_DOUBLE_EQ(adapted.predicted_iteration_seconds, plan->predicted_seconds);
  EXPECT_EQ(adapted.slow_link, 1) << "the decision names the link its depths absorb";
  EXPECT_EQ(adapted.mode, api::SyncMode::kSsgd) << "a pipeline's stages are never split by a mode";
  EXPECT_GT(adapted.apply_at_iteration, 40);
  std::vector<TimelineEvent> events = Schedules(*loop);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].schedule.warmup, plan->warmup);
  EXPECT_EQ(events[0].schedule.slow_link, 1);
  EXPECT_NE(EventDetail(events[0]).find("slow_link=stage1-stage2"), std::string::npos) << EventDetail(events[0]);

  RunStages(*loop, 100, 160, -1);
  ASSERT_NE(loop->current(), nullptr);
  EXPECT_TRUE(loop->current()->warmup.empty()) << "back to the static schedule";
  EXPECT_EQ(loop->current()->slow_link, -1);
  EXPECT_GT(loop->current()->epoch, adapted.epoch);
  events = Schedules(*loop);
  ASSERT_EQ(events.size(), 2u) << "no flapping on steady costs";
  EXPECT_TRUE(events[1].schedule.warmup.empty());
}

// Iterations as the model has them plus `outside` seconds of work outside the schedule.
IterationTime ModelledPlus(int slow_link, double outside) {
  return [modelled = AsModelled(slow_link), outside](const std::vector<int>& warmup) {
    return modelled(warmup) + outside;
  };
}

TEST(PipelineSchedule, WorkOutsideTheScheduleCountsInEveryPrediction) {
  auto plan = pipeline::ChooseWarmup(Costs(1), std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double saved = plan->static_seconds - plan->predicted_seconds;
  ASSERT_GT(saved, 0);

  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunStages(*loop, 1, 100, 1, ModelledPlus(1, 0.05));
  ASSERT_NE(loop->current(), nullptr);
  EXPECT_EQ(loop->current()->warmup, plan->warmup);
  EXPECT_NEAR(loop->current()->predicted_iteration_seconds, plan->predicted_seconds + 0.05, 1e-9)
      << "the prediction is of a whole iteration";
  const std::vector<TimelineEvent> events = Schedules(*loop);
  ASSERT_FALSE(events.empty());
  EXPECT_NEAR(events[0].schedule.static_seconds, plan->static_seconds + 0.05, 1e-9);

  // The same saving is under the 5% gain of an iteration 40 times as long as it.
  auto slow = JobControlLoop::Create(Spec());
  ASSERT_TRUE(slow.ok()) << slow.status();
  RunStages(*slow, 1, 100, 1, ModelledPlus(1, 40 * saved));
  EXPECT_EQ(slow->current(), nullptr) << "no change for a saving the iteration hardly sees";
}

TEST(PipelineSchedule, DepthsMeasuredNoFasterGiveWayToTheStaticScheduleForADoublingHold) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunStages(*loop, 1, 300, 1, Unchanged(0.275));
  const std::vector<TimelineEvent> events = Schedules(*loop);
  ASSERT_GE(events.size(), 4u);
  EXPECT_FALSE(events[0].schedule.warmup.empty());
  EXPECT_TRUE(events[1].schedule.warmup.empty());
  EXPECT_DOUBLE_EQ(events[1].schedule.measured_seconds, 0.275);
  EXPECT_DOUBLE_EQ(events[1].schedule.measured_static_seconds, 0.275);
  EXPECT_NE(EventDetail(events[1]).find("measured=0.275s measured_static=0.275s"), std::string::npos)
      << EventDetail(events[1]);
  // 0.3 s per round: a trial of 2 windows, then holds of 4 and 8 windows.
  EXPECT_GE(events[1].t - events[0].t, 2 * kWindow * 0.3 - 1e-9);
  EXPECT_GE(events[2].t - events[1].t, 4 * kWindow * 0.3 - 1e-9);
  EXPECT_TRUE(events[3].schedule.warmup.empty());
  if (events.size() > 4) {
    EXPECT_GE(events[4].t - events[3].t, 8 * kWindow * 0.3 - 1e-9);
  }
}

TEST(PipelineSchedule, AStaticPolicyKeepsTheScheduleWhateverTheLinks) {
  auto loop = JobControlLoop::Create(Spec(api::SyncPolicy::kSsgd));
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunStages(*loop, 1, 100, 1);
  EXPECT_TRUE(Schedules(*loop).empty());
  EXPECT_TRUE(loop->current() == nullptr || loop->current()->warmup.empty());
}

TEST(PipelineSchedule, NothingIsDecidedUntilEveryStageReportedItsCosts) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  for (int64_t i = 1; i < 100; ++i) {
    for (int w = 0; w < kStages; ++w) {
      api::WorkerReport r;
      r.worker = w;
      r.iteration = i;
      r.time_seconds = 0.3 * static_cast<double>(i);
      r.local_batch = 256;
      r.compute_seconds = 0.1;
      api::PipelineReading p;
      p.stage = w;
      p.forward_seconds = 0.004;
      p.backward_seconds = 0.008;
      if (w != 2) r.pipeline = p;
      ASSERT_TRUE(loop->Observe(r).ok());
    }
  }
  EXPECT_TRUE(Schedules(*loop).empty());
}

TEST(PipelineSchedule, ResumingADecisionWithTheWrongNumberOfDepthsIsRefused) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  api::Decision d;
  d.epoch = 3;
  d.k = kStages;
  for (int w = 0; w < kStages; ++w) d.workers.push_back({w, false, 64});
  d.warmup = {3, 2, 1};
  EXPECT_EQ(loop->Resume(d).message(), "decision.warmup: must have one depth per pipeline stage (4), got 3");
  d.warmup = {8, 8, 2, 1};
  d.predicted_iteration_seconds = 0.3;
  EXPECT_TRUE(loop->Resume(d).ok());
}

TEST(PipelineSchedule, AResumedScheduleStaysWhileTheLinkIsSlowAndGoesWhenItRecovers) {
  auto plan = pipeline::ChooseWarmup(Costs(1), std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  api::Decision d;
  d.epoch = 3;
  d.k = kStages;
  for (int w = 0; w < kStages; ++w) d.workers.push_back({w, false, 64});
  d.warmup = plan->warmup;
  d.predicted_iteration_seconds = plan->predicted_seconds;
  d.slow_link = 1;
  for (int slow_link : {1, -1}) {
    auto loop = JobControlLoop::Create(Spec());
    ASSERT_TRUE(loop.ok()) << loop.status();
    ASSERT_TRUE(loop->Resume(d).ok());
    RunStages(*loop, 1, 80, slow_link);
    ASSERT_NE(loop->current(), nullptr);
    if (slow_link >= 0) {
      EXPECT_EQ(*loop->current(), d) << "the restarted loop keeps the depths in force";
    } else {
      EXPECT_TRUE(loop->current()->warmup.empty()) << "the link recovered: back to the static schedule";
      EXPECT_GT(loop->current()->epoch, d.epoch);
    }
  }
}

}  // namespace
}  // namespace star::op
