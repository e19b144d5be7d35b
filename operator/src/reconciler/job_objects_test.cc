#include "star/operator/reconciler/job_objects.h"

#include <gtest/gtest.h>

#include "reconciler/desired_pods_for_test.h"

namespace star::op {
namespace {

using nlohmann::json;

json Job(int workers = 2, int ps = 0) {
  json j = {{"apiVersion", "star.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", "fm"}, {"namespace", "team"}, {"uid", "u-1"}, {"generation", 1}}},
            {"spec",
             {{"architecture", ps ? "ParameterServer" : "AllReduce"},
              {"workers",
               {{"replicas", workers},
                {"template",
                 {{"metadata", {{"labels", {{"app", "x"}}}}},
                  {"spec",
                   {{"containers",
                     {{{"name", "t"},
                       {"image", "img"},
                       {"env", {{{"name", "STAR_RANK"}, {"value", "99"}}, {{"name", "KEEP"}, {"value", "1"}}}},
                       {"resources",
                        {{"requests", {{"cpu", "500m"}}}, {"limits", {{"cpu", "500m"}}}}}}}}}}}}}},
              {"training", {{"globalBatchSize", 64}, {"targetAccuracy", 0.9}}}}}};
  if (ps) j["spec"]["parameterServers"] = {{"replicas", ps}, {"template", j["spec"]["workers"]["template"]}};
  return j;
}

std::map<std::string, std::string> Env(const json& pod) {
  std::map<std::string, std::string> out;
  for (const json& e : pod["spec"]["containers"][0]["env"]) {
    out[e["name"]] = e.contains("value") ? e["value"].get<std::string>() : e["valueFrom"].dump();
  }
  return out;
}

std::vector<json> Pods(const json& job) { return testing_util::DesiredPodsOf(job); }

TEST(DesiredPods, WorkersAreNamedByRankOwnedByTheJobAndToldTheirRankWorldAndStore) {
  const auto pods = Pods(Job(3));
  ASSERT_EQ(pods.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const json& p = pods[i];
    EXPECT_EQ(p["metadata"]["name"], "fm-worker-" + std::to_string(i));
    EXPECT_EQ(p["metadata"]["namespace"], "team");
    EXPECT_EQ(p["metadata"]["labels"]["star.dev/job"], "fm");
    EXPECT_EQ(p["metadata"]["labels"]["star.dev/role"], "worker");
    EXPECT_EQ(p["metadata"]["labels"]["star.dev/rank"], std::to_string(i));
    EXPECT_EQ(p["metadata"]["labels"]["app"], "x") << "template labels are kept";
    EXPECT_EQ(p["metadata"]["ownerReferences"][0]["uid"], "u-1");
    EXPECT_EQ(p["metadata"]["ownerReferences"][0]["controller"], true);
    EXPECT_EQ(p["spec"]["hostname"], p["metadata"]["name"]);
    EXPECT_EQ(p["spec"]["subdomain"], "fm");
    EXPECT_EQ(p["spec"]["restartPolicy"], "Never");
    auto env = Env(p);
    EXPECT_EQ(env["STAR_RANK"], std::to_string(i)) << "the template's STAR_RANK is replaced";
    EXPECT_EQ(env["KEEP"], "1");
    EXPECT_EQ(env["STAR_WORLD_SIZE"], "3");
    EXPECT_EQ(env["STAR_PARAMETER_SERVERS"], "0");
    EXPECT_EQ(env["STAR_STORE_URL"], "http://fm-worker-0.fm.team.svc:29500");
    EXPECT_EQ(env["STAR_CONTROLLER_URL"], "http://op:8443");
    EXPECT_EQ(env["STAR_REPORT_SECONDS"], "0.5");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1") << "a 500m limit: one thread";
    EXPECT_EQ(env["STAR_JOB"], "team/fm");
    EXPECT_NE(env["STAR_JOB_TOKEN"].find("fm-token"), std::string::npos);
    EXPECT_NE(env["STAR_LISTEN_HOST"].find("status.podIP"), std::string::npos);
    EXPECT_NE(env["STAR_NODE_NAME"].find("spec.nodeName"), std::string::npos);
    EXPECT_EQ(env.count("STAR_HOST_STORE"), i == 0 ? 1u : 0u);
  }
}

// A pod that only carries the job's label (anyone who may create pods in the namespace
// can set it) is not the job's: no controller reference to the job's uid.
TEST(DesiredPods, WorkersGetTorchrunsEnvironmentAndTheTrainingSettings) {
  json job = Job(3);
  job["spec"]["training"]["maxIterations"] = 500;
  const auto pods = Pods(job);
  ASSERT_EQ(pods.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    auto env = Env(pods[i]);
    EXPECT_EQ(env["RANK"], std::to_string(i));
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_RANK"], "0");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "1");
    EXPECT_EQ(env["NODE_RANK"], std::to_string(i));
    EXPECT_EQ(env["MASTER_ADDR"], "fm-worker-0.fm.team.svc") << "worker 0 in the headless Service";
    EXPECT_EQ(env["MASTER_PORT"], std::to_string(kMasterPort));
    EXPECT_NE(env["MASTER_PORT"], std::to_string(kStorePort)) << "STAR's store holds that port";
    EXPECT_EQ(env["STAR_GLOBAL_BATCH"], "64");
    EXPECT_EQ(env["STAR_MAX_ITERATIONS"], "500");
    EXPECT_EQ(env["STAR_AMP_DTYPE"], "bfloat16");
  }
  job["spec"]["training"].erase("maxIterations");
  EXPECT_EQ(Env(Pods(job)[0]).count("STAR_MAX_ITERATIONS"), 0u) << "no limit, no variable";
}

// Two data-parallel replicas of a 2-stage pipeline: every pod learns the shape, and its
// stage is RANK modulo the stages. The shape is part of the pods' template hash.
TEST(DesiredPods, APipelinesPodsGetItsShape) {
  json job = Job(4);
  const auto hash = [](const json& j) { return PodTemplateHash(api::TrainingJobFromJson(j)->spec); };
  const std::string data_parallel = hash(job);
  EXPECT_EQ(Env(Pods(job)[0]).count("STAR_PIPELINE_STAGES"), 0u) << "one stage: no variables";
  job["spec"]["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 8}, {"maxInFlightPerStage", 3}};
  const auto pods = Pods(job);
  ASSERT_EQ(pods.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    auto env = Env(pods[i]);
    EXPECT_EQ(env["RANK"], std::to_string(i));
    EXPECT_EQ(env["STAR_PIPELINE_STAGES"], "2");
    EXPECT_EQ(env["STAR_MICRO_BATCHES"], "8");
    EXPECT_EQ(env["STAR_MAX_IN_FLIGHT"], "3");
  }
  EXPECT_NE(hash(job), data_parallel);
}

TEST(DesiredPods, ProcsPerPodMakesEachPodATorchrunNodeOfThatManyRanks) {
  json job = Job(2);
  job["spec"]["workers"]["procsPerPod"] = 4;
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4;
  const auto pods = Pods(job);
  ASSERT_EQ(pods.size(), 2u) << "pods, not processes";
  for (int i = 0; i < 2; ++i) {
    auto env = Env(pods[i]);
    EXPECT_EQ(env.count("STAR_RANK"), 0u) << "each process takes RANK from its launcher";
    EXPECT_EQ(env["STAR_WORLD_SIZE"], "8");
    EXPECT_EQ(env["WORLD_SIZE"], "8");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["NODE_RANK"], std::to_string(i));
    EXPECT_EQ(env["RANK"], std::to_string(4 * i)) << "the pod's first rank";
  }
  auto parsed = api::TrainingJobFromJson(job);
  ASSERT_TRUE(parsed.ok());
  api::TrainingJobSpec one = parsed->spec;
  one.workers.procs_per_pod = 1;
  EXPECT_NE(PodTemplateHash(parsed->spec), PodTemplateHash(one)) << "a change restarts the gang";
}

TEST(Ownership, OnlyTheControllerReferenceToTheJobsUidMakesAPodTheJobs) {
  const json pod = Pods(Job())[0];
  EXPECT_TRUE(IsControlledBy(pod, "u-1"));
  EXPECT_TRUE(IsStarPod(pod));
  EXPECT_FALSE(IsControlledBy(pod, "u-2"));  // a job of the same name made again
  EXPECT_FALSE(IsControlledBy(pod, ""));

  json squatter = pod;
  squatter["metadata"].erase("ownerReferences");
  EXPECT_FALSE(IsControlledBy(squatter, "u-1"));
  EXPECT_FALSE(IsStarPod(squatter));

  json not_controller = pod;
  not_controller["metadata"]["ownerReferences"][0]["controller"] = false;
  EXPECT_FALSE(IsControlledBy(not_controller, "u-1"));

  json other_kind = pod;
  other_kind["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet";
  other_kind["metadata"]["ownerReferences"][0]["apiVersion"] = "apps/v1";
  EXPECT_FALSE(IsControlledBy(other_kind, "u-1"));
  EXPECT_FALSE(IsStarPod(other_kind));

  json other_group = pod;
  other_group["metadata"]["ownerReferences"][0]["apiVersion"] = "evil.dev/v1";
  EXPECT_FALSE(IsControlledBy(other_group, "u-1"));

  json relabelled = pod;  // controlled by job fm, labelled as another job
  relabelled["metadata"]["labels"][kJobLabel] = "other";
  EXPECT_FALSE(IsStarPod(relabelled));

  const json secret = DesiredSecret(Job(), "t0k3n");
  EXPECT_TRUE(IsControlledBy(secret, "u-1"));
  json foreign_secret = secret;
  foreign_secret["metadata"].erase("ownerReferences");
  EXPECT_FALSE(IsControlledBy(foreign_secret, "u-1"));
}

TEST(DesiredPods, ABigJobReportsLessOftenSoThatItSendsAbout1024ReportsASecond) {
  json job = Job(1024, 1024);  // the most pods a job has: 2048
  job["spec"]["training"]["globalBatchSize"] = 65536;
  EXPECT_EQ(Env(Pods(job)[0])["STAR_REPORT_SECONDS"], "2");
  job = Job(512);
  job["spec"]["training"]["globalBatchSize"] = 65536;
  EXPECT_EQ(Env(Pods(job)[0])["STAR_REPORT_SECONDS"], "0.5");
}

TEST(DesiredPods, ThreadsFollowTheCpuLimitUnlessTheContainerSetsThem) {
  json job = Job(1);
  json& c = job["spec"]["workers"]["template"]["spec"]["containers"][0];
  c["resources"]["limits"]["cpu"] = "2500m";
  EXPECT_EQ(Env(Pods(job)[0])["OMP_NUM_THREADS"], "3") << "rounded up to whole cores";
  c["resources"]["limits"]["cpu"] = 2;
  EXPECT_EQ(Env(Pods(job)[0])["OMP_NUM_THREADS"], "2");
  c["env"].push_back({{"name", "OMP_NUM_THREADS"}, {"value", "8"}});
  EXPECT_EQ(Env(Pods(job)[0])["OMP_NUM_THREADS"], "8") << "the template's own value stays";
  c["env"].erase(c["env"].size() - 1);
  c["resources"].erase("limits");
  EXPECT_EQ(Env(Pods(job)[0]).count("OMP_NUM_THREADS"), 0u) << "no limit, no cap";
}

TEST(DesiredPods, AReportCaReachesEveryPodAsStarReportCaBesideTheHttpsUrl) {
  const json job = Job(2, 1);
  auto parsed = api::TrainingJobFromJson(job);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::string ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  auto pods = DesiredPods(job, parsed->spec, {"https://op.star.svc:8443", ca});
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 3u);
  for (const json& p : *pods) {
    auto env = Env(p);
    EXPECT_EQ(env["STAR_CONTROLLER_URL"], "https://op.star.svc:8443") << p["metadata"]["name"];
    EXPECT_EQ(env["STAR_REPORT_CA"], ca) << p["metadata"]["name"];
  }
}

TEST(DesiredPods, WithoutAReportCaPodsGetNoStarReportCa) {
  json job = Job(2);
  // A template's own STAR_REPORT_CA is the user's: kept when the operator has none.
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["env"].push_back(
      {{"name", "STAR_REPORT_CA"}, {"value", "/etc/ca.pem"}});
  auto parsed = api::TrainingJobFromJson(job);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto pods = DesiredPods(job, parsed->spec, {"http://op:8443"});
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(Env((*pods)[0])["STAR_REPORT_CA"], "/etc/ca.pem");
  const auto plain = Pods(Job(2));
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(Env(plain[0]).count("STAR_REPORT_CA"), 0u);
  EXPECT_EQ(Env(plain[1]).count("STAR_REPORT_CA"), 0u);
}

TEST(DesiredPods, AWorkersFirstContainerServesItsMetricsOnTheNamedPort) {
  json job = Job(2, 1);
  json sidecar = {{"name", "sidecar"}, {"image", "s"}};
  job["spec"]["workers"]["template"]["spec"]["containers"].push_back(sidecar);
  const auto pods = Pods(job);
  ASSERT_EQ(pods.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Env(pods[i])["STAR_METRICS_ADDRESS"], "0.0.0.0:9400");
    const json& ports = pods[i]["spec"]["containers"][0]["ports"];
    ASSERT_EQ(ports.size(), 1u) << ports;
    EXPECT_EQ(ports[0]["name"], "star-metrics");
    EXPECT_EQ(ports[0]["containerPort"], 9400);
    EXPECT_FALSE(pods[i]["spec"]["containers"][1].contains("ports")) << "one endpoint per pod";
  }
  EXPECT_EQ(Env(pods[2]).count("STAR_METRICS_ADDRESS"), 0u) << "parameter servers are no workers";

  // What the template sets is the user's.
  json& c = job["spec"]["workers"]["template"]["spec"]["containers"][0];
  c["env"].push_back({{"name", "STAR_METRICS_ADDRESS"}, {"value", "0.0.0.0:9999"}});
  c["ports"] = {{{"name", "star-metrics"}, {"containerPort", 9999}}};
  const auto own = Pods(job);
  ASSERT_EQ(own.size(), 3u);
  EXPECT_EQ(Env(own[0])["STAR_METRICS_ADDRESS"], "0.0.0.0:9999");
  EXPECT_EQ(own[0]["spec"]["containers"][0]["ports"].size(), 1u);
}

TEST(DesiredPods, ParameterServerZeroHostsTheStore) {
  const auto pods = Pods(Job(2, 1));
  ASSERT_EQ(pods.size(), 3u);
  EXPECT_EQ(pods[2]["metadata"]["name"], "fm-ps-0");
  EXPECT_EQ(pods[2]["metadata"]["labels"]["star.dev/role"], "ps");
  EXPECT_EQ(Env(pods[2])["STAR_HOST_STORE"], "1");
  EXPECT_EQ(Env(pods[0]).count("STAR_HOST_STORE"), 0u);
  EXPECT_EQ(Env(pods[0])["STAR_STORE_URL"], "http://fm-ps-0.fm.team.svc:29500");
  EXPECT_EQ(Env(pods[0])["STAR_PARAMETER_SERVERS"], "1");
}

TEST(DesiredPods, ATemplateWithoutContainersIsRefusedNamingTheField) {
  json job = Job(2);
  auto spec = api::TrainingJobFromJson(job);
  ASSERT_TRUE(spec.ok());
  spec->spec.workers.pod_template.reset();
  auto pods = DesiredPods(job, spec->spec, {});
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("spec.workers.template"), std::string::npos);
}

TEST(DesiredObjects, ServiceIsHeadlessAndSecretRoundTripsTheToken) {
  const json svc = DesiredService(Job());
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["selector"]["star.dev/job"], "fm");
  for (const std::string token : {"a", "ab", "abc", "0123456789abcdef0123456789abcdef"}) {
    const json secret = DesiredSecret(Job(), token);
    EXPECT_EQ(secret["metadata"]["name"], "fm-token");
    EXPECT_EQ(SecretToken(secret), token);
  }
  EXPECT_EQ(SecretToken(json{{"data", {{"token", "!!"}}}}), std::nullopt);
  EXPECT_EQ(SecretToken(json::object()), std::nullopt);
}

TEST(IsJobPodName, MatchesOnlyTheJobsOwnNames) {
  EXPECT_TRUE(IsJobPodName("a", "a-worker-0"));
  EXPECT_TRUE(IsJobPodName("a", "a-ps-12"));
  EXPECT_FALSE(IsJobPodName("a", "a-worker-"));
  EXPECT_FALSE(IsJobPodName("a", "a-worker-1-worker-0"));
  EXPECT_FALSE(IsJobPodName("a", "ab-worker-0"));
}

json Pod(const std::string& phase) { return {{"status", {{"phase", phase}}}}; }

PhaseInput Input(api::JobPhase current, std::map<std::string, json> observed) {
  PhaseInput in;
  in.current = current;
  in.desired = {"j-worker-0", "j-worker-1"};
  in.observed = std::move(observed);
  return in;
}

TEST(JobOfPodName, IsTheInverseOfThePodNames) {
  EXPECT_EQ(JobOfPodName(WorkerPodName("fm", 12)), "fm");
  EXPECT_EQ(JobOfPodName(PsPodName("a-worker-1", 0)), "a-worker-1");
  EXPECT_EQ(JobOfPodName(WorkerPodName("b-ps-2", 3)), "b-ps-2");
  EXPECT_EQ(JobOfPodName("fm-worker-"), std::nullopt);
  EXPECT_EQ(JobOfPodName("fm-worker-x"), std::nullopt);
  EXPECT_EQ(JobOfPodName("-worker-1"), std::nullopt);
  EXPECT_EQ(JobOfPodName("nginx"), std::nullopt);
}

TEST(WorkerRank, IsTheRankLabelOfWorkersOnly) {
  const auto pods = Pods(Job(3, 1));
  EXPECT_EQ(WorkerRank(pods[2]), 2);
  EXPECT_EQ(WorkerRank(pods[3]), -1) << "a parameter server";
  json bad = pods[0];
  bad["metadata"]["labels"][kRankLabel] = "x1";
  EXPECT_EQ(WorkerRank(bad), -1);
  bad["metadata"]["labels"][kRankLabel] = 7;
  EXPECT_EQ(WorkerRank(bad), -1);
  EXPECT_EQ(WorkerRank(json::object()), -1);
}

TEST(DecidePhase, NoPodsCreatesThemAllRunningPodsMakeRunning) {
  auto d = DecidePhase(Input(api::JobPhase::kPending, {}));
  EXPECT_EQ(d.phase, api::JobPhase::kCreated);
  EXPECT_EQ(d.action, JobPodsAction::kCreateMissing);
  d = DecidePhase(Input(api::JobPhase::kCreated, {{"j-worker-0", Pod("Running")}, {"j-worker-1", Pod("Pending")}}));
  EXPECT_EQ(d.phase, api::JobPhase::kCreated);
  EXPECT_EQ(d.action, JobPodsAction::kNone);
  d = DecidePhase(Input(api::JobPhase::kCreated, {{"j-worker-0", Pod("Running")}, {"j-worker-1", Pod("Running")}}));
  EXPECT_EQ(d.phase, api::JobPhase::kRunning);
  EXPECT_EQ(d.reason, "AllPodsRunning");
}

TEST(DecidePhase, AFailedPodRestartsTheGangUntilTheLimitThenFails) {
  auto in = Input(api::JobPhase::kRunning, {{"j-worker-0", Pod("Running")}, {"j-worker-1", Pod("Failed")}});
  in.max_restarts = 1;
  auto d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kRestarting);
  EXPECT_EQ(d.restarts, 1);
  EXPECT_EQ(d.action, JobPodsAction::kDeleteAll);
  EXPECT_NE(d.message.find("j-worker-1"), std::string::npos);

  // Restarting with pods left: delete them, do not count again.
  in.current = api::JobPhase::kRestarting;
  in.restarts = 1;
  d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kRestarting);
  EXPECT_EQ(d.restarts, 1);
  EXPECT_EQ(d.action, JobPodsAction::kDeleteAll);

  // All gone, backoff pending: wait; elapsed: create.
  in.observed.clear();
  in.backoff_elapsed = false;
  EXPECT_EQ(DecidePhase(in).action, JobPodsAction::kNone);
  in.backoff_elapsed = true;
  d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kCreated);
  EXPECT_EQ(d.action, JobPodsAction::kCreateMissing);

  // A second failure exceeds max_restarts = 1.
  in = Input(api::JobPhase::kRunning, {{"j-worker-0", Pod("Failed")}, {"j-worker-1", Pod("Running")}});
  in.restarts = 1;
  in.max_restarts = 1;
  d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kFailed);
  EXPECT_EQ(d.reason, "BackoffLimitExceeded");
  EXPECT_EQ(d.action, JobPodsAction::kDeleteAll);
}

TEST(DecidePhase, OutdatedPodsRestartTheGangWithoutCountingARestart) {
  auto in = Input(api::JobPhase::kRunning, {{"j-worker-0", Pod("Running")}, {"j-worker-1", Pod("Running")}});
  in.outdated = true;
  in.max_restarts = 0;
  auto d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kRestarting);
  EXPECT_EQ(d.reason, "SpecChanged");
  EXPECT_EQ(d.action, JobPodsAction::kDeleteAll);
  EXPECT_EQ(d.restarts, 0) << "a spec change is no failure";
  in.current = api::JobPhase::kSucceeded;
  EXPECT_EQ(DecidePhase(in).action, JobPodsAction::kNone) << "a finished job stays finished";
}

TEST(DecidePhase, SuspendedDeletesThePodsAndResumedCreatesThemAgain) {
  auto in = Input(api::JobPhase::kRunning, {{"j-worker-0", Pod("Running")}, {"j-worker-1", Pod("Running")}});
  in.suspended = true;
  auto d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kSuspended);
  EXPECT_EQ(d.reason, "JobSuspended");
  EXPECT_EQ(d.action, JobPodsAction::kDeleteAll);
  EXPECT_EQ(d.restarts, in.restarts) << "a suspend is no restart";

  in = Input(api::JobPhase::kSuspended, {});
  in.suspended = true;
  d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kSuspended);
  EXPECT_EQ(d.action, JobPodsAction::kNone) << "no pods while suspended";

  in.suspended = false;
  d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kCreated);
  EXPECT_EQ(d.action, JobPodsAction::kCreateMissing);

  in = Input(api::JobPhase::kPending, {});
  in.suspended = true;
  EXPECT_EQ(DecidePhase(in).action, JobPodsAction::kNone) << "created suspended: never starts";
  in = Input(api::JobPhase::kSucceeded, {});
  in.suspended = true;
  EXPECT_EQ(DecidePhase(in).phase, api::JobPhase::kSucceeded) << "a finished job stays finished";
}

TEST(DecidePhase, ADeadlineExceededFailsTheJobAndDeletesItsPods) {
  auto in = Input(api::JobPhase::kRunning, {{"j-worker-0", Pod("Running")}, {"j-worker-1", Pod("Running")}});
  in.deadline_exceeded = "ran 61 s of 60";
  auto d = DecidePhase(in);
  EXPECT_EQ(d.phase, api::JobPhase::kFailed);
  EXPECT_EQ(d.reason, "DeadlineExceeded");
  EXPECT_EQ(d.message, "ran 61 s of 60");
  EXPECT_EQ(d.action, JobPodsAction::kDeleteAll);
}

TEST(Conditions, SuspendedIsAConditionThatTurnsFalseOnResume) {
  std::vector<api::Condition> c;
  PhaseDecision d;
  d.phase = api::JobPhase::kSuspended;
  d.reason = "JobSuspended";
  SetPhaseConditions(&c, d, "2024-01-01T00:00:00Z", 1);
  ASSERT_EQ(c.size(), 1u) << "no Created condition for a suspended job";
  EXPECT_EQ(c[0].type, "Suspended");
  EXPECT_EQ(c[0].status, "True");
  d.phase = api::JobPhase::kCreated;
  d.reason = "PodsCreated";
  SetPhaseConditions(&c, d, "2024-01-01T00:01:00Z", 1);
  auto it = std::find_if(c.begin(), c.end(), [](const api::Condition& x) { return x.type == "Suspended"; });
  ASSERT_NE(it, c.end());
  EXPECT_EQ(it->status, "False");
}

TEST(PodTemplateHash, FollowsTheTemplateAndReplicasOnly) {
  auto spec = [](const json& job) { return api::TrainingJobFromJson(job)->spec; };
  const std::string base = PodTemplateHash(spec(Job(2)));
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(PodTemplateHash(spec(Job(2))), base);
  EXPECT_NE(PodTemplateHash(spec(Job(3))), base) << "replicas";
  EXPECT_NE(PodTemplateHash(spec(Job(2, 1))), base) << "parameter servers";
  json image = Job(2);
  image["spec"]["workers"]["template"]["spec"]["containers"][0]["image"] = "img:2";
  EXPECT_NE(PodTemplateHash(spec(image)), base) << "template";
  json target = Job(2);
  target["spec"]["training"]["targetAccuracy"] = 0.8;
  EXPECT_EQ(PodTemplateHash(spec(target)), base) << "training settings do not touch the pods";
  for (const json& pod : Pods(Job(2))) EXPECT_EQ(pod["metadata"]["annotations"][kPodTemplateHashAnnotation], base);
}

// Running pods carry the hash: a changed value would restart every job on an upgrade.
TEST(PodTemplateHash, KeepsTheValueRunningPodsCarry) {
  EXPECT_EQ(PodTemplateHash(api::TrainingJobFromJson(Job(2))->spec), "edc14a467bb70eab");
}

TEST(DecidePhase, AllWorkersSucceededIsTerminal) {
  auto d = DecidePhase(Input(api::JobPhase::kRunning, {{"j-worker-0", Pod("Succeeded")}, {"j-worker-1", Pod("Succeeded")}}));
  EXPECT_EQ(d.phase, api::JobPhase::kSucceeded);
  d = DecidePhase(Input(api::JobPhase::kSucceeded, {}));
  EXPECT_EQ(d.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(d.action, JobPodsAction::kNone) << "a finished job's pods are not recreated";
}

TEST(Conditions, TransitionTimeChangesOnlyWithTheStatus) {
  std::vector<api::Condition> c;
  PhaseDecision d{api::JobPhase::kRunning, "AllPodsRunning", "2 pods running", JobPodsAction::kNone, 0};
  SetPhaseConditions(&c, d, "2025-01-01T00:00:00Z", 1);
  SetPhaseConditions(&c, d, "2025-01-01T00:00:09Z", 1);
  auto find = [&](const std::string& t) {
    for (auto& x : c) if (x.type == t) return x;
    return api::Condition{};
  };
  EXPECT_EQ(find("Created").status, "True");
  EXPECT_EQ(find("Running").status, "True");
  EXPECT_EQ(find("Running").last_transition_time, "2025-01-01T00:00:00Z");
  d.phase = api::JobPhase::kRestarting;
  d.reason = "PodFailed";
  SetPhaseConditions(&c, d, "2025-01-01T00:00:10Z", 1);
  EXPECT_EQ(find("Running").status, "False");
  EXPECT_EQ(find("Running").last_transition_time, "2025-01-01T00:00:10Z");
  EXPECT_EQ(find("Restarting").status, "True");
  EXPECT_EQ(find("Restarting").reason, "PodFailed");
}

TEST(RestartBackoff, DoublesAndIsCapped) {
  EXPECT_EQ(RestartBackoffMillis(0, 1000), 0);
  EXPECT_EQ(RestartBackoffMillis(1, 1000), 1000);
  EXPECT_EQ(RestartBackoffMillis(3, 1000), 4000);
  EXPECT_EQ(RestartBackoffMillis(40, 1000), 300000);
}

json BoundPod(const std::string& name, const std::string& node, json resources) {
  return {{"metadata", {{"name", name}, {"namespace", "team"}, {"uid", "uid-" + name}}},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "t"}, {"resources", resources}}}}}},
          {"status", {{"phase", "Running"}}}};
}

TEST(NodeAllocations, QuotaIsTheLimitAndGuaranteedWhenRequestEqualsLimit) {
  auto by_node = JobAllocationsByNode({
      BoundPod("fm-worker-0", "n1", {{"requests", {{"cpu", "500m"}}}, {"limits", {{"cpu", "500m"}}}}),
      BoundPod("fm-worker-1", "n1", {{"requests", {{"cpu", "250m"}}}, {"limits", {{"cpu", "1"}}}}),
      BoundPod("fm-worker-2", "n2", json::object()),
      BoundPod("fm-worker-3", "", json::object()),
  });
  ASSERT_EQ(by_node.size(), 2u);
  ASSERT_EQ(by_node["n1"].size(), 2u);
  EXPECT_EQ(by_node["n1"][0].cpu.quota_millicores, 500);
  EXPECT_TRUE(by_node["n1"][0].guaranteed);
  EXPECT_EQ(by_node["n1"][1].cpu.quota_millicores, 1000);
  EXPECT_FALSE(by_node["n1"][1].guaranteed);
  EXPECT_EQ(by_node["n2"][0].cpu.quota_millicores, 0) << "no limit = unlimited";
  EXPECT_EQ(by_node["n2"][0].uid, "uid-fm-worker-2");
}

TEST(NodeAllocations, BandwidthIsWhatThePodsAnnotationsDeclare) {
  json declared = BoundPod("fm-worker-0", "n1", json::object());
  declared["metadata"]["annotations"] = {{"kubernetes.io/egress-bandwidth", "800M"},
                                         {"kubernetes.io/ingress-bandwidth", "1G"}};
  json edited = BoundPod("fm-worker-1", "n1", json::object());
  edited["metadata"]["annotations"] = {{"kubernetes.io/egress-bandwidth", "lots"}};
  auto by_node = JobAllocationsByNode({declared, edited, BoundPod("fm-worker-2", "n1", json::object())});
  ASSERT_EQ(by_node["n1"].size(), 3u);
  EXPECT_EQ(by_node["n1"][0].network.egress_bits_per_second, 800'000'000);
  EXPECT_EQ(by_node["n1"][0].network.ingress_bits_per_second, 1'000'000'000);
  EXPECT_EQ(by_node["n1"][1].network, api::NetworkAllocation{}) << "an unreadable annotation limits nothing";
  EXPECT_EQ(by_node["n1"][2].network, api::NetworkAllocation{});
}

TEST(NodeAllocations, MergeReplacesOnlyThisJobsEntries) {
  api::NodeAllocationSpec current;
  current.pods.push_back({"team", "other-worker-0", "o0", {}, {}, false});
  current.pods.push_back({"team", "fm-worker-9", "old", {}, {}, false});
  current.pods.push_back({"elsewhere", "fm-worker-0", "e0", {}, {}, false});
  api::PodAllocation mine{"team", "fm-worker-0", "new", {700, 100}, {}, true};
  auto merged = MergeJobAllocations(current, "team", "fm", {mine});
  ASSERT_EQ(merged.pods.size(), 3u);
  EXPECT_EQ(merged.pods[0].name, "other-worker-0");
  EXPECT_EQ(merged.pods[1].namespace_, "elsewhere");
  EXPECT_EQ(merged.pods[2].uid, "new");
  EXPECT_TRUE(MergeJobAllocations(merged, "team", "fm", {}).pods.size() == 2u);
}

}  // namespace
}  // namespace star::op
