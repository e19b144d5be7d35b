// The client over real TLS to the real API server (test_env.h): it verifies the server
// against the cluster's CA and refuses a wrong CA or host name; it authenticates with client
// certificates, and with ServiceAccount tokens from the TokenRequest API that it reads again
// when they rotate (a token file, a pod's service-account files, an exec plugin). A token is
// revoked by deleting the Secret it is bound to.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "star/kube/client.h"
#include "star/test_support/process.h"
#include "star/test_support/tls.h"
#include "test_env.h"

namespace star::kube {
namespace {

using nlohmann::json;
using star::test_support::CertifiedKey;
using star::test_support::TestCa;
using star::test_support::WriteTextFile;
using testing::ClusterTest;
using testing::WaitFor;
using namespace std::chrono_literals;

ResourceRef Secrets() { return {"", "v1", "secrets", true, "Secret"}; }
ResourceRef Roles() { return {"rbac.authorization.k8s.io", "v1", "roles", true, "Role"}; }
ResourceRef RoleBindings() { return {"rbac.authorization.k8s.io", "v1", "rolebindings", true, "RoleBinding"}; }

class ClientTlsTest : public ClusterTest {
 protected:
  // The cluster's CA, as a file.
  std::string ClusterCa() {
    if (!admin_.ca_file.empty()) return admin_.ca_file;
    return WriteTextFile(dir_.path() + "/cluster-ca.crt", admin_.ca_data);
  }

  // To the API server (or `server`), verified against the cluster's CA, with no credentials.
  ClientOptions Anonymous(const std::string& server = "") {
    ClientOptions o;
    o.server = server.empty() ? admin_.server : server;
    o.ca_file = ClusterCa();
    o.default_namespace = ns_;
    o.max_retries = 2;
    o.initial_backoff = 10ms;
    return o;
  }

  // A Get of a pod that does not exist: NotFound proves the request was served and allowed.
  Status Probe(ClientOptions options) {
    auto client = Client::Create(std::move(options));
    if (!client.ok()) return client.status();
    return (*client)->Get(Pods(), ns_, "absent").status();
  }
  Status ProbeWithToken(const std::string& token) {
    ClientOptions o = Anonymous();
    o.token = token;
    return Probe(o);
  }

  // ServiceAccount `reader` in ns_, allowed to get pods there.
  void MakeReader() {
    const json sa = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "reader"}}}};
    ASSERT_TRUE(client_->Create(testing::ServiceAccounts(), ns_, sa).ok());
    const json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"},
                       {"metadata", {{"name", "reader"}}},
                       {"rules", {{{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"get"}}}}}};
    ASSERT_TRUE(client_->Create(Roles(), ns_, role).ok());
    const json binding = {{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "RoleBinding"},
                          {"metadata", {{"name", "reader"}}},
                          {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "reader"}}},
                          {"subjects", {{{"kind", "ServiceAccount"}, {"name", "reader"}, {"namespace", ns_}}}}};
    ASSERT_TRUE(client_->Create(RoleBindings(), ns_, binding).ok());
  }

  // A token of `reader` from the TokenRequest API (kubectl create token), bound to a new
  // Secret `secret`: it is valid until Revoke(secret).
  std::string Token(const std::string& secret) {
    const json s = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", secret}}}};
    EXPECT_TRUE(client_->Create(Secrets(), ns_, s).ok());
    const char* kubectl = std::getenv("STAR_KUBECTL");
    const test_support::ProcessResult r = test_support::RunProcess(
        {kubectl != nullptr && *kubectl != '\0' ? kubectl : "kubectl", "--kubeconfig", kubeconfig_, "-n", ns_,
         "create", "token", "reader", "--bound-object-kind", "Secret", "--bound-object-name", secret},
        "", 60s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string token = r.out;
    token.erase(token.find_last_not_of(" \n") + 1);
    EXPECT_TRUE(WaitFor([&] { return ProbeWithToken(token).code() == StatusCode::kNotFound; }))
        << "the token of " << secret << " works";
    return token;
  }
  // Deletes `secret`; returns once `token`, bound to it, is refused.
  void Revoke(const std::string& secret, const std::string& token) {
    ASSERT_TRUE(client_->Delete(Secrets(), ns_, secret).ok());
    ASSERT_TRUE(WaitFor([&] { return ProbeWithToken(token).code() == StatusCode::kFailedPrecondition; }))
        << "the token of " << secret << " is still accepted";
  }

  // Replaces `path` atomically, as the kubelet rotates a projected token.
  void Rotate(const std::string& path, const std::string& text) {
    WriteTextFile(path + ".new", text);
    ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  }

  // star-faultproxy listening on 127.0.0.2, whose certificate names 127.0.0.1 and
  // localhost only: a server with a certificate for another host.
  std::string OtherHost() {
    std::filesystem::create_directories(dir_.path() + "/other");
    other_.emplace();
    other_->Start(kubeconfig_, dir_.path() + "/other", {"--listen", "127.0.0.2:0"});
    return other_->url();
  }

  std::optional<star::test_support::FaultProxy> other_;
};

TEST_F(ClientTlsTest, VerifiesTheServerAgainstTheKubeconfigsCa) {
  EXPECT_EQ(admin_.server.rfind("https://", 0), 0u) << admin_.server;
  auto options = OptionsFromKubeconfig(kubeconfig_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->ca_file, ClusterCa()) << "certificate-authority";
  options->default_namespace = ns_;
  auto client = Client::Create(*options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Create(Pods(), ns_, Pod("p")).ok());
  auto got = (*client)->Get(Pods(), ns_, "p");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["name"], "p");
  ClientOptions data = Anonymous();
  data.ca_file.clear();
  std::ifstream ca(ClusterCa());
  data.ca_data.assign(std::istreambuf_iterator<char>(ca), std::istreambuf_iterator<char>());
  EXPECT_EQ(Probe(data).code(), StatusCode::kFailedPrecondition) << "ca_data verifies it as well (anonymous: refused)";
}

TEST_F(ClientTlsTest, AWrongCaIsRefusedAtOnceWithAClearError) {
  ClientOptions o = Anonymous();
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

// Regression: the client trusted the system's CAs besides the one the kubeconfig names,
// so a server any system CA vouched for passed whatever CA the kubeconfig gave.
TEST_F(ClientTlsTest, AGivenCaIsTrustedAloneAndTheSystemsCasOnlyWithoutOne) {
  // The cluster's CA stands in for a public CA in the system's store (OpenSSL's default
  // paths read SSL_CERT_FILE and SSL_CERT_DIR).
  const std::string cluster_ca = ClusterCa();
  const std::string no_dir = dir_.path() + "/no-system-certs";
  testing::ScopedEnv cert_file("SSL_CERT_FILE", cluster_ca.c_str());
  testing::ScopedEnv cert_dir("SSL_CERT_DIR", no_dir.c_str());
  ClientOptions system = Anonymous();
  system.ca_file.clear();
  EXPECT_EQ(Probe(system).code(), StatusCode::kFailedPrecondition)
      << "without a CA of its own the client trusts the system's (anonymous: served, refused)";

  const std::string other = TestCa("another-ca").cert_pem();
  ClientOptions data = Anonymous();
  data.ca_file.clear();
  data.ca_data = other;
  ClientOptions file = Anonymous();
  file.ca_file = WriteTextFile(dir_.path() + "/another-ca.crt", other);
  for (const ClientOptions& o : {data, file}) {
    const Status s = Probe(o);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("TLS: the server's certificate does not verify against"), std::string::npos) << s;
  }
}

TEST_F(ClientTlsTest, ACertificateForAnotherHostIsRefused) {
  const std::string other = OtherHost();
  ASSERT_EQ(other.rfind("https://127.0.0.2:", 0), 0u) << other;
  const Status s = Probe(Anonymous(other));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("IP address mismatch"), std::string::npos) << s;
  EXPECT_NE(s.message().find("CA " + ClusterCa()), std::string::npos) << s;
}

TEST_F(ClientTlsTest, InsecureSkipTlsVerifyAcceptsAnyCertificate) {
  ClientOptions o = Anonymous(OtherHost());
  o.ca_file = "";
  o.insecure_skip_tls_verify = true;
  o.client_cert_file = admin_.client_cert_file;
  o.client_key_file = admin_.client_key_file;
  o.client_cert_data = admin_.client_cert_data;
  o.client_key_data = admin_.client_key_data;
  EXPECT_EQ(Probe(o).code(), StatusCode::kNotFound);
}

TEST_F(ClientTlsTest, ClientCertificatesAuthenticate) {
  EXPECT_EQ(Probe(Anonymous()).code(), StatusCode::kFailedPrecondition) << "no certificate: anonymous, refused";
  const CertifiedKey stranger = TestCa("stranger-ca").IssueClient("eve", {"system:masters"});
  ClientOptions o = Anonymous();
  o.client_cert_data = stranger.cert;
  o.client_key_data = stranger.key;
  EXPECT_EQ(Probe(o).code(), StatusCode::kFailedPrecondition) << "a certificate the cluster's CA did not sign";

  o = Anonymous();
  o.client_cert_file = admin_.client_cert_file;
  o.client_key_file = admin_.client_key_file;
  ASSERT_FALSE(o.client_cert_file.empty()) << "the cluster's kubeconfig names the admin's certificate file";
  EXPECT_EQ(Probe(o).code(), StatusCode::kNotFound) << "client-certificate and client-key files";
  std::ifstream cert(o.client_cert_file), key(o.client_key_file);
  o.client_cert_data.assign(std::istreambuf_iterator<char>(cert), std::istreambuf_iterator<char>());
  o.client_key_data.assign(std::istreambuf_iterator<char>(key), std::istreambuf_iterator<char>());
  o.client_cert_file.clear();
  o.client_key_file.clear();
  EXPECT_EQ(Probe(o).code(), StatusCode::kNotFound) << "-data";
}

TEST_F(ClientTlsTest, ARotatedTokenFileIsReadAgain) {
  ASSERT_NO_FATAL_FAILURE(MakeReader());
  UseFaultProxy();  // it counts the requests
  const std::string first = Token("first");
  ClientOptions o = Anonymous(proxy_->url());
  o.token_file = WriteTextFile(dir_.path() + "/token", first + "\n");
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->Get(Pods(), ns_, "absent").status().code(), StatusCode::kNotFound);

  const std::string second = Token("second");
  Rotate(o.token_file, second + "\n");
  ASSERT_NO_FATAL_FAILURE(Revoke("first", first));
  EXPECT_EQ((*client)->Get(Pods(), ns_, "absent").status().code(), StatusCode::kNotFound)
      << "the rotated token is sent";

  ASSERT_NO_FATAL_FAILURE(Revoke("second", second));
  const int before = Requests("pods", "get");
  const Status stale = (*client)->Get(Pods(), ns_, "absent").status();
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition) << stale;
  EXPECT_EQ(Requests("pods", "get") - before, 2) << "one 401, the file read again, one more try";
}

TEST_F(ClientTlsTest, AnInClusterTokenIsFollowedThroughItsRotations) {
  ASSERT_NO_FATAL_FAILURE(MakeReader());
  const std::string first = Token("first");
  const std::string root = dir_.path() + "/serviceaccount";
  std::filesystem::create_directories(root);
  WriteTextFile(root + "/token", first);
  std::ifstream ca(ClusterCa());
  WriteTextFile(root + "/ca.crt", std::string(std::istreambuf_iterator<char>(ca), std::istreambuf_iterator<char>()));
  WriteTextFile(root + "/namespace", ns_);
  const std::string port = admin_.server.substr(admin_.server.rfind(':') + 1);
  testing::ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
  testing::ScopedEnv port_env("KUBERNETES_SERVICE_PORT", port.c_str());
  auto options = InClusterOptions(root);
  ASSERT_TRUE(options.ok()) << options.status();
  auto client = Client::Create(*options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->Get(Pods(), "", "absent").status().code(), StatusCode::kNotFound) << "in the pod's namespace";
  const std::string second = Token("second");
  Rotate(root + "/token", second);
  ASSERT_NO_FATAL_FAILURE(Revoke("first", first));
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
  ASSERT_NO_FATAL_FAILURE(MakeReader());
  const std::string first = Token("first");
  ClientOptions o = Anonymous();
  o.exec = ExecConfig{};
  o.exec->command = WritePlugin(dir_.path());
  o.exec->provide_cluster_info = true;
  WriteTextFile(dir_.path() + "/credential.json", Credential(first));
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*client)->Get(Pods(), ns_, "absent").status().code(), StatusCode::kNotFound);
  }
  EXPECT_EQ(Lines(dir_.path() + "/runs"), 1) << "no expiry: cached until a 401";
  const nlohmann::json info = nlohmann::json::parse(std::ifstream(dir_.path() + "/exec-info"), nullptr, false);
  EXPECT_EQ(info.value("kind", ""), "ExecCredential") << info;
  EXPECT_EQ(info["spec"]["cluster"].value("server", ""), admin_.server) << info;

  const std::string second = Token("second");
  WriteTextFile(dir_.path() + "/credential.json", Credential(second));
  ASSERT_NO_FATAL_FAILURE(Revoke("first", first));
  EXPECT_EQ((*client)->Get(Pods(), ns_, "absent").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Lines(dir_.path() + "/runs"), 2) << "the 401 ran the plugin again";
}

TEST_F(ClientTlsTest, AnExecPluginThatFailsIsAnErrorNamingIt) {
  ClientOptions o = Anonymous();
  o.exec = ExecConfig{};
  o.exec->command = WritePlugin(dir_.path());
  o.exec->env = {{"PLUGIN_FAIL", "no cloud session"}};
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  Status s = (*client)->Get(Pods(), ns_, "absent").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("exec plugin " + o.exec->command + ": exited with 3: no cloud session"),
            std::string::npos)
      << s;

  o.exec->command = "star-no-such-plugin";
  o.exec->install_hint = "install star-no-such-plugin first";
  client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  s = (*client)->Get(Pods(), ns_, "absent").status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("install star-no-such-plugin first"), std::string::npos) << s;
}

}  // namespace
}  // namespace star::kube
