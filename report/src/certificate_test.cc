#include "star/report/certificate.h"

#include <gtest/gtest.h>

#include "star/report/client.h"
#include "star/report/server.h"

namespace star::report {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

const std::vector<std::string> kHosts{"star-operator.star.svc", "star-operator.star.svc.cluster.local", "127.0.0.1"};

TEST(ServingCertificateTest, ItNamesEveryHostAndAClientTrustingTheCaReportsOverIt) {
  auto c = IssueServingCertificate(kHosts, hours(24 * 365));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(CheckServingCertificate(*c, kHosts, seconds(30 * 24 * 3600)).ok());
  EXPECT_EQ(CheckServingCertificate(*c, {"star-operator.other.svc"}, seconds(0)).message(),
            "tls.crt: does not name host star-operator.other.svc");
  EXPECT_EQ(CheckServingCertificate(*c, {"10.0.0.1"}, seconds(0)).message(), "tls.crt: does not name host 10.0.0.1");

  ReportServerOptions so;
  so.tls_cert_pem = c->cert_pem;
  so.tls_key_pem = c->key_pem;
  auto server = ReportServer::Start(so, [](const api::WorkerReport&) { return std::optional<api::Decision>(); });
  ASSERT_TRUE(server.ok()) << server.status();
  ReportClientOptions co;
  co.base_url = (*server)->base_url();
  co.ca_data = c->ca_pem;
  auto client = ReportClient::Create(co);
  ASSERT_TRUE(client.ok()) << client.status();
  api::WorkerReport r;
  r.job = "ns/a";
  r.local_batch = 8;
  auto sent = (*client)->Send(r);
  EXPECT_TRUE(sent.ok()) << sent.status();
}

TEST(ServingCertificateTest, EachIssueIsANewCaAndAMixedPairIsRefused) {
  auto a = IssueServingCertificate(kHosts, hours(24));
  auto b = IssueServingCertificate(kHosts, hours(24));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->ca_pem, b->ca_pem);
  ServingCertificate mixed = *a;
  mixed.ca_pem = b->ca_pem;
  EXPECT_EQ(CheckServingCertificate(mixed, kHosts, seconds(0)).message(), "tls.crt: is not signed by the CA ca.crt");
  mixed = *a;
  mixed.key_pem = b->key_pem;
  EXPECT_EQ(CheckServingCertificate(mixed, kHosts, seconds(0)).code(), StatusCode::kFailedPrecondition);
  mixed = *a;
  mixed.ca_pem = "junk";
  EXPECT_EQ(CheckServingCertificate(mixed, kHosts, seconds(0)).message(), "ca.crt: not a PEM certificate");
}

TEST(ServingCertificateTest, OneThatExpiresWithinTheMarginIsRefused) {
  auto c = IssueServingCertificate(kHosts, hours(1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(CheckServingCertificate(*c, kHosts, seconds(1800)).ok());
  EXPECT_EQ(CheckServingCertificate(*c, kHosts, seconds(7200)).message(), "tls.crt: expires within 7200s");
}

TEST(ServingCertificateTest, BadArgumentsAreNamed) {
  EXPECT_EQ(IssueServingCertificate({}, hours(1)).status().message(), "hosts: at least one is needed");
  EXPECT_EQ(IssueServingCertificate({"a", ""}, hours(1)).status().message(), "hosts: an empty host name");
  EXPECT_EQ(IssueServingCertificate({"a"}, hours(0)).status().message(), "validity: must be positive");
}

}  // namespace
}  // namespace star::report
