// star-operator end to end over TLS: the real API server serves HTTPS and requires client
// certificates (star-operator and kubectl share the cluster's kubeconfig); the operator's
// report endpoint serves HTTPS too, and the workers verify it with the CA it hands them:
// one given to it, or one it makes itself and keeps in a Secret.
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

// The decoded data[key] of a Secret ("" when absent).
std::string SecretData(const json& secret, const std::string& key) {
  const json data = secret.value("data", json::object());
  return SecretToken(json{{"data", {{"token", data.value(key, "")}}}}).value_or("");
}

TEST_F(OperatorTlsTest, WithoutCertificateFilesTheOperatorMakesItsOwnKeepsItInASecretAndReusesIt) {
  const std::vector<std::string> managed = {"--report-tls-secret", ns_ + "/star-report-tls"};
  StartOperator(managed);
  ASSERT_EQ(report_url_.rfind("https://", 0), 0u) << report_url_;
  const json secret = GetJson({"get", "secret", "star-report-tls"});
  ASSERT_TRUE(secret.is_object()) << ReadFile(OperatorLog());
  EXPECT_EQ(secret.value("type", ""), "kubernetes.io/tls");
  EXPECT_EQ(secret["metadata"]["labels"].value("app.kubernetes.io/managed-by", ""), "star-operator");
  const std::string ca = SecretData(secret, "ca.crt");
  ASSERT_EQ(ca.rfind("-----BEGIN CERTIFICATE-----", 0), 0u) << secret.dump();

  ProcessResult r = Kubectl({"apply", "-f", "-"}, JobYaml("mc", 2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return Pods("mc").size() == 2; })) << ReadFile(OperatorLog());
  for (const json& pod : Pods("mc")) {
    EXPECT_EQ(Env(pod, "STAR_CONTROLLER_URL"), report_url_) << pod.dump();
    EXPECT_EQ(Env(pod, "STAR_REPORT_CA"), ca) << "workers verify the endpoint with the Secret's CA";
  }
  // Over HTTPS verified with that CA, a wrong token reaches the endpoint (and is refused
  // as an unknown job is); with another CA the handshake fails.
  auto refusal = [&](const std::string& trusted) {
    report::ReportClientOptions o;
    o.base_url = report_url_;
    o.token = "not-the-token";
    o.ca_data = trusted;
    auto client = report::ReportClient::Create(o);
    if (!client.ok()) return client.status();
    api::WorkerReport probe;
    probe.job = JobKey("mc");
    probe.local_batch = 64;
    return (*client)->Send(probe).status();
  };
  EXPECT_EQ(refusal(ca).message(), "report rejected: 401 unauthorized");
  const Status untrusted = refusal(other_ca_.cert_pem());
  EXPECT_EQ(untrusted.code(), StatusCode::kFailedPrecondition) << untrusted;
  EXPECT_NE(untrusted.message().find("TLS"), std::string::npos) << untrusted;

  // A second start (a restart, another replica) serves the same certificate.
  const std::string version = secret["metadata"].value("resourceVersion", "");
  op_.Stop();
  StartOperator(managed);
  EXPECT_EQ(GetJson({"get", "secret", "star-report-tls"})["metadata"].value("resourceVersion", ""), version);
  EXPECT_EQ(refusal(ca).message(), "report rejected: 401 unauthorized") << "the pods' CA still verifies it";
}

TEST_F(OperatorTlsTest, ASecretOfThatNameTheOperatorDidNotMakeIsLeftAloneAndItDoesNotStart) {
  ProcessResult r = Kubectl({"create", "secret", "generic", "taken", "--from-literal=tls.crt=mine"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  e2e::OperatorProcess op;
  ASSERT_TRUE(op.Start({STAR_OPERATOR_BINARY, "--kubeconfig", kubeconfig_, "--report-listen", "127.0.0.1:0",
                        "--metrics-listen", "", "--namespace", ns_, "--report-tls-secret", ns_ + "/taken"},
                       OperatorLog()));
  const std::optional<int> status = op.WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << ReadFile(OperatorLog());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << *status;
  EXPECT_NE(ReadFile(OperatorLog()).find("without the label app.kubernetes.io/managed-by=star-operator"),
            std::string::npos)
      << ReadFile(OperatorLog());
  EXPECT_EQ(SecretData(GetJson({"get", "secret", "taken"}), "tls.crt"), "mine");
}

}  // namespace
}  // namespace star::op
