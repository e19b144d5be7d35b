// What the end-to-end tests of star-operator with star-agent share: the test plays the
// scheduler and the kubelet of its node-0 (Bindings, pod cgroups under a cgroup v1 root of
// the test's own, phases) and the workers (WorkerReports with the job's token); both
// binaries run against the real Kubernetes control plane (cluster_util.h) with its
// kubeconfig (HTTPS, a client certificate). Needs root and a cgroup v1 cpu hierarchy at
// /sys/fs/cgroup/cpu (the fixture skips otherwise).
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_reports.h"
#include "cluster_util.h"
#include "e2e_util.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op::e2e {

namespace fs = std::filesystem;
using nlohmann::json;
using test_support::BackgroundProcess;
using test_support::ProcessResult;
using namespace std::chrono_literals;

constexpr char kCpuHierarchy[] = "/sys/fs/cgroup/cpu";
constexpr char kNode[] = "node-0";  // as the test knows it: NodeName(kNode) in the cluster
// What the pods' cgroups hold before the agent touches them (500m at the default period):
// distinct from every quota the allocation asks for, and what a release must restore.
constexpr int64_t kOriginalQuotaUs = 50000;

// The integer in a cgroup file; nullopt when it cannot be read.
inline std::optional<int64_t> ReadCgroupInt(const std::string& path) {
  std::ifstream in(path);
  int64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

// Cgroup directories made by the test, removed leaf first (rmdir: cgroup files cannot be
// unlinked) by Remove or the destructor.
class CgroupDirs {
 public:
  ~CgroupDirs() { Remove(); }
  // Makes `dir` and its missing parents under `base`; false when one cannot be made.
  bool Make(const fs::path& base, const fs::path& relative) {
    fs::path p = base;
    for (const fs::path& part : relative) {
      p /= part;
      if (::mkdir(p.c_str(), 0755) == 0) {
        made_.push_back(p);
      } else if (errno != EEXIST) {
        return false;
      }
    }
    return true;
  }
  void Remove() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());
    made_.clear();
  }

 private:
  std::vector<fs::path> made_;  // in creation order: parents before children
};

// A pod on node-0 as the kubelet would have it: its uid and its cgroup.
struct NodePod {
  std::string name, uid;
  std::string dir;  // absolute path of its cgroup in the cpu hierarchy
  std::optional<int64_t> QuotaUs() const { return ReadCgroupInt(dir + "/cpu.cfs_quota_us"); }
  // `millicores` as a CFS quota at this cgroup's period (as the agent writes it).
  std::optional<int64_t> QuotaUsOf(int64_t millicores) const {
    auto period = ReadCgroupInt(dir + "/cpu.cfs_period_us");
    if (!period) return std::nullopt;
    return millicores == 0 ? -1 : std::max<int64_t>(1000, millicores * *period / 1000);
  }
};

class OperatorAgentTest : public OperatorTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !fs::exists(std::string(kCpuHierarchy) + "/cpu.cfs_quota_us")) {
      GTEST_SKIP() << "needs root and a cgroup v1 cpu hierarchy at " << kCpuHierarchy;
    }
    OperatorTest::SetUp();
    cgroup_root_ = "star-operator-agent-e2e-" + std::to_string(getpid());
  }

  void TearDown() override {
    if (ns_.empty()) return;  // skipped before the namespace was made
    agent_.Stop();
    op_.Stop();
    cgroups_.Remove();
    EXPECT_FALSE(fs::exists(std::string(kCpuHierarchy) + "/" + cgroup_root_))
        << "cgroups left behind under " << cgroup_root_;
    OperatorTest::TearDown();
  }

  std::string Logs() {
    return "\n--- operator\n" + ReadFile(dir_.path() + "/operator.log") + "\n--- agent\n" +
           ReadFile(dir_.path() + "/agent.log") + "\n--- nodeallocation\n" +
           GetJson({"get", "nodeallocations", NodeName(kNode)}).dump(2);
  }

  // Starts star-agent for node-0; its /metrics on `metrics_address` ("" = none).
  void StartAgent(const std::string& metrics_address = "") {
    ASSERT_TRUE(agent_.Start({STAR_AGENT_BINARY, "--node", NodeName(kNode), "--kubeconfig", kubeconfig_, "--cgroup-root",
                              cgroup_root_, "--journal", dir_.path() + "/journal.json", "--metrics-address", metrics_address,
                              "--poll-ms", "50"},
                             dir_.path() + "/agent.log"));
  }

  // Makes the cgroup of pod `name` (which exists, with a uid) under kubepods/<qos_dir> of
  // the test's cgroup root ("" for Guaranteed: kubepods/pod<uid>), with kOriginalQuotaUs.
  void MakePodCgroup(const std::string& name, const std::string& qos_dir, NodePod& out) {
    json pod = GetJson({"get", "pod", name});
    ASSERT_TRUE(pod.is_object()) << name;
    out.name = name;
    out.uid = pod["metadata"].value("uid", "");
    ASSERT_FALSE(out.uid.empty()) << pod.dump(2);
    fs::path relative = fs::path(cgroup_root_) / "kubepods";
    if (!qos_dir.empty()) relative /= qos_dir;
    relative /= "pod" + out.uid;
    ASSERT_TRUE(cgroups_.Make(kCpuHierarchy, relative)) << relative << ": " << strerror(errno);
    out.dir = (fs::path(kCpuHierarchy) / relative).string();
    std::ofstream(out.dir + "/cpu.cfs_quota_us") << kOriginalQuotaUs;
    ASSERT_EQ(out.QuotaUs(), kOriginalQuotaUs) << out.dir;
  }

  // The spec entry of pod `uid` in node-0's NodeAllocation `na` (null when absent).
  static json SpecEntry(const json& na, const std::string& uid) {
    if (!na.is_object()) return json();
    for (const json& p : na["spec"].value("pods", json::array())) {
      if (p.value("uid", "") == uid) return p;
    }
    return json();
  }
  static int64_t SpecQuota(const json& na, const NodePod& pod) {
    json e = SpecEntry(na, pod.uid);
    return e.is_object() ? e["cpu"].value("quotaMillicores", int64_t{-1}) : -1;
  }
  static std::string Condition(const json& na, const std::string& type) {
    for (const json& c : na.value(json::json_pointer("/status/conditions"), json::array())) {
      if (c.value("type", "") == type) return c.value("status", "");
    }
    return "";
  }

  // Why node-0 does not (yet) match NodeAllocation `na`; "" once it does: the status
  // observed the newest generation and is Ready, it lists each of `pods` that has an entry
  // as applied with the entry's quota, and every pod's cgroup holds its entry's quota (a pod
  // without an entry: its original quota).
  static std::string AgentLag(const json& na, const std::vector<const NodePod*>& pods) {
    if (!na.is_object()) return "no NodeAllocation";
    const int64_t generation = na["metadata"].value("generation", int64_t{0});
    const int64_t observed = na.value(json::json_pointer("/status/observedGeneration"), int64_t{0});
    if (observed != generation) {
      return "observedGeneration " + std::to_string(observed) + " of " + std::to_string(generation);
    }
    if (Condition(na, "Ready") != "True") return "not Ready";
    for (const NodePod* pod : pods) {
      const json entry = SpecEntry(na, pod->uid);
      const std::optional<int64_t> have = pod->QuotaUs();
      if (entry.is_null()) {
        if (have != kOriginalQuotaUs) return pod->name + ": not back at its original quota";
        continue;
      }
      const int64_t millicores = entry["cpu"].value("quotaMillicores", int64_t{0});
      if (have != pod->QuotaUsOf(millicores)) {
        return pod->name + ": cgroup quota " + std::to_string(have.value_or(-2)) + " for " +
               std::to_string(millicores) + "m";
      }
      bool applied = false;
      for (const json& a : na.value(json::json_pointer("/status/applied"), json::array())) {
        applied |= a.value("uid", "") == pod->uid && a["cpu"].value("quotaMillicores", int64_t{-1}) == millicores;
      }
      if (!applied) return pod->name + ": " + std::to_string(millicores) + "m not in status.applied";
    }
    return "";
  }

  // Waits until node-0 matches its NodeAllocation and `also` holds of it; the last lag
  // goes to `why`.
  bool EventuallyApplied(const std::vector<const NodePod*>& pods, const std::function<bool(const json&)>& also,
                         std::string& why) {
    return Eventually([&] {
      const json na = GetJson({"get", "nodeallocations", NodeName(kNode)});
      why = AgentLag(na, pods);
      if (!why.empty()) return false;
      if (!also(na)) why = "the NodeAllocation does not show the expected quotas yet";
      return why.empty();
    });
  }

  // node-0 (4 CPUs), star-operator and star-agent (its /metrics on `agent_metrics`, "" =
  // none), and two running jobs: fm (4 workers of 1 CPU, worker 0 on node-0, Guaranteed,
  // 1000 iterations at most: the operator estimates when it ends)
  // and nb (1 worker, request 500m, limit 2, on node-0, Burstable); returns once node-0's
  // cgroups hold each pod's limit.
  void StartOnNode0(NodePod& fm0, NodePod& nb0, const std::string& agent_metrics = "") {
    MakeNode(kNode, "4");
    if (HasFatalFailure()) return;
    StartOperator();
    StartAgent(agent_metrics);
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("fm", 4, "1", "1", 1000)).exit_code, 0);
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("nb", 1, "500m", "2")).exit_code, 0);
    ASSERT_TRUE(Eventually([&] { return Pods("fm").size() == 4 && Pods("nb").size() == 1; })) << Logs();
    MakePodCgroup("fm-worker-0", "", fm0);
    MakePodCgroup("nb-worker-0", "burstable", nb0);
    if (HasFatalFailure()) return;
    for (int i = 0; i < 4; ++i) SetPodPhase("fm-worker-" + std::to_string(i), "Running", i == 0 ? kNode : "node-1");
    SetPodPhase("nb-worker-0", "Running", kNode);
    ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("phase", "") == "Running"; }))
        << Logs();
    std::string why;
    ASSERT_TRUE(EventuallyApplied(
        {&fm0, &nb0}, [&](const json& na) { return SpecQuota(na, fm0) == 1000 && SpecQuota(na, nb0) == 2000; }, why))
        << why << Logs();
    EXPECT_EQ(fm0.QuotaUs(), fm0.QuotaUsOf(1000));
    EXPECT_EQ(nb0.QuotaUs(), nb0.QuotaUsOf(2000));
  }

  // fm's workers report, worker 0 as a straggler (e2e_reports.h); `observe` sees each report.
  void SendReports(std::function<void(const api::WorkerReport&)> observe = nullptr) {
    e2e::SendSlowWorkerZeroReports(report_url_, Token("fm"), JobKey("fm"), std::move(observe));
  }

  std::string cgroup_root_;  // relative to kCpuHierarchy
  CgroupDirs cgroups_;       // declared before the agent: it stops first
  BackgroundProcess agent_;
};

}  // namespace star::op::e2e
