// OperatorMetrics: what /metrics shows of a job, and that a forgotten job's series go.
#include "star/operator/reconciler/metrics.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

TEST(OperatorMetricsTest, AcceptedReportsAreCountedPerJobAndForgotten) {
  OperatorMetrics m;
  for (int i = 0; i < 3; ++i) m.Report("team/a");
  m.Report("team/b");
  std::string text = m.Serialize();
  EXPECT_NE(text.find("star_job_reports_total{namespace=\"team\",trainingjob=\"a\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_reports_total{namespace=\"team\",trainingjob=\"b\"} 1"), std::string::npos) << text;
  m.ForgetJob("team/a");
  text = m.Serialize();
  EXPECT_EQ(text.find("trainingjob=\"a\""), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_reports_total{namespace=\"team\",trainingjob=\"b\"} 1"), std::string::npos) << text;
}

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

// Regression: the label was `job`, which Prometheus's own target label renames to
// exported_job unless scraped with honor_labels.
TEST(OperatorMetricsTest, JobSeriesAreLabelledNamespaceAndTrainingjobNotJob) {
  OperatorMetrics m;
  m.JobState("team/a", api::SyncMode::kSsgd, 1);
  const std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_stragglers{namespace=\"team\",trainingjob=\"a\"} 1")) << text;
  EXPECT_EQ(text.find("{job="), std::string::npos) << text;
  EXPECT_EQ(text.find(",job="), std::string::npos) << text;
  EXPECT_EQ(JobLabels("solo"), (prometheus::Labels{{"trainingjob", "solo"}}));
  EXPECT_EQ(JobLabels("a/b", {{"worker", "1"}}),
            (prometheus::Labels{{"namespace", "a"}, {"trainingjob", "b"}, {"worker", "1"}}));
}

TEST(OperatorMetricsTest, AFlaggedWorkerIsOneUntilItRecoversThenZero) {
  OperatorMetrics m;
  api::StragglerStatus s;
  s.worker = 2;
  s.node = "n1";
  s.cause = api::StragglerCause::kCommunication;
  s.kind = api::StragglerKind::kStatic;
  m.WorkerStragglers("team/a", {s});
  const std::string series =
      "star_job_worker_straggler{cause=\"communication\",kind=\"static\",namespace=\"team\",node=\"n1\",trainingjob=\"a\",worker=\"2\"}";
  std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, series + " 1")) << text;
  m.WorkerStragglers("team/a", {});
  text = m.Serialize();
  EXPECT_TRUE(Has(text, series + " 0")) << text;
  m.ForgetJob("team/a");
  EXPECT_EQ(m.Serialize().find("star_job_worker_straggler{"), std::string::npos) << m.Serialize();
}

TEST(OperatorMetricsTest, AReclassifiedStragglerMovesToItsNewSeries) {
  OperatorMetrics m;
  api::StragglerStatus s;
  s.worker = 0;
  m.WorkerStragglers("team/a", {s});
  s.kind = api::StragglerKind::kStatic;
  m.WorkerStragglers("team/a", {s});
  const std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_worker_straggler{cause=\"compute\",kind=\"dynamic\",namespace=\"team\",node=\"\",trainingjob=\"a\",worker=\"0\"} 0"))
      << text;
  EXPECT_TRUE(Has(text, "star_job_worker_straggler{cause=\"compute\",kind=\"static\",namespace=\"team\",node=\"\",trainingjob=\"a\",worker=\"0\"} 1"))
      << text;
}

TEST(OperatorMetricsTest, DecisionsAreCountedPerKindFromZero) {
  OperatorMetrics m;
  m.JobState("team/a", api::SyncMode::kSsgd, 0);
  std::string text = m.Serialize();
  for (const char* kind : kDecisionKinds) {
    EXPECT_TRUE(Has(text, "star_job_decisions_total{kind=\"" + std::string(kind) + "\",namespace=\"team\",trainingjob=\"a\"} 0")) << text;
  }
  m.Decisions("team/a", {"sync_mode", "amp"});
  m.Decisions("team/a", {"amp"});
  text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_decisions_total{kind=\"sync_mode\",namespace=\"team\",trainingjob=\"a\"} 1")) << text;
  EXPECT_TRUE(Has(text, "star_job_decisions_total{kind=\"amp\",namespace=\"team\",trainingjob=\"a\"} 2")) << text;
  EXPECT_TRUE(Has(text, "star_job_decisions_total{kind=\"batch\",namespace=\"team\",trainingjob=\"a\"} 0")) << text;
  m.ForgetJob("team/a");
  EXPECT_EQ(m.Serialize().find("trainingjob=\"a\""), std::string::npos) << m.Serialize();
}

TEST(OperatorMetricsTest, EstimatedTtaIsSetAndRemovedWithoutAnEstimate) {
  OperatorMetrics m;
  m.EstimatedTta("team/a", 340.5);
  EXPECT_TRUE(Has(m.Serialize(), "star_job_estimated_tta_seconds{namespace=\"team\",trainingjob=\"a\"} 340.5")) << m.Serialize();
  m.EstimatedTta("team/a", std::nullopt);
  EXPECT_EQ(m.Serialize().find("star_job_estimated_tta_seconds{"), std::string::npos) << m.Serialize();
  m.EstimatedTta("team/a", 12);
  m.ForgetJob("team/a");
  EXPECT_EQ(m.Serialize().find("star_job_estimated_tta_seconds{"), std::string::npos) << m.Serialize();
}

TEST(OperatorMetricsTest, AccuracyIsSetAndRemovedWithoutOneAndForgottenWithTheJob) {
  OperatorMetrics m;
  m.Accuracy("team/a", 0.8125);
  EXPECT_TRUE(Has(m.Serialize(), "star_job_accuracy{namespace=\"team\",trainingjob=\"a\"} 0.8125")) << m.Serialize();
  m.Accuracy("team/a", std::nullopt);
  EXPECT_EQ(m.Serialize().find("star_job_accuracy{"), std::string::npos) << m.Serialize();
  m.Accuracy("team/a", 0.5);
  m.ForgetJob("team/a");
  EXPECT_EQ(m.Serialize().find("star_job_accuracy{"), std::string::npos) << m.Serialize();
}

TEST(OperatorMetricsTest, CpuAllocationsFollowThePlanAndGoWithIt) {
  OperatorMetrics m;
  m.PlannedAllocations("team/a", {{"team/a-worker-0", "n1", 2500}, {"team/b-worker-1", "n1", 500}});
  m.PlannedAllocations("team/c", {{"team/c-worker-0", "n2", 1000}});
  std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_cpu_allocation{namespace=\"team\",node=\"n1\",pod=\"team/a-worker-0\",trainingjob=\"a\"} 2500")) << text;
  EXPECT_TRUE(Has(text, "star_job_cpu_allocation{namespace=\"team\",node=\"n1\",pod=\"team/b-worker-1\",trainingjob=\"a\"} 500")) << text;
  m.PlannedAllocations("team/a", {{"team/a-worker-0", "n1", 3000}});
  text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_cpu_allocation{namespace=\"team\",node=\"n1\",pod=\"team/a-worker-0\",trainingjob=\"a\"} 3000")) << text;
  EXPECT_EQ(text.find("pod=\"team/b-worker-1\""), std::string::npos) << text;
  m.PlannedAllocations("team/a", {});  // undone
  m.ForgetJob("team/c");
  EXPECT_EQ(m.Serialize().find("star_job_cpu_allocation{"), std::string::npos) << m.Serialize();
}

TEST(OperatorMetricsTest, BandwidthAllocationsOnlyForThePodsThePlanLimits) {
  OperatorMetrics m;
  m.PlannedAllocations("team/a", {{"team/a-worker-0", "n1", 1000, 1'400'000'000}, {"team/b-worker-0", "n1", 2000, 0}});
  std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_bandwidth_allocation_bits_per_second{namespace=\"team\",node=\"n1\",pod=\"team/a-worker-0\",trainingjob=\"a\"} 1400000000")) << text;
  EXPECT_EQ(text.find("star_job_bandwidth_allocation_bits_per_second{namespace=\"team\",node=\"n1\",pod=\"team/b-worker-0\""), std::string::npos) << text;
  m.ForgetJob("team/a");
  EXPECT_EQ(m.Serialize().find("star_job_bandwidth_allocation_bits_per_second{"), std::string::npos) << m.Serialize();
}

TEST(OperatorMetricsTest, UndoneReallocationsAreCountedAndForgotten) {
  OperatorMetrics m;
  m.Reallocation("team/a", "applied");
  m.Reallocation("team/a", "undone");
  std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, "star_job_reallocations_total{namespace=\"team\",outcome=\"undone\",trainingjob=\"a\"} 1")) << text;
  m.ForgetJob("team/a");
  EXPECT_EQ(m.Serialize().find("star_job_reallocations_total{"), std::string::npos) << m.Serialize();
}

}  // namespace
}  // namespace star::op
