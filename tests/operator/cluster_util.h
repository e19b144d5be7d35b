// The real Kubernetes control plane as the end-to-end tests' API server: the cluster of
// $KUBECONFIG (the k8s_cluster fixture's, scripts/cluster.sh), driven with the real kubectl
// ($STAR_KUBECTL). Each test gets a namespace of its own and, where it needs pods on
// particular nodes, Node objects of its own; it plays kubelet for its pods and nodes.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/test_support/process.h"
#include "star/test_support/temp_dir.h"

namespace star::op::e2e {

// A test on the real cluster, in namespace ns_ ("test-op-" and a random suffix, with its
// default ServiceAccount), removed at the end with the test's Nodes and the NodeAllocations
// named after them. The test's Nodes are named after the namespace; tests that run beside
// these find the node that runs pods by its label star.dev/test-node=true (tests/k8s/k8s.py).
//
// The pods of the test's jobs (JobYaml, ReallocJob) get an image the test node does not run
// and the scheduler name kScheduler, which no scheduler serves: the test is their scheduler
// and kubelet. SetPodPhase binds a pod (a real Binding) to one of the test's Nodes, made on
// first use (unschedulable, so that no other pod lands there), and writes its status. While
// the test runs, a thread plays the kubelet of those Nodes: it renews their heartbeat (the
// node lifecycle controller would mark them unreachable and evict their pods) and completes
// the graceful deletion of their pods (a pod bound to a node stays Terminating until its
// kubelet confirms).
class ClusterTest : public ::testing::Test {
 protected:
  static constexpr char kScheduler[] = "star-e2e-test";
  static constexpr char kImage[] = "example.invalid/stand-in:1";

  void SetUp() override {
    const char* kubeconfig = std::getenv("KUBECONFIG");
    if (kubeconfig == nullptr || *kubeconfig == '\0') {
      GTEST_SKIP() << "needs KUBECONFIG of a cluster (bash scripts/cluster.sh up DIR; ctest's k8s_cluster fixture)";
    }
    kubeconfig_ = kubeconfig;
    const char* kubectl = std::getenv("STAR_KUBECTL");
    kubectl_ = kubectl != nullptr && *kubectl != '\0' ? kubectl : "kubectl";
    std::random_device rd;
    std::string suffix;
    for (int i = 0; i < 6; ++i) suffix += "abcdefghijklmnopqrstuvwxyz0123456789"[rd() % 36];
    const std::string ns = "test-op-" + suffix;
    test_support::ProcessResult r = Kubectl({"create", "namespace", ns});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ns_ = ns;
    ASSERT_TRUE(Eventually([&] { return Kubectl({"get", "serviceaccount", "default"}).exit_code == 0; }, std::chrono::seconds(60)))
        << "the default ServiceAccount of " << ns_;
    kubelet_ = std::thread([this] { PlayKubelet(); });
  }

  void TearDown() override {
    if (ns_.empty()) return;  // skipped, or no namespace made
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (kubelet_.joinable()) kubelet_.join();
    // Nothing finalizes the jobs once the operator has stopped; the pods of the test's
    // nodes have no kubelet to confirm their deletion.
    for (const std::string& tj : Names("trainingjobs")) {
      Kubectl({"patch", "trainingjob", tj, "--type=merge", "-p", R"({"metadata":{"finalizers":null}})"});
    }
    Kubectl({"delete", "pods", "--all", "--grace-period=0", "--force"});
    Kubectl({"delete", "namespace", ns_, "--wait=false"});
    for (const std::string& node : MadeNodes()) {
      Kubectl({"delete", "node", node, "--ignore-not-found", "--wait=false"});
      Kubectl({"delete", "nodeallocation", node, "--ignore-not-found", "--wait=false"});
    }
    for (const std::string& object : cluster_objects_) {
      Kubectl({"delete", object, "--ignore-not-found", "--wait=false"});
    }
  }

  // kubectl with the cluster's kubeconfig, in the test's namespace.
  test_support::ProcessResult Kubectl(std::vector<std::string> args, const std::string& stdin_text = "") {
    std::vector<std::string> argv = {kubectl_, "--kubeconfig", kubeconfig_, "--cache-dir", dir_.path() + "/cache"};
    if (!ns_.empty()) {
      argv.push_back("--namespace");
      argv.push_back(ns_);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return test_support::RunProcess(argv, stdin_text, std::chrono::seconds(60));
  }

  // `kubectl ... -o json`, parsed; null when kubectl fails (e.g. not found).
  nlohmann::json GetJson(std::vector<std::string> args) {
    args.push_back("-o");
    args.push_back("json");
    test_support::ProcessResult r = Kubectl(args);
    if (r.exit_code != 0) return nlohmann::json();
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json() : j;
  }

  // The pods labelled as the job's.
  std::vector<nlohmann::json> Pods(const std::string& job) {
    nlohmann::json list = GetJson({"get", "pods", "-l", std::string(kJobLabel) + "=" + job});
    std::vector<nlohmann::json> out;
    if (list.is_object() && list.contains("items")) {
      for (const nlohmann::json& p : list["items"]) out.push_back(p);
    }
    return out;
  }

  // The first Event with `reason` about the object named `object` (null when there is none).
  nlohmann::json FindEvent(const std::string& reason, const std::string& object) {
    nlohmann::json events = GetJson({"get", "events"});
    if (!events.is_object()) return nullptr;
    for (const nlohmann::json& e : events["items"]) {
      if (e.value("reason", "") == reason && e["involvedObject"]["name"] == object) return e;
    }
    return nullptr;
  }

  // The name of the test's node `node` ("node-0": "<namespace>-node-0").
  std::string NodeName(const std::string& node) const { return ns_ + "-" + node; }

  // Makes (or updates) the test's node `node`: labelled star.dev/test-group=<namespace>,
  // unschedulable, Ready, with `cpu` allocatable.
  void MakeNode(const std::string& node, const std::string& cpu) {
    const std::string name = NodeName(node);
    const nlohmann::json manifest = {{"apiVersion", "v1"},
                                     {"kind", "Node"},
                                     {"metadata", {{"name", name}, {"labels", {{"star.dev/test-group", ns_}}}}},
                                     {"spec", {{"unschedulable", true}}}};
    test_support::ProcessResult r = Kubectl({"apply", "-f", "-"}, manifest.dump());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    {
      std::lock_guard<std::mutex> lock(mu_);
      nodes_.insert(name);
    }
    const nlohmann::json resources = {{"cpu", cpu}, {"memory", "64Gi"}, {"pods", "110"}};
    const std::string now = Now();
    const nlohmann::json status = {
        {"status",
         {{"capacity", resources},
          {"allocatable", resources},
          {"conditions",
           {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}, {"message", "the test plays kubelet"},
             {"lastHeartbeatTime", now}, {"lastTransitionTime", now}}}}}}};
    r = Kubectl({"patch", "node", name, "--subresource=status", "--type=merge", "-p", status.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // Plays kubelet (and, with a node, the scheduler): binds `pod` to the test's node `node`
  // (made with 32 CPUs if the test has not made it) unless it is bound there already, then
  // writes phase `phase` and an IP into its status.
  void SetPodPhase(const std::string& pod, const std::string& phase, const std::string& node = "") {
    test_support::ProcessResult r;
    if (!node.empty()) {
      const std::string name = NodeName(node);
      if (!MadeNodes().count(name)) {
        MakeNode(node, "32");
        if (::testing::Test::HasFatalFailure()) return;
      }
      const nlohmann::json p = GetJson({"get", "pod", pod});
      ASSERT_TRUE(p.is_object()) << "pod " << pod;
      const std::string bound = p["spec"].value("nodeName", "");
      if (bound.empty()) {
        const nlohmann::json binding = {{"apiVersion", "v1"},
                                        {"kind", "Binding"},
                                        {"metadata", {{"name", pod}}},
                                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", name}}}};
        r = Kubectl({"create", "-f", "-"}, binding.dump());
        ASSERT_EQ(r.exit_code, 0) << r.err;
      } else {
        ASSERT_EQ(bound, name) << "pod " << pod << " is bound elsewhere";
      }
    }
    const nlohmann::json patch = {{"status", {{"phase", phase}, {"podIP", "10.0.0.1"}}}};
    r = Kubectl({"patch", "pod", pod, "--subresource=status", "--type=merge", "-p", patch.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // The manifests of the test's jobs: in ns_, pods of kImage scheduled by the test.
  std::string JobYaml(const std::string& name, int workers) {
    return e2e::JobYaml(name, workers, ns_, TestPods());
  }
  // `egress`: the pods' kubernetes.io/egress-bandwidth ("" = none).
  std::string ReallocJob(const std::string& name, int workers, const std::string& request, const std::string& limit,
                         int max_iterations = 0, const std::string& egress = "") {
    return e2e::ReallocJob(name, workers, request, limit, max_iterations, ns_, TestPods(egress));
  }
  PodTemplate TestPods(const std::string& egress = "") const { return {kImage, kScheduler, egress}; }

  // "<namespace>/<name>": the job as its workers name it in reports.
  std::string JobKey(const std::string& name) const { return ns_ + "/" + name; }

  test_support::TempDir dir_;
  std::string kubectl_;     // $STAR_KUBECTL, else kubectl on PATH
  std::string kubeconfig_;  // $KUBECONFIG
  std::string ns_;          // the test's namespace
  // Cluster-scoped objects ("kind/name") the test made, deleted at the end.
  std::vector<std::string> cluster_objects_;

 private:
  static std::string Now() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
  }

  std::set<std::string> MadeNodes() {
    std::lock_guard<std::mutex> lock(mu_);
    return nodes_;
  }

  std::vector<std::string> Names(const std::string& resource) {
    std::vector<std::string> out;
    const nlohmann::json list = GetJson({"get", resource});
    if (!list.is_object()) return out;
    for (const nlohmann::json& o : list["items"]) out.push_back(o["metadata"].value("name", ""));
    return out;
  }

  // The kubelet of the test's nodes, until TearDown: every second, completes the deletion
  // of their terminating pods; every 10 s, renews their Ready heartbeat.
  void PlayKubelet() {
    auto last_heartbeat = std::chrono::steady_clock::now();
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; })) return;
      }
      const std::set<std::string> nodes = MadeNodes();
      if (nodes.empty()) continue;
      const nlohmann::json pods = GetJson({"get", "pods"});
      if (pods.is_object()) {
        for (const nlohmann::json& p : pods["items"]) {
          if (p["metadata"].contains("deletionTimestamp") && nodes.count(p["spec"].value("nodeName", ""))) {
            Kubectl({"delete", "pod", p["metadata"].value("name", ""), "--grace-period=0", "--force"});
          }
        }
      }
      if (std::chrono::steady_clock::now() - last_heartbeat > std::chrono::seconds(10)) {
        last_heartbeat = std::chrono::steady_clock::now();
        const nlohmann::json beat = {
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}, {"lastHeartbeatTime", Now()}}}}}}};
        for (const std::string& node : nodes) {
          Kubectl({"patch", "node", node, "--subresource=status", "--type=strategic", "-p", beat.dump()});
        }
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<std::string> nodes_;  // the full names of the Nodes the test made
  std::thread kubelet_;
};

#ifdef STAR_OPERATOR_BINARY
// ClusterTest with star-operator (the binary, STAR_OPERATOR_BINARY; --namespace of the
// test) against the cluster, stopped at the end.
class OperatorTest : public ClusterTest {
 protected:
  void TearDown() override {
    op_.Stop();
    ClusterTest::TearDown();
  }

  // Starts star-operator (report endpoint on a free loopback port, metrics endpoint on
  // metrics_listen_, status every status_interval_, restart backoff 100 ms, then `extra`) and waits for its report URL.
  void StartOperator(const std::vector<std::string>& extra = {}) {
    const std::string& kubeconfig = operator_kubeconfig_.empty() ? kubeconfig_ : operator_kubeconfig_;
    std::vector<std::string> argv = {STAR_OPERATOR_BINARY, "--kubeconfig", kubeconfig, "--report-listen",
                                     "127.0.0.1:0", "--metrics-listen", metrics_listen_, "--status-interval", status_interval_,
                                     "--restart-backoff", "100ms", "--namespace", ns_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ASSERT_TRUE(op_.Start(argv, OperatorLog()));
    auto url = op_.WaitForLine("report-url ", std::chrono::seconds(60));
    ASSERT_TRUE(url.has_value()) << ReadFile(OperatorLog());
    report_url_ = *url;
  }

  std::string OperatorLog() { return dir_.path() + "/operator.log"; }

  // The job's report token, from its Secret ("" when there is none).
  std::string Token(const std::string& job) {
    return SecretToken(GetJson({"get", "secret", TokenSecretName(job)})).value_or("");
  }

  // Merge-patches job `name` (a spec change) and waits until the operator has reconciled
  // that generation: whatever changed before the patch has been seen by then.
  void PatchAndAwaitReconcile(const std::string& name, const std::string& merge_patch) {
    ASSERT_EQ(Kubectl({"patch", "tj", name, "--type=merge", "-p", merge_patch}).exit_code, 0);
    ASSERT_TRUE(Eventually([&] {
      const nlohmann::json j = GetJson({"get", "tj", name});
      return j["status"].value("observedGeneration", int64_t{0}) == j["metadata"].value("generation", int64_t{-1});
    })) << ReadFile(OperatorLog());
  }

  OperatorProcess op_;
  std::string report_url_;
  std::string metrics_listen_;  // star-operator's --metrics-listen ("" = none), set before StartOperator
  std::string status_interval_ = "200ms";  // star-operator's --status-interval, set before StartOperator
  std::string operator_kubeconfig_;  // star-operator's --kubeconfig ("" = the cluster's), set before StartOperator
};
#endif

}  // namespace star::op::e2e
