// The report endpoint's TLS options (star-operator's --report-tls-cert-file,
// --report-tls-key-file, --report-ca-file): how they are checked, and an endpoint that
// serves HTTPS with them.
#include "star/operator/reconciler/report_endpoint.h"

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "star/report/client.h"
#include "star/test_support/tls.h"

namespace star::op {
namespace {

using test_support::TestCa;
using test_support::WriteTextFile;

class ReportEndpointTls : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "star-endpoint-tls-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    const test_support::CertifiedKey id = ca_.IssueServer({"localhost"});
    cert_ = WriteTextFile(Path("tls.crt"), id.cert);
    key_ = WriteTextFile(Path("tls.key"), id.key);
    ca_file_ = WriteTextFile(Path("ca.crt"), ca_.cert_pem());
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string Path(const std::string& name) const { return (std::filesystem::path(dir_) / name).string(); }

  // Options as star-operator makes them of its flags.
  static ReportEndpointOptions Options(const std::string& url, const std::string& cert, const std::string& key,
                                       const std::string& ca) {
    ReportEndpointOptions o;
    o.listen = "127.0.0.1:0";
    o.url = url;
    o.tls_cert_file = cert;
    o.tls_key_file = key;
    o.ca_file = ca;
    return o;
  }

  TestCa ca_;
  std::string dir_, cert_, key_, ca_file_;
};

TEST_F(ReportEndpointTls, PlainHttpNeedsNothingAndHandsPodsNoCa) {
  StatusOr<std::string> ca = CheckReportTls(Options("", "", "", ""));
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(*ca, "");
  ca = CheckReportTls(Options("http://op.star.svc:8443", "", "", ""));
  ASSERT_TRUE(ca.ok()) << ca.status();
}

TEST_F(ReportEndpointTls, TheCaFilesTextIsWhatPodsGet) {
  StatusOr<std::string> ca = CheckReportTls(Options("https://op.star.svc:8443", cert_, key_, ca_file_));
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(*ca, ca_.cert_pem());
  // TLS ended in front of the operator: an https URL alone may carry a CA.
  ca = CheckReportTls(Options("https://proxy:443", "", "", ca_file_));
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(*ca, ca_.cert_pem());
}

TEST_F(ReportEndpointTls, FlagsThatDoNotFitTogetherAreNamed) {
  const std::string missing = Path("missing.pem");
  const std::string junk = WriteTextFile(Path("junk.pem"), "junk\n");
  struct Case {
    ReportEndpointOptions options;
    std::string expected;  // the message starts so
  };
  const std::vector<Case> cases = {
      {Options("", cert_, "", ""), "--report-tls-key-file: must be set with --report-tls-cert-file"},
      {Options("", "", key_, ""), "--report-tls-cert-file: must be set with --report-tls-key-file"},
      {Options("", missing, key_, ""), "--report-tls-cert-file: cannot read \"" + missing + "\""},
      {Options("", cert_, junk, ""), "--report-tls-key-file " + junk + ": not a PEM private key"},
      {Options("http://op:8443", cert_, key_, ""), "--report-url: must be https:// when the endpoint serves HTTPS"},
      {Options("", "", "", ca_file_), "--report-ca-file: the report endpoint is plain HTTP"},
      {Options("http://op:8443", "", "", ca_file_), "--report-ca-file: the report endpoint is plain HTTP"},
      {Options("", cert_, key_, missing), "--report-ca-file: cannot read \"" + missing + "\""},
      {Options("", cert_, key_, junk), "--report-ca-file " + junk + ": not a PEM CA bundle"},
  };
  for (const Case& c : cases) {
    StatusOr<std::string> got = CheckReportTls(c.options);
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.expected << " / " << got.status();
    EXPECT_EQ(got.status().message().rfind(c.expected, 0), 0u) << got.status();
  }
}

TEST_F(ReportEndpointTls, TheEndpointServesHttpsAndOffersItsCa) {
  JobRegistry registry;
  StatusRecords records(nullptr, &registry);  // no report reaches a job here
  OperatorMetrics metrics;
  auto endpoint = ReportEndpoint::Create(Options("", cert_, key_, ca_file_), &registry, &records, &metrics);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ((*endpoint)->report_ca(), ca_.cert_pem());
  ASSERT_TRUE((*endpoint)->Start().ok());
  EXPECT_EQ((*endpoint)->url(), "https://127.0.0.1:" + std::to_string((*endpoint)->port()));

  report::ReportClientOptions co;
  co.base_url = (*endpoint)->url();
  co.ca_data = (*endpoint)->report_ca();
  auto client = report::ReportClient::Create(co);
  ASSERT_TRUE(client.ok()) << client.status();
  api::WorkerReport r;
  r.job = "ns/unknown";
  r.local_batch = 8;
  auto got = (*client)->Send(r);  // through TLS to the endpoint, which knows no such job
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status();
  EXPECT_EQ(got.status().message(), "report rejected: 401 unauthorized") << "as for a wrong token";
  (*endpoint)->Stop();
}

TEST_F(ReportEndpointTls, CreateRefusesOptionsThatDoNotFit) {
  JobRegistry registry;
  StatusRecords records(nullptr, &registry);
  OperatorMetrics metrics;
  auto endpoint = ReportEndpoint::Create(Options("", cert_, "", ""), &registry, &records, &metrics);
  EXPECT_EQ(endpoint.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(endpoint.status().message().find("--report-tls-key-file"), std::string::npos) << endpoint.status();
}

}  // namespace
}  // namespace star::op
