// The control loop's accuracy curve, latest accuracy and time to accuracy.
#include <cmath>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "star/operator/control_loop.h"

namespace star::op {
namespace {

using Curve = std::vector<std::pair<double, double>>;

api::TrainingJobSpec Spec(std::optional<double> target) {
  api::TrainingJobSpec s;
  s.workers.replicas = 2;
  s.training.global_batch_size = 64;
  s.training.target_accuracy = target;
  return s;
}

JobControlLoop MakeLoop(const api::TrainingJobSpec& spec) {
  StatusOr<JobControlLoop> loop = JobControlLoop::Create(spec);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return std::move(loop).value();
}

api::WorkerReport Report(int worker, int64_t iteration, double t) {
  api::WorkerReport r;
  r.worker = worker;
  r.iteration = iteration;
  r.time_seconds = t;
  r.local_batch = 32;
  r.compute_seconds = 0.1;
  r.communication_seconds = 0.01;
  return r;
}

std::vector<TimelineEvent> TargetEvents(const JobControlLoop& loop) {
  std::vector<TimelineEvent> out;
  for (const TimelineEvent& e : loop.timeline()) {
    if (e.kind == EventKind::kTargetReached) out.push_back(e);
  }
  return out;
}

TEST(JobControlLoopAccuracy, CurveKeepsEveryAccuracyInArrivalOrderAndTheLatestIsTheAccuracy) {
  JobControlLoop loop = MakeLoop(Spec(0.9));
  EXPECT_TRUE(loop.accuracy_curve().empty());
  EXPECT_FALSE(loop.accuracy());
  ASSERT_TRUE(loop.ObserveAccuracy(10, 0.5).ok());
  ASSERT_TRUE(loop.ObserveAccuracy(20, 0.7).ok());
  ASSERT_TRUE(loop.ObserveAccuracy(15, 0.6).ok());  // arrived late: kept where it arrived
  EXPECT_EQ(loop.accuracy_curve(), (Curve{{10, 0.5}, {20, 0.7}, {15, 0.6}}));
  EXPECT_EQ(loop.accuracy(), 0.6);
  EXPECT_FALSE(loop.tta_seconds());
  EXPECT_TRUE(TargetEvents(loop).empty());
}

TEST(JobControlLoopAccuracy, TtaIsTheFirstCrossingAndLaterDipsDoNotUnsetIt) {
  JobControlLoop loop = MakeLoop(Spec(0.9));
  for (auto [t, a] : Curve{{10, 0.5}, {20, 0.9}, {30, 0.85}, {40, 0.95}}) {
    ASSERT_TRUE(loop.ObserveAccuracy(t, a).ok());
  }
  EXPECT_EQ(loop.tta_seconds(), 20.0) << "the target is reached at accuracy == target";
  EXPECT_EQ(loop.accuracy(), 0.95);
  // One event, at the crossing; the estimate becomes the measured TTA.
  const std::vector<TimelineEvent> events = TargetEvents(loop);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], MakeTargetReachedEvent(20, {0.9, 0.9}));
  EXPECT_EQ(EventDetail(events[0]), "accuracy >= 0.900");
  EXPECT_EQ(loop.estimated_tta_seconds(), 20.0);
  ASSERT_TRUE(loop.ObserveAccuracy(50, 0.1).ok());
  EXPECT_EQ(loop.tta_seconds(), 20.0);
  EXPECT_EQ(TargetEvents(loop).size(), 1u);
}

TEST(JobControlLoopAccuracy, WithoutATargetThereIsNoTta) {
  JobControlLoop loop = MakeLoop(Spec(std::nullopt));
  ASSERT_TRUE(loop.ObserveAccuracy(5, 0.99).ok());
  ASSERT_TRUE(loop.ObserveAccuracy(6, 1.0).ok());
  EXPECT_EQ(loop.accuracy_curve(), (Curve{{5, 0.99}, {6, 1.0}}));
  EXPECT_FALSE(loop.tta_seconds());
  EXPECT_FALSE(loop.estimated_tta_seconds());
  EXPECT_TRUE(loop.timeline().empty());
}

TEST(JobControlLoopAccuracy, BadValuesAreRefusedNamingTheFieldAndChangeNothing) {
  JobControlLoop loop = MakeLoop(Spec(0.5));
  ASSERT_TRUE(loop.ObserveAccuracy(1, 0.25).ok());
  const double nan = std::nan("");
  const struct {
    double t, accuracy;
    const char* message;
  } cases[] = {
      {nan, 0.9, "accuracy_time_seconds: must be finite and >= 0"},
      {-1, 0.9, "accuracy_time_seconds: must be finite and >= 0"},
      {INFINITY, 0.9, "accuracy_time_seconds: must be finite and >= 0"},
      {2, 1.5, "accuracy: must be finite and in [0, 1]"},
      {2, -0.1, "accuracy: must be finite and in [0, 1]"},
      {2, nan, "accuracy: must be finite and in [0, 1]"},
  };
  for (const auto& c : cases) {
    const Status s = loop.ObserveAccuracy(c.t, c.accuracy);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
  EXPECT_EQ(loop.accuracy_curve(), (Curve{{1, 0.25}}));
  EXPECT_FALSE(loop.tta_seconds());
  EXPECT_TRUE(loop.timeline().empty());
}

TEST(JobControlLoopAccuracy, AReportsAccuracyJoinsTheCurveAtItsMeasuredTimeOrTheReportsTime) {
  JobControlLoop loop = MakeLoop(Spec(0.8));
  api::WorkerReport r = Report(0, 10, 12);
  r.accuracy = 0.6;
  r.accuracy_time_seconds = 11.5;
  ASSERT_TRUE(loop.Observe(r).ok());
  api::WorkerReport untimed = Report(1, 10, 12.5);
  untimed.accuracy = 0.85;  // no accuracy_time_seconds: measured at time_seconds
  ASSERT_TRUE(loop.Observe(untimed).ok());
  EXPECT_EQ(loop.accuracy_curve(), (Curve{{11.5, 0.6}, {12.5, 0.85}}));
  EXPECT_EQ(loop.tta_seconds(), 12.5);
  EXPECT_EQ(loop.rounds(), 1) << "the timing of both reports counts as usual";
  ASSERT_TRUE(loop.Observe(Report(0, 12, 14)).ok());
  EXPECT_EQ(loop.accuracy_curve().size(), 2u) << "a report without accuracy adds none";
}

TEST(JobControlLoopAccuracy, AReportWithBadAccuracyIsRefusedWholeNamingTheField) {
  JobControlLoop loop = MakeLoop(Spec(0.8));
  ASSERT_TRUE(loop.Observe(Report(0, 10, 12)).ok());
  api::WorkerReport high = Report(1, 10, 12);
  high.accuracy = 1.2;
  api::WorkerReport early = Report(1, 10, 12);
  early.accuracy = 0.9;
  early.accuracy_time_seconds = -3;
  api::WorkerReport alone = Report(1, 10, 12);
  alone.accuracy_time_seconds = 3;
  const std::pair<api::WorkerReport, const char*> cases[] = {
      {high, "accuracy: must be finite and in [0, 1]"},
      {early, "accuracy_time_seconds: must be finite and >= 0"},
      {alone, "accuracy_time_seconds: only allowed with accuracy"}};
  for (const auto& [r, message] : cases) {
    auto d = loop.Observe(r);
    ASSERT_FALSE(d.ok()) << message;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(d.status().message(), message);
  }
  // Nothing changed: worker 1's report would have closed the first round.
  EXPECT_EQ(loop.rounds(), 0);
  EXPECT_TRUE(loop.accuracy_curve().empty());
  EXPECT_FALSE(loop.tta_seconds());
  EXPECT_TRUE(loop.timeline().empty());
}

}  // namespace
}  // namespace star::op
