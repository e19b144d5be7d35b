// star-operator end to end: the real binary and the real kubectl against the real
// Kubernetes control plane (cluster_util.h: a namespace and Nodes of the test's own). The
// test plays scheduler and kubelet for the job's pods (Bindings, pod status), and plays the
// workers by POSTing WorkerReports to the operator's report endpoint with the job's token.
// The tests that inject API faults are in operator_faults_e2e_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_reports.h"
#include "cluster_util.h"
#include "e2e_util.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/report/client.h"

namespace star::op {
namespace {

using nlohmann::json;
using test_support::ProcessResult;
using e2e::Eventually;
using e2e::ReadFile;
using namespace std::chrono_literals;

using OperatorE2eTest = e2e::OperatorTest;

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
  EXPECT_NE(r.out.find("ssgd"), std::string::npos) << "MODE shows the mode the pods start in\n" << r.out;

  // NodeAllocations: two pods per node, 500m each, guaranteed.
  ASSERT_TRUE(Eventually([&] {
    json na = GetJson({"get", "nodeallocations", NodeName("node-0")});
    return na.is_object() && na["spec"]["pods"].size() == 2;
  }));
  json na = GetJson({"get", "nodeallocations", NodeName("node-1")});
  ASSERT_EQ(na["spec"]["pods"].size(), 2u);
  EXPECT_EQ(na["spec"]["pods"][0]["cpu"]["quotaMillicores"], 500);
  EXPECT_EQ(na["spec"]["pods"][0]["guaranteed"], true);

  // Reports: a wrong token is refused.
  report::ReportClientOptions co;
  co.base_url = report_url_;
  co.token = "wrong";
  auto bad = report::ReportClient::Create(co);
  ASSERT_TRUE(bad.ok());
  api::WorkerReport rep;
  rep.job = JobKey("fm");
  rep.local_batch = 64;
  auto refused = (*bad)->Send(rep);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  // Worker 2 computes 4x slower from iteration 40.
  e2e::SendReports(report_url_, token, {JobKey("fm"), 4, 80, 2, 40, 4.0, 7, 0.05});
  ASSERT_TRUE(Eventually([&] {
    json st = GetJson({"get", "tj", "fm"})["status"];
    return st.is_object() && st.value("stragglers", json::array()).size() == 1 &&
           st["stragglers"][0]["worker"] == 2 && st["stragglers"][0]["node"] == NodeName("node-0") &&
           st.value("iteration", 0) == 80;
  })) << GetJson({"get", "tj", "fm"}).dump(2);
  ASSERT_TRUE(Eventually([&] { return !FindEvent("StragglerDetected", "fm").is_null(); }));

  r = Kubectl({"delete", "tj", "fm", "--wait=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return Pods("fm").empty() && GetJson({"get", "tj", "fm"}).is_null(); }))
      << ReadFile(dir_.path() + "/operator.log");
  // The garbage collector deletes the job's dependents in no particular order.
  EXPECT_TRUE(Eventually([&] { return GetJson({"get", "service", "fm"}).is_null(); })) << "the Service went with the job";
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "nodeallocations", NodeName("node-0")})["spec"]["pods"].empty(); }))
      << "the finalizer removed the job's NodeAllocation entries";
}

TEST_F(OperatorE2eTest, AJobWithSelectorMlAndNoUsableModelGetsALearnedSelectorUnavailableWarning) {
  const std::string model = dir_.path() + "/missing-selector.json";
  StartOperator({"--selector-model", model});
  std::string yaml = JobYaml("ml", 2);
  yaml += "  synchronization:\n    policy: Auto\n    selector: ML\n";
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, yaml).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ml").size() == 2; })) << ReadFile(dir_.path() + "/operator.log");
  const std::string log = ReadFile(dir_.path() + "/operator.log");
  EXPECT_NE(log.find("learned selector unavailable: model file \"" + model + "\""), std::string::npos) << log;
  for (int i = 0; i < 2; ++i) SetPodPhase("ml-worker-" + std::to_string(i), "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "ml"})["status"].value("phase", "") == "Running"; }));
  e2e::SendReports(report_url_, Token("ml"), {JobKey("ml"), 2, 20, 1, 1000, 1.0, 7, 0.05});
  json warning;
  ASSERT_TRUE(Eventually([&] {
    warning = FindEvent("LearnedSelectorUnavailable", "ml");
    return !warning.is_null();
  })) << ReadFile(dir_.path() + "/operator.log");
  EXPECT_EQ(warning["type"], "Warning");
  EXPECT_NE(warning.value("message", "").find(model), std::string::npos) << warning.dump();
}

TEST_F(OperatorE2eTest, AStragglerShowsInEventsAndStatusWithoutWaitingForTheStatusInterval) {
  status_interval_ = "60m";  // only a straggler's urgency can bring the writes forward
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("fm", 4)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("fm").size() == 4; })) << ReadFile(dir_.path() + "/operator.log");
  for (int i = 0; i < 4; ++i) SetPodPhase("fm-worker-" + std::to_string(i), "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("phase", "") == "Running"; }));
  e2e::SendSlowWorkerZeroReports(report_url_, Token("fm"), JobKey("fm"));
  ASSERT_TRUE(Eventually([&] { return !FindEvent("StragglerDetected", "fm").is_null(); }))
      << ReadFile(dir_.path() + "/operator.log");
  ASSERT_TRUE(Eventually([&] {
    json st = GetJson({"get", "tj", "fm"})["status"];
    return st.is_object() && st.value("stragglers", json::array()).size() == 1 && st["stragglers"][0]["worker"] == 0;
  })) << GetJson({"get", "tj", "fm"}).dump(2);
}

TEST_F(OperatorE2eTest, AnInvalidManifestIsRefusedNamingTheField) {
  std::string yaml = JobYaml("bad", 4);
  yaml.replace(yaml.find("replicas: 4"), 11, "replicas: 0");
  ProcessResult r = Kubectl({"apply", "-f", "-"}, yaml);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("spec.workers.replicas"), std::string::npos) << r.err;
  EXPECT_TRUE(GetJson({"get", "tj", "bad"}).is_null());
}

TEST_F(OperatorE2eTest, AFailedPodRestartsTheGangWithNewPodsWhoseReportsAreAccepted) {
  StartOperator({"--max-restarts", "1"});
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("rs", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("rs").size() == 2; }));
  // The first gang reaches iteration 60.
  e2e::SendReports(report_url_, Token("rs"), {JobKey("rs"), 2, 60, 1, 1000, 1.0, 7, 0.05});
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
  // Regression: the new gang counts iterations from 1 again, and the old loop refused its
  // reports until it passed iteration 60. The restart's loop takes them.
  auto client = e2e::NewReportClient(report_url_, Token("rs"));
  ASSERT_NE(client, nullptr);
  const api::WorkerReport rep = e2e::OneReport(JobKey("rs"), 1);
  StatusOr<std::optional<api::Decision>> first = Status::Internal("none sent");
  ASSERT_TRUE(Eventually([&] {
    first = client->Send(rep);
    return first.ok();
  })) << first.status() << "\n" << ReadFile(dir_.path() + "/operator.log");
  e2e::SendReports(report_url_, Token("rs"), {JobKey("rs"), 2, 20, 1, 1000, 1.0, 8, 0.05, 2});
  // A second failure exceeds --max-restarts 1.
  SetPodPhase("rs-worker-0", "Failed");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "rs"})["status"].value("phase", "") == "Failed"; }));
  job = GetJson({"get", "tj", "rs"});
  bool backoff = false;
  for (const json& c : job["status"]["conditions"]) backoff |= c["type"] == "Failed" && c["reason"] == "BackoffLimitExceeded";
  EXPECT_TRUE(backoff) << job["status"].dump(2);
}

TEST_F(OperatorE2eTest, AKilledOperatorResumesTheJobsDecisionsWithTheirEpochs) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("rd", 4)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("rd").size() == 4; }));
  // Worker 1 computes 4x slower from iteration 40: AMP for it (a decision).
  std::optional<api::Decision> last;
  e2e::SendReports(report_url_, Token("rd"), {JobKey("rd"), 4, 80, 1, 40, 4.0, 5, 0.05}, &last);
  ASSERT_TRUE(last.has_value()) << "a decision";
  // Status recorded it before any worker got it.
  json st = GetJson({"get", "tj", "rd"})["status"];
  EXPECT_EQ(st.value("decisionEpoch", int64_t{0}), last->epoch) << st.dump(2);
  EXPECT_EQ(st.value("decisionApplyAtIteration", int64_t{-1}), last->apply_at_iteration);

  op_.Kill();
  StartOperator();
  auto client = e2e::NewReportClient(report_url_, Token("rd"));
  ASSERT_NE(client, nullptr);
  const api::WorkerReport rep = e2e::OneReport(JobKey("rd"), 81);
  // The restarted operator answers with the decision in force, not a new epoch 1 that
  // the workers would ignore.
  std::optional<api::Decision> resumed;
  ASSERT_TRUE(Eventually([&] {
    auto sent = client->Send(rep);
    if (!sent.ok() || !*sent) return false;
    resumed = **sent;
    return true;
  })) << ReadFile(dir_.path() + "/operator.log");
  EXPECT_EQ(*resumed, *last);
}

TEST_F(OperatorE2eTest, ChangingReplicasRestartsTheGangWithTheNewWorldSize) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("sc", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("sc").size() == 2; })) << ReadFile(dir_.path() + "/operator.log");
  std::set<std::string> old_uids;
  for (const json& p : Pods("sc")) old_uids.insert(p["metadata"]["uid"].get<std::string>());
  for (int i = 0; i < 2; ++i) SetPodPhase("sc-worker-" + std::to_string(i), "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "sc"})["status"].value("phase", "") == "Running"; }));

  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("sc", 3)).exit_code, 0);
  auto world_size = [](const json& pod) {
    for (const json& e : pod["spec"]["containers"][0]["env"]) {
      if (e["name"] == "STAR_WORLD_SIZE") return e.value("value", "");
    }
    return std::string();
  };
  ASSERT_TRUE(Eventually([&] {
    auto pods = Pods("sc");
    if (pods.size() != 3) return false;
    for (const json& p : pods) {
      if (old_uids.count(p["metadata"]["uid"].get<std::string>()) || world_size(p) != "3") return false;
    }
    return true;
  })) << ReadFile(dir_.path() + "/operator.log");
  bool spec_changed = false;
  const json events = GetJson({"get", "events"});
  for (const json& e : events["items"]) {
    spec_changed |= e.value("reason", "") == "SpecChanged" && e["involvedObject"]["name"] == "sc";
  }
  EXPECT_TRUE(spec_changed) << events.dump(1);
  const json job = GetJson({"get", "tj", "sc"});
  EXPECT_FALSE(job["metadata"]["annotations"].contains(kRestartsAnnotation)) << "a spec change is no failure";
}

TEST_F(OperatorE2eTest, EntriesOfAJobThatIsGoneLeaveTheNodeAllocation) {
  // node-9 lists a pod of job "ghost", which does not exist, a pod STAR does not manage,
  // and a pod of another namespace, which this operator (--namespace of the test) does not watch.
  const std::string node = NodeName("node-9");
  const json na = {
      {"apiVersion", "star.dev/v1alpha1"},
      {"kind", "NodeAllocation"},
      {"metadata", {{"name", node}}},
      {"spec",
       {{"pods",
         {{{"namespace", ns_}, {"name", "ghost-worker-0"}, {"uid", "g0"}, {"cpu", {{"quotaMillicores", 500}}}},
          {{"namespace", ns_}, {"name", "nginx"}, {"uid", "n0"}, {"cpu", {{"quotaMillicores", 200}}}},
          {{"namespace", ns_ + "-other"}, {"name", "ghost-worker-1"}, {"uid", "o1"}, {"cpu", {{"quotaMillicores", 300}}}}}}}}};
  cluster_objects_.push_back("nodeallocation/" + node);
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, na.dump()).exit_code, 0);
  StartOperator();
  ASSERT_TRUE(Eventually([&] {
    json got = GetJson({"get", "nodeallocations", node});
    if (!got.is_object()) return false;
    std::set<std::string> uids;
    for (const json& p : got["spec"]["pods"]) uids.insert(p["uid"].get<std::string>());
    return uids == std::set<std::string>{"n0", "o1"};
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", node}).dump(2);
}

TEST_F(OperatorE2eTest, ADeletedServiceOrTokenSecretIsMadeAgain) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("sv", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("sv").size() == 2 && GetJson({"get", "service", "sv"}).is_object(); }));
  const std::string uid = GetJson({"get", "service", "sv"})["metadata"]["uid"];
  const std::string token = Token("sv");
  ASSERT_FALSE(token.empty());
  ASSERT_EQ(Kubectl({"delete", "service", "sv"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    json svc = GetJson({"get", "service", "sv"});
    return svc.is_object() && svc["metadata"]["uid"] != uid;
  })) << ReadFile(dir_.path() + "/operator.log");
  // The pods read the token from the Secret: a gang restart brings it back, same token.
  ASSERT_EQ(Kubectl({"delete", "secret", TokenSecretName("sv")}).exit_code, 0);
  SetPodPhase("sv-worker-0", "Failed");
  ASSERT_TRUE(Eventually([&] { return Token("sv") == token; })) << ReadFile(dir_.path() + "/operator.log");
}

// Anyone who may create pods in the namespace can label one star.dev/job=<job>: such a
// pod is not the job's (no controller reference to it). It is not deleted, its failure is
// not the job's and does not restart the gang.
TEST_F(OperatorE2eTest, ALabelSquattingPodIsNeitherDeletedNorCountedNorARestart) {
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("sq", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("sq").size() == 2; })) << ReadFile(dir_.path() + "/operator.log");
  std::set<std::string> uids;
  for (const json& p : Pods("sq")) uids.insert(p["metadata"]["uid"].get<std::string>());
  for (int i = 0; i < 2; ++i) SetPodPhase("sq-worker-" + std::to_string(i), "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "sq"})["status"].value("phase", "") == "Running"; }))
      << ReadFile(dir_.path() + "/operator.log");

  const json squatter = {{"apiVersion", "v1"},
                         {"kind", "Pod"},
                         {"metadata",
                          {{"name", "sq-worker-7"},
                           {"labels", {{kJobLabel, "sq"}, {kRoleLabel, "worker"}, {kRankLabel, "0"}}}}},
                         {"spec",
                          {{"schedulerName", TestPods().scheduler_name},
                           {"containers", {{{"name", "c"}, {"image", TestPods().image}}}}}}};
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, squatter.dump()).exit_code, 0);
  SetPodPhase("sq-worker-7", "Failed", "node-0");
  // The operator has seen the failed pod once it reconciled the generation after it.
  PatchAndAwaitReconcile("sq", R"({"spec":{"mitigation":{"amp":{"enabled":false}}}})");

  const json job = GetJson({"get", "tj", "sq"});
  EXPECT_EQ(job["status"].value("phase", ""), "Running");
  EXPECT_FALSE(job["metadata"].value("annotations", json::object()).contains(kRestartsAnnotation));
  EXPECT_TRUE(GetJson({"get", "pod", "sq-worker-7"}).is_object()) << "the squatting pod was deleted";
  std::set<std::string> now;
  for (const json& p : Pods("sq")) {
    if (p["metadata"]["name"] != "sq-worker-7") now.insert(p["metadata"]["uid"].get<std::string>());
  }
  EXPECT_EQ(now, uids) << "the job's own pods were replaced";
  ASSERT_EQ(Kubectl({"delete", "pod", "sq-worker-7", "--wait=false"}).exit_code, 0);
}

// A Secret named <job>-token that the job does not control is not adopted nor
// overwritten: the job fails saying the name is taken, and creates no pods.
TEST_F(OperatorE2eTest, ATokenSecretTheJobDoesNotControlIsLeftAloneAndTheJobSaysSo) {
  StartOperator();
  const json secret = {{"apiVersion", "v1"},
                       {"kind", "Secret"},
                       {"metadata", {{"name", TokenSecretName("tk")}}},
                       {"stringData", {{"token", "chosen-by-someone-else"}}}};
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, secret.dump()).exit_code, 0);
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("tk", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    const json status = GetJson({"get", "tj", "tk"})["status"];
    if (status.value("phase", "") != "Failed") return false;
    for (const json& c : status.value("conditions", json::array())) {
      if (c.value("reason", "") == "SecretNameTaken") return true;
    }
    return false;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "tj", "tk"}).dump(2);
  EXPECT_EQ(Token("tk"), "chosen-by-someone-else");
  EXPECT_FALSE(GetJson({"get", "secret", TokenSecretName("tk")})["metadata"].contains("ownerReferences"));
  EXPECT_TRUE(Pods("tk").empty());
}

}  // namespace
}  // namespace star::op
