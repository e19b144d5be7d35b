// Client options from kubeconfig files and from a pod's service account (the cluster's own
// kubeconfig is read in kubeconfig_k8s_test.cc).
#include <gtest/gtest.h>

#include <fstream>

#include "test_env.h"
#include "star/kube/client.h"

namespace star::kube {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// "-----BEGIN CERTIFICATE-----\nstar test ca\n-----END CERTIFICATE-----\n" in base64.
constexpr char kCaText[] = "-----BEGIN CERTIFICATE-----\nstar test ca\n-----END CERTIFICATE-----\n";
constexpr char kCaBase64[] =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnN0YXIgdGVzdCBjYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==";

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://dev.example.com:6443
    insecure-skip-tls-verify: true
- name: prod
  cluster:
    server: https://prod.example.com:6443
    certificate-authority-data: )";

constexpr char kTwoContextsRest[] = R"(
users:
- name: dev
  user:
    token: dev-token
- name: prod
  user:
    tokenFile: prod.token
contexts:
- name: dev
  context:
    cluster: dev
    user: dev
- name: prod
  context:
    cluster: prod
    user: prod
    namespace: team-a
)";

// One context: server `server`, a token.
std::string OneContext(const std::string& server) {
  return "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
         "clusters:\n- name: k\n  cluster: {server: '" + server + "'}\n"
         "users:\n- name: u\n  user: {token: t}\n";
}

class KubeconfigTest : public ::testing::Test {
 protected:
  std::string WriteConfig(const std::string& text, const std::string& name = "config") {
    const std::string path = dir_.path() + "/" + name;
    Write(path, text);
    return path;
  }
  TempDir dir_;
};

TEST_F(KubeconfigTest, AHandWrittenKubeconfigWithCaDataAndATokenFile) {
  const std::string path = WriteConfig(std::string(kTwoContexts) + kCaBase64 + kTwoContextsRest);
  Write(dir_.path() + "/prod.token", "prod-token\n");

  auto dev = OptionsFromKubeconfig(path);
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(dev->server, "https://dev.example.com:6443");
  EXPECT_EQ(dev->token, "dev-token");
  EXPECT_TRUE(dev->insecure_skip_tls_verify);
  EXPECT_EQ(dev->default_namespace, "default");

  auto prod = OptionsFromKubeconfig(path, "prod");
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(prod->server, "https://prod.example.com:6443");
  EXPECT_EQ(prod->ca_data, kCaText);
  EXPECT_TRUE(prod->ca_file.empty());
  EXPECT_EQ(prod->token, "prod-token") << "read relative to the kubeconfig, newline trimmed";
  EXPECT_EQ(prod->default_namespace, "team-a");
  EXPECT_FALSE(prod->insecure_skip_tls_verify);
}

TEST_F(KubeconfigTest, KubeconfigEnvironmentVariableIsUsedWhenNoPathIsGiven) {
  const std::string path = WriteConfig(OneContext("https://127.0.0.1:6443"), "present.yaml");
  ScopedEnv env("KUBECONFIG", (dir_.path() + "/absent.yaml:" + path).c_str());
  auto options = OptionsFromKubeconfig("");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server, "https://127.0.0.1:6443");
}

TEST_F(KubeconfigTest, AKubeconfigVariableNamingNoFileIsAnErrorNotHomesConfig) {
  // $HOME has a valid config; $KUBECONFIG names only missing files: as kubectl, an error.
  ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/home/.kube"));
  Write(dir_.path() + "/home/.kube/config", OneContext("https://127.0.0.1:6443"));
  ScopedEnv home("HOME", (dir_.path() + "/home").c_str());
  ScopedEnv env("KUBECONFIG", (dir_.path() + "/absent.yaml").c_str());
  auto options = OptionsFromKubeconfig("");
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kNotFound);
  EXPECT_NE(options.status().message().find("$KUBECONFIG"), std::string::npos) << options.status();
}

TEST_F(KubeconfigTest, ReadsClientCertificatesAndExecPlugins) {
  std::filesystem::create_directories(dir_.path() + "/certs");
  Write(dir_.path() + "/certs/c.pem", "CERT");
  Write(dir_.path() + "/certs/k.pem", "KEY");
  const std::string path = WriteConfig(
      "current-context: files\n"
      "contexts:\n- name: files\n  context: {cluster: k, user: files}\n"
      "- name: data\n  context: {cluster: k, user: data}\n- name: exec\n  context: {cluster: k, user: exec}\n"
      "clusters:\n- name: k\n  cluster: {server: 'https://k:6443'}\n"
      "users:\n- name: files\n  user: {client-certificate: certs/c.pem, client-key: certs/k.pem}\n"
      "- name: data\n  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}\n"
      "- name: exec\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
      "      command: bin/plugin\n      args: [get-token, --cluster, k]\n"
      "      env: [{name: REGION, value: eu}]\n      installHint: install the plugin\n"
      "      provideClusterInfo: true\n      interactiveMode: Never\n",
      "certs-and-exec");
  auto files = OptionsFromKubeconfig(path, "files");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->client_cert_file, dir_.path() + "/certs/c.pem") << "relative to the kubeconfig";
  EXPECT_EQ(files->client_key_file, dir_.path() + "/certs/k.pem");
  EXPECT_TRUE(files->token.empty());
  auto data = OptionsFromKubeconfig(path, "data");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->client_cert_data, "CERT");
  EXPECT_EQ(data->client_key_data, "KEY");
  auto exec = OptionsFromKubeconfig(path, "exec");
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE(exec->exec.has_value());
  EXPECT_EQ(exec->exec->command, dir_.path() + "/bin/plugin") << "a command with a / is relative to the kubeconfig";
  EXPECT_EQ(exec->exec->args, (std::vector<std::string>{"get-token", "--cluster", "k"}));
  ASSERT_EQ(exec->exec->env.size(), 1u);
  EXPECT_EQ(exec->exec->env[0], (std::pair<std::string, std::string>{"REGION", "eu"}));
  EXPECT_EQ(exec->exec->install_hint, "install the plugin");
  EXPECT_TRUE(exec->exec->provide_cluster_info);
}

TEST_F(KubeconfigTest, ErrorsNameTheFileAndTheField) {
  const auto error = [&](const std::string& text, const std::string& context = "") {
    const std::string path = WriteConfig(text, "bad");
    return OptionsFromKubeconfig(path, context).status();
  };
  const std::string base = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n";

  Status s = error(base + "clusters:\n- name: k\n  cluster: {}\nusers:\n- name: u\n  user: {token: t}\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("clusters[0].cluster.server: missing"), std::string::npos) << s;
  EXPECT_NE(s.message().find(dir_.path() + "/bad"), std::string::npos) << s;

  const std::string cluster = "clusters:\n- name: k\n  cluster: {server: 'https://k:6443'}\n";
  s = error(base + cluster + "users:\n- name: u\n  user: {client-certificate-data: Zm9v}\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("users[0].user.client-key: missing (client-certificate needs it)"), std::string::npos)
      << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {client-key: k.pem}\n");
  EXPECT_NE(s.message().find("users[0].user.client-certificate: missing"), std::string::npos) << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {client-certificate: c.pem, client-key: k.pem}\n");
  EXPECT_NE(s.message().find("users[0].user.client-certificate: " + dir_.path() + "/c.pem: no such file"),
            std::string::npos)
      << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {client-certificate-data: '***', client-key-data: YmFy}\n");
  EXPECT_NE(s.message().find("users[0].user.client-certificate-data: not base64"), std::string::npos) << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {exec: {command: x}}\n");
  EXPECT_NE(s.message().find("users[0].user.exec.apiVersion: missing"), std::string::npos) << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {exec: {apiVersion: client.authentication.k8s.io/v2, command: x}}\n");
  EXPECT_NE(s.message().find("users[0].user.exec.apiVersion: \"client.authentication.k8s.io/v2\""), std::string::npos)
      << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                             "command: x, env: [{value: v}]}}\n");
  EXPECT_NE(s.message().find("users[0].user.exec.env[0].name: missing"), std::string::npos) << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                             "command: x, interactiveMode: Always}}\n");
  EXPECT_NE(s.message().find("users[0].user.exec.interactiveMode: Always needs a terminal"), std::string::npos) << s;
  s = error(base + cluster + "users:\n- name: u\n  user: {auth-provider: {name: gcp}}\n");
  EXPECT_NE(s.message().find("users[0].user.auth-provider: not supported"), std::string::npos) << s;
  s = error(base + "clusters:\n- name: k\n  cluster: {server: 'https://k:6443', tls-server-name: k}\n");
  EXPECT_NE(s.message().find("clusters[0].cluster.tls-server-name: not supported"), std::string::npos) << s;

  s = error(base + "clusters:\n- name: k\n  cluster: {server: 'https://k:6443', certificate-authority-data: '***'}\n");
  EXPECT_NE(s.message().find("clusters[0].cluster.certificate-authority-data: not base64"), std::string::npos) << s;

  s = error(base + "clusters:\n- name: k\n  cluster: {server: 'https://k:6443'}\n"
                   "users:\n- name: u\n  user: {tokenFile: missing.token}\n");
  EXPECT_NE(s.message().find("users[0].user.tokenFile"), std::string::npos) << s;

  // Bytes yaml-cpp's base64 decoder would read out of its table with; text it never returns on.
  s = error(base + cluster + "users:\n- name: u\n  user: {client-certificate-data: \"\xc3\xa9t\xc3\xa9\", client-key-data: YmFy}\n");
  EXPECT_NE(s.message().find("users[0].user.client-certificate-data: not base64"), std::string::npos) << s;
  s = error(base + "clusters: [a], n\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("kubeconfig " + dir_.path() + "/bad:"), std::string::npos) << s;

  s = error(base, "other");
  EXPECT_NE(s.message().find("contexts: no entry named \"other\""), std::string::npos) << s;

  s = error("contexts: []\n");
  EXPECT_NE(s.message().find("current-context: not set"), std::string::npos) << s;

  s = error("current-context: c\ncontexts:\n- name: c\n  context: {user: u}\n");
  EXPECT_NE(s.message().find("contexts[0].context.cluster: missing"), std::string::npos) << s;

  s = error("{ not: yaml: at all");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;

  EXPECT_EQ(OptionsFromKubeconfig(dir_.path() + "/nothing-here").status().code(), StatusCode::kNotFound);
}

TEST(InClusterTest, ServiceAccountFilesAndEnvironment) {
  TempDir root;
  Write(root.path() + "/token", "sa-token\n");
  Write(root.path() + "/namespace", "star-system");
  Write(root.path() + "/ca.crt", kCaText);
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto options = InClusterOptions(root.path());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server, "https://10.96.0.1:443");
  EXPECT_EQ(options->token, "sa-token");
  EXPECT_EQ(options->default_namespace, "star-system");
  EXPECT_EQ(options->ca_file, root.path() + "/ca.crt");

  ScopedEnv v6("KUBERNETES_SERVICE_HOST", "fd00::1");
  auto ipv6 = InClusterOptions(root.path());
  ASSERT_TRUE(ipv6.ok()) << ipv6.status();
  EXPECT_EQ(ipv6->server, "https://[fd00::1]:443");
}

TEST(InClusterTest, OutsideAPodIsFailedPrecondition) {
  TempDir root;
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    ScopedEnv port("KUBERNETES_SERVICE_PORT", nullptr);
    EXPECT_EQ(InClusterOptions(root.path()).status().code(), StatusCode::kFailedPrecondition);
  }
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  const Status no_token = InClusterOptions(root.path()).status();
  EXPECT_EQ(no_token.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_token.message().find(root.path() + "/token"), std::string::npos) << no_token;
}

}  // namespace
}  // namespace star::kube
