// star-operator end to end over TLS: the real API server serves HTTPS and requires client
// certificates (star-operator and kubectl share the cluster's kubeconfig); the operator's
// report endpoint serves HTTPS too, and the workers verify it with the CA it hands them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_reports.h"
#include "cluster_util.h"
#include "e2e_util.h"
#include "star/report/client.h"
#include "star/test_support/tls.h"

namespace star::op {
namespace {

using nlohmann::json;
using test_support::ProcessResult;
using e2e::Eventually;
using e2e::ReadFile;
using star::test_support::CertifiedKey;
using star::test_support::TestCa;
using star::test_support::WriteTextFile;

class OperatorTlsTest : public e2e::OperatorTest {
 protected:
  // The pod's environment variable `name` ("" when absent).
  static std::string Env(const json& pod, const std::string& name) {
    for (const json& e : pod["spec"]["containers"][0].value("env", json::array())) {
      if (e.value("name", "") == name) return e.value("value", "");
    }
    return "";
  }

  TestCa report_ca_{"star-report-ca"};  // the report endpoint's
  TestCa other_ca_{"another-ca"};       // not the report endpoint's
};

TEST_F(OperatorTlsTest, AJobRunsWithTheApiServerAndTheReportEndpointOverHttps) {
  ASSERT_NE(ReadFile(kubeconfig_).find("server: https://"), std::string::npos) << ReadFile(kubeconfig_);
  ASSERT_NE(ReadFile(kubeconfig_).find("client-certificate"), std::string::npos) << ReadFile(kubeconfig_);
  const std::string d = dir_.path();
  const CertifiedKey endpoint = report_ca_.IssueServer({"localhost"}, {"127.0.0.1"});
  StartOperator({"--report-tls-cert-file", WriteTextFile(d + "/report.crt", endpoint.cert), "--report-tls-key-file",
                 WriteTextFile(d + "/report.key", endpoint.key), "--report-ca-file",
                 WriteTextFile(d + "/report-ca.crt", report_ca_.cert_pem())});
  ASSERT_EQ(report_url_.rfind("https://", 0), 0u) << report_url_;
  ProcessResult r = Kubectl({"apply", "-f", "-"}, JobYaml("fm", 4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return Pods("fm").size() == 4; })) << ReadFile(dir_.path() + "/operator.log");
  for (const json& pod : Pods("fm")) {
    EXPECT_EQ(Env(pod, "STAR_CONTROLLER_URL").rfind("https://", 0), 0u) << pod.dump();
    EXPECT_EQ(Env(pod, "STAR_REPORT_CA"), report_ca_.cert_pem()) << "workers verify the endpoint with it";
  }
  for (int i = 0; i < 4; ++i) SetPodPhase("fm-worker-" + std::to_string(i), "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("phase", "") == "Running"; }))
      << ReadFile(dir_.path() + "/operator.log");

  const std::string token = Token("fm");
  ASSERT_FALSE(token.empty());
  // A worker without the CA does not trust the endpoint; with it, reports drive the job.
  report::ReportClientOptions untrusting;
  untrusting.base_url = report_url_;
  untrusting.token = token;
  untrusting.ca_data = other_ca_.cert_pem();
  auto stranger = report::ReportClient::Create(untrusting);
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  api::WorkerReport probe;
  probe.job = JobKey("fm");
  probe.local_batch = 64;
  const Status refused = (*stranger)->Send(probe).status();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("TLS"), std::string::npos) << refused;
  e2e::SendReports(report_url_, token, {JobKey("fm"), 4, 80, 2, 40, 4.0, 7, 0.05, 1, report_ca_.cert_pem()});
  ASSERT_TRUE(Eventually([&] {
    const json st = GetJson({"get", "tj", "fm"})["status"];
    return st.is_object() && st.value("iteration", 0) == 80 && st.value("stragglers", json::array()).size() == 1;
  })) << GetJson({"get", "tj", "fm"}).dump(2);

  r = Kubectl({"delete", "tj", "fm", "--wait=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return Pods("fm").empty() && GetJson({"get", "tj", "fm"}).is_null(); }))
      << ReadFile(dir_.path() + "/operator.log");
}

}  // namespace
}  // namespace star::op
