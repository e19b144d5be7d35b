// star-operator end to end on the real control plane: what users of batch/v1 Job, Kubeflow
// and Kueue expect of a job as a whole: spec.suspend, spec.runPolicy (backoffLimit,
// activeDeadlineSeconds, ttlSecondsAfterFinished), torchrun's environment on the pods and
// spec.mitigation.mode Observe. The test plays scheduler and kubelet (cluster_util.h) and
// the workers (reports with the job's token).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "e2e_reports.h"
#include "e2e_util.h"

namespace star::op {
namespace {

using nlohmann::json;
using e2e::Eventually;
using e2e::ReadFile;

class RunPolicyE2eTest : public e2e::OperatorTest {
 protected:
  // A job of `workers` test pods whose spec ends with `extra`: lines indented two spaces
  // add spec fields, four spaces fields of spec.mitigation.
  std::string Job(const std::string& name, int workers, const std::string& extra) {
    const bool in_mitigation = extra.rfind("    ", 0) == 0;
    return e2e::TrainingJobYaml(name, ns_, workers, TestPods(), "500m", "500m",
                                "  mitigation:\n" + (in_mitigation ? extra : std::string()) +
                                    "    detection:\n      window: 5\n" + (in_mitigation ? std::string() : extra));
  }
};

std::map<std::string, std::string> EnvOf(const json& pod) {
  std::map<std::string, std::string> env;
  for (const json& e : pod["spec"]["containers"][0]["env"]) env[e["name"]] = e.value("value", "");
  return env;
}

// The condition `type` of `job`'s status, or an empty object.
json Condition(const json& job, const std::string& type) {
  if (!job.is_object()) return json::object();
  for (const json& c : job.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return json::object();
}

// Whether `job` is Failed with a Failed condition of `reason`.
bool FailedFor(const json& job, const std::string& reason) {
  return job.is_object() && job.value("status", json::object()).value("phase", "") == "Failed" &&
         Condition(job, "Failed").value("reason", "") == reason;
}

std::set<std::string> Uids(const std::vector<json>& pods) {
  std::set<std::string> out;
  for (const json& p : pods) out.insert(p["metadata"]["uid"].get<std::string>());
  return out;
}

TEST_F(RunPolicyE2eTest, ASuspendedJobHasNoPodsAndARunningOneSuspendedKeepsItsStatusUntilResumed) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("sp", 2, "  suspend: true\n")).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "sp"})["status"].value("phase", "") == "Suspended"; }))
      << ReadFile(dir_.path() + "/operator.log");
  json job = GetJson({"get", "tj", "sp"});
  EXPECT_EQ(Condition(job, "Suspended").value("status", ""), "True") << job["status"].dump(2);
  EXPECT_TRUE(Pods("sp").empty()) << "the phase is written after the pods are decided: none";
  EXPECT_FALSE(job["status"].contains("startTime"));

  ASSERT_EQ(Kubectl({"patch", "tj", "sp", "--type=merge", "-p", R"({"spec":{"suspend":false}})"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("sp").size() == 2; })) << ReadFile(dir_.path() + "/operator.log");
  for (int i = 0; i < 2; ++i) SetPodPhase("sp-worker-" + std::to_string(i), "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "sp"})["status"].value("phase", "") == "Running"; }));
  EXPECT_TRUE(GetJson({"get", "tj", "sp"})["status"].contains("startTime"));
  e2e::SendReports(report_url_, Token("sp"), {JobKey("sp"), 2, 30, 0, 1000, 1.0, 3, 0.05});
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "sp"})["status"].value("iteration", 0) >= 30; }));
  const std::set<std::string> first = Uids(Pods("sp"));

  ASSERT_EQ(Kubectl({"patch", "tj", "sp", "--type=merge", "-p", R"({"spec":{"suspend":true}})"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("sp").empty(); })) << ReadFile(dir_.path() + "/operator.log");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "sp"})["status"].value("phase", "") == "Suspended"; }));
  job = GetJson({"get", "tj", "sp"});
  EXPECT_GE(job["status"].value("iteration", 0), 30) << "status is kept";
  EXPECT_FALSE(job["metadata"].value("annotations", json::object()).contains(kRestartsAnnotation))
      << "a suspend is no restart";

  ASSERT_EQ(Kubectl({"patch", "tj", "sp", "--type=merge", "-p", R"({"spec":{"suspend":false}})"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    auto pods = Pods("sp");
    return pods.size() == 2 && Uids(pods) != first;
  })) << "resumed: a new gang";
  job = GetJson({"get", "tj", "sp"});
  EXPECT_EQ(Condition(job, "Suspended").value("status", ""), "False") << job["status"].dump(2);
}

TEST_F(RunPolicyE2eTest, TheJobsBackoffLimitOverridesTheOperatorsMaxRestarts) {
  StartOperator({"--max-restarts", "3"});
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("bl", 2, "  runPolicy:\n    backoffLimit: 0\n")).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("bl").size() == 2; }));
  SetPodPhase("bl-worker-1", "Failed");
  json job;
  ASSERT_TRUE(Eventually([&] {
    job = GetJson({"get", "tj", "bl"});
    return FailedFor(job, "BackoffLimitExceeded");
  })) << job.dump(2) << ReadFile(dir_.path() + "/operator.log");
  EXPECT_TRUE(job["status"].contains("completionTime"));
}

TEST_F(RunPolicyE2eTest, PastItsActiveDeadlineAJobFailsAndLosesItsPods) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("dl", 2, "  runPolicy:\n    activeDeadlineSeconds: 2\n")).exit_code, 0);
  json job;
  ASSERT_TRUE(Eventually([&] {
    job = GetJson({"get", "tj", "dl"});
    return FailedFor(job, "DeadlineExceeded");
  })) << job.dump(2) << ReadFile(dir_.path() + "/operator.log");
  ASSERT_TRUE(Eventually([&] { return Pods("dl").empty(); }));
  EXPECT_TRUE(Eventually([&] {
    const json events = GetJson({"get", "events"});  // the loop must not outlive it
    for (const json& e : events["items"]) {
      if (e.value("reason", "") == "DeadlineExceeded" && e["involvedObject"]["name"] == "dl") return true;
    }
    return false;
  })) << "an Event says why";
}

TEST_F(RunPolicyE2eTest, AFinishedJobIsDeletedAfterItsTtl) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("tl", 1, "  runPolicy:\n    ttlSecondsAfterFinished: 1\n")).exit_code,
            0);
  ASSERT_TRUE(Eventually([&] { return Pods("tl").size() == 1; }));
  SetPodPhase("tl-worker-0", "Succeeded", "node-0");
  ASSERT_TRUE(Eventually([&] { return Kubectl({"get", "tj", "tl"}).exit_code != 0; }))
      << ReadFile(dir_.path() + "/operator.log");
  EXPECT_NE(Kubectl({"get", "tj", "tl"}).err.find("NotFound"), std::string::npos);
}

TEST_F(RunPolicyE2eTest, WorkerPodsGetTorchrunsEnvironmentAndTheJobsTrainingSettings) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("tr", 2, "")).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("tr").size() == 2; }));
  for (const json& pod : Pods("tr")) {
    auto env = EnvOf(pod);
    const std::string index = pod["metadata"]["labels"]["star.dev/rank"];
    EXPECT_EQ(env["RANK"], index);
    EXPECT_EQ(env["NODE_RANK"], index);
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["LOCAL_RANK"], "0");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "1");
    EXPECT_EQ(env["MASTER_ADDR"], "tr-worker-0.tr." + ns_ + ".svc");
    EXPECT_FALSE(env["MASTER_PORT"].empty());
    EXPECT_EQ(env["STAR_GLOBAL_BATCH"], "256");
    EXPECT_EQ(env["STAR_AMP_DTYPE"], "bfloat16");
  }
}

TEST_F(RunPolicyE2eTest, ProcsPerPodMakesPodsOfSeveralRanks) {
  StartOperator();
  std::string yaml = Job("pp", 2, "");
  const std::string replicas = "    replicas: 2\n";
  yaml.replace(yaml.find(replicas), replicas.size(), replicas + "    procsPerPod: 2\n");
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, yaml).exit_code, 0) << yaml;
  ASSERT_TRUE(Eventually([&] { return Pods("pp").size() == 2; })) << ReadFile(dir_.path() + "/operator.log");
  for (const json& pod : Pods("pp")) {
    auto env = EnvOf(pod);
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env.count("STAR_RANK"), 0u);
  }
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "pp"})["status"].value("k", 0) == 4; }))
      << "k counts every process\n" << GetJson({"get", "tj", "pp"})["status"].dump(2);
}

TEST_F(RunPolicyE2eTest, ObserveReportsAStragglerAndChangesNothing) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("ob", 4, "    mode: Observe\n")).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ob").size() == 4; }));
  std::optional<api::Decision> last;
  e2e::SendReports(report_url_, Token("ob"), {JobKey("ob"), 4, 80, 1, 40, 4.0, 5, 0.05}, &last);
  ASSERT_TRUE(Eventually([&] { return !GetJson({"get", "tj", "ob"})["status"].value("stragglers", json::array()).empty(); }))
      << "detected and reported\n" << ReadFile(dir_.path() + "/operator.log");
  const json st = GetJson({"get", "tj", "ob"})["status"];
  EXPECT_EQ(st["stragglers"][0].value("worker", -1), 1) << st.dump(2);
  EXPECT_EQ(st.value("syncMode", ""), "ssgd");
  for (const json& w : st.value("workers", json::array())) {
    EXPECT_FALSE(w.value("amp", true)) << st.dump(2);
    EXPECT_EQ(w.value("batch", 0), 64) << "equal batches" << st.dump(2);
  }
  if (last) {
    EXPECT_EQ(last->mode, api::SyncMode::kSsgd);
    for (const auto& w : last->workers) EXPECT_FALSE(w.amp);
  }
}

}  // namespace
}  // namespace star::op
