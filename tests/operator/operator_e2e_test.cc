// star-operator end to end: the real binary and the real kubectl against the API emulator
// (run in-process so that the test can inject faults). Pods do not run in the emulator:
// the test plays kubelet by patching pod status, and plays the workers by POSTing
// WorkerReports to the operator's report endpoint with the job's token.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/shim/reporter.h"
#include "test_process.h"

namespace star::op {
namespace {

using nlohmann::json;
using apiserver::testing::ProcessResult;
using apiserver::testing::RunProcess;
using apiserver::testing::TempDir;
using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// star-operator as a child process that can be SIGKILLed (kill -9) or stopped cleanly.
// Reaped by the destructor; dies with the test (PR_SET_PDEATHSIG).
class OperatorProcess {
 public:
  ~OperatorProcess() { Kill(); }

  bool Start(const std::vector<std::string>& argv, const std::string& log) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(fds[1], 1);
      const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) dup2(err, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
    return pid_ > 0;
  }

  // The rest of the first stdout line starting with `prefix`, within `timeout`.
  std::optional<std::string> WaitForLine(const std::string& prefix, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n')) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  // SIGTERM, then SIGKILL after `grace`; returns the wait status.
  int Stop(std::chrono::milliseconds grace = 10s) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    Close();
    return status;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    Close();
  }

 private:
  void Close() {
    pid_ = -1;
    if (out_ >= 0) close(out_);
    out_ = -1;
    buf_.clear();
  }
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

// Polls `ok` until it holds or `timeout` passes (a bounded wait on a condition).
bool Eventually(const std::function<bool()>& ok, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return ok();
}

std::string JobYaml(const std::string& name, int workers) {
  return "apiVersion: star.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: " + name +
         "\n  namespace: default\nspec:\n  workers:\n    replicas: " + std::to_string(workers) +
         "\n    template:\n      spec:\n        containers:\n          - name: trainer\n"
         "            image: ghcr.io/star-dev/fmnist:0.1\n            resources:\n"
         "              requests: {cpu: 500m}\n              limits: {cpu: 500m}\n"
         "  training:\n    globalBatchSize: 256\n    targetAccuracy: 0.85\n"
         "  mitigation:\n    detection:\n      window: 5\n";
}

class OperatorE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    apiserver::ApiServerOptions o;
    o.crds_dir = STAR_CRDS_DIR;
    server_ = std::make_unique<apiserver::ApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    kubeconfig_ = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(server_->WriteKubeconfig(kubeconfig_).ok());
  }
  void TearDown() override {
    op_.Stop();
    server_->Stop();
  }

  void StartOperator(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {STAR_OPERATOR_BINARY, "--kubeconfig", kubeconfig_, "--report-listen",
                                     "127.0.0.1:0", "--metrics-listen", "", "--status-interval", "200ms",
                                     "--restart-backoff", "100ms"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ASSERT_TRUE(op_.Start(argv, dir_.path() + "/operator.log"));
    auto url = op_.WaitForLine("report-url ", 60s);
    ASSERT_TRUE(url.has_value()) << ReadFile(dir_.path() + "/operator.log");
    report_url_ = *url;
  }

  ProcessResult Kubectl(std::vector<std::string> args, const std::string& stdin_text = "") {
    std::vector<std::string> argv = {STAR_KUBECTL, "--kubeconfig", kubeconfig_, "--cache-dir", dir_.path() + "/cache"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, stdin_text, 60s);
  }

  json GetJson(std::vector<std::string> args) {
    args.push_back("-o");
    args.push_back("json");
    ProcessResult r = Kubectl(args);
    if (r.exit_code != 0) return json();
    json j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? json() : j;
  }

  std::vector<json> Pods(const std::string& job) {
    json list = GetJson({"get", "pods", "-l", std::string(kJobLabel) + "=" + job});
    std::vector<json> out;
    if (list.is_object() && list.contains("items")) {
      for (const json& p : list["items"]) out.push_back(p);
    }
    return out;
  }

  void SetPodPhase(const std::string& pod, const std::string& phase, const std::string& node = "") {
    json patch = {{"status", {{"phase", phase}, {"podIP", "10.0.0.1"}}}};
    ProcessResult r = Kubectl({"patch", "pod", pod, "--subresource=status", "--type=merge", "-p", patch.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (!node.empty()) {
      // Binding: the emulator has no scheduler; spec.nodeName is set like a binding would.
      r = Kubectl({"patch", "pod", pod, "--type=merge", "-p", json{{"spec", {{"nodeName", node}}}}.dump()});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }

  std::string Token(const std::string& job) {
    json secret = GetJson({"get", "secret", TokenSecretName(job)});
    return SecretToken(secret).value_or("");
  }

  TempDir dir_;
  std::unique_ptr<apiserver::ApiServer> server_;
  std::string kubeconfig_;
  OperatorProcess op_;
  std::string report_url_;
};

TEST_F(OperatorE2eTest, ApplyCreatesPodsAndServiceReportsDriveStatusAndEventsDeleteCascades) {
  StartOperator();
  ProcessResult r = Kubectl({"apply", "-f", "-"}, JobYaml("fm", 4));
  ASSERT_EQ(r.exit_code, 0) << r.err;

  ASSERT_TRUE(Eventually([&] { return Pods("fm").size() == 4; })) << ReadFile(dir_.path() + "/operator.log");
  std::set<std::string> names;
  for (const json& p : Pods("fm")) {
    names.insert(p["metadata"]["name"].get<std::string>());
    EXPECT_EQ(p["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  }
  EXPECT_EQ(names, (std::set<std::string>{"fm-worker-0", "fm-worker-1", "fm-worker-2", "fm-worker-3"}));
  json svc = GetJson({"get", "service", "fm"});
  ASSERT_TRUE(svc.is_object()) << "headless Service";
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  const std::string token = Token("fm");
  ASSERT_FALSE(token.empty());

  for (int i = 0; i < 4; ++i) SetPodPhase("fm-worker-" + std::to_string(i), "Running", "node-" + std::to_string(i % 2));
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("phase", "") == "Running"; }))
      << ReadFile(dir_.path() + "/operator.log");
  r = Kubectl({"get", "tj", "fm"});
  EXPECT_NE(r.out.find("PHASE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("STRAGGLERS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Running"), std::string::npos) << r.out;

  // NodeAllocations: two pods per node, 500m each, guaranteed.
  ASSERT_TRUE(Eventually([&] {
    json na = GetJson({"get", "nodeallocations", "node-0"});
    return na.is_object() && na["spec"]["pods"].size() == 2;
  }));
  json na = GetJson({"get", "nodeallocations", "node-1"});
  ASSERT_EQ(na["spec"]["pods"].size(), 2u);
  EXPECT_EQ(na["spec"]["pods"][0]["cpu"]["quotaMillicores"], 500);
  EXPECT_EQ(na["spec"]["pods"][0]["guaranteed"], true);

  // Reports: a wrong token is refused; worker 2 computes 4x slower from iteration 40.
  shim::ReportClientOptions co;
  co.base_url = report_url_;
  co.token = "wrong";
  auto bad = shim::ReportClient::Create(co);
  ASSERT_TRUE(bad.ok());
  api::WorkerReport rep;
  rep.job = "default/fm";
  rep.local_batch = 64;
  auto refused = (*bad)->Send(rep);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  co.token = token;
  auto client = shim::ReportClient::Create(co);
  ASSERT_TRUE(client.ok());
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (int it = 1; it <= 80; ++it) {
    for (int w = 0; w < 4; ++w) {
      rep.worker = w;
      rep.iteration = it;
      rep.time_seconds = it * 0.5;
      rep.compute_seconds = (w == 2 && it >= 40 ? 0.4 : 0.1) * noise(rng);
      rep.communication_seconds = 0.01;
      auto sent = (*client)->Send(rep);
      ASSERT_TRUE(sent.ok()) << sent.status();
    }
  }
  ASSERT_TRUE(Eventually([&] {
    json st = GetJson({"get", "tj", "fm"})["status"];
    return st.is_object() && st.value("stragglers", json::array()).size() == 1 &&
           st["stragglers"][0]["worker"] == 2 && st["stragglers"][0]["node"] == "node-0" &&
           st.value("iteration", 0) == 80;
  })) << GetJson({"get", "tj", "fm"}).dump(2);
  ASSERT_TRUE(Eventually([&] {
    json events = GetJson({"get", "events"});
    if (!events.is_object()) return false;
    for (const json& e : events["items"]) {
      if (e.value("reason", "") == "StragglerDetected" && e["involvedObject"]["name"] == "fm") return true;
    }
    return false;
  }));

  r = Kubectl({"delete", "tj", "fm", "--wait=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return Pods("fm").empty() && GetJson({"get", "tj", "fm"}).is_null(); }))
      << ReadFile(dir_.path() + "/operator.log");
  EXPECT_TRUE(GetJson({"get", "service", "fm"}).is_null()) << "the Service went with the job";
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "nodeallocations", "node-0"})["spec"]["pods"].empty(); }))
      << "the finalizer removed the job's NodeAllocation entries";
}

TEST_F(OperatorE2eTest, AnInvalidManifestIsRefusedNamingTheField) {
  std::string yaml = JobYaml("bad", 4);
  yaml.replace(yaml.find("replicas: 4"), 11, "replicas: 0");
  ProcessResult r = Kubectl({"apply", "-f", "-"}, yaml);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("spec.workers.replicas"), std::string::npos) << r.err;
  EXPECT_TRUE(GetJson({"get", "tj", "bad"}).is_null());
}

TEST_F(OperatorE2eTest, AFailedPodRestartsTheGangWithNewPods) {
  StartOperator({"--max-restarts", "1"});
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("rs", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("rs").size() == 2; }));
  std::set<std::string> first_uids;
  for (const json& p : Pods("rs")) first_uids.insert(p["metadata"]["uid"].get<std::string>());
  SetPodPhase("rs-worker-1", "Failed");
  ASSERT_TRUE(Eventually([&] {
    auto pods = Pods("rs");
    if (pods.size() != 2) return false;
    for (const json& p : pods) {
      if (first_uids.count(p["metadata"]["uid"].get<std::string>())) return false;
    }
    return true;
  })) << ReadFile(dir_.path() + "/operator.log");
  json job = GetJson({"get", "tj", "rs"});
  EXPECT_EQ(job["metadata"]["annotations"][kRestartsAnnotation], "1");
  // A second failure exceeds --max-restarts 1.
  SetPodPhase("rs-worker-0", "Failed");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "rs"})["status"].value("phase", "") == "Failed"; }));
  job = GetJson({"get", "tj", "rs"});
  bool backoff = false;
  for (const json& c : job["status"]["conditions"]) backoff |= c["type"] == "Failed" && c["reason"] == "BackoffLimitExceeded";
  EXPECT_TRUE(backoff) << job["status"].dump(2);
}

TEST_F(OperatorE2eTest, AKilledOperatorRestartsWithNoDuplicateOrOrphanedPods) {
  // Slow pod creates so that the kill lands in the middle of reconciling.
  apiserver::FaultRule slow;
  slow.verb = "create";
  slow.resource = "pods";
  slow.latency = 100ms;
  server_->api().faults().Add(slow);
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("kk", 16)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return !Pods("kk").empty(); }));
  op_.Kill();
  const size_t at_kill = Pods("kk").size();
  server_->api().faults().Clear();
  StartOperator();
  ASSERT_TRUE(Eventually([&] { return Pods("kk").size() == 16; })) << "pods at the kill: " << at_kill;
  std::set<std::string> names;
  for (const json& p : Pods("kk")) {
    names.insert(p["metadata"]["name"].get<std::string>());
    EXPECT_EQ(p["metadata"]["ownerReferences"].size(), 1u);
  }
  EXPECT_EQ(names.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(names.count("kk-worker-" + std::to_string(i)));
  EXPECT_EQ(GetJson({"get", "services", "-l", std::string(kJobLabel) + "=kk"})["items"].size(), 1u);
}

TEST_F(OperatorE2eTest, InjectedServerErrorsThrottlingAndDroppedWatchesConverge) {
  auto rule = [](std::string verb, std::string resource, std::optional<int> status, int count) {
    apiserver::FaultRule f;
    f.verb = std::move(verb);
    f.resource = std::move(resource);
    f.status = status;
    f.count = count;
    return f;
  };
  server_->api().faults().Add(rule("create", "pods", 500, 3));
  server_->api().faults().Add(rule("patch", "trainingjobs", 429, 2));
  apiserver::FaultRule drop = rule("watch", "*", std::nullopt, 4);
  drop.drop_watch_after = 2;
  server_->api().faults().Add(drop);
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("ff", 4)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ff").size() == 4; }, 60s)) << ReadFile(dir_.path() + "/operator.log");
  for (int i = 0; i < 4; ++i) SetPodPhase("ff-worker-" + std::to_string(i), "Running");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "ff"})["status"].value("phase", "") == "Running"; }, 60s))
      << ReadFile(dir_.path() + "/operator.log");
  EXPECT_EQ(Pods("ff").size(), 4u);
}

}  // namespace
}  // namespace star::op
