// The star-agent binary with --kubeconfig against star-test-apiserver running as a
// process: flags, a --once pass that writes the NodeAllocation's status, and (with root
// and a writable cgroup v1 cpu hierarchy) a running agent that applies a created
// NodeAllocation to a real cgroup and restores the original when it is deleted.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s_test_util.h"
#include "apiserver/test_process.h"
#include "star/kube/client.h"
#include "star/test_support/tls.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using star::apiserver::testing::BackgroundProcess;
using star::apiserver::testing::RunProcess;
using star::apiserver::testing::TempDir;
using star::test_support::CertifiedKey;
using star::test_support::TestCa;
using star::test_support::WriteTextFile;
using namespace std::chrono_literals;

constexpr char kNode[] = "node-1";
constexpr char kUid[] = "5b1e7c3a-9d2f-4e6b-8a1c-3f5d7e9b0a2c";
constexpr char kCpuRoot[] = "/sys/fs/cgroup/cpu";

json Allocation(int64_t quota_millicores) {
  return star::agent::testing::OneWorkerAllocation(kNode, kUid, quota_millicores);
}

// Polls `done` every 10 ms for at most 20 s.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
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

class K8sAgentBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override { StartApiserver({}); }

  // The emulator with `extra` flags, and a client from the kubeconfig it writes.
  void StartApiserver(const std::vector<std::string>& extra) {
    kubeconfig_ = dir_.path() + "/kubeconfig";
    std::vector<std::string> args = {STAR_APISERVER_BINARY, "--listen", "127.0.0.1:0", "--crds",
                                     STAR_CRDS_DIR,         "--kubeconfig-out", kubeconfig_};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(apiserver_.Start(args, dir_.path() + "/apiserver.err"));
    ASSERT_TRUE(apiserver_.WaitForLine("listening on ", 30s).has_value())
        << ReadFile(dir_.path() + "/apiserver.err");
    auto options = star::kube::OptionsFromKubeconfig(kubeconfig_);
    ASSERT_TRUE(options.ok()) << options.status();
    auto client = star::kube::Client::Create(*options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
  }
  void TearDown() override {
    client_.reset();
    apiserver_.Stop();
  }

  std::vector<std::string> Args(const std::string& cgroup_root) const {
    return {STAR_AGENT_BINARY, "--node", kNode, "--kubeconfig", kubeconfig_,
            "--cgroup-root", cgroup_root, "--journal", dir_.path() + "/journal.json",
            "--metrics-address", "", "--poll-ms", "20"};
  }
  json Get() {
    auto o = client_->Get(star::kube::NodeAllocations(), "", kNode);
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
  std::string kubeconfig_;
  BackgroundProcess apiserver_;
  std::unique_ptr<star::kube::Client> client_;
};

// The same over HTTPS, the agent authenticating with a client certificate as kubeadm's
// kubeconfigs do; the emulator refuses connections without one.
class K8sAgentBinaryHttpsTest : public K8sAgentBinaryTest {
 protected:
  void SetUp() override {
    const std::string d = dir_.path();
    const CertifiedKey serving = ca_.IssueServer({"localhost"}, {"127.0.0.1"});
    const CertifiedKey node = ca_.IssueClient("system:node:node-1", {"system:nodes"});
    WriteTextFile(d + "/ca.crt", ca_.cert_pem());
    StartApiserver({"--tls-cert-file", WriteTextFile(d + "/server.crt", serving.cert), "--tls-private-key-file",
                    WriteTextFile(d + "/server.key", serving.key), "--client-ca-file", d + "/ca.crt",
                    "--tls-ca-file", d + "/ca.crt", "--kubeconfig-client-certificate",
                    WriteTextFile(d + "/node.crt", node.cert), "--kubeconfig-client-key",
                    WriteTextFile(d + "/node.key", node.key)});
  }
  TestCa ca_;
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

TEST_F(K8sAgentBinaryHttpsTest, OnceOverHttpsWithAClientCertificate) {
  if (!fs::exists(kCpuRoot) && !fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    GTEST_SKIP() << "no cgroup cpu hierarchy: the agent's real NodeOs cannot start";
  }
  EXPECT_NE(ReadFile(kubeconfig_).find("server: https://127.0.0.1:"), std::string::npos) << ReadFile(kubeconfig_);
  EXPECT_NE(ReadFile(kubeconfig_).find("client-certificate: " + dir_.path() + "/node.crt"), std::string::npos);
  ExpectOnceReportsAFailedPod();
}

TEST_F(K8sAgentBinaryTest, RunningAgentAppliesCreatedAndRestoresDeletedAllocation) {
  if (geteuid() != 0 || !fs::exists(std::string(kCpuRoot) + "/cpu.cfs_quota_us")) {
    GTEST_SKIP() << "needs root and a cgroup v1 cpu hierarchy at " << kCpuRoot;
  }
  const std::string root = "star-agent-k8s-test-" + std::to_string(getpid());
  const std::string pod_dir = std::string(kCpuRoot) + "/" + root + "/kubepods/burstable/pod" + kUid;
  std::error_code ec;
  fs::create_directories(pod_dir, ec);
  ASSERT_FALSE(ec) << ec.message();
  struct RemoveCgroups {  // leaf first, with rmdir (cgroup files cannot be unlinked)
    fs::path leaf;
    ~RemoveCgroups() {
      for (int i = 0; i < 4; ++i, leaf = leaf.parent_path()) ::rmdir(leaf.c_str());
    }
  } remove{pod_dir};
  std::ofstream(pod_dir + "/cpu.cfs_quota_us") << "200000";
  const auto quota = [&] {
    const std::string s = ReadFile(pod_dir + "/cpu.cfs_quota_us");
    return s.empty() ? int64_t{0} : std::stoll(s);
  };
  ASSERT_EQ(quota(), 200000);

  BackgroundProcess agent;
  ASSERT_TRUE(agent.Start(Args(root), dir_.path() + "/agent.err"));
  ASSERT_TRUE(client_->Create(star::kube::NodeAllocations(), "", Allocation(500)).ok());
  EXPECT_TRUE(WaitFor([&] {
    return quota() == 50000 &&
           Get().value(json::json_pointer("/status/observedGeneration"), int64_t{-1}) == 1;
  })) << "quota " << quota() << "; " << Get().dump() << "\n" << ReadFile(dir_.path() + "/agent.err");
  EXPECT_EQ(Condition(Get(), "Ready", "status"), "True");

  ASSERT_TRUE(client_->Delete(star::kube::NodeAllocations(), "", kNode).ok());
  EXPECT_TRUE(WaitFor([&] {
    return quota() == 200000 && ReadFile(dir_.path() + "/journal.json").find(kUid) ==
                                    std::string::npos;
  })) << "original not restored; quota " << quota() << "\n"
      << ReadFile(dir_.path() + "/agent.err");
  const int status = agent.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << status << "\n" << ReadFile(dir_.path() + "/agent.err");
}

}  // namespace
