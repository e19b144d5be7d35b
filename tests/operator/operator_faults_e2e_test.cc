// star-operator end to end under injected faults: the real binary and the real kubectl
// against the API emulator, run in-process because the test injects faults into it (slow
// pod creates, server errors, throttling, dropped watches), which the real API server
// cannot do. Pods do not run in the emulator: the test plays kubelet by patching pod status.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "emulator_util.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {
namespace {

using nlohmann::json;
using e2e::Eventually;
using e2e::JobYaml;
using e2e::ReadFile;
using namespace std::chrono_literals;

using OperatorE2eTest = e2e::EmulatorOperatorTest;

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
