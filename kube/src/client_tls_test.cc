// TLS options the client refuses before any request: a CA file that holds no certificate,
// a client key that does not match its certificate, files that cannot be read.
#include <gtest/gtest.h>

#include "star/kube/client.h"
#include "star/test_support/temp_dir.h"
#include "star/test_support/tls.h"

namespace star::kube {
namespace {

using star::test_support::CertifiedKey;
using star::test_support::TempDir;
using star::test_support::TestCa;
using star::test_support::WriteTextFile;

ClientOptions Options(const TempDir& dir, const TestCa& ca) {
  ClientOptions o;
  o.server = "https://127.0.0.1:6443";
  o.ca_file = WriteTextFile(dir.path() + "/ca.crt", ca.cert_pem());
  return o;
}

TEST(ClientTlsOptionsTest, BadCaOrCertificateFilesAreErrorsOfCreate) {
  TempDir dir_;
  TestCa ca_;
  ClientOptions o = Options(dir_, ca_);
  o.ca_file = WriteTextFile(dir_.path() + "/garbage.crt", "not a certificate\n");
  Status s = Client::Create(o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("ca_file " + dir_.path() + "/garbage.crt: not a PEM CA bundle"), std::string::npos) << s;

  const CertifiedKey a = ca_.IssueClient("a"), b = ca_.IssueClient("b");
  o = Options(dir_, ca_);
  o.client_cert_data = a.cert;
  o.client_key_data = b.key;
  s = Client::Create(o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the key does not match it"), std::string::npos) << s;

  o = Options(dir_, ca_);
  o.client_cert_file = dir_.path() + "/absent.crt";
  o.client_key_file = dir_.path() + "/absent.key";
  s = Client::Create(o).status();
  EXPECT_NE(s.message().find("client_cert_file " + dir_.path() + "/absent.crt: cannot be read"), std::string::npos)
      << s;
}

}  // namespace
}  // namespace star::kube
