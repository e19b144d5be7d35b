// What a drained job's update puts in the metrics (decisions by kind from its loop
// events, the per-worker straggler state, the estimated TTA, the accuracy) and in its
// status (the accuracy, the TTA).
#include "star/operator/reconciler/status_writer.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

using Kinds = std::set<std::string>;

TEST(DecisionKindsTest, OneEntryPerDecisionWithEachKindOnce) {
  const std::vector<TimelineEvent> events = {
      MakeStragglerEvent(1, 2, {}),
      MakeModeEvent(1, {api::SyncMode::kFixedK, 3, {{0, 1, 3, 2}}}),
      MakeAmpEvent(1, 2, true),
      MakeAmpEvent(1, 3, false),
      MakeAmpEvent(1, 1, true),
      MakeAmpEvent(4, 2, false),            // a later decision: AMP only
      MakeBatchesEvent(4, {64, 64, 64, 64}),
      MakeRecoveredEvent(6, 2),
      MakeBatchesEvent(6, {64, 64, 64, 64}),
      MakeBatchesEvent(6, {32, 32, 96, 96}),  // two decisions at one time
  };
  EXPECT_EQ(DecisionKinds(events),
            (std::vector<Kinds>{{"sync_mode", "amp"}, {"amp", "batch"}, {"batch"}, {"batch"}}));
  EXPECT_TRUE(DecisionKinds({MakeStragglerEvent(1, 0, {}), MakeRecoveredEvent(2, 0)}).empty());
}

TEST(RecordJobMetricsTest, SetsStragglersTtaAndDecisionKindsOfTheUpdate) {
  OperatorMetrics m;
  JobUpdate u;
  u.key = "team/a";
  u.mode = api::SyncMode::kSsgd;
  u.stragglers = 1;
  u.status = {{"stragglers", {{{"worker", 1}, {"node", "n1"}, {"cause", "compute"}, {"kind", "static"},
                               {"slowdown", 2.5}}}},
              {"iteration", 40}};
  u.events = {MakeStragglerEvent(3, 1, {api::StragglerCause::kCompute, api::StragglerKind::kStatic, 2.5}),
              MakeAmpEvent(3, 1, true)};
  u.estimated_tta_seconds = 120;
  u.accuracy = 0.625;
  RecordJobMetrics(&m, u);
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("star_job_worker_straggler{cause=\"compute\",kind=\"static\",namespace=\"team\",node=\"n1\",trainingjob=\"a\",worker=\"1\"} 1\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("star_job_estimated_tta_seconds{namespace=\"team\",trainingjob=\"a\"} 120\n"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_accuracy{namespace=\"team\",trainingjob=\"a\"} 0.625\n"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_decisions_total{kind=\"amp\",namespace=\"team\",trainingjob=\"a\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_decisions_total{kind=\"sync_mode\",namespace=\"team\",trainingjob=\"a\"} 0\n"), std::string::npos) << text;

  // Regression: a decision's status fields come with "pipeline": null (a merge patch
  // removing a schedule); the stragglers still count.
  u.status["pipeline"] = nullptr;
  RecordJobMetrics(&m, u);
  EXPECT_NE(m.Serialize().find("star_job_worker_straggler{cause=\"compute\",kind=\"static\",namespace=\"team\","
                               "node=\"n1\",trainingjob=\"a\",worker=\"1\"} 1\n"),
            std::string::npos) << m.Serialize();

  u.status["stragglers"] = nlohmann::json::array();  // recovered
  u.events = {MakeRecoveredEvent(9, 1)};
  u.estimated_tta_seconds.reset();
  u.accuracy.reset();
  RecordJobMetrics(&m, u);
  const std::string after = m.Serialize();
  EXPECT_NE(after.find("star_job_worker_straggler{cause=\"compute\",kind=\"static\",namespace=\"team\",node=\"n1\",trainingjob=\"a\",worker=\"1\"} 0\n"),
            std::string::npos) << after;
  EXPECT_EQ(after.find("star_job_estimated_tta_seconds{"), std::string::npos) << after;
  EXPECT_EQ(after.find("star_job_accuracy{"), std::string::npos) << after;
}

api::WorkerReport Report(int worker, int64_t iteration, std::optional<double> accuracy = std::nullopt) {
  api::WorkerReport r;
  r.job = "team/a";
  r.worker = worker;
  r.iteration = iteration;
  r.time_seconds = static_cast<double>(iteration);
  r.compute_seconds = 0.1;
  r.local_batch = 32;
  if (accuracy) {
    r.accuracy = *accuracy;
    r.accuracy_time_seconds = static_cast<double>(iteration) - 0.5;
  }
  return r;
}

// The status the writer merges into the TrainingJob (JobUpdate::status) and its metrics.
TEST(StatusWriterTest, WritesTheWorkersAccuracyAndTheTtaOnceTheTargetIsReached) {
  api::TrainingJobSpec spec;
  spec.workers.replicas = 2;
  spec.training.global_batch_size = 64;
  spec.training.target_accuracy = 0.8;
  JobRegistry reg([] { return std::string("2025-01-01T00:00:00Z"); });
  ASSERT_TRUE(reg.Upsert("team/a", 1, spec, "tok").ok());

  ASSERT_TRUE(reg.Observe(Report(0, 10, 0.6)).ok());
  ASSERT_TRUE(reg.Observe(Report(1, 10)).ok());
  std::vector<JobUpdate> updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].status["accuracy"], 0.6) << updates[0].status.dump();
  EXPECT_FALSE(updates[0].status.contains("ttaSeconds")) << "absent before the target";
  EXPECT_FALSE(updates[0].status.contains("estimatedTTASeconds")) << "no maxIterations, no target yet";

  ASSERT_TRUE(reg.Observe(Report(0, 20, 0.85)).ok());
  ASSERT_TRUE(reg.Observe(Report(1, 20)).ok());
  ASSERT_TRUE(reg.Observe(Report(0, 30, 0.75)).ok());  // a later dip keeps the TTA
  updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  const JobUpdate& u = updates[0];
  EXPECT_EQ(u.status["accuracy"], 0.75) << u.status.dump();
  EXPECT_EQ(u.status["ttaSeconds"], 19.5) << u.status.dump();
  EXPECT_EQ(u.status["estimatedTTASeconds"], 19.5) << "the estimate is the TTA once reached";
  // The CRD's status accepts it as written.
  auto parsed = api::TrainingJobStatusFromJson(u.status, "status");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tta_seconds, 19.5);
  EXPECT_EQ(parsed->accuracy, 0.75);
  bool reached = false;
  for (const TimelineEvent& e : u.events) reached |= e.kind == EventKind::kTargetReached && e.t == 19.5;
  EXPECT_TRUE(reached);

  OperatorMetrics m;
  RecordJobMetrics(&m, u);
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("star_job_accuracy{namespace=\"team\",trainingjob=\"a\"} 0.75\n"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_estimated_tta_seconds{namespace=\"team\",trainingjob=\"a\"} 19.5\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace star::op
