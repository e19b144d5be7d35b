// The client over real TLS: the emulator serves HTTPS with certificates a throwaway CA
// signed; the client verifies it, refuses a wrong CA or host name, and authenticates with
// client certificates, rotating token files and exec plugins.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "star/kube/client.h"
#include "star/test_support/tls.h"
#include "test_env.h"

namespace star::kube {
namespace {

using star::test_support::CertifiedKey;
using star::test_support::TestCa;
using star::test_support::WriteTextFile;
using testing::TempDir;

class ClientTlsTest : public ::testing::Test {
 protected:
  // Serves HTTPS with a certificate for `dns` and `ips`, signed by ca_.
  void Serve(const std::vector<std::string>& dns = {"localhost"}, const std::vector<std::string>& ips = {"127.0.0.1"},
             apiserver::ApiServerOptions options = {}) {
    const CertifiedKey serving = ca_.IssueServer(dns, ips);
    options.crds_dir = STAR_CRDS_DIR;
    options.tls.cert_file = WriteTextFile(dir_.path() + "/server.crt", serving.cert);
    options.tls.key_file = WriteTextFile(dir_.path() + "/server.key", serving.key);
    options.tls.ca_file = WriteTextFile(dir_.path() + "/ca.crt", ca_.cert_pem());
    server_ = std::make_unique<apiserver::ApiServer>(std::move(options));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  ClientOptions Options() const {
    ClientOptions o;
    o.server = server_->url();
    o.ca_file = dir_.path() + "/ca.crt";
    o.max_retries = 2;
    o.initial_backoff = std::chrono::milliseconds(10);
    return o;
  }

  // A Get of a namespace that does not exist: NotFound proves the request was served.
  Status Probe(ClientOptions options) {
    auto client = Client::Create(std::move(options));
    if (!client.ok()) return client.status();
    return (*client)->Get(Pods(), "default", "absent").status();
  }

  // Replaces `path` atomically, as the kubelet rotates a projected token.
  void Rotate(const std::string& path, const std::string& text) {
    WriteTextFile(path + ".new", text);
    ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  }

  TempDir dir_;
  TestCa ca_;
  std::unique_ptr<apiserver::ApiServer> server_;
};

TEST_F(ClientTlsTest, VerifiesTheServerAgainstTheKubeconfigsCa) {
  Serve();
  EXPECT_EQ(server_->url().rfind("https://", 0), 0u) << server_->url();
  ASSERT_TRUE(server_->WriteKubeconfig(dir_.path() + "/kubeconfig").ok());
  auto options = OptionsFromKubeconfig(dir_.path() + "/kubeconfig");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->ca_data, ca_.cert_pem()) << "certificate-authority-data";
  auto client = Client::Create(*options);
  ASSERT_TRUE(client.ok()) << client.status();
  nlohmann::json pod = {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", {{{"name", "c"}, {"image", "i"}}}}}}};
  ASSERT_TRUE((*client)->Create(Pods(), "default", pod).ok());
  auto got = (*client)->Get(Pods(), "default", "p");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["name"], "p");
  EXPECT_EQ(Probe(Options()).code(), StatusCode::kNotFound) << "ca_file works as well";
}

TEST_F(ClientTlsTest, AWrongCaIsRefusedAtOnceWithAClearError) {
  Serve();
  ClientOptions o = Options();
  o.ca_file = "";
  o.ca_data = TestCa("another-ca").cert_pem();
  const Status s = Probe(o);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("TLS: the server's certificate does not verify against the kubeconfig's "
                             "certificate-authority-data: unable to get local issuer certificate"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.message().find("retries"), std::string::npos) << "not retried: " << s;
}

TEST_F(ClientTlsTest, ACertificateForAnotherHostIsRefused) {
  Serve({"api.other.example"}, {});
  const Status s = Probe(Options());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("IP address mismatch"), std::string::npos) << s;
  EXPECT_NE(s.message().find("CA " + dir_.path() + "/ca.crt"), std::string::npos) << s;
}

TEST_F(ClientTlsTest, InsecureSkipTlsVerifyAcceptsAnyCertificate) {
  Serve({"api.other.example"}, {});
  ClientOptions o = Options();
  o.ca_file = "";
  o.insecure_skip_tls_verify = true;
  EXPECT_EQ(Probe(o).code(), StatusCode::kNotFound);
}

TEST_F(ClientTlsTest, BadCaOrCertificateFilesAreErrorsOfCreate) {
  Serve();
  ClientOptions o = Options();
  o.ca_file = WriteTextFile(dir_.path() + "/garbage.crt", "not a certificate\n");
  Status s = Client::Create(o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("ca_file " + dir_.path() + "/garbage.crt: not a PEM CA bundle"), std::string::npos) << s;

  const CertifiedKey a = ca_.IssueClient("a"), b = ca_.IssueClient("b");
  o = Options();
  o.client_cert_data = a.cert;
  o.client_key_data = b.key;
  s = Client::Create(o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the key does not match it"), std::string::npos) << s;

  o = Options();
  o.client_cert_file = dir_.path() + "/absent.crt";
  o.client_key_file = dir_.path() + "/absent.key";
  s = Client::Create(o).status();
  EXPECT_NE(s.message().find("client_cert_file " + dir_.path() + "/absent.crt: cannot be read"), std::string::npos)
      << s;
}

TEST_F(ClientTlsTest, TheEmulatorRefusesTlsFilesItCannotReadAtStart) {
  const CertifiedKey serving = ca_.IssueServer({"localhost"});
  apiserver::ApiServerOptions o;
  o.tls.cert_file = WriteTextFile(dir_.path() + "/server.crt", serving.cert);
  o.tls.key_file = WriteTextFile(dir_.path() + "/server.key", serving.key);
  o.tls.ca_file = dir_.path() + "/absent-ca.crt";
  apiserver::ApiServer server(o);
  const Status s = server.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("tls.ca_file " + o.tls.ca_file + ": cannot be read"), std::string::npos) << s;
}

TEST_F(ClientTlsTest, ClientCertificatesAuthenticateWhenTheServerRequiresThem) {
  apiserver::ApiServerOptions required;
  required.tls.client_ca_file = WriteTextFile(dir_.path() + "/client-ca.crt", ca_.cert_pem());
  const CertifiedKey admin = ca_.IssueClient("admin", {"system:masters"});
  required.kubeconfig_user.client_cert_file = WriteTextFile(dir_.path() + "/admin.crt", admin.cert);
  required.kubeconfig_user.client_key_file = WriteTextFile(dir_.path() + "/admin.key", admin.key);
  Serve({"localhost"}, {"127.0.0.1"}, required);

  EXPECT_EQ(Probe(Options()).code(), StatusCode::kUnavailable) << "no certificate: the handshake fails";
  const CertifiedKey stranger = TestCa("stranger-ca").IssueClient("eve");
  ClientOptions o = Options();
  o.client_cert_data = stranger.cert;
  o.client_key_data = stranger.key;
  EXPECT_EQ(Probe(o).code(), StatusCode::kUnavailable) << "a certificate the server's CA did not sign";

  o = Options();
  o.client_cert_data = admin.cert;
  o.client_key_data = admin.key;
  EXPECT_EQ(Probe(o).code(), StatusCode::kNotFound) << "-data";
  ASSERT_TRUE(server_->WriteKubeconfig(dir_.path() + "/kubeconfig").ok());
  auto from_file = OptionsFromKubeconfig(dir_.path() + "/kubeconfig");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->client_cert_file, dir_.path() + "/admin.crt");
  EXPECT_EQ(Probe(*from_file).code(), StatusCode::kNotFound) << "client-certificate and client-key files";
}

TEST_F(ClientTlsTest, ARotatedTokenFileIsReadAgain) {
  apiserver::ApiServerOptions tokens;
  tokens.tokens = {"first"};
  Serve({"localhost"}, {"127.0.0.1"}, tokens);
  ClientOptions o = Options();
  o.token_file = WriteTextFile(dir_.path() + "/token", "first\n");
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->Get(Pods(), "default", "absent").status().code(), StatusCode::kNotFound);

  server_->SetTokens({"second"});
  Rotate(o.token_file, "second\n");
  EXPECT_EQ((*client)->Get(Pods(), "default", "absent").status().code(), StatusCode::kNotFound)
      << "the rotated token is sent";

  server_->SetTokens({"third"});
  const int refused = server_->unauthorized();
  const Status stale = (*client)->Get(Pods(), "default", "absent").status();
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition) << stale;
  EXPECT_EQ(server_->unauthorized() - refused, 2) << "one 401, the file read again, one more try";
}

TEST_F(ClientTlsTest, AnInClusterTokenIsFollowedThroughItsRotations) {
  apiserver::ApiServerOptions tokens;
  tokens.tokens = {"sa-1"};
  Serve({"localhost"}, {"127.0.0.1"}, tokens);
  const std::string root = dir_.path() + "/serviceaccount";
  std::filesystem::create_directories(root);
  WriteTextFile(root + "/token", "sa-1");
  WriteTextFile(root + "/ca.crt", ca_.cert_pem());
  WriteTextFile(root + "/namespace", "default");
  testing::ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
  testing::ScopedEnv port("KUBERNETES_SERVICE_PORT", std::to_string(server_->port()).c_str());
  auto options = InClusterOptions(root);
  ASSERT_TRUE(options.ok()) << options.status();
  auto client = Client::Create(*options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->Get(Pods(), "", "absent").status().code(), StatusCode::kNotFound);
  server_->SetTokens({"sa-2"});
  Rotate(root + "/token", "sa-2");
  EXPECT_EQ((*client)->Get(Pods(), "", "absent").status().code(), StatusCode::kNotFound);
}

// An exec plugin: a shell script printing the ExecCredential in `credential_file`,
// appending a line to `runs_file` each time it runs and saving KUBERNETES_EXEC_INFO.
std::string WritePlugin(const std::string& dir) {
  const std::string path = dir + "/plugin.sh";
  WriteTextFile(path, "#!/bin/sh\necho run >> " + dir + "/runs\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > " + dir +
                          "/exec-info\n[ -n \"$PLUGIN_FAIL\" ] && { echo \"$PLUGIN_FAIL\" >&2; exit 3; }\ncat " + dir +
                          "/credential.json\n");
  ::chmod(path.c_str(), 0700);
  return path;
}

std::string Credential(const std::string& token, const std::string& expiry = "") {
  nlohmann::json status = {{"token", token}};
  if (!expiry.empty()) status["expirationTimestamp"] = expiry;
  return nlohmann::json{{"apiVersion", "client.authentication.k8s.io/v1"}, {"kind", "ExecCredential"},
                        {"status", status}}
      .dump();
}

int Lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST_F(ClientTlsTest, AnExecPluginsTokenIsCachedAndRenewedAfterA401) {
  apiserver::ApiServerOptions tokens;
  tokens.tokens = {"exec-1"};
  Serve({"localhost"}, {"127.0.0.1"}, tokens);
  ClientOptions o = Options();
  o.exec = ExecConfig{};
  o.exec->command = WritePlugin(dir_.path());
  o.exec->provide_cluster_info = true;
  WriteTextFile(dir_.path() + "/credential.json", Credential("exec-1"));
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*client)->Get(Pods(), "default", "absent").status().code(), StatusCode::kNotFound);
  }
  EXPECT_EQ(Lines(dir_.path() + "/runs"), 1) << "no expiry: cached until a 401";
  const nlohmann::json info = nlohmann::json::parse(std::ifstream(dir_.path() + "/exec-info"), nullptr, false);
  EXPECT_EQ(info.value("kind", ""), "ExecCredential") << info;
  EXPECT_EQ(info["spec"]["cluster"].value("server", ""), server_->url()) << info;

  server_->SetTokens({"exec-2"});
  WriteTextFile(dir_.path() + "/credential.json", Credential("exec-2"));
  EXPECT_EQ((*client)->Get(Pods(), "default", "absent").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Lines(dir_.path() + "/runs"), 2) << "the 401 ran the plugin again";
}

TEST_F(ClientTlsTest, AnExecPluginThatFailsIsAnErrorNamingIt) {
  Serve();
  ClientOptions o = Options();
  o.exec = ExecConfig{};
  o.exec->command = WritePlugin(dir_.path());
  o.exec->env = {{"PLUGIN_FAIL", "no cloud session"}};
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  Status s = (*client)->Get(Pods(), "default", "absent").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("exec plugin " + o.exec->command + ": exited with 3: no cloud session"),
            std::string::npos)
      << s;

  o.exec->command = "star-no-such-plugin";
  o.exec->install_hint = "install star-no-such-plugin first";
  client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  s = (*client)->Get(Pods(), "default", "absent").status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("install star-no-such-plugin first"), std::string::npos) << s;
}

}  // namespace
}  // namespace star::kube
