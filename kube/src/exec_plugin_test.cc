// ExecCredential parsing, and the credential source's caching against its clock.
#include "exec_plugin.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "credentials.h"
#include "star/kube/time.h"
#include "star/test_support/temp_dir.h"
#include "star/test_support/tls.h"

namespace star::kube {
namespace {

constexpr char kV1[] = "client.authentication.k8s.io/v1";

TEST(ExecCredentialTest, ReadsTokensCertificatesAndExpiry) {
  auto c = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
      R"("status":{"token":"t","expirationTimestamp":"2030-01-02T03:04:05Z"}})",
      kV1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "t");
  EXPECT_EQ(c->expires, ParseRfc3339("2030-01-02T03:04:05Z"));
  c = ParseExecCredential(R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",)"
                          R"("status":{"clientCertificateData":"C","clientKeyData":"K"}})",
                          "client.authentication.k8s.io/v1beta1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->client_cert_pem, "C");
  EXPECT_EQ(c->client_key_pem, "K");
  EXPECT_FALSE(c->expires.has_value());
}

TEST(ExecCredentialTest, ErrorsNameTheField) {
  const std::string head = R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "(output): not a JSON object"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}})",
       "apiVersion: \"client.authentication.k8s.io/v1beta1\", want"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Secret","status":{"token":"t"}})", "kind: \"Secret\""},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})", "status: missing"},
      {head + R"("status":{}})", "status: neither token nor clientCertificateData"},
      {head + R"("status":{"token":5}})", "status.token: not a string"},
      {head + R"("status":{"clientCertificateData":"C"}})", "status.clientKeyData: missing"},
      {head + R"("status":{"token":"t","expirationTimestamp":"tomorrow"}})",
       "status.expirationTimestamp: \"tomorrow\" is not an RFC 3339 time"},
  };
  for (const auto& [text, want] : cases) {
    const Status s = ParseExecCredential(text, kV1).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(want), std::string::npos) << s << " for " << text;
  }
}

class CredentialSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = dir_.path() + "/plugin.sh";
    test_support::WriteTextFile(plugin_, "#!/bin/sh\necho run >> " + dir_.path() + "/runs\ncat " + dir_.path() +
                                             "/credential.json\n");
    ::chmod(plugin_.c_str(), 0700);
  }
  void Credential(const std::string& token, const std::string& expiry) {
    test_support::WriteTextFile(dir_.path() + "/credential.json",
                                R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
                                R"("status":{"token":")" + token + R"(","expirationTimestamp":")" + expiry + "\"}}");
  }
  test_support::TempDir dir_;
  std::string plugin_;
};

TEST_F(CredentialSourceTest, AnExecCredentialIsCachedUntilShortlyBeforeItExpires) {
  ClientOptions o;
  o.server = "https://127.0.0.1:1";
  o.exec = ExecConfig{};
  o.exec->command = plugin_;
  auto source = CredentialSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  const auto expiry = *ParseRfc3339("2030-01-01T00:00:00Z");
  std::chrono::system_clock::time_point now = expiry - std::chrono::hours(1);
  (*source)->set_clock([&now] { return now; });
  Credential("one", "2030-01-01T00:00:00Z");
  EXPECT_EQ((*source)->Get()->token, "one");
  EXPECT_EQ((*source)->Get()->token, "one");
  EXPECT_EQ((*source)->plugin_runs(), 1);
  now = expiry - std::chrono::seconds(5);  // inside the renewal margin
  Credential("two", "2030-01-01T01:00:00Z");
  EXPECT_EQ((*source)->Get()->token, "two");
  EXPECT_EQ((*source)->plugin_runs(), 2);
  EXPECT_EQ((*source)->Get()->token, "two");
  EXPECT_EQ((*source)->plugin_runs(), 2);
}

TEST_F(CredentialSourceTest, StaticCredentialsCannotBeRefreshed) {
  ClientOptions o;
  o.token = "static";
  auto source = CredentialSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  const Credentials used = *(*source)->Get();
  EXPECT_EQ(used.token, "static");
  EXPECT_FALSE((*source)->Refresh(used));
}

TEST_F(CredentialSourceTest, AnUnreadableTokenFileKeepsTheTokenReadBefore) {
  ClientOptions o;
  o.token_file = test_support::WriteTextFile(dir_.path() + "/token", "kept\n");
  auto source = CredentialSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ(std::remove(o.token_file.c_str()), 0);
  auto c = (*source)->Get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "kept");

  o.token_file = dir_.path() + "/absent";
  const Status s = CredentialSource::Create(o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("token_file " + o.token_file + ": cannot be read"), std::string::npos) << s;
}

}  // namespace
}  // namespace star::kube
