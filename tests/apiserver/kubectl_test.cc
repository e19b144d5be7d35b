// The real kubectl 1.32 against the real star-test-apiserver binary: what the operator's
// end-to-end tests rely on (apply, get with printer columns, -o json|yaml|wide, -l,
// describe, create, patch, delete with cascading, api-resources, the short name, the
// typed create commands that send protobuf bodies).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "star/test_support/tls.h"
#include "test_process.h"

namespace star::apiserver {
namespace {

using nlohmann::json;
using testing::BackgroundProcess;
using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;
using namespace std::chrono_literals;

const std::string kTestdata = STAR_APISERVER_TESTDATA;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") + "\nstdout:\n" + r.out +
         "\nstderr:\n" + r.err;
}

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({}); }

  void StartServer(const std::vector<std::string>& extra) {
    ASSERT_FALSE(dir_.path().empty());
    kubeconfig_ = dir_.path() + "/kubeconfig";
    std::vector<std::string> argv = {STAR_APISERVER_BINARY, "--listen", "127.0.0.1:0", "--crds", kTestdata + "/crds",
                                     "--kubeconfig-out", kubeconfig_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ASSERT_TRUE(server_.Start(argv, dir_.path() + "/server.log"));
    const auto line = server_.WaitForLine("listening on ", 30s);
    ASSERT_TRUE(line.has_value()) << "the emulator did not start:\n" << ReadFile(dir_.path() + "/server.log");
  }

  void TearDown() override {
    const int status = server_.Stop();
    // SIGTERM is a clean shutdown: exit code 0.
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "wait status " << status << "\n" << ReadFile(dir_.path() + "/server.log");
  }

  // kubectl with this test's kubeconfig and its own discovery cache.
  ProcessResult Kubectl(std::vector<std::string> args, const std::string& stdin_text = "") {
    std::vector<std::string> argv = {STAR_KUBECTL, "--kubeconfig", kubeconfig_, "--cache-dir",
                                     dir_.path() + "/cache"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, stdin_text, 60s);
  }

  // kubectl that must succeed.
  std::string Ok(std::vector<std::string> args, const std::string& stdin_text = "") {
    std::string command;
    for (const auto& a : args) command += a + " ";
    const ProcessResult r = Kubectl(args, stdin_text);
    EXPECT_EQ(r.exit_code, 0) << "kubectl " << command << "\n" << Describe(r);
    return r.out;
  }

  json GetJson(std::vector<std::string> args) {
    args.insert(args.begin(), "get");
    args.push_back("-o");
    args.push_back("json");
    const std::string out = Ok(args);
    try {
      return json::parse(out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "kubectl get -o json printed no JSON: " << e.what() << "\n" << out;
      return json();
    }
  }

  TempDir dir_;
  BackgroundProcess server_;
  std::string kubeconfig_;
};

TEST_F(KubectlTest, ApplyCreatesThenASecondApplyWithAChangePatches) {
  EXPECT_NE(Ok({"apply", "-f", kTestdata + "/widget.yaml"}).find("widget.test.star.dev/alpha created"),
            std::string::npos);
  json w = GetJson({"widget", "alpha"});
  EXPECT_EQ(w["spec"]["replicas"], 2);
  EXPECT_EQ(w["spec"]["mode"], "Fast") << "the schema default is applied";
  EXPECT_EQ(w["metadata"]["generation"], 1);

  std::string manifest = ReadFile(kTestdata + "/widget.yaml");
  manifest.replace(manifest.find("replicas: 2"), 11, "replicas: 3");
  EXPECT_NE(Ok({"apply", "-f", "-"}, manifest).find("widget.test.star.dev/alpha configured"), std::string::npos);
  w = GetJson({"widget", "alpha"});
  EXPECT_EQ(w["spec"]["replicas"], 3);
  EXPECT_EQ(w["metadata"]["generation"], 2);

  // Unchanged: nothing to patch.
  EXPECT_NE(Ok({"apply", "-f", "-"}, manifest).find("unchanged"), std::string::npos);
}

TEST_F(KubectlTest, GetByShortNameShowsThePrinterColumns) {
  Ok({"apply", "-f", kTestdata + "/widget.yaml"});
  Ok({"patch", "wd", "alpha", "--subresource=status", "--type", "merge", "-p", R"({"status":{"phase":"Running"}})"});
  const std::string table = Ok({"get", "wd"});
  EXPECT_NE(table.find("NAME"), std::string::npos) << table;
  EXPECT_NE(table.find("PHASE"), std::string::npos) << table;
  EXPECT_NE(table.find("REPLICAS"), std::string::npos) << table;
  EXPECT_NE(table.find("AGE"), std::string::npos) << table;
  EXPECT_EQ(table.find("MODE"), std::string::npos) << "priority 1 columns only with -o wide:\n" << table;
  EXPECT_NE(table.find("alpha"), std::string::npos) << table;
  EXPECT_NE(table.find("Running"), std::string::npos) << table;

  const std::string wide = Ok({"get", "widgets", "-o", "wide"});
  EXPECT_NE(wide.find("MODE"), std::string::npos) << wide;
  EXPECT_NE(wide.find("Fast"), std::string::npos) << wide;
}

TEST_F(KubectlTest, GetJsonRoundTripsThroughReplace) {
  Ok({"apply", "-f", kTestdata + "/widget.yaml"});
  json w = GetJson({"wd", "alpha"});
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["apiVersion"], "test.star.dev/v1");
  EXPECT_EQ(w["kind"], "Widget");
  EXPECT_EQ(w["metadata"]["labels"]["app"], "demo");
  EXPECT_FALSE(w["metadata"]["uid"].get<std::string>().empty());

  w["spec"]["color"] = "red";
  EXPECT_NE(Ok({"replace", "-f", "-"}, w.dump()).find("replaced"), std::string::npos);
  const json again = GetJson({"wd", "alpha"});
  EXPECT_EQ(again["spec"]["color"], "red");
  EXPECT_EQ(again["metadata"]["uid"], w["metadata"]["uid"]);
  EXPECT_NE(again["metadata"]["resourceVersion"], w["metadata"]["resourceVersion"]);

  // The stale copy is refused: its resourceVersion is no longer current.
  const ProcessResult stale = Kubectl({"replace", "-f", "-"}, w.dump());
  EXPECT_NE(stale.exit_code, 0) << Describe(stale);
  EXPECT_NE(stale.err.find("the object has been modified"), std::string::npos) << Describe(stale);
}

TEST_F(KubectlTest, AnInvalidManifestIsRefusedNamingTheField) {
  const ProcessResult r = Kubectl({"apply", "-f", kTestdata + "/widget-invalid.yaml"});
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("spec.replicas"), std::string::npos) << Describe(r);
  EXPECT_NE(r.err.find("should be greater than or equal to 1"), std::string::npos) << Describe(r);
  const ProcessResult get = Kubectl({"get", "wd", "broken"});
  EXPECT_NE(get.exit_code, 0) << "nothing was created:\n" << Describe(get);

  // An unknown field: kubectl's default --validate=strict reaches the server's check.
  const ProcessResult unknown = Kubectl(
      {"apply", "-f", "-"},
      "apiVersion: test.star.dev/v1\nkind: Widget\nmetadata:\n  name: typo\nspec:\n  replicas: 1\n  replicaz: 2\n");
  EXPECT_NE(unknown.exit_code, 0) << Describe(unknown);
  EXPECT_NE(unknown.err.find("unknown field \"spec.replicaz\""), std::string::npos) << Describe(unknown);
}

TEST_F(KubectlTest, DeleteRemovesTheOwnerAndCascadesToDependents) {
  Ok({"apply", "-f", kTestdata + "/widget.yaml"});
  const std::string uid = GetJson({"wd", "alpha"})["metadata"]["uid"];
  const std::string dependent = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child\n  ownerReferences:\n"
                                "  - apiVersion: test.star.dev/v1\n    kind: Widget\n    name: alpha\n    uid: " +
                                uid + "\ndata:\n  a: b\n";
  EXPECT_NE(Ok({"create", "-f", "-"}, dependent).find("configmap/child created"), std::string::npos);
  Ok({"get", "configmap", "child"});

  EXPECT_NE(Ok({"delete", "wd", "alpha"}).find("widget.test.star.dev \"alpha\" deleted"), std::string::npos);
  const ProcessResult owner = Kubectl({"get", "wd", "alpha"});
  EXPECT_NE(owner.exit_code, 0);
  EXPECT_NE(owner.err.find("NotFound"), std::string::npos) << Describe(owner);
  const ProcessResult child = Kubectl({"get", "configmap", "child"});
  EXPECT_NE(child.exit_code, 0) << "the dependent is gone too:\n" << Describe(child);
  EXPECT_NE(child.err.find("not found"), std::string::npos) << Describe(child);
}

TEST_F(KubectlTest, ApiResourcesListsTheKindWithItsShortName) {
  const std::string out = Ok({"api-resources"});
  bool found = false;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (!w.empty() && w[0] == "widgets") {
      found = true;
      EXPECT_EQ(w, (std::vector<std::string>{"widgets", "wd", "test.star.dev/v1", "true", "Widget"})) << line;
    }
  }
  EXPECT_TRUE(found) << out;
  EXPECT_NE(out.find("pods"), std::string::npos);
  EXPECT_NE(out.find("leases"), std::string::npos);
}

TEST_F(KubectlTest, LabelSelectorsYamlPatchAndDescribe) {
  Ok({"apply", "-f", kTestdata + "/widget.yaml"});
  const std::string yaml = Ok({"get", "wd", "-l", "app=demo", "-o", "yaml"});
  EXPECT_NE(yaml.find("name: alpha"), std::string::npos) << yaml;
  const ProcessResult none = Kubectl({"get", "wd", "-l", "app notin (demo)"});
  EXPECT_EQ(none.exit_code, 0) << Describe(none);
  EXPECT_NE(none.err.find("No resources found"), std::string::npos) << Describe(none);

  EXPECT_NE(Ok({"patch", "wd", "alpha", "--type", "merge", "-p", R"({"spec":{"replicas":7}})"}).find("patched"),
            std::string::npos);
  EXPECT_EQ(GetJson({"wd", "alpha"})["spec"]["replicas"], 7);
  const ProcessResult bad = Kubectl({"patch", "wd", "alpha", "--type", "merge", "-p", R"({"spec":{"replicas":11}})"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("spec.replicas in body should be less than or equal to 10"), std::string::npos)
      << Describe(bad);

  // describe finds the object's events through a field selector on involvedObject.
  const std::string uid = GetJson({"wd", "alpha"})["metadata"]["uid"];
  const json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"name", "alpha.1"}}},
                      {"involvedObject",
                       {{"apiVersion", "test.star.dev/v1"}, {"kind", "Widget"}, {"name", "alpha"},
                        {"namespace", "default"}, {"uid", uid}}},
                      {"reason", "WidgetTested"},
                      {"message", "described by kubectl"},
                      {"type", "Normal"},
                      {"count", 1},
                      {"source", {{"component", "kubectl-test"}}}};
  Ok({"create", "-f", "-"}, event.dump());
  const std::string described = Ok({"describe", "wd", "alpha"});
  EXPECT_NE(described.find("Replicas:  7"), std::string::npos) << described;
  EXPECT_NE(described.find("WidgetTested"), std::string::npos) << described;
  EXPECT_NE(described.find("described by kubectl"), std::string::npos) << described;
}

TEST_F(KubectlTest, BuiltInKindsPodsAndNamespacesWork) {
  EXPECT_NE(Ok({"run", "p1", "--image=busybox", "-l", "tier=web"}).find("pod/p1 created"), std::string::npos);
  const std::string pods = Ok({"get", "pods", "-l", "tier=web"});
  EXPECT_NE(pods.find("READY"), std::string::npos) << pods;
  EXPECT_NE(pods.find("Pending"), std::string::npos) << pods;
  const std::string namespaces = Ok({"get", "ns"});
  EXPECT_NE(namespaces.find("default"), std::string::npos) << namespaces;
  EXPECT_NE(namespaces.find("Active"), std::string::npos) << namespaces;
  EXPECT_NE(Ok({"delete", "pod", "p1"}).find("deleted"), std::string::npos);
}

// kubectl's typed create commands send protobuf bodies (a regression test: they were 415).
TEST_F(KubectlTest, CreateNamespaceConfigMapSecretAndServiceSendProtobuf) {
  const ProcessResult ns = Kubectl({"create", "namespace", "team-a", "-v=8"});
  ASSERT_EQ(ns.exit_code, 0) << Describe(ns);
  EXPECT_NE(ns.out.find("namespace/team-a created"), std::string::npos) << Describe(ns);
  EXPECT_NE(ns.err.find("Content-Type: application/vnd.kubernetes.protobuf"), std::string::npos)
      << "kubectl no longer sends protobuf here, so this test no longer covers it:\n" << Describe(ns);
  const json namespace_object = GetJson({"namespace", "team-a"});
  EXPECT_EQ(namespace_object["metadata"]["name"], "team-a");
  EXPECT_EQ(namespace_object["status"]["phase"], "Active");

  EXPECT_NE(Ok({"create", "configmap", "cm1", "-n", "team-a", "--from-literal=a=b",
                "--from-literal=greeting=hello world"})
                .find("configmap/cm1 created"),
            std::string::npos);
  const json cm = GetJson({"configmap", "cm1", "-n", "team-a"});
  EXPECT_EQ(cm["metadata"]["namespace"], "team-a");
  EXPECT_EQ(cm["data"], json({{"a", "b"}, {"greeting", "hello world"}}));

  EXPECT_NE(Ok({"create", "secret", "generic", "s1", "--from-literal=a=b", "--from-literal=token=s3cr3t"})
                .find("secret/s1 created"),
            std::string::npos);
  const json secret = GetJson({"secret", "s1"});
  EXPECT_EQ(secret["data"], json({{"a", "Yg=="}, {"token", "czNjcjN0"}})) << "data is base64, as Kubernetes shows it";
  EXPECT_EQ(secret["type"], "Opaque") << "the API server's default type";

  EXPECT_NE(Ok({"create", "service", "clusterip", "svc1", "--tcp=80:8080"}).find("service/svc1 created"),
            std::string::npos);
  const json service = GetJson({"service", "svc1"});
  EXPECT_EQ(service["spec"]["type"], "ClusterIP");
  EXPECT_EQ(service["spec"]["selector"], json({{"app", "svc1"}}));
  ASSERT_TRUE(service["spec"]["ports"].is_array() && service["spec"]["ports"].size() == 1) << service.dump();
  EXPECT_EQ(service["spec"]["ports"][0]["port"], 80);
  EXPECT_EQ(service["spec"]["ports"][0]["targetPort"], 8080);

  // A second create of the same name is the usual 409, not a decoding failure.
  const ProcessResult again = Kubectl({"create", "configmap", "cm1", "-n", "team-a", "--from-literal=a=c"});
  EXPECT_NE(again.exit_code, 0) << Describe(again);
  EXPECT_NE(again.err.find("configmaps \"cm1\" already exists"), std::string::npos) << Describe(again);
}

// HTTPS: kubectl verifies the emulator with the kubeconfig's certificate-authority-data
// and authenticates with a client certificate or a bearer token.
class KubectlHttpsTest : public KubectlTest {
 protected:
  void SetUp() override {}

  // Serves HTTPS with a certificate for 127.0.0.1 signed by ca_, then `extra`.
  void StartHttps(std::vector<std::string> extra) {
    const std::string d = dir_.path();
    const star::test_support::CertifiedKey serving = ca_.IssueServer({"localhost"}, {"127.0.0.1"});
    star::test_support::WriteTextFile(d + "/ca.crt", ca_.cert_pem());
    std::vector<std::string> tls = {"--tls-cert-file", star::test_support::WriteTextFile(d + "/server.crt", serving.cert),
                                    "--tls-private-key-file", star::test_support::WriteTextFile(d + "/server.key", serving.key),
                                    "--tls-ca-file", d + "/ca.crt"};
    tls.insert(tls.end(), extra.begin(), extra.end());
    StartServer(tls);
  }

  star::test_support::TestCa ca_;
};

TEST_F(KubectlHttpsTest, ClientCertificatesAuthenticateKubectl) {
  const star::test_support::CertifiedKey admin = ca_.IssueClient("admin", {"system:masters"});
  const std::string d = dir_.path();
  StartHttps({"--client-ca-file", d + "/ca.crt", "--kubeconfig-client-certificate",
              star::test_support::WriteTextFile(d + "/admin.crt", admin.cert), "--kubeconfig-client-key",
              star::test_support::WriteTextFile(d + "/admin.key", admin.key)});
  EXPECT_NE(ReadFile(kubeconfig_).find("https://127.0.0.1:"), std::string::npos) << ReadFile(kubeconfig_);
  Ok({"create", "namespace", "tls"});
  EXPECT_EQ(GetJson({"namespace", "tls"})["metadata"]["name"], "tls");

  // The same server with a kubeconfig that has no client certificate: refused.
  std::string anonymous = ReadFile(kubeconfig_);
  anonymous = anonymous.substr(0, anonymous.find("users:")) + "users:\n  - name: star-emulator\n    user: {}\n";
  star::test_support::WriteTextFile(d + "/anonymous", anonymous);
  const ProcessResult r = RunProcess({STAR_KUBECTL, "--kubeconfig", d + "/anonymous", "--cache-dir", d + "/cache2",
                                      "get", "namespaces", "--request-timeout=10s"},
                                     "", 60s);
  EXPECT_NE(r.exit_code, 0) << Describe(r);
}

TEST_F(KubectlHttpsTest, TokensAreCheckedAndAWrongCaIsRefused) {
  StartHttps({"--token", "s3cret"});
  EXPECT_NE(ReadFile(kubeconfig_).find("token: s3cret"), std::string::npos) << ReadFile(kubeconfig_);
  Ok({"get", "namespaces"});
  ProcessResult r = Kubectl({"get", "namespaces", "--token", "wrong"});
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("Unauthorized"), std::string::npos) << Describe(r);

  const std::string other = star::test_support::TestCa("other").cert_pem();
  star::test_support::WriteTextFile(dir_.path() + "/other.crt", other);
  r = Kubectl({"get", "namespaces", "--certificate-authority", dir_.path() + "/other.crt"});
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("certificate"), std::string::npos) << Describe(r);
}

}  // namespace
}  // namespace star::apiserver
