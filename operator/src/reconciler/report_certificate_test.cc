#include "star/operator/reconciler/report_certificate.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

using Hosts = std::vector<std::string>;

TEST(ReportCertificateHostsTest, TheUrlsHostComesFirstThenTheExtraOnesEachOnce) {
  EXPECT_EQ(ReportCertificateHosts("https://star-operator.star.svc:8443", "0.0.0.0",
                                   {"star-operator.star.svc", "star-operator.star.svc.cluster.local"}),
            (Hosts{"star-operator.star.svc", "star-operator.star.svc.cluster.local"}));
  EXPECT_EQ(ReportCertificateHosts("https://[::1]:8443/x", "", {}), (Hosts{"::1"}));
  EXPECT_EQ(ReportCertificateHosts("https://10.0.0.7/", "", {}), (Hosts{"10.0.0.7"}));
  EXPECT_EQ(ReportCertificateHosts("", "127.0.0.1", {}), (Hosts{"127.0.0.1"})) << "no URL: where it listens";
  EXPECT_EQ(ReportCertificateHosts("", "0.0.0.0", {}), Hosts{}) << "a wildcard address names no host";
}

TEST(ReportCertificateSecretTest, IsATlsSecretLabelledAsTheOperatorsWithTheCa) {
  ReportCertificateOptions o{.ns = "star", .name = "star-report-tls", .hosts = {"a"}};
  const nlohmann::json s = ReportCertificateSecret(o, {"CA", "CERT", "KEY"});
  EXPECT_EQ(s["type"], "kubernetes.io/tls");
  EXPECT_EQ(s["metadata"]["namespace"], "star");
  EXPECT_EQ(s["metadata"]["labels"][kManagedByLabel], "star-operator");
  EXPECT_EQ(s["data"]["ca.crt"], "Q0E=");
  EXPECT_EQ(s["data"]["tls.crt"], "Q0VSVA==");
  EXPECT_EQ(s["data"]["tls.key"], "S0VZ");
}

}  // namespace
}  // namespace star::op
