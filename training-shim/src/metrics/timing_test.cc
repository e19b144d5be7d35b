#include "star/shim/timing.h"

#include <vector>

#include <gtest/gtest.h>

namespace star::shim {
namespace {

// A clock the test moves by hand; binary fractions keep the arithmetic exact.
struct FakeClock {
  double t = 100.0;
  std::function<double()> fn() {
    return [this] { return t; };
  }
};

IterationTimer MakeTimer(FakeClock& clock) {
  IterationTimerOptions o;
  o.job = "ns/job";
  o.worker = 3;
  o.now = clock.fn();
  return IterationTimer(o);
}

TEST(SquaredL2Norm, SumsSquaresInDouble) {
  std::vector<float> v = {3.0f, -4.0f, 0.5f};
  EXPECT_EQ(SquaredL2Norm(v), 25.25);
  EXPECT_EQ(SquaredL2Norm({}), 0.0);
  std::vector<float> odd(17);  // two full blocks of eight and a tail of one
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<float>(i + 1);
  EXPECT_EQ(SquaredL2Norm(odd), 17.0 * 18 * 35 / 6);
}

TEST(IterationTimer, SumsSegmentsOfEachPhaseInOneIteration) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  ASSERT_TRUE(timer.BeginCompute().ok());
  clock.t += 0.25;
  ASSERT_TRUE(timer.EndCompute().ok());
  ASSERT_TRUE(timer.BeginCommunication().ok());
  clock.t += 0.125;
  ASSERT_TRUE(timer.EndCommunication().ok());
  clock.t += 1.0;  // outside any phase: not counted
  ASSERT_TRUE(timer.BeginCompute().ok());
  clock.t += 0.5;
  ASSERT_TRUE(timer.EndCompute().ok());
  ASSERT_TRUE(timer.AddWait(0.0625).ok());  // wait outside communication: only wait

  StatusOr<IterationSample> s = timer.EndIteration({.iteration = 7, .local_batch = 32});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->compute_seconds, 0.75);
  EXPECT_EQ(s->communication_seconds, 0.125);
  EXPECT_EQ(s->wait_seconds, 0.0625);
  EXPECT_EQ(s->iteration_seconds(), 0.875);
  EXPECT_EQ(s->info.iteration, 7);
}

TEST(IterationTimer, WaitInsideCommunicationIsTakenOutOfCommunication) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  ASSERT_TRUE(timer.BeginCommunication().ok());
  clock.t += 1.0;
  ASSERT_TRUE(timer.AddWait(0.75).ok());
  ASSERT_TRUE(timer.EndCommunication().ok());
  StatusOr<IterationSample> s = timer.EndIteration({.iteration = 0, .local_batch = 1});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->communication_seconds, 0.25);
  EXPECT_EQ(s->wait_seconds, 0.75);
}

TEST(IterationTimer, OverReportedWaitClampsCommunicationAtZero) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  ASSERT_TRUE(timer.BeginCommunication().ok());
  clock.t += 0.5;
  ASSERT_TRUE(timer.AddWait(2.0).ok());
  ASSERT_TRUE(timer.EndCommunication().ok());
  StatusOr<IterationSample> s = timer.EndIteration({.iteration = 0, .local_batch = 1});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->communication_seconds, 0.0);
  EXPECT_EQ(s->wait_seconds, 2.0);
}

TEST(IterationTimer, OverlappingComputeAndCommunicationAreEachCountedInFull) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  ASSERT_TRUE(timer.BeginCompute().ok());
  clock.t += 0.5;
  ASSERT_TRUE(timer.BeginCommunication().ok());
  clock.t += 0.25;
  ASSERT_TRUE(timer.EndCompute().ok());
  clock.t += 0.25;
  ASSERT_TRUE(timer.EndCommunication().ok());
  StatusOr<IterationSample> s = timer.EndIteration({.iteration = 0, .local_batch = 1});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->compute_seconds, 0.75);
  EXPECT_EQ(s->communication_seconds, 0.5);
}

TEST(IterationTimer, MisuseFailsAndChangesNothing) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  EXPECT_EQ(timer.EndCompute().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(timer.EndCommunication().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(timer.AddWait(-1).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(timer.BeginCompute().ok());
  EXPECT_EQ(timer.BeginCompute().code(), StatusCode::kFailedPrecondition);
  StatusOr<IterationSample> open = timer.EndIteration({.iteration = 0, .local_batch = 1});
  EXPECT_EQ(open.status().code(), StatusCode::kFailedPrecondition);
  clock.t += 0.5;
  ASSERT_TRUE(timer.EndCompute().ok());

  StatusOr<IterationSample> bad_batch = timer.EndIteration({.iteration = 0, .local_batch = 0});
  EXPECT_EQ(bad_batch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_batch.status().message().find("local_batch"), std::string::npos);
  StatusOr<IterationSample> bad_iter = timer.EndIteration({.iteration = -1, .local_batch = 1});
  EXPECT_NE(bad_iter.status().message().find("iteration"), std::string::npos);
  EXPECT_EQ(timer.pending_iterations(), 0);

  StatusOr<IterationSample> s = timer.EndIteration({.iteration = 0, .local_batch = 1});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->compute_seconds, 0.5);
}

TEST(IterationTimer, ReportHoldsPerIterationMeansAndTheLastSetting) {
  FakeClock clock;
  IterationTimerOptions o;
  o.job = "ns/job";
  o.worker = 3;
  o.now = clock.fn();
  o.origin_seconds = 90.0;
  IterationTimer timer(o);
  // Iteration i (10..13): compute 0.25*(i-9), communication 0.5, wait 0.125*(i-10).
  for (int i = 10; i < 14; ++i) {
    ASSERT_TRUE(timer.BeginCompute().ok());
    clock.t += 0.25 * (i - 9);
    ASSERT_TRUE(timer.EndCompute().ok());
    ASSERT_TRUE(timer.BeginCommunication().ok());
    clock.t += 0.5 + 0.125 * (i - 10);
    ASSERT_TRUE(timer.AddWait(0.125 * (i - 10)).ok());
    ASSERT_TRUE(timer.EndCommunication().ok());
    IterationInfo info{.iteration = i, .local_batch = 16 + i, .amp = (i == 13)};
    if (i % 2 == 0) info.local_grad_sq_norm = 2.0 * i;  // measured on 10 and 12
    info.global_grad_sq_norm = 1.0;
    ASSERT_TRUE(timer.EndIteration(info).ok());
  }
  EXPECT_EQ(timer.pending_iterations(), 4);
  const double report_time = clock.t;
  StatusOr<api::WorkerReport> r = timer.TakeReport();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job, "ns/job");
  EXPECT_EQ(r->worker, 3);
  EXPECT_EQ(r->iteration, 13);
  EXPECT_EQ(r->iterations, 4);
  EXPECT_EQ(r->time_seconds, report_time - 90.0);
  EXPECT_EQ(r->compute_seconds, (0.25 + 0.5 + 0.75 + 1.0) / 4);
  EXPECT_EQ(r->communication_seconds, 0.5);
  EXPECT_EQ(r->wait_seconds, (0.0 + 0.125 + 0.25 + 0.375) / 4);
  EXPECT_EQ(r->local_batch, 29);
  EXPECT_TRUE(r->amp);
  ASSERT_TRUE(r->local_grad_sq_norm.has_value());
  EXPECT_EQ(*r->local_grad_sq_norm, (20.0 + 24.0) / 2);  // only measured iterations
  EXPECT_EQ(r->global_grad_sq_norm, 1.0);
  EXPECT_FALSE(r->loss.has_value());
  // The report it made is one the controller accepts.
  EXPECT_TRUE(api::WorkerReportFromJson(api::ToJson(*r)).ok());

  // The next report starts afresh.
  EXPECT_EQ(timer.pending_iterations(), 0);
  EXPECT_EQ(timer.TakeReport().status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(timer.EndIteration({.iteration = 14, .local_batch = 8}).ok());
  StatusOr<api::WorkerReport> next = timer.TakeReport();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->iterations, 1);
  EXPECT_EQ(next->compute_seconds, 0.0);
  EXPECT_FALSE(next->local_grad_sq_norm.has_value());
}

TEST(IterationTimer, ReportAveragesTheLinkOverTheIterationsThatTimedIt) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  ASSERT_TRUE(timer.EndIteration({.iteration = 1, .local_batch = 8}).ok());
  StatusOr<api::WorkerReport> none = timer.TakeReport();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->link);
  ASSERT_TRUE(timer.EndIteration({.iteration = 2, .local_batch = 8,
                                  .link = api::LinkReading{2, 0.25, 1000}}).ok());
  ASSERT_TRUE(timer.EndIteration({.iteration = 3, .local_batch = 8}).ok());
  ASSERT_TRUE(timer.EndIteration({.iteration = 4, .local_batch = 8,
                                  .link = api::LinkReading{2, 0.5, 3000}}).ok());
  StatusOr<api::WorkerReport> r = timer.TakeReport();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->link, (api::LinkReading{2, 0.375, 2000}));
  ASSERT_TRUE(timer.EndIteration({.iteration = 5, .local_batch = 8}).ok());
  StatusOr<api::WorkerReport> next = timer.TakeReport();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->link);  // the sums start afresh with each report
}

TEST(IterationTimer, ReportAveragesAPipelineStagesCostsPerLink) {
  FakeClock clock;
  IterationTimer timer = MakeTimer(clock);
  const api::PipelineReading a{1, 0.002, 0.004, {{0, 0.001, 4096, 0.01}, {2, 0.03, 4096, 0}}};
  const api::PipelineReading b{1, 0.004, 0.008, {{0, 0.003, 4096, 0.03}, {2, 0.01, 4096, 0.02}}};
  ASSERT_TRUE(timer.EndIteration({.iteration = 1, .local_batch = 8, .pipeline = a}).ok());
  ASSERT_TRUE(timer.EndIteration({.iteration = 2, .local_batch = 8, .pipeline = b}).ok());
  StatusOr<api::WorkerReport> r = timer.TakeReport();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->pipeline);
  EXPECT_EQ(*r->pipeline,
            (api::PipelineReading{1, 0.003, 0.006, {{0, 0.002, 4096, 0.02}, {2, 0.02, 4096, 0.01}}}));
  ASSERT_TRUE(timer.EndIteration({.iteration = 3, .local_batch = 8}).ok());
  StatusOr<api::WorkerReport> next = timer.TakeReport();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->pipeline);  // the sums start afresh with each report
}

TEST(IterationTimer, ElapsedSecondsIsTheReportsClockFromTheOrigin) {
  FakeClock clock;
  IterationTimerOptions o;
  o.now = clock.fn();
  o.origin_seconds = 90.0;
  IterationTimer timer(o);
  EXPECT_EQ(timer.elapsed_seconds(), 10.0);
  clock.t = 112.5;
  EXPECT_EQ(timer.elapsed_seconds(), 22.5);
  ASSERT_TRUE(timer.EndIteration({.iteration = 1, .local_batch = 8}).ok());
  StatusOr<api::WorkerReport> r = timer.TakeReport();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->time_seconds, timer.elapsed_seconds());
  clock.t = 80;  // before the origin: never negative
  EXPECT_EQ(timer.elapsed_seconds(), 0.0);
}

TEST(IterationTimer, DefaultClockIsMonotonic) {
  IterationTimer timer;
  ASSERT_TRUE(timer.BeginCompute().ok());
  ASSERT_TRUE(timer.EndCompute().ok());
  StatusOr<IterationSample> s = timer.EndIteration({.iteration = 0, .local_batch = 1});
  ASSERT_TRUE(s.ok());
  EXPECT_GE(s->compute_seconds, 0.0);
}

}  // namespace
}  // namespace star::shim
