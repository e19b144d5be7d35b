// The star-agent binary with --kubeconfig against the real API server (the cluster of
// $KUBECONFIG: the k8s_cluster fixture's, scripts/cluster.sh), under the chart's RBAC for
// the agent: flags, a --once pass that writes the NodeAllocation's status (as a
// ServiceAccount with a token, and as a node with a client certificate of the cluster's
// CA), a refused pass without the permissions, and (with root and a writable cgroup v1 cpu
// hierarchy) a running agent that applies a created NodeAllocation to a real cgroup,
// restores the original when it is deleted, and, behind star-faultproxy, follows an update
// after its watch was dropped.
//
// Each test has a NodeAllocation of its own, named after a node that does not exist
// ("star-agent-test-" and a random suffix), and its own namespace and ClusterRole(Binding)
// of that name, removed at the end.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s_test_util.h"
#include "star/test_support/process.h"
#include "star/test_support/temp_dir.h"
#include "star/agent/release_daemonset.h"
#include "star/kube/client.h"
#include "star/test_support/tls.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using star::test_support::BackgroundProcess;
using star::test_support::ProcessResult;
using star::test_support::RunProcess;
using star::test_support::TempDir;
using star::test_support::WriteTextFile;
using namespace std::chrono_literals;

constexpr char kUid[] = "5b1e7c3a-9d2f-4e6b-8a1c-3f5d7e9b0a2c";
constexpr char kCpuRoot[] = "/sys/fs/cgroup/cpu";

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// Polls `done` every 10 ms for at most 20 s.
bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
  }
  return done();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RandomSuffix() {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 8; ++i) s += "abcdefghijklmnopqrstuvwxyz0123456789"[rd() % 36];
  return s;
}

// A kubeconfig for `server` (verified with `ca_file`) with `user`'s lines (YAML, indented
// under `user:`).
std::string Kubeconfig(const std::string& server, const std::string& ca_file, const std::string& user) {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: star\n  cluster:\n    server: " + server +
         "\n    certificate-authority: " + ca_file + "\nusers:\n- name: agent\n  user:\n" + user +
         "contexts:\n- name: star\n  context:\n    cluster: star\n    user: agent\ncurrent-context: star\n";
}

// The agent's identity is a ServiceAccount of the test's namespace with a token from the
// TokenRequest API, as the DaemonSet's pods have.
class K8sAgentBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    admin_kubeconfig_ = Env("KUBECONFIG");
    if (admin_kubeconfig_.empty() || !fs::exists(admin_kubeconfig_)) {
      GTEST_SKIP() << "needs KUBECONFIG of a running cluster (bash scripts/cluster.sh up DIR; ctest's k8s_cluster "
                      "fixture); KUBECONFIG="
                   << admin_kubeconfig_;
    }
    cluster_dir_ = Env("STAR_CLUSTER_DIR", fs::path(admin_kubeconfig_).parent_path().string());
    kubectl_ = Env("STAR_KUBECTL", cluster_dir_ + "/bin/kubectl");
    auto options = star::kube::OptionsFromKubeconfig(admin_kubeconfig_);
    ASSERT_TRUE(options.ok()) << options.status();
    server_ = options->server;
    ca_file_ = cluster_dir_ + "/pki/ca.crt";
    ASSERT_TRUE(fs::exists(ca_file_)) << "the cluster's CA, " << ca_file_;
    auto client = star::kube::Client::Create(*options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    node_ = "star-agent-test-" + RandomSuffix();
    kubeconfig_ = dir_.path() + "/agent.kubeconfig";
    MakeIdentity();
  }

  void TearDown() override {
    if (node_.empty() || !client_) return;
    (void)client_->Delete(star::kube::NodeAllocations(), "", node_);
    Kubectl({"delete", "clusterrolebinding,clusterrole", node_, "--ignore-not-found", "--wait=false"});
    Kubectl({"delete", "events", "-n", "default", "--field-selector", "involvedObject.name=" + node_,
             "--ignore-not-found"});
    if (made_namespace_) Kubectl({"delete", "namespace", node_, "--wait=false"});
  }

  ProcessResult Kubectl(std::vector<std::string> args, const std::string& stdin_text = "") {
    args.insert(args.begin(), {kubectl_, "--kubeconfig", admin_kubeconfig_});
    return RunProcess(args, stdin_text, 60s);
  }

  // The subject the agent's permissions are bound to, and the user it acts as.
  virtual json Subject() const {
    return {{"kind", "ServiceAccount"}, {"name", "star-agent"}, {"namespace", node_}};
  }
  virtual std::string User() const { return "system:serviceaccount:" + node_ + ":star-agent"; }

  // Makes the agent's identity and writes kubeconfig_ for it.
  virtual void MakeIdentity() {
    ProcessResult r = Kubectl({"create", "namespace", node_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    made_namespace_ = true;
    r = Kubectl({"create", "serviceaccount", "star-agent", "-n", node_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = Kubectl({"create", "token", "star-agent", "-n", node_, "--duration", "1h"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    token_ = r.out.substr(0, r.out.find_last_not_of("\n") + 1);
    WriteAgentKubeconfig(server_);
  }

  // kubeconfig_ pointing at `server` with the agent's credentials.
  virtual void WriteAgentKubeconfig(const std::string& server) {
    WriteTextFile(kubeconfig_, Kubeconfig(server, ca_file_, "    token: " + token_ + "\n"));
  }

  // The chart's permissions for the agent (helm/star/templates/agent-rbac.yaml), bound to
  // Subject(); returns once the API server authorizes them.
  void GrantAgentPermissions() {
    const json role = {
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "ClusterRole"},
        {"metadata", {{"name", node_}}},
        {"rules",
         {{{"apiGroups", {"star.dev"}}, {"resources", {"nodeallocations"}}, {"verbs", {"list", "watch"}}},
          {{"apiGroups", {"star.dev"}}, {"resources", {"nodeallocations/status"}}, {"verbs", {"patch"}}},
          {{"apiGroups", {""}}, {"resources", {"events"}}, {"verbs", {"create"}}}}}};
    const json binding = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                          {"kind", "ClusterRoleBinding"},
                          {"metadata", {{"name", node_}}},
                          {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", node_}}},
                          {"subjects", {Subject()}}};
    for (const json& o : {role, binding}) {
      ProcessResult r = Kubectl({"apply", "-f", "-"}, o.dump());
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_TRUE(WaitFor([&] {
      return Kubectl({"auth", "can-i", "patch", "nodeallocations.star.dev", "--subresource=status", "--as", User()})
                 .out.rfind("yes", 0) == 0;
    })) << User() << " was not granted the agent's permissions";
  }

  json Allocation(int64_t quota_millicores) const {
    return star::agent::testing::OneWorkerAllocation(node_, kUid, quota_millicores);
  }
  std::vector<std::string> Args(const std::string& cgroup_root) const {
    return {STAR_AGENT_BINARY, "--node", node_, "--kubeconfig", kubeconfig_,
            "--cgroup-root", cgroup_root, "--journal", dir_.path() + "/journal.json",
            "--metrics-address", "", "--poll-ms", "20"};
  }
  json Get() {
    auto o = client_->Get(star::kube::NodeAllocations(), "", node_);
    return o.ok() ? *o : json();
  }
  std::string Condition(const json& o, const std::string& type, const std::string& field) {
    for (const json& c : o.value(json::json_pointer("/status/conditions"), json::array())) {
      if (c.value("type", "") == type) return c.value(field, "");
    }
    return "";
  }

  // A --once pass against an allocation whose pod has no cgroup here: the pass fails
  // for that pod (exit 1) and says so in the status; nothing is journalled.
  void ExpectOnceReportsAFailedPod() {
    GrantAgentPermissions();
    ASSERT_TRUE(client_->Create(star::kube::NodeAllocations(), "", Allocation(500)).ok());
    auto args = Args("star-agent-k8s-test-" + std::to_string(getpid()));
    args.push_back("--once");
    const auto r = RunProcess(args, "", 60s);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const json o = Get();
    EXPECT_EQ(o.value(json::json_pointer("/status/observedGeneration"), int64_t{-1}), 1) << o.dump();
    EXPECT_EQ(Condition(o, "Valid", "status"), "True");
    EXPECT_EQ(Condition(o, "Applied", "status"), "False");
    EXPECT_EQ(Condition(o, "Applied", "reason"), "PodsFailed");
    EXPECT_NE(Condition(o, "Applied", "message").find("ns/worker-0"), std::string::npos)
        << Condition(o, "Applied", "message");
    EXPECT_EQ(Condition(o, "Ready", "status"), "False");
    EXPECT_TRUE(o["status"]["applied"].empty());
  }

  TempDir dir_;
  std::string admin_kubeconfig_, cluster_dir_, kubectl_, server_, ca_file_;
  std::string node_, kubeconfig_, token_;
  bool made_namespace_ = false;
  std::unique_ptr<star::kube::Client> client_;
};

// The same with a client certificate of the cluster's CA for system:node:NODE in
// system:nodes, as kubeadm's kubeconfigs authenticate.
class K8sAgentBinaryCertificateTest : public K8sAgentBinaryTest {
 protected:
  json Subject() const override {
    return {{"kind", "User"}, {"name", User()}, {"apiGroup", "rbac.authorization.k8s.io"}};
  }
  std::string User() const override { return "system:node:" + node_; }

  void MakeIdentity() override {
    const std::string d = dir_.path();
    const std::string ca_key = cluster_dir_ + "/pki/ca.key";
    ASSERT_TRUE(fs::exists(ca_key)) << "the cluster's CA key, " << ca_key;
    WriteTextFile(d + "/node.ext",
                  "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                  "extendedKeyUsage=clientAuth\n");
    ProcessResult r = RunProcess({"openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout",
                                  d + "/node.key", "-subj", "/O=system:nodes/CN=" + User(), "-out", d + "/node.csr"},
                                 "", 60s);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::random_device rd;
    r = RunProcess({"openssl", "x509", "-req", "-in", d + "/node.csr", "-CA", ca_file_, "-CAkey", ca_key,
                    "-set_serial", std::to_string(rd()), "-days", "1", "-extfile", d + "/node.ext", "-out",
                    d + "/node.crt"},
                   "", 60s);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    WriteAgentKubeconfig(server_);
  }
  void WriteAgentKubeconfig(const std::string& server) override {
    const std::string d = dir_.path();
    WriteTextFile(kubeconfig_, Kubeconfig(server, ca_file_,
                                          "    client-certificate: " + d + "/node.crt\n    client-key: " + d +
                                              "/node.key\n"));
  }
};

TEST_F(K8sAgentBinaryTest, SourcesAreExclusive) {
  auto args = Args("star-agent-k8s-test");
  args.insert(args.end(), {"--allocation-file", dir_.path() + "/a.json", "--once"});
  const auto r = RunProcess(args, "", 30s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(dir_.path() + "/journal.json"));
}

TEST_F(K8sAgentBinaryTest, OnceWritesStatusForPodsNotOnThisNode) {
  if (!fs::exists(kCpuRoot) && !fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    GTEST_SKIP() << "no cgroup cpu hierarchy: the agent's real NodeOs cannot start";
  }
  ExpectOnceReportsAFailedPod();
}

TEST_F(K8sAgentBinaryCertificateTest, OnceOverHttpsWithAClientCertificate) {
  if (!fs::exists(kCpuRoot) && !fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    GTEST_SKIP() << "no cgroup cpu hierarchy: the agent's real NodeOs cannot start";
  }
  EXPECT_EQ(ReadFile(kubeconfig_).find("token:"), std::string::npos) << ReadFile(kubeconfig_);
  EXPECT_NE(ReadFile(kubeconfig_).find("server: https://127.0.0.1:"), std::string::npos) << ReadFile(kubeconfig_);
  EXPECT_NE(ReadFile(kubeconfig_).find("client-certificate: " + dir_.path() + "/node.crt"), std::string::npos);
  ExpectOnceReportsAFailedPod();
}

// Without the chart's permissions the API server refuses the list: the pass fails and
// nothing is written.
TEST_F(K8sAgentBinaryTest, OnceWithoutPermissionsIsRefused) {
  if (!fs::exists(kCpuRoot) && !fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    GTEST_SKIP() << "no cgroup cpu hierarchy: the agent's real NodeOs cannot start";
  }
  ASSERT_TRUE(client_->Create(star::kube::NodeAllocations(), "", Allocation(500)).ok());
  auto args = Args("star-agent-k8s-test-" + std::to_string(getpid()));
  args.push_back("--once");
  const auto r = RunProcess(args, "", 60s);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("forbidden"), std::string::npos) << r.err;
  EXPECT_FALSE(Get().contains("status")) << Get().dump();
}

// A running agent with a real pod cgroup of a cgroup root of its own.
class K8sAgentRunningTest : public K8sAgentBinaryTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !fs::exists(std::string(kCpuRoot) + "/cpu.cfs_quota_us")) {
      GTEST_SKIP() << "needs root and a cgroup v1 cpu hierarchy at " << kCpuRoot;
    }
    K8sAgentBinaryTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    root_ = "star-agent-k8s-test-" + std::to_string(getpid());
    pod_dir_ = std::string(kCpuRoot) + "/" + root_ + "/kubepods/burstable/pod" + kUid;
    std::error_code ec;
    fs::create_directories(pod_dir_, ec);
    ASSERT_FALSE(ec) << ec.message();
    std::ofstream(pod_dir_ + "/cpu.cfs_quota_us") << "200000";
    ASSERT_EQ(Quota(), 200000);
    GrantAgentPermissions();
  }
  void TearDown() override {
    K8sAgentBinaryTest::TearDown();
    fs::path leaf = pod_dir_;  // leaf first, with rmdir (cgroup files cannot be unlinked)
    for (int i = 0; !pod_dir_.empty() && i < 4; ++i, leaf = leaf.parent_path()) ::rmdir(leaf.c_str());
  }
  int64_t Quota() const {
    const std::string s = ReadFile(pod_dir_ + "/cpu.cfs_quota_us");
    return s.empty() ? int64_t{0} : std::stoll(s);
  }
  int64_t ObservedGeneration() {
    return Get().value(json::json_pointer("/status/observedGeneration"), int64_t{-1});
  }

  std::string root_, pod_dir_;
};

TEST_F(K8sAgentRunningTest, RunningAgentAppliesCreatedAndRestoresDeletedAllocation) {
  BackgroundProcess agent;
  ASSERT_TRUE(agent.Start(Args(root_), dir_.path() + "/agent.err"));
  ASSERT_TRUE(client_->Create(star::kube::NodeAllocations(), "", Allocation(500)).ok());
  EXPECT_TRUE(WaitFor([&] { return Quota() == 50000 && ObservedGeneration() == 1; }))
      << "quota " << Quota() << "; " << Get().dump() << "\n" << ReadFile(dir_.path() + "/agent.err");
  EXPECT_EQ(Condition(Get(), "Ready", "status"), "True");

  ASSERT_TRUE(client_->Delete(star::kube::NodeAllocations(), "", node_).ok());
  EXPECT_TRUE(WaitFor([&] {
    return Quota() == 200000 && ReadFile(dir_.path() + "/journal.json").find(kUid) == std::string::npos;
  })) << "original not restored; quota " << Quota() << "\n"
      << ReadFile(dir_.path() + "/agent.err");
  const int status = agent.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << status << "\n" << ReadFile(dir_.path() + "/agent.err");
}

// star-faultproxy (tests/support/faultproxy) ends the agent's watch after its first event,
// once cleanly and once by resetting the stream: the agent watches again and applies the
// update made after the drop.
TEST_F(K8sAgentRunningTest, RunningAgentFollowsAnUpdateAfterItsWatchIsDropped) {
  const std::string proxy_binary = Env("STAR_FAULTPROXY", cluster_dir_ + "/bin/star-faultproxy");
  if (!fs::exists(proxy_binary)) GTEST_SKIP() << "no star-faultproxy at " << proxy_binary;
  const std::string pki = cluster_dir_ + "/pki/";
  BackgroundProcess proxy;
  ASSERT_TRUE(proxy.Start({proxy_binary, "--upstream", server_, "--ca-cert", pki + "ca.crt", "--ca-key",
                           pki + "ca.key", "--client-cert", pki + "admin.crt", "--client-key", pki + "admin.key"},
                          dir_.path() + "/proxy.err"));
  const auto control_line = proxy.WaitForLine("control on ", 30s);
  const auto listen_line = proxy.WaitForLine("listening on ", 30s);
  ASSERT_TRUE(control_line && listen_line) << ReadFile(dir_.path() + "/proxy.err");
  const std::string control = control_line->substr(std::string("control on ").size());
  const json rules = json::array(
      {{{"verb", "watch"}, {"resource", "nodeallocations"}, {"name", node_}, {"dropWatchAfterEvents", 1}, {"count", 1}},
       {{"verb", "watch"},
        {"resource", "nodeallocations"},
        {"name", node_},
        {"dropWatchAfterEvents", 1},
        {"abort", true},
        {"count", 1}}});
  ProcessResult r = RunProcess({"curl", "-sf", "-XPOST", "--data-binary", "@-", control + "/faults"}, rules.dump(), 30s);
  ASSERT_EQ(r.exit_code, 0) << r.err << ReadFile(dir_.path() + "/proxy.err");
  WriteAgentKubeconfig(listen_line->substr(std::string("listening on ").size()));

  BackgroundProcess agent;
  ASSERT_TRUE(agent.Start(Args(root_), dir_.path() + "/agent.err"));
  ASSERT_TRUE(client_->Create(star::kube::NodeAllocations(), "", Allocation(500)).ok());
  EXPECT_TRUE(WaitFor([&] { return Quota() == 50000 && ObservedGeneration() == 1; }))
      << "quota " << Quota() << "; " << Get().dump() << "\n" << ReadFile(dir_.path() + "/agent.err");
  // The agent's first watch ends cleanly after its first event (the creation or the
  // agent's own status write); its second is reset after its first. Once the second has
  // started, the spec changes: an event of the second watch, or of the third.
  const auto faults = [&] {
    const ProcessResult got = RunProcess({"curl", "-sf", control + "/faults"}, "", 30s);
    return got.exit_code == 0 ? json::parse(got.out, nullptr, false) : json();
  };
  EXPECT_TRUE(WaitFor([&] {
    const json f = faults();
    const json rules_now = f.is_object() ? f.value("rules", json::array()) : json::array();
    return rules_now.size() == 2 && rules_now[0].value("applied", 0) == 1 && rules_now[1].value("applied", 0) == 1;
  })) << faults().dump() << "\n" << ReadFile(dir_.path() + "/proxy.err");
  auto patched = client_->MergePatch(star::kube::NodeAllocations(), "", node_,
                                     {{"spec", Allocation(250)["spec"]}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_TRUE(WaitFor([&] { return Quota() == 25000 && ObservedGeneration() == 2; }, 60s))
      << "quota " << Quota() << "; " << Get().dump() << "\n"
      << ReadFile(dir_.path() + "/agent.err") << "\n"
      << ReadFile(dir_.path() + "/proxy.err");
  EXPECT_NE(ReadFile(dir_.path() + "/proxy.err").find("watch aborted after its events"), std::string::npos)
      << ReadFile(dir_.path() + "/proxy.err");
  const int status = agent.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << status << "\n" << ReadFile(dir_.path() + "/agent.err");
}

// Regression: a corrupt journal made the agent exit 2 on every start. Now it runs on,
// the journal is moved aside, and a Warning Event CorruptJournal on the Node says so.
TEST_F(K8sAgentRunningTest, CorruptJournalIsMovedAsideWithAnEventOnTheNode) {
  const std::string journal = dir_.path() + "/journal.json";
  WriteTextFile(journal, "{\"version\": 1, \"pods\": {");
  ASSERT_TRUE(client_->Create(star::kube::NodeAllocations(), "", Allocation(500)).ok());
  auto args = Args(root_);
  args.push_back("--once");
  const ProcessResult r = RunProcess(args, "", 60s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Quota(), 50000) << r.err;
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    aside += e.path().filename().string().rfind("journal.json.corrupt-", 0) == 0;
  }
  EXPECT_EQ(aside, 1);
  star::kube::ListOptions by_node;
  by_node.field_selector = "involvedObject.name=" + node_;
  auto events = client_->List(star::kube::Events(), "default", by_node);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ((*events)["items"].size(), 1u) << events->dump();
  const json& ev = (*events)["items"][0];
  EXPECT_EQ(ev["involvedObject"]["kind"], "Node");
  EXPECT_EQ(ev["reason"], "CorruptJournal");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_NE(ev["message"].get<std::string>().find("journal.json.corrupt-"), std::string::npos) << ev.dump();
}

// The chart's pre-delete hook: --release-daemonset switches the agent DaemonSet to release
// mode (all at once) and returns once it rolled out; a missing DaemonSet is nothing to do.
TEST_F(K8sAgentBinaryTest, ReleaseDaemonSetSwitchesTheAgentsToReleaseMode) {
  const json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", {{"name", "star-agent"}, {"namespace", node_}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", "star-agent"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "star-agent"}}}}},
          {"spec",
           {{"nodeSelector", {{"star.dev/no-such-node", "true"}}},
            {"containers", {{{"name", "agent"}, {"image", "star-agent:test"}}}}}}}}}}};
  ProcessResult r = Kubectl({"apply", "-f", "-"}, ds.dump());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> args = {STAR_AGENT_BINARY, "--node", node_, "--kubeconfig", admin_kubeconfig_,
                                         "--release-daemonset", "star-agent", "--daemonset-namespace", node_,
                                         "--release-timeout-s", "60"};
  r = RunProcess(args, "", 90s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto got = client_->Get(star::agent::DaemonSets(), node_, "star-agent");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->value(json::json_pointer("/spec/template/metadata/annotations/star.dev~1agent-mode"), ""),
            "release") << got->dump();
  EXPECT_EQ(got->value(json::json_pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable"), ""), "100%");
  EXPECT_TRUE(star::agent::RolledOut(*got)) << got->dump();

  auto missing = args;
  missing[6] = "no-such-daemonset";
  r = RunProcess(missing, "", 90s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
