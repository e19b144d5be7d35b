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
  EXPECT_NE(text.find("star_job_reports_total{job=\"team/a\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_reports_total{job=\"team/b\"} 1"), std::string::npos) << text;
  m.ForgetJob("team/a");
  text = m.Serialize();
  EXPECT_EQ(text.find("job=\"team/a\""), std::string::npos) << text;
  EXPECT_NE(text.find("star_job_reports_total{job=\"team/b\"} 1"), std::string::npos) << text;
}

}  // namespace
}  // namespace star::op
