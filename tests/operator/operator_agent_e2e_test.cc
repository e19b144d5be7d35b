// The whole resource path end to end: star-operator decides a CPU reallocation and writes
// node-0's NodeAllocation; star-agent (its Kubernetes source) applies it to real cgroup v1
// CPU quotas and writes the NodeAllocation's status. Both real binaries against the real
// Kubernetes control plane, over HTTPS with the client certificate of the cluster's
// kubeconfig (which kubectl shares); the test plays scheduler and kubelet (Bindings, pod
// cgroups, phases) and the workers (WorkerReports with the job's token). Needs root and a
// cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu; the pod cgroups live under a cgroup root of
// the test's own.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent_e2e.h"
#include "e2e_util.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/reallocation.h"

namespace star::op {
namespace {

using nlohmann::json;
using e2e::Eventually;
using e2e::kNode;
using e2e::NodePod;
using e2e::kOriginalQuotaUs;

using OperatorAgentE2eTest = e2e::OperatorAgentTest;

TEST_F(OperatorAgentE2eTest, AReallocationReachesTheCgroupsAndIsUndoneWhenTheJobStopsRunning) {
  // Every client below really speaks TLS with a client certificate.
  const std::string kubeconfig = e2e::ReadFile(kubeconfig_);
  ASSERT_NE(kubeconfig.find("server: https://"), std::string::npos) << kubeconfig;
  ASSERT_NE(kubeconfig.find("client-certificate"), std::string::npos) << kubeconfig;
  NodePod fm0, nb0;
  StartOnNode0(fm0, nb0);
  if (HasFatalFailure()) return;
  const std::vector<const NodePod*> pods = {&fm0, &nb0};
  std::string why;

  // fm's worker 0 straggles: the operator moves CPU to it from the node and from nb, and
  // the agent puts the new quotas into the cgroups.
  SendReports();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(EventuallyApplied(
      pods,
      [&](const json& na) {
        return na["metadata"].value("annotations", json::object()).contains(kReallocationPlansAnnotation) &&
               SpecQuota(na, fm0) > 1000 && SpecQuota(na, nb0) < 2000;
      },
      why))
      << why << Logs();
  const json planned = GetJson({"get", "nodeallocations", NodeName(kNode)});
  const int64_t fm_planned = SpecQuota(planned, fm0), nb_planned = SpecQuota(planned, nb0);
  EXPECT_LE(fm_planned + nb_planned, 4000) << "node-0 is not overcommitted";
  EXPECT_GT(fm0.QuotaUs().value_or(0), *fm0.QuotaUsOf(1000));
  EXPECT_LT(nb0.QuotaUs().value_or(0), *nb0.QuotaUsOf(2000));
  EXPECT_GE(nb0.QuotaUs().value_or(0), *nb0.QuotaUsOf(100)) << "not below nb's floor";

  // A failed pod stops fm (its gang restarts): the plan is undone, nb's cgroup gets its
  // limit back and fm's old worker 0, gone from the allocation, its original quota.
  SetPodPhase("fm-worker-1", "Failed");
  ASSERT_TRUE(EventuallyApplied(
      pods,
      [&](const json& na) {
        return !na["metadata"].value("annotations", json::object()).contains(kReallocationPlansAnnotation) &&
               SpecQuota(na, nb0) == 2000 && SpecEntry(na, fm0.uid).is_null();
      },
      why))
      << why << Logs();
  EXPECT_EQ(nb0.QuotaUs(), nb0.QuotaUsOf(2000));
  EXPECT_EQ(fm0.QuotaUs(), kOriginalQuotaUs);

  // Without the operator, a deleted NodeAllocation releases node-0: every original is back.
  op_.Stop();
  ASSERT_EQ(Kubectl({"delete", "nodeallocation", NodeName(kNode), "--wait=false"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return fm0.QuotaUs() == kOriginalQuotaUs && nb0.QuotaUs() == kOriginalQuotaUs; }))
      << "fm-worker-0 " << fm0.QuotaUs().value_or(-2) << ", nb-worker-0 " << nb0.QuotaUs().value_or(-2) << Logs();
  const int status = agent_.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << Logs();
}

}  // namespace
}  // namespace star::op
