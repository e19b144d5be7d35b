// star-operator end to end under injected API faults: the real binary against the real
// Kubernetes control plane (cluster_util.h) through star-faultproxy (fault_proxy.h), which
// injects what the real API server does not produce on demand: slow pod creates, server
// errors, throttling, dropped watches. The real kubectl talks to the API server directly;
// the test plays kubelet by patching pod status.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "e2e_util.h"
#include "star/test_support/fault_proxy.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {
namespace {

using nlohmann::json;
using e2e::Eventually;
using e2e::ReadFile;
using namespace std::chrono_literals;

// The operator's requests go through the proxy.
class OperatorFaultsE2eTest : public e2e::OperatorTest {
 protected:
  void SetUp() override {
    e2e::OperatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(proxy_.Start(kubeconfig_, dir_.path()));
    operator_kubeconfig_ = proxy_.kubeconfig();
  }

  std::string Logs() { return ReadFile(dir_.path() + "/operator.log") + "\n--- proxy\n" + proxy_.Log(); }

  test_support::FaultProxy proxy_;
};

TEST_F(OperatorFaultsE2eTest, AKilledOperatorRestartsWithNoDuplicateOrOrphanedPods) {
  // Slow pod creates so that the kill lands in the middle of reconciling.
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "create"}, {"resource", "pods"}, {"latencyMs", 100}}));
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("kk", 16)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return !Pods("kk").empty(); })) << Logs();
  op_.Kill();
  const size_t at_kill = Pods("kk").size();
  EXPECT_LT(at_kill, 16u) << "the kill landed after the reconcile: " << proxy_.Rules().dump();
  ASSERT_NO_FATAL_FAILURE(proxy_.Clear());
  StartOperator();
  ASSERT_TRUE(Eventually([&] { return Pods("kk").size() == 16; })) << "pods at the kill: " << at_kill << "\n" << Logs();
  std::set<std::string> names;
  for (const json& p : Pods("kk")) {
    names.insert(p["metadata"]["name"].get<std::string>());
    EXPECT_EQ(p["metadata"]["ownerReferences"].size(), 1u);
  }
  EXPECT_EQ(names.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(names.count("kk-worker-" + std::to_string(i)));
  EXPECT_EQ(GetJson({"get", "services", "-l", std::string(kJobLabel) + "=kk"})["items"].size(), 1u);
}

TEST_F(OperatorFaultsE2eTest, InjectedServerErrorsThrottlingAndDroppedWatchesConverge) {
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "create"}, {"resource", "pods"}, {"status", 500}, {"count", 3}}));
  // The job and its status (the proxy, as RBAC, names a subresource apart).
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "patch"}, {"resource", "trainingjobs"}, {"status", 429}, {"count", 2}}));
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "patch"}, {"resource", "trainingjobs/status"}, {"status", 429}, {"count", 2}}));
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "watch"}, {"resource", "*"}, {"dropWatchAfterEvents", 2}, {"count", 4}}));
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("ff", 4)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ff").size() == 4; }, 60s)) << Logs();
  for (int i = 0; i < 4; ++i) SetPodPhase("ff-worker-" + std::to_string(i), "Running");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "ff"})["status"].value("phase", "") == "Running"; }, 60s))
      << Logs();
  EXPECT_EQ(Pods("ff").size(), 4u);
  // Every fault was injected.
  const json rules = proxy_.Rules();
  ASSERT_EQ(rules.size(), 4u) << rules.dump();
  for (const json& r : rules) EXPECT_EQ(r.value("applied", -1), r.value("count", -2)) << r.dump();
}

}  // namespace
}  // namespace star::op
