// What a drained job's update puts in the metrics: decisions by kind from its loop
// events, the per-worker straggler state and the estimated TTA.
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
  RecordJobMetrics(&m, u);
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("star_job_worker_straggler{cause=\"compute\",job=\"team/a\",kind=\"static\",worker=\"1\"} 1\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("star_job_estimated_tta_seconds{job=\"team/a\"} 120\n"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_decisions_total{job=\"team/a\",kind=\"amp\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_decisions_total{job=\"team/a\",kind=\"sync_mode\"} 0\n"), std::string::npos) << text;

  u.status["stragglers"] = nlohmann::json::array();  // recovered
  u.events = {MakeRecoveredEvent(9, 1)};
  u.estimated_tta_seconds.reset();
  RecordJobMetrics(&m, u);
  const std::string after = m.Serialize();
  EXPECT_NE(after.find("star_job_worker_straggler{cause=\"compute\",job=\"team/a\",kind=\"static\",worker=\"1\"} 0\n"),
            std::string::npos) << after;
  EXPECT_EQ(after.find("star_job_estimated_tta_seconds{"), std::string::npos) << after;
}

}  // namespace
}  // namespace star::op
