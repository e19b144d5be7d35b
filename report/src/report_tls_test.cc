// The report endpoint over TLS: ReportServer with a certificate, ReportClient verifying
// it against a CA; certificates from a throwaway CA (star_test_tls).
#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "star/report/client.h"
#include "star/report/server.h"
#include "star/report/tls.h"
#include "star/test_support/tls.h"

namespace star::report {
namespace {

using test_support::CertifiedKey;
using test_support::TestCa;
using test_support::WriteTextFile;

api::WorkerReport SampleReport() {
  api::WorkerReport r;
  r.job = "team-a/resnet";
  r.worker = 1;
  r.iteration = 10;
  r.iterations = 10;
  r.time_seconds = 3.5;
  r.compute_seconds = 0.25;
  r.communication_seconds = 0.125;
  r.local_batch = 32;
  return r;
}

api::Decision SampleDecision() {
  api::Decision d;
  d.epoch = 2;
  d.apply_at_iteration = 40;
  d.mode = api::SyncMode::kFixedK;
  d.k = 1;
  d.workers = {{.worker = 0, .amp = false, .batch = 32}, {.worker = 1, .amp = true, .batch = 32}};
  return d;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

ReportClientOptions Options(const std::string& url, const std::string& ca_file, const std::string& ca_data = "",
                            const std::string& token = "") {
  ReportClientOptions o;
  o.base_url = url;
  o.token = token;
  o.ca_file = ca_file;
  o.ca_data = ca_data;
  return o;
}

// A temporary directory of certificates: the CA's, and a server's signed by it.
class ReportTls : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "star-report-tls-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ca_file_ = WriteTextFile(Path("ca.pem"), ca_.cert_pem());
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string Path(const std::string& name) const { return (std::filesystem::path(dir_) / name).string(); }

  // Starts an HTTPS server with `identity` (written to files) that answers SampleDecision.
  std::unique_ptr<ReportServer> StartHttps(const CertifiedKey& identity, const std::string& token = "") {
    ReportServerOptions o;
    o.token = token;
    o.tls_cert_file = WriteTextFile(Path("server.crt"), identity.cert);
    o.tls_key_file = WriteTextFile(Path("server.key"), identity.key);
    StatusOr<std::unique_ptr<ReportServer>> s = ReportServer::Start(o, [this](const api::WorkerReport&) {
      std::lock_guard<std::mutex> lock(mu_);
      ++handled_;
      return std::optional<api::Decision>(SampleDecision());
    });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  std::unique_ptr<ReportClient> Client(ReportClientOptions o) {
    StatusOr<std::unique_ptr<ReportClient>> c = ReportClient::Create(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  int handled() {
    std::lock_guard<std::mutex> lock(mu_);
    return handled_;
  }

  TestCa ca_;
  std::string dir_, ca_file_;
  std::mutex mu_;
  int handled_ = 0;
};

TEST_F(ReportTls, ReportsRoundTripOverHttpsWithTheCaAsAFileOrAsText) {
  auto server = StartHttps(ca_.IssueServer({"localhost"}));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->base_url(), "https://127.0.0.1:" + std::to_string(server->port()));
  for (const bool as_file : {true, false}) {
    ReportClientOptions o = Options(server->base_url(), "");
    (as_file ? o.ca_file : o.ca_data) = as_file ? ca_file_ : ca_.cert_pem();
    auto client = Client(o);
    ASSERT_NE(client, nullptr);
    StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
    ASSERT_TRUE(got.ok()) << (as_file ? "ca_file: " : "ca_data: ") << got.status();
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ(**got, SampleDecision());
  }
  EXPECT_EQ(handled(), 2);
}

TEST_F(ReportTls, TheCaFileWinsOverCaData) {
  auto server = StartHttps(ca_.IssueServer({"localhost"}));
  ASSERT_NE(server, nullptr);
  TestCa other("other-ca");
  auto client = Client(Options(server->base_url(), ca_file_, other.cert_pem()));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_TRUE(got.ok()) << got.status();
}

TEST_F(ReportTls, AServerSignedByAnotherCaIsRefusedNamingTheCaUsed) {
  auto server = StartHttps(ca_.IssueServer({"localhost"}));
  ASSERT_NE(server, nullptr);
  TestCa other("other-ca");
  const std::string other_file = WriteTextFile(Path("other-ca.pem"), other.cert_pem());
  for (const bool as_file : {true, false}) {
    ReportClientOptions o = Options(server->base_url(), "");
    (as_file ? o.ca_file : o.ca_data) = as_file ? other_file : other.cert_pem();
    auto client = Client(o);
    ASSERT_NE(client, nullptr);
    StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
    EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status();
    const std::string m = got.status().message();
    EXPECT_TRUE(Contains(m, "TLS: the server's certificate does not verify against")) << m;
    EXPECT_TRUE(Contains(m, as_file ? "ca_file " + other_file : "ca_data")) << m;
    EXPECT_TRUE(Contains(m, "CN=other-ca")) << m;
  }
  EXPECT_EQ(handled(), 0);
}

TEST_F(ReportTls, WithoutACaTheSystemsCasAreUsedAndNamed) {
  auto server = StartHttps(ca_.IssueServer({"localhost"}));
  ASSERT_NE(server, nullptr);
  auto client = Client(Options(server->base_url(), ""));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status();
  EXPECT_TRUE(Contains(got.status().message(), "TLS")) << got.status();
  EXPECT_TRUE(Contains(got.status().message(), "the system's CAs")) << got.status();
  EXPECT_EQ(handled(), 0);
}

TEST_F(ReportTls, ACertificateForAnotherHostIsRefused) {
  auto server = StartHttps(ca_.IssueServer({"elsewhere.example"}, {"10.9.8.7"}));
  ASSERT_NE(server, nullptr);
  auto client = Client(Options(server->base_url(), ca_file_));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status();
  EXPECT_TRUE(Contains(got.status().message(), "TLS")) << got.status();
  EXPECT_TRUE(Contains(got.status().message(), "name the host 127.0.0.1")) << got.status();
  EXPECT_EQ(handled(), 0);
}

TEST_F(ReportTls, AnHttpClientOfAnHttpsServerFailsCleanlyAndTheServerGoesOn) {
  auto server = StartHttps(ca_.IssueServer({"localhost"}));
  ASSERT_NE(server, nullptr);
  auto plain = Client(Options("http://127.0.0.1:" + std::to_string(server->port()), ""));
  ASSERT_NE(plain, nullptr);
  StatusOr<std::optional<api::Decision>> got = plain->Send(SampleReport());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status();
  EXPECT_EQ(handled(), 0);

  auto client = Client(Options(server->base_url(), ca_file_));
  ASSERT_NE(client, nullptr);
  got = client->Send(SampleReport());
  EXPECT_TRUE(got.ok()) << got.status();
}

TEST_F(ReportTls, AnHttpsClientOfAPlainServerFailsCleanly) {
  auto server = ReportServer::Start({}, [](const api::WorkerReport&) { return std::optional<api::Decision>(); });
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client(Options("https://127.0.0.1:" + std::to_string((*server)->port()), ca_file_));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status();
}

TEST_F(ReportTls, TheTokenIsStillCheckedOverTls) {
  auto server = StartHttps(ca_.IssueServer({"localhost"}), "s3cret");
  ASSERT_NE(server, nullptr);
  for (const std::string token : {"wrong", ""}) {
    auto client = Client(Options(server->base_url(), ca_file_, "", token));
    ASSERT_NE(client, nullptr);
    StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
    EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status();
    EXPECT_EQ(got.status().message(), "report rejected: 401 unauthorized");
  }
  EXPECT_EQ(handled(), 0);
  auto client = Client(Options(server->base_url(), ca_file_, "", "s3cret"));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(handled(), 1);
}

// Start's error for these TLS files (must not be OK).
Status StartError(const std::string& cert_file, const std::string& key_file) {
  ReportServerOptions o;
  o.tls_cert_file = cert_file;
  o.tls_key_file = key_file;
  StatusOr<std::unique_ptr<ReportServer>> s =
      ReportServer::Start(o, [](const api::WorkerReport&) { return std::optional<api::Decision>(); });
  return s.ok() ? Status::Ok() : s.status();
}

TEST_F(ReportTls, BadCertificateOrKeyFilesAreInvalidArgumentsOfStartNamingTheOptionAndTheFile) {
  const CertifiedKey id = ca_.IssueServer({"localhost"});
  const std::string cert = WriteTextFile(Path("s.crt"), id.cert);
  const std::string key = WriteTextFile(Path("s.key"), id.key);
  const std::string other_key = WriteTextFile(Path("other.key"), ca_.IssueServer({"x"}).key);
  const std::string junk = WriteTextFile(Path("junk.pem"), "not a certificate\n");
  const std::string missing = Path("missing.pem");
  struct Case {
    std::string cert, key, expected;
  };
  const std::vector<Case> cases = {
      {cert, "", "tls_key_file: must be set with tls_cert_file"},
      {"", key, "tls_cert_file: must be set with tls_key_file"},
      {missing, key, "tls_cert_file: cannot read \"" + missing + "\": No such file or directory"},
      {cert, missing, "tls_key_file: cannot read \"" + missing + "\": No such file or directory"},
      {junk, key, "tls_cert_file " + junk + ": not a PEM certificate"},
      {cert, junk, "tls_key_file " + junk + ": not a PEM private key"},
      {cert, other_key, "tls_key_file " + other_key + ": does not match tls_cert_file " + cert},
  };
  for (const Case& c : cases) {
    Status s = StartError(c.cert, c.key);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.expected << " / " << s;
    EXPECT_EQ(s.message().substr(0, c.expected.size()), c.expected) << s;
  }
  EXPECT_TRUE(StartError(cert, key).ok());
}

TEST_F(ReportTls, CheckServerCertificateNamesTheCallersOptions) {
  const CertifiedKey id = ca_.IssueServer({"localhost"});
  const std::string cert = WriteTextFile(Path("s.crt"), id.cert);
  const std::string key = WriteTextFile(Path("s.key"), id.key);
  EXPECT_TRUE(CheckServerCertificate(cert, key, "--cert", "--key").ok());
  EXPECT_TRUE(CheckServerCertificate("", "", "--cert", "--key").ok());
  EXPECT_EQ(CheckServerCertificate(cert, "", "--cert", "--key").message(), "--key: must be set with --cert");
  Status s = CheckServerCertificate(key, key, "--cert", "--key");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("--cert " + key + ": not a PEM certificate", 0), 0u) << s;
}

TEST_F(ReportTls, BadCasAreInvalidArgumentsOfCreateNamingTheOption) {
  const std::string junk = WriteTextFile(Path("junk.pem"), "-----BEGIN CERTIFICATE-----\nnope\n");
  const std::string missing = Path("missing.pem");
  const std::string https = "https://127.0.0.1:1";
  struct Case {
    ReportClientOptions options;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {Options(https, missing), "ca_file: cannot read \"" + missing + "\""},
      {Options(https, junk), "ca_file " + junk + ": not a PEM CA bundle"},
      {Options(https, "", "junk"), "ca_data: not a PEM CA bundle"},
      {Options("http://127.0.0.1:1", "", ca_.cert_pem()), "ca_data: a CA is only for an https base_url"},
  };
  for (const Case& c : cases) {
    StatusOr<std::unique_ptr<ReportClient>> got = ReportClient::Create(c.options);
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.expected << " / " << got.status();
    EXPECT_EQ(got.status().message().substr(0, c.expected.size()), c.expected) << got.status();
  }
}

TEST_F(ReportTls, TheCertificateMayBeGivenAsTextAndIsCheckedAsFilesAre) {
  const CertifiedKey identity = ca_.IssueServer({"localhost"});
  ReportServerOptions o;
  o.tls_cert_pem = identity.cert;
  o.tls_key_pem = identity.key;
  auto answer = [](const api::WorkerReport&) { return std::optional<api::Decision>(SampleDecision()); };
  auto server = ReportServer::Start(o, answer);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ((*server)->base_url().rfind("https://", 0), 0u) << (*server)->base_url();
  auto client = Client(Options((*server)->base_url(), "", ca_.cert_pem()));
  ASSERT_NE(client, nullptr);
  auto got = client->Send(SampleReport());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(**got, SampleDecision());

  o.tls_key_pem = ca_.IssueServer({"localhost"}).key;  // another certificate's key
  EXPECT_EQ(ReportServer::Start(o, answer).status().message(), "tls_key_pem (text): does not match tls_cert_pem (text)");
  o.tls_key_pem.clear();
  EXPECT_EQ(ReportServer::Start(o, answer).status().message(), "tls_key_pem: must be set with tls_cert_pem");
  o.tls_key_pem = identity.key;
  o.tls_cert_file = WriteTextFile(Path("server.crt"), identity.cert);
  o.tls_key_file = WriteTextFile(Path("server.key"), identity.key);
  EXPECT_EQ(ReportServer::Start(o, answer).status().code(), StatusCode::kInvalidArgument) << "files and text";
}

TEST(ReportTlsInputs, PemTextIsToldFromAFileName) {
  EXPECT_TRUE(LooksLikePem("-----BEGIN CERTIFICATE-----\n..."));
  EXPECT_TRUE(LooksLikePem("\n  -----BEGIN CERTIFICATE-----\n..."));
  EXPECT_FALSE(LooksLikePem("/etc/star/ca.pem"));
  EXPECT_FALSE(LooksLikePem(""));
  TestCa ca("subject-ca");
  EXPECT_TRUE(CheckCaBundle(ca.cert_pem()).ok());
  EXPECT_TRUE(Contains(FirstCertificateSubject(ca.cert_pem()), "CN=subject-ca"));
  EXPECT_EQ(FirstCertificateSubject("junk"), "");
}

}  // namespace
}  // namespace star::report
