// Tests of STAR's Kubernetes clients (star::kube and its users) on the real cluster of
// $KUBECONFIG (scripts/cluster.sh; ctest's k8s_cluster fixture, with the project's CRDs):
// a namespace of the test's own and a client to the API server as the cluster admin,
// star-faultproxy in front of it for the faults the real server does not produce on
// demand, and waiting on a condition with a deadline. Users link star::kube.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "star/kube/client.h"
#include "star/test_support/fault_proxy.h"
#include "star/test_support/temp_dir.h"

namespace star::test_support {

using namespace std::chrono_literals;

// Polls `condition` until it holds or `timeout` passes; true if it held.
inline bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

inline kube::ResourceRef Namespaces() { return {"", "v1", "namespaces", false, "Namespace"}; }
inline kube::ResourceRef ServiceAccounts() { return {"", "v1", "serviceaccounts", true, "ServiceAccount"}; }

// "prefix-" and six random lower-case letters and digits: a name no other test uses.
inline std::string UniqueName(const std::string& prefix) {
  std::random_device rd;
  std::string name = prefix + "-";
  for (int i = 0; i < 6; ++i) name += "abcdefghijklmnopqrstuvwxyz0123456789"[rd() % 36];
  return name;
}

// A test on the real cluster in namespace ns_ (made for it, with its default
// ServiceAccount, and deleted after it, with any namespace made by MakeNamespace). client_
// talks to the API server as the cluster admin, through star-faultproxy once the test has
// called UseFaultProxy (AddFault does). Skipped without $KUBECONFIG.
class KubeClusterTest : public ::testing::Test {
 protected:
  // The scheduler of the tests' pods: none serves it, so that they stay unbound and Pending.
  static constexpr char kScheduler[] = "star-kube-test";

  void SetUp() override {
    const char* kubeconfig = getenv("KUBECONFIG");
    if (kubeconfig == nullptr || *kubeconfig == '\0') {
      GTEST_SKIP() << "needs KUBECONFIG of a cluster (bash scripts/cluster.sh up DIR; ctest's k8s_cluster fixture)";
    }
    kubeconfig_ = kubeconfig;
    auto admin = kube::OptionsFromKubeconfig(kubeconfig_);
    ASSERT_TRUE(admin.ok()) << admin.status();
    admin_ = *admin;
    Connect();
    ASSERT_NO_FATAL_FAILURE(ns_ = MakeNamespace("kube-test"));
    Connect();  // ns_ its default namespace
  }

  void TearDown() override {
    if (namespaces_.empty()) return;
    kube::ClientOptions direct = admin_;
    direct.max_retries = 3;
    auto client = kube::Client::Create(direct);
    ASSERT_TRUE(client.ok()) << client.status();
    for (const std::string& ns : namespaces_) {
      const Status deleted = (*client)->Delete(Namespaces(), "", ns);
      EXPECT_TRUE(deleted.ok()) << ns << ": " << deleted;
    }
  }

  // The admin's options, to the proxy once there is one, with ns_ the default namespace and
  // fast retries (tests of the retry policy set their own).
  virtual kube::ClientOptions Options() {
    kube::ClientOptions o = admin_;
    if (proxy_) o.server = proxy_->url();
    if (!ns_.empty()) o.default_namespace = ns_;
    o.initial_backoff = 10ms;
    o.max_retries = 3;
    return o;
  }

  // client_ anew from Options().
  void Connect() {
    client_.reset();
    auto client = kube::Client::Create(Options());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // A namespace named `prefix`-random, ready for pods (its default ServiceAccount made),
  // deleted after the test.
  std::string MakeNamespace(const std::string& prefix) {
    const std::string name = UniqueName(prefix);
    const nlohmann::json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
    const auto created = client_->Create(Namespaces(), "", ns);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return name;
    namespaces_.push_back(name);
    EXPECT_TRUE(WaitFor([&] { return client_->Get(ServiceAccounts(), name, "default").ok(); }, 60s))
        << "the default ServiceAccount of " << name;
    return name;
  }

  // Puts star-faultproxy between the API server and client_ (and every client of Options()).
  void UseFaultProxy() {
    if (proxy_) return;
    proxy_.emplace();
    ASSERT_NO_FATAL_FAILURE(proxy_->Start(kubeconfig_, dir_.path()));
    Connect();
  }
  // A rule of star-faultproxy (tests/support/faultproxy/README.md), the proxy started first.
  void AddFault(const nlohmann::json& rule) {
    ASSERT_NO_FATAL_FAILURE(UseFaultProxy());
    ASSERT_NO_FATAL_FAILURE(proxy_->Add(rule));
  }
  // The watches the proxy streams now (-1 without a proxy).
  int ActiveWatches() { return proxy_ ? proxy_->ActiveWatches() : -1; }
  // The requests of `verb` on `resource` that went through the proxy.
  int Requests(const std::string& resource, const std::string& verb) {
    return proxy_ ? proxy_->Requests(resource, verb) : -1;
  }
  // The faults the proxy's rules have applied.
  int FaultsApplied() {
    int n = 0;
    if (proxy_) {
      for (const nlohmann::json& rule : proxy_->Rules()) n += rule.value("applied", 0);
    }
    return n;
  }

  // The cache key of `name` in ns_ (KeyOf).
  std::string Key(const std::string& name) const { return ns_ + "/" + name; }

  // A pod in ns_ (or `ns`) labelled app=star and test=ns_, that no scheduler binds.
  nlohmann::json Pod(const std::string& name, const std::string& ns = "") const {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name}, {"namespace", ns.empty() ? ns_ : ns}, {"labels", {{"app", "star"}, {"test", ns_}}}}},
            {"spec",
             {{"schedulerName", kScheduler},
              {"automountServiceAccountToken", false},
              {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  }

  // A TrainingJob in ns_ that the API accepts.
  nlohmann::json Job(const std::string& name, int replicas = 2) const {
    return {{"apiVersion", "star.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"architecture", "AllReduce"},
              {"workers",
               {{"replicas", replicas},
                {"template", {{"spec", {{"containers", {{{"name", "trainer"}, {"image", "star/fmnist"}}}}}}}}}},
              {"training", {{"globalBatchSize", 256}, {"targetAccuracy", 0.85}}}}}};
  }

  std::string kubeconfig_;
  kube::ClientOptions admin_;
  std::string ns_;
  std::vector<std::string> namespaces_;
  TempDir dir_;
  std::optional<FaultProxy> proxy_;
  std::unique_ptr<kube::Client> client_;
};

}  // namespace star::test_support
