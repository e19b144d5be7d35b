#include "star/core/api/training_job.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace star::api {
namespace {

using nlohmann::json;

// A realistic job: Fashion-MNIST on 4 all-reduce workers, every field spelled out
// (defaults included), with a status, as the operator would write it.
json FmnistJob() {
  return json::parse(R"({
    "apiVersion": "star.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {
      "name": "fmnist",
      "namespace": "ml",
      "uid": "6b1e7c2a-3f0d-4f3e-9a55-0f1c2d3e4f50",
      "generation": 3,
      "resourceVersion": "41877",
      "labels": {"app": "fmnist"},
      "annotations": {"star.dev/owner": "team-a"}
    },
    "spec": {
      "suspend": false,
      "architecture": "AllReduce",
      "workers": {
        "replicas": 4,
        "procsPerPod": 1,
        "template": {
          "metadata": {"labels": {"app": "fmnist"}},
          "spec": {
            "restartPolicy": "Never",
            "containers": [{
              "name": "trainer",
              "image": "ghcr.io/star/fmnist:0.1",
              "command": ["star-run"],
              "args": ["--", "fmnist-train", "--epochs", "5"],
              "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
              "env": [{"name": "OMP_NUM_THREADS", "value": "2"}]
            }, {
              "name": "sidecar",
              "image": "busybox"
            }]
          }
        }
      },
      "training": {"globalBatchSize": 256, "targetAccuracy": 0.88, "maxIterations": 20000},
      "synchronization": {"policy": "Auto", "selector": "Heuristic", "minK": 2},
      "mitigation": {
        "mode": "Mitigate",
        "detection": {"rule": "MAD", "window": 20, "threshold": 3.0},
        "amp": {"enabled": true, "dtype": "bfloat16"},
        "batchAdaptation": {"enabled": true, "minLocalBatch": 8},
        "resourceReallocation": {"enabled": true}
      },
      "runPolicy": {"backoffLimit": 3, "activeDeadlineSeconds": 3600,
                    "ttlSecondsAfterFinished": 600, "schedulerName": "volcano"},
      "parallelism": {"pipelineStages": 1, "microBatches": 1}
    },
    "status": {
      "phase": "Running",
      "conditions": [{"type": "Ready", "status": "True", "reason": "WorkersRunning",
                      "message": "4/4 workers running",
                      "lastTransitionTime": "2024-05-01T12:00:00Z", "observedGeneration": 3}],
      "observedGeneration": 3,
      "syncMode": "fixed_k",
      "k": 3,
      "groups": [],
      "stragglers": [{"worker": 2, "node": "node-b", "cause": "compute", "kind": "dynamic",
                      "slowdown": 1.8, "since": "2024-05-01T12:03:04.5+02:00"}],
      "workers": [{"batch": 72, "amp": false}, {"batch": 72, "amp": false},
                  {"batch": 40, "amp": true}, {"batch": 72, "amp": false}],
      "iteration": 1234,
      "accuracy": 0.71,
      "ttaSeconds": 298.25,
      "estimatedTTASeconds": 312.5,
      "decisionEpoch": 2,
      "decisionApplyAtIteration": 1200,
      "startTime": "2024-05-01T11:58:00Z"
    }
  })");
}

// The smallest valid document.
json MinimalJob() {
  return json::parse(R"({
    "metadata": {"name": "tiny"},
    "spec": {"workers": {"replicas": 2},
             "training": {"globalBatchSize": 64, "targetAccuracy": 0.5}}
  })");
}

TEST(TrainingJob, RealisticFmnistJobDecodes) {
  auto job = TrainingJobFromJson(FmnistJob());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->metadata.name, "fmnist");
  EXPECT_EQ(job->metadata.namespace_, "ml");
  EXPECT_EQ(job->metadata.generation, 3);
  EXPECT_EQ(job->metadata.labels.at("app"), "fmnist");
  EXPECT_EQ(job->spec.architecture, Architecture::kAllReduce);
  EXPECT_EQ(job->spec.workers.replicas, 4);
  EXPECT_FALSE(job->spec.parameter_servers.has_value());
  EXPECT_EQ(job->spec.training.global_batch_size, 256);
  EXPECT_DOUBLE_EQ(job->spec.training.target_accuracy.value_or(-1), 0.88);
  EXPECT_EQ(job->spec.training.max_iterations, 20000);
  EXPECT_EQ(job->spec.synchronization.min_k, 2);
  EXPECT_EQ(job->spec.mitigation.detection.threshold, 3.0);
  EXPECT_EQ(job->spec.mitigation.batch_adaptation.min_local_batch, 8);
  ASSERT_TRUE(job->status.has_value());
  EXPECT_EQ(job->status->phase, JobPhase::kRunning);
  EXPECT_EQ(job->status->sync_mode, SyncMode::kFixedK);
  EXPECT_EQ(job->status->k, 3);
  ASSERT_EQ(job->status->stragglers.size(), 1u);
  EXPECT_EQ(job->status->stragglers[0].node, "node-b");
  EXPECT_EQ(job->status->stragglers[0].cause, StragglerCause::kCompute);
  EXPECT_EQ(job->status->workers[2].batch, 40);
  EXPECT_TRUE(job->status->workers[2].amp);
  EXPECT_EQ(job->status->conditions[0].type, "Ready");
}

TEST(TrainingJob, FullDocumentRoundTripsExactly) {
  const json doc = FmnistJob();
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(ToJson(*job), doc) << ToJson(*job).dump(2);
}

TEST(TrainingJob, ParameterServerDocumentRoundTripsExactly) {
  json doc = FmnistJob();
  doc["spec"]["architecture"] = "ParameterServer";
  doc["spec"]["parameterServers"] =
      json::parse(R"({"replicas": 2, "template": {"spec": {"containers": [{"name": "ps"}]}}})");
  doc["spec"]["synchronization"]["policy"] = "ASGD";
  doc["spec"]["mitigation"]["detection"]["rule"] = "ChangePoint";
  doc["spec"]["mitigation"]["amp"] = {{"enabled", false}, {"dtype", "bfloat16"}};
  doc["spec"]["mitigation"]["mode"] = "Observe";
  doc["spec"]["suspend"] = true;
  doc["status"]["syncMode"] = "asgd";
  doc["status"]["groups"] = {{0, 1}, {2, 3}};
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec.parameter_servers->replicas, 2);
  EXPECT_EQ(job->spec.synchronization.policy, SyncPolicy::kAsgd);
  EXPECT_EQ(job->spec.mitigation.mode, MitigationMode::kObserve);
  EXPECT_TRUE(job->spec.suspend);
  EXPECT_EQ(ToJson(*job), doc);
}

// Two data-parallel replicas of a 2-stage pipeline: ranks 0, 1 are replica 0's stages.
TEST(TrainingJob, PipelineDocumentRoundTripsExactly) {
  json doc = FmnistJob();
  doc["spec"]["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 8}, {"maxInFlightPerStage", 3}};
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  const ParallelismSpec& p = job->spec.parallelism;
  EXPECT_TRUE(IsPipeline(p));
  EXPECT_EQ(p.micro_batches, 8);
  EXPECT_EQ(p.max_in_flight_per_stage, 3);
  EXPECT_EQ(StageOf(3, p), 1);
  EXPECT_EQ(ReplicaOf(3, p), 1);
  EXPECT_EQ(ToJson(*job), doc);
  doc["spec"].erase("parallelism");
  auto plain = TrainingJobFromJson(doc);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->spec.parallelism, ParallelismSpec{}) << "absent: one stage";
}

TEST(TrainingJob, ObserveModeTakesEveryMitigationOff) {
  auto job = TrainingJobFromJson(FmnistJob());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(MitigationsInForce(job->spec), job->spec) << "Mitigate keeps the spec";
  job->spec.mitigation.mode = MitigationMode::kObserve;
  const TrainingJobSpec s = MitigationsInForce(job->spec);
  EXPECT_EQ(s.synchronization.policy, SyncPolicy::kSsgd);
  EXPECT_FALSE(s.mitigation.amp.enabled);
  EXPECT_FALSE(s.mitigation.batch_adaptation.enabled);
  EXPECT_FALSE(s.mitigation.resource_reallocation.enabled);
  EXPECT_EQ(s.mitigation.detection, job->spec.mitigation.detection) << "detection stays";
  job->spec.synchronization.policy = SyncPolicy::kFixedK;
  EXPECT_EQ(MitigationsInForce(job->spec).synchronization.policy, SyncPolicy::kFixedK)
      << "a pinned policy is the user's own";
}

TEST(TrainingJob, APipelineKeepsAutoForItsScheduleAndNothingElse) {
  auto job = TrainingJobFromJson(FmnistJob());
  ASSERT_TRUE(job.ok()) << job.status();
  job->spec.parallelism = {2, 4, std::nullopt};
  job->spec.synchronization.policy = SyncPolicy::kAuto;
  const TrainingJobSpec s = MitigationsInForce(job->spec);
  EXPECT_EQ(s.synchronization.policy, SyncPolicy::kAuto) << "Auto adapts the schedule";
  EXPECT_FALSE(s.mitigation.amp.enabled);
  EXPECT_FALSE(s.mitigation.batch_adaptation.enabled);
  EXPECT_FALSE(s.mitigation.resource_reallocation.enabled);
  job->spec.synchronization.policy = SyncPolicy::kGroups;
  EXPECT_EQ(MitigationsInForce(job->spec).synchronization.policy, SyncPolicy::kSsgd)
      << "a pinned mode would split the stages";
  job->spec.synchronization.policy = SyncPolicy::kAuto;
  job->spec.mitigation.mode = MitigationMode::kObserve;
  EXPECT_EQ(MitigationsInForce(job->spec).synchronization.policy, SyncPolicy::kSsgd) << "observed only";
}

TEST(TrainingJob, WorldSizeCountsProcessesPerPod) {
  auto job = TrainingJobFromJson(FmnistJob());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(WorldSize(job->spec), 4);
  job->spec.workers.procs_per_pod = 8;
  EXPECT_EQ(WorldSize(job->spec), 32);
}

TEST(TrainingJob, StructWithEveryFieldSetRoundTrips) {
  TrainingJob job;
  job.metadata = {"resnet", "research", "uid-1", 7, "99", {{"a", "b"}}, {{"c", "d"}}};
  TrainingJobSpec& s = job.spec;
  s.architecture = Architecture::kParameterServer;
  s.workers = {8, json::parse(R"({"spec": {"containers": [{"name": "w", "image": "img"}]}})")};
  s.parameter_servers = ReplicaSpec{1, json::parse(R"({"metadata": {"name": "x"}})")};
  s.training = {1024, 0.93, 100000};
  s.synchronization = {SyncPolicy::kGroups, ModeSelector::kMl, 4};
  s.mitigation.detection = {DetectionRule::kRelativeScore, 50, 0.75};
  s.mitigation.amp = {false, AmpDtype::kBfloat16};
  s.mitigation.mode = MitigationMode::kObserve;
  s.suspend = true;
  s.workers.procs_per_pod = 2;
  s.run_policy = {5, 60, 0, "volcano"};
  s.mitigation.batch_adaptation = {false, 16};
  s.mitigation.resource_reallocation = {false};
  TrainingJobStatus st;
  st.phase = JobPhase::kRestarting;
  st.conditions = {{"Ready", "False", "Restarting", "worker 3 died", "2024-01-02T03:04:05Z", 7},
                   {"Degraded", "Unknown", "", "", "", 0}};
  st.observed_generation = 7;
  st.sync_mode = SyncMode::kGroups;
  st.k = 4;
  st.groups = {{0, 1, 2, 3}, {4, 5}, {6, 7}};
  st.stragglers = {{6, "n1", StragglerCause::kCommunication, StragglerKind::kStatic, 2.5,
                    "2024-01-02T03:04:05Z"},
                   {7, "", StragglerCause::kCompute, StragglerKind::kDynamic, 1.25, ""}};
  st.workers = {{128, true}, {128, false}};
  st.iteration = 42;
  st.accuracy = 0.5;
  st.tta_seconds = 9.5;
  st.estimated_tta_seconds = 10.25;
  st.decision_epoch = 3;
  st.decision_apply_at_iteration = 40;
  st.pipeline = PipelineScheduleStatus{{8, 8, 2, 1}, 0.169, 1};
  job.status = st;
  ASSERT_TRUE(Validate(job.spec).ok()) << Validate(job.spec);

  auto back = TrainingJobFromJson(ToJson(job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, job);
  auto status_back = TrainingJobStatusFromJson(ToJson(st));
  ASSERT_TRUE(status_back.ok()) << status_back.status();
  EXPECT_EQ(*status_back, st);
}

TEST(TrainingJob, TargetAccuracyIsOptionalAndLeftOutWhenAbsent) {
  json doc = MinimalJob();
  doc["spec"]["training"].erase("targetAccuracy");
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->spec.training.target_accuracy.has_value());
  EXPECT_FALSE(ToJson(*job)["spec"]["training"].contains("targetAccuracy"));
  EXPECT_TRUE(Validate(job->spec).ok());
}

TEST(TrainingJob, DefaultsAreAppliedOnDecode) {
  auto job = TrainingJobFromJson(MinimalJob());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->metadata.namespace_, "default");
  EXPECT_EQ(job->metadata.generation, 0);
  const TrainingJobSpec& s = job->spec;
  EXPECT_EQ(s.architecture, Architecture::kAllReduce);
  EXPECT_FALSE(s.workers.pod_template.has_value());
  EXPECT_FALSE(s.training.max_iterations.has_value());
  EXPECT_EQ(s.synchronization.policy, SyncPolicy::kAuto);
  EXPECT_EQ(s.synchronization.selector, ModeSelector::kHeuristic);
  EXPECT_FALSE(s.synchronization.min_k.has_value());
  EXPECT_EQ(s.mitigation.detection.rule, DetectionRule::kMad);
  EXPECT_EQ(s.mitigation.detection.window, 20);
  EXPECT_FALSE(s.mitigation.detection.threshold.has_value());
  EXPECT_TRUE(s.mitigation.amp.enabled);
  EXPECT_EQ(s.mitigation.amp.dtype, AmpDtype::kBfloat16);
  EXPECT_TRUE(s.mitigation.batch_adaptation.enabled);
  EXPECT_EQ(s.mitigation.batch_adaptation.min_local_batch, 1);
  EXPECT_TRUE(s.mitigation.resource_reallocation.enabled);
  EXPECT_EQ(s.mitigation.mode, MitigationMode::kMitigate);
  EXPECT_FALSE(s.suspend);
  EXPECT_EQ(s.workers.procs_per_pod, 1);
  EXPECT_EQ(s.run_policy, RunPolicySpec{});
  EXPECT_FALSE(job->status.has_value());

  // Defaults are written back explicitly; no status appears.
  const json out = ToJson(*job);
  EXPECT_EQ(out["apiVersion"], "star.dev/v1alpha1");
  EXPECT_EQ(out["kind"], "TrainingJob");
  EXPECT_EQ(out["metadata"], json({{"name", "tiny"}, {"namespace", "default"}}));
  EXPECT_EQ(out["spec"]["mitigation"]["detection"], json({{"rule", "MAD"}, {"window", 20}}));
  EXPECT_FALSE(out.contains("status"));
}

TEST(TrainingJob, PartialSectionsKeepDefaultsForMissingFields) {
  json doc = MinimalJob();
  doc["spec"]["mitigation"] = {{"amp", {{"enabled", false}}}, {"detection", {{"window", 5}}}};
  doc["status"] = json::object();
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->spec.mitigation.amp.enabled);
  EXPECT_EQ(job->spec.mitigation.amp.dtype, AmpDtype::kBfloat16);
  EXPECT_EQ(job->spec.mitigation.detection.window, 5);
  EXPECT_EQ(job->spec.mitigation.detection.rule, DetectionRule::kMad);
  ASSERT_TRUE(job->status.has_value());
  EXPECT_EQ(job->status->phase, JobPhase::kPending);
  EXPECT_FALSE(job->status->sync_mode.has_value());
}

struct BadCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string want;  // exact error message
};

class TrainingJobRejects : public testing::TestWithParam<BadCase> {};

TEST_P(TrainingJobRejects, WithExactFieldPath) {
  json doc = FmnistJob();
  GetParam().mutate(doc);
  auto job = TrainingJobFromJson(doc);
  ASSERT_FALSE(job.ok()) << "accepted: " << doc.dump();
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), GetParam().want);
}

const std::string kDnsLabel =
    "must be a DNS-1123 label (at most 63 lowercase letters, digits or '-', starting and ending "
    "with a letter or digit), got ";

json& Spec(json& d) { return d["spec"]; }
json& Container(json& d) { return d["spec"]["workers"]["template"]["spec"]["containers"][0]; }

INSTANTIATE_TEST_SUITE_P(
    Table, TrainingJobRejects,
    testing::Values(
        // document and type meta
        BadCase{"NotAnObject", [](json& d) { d = json::array(); },
                "document: must be an object, got array"},
        BadCase{"WrongApiVersion", [](json& d) { d["apiVersion"] = "star.dev/v1"; },
                "apiVersion: must be \"star.dev/v1alpha1\", got \"star.dev/v1\""},
        BadCase{"WrongKind", [](json& d) { d["kind"] = "Job"; },
                "kind: must be \"TrainingJob\", got \"Job\""},
        BadCase{"KindNotString", [](json& d) { d["kind"] = 3; },
                "kind: must be a string, got integer"},
        BadCase{"UnknownTopLevel", [](json& d) { d["extra"] = 1; }, "extra: unknown field"},
        // metadata
        BadCase{"MissingMetadata", [](json& d) { d.erase("metadata"); },
                "metadata: required field is missing"},
        BadCase{"MissingName", [](json& d) { d["metadata"].erase("name"); },
                "metadata.name: required field is missing"},
        BadCase{"NameNotDnsLabel", [](json& d) { d["metadata"]["name"] = "FMNIST_job"; },
                "metadata.name: " + kDnsLabel + "\"FMNIST_job\""},
        BadCase{"NameEndsWithDash", [](json& d) { d["metadata"]["name"] = "fmnist-"; },
                "metadata.name: " + kDnsLabel + "\"fmnist-\""},
        BadCase{"NameTooLong", [](json& d) { d["metadata"]["name"] = std::string(64, 'a'); },
                "metadata.name: " + kDnsLabel + "\"" + std::string(64, 'a') + "\""},
        BadCase{"BadNamespace", [](json& d) { d["metadata"]["namespace"] = "a.b"; },
                "metadata.namespace: " + kDnsLabel + "\"a.b\""},
        BadCase{"NegativeGeneration", [](json& d) { d["metadata"]["generation"] = -1; },
                "metadata.generation: must be >= 0, got -1"},
        BadCase{"LabelNotString", [](json& d) { d["metadata"]["labels"]["app"] = 1; },
                "metadata.labels.app: must be a string, got integer"},
        // spec structure
        BadCase{"MissingSpec", [](json& d) { d.erase("spec"); }, "spec: required field is missing"},
        BadCase{"SpecNotObject", [](json& d) { d["spec"] = "x"; },
                "spec: must be an object, got string"},
        BadCase{"UnknownSpecField", [](json& d) { Spec(d)["trainig"] = json::object(); },
                "spec.trainig: unknown field"},
        BadCase{"BadArchitecture", [](json& d) { Spec(d)["architecture"] = "Ring"; },
                "spec.architecture: must be one of AllReduce, ParameterServer, got \"Ring\""},
        // workers
        BadCase{"MissingWorkers", [](json& d) { Spec(d).erase("workers"); },
                "spec.workers: required field is missing"},
        BadCase{"MissingReplicas", [](json& d) { Spec(d)["workers"].erase("replicas"); },
                "spec.workers.replicas: required field is missing"},
        BadCase{"ZeroReplicas", [](json& d) { Spec(d)["workers"]["replicas"] = 0; },
                "spec.workers.replicas: must be >= 1, got 0"},
        BadCase{"FractionalReplicas", [](json& d) { Spec(d)["workers"]["replicas"] = 2.5; },
                "spec.workers.replicas: must be an integer, got 2.5"},
        BadCase{"ReplicasAsString", [](json& d) { Spec(d)["workers"]["replicas"] = "4"; },
                "spec.workers.replicas: must be an integer, got string"},
        BadCase{"UnknownWorkersField", [](json& d) { Spec(d)["workers"]["replica"] = 1; },
                "spec.workers.replica: unknown field"},
        BadCase{"TemplateNotObject", [](json& d) { Spec(d)["workers"]["template"] = "pod"; },
                "spec.workers.template: must be an object, got string"},
        BadCase{
            "ContainersEmpty",
            [](json& d) { Spec(d)["workers"]["template"]["spec"]["containers"] = json::array(); },
            "spec.workers.template.spec.containers: must not be empty"},
        BadCase{
            "ContainersNotArray",
            [](json& d) { Spec(d)["workers"]["template"]["spec"]["containers"] = json::object(); },
            "spec.workers.template.spec.containers: must be an array, got object"},
        BadCase{"ContainerWithoutName", [](json& d) { Container(d).erase("name"); },
                "spec.workers.template.spec.containers[0].name: required field is missing"},
        BadCase{
            "SecondContainerNameNotString",
            [](json& d) { Spec(d)["workers"]["template"]["spec"]["containers"][1]["name"] = 7; },
            "spec.workers.template.spec.containers[1].name: must be a string, got integer"},
        BadCase{"CommandNotStrings",
                [](json& d) {
                  Container(d)["command"] = {"run", 1};
                },
                "spec.workers.template.spec.containers[0].command[1]: must be a string, got "
                "integer"},
        BadCase{"BadCpuLimit",
                [](json& d) { Container(d)["resources"]["limits"]["cpu"] = "2 cores"; },
                "spec.workers.template.spec.containers[0].resources.limits.cpu: must be a "
                "non-negative CPU quantity like \"500m\" or \"2\", got \"2 cores\""},
        BadCase{"NegativeCpuRequest",
                [](json& d) { Container(d)["resources"]["requests"]["cpu"] = -1; },
                "spec.workers.template.spec.containers[0].resources.requests.cpu: must be a "
                "non-negative CPU quantity like \"500m\" or \"2\", got -1"},
        BadCase{"BadEgressBandwidth",
                [](json& d) {
                  Spec(d)["workers"]["template"]["metadata"]["annotations"]["kubernetes.io/egress-bandwidth"] = "fast";
                },
                "spec.workers.template.metadata.annotations[\"kubernetes.io/egress-bandwidth\"]: must be a "
                "bandwidth like \"800M\" or \"1G\" (bits per second, at least 1, at most 10000000000000), got \"fast\""},
        // parameter servers
        BadCase{"PsWithAllReduce",
                [](json& d) {
                  Spec(d)["parameterServers"] = {{"replicas", 2}};
                },
                "spec.parameterServers.replicas: must be 0 when spec.architecture is AllReduce, "
                "got 2"},
        BadCase{"PsArchitectureWithoutPs",
                [](json& d) { Spec(d)["architecture"] = "ParameterServer"; },
                "spec.parameterServers: required when spec.architecture is ParameterServer"},
        BadCase{"PsArchitectureWithZeroPs",
                [](json& d) {
                  Spec(d)["architecture"] = "ParameterServer";
                  Spec(d)["parameterServers"] = {{"replicas", 0}};
                },
                "spec.parameterServers.replicas: must be >= 1 when spec.architecture is "
                "ParameterServer, got 0"},
        BadCase{"NegativePsReplicas",
                [](json& d) {
                  Spec(d)["parameterServers"] = {{"replicas", -1}};
                },
                "spec.parameterServers.replicas: must be >= 0, got -1"},
        BadCase{"PsMissingReplicas", [](json& d) { Spec(d)["parameterServers"] = json::object(); },
                "spec.parameterServers.replicas: required field is missing"},
        // training
        BadCase{"MissingTraining", [](json& d) { Spec(d).erase("training"); },
                "spec.training: required field is missing"},
        BadCase{"MissingGlobalBatch", [](json& d) { Spec(d)["training"].erase("globalBatchSize"); },
                "spec.training.globalBatchSize: required field is missing"},
        BadCase{"ZeroGlobalBatch", [](json& d) { Spec(d)["training"]["globalBatchSize"] = 0; },
                "spec.training.globalBatchSize: must be >= 1, got 0"},
        BadCase{"GlobalBatchAboveMaximum",
                [](json& d) { Spec(d)["training"]["globalBatchSize"] = int64_t{1} << 31; },
                "spec.training.globalBatchSize: must be <= 2147483647, got 2147483648"},
        BadCase{"GlobalBatchBelowReplicas",
                [](json& d) { Spec(d)["training"]["globalBatchSize"] = 3; },
                "spec.training.globalBatchSize: must be >= spec.workers.replicas (4), got 3"},
        BadCase{"ZeroTargetAccuracy", [](json& d) { Spec(d)["training"]["targetAccuracy"] = 0; },
                "spec.training.targetAccuracy: must be in (0, 1], got 0"},
        BadCase{"TargetAccuracyAboveOne",
                [](json& d) { Spec(d)["training"]["targetAccuracy"] = 1.5; },
                "spec.training.targetAccuracy: must be in (0, 1], got 1.5"},
        BadCase{"TargetAccuracyNotNumber",
                [](json& d) { Spec(d)["training"]["targetAccuracy"] = "high"; },
                "spec.training.targetAccuracy: must be a number, got string"},
        BadCase{"ZeroMaxIterations", [](json& d) { Spec(d)["training"]["maxIterations"] = 0; },
                "spec.training.maxIterations: must be >= 1, got 0"},
        BadCase{"MaxIterationsAboveMaximum",
                [](json& d) { Spec(d)["training"]["maxIterations"] = int64_t{1} << 53; },
                "spec.training.maxIterations: must be <= 9007199254740991, got 9007199254740992"},
        BadCase{"UnknownTrainingField", [](json& d) { Spec(d)["training"]["epochs"] = 3; },
                "spec.training.epochs: unknown field"},
        // synchronization
        BadCase{"BadPolicy", [](json& d) { Spec(d)["synchronization"]["policy"] = "ssgd"; },
                "spec.synchronization.policy: must be one of Auto, SSGD, ASGD, FixedK, Groups, "
                "got \"ssgd\""},
        BadCase{"AsgdNeedsParameterServer",
                [](json& d) { Spec(d)["synchronization"]["policy"] = "ASGD"; },
                "spec.synchronization.policy: ASGD requires spec.architecture ParameterServer, got "
                "AllReduce"},
        BadCase{"BadSelector", [](json& d) { Spec(d)["synchronization"]["selector"] = "Random"; },
                "spec.synchronization.selector: must be one of Heuristic, ML, got \"Random\""},
        BadCase{"ZeroMinK", [](json& d) { Spec(d)["synchronization"]["minK"] = 0; },
                "spec.synchronization.minK: must be >= 1, got 0"},
        BadCase{"MinKAboveReplicas", [](json& d) { Spec(d)["synchronization"]["minK"] = 5; },
                "spec.synchronization.minK: must be <= spec.workers.replicas (4), got 5"},
        BadCase{"UnknownSyncField", [](json& d) { Spec(d)["synchronization"]["k"] = 2; },
                "spec.synchronization.k: unknown field"},
        // mitigation
        BadCase{"BadRule", [](json& d) { Spec(d)["mitigation"]["detection"]["rule"] = "mad"; },
                "spec.mitigation.detection.rule: must be one of MAD, RelativeScore, STAR, "
                "ChangePoint, got \"mad\""},
        BadCase{"SmallWindow", [](json& d) { Spec(d)["mitigation"]["detection"]["window"] = 2; },
                "spec.mitigation.detection.window: must be >= 3, got 2"},
        BadCase{"ZeroThreshold",
                [](json& d) { Spec(d)["mitigation"]["detection"]["threshold"] = 0; },
                "spec.mitigation.detection.threshold: must be > 0, got 0"},
        BadCase{"ThresholdAboveMaximum",
                [](json& d) { Spec(d)["mitigation"]["detection"]["threshold"] = 1000.5; },
                "spec.mitigation.detection.threshold: must be <= 1000, got 1000.5"},
        BadCase{"AmpEnabledNotBool",
                [](json& d) { Spec(d)["mitigation"]["amp"]["enabled"] = "yes"; },
                "spec.mitigation.amp.enabled: must be a boolean, got string"},
        BadCase{"BadDtype", [](json& d) { Spec(d)["mitigation"]["amp"]["dtype"] = "fp8"; },
                "spec.mitigation.amp.dtype: must be one of bfloat16, float16, got \"fp8\""},
        BadCase{"Float16", [](json& d) { Spec(d)["mitigation"]["amp"]["dtype"] = "float16"; },
                "spec.mitigation.amp.dtype: float16 is not supported (it needs a loss scale "
                "that every worker applies alike); use bfloat16"},
        BadCase{"BadMitigationMode", [](json& d) { Spec(d)["mitigation"]["mode"] = "observe"; },
                "spec.mitigation.mode: must be one of Mitigate, Observe, got \"observe\""},
        BadCase{"SuspendNotBool", [](json& d) { Spec(d)["suspend"] = "true"; },
                "spec.suspend: must be a boolean, got string"},
        BadCase{"ZeroProcsPerPod", [](json& d) { Spec(d)["workers"]["procsPerPod"] = 0; },
                "spec.workers.procsPerPod: must be >= 1, got 0"},
        BadCase{"ProcsPerPodAboveMaximum", [](json& d) { Spec(d)["workers"]["procsPerPod"] = 65; },
                "spec.workers.procsPerPod: must be <= 64, got 65"},
        BadCase{"WorldAboveMaximum",
                [](json& d) {
                  Spec(d)["workers"]["replicas"] = 512;
                  Spec(d)["workers"]["procsPerPod"] = 4;
                },
                "spec.workers.procsPerPod: workers.replicas * workers.procsPerPod must be <= "
                "1024, got 2048"},
        BadCase{"ProcsPerPodAboveGpus",
                [](json& d) {
                  Spec(d)["workers"]["procsPerPod"] = 4;
                  Container(d)["resources"]["limits"]["nvidia.com/gpu"] = 2;
                },
                "spec.workers.procsPerPod: must be <= the pod's GPUs (nvidia.com/gpu limit 2), "
                "got 4"},
        BadCase{"FractionalGpus",
                [](json& d) { Container(d)["resources"]["limits"]["nvidia.com/gpu"] = "500m"; },
                "spec.workers.template.spec.containers[0].resources.limits.nvidia.com/gpu: must "
                "be a whole number of GPUs like \"1\" or 8, got \"500m\""},
        BadCase{"GlobalBatchBelowWorldSize",
                [](json& d) {
                  Spec(d)["workers"]["procsPerPod"] = 8;
                  Spec(d)["training"]["globalBatchSize"] = 16;
                  Spec(d)["mitigation"]["batchAdaptation"]["minLocalBatch"] = 1;
                },
                "spec.training.globalBatchSize: must be >= spec.workers.replicas * "
                "spec.workers.procsPerPod (32), got 16"},
        BadCase{"ProcsPerPodOnServers",
                [](json& d) {
                  Spec(d)["architecture"] = "ParameterServer";
                  Spec(d)["parameterServers"] = {{"replicas", 1}, {"procsPerPod", 2}};
                },
                "spec.parameterServers.procsPerPod: unknown field"},
        BadCase{"NegativeBackoffLimit", [](json& d) { Spec(d)["runPolicy"]["backoffLimit"] = -1; },
                "spec.runPolicy.backoffLimit: must be >= 0, got -1"},
        BadCase{"BackoffLimitAboveMaximum",
                [](json& d) { Spec(d)["runPolicy"]["backoffLimit"] = 1001; },
                "spec.runPolicy.backoffLimit: must be <= 1000, got 1001"},
        BadCase{"ZeroDeadline", [](json& d) { Spec(d)["runPolicy"]["activeDeadlineSeconds"] = 0; },
                "spec.runPolicy.activeDeadlineSeconds: must be >= 1, got 0"},
        BadCase{"NegativeTtl", [](json& d) { Spec(d)["runPolicy"]["ttlSecondsAfterFinished"] = -5; },
                "spec.runPolicy.ttlSecondsAfterFinished: must be >= 0, got -5"},
        BadCase{"BadSchedulerName",
                [](json& d) { Spec(d)["runPolicy"]["schedulerName"] = "Volcano"; },
                "spec.runPolicy.schedulerName: must be a DNS-1123 subdomain of at most 253 "
                "characters (lowercase letters, digits, '-', '.'), got \"Volcano\""},
        BadCase{"UnknownRunPolicyField", [](json& d) { Spec(d)["runPolicy"]["restarts"] = 1; },
                "spec.runPolicy.restarts: unknown field"},
        BadCase{"ZeroPipelineStages", [](json& d) { Spec(d)["parallelism"]["pipelineStages"] = 0; },
                "spec.parallelism.pipelineStages: must be in [1, 64], got 0"},
        BadCase{"TooManyMicroBatches",
                [](json& d) {
                  Spec(d)["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 1025}};
                },
                "spec.parallelism.microBatches: must be in [1, 1024], got 1025"},
        BadCase{"StagesNotDividingTheWorkers",
                [](json& d) { Spec(d)["parallelism"] = {{"pipelineStages", 3}, {"microBatches", 6}}; },
                "spec.parallelism.pipelineStages: must divide spec.workers.replicas (4): every "
                "data-parallel replica runs every stage (rank = replica * pipelineStages + stage)"},
        BadCase{"FewerMicroBatchesThanStages",
                [](json& d) { Spec(d)["parallelism"] = {{"pipelineStages", 4}, {"microBatches", 3}}; },
                "spec.parallelism.microBatches: must be >= spec.parallelism.pipelineStages (4): "
                "with fewer a stage idles in every step, got 3"},
        BadCase{"MemoryBoundNoScheduleFits",
                [](json& d) {
                  Spec(d)["parallelism"] = {
                      {"pipelineStages", 4}, {"microBatches", 8}, {"maxInFlightPerStage", 2}};
                },
                "spec.parallelism.maxInFlightPerStage: must be >= spec.parallelism.pipelineStages "
                "(4): a 1F1B schedule holds that many micro-batches on the first stage, and no "
                "schedule fits a smaller bound, got 2"},
        BadCase{"InFlightAboveMicroBatches",
                [](json& d) {
                  Spec(d)["parallelism"] = {
                      {"pipelineStages", 2}, {"microBatches", 4}, {"maxInFlightPerStage", 5}};
                },
                "spec.parallelism.maxInFlightPerStage: must be <= spec.parallelism.microBatches "
                "(4), got 5"},
        BadCase{"PipelineOfParameterServers",
                [](json& d) {
                  Spec(d)["architecture"] = "ParameterServer";
                  Spec(d)["parameterServers"] = {{"replicas", 1}};
                  Spec(d)["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 2}};
                },
                "spec.parallelism.pipelineStages: a pipeline needs spec.architecture AllReduce"},
        BadCase{"MicroBatchesWithoutSamples",
                [](json& d) {
                  Spec(d)["training"]["globalBatchSize"] = 16;
                  Spec(d)["mitigation"]["batchAdaptation"]["minLocalBatch"] = 1;
                  Spec(d)["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 16}};
                },
                "spec.training.globalBatchSize: must be >= 2 data-parallel replicas * "
                "spec.parallelism.microBatches (16): every micro-batch needs a sample, got 16"},
        BadCase{"MicroBatchesNotDividingTheBatch",
                [](json& d) {
                  Spec(d)["training"]["globalBatchSize"] = 100;
                  Spec(d)["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 8}};
                },
                "spec.training.globalBatchSize: must be a multiple of 2 data-parallel replicas * "
                "spec.parallelism.microBatches (8): every replica splits its share into equal "
                "micro-batches, got 100"},
        BadCase{"UnknownParallelismField",
                [](json& d) { Spec(d)["parallelism"]["tensorParallel"] = 2; },
                "spec.parallelism.tensorParallel: unknown field"},
        BadCase{"ParallelismNotAnObject", [](json& d) { Spec(d)["parallelism"] = 4; },
                "spec.parallelism: must be an object, got integer"},
        BadCase{"ZeroMinLocalBatch",
                [](json& d) { Spec(d)["mitigation"]["batchAdaptation"]["minLocalBatch"] = 0; },
                "spec.mitigation.batchAdaptation.minLocalBatch: must be >= 1, got 0"},
        BadCase{"MinLocalBatchAboveMaximum",
                [](json& d) {
                  Spec(d)["mitigation"]["batchAdaptation"]["minLocalBatch"] = int64_t{1} << 31;
                },
                "spec.mitigation.batchAdaptation.minLocalBatch: must be <= 2147483647, got "
                "2147483648"},
        BadCase{"MinLocalBatchInfeasible",
                [](json& d) { Spec(d)["mitigation"]["batchAdaptation"]["minLocalBatch"] = 65; },
                "spec.mitigation.batchAdaptation.minLocalBatch: must be <= "
                "spec.training.globalBatchSize / spec.workers.replicas (64), got 65"},
        BadCase{"UnknownMitigationSection",
                [](json& d) { Spec(d)["mitigation"]["checkpointing"] = json::object(); },
                "spec.mitigation.checkpointing: unknown field"},
        BadCase{"UnknownReallocationField",
                [](json& d) { Spec(d)["mitigation"]["resourceReallocation"]["cpu"] = true; },
                "spec.mitigation.resourceReallocation.cpu: unknown field"},
        // status
        BadCase{"BadPhase", [](json& d) { d["status"]["phase"] = "Done"; },
                "status.phase: must be one of Pending, Created, Running, Restarting, Succeeded, "
                "Failed, Suspended, got \"Done\""},
        BadCase{"BadStartTime", [](json& d) { d["status"]["startTime"] = "yesterday"; },
                "status.startTime: must be an RFC 3339 date-time, got \"yesterday\""},
        BadCase{"EmptySchedulerName", [](json& d) { Spec(d)["runPolicy"]["schedulerName"] = ""; },
                "spec.runPolicy.schedulerName: must not be empty (leave it out for the cluster's "
                "default)"},
        BadCase{"BadSyncMode", [](json& d) { d["status"]["syncMode"] = "FixedK"; },
                "status.syncMode: must be one of ssgd, fixed_k, groups, asgd, got \"FixedK\""},
        BadCase{"ZeroK", [](json& d) { d["status"]["k"] = 0; }, "status.k: must be >= 1, got 0"},
        BadCase{"GroupsNotNested",
                [](json& d) {
                  d["status"]["groups"] = {1, 2};
                },
                "status.groups[0]: must be an array, got integer"},
        BadCase{"StragglerBadCause",
                [](json& d) { d["status"]["stragglers"][0]["cause"] = "memory"; },
                "status.stragglers[0].cause: must be one of compute, communication, got "
                "\"memory\""},
        BadCase{"StragglerBadSince",
                [](json& d) { d["status"]["stragglers"][0]["since"] = "yesterday"; },
                "status.stragglers[0].since: must be an RFC 3339 date-time, got \"yesterday\""},
        BadCase{"StragglerMissingSlowdown",
                [](json& d) { d["status"]["stragglers"][0].erase("slowdown"); },
                "status.stragglers[0].slowdown: required field is missing"},
        BadCase{"WorkerZeroBatch", [](json& d) { d["status"]["workers"][3]["batch"] = 0; },
                "status.workers[3].batch: must be >= 1, got 0"},
        BadCase{"AccuracyAboveOne", [](json& d) { d["status"]["accuracy"] = 1.01; },
                "status.accuracy: must be <= 1, got 1.01"},
        BadCase{"NegativeTta", [](json& d) { d["status"]["estimatedTTASeconds"] = -1; },
                "status.estimatedTTASeconds: must be >= 0, got -1"},
        BadCase{"NegativeReachedTta", [](json& d) { d["status"]["ttaSeconds"] = -0.5; },
                "status.ttaSeconds: must be >= 0, got -0.5"},
        BadCase{"ReachedTtaNotNumber", [](json& d) { d["status"]["ttaSeconds"] = "soon"; },
                "status.ttaSeconds: must be a number, got string"},
        BadCase{"NegativeDecisionEpoch", [](json& d) { d["status"]["decisionEpoch"] = -2; },
                "status.decisionEpoch: must be >= 0, got -2"},
        BadCase{"PipelineWithoutWarmup",
                [](json& d) { d["status"]["pipeline"] = {{"predictedIterationSeconds", 0.2}}; },
                "status.pipeline.warmup: required field is missing"},
        BadCase{"PipelineWarmupOfOneStage", [](json& d) { d["status"]["pipeline"] = {{"warmup", {4}}}; },
                "status.pipeline.warmup: must have one depth per stage (at least 2), got 1"},
        BadCase{"PipelineZeroDepth", [](json& d) { d["status"]["pipeline"] = {{"warmup", {4, 0}}}; },
                "status.pipeline.warmup[1]: must be in [1, 1024], got 0"},
        BadCase{"PipelineSlowLinkNotNeighbours",
                [](json& d) {
                  d["status"]["pipeline"] = {{"warmup", {4, 2, 1}},
                                             {"slowLink", {{"fromStage", 0}, {"toStage", 2}}}};
                },
                "status.pipeline.slowLink.toStage: must be fromStage + 1 (1), got 2"},
        BadCase{"PipelineSlowLinkFromTheLastStage",
                [](json& d) {
                  d["status"]["pipeline"] = {{"warmup", {4, 2, 1}},
                                             {"slowLink", {{"fromStage", 2}, {"toStage", 3}}}};
                },
                "status.pipeline.slowLink.fromStage: must be <= 1, got 2"},
        BadCase{"IterationAboveMaximum",
                [](json& d) { d["status"]["iteration"] = int64_t{1} << 53; },
                "status.iteration: must be <= 9007199254740991, got 9007199254740992"},
        BadCase{"ConditionBadStatus",
                [](json& d) { d["status"]["conditions"][0]["status"] = "Yes"; },
                "status.conditions[0].status: must be one of True, False, Unknown, got \"Yes\""},
        BadCase{"ConditionDuplicateType",
                [](json& d) {
                  d["status"]["conditions"].push_back({{"type", "Ready"}, {"status", "False"}});
                },
                "status.conditions[1].type: duplicate of status.conditions[0]"},
        // bounds: a count the operator turns into objects or per-worker state
        BadCase{"ReplicasAboveMaximum",
                [](json& d) { d["spec"]["workers"]["replicas"] = 50000000; },
                "spec.workers.replicas: must be <= 1024, got 50000000"},
        BadCase{"ParameterServersAboveMaximum",
                [](json& d) {
                  d["spec"]["architecture"] = "ParameterServer";
                  d["spec"]["parameterServers"] = {{"replicas", 1025}};
                },
                "spec.parameterServers.replicas: must be <= 1024, got 1025"},
        BadCase{"PodTemplateAboveMaximum",
                [](json& d) {
                  // {"metadata":{"name":""}} is 24 bytes: one more than the bound in all.
                  d["spec"]["workers"]["template"] = {
                      {"metadata", {{"name", std::string(kMaxPodTemplateBytes + 1 - 24, 'x')}}}};
                },
                "spec.workers.template: must be at most 65536 bytes of JSON, got 65537"},
        BadCase{"WindowAboveMaximum",
                [](json& d) { d["spec"]["mitigation"]["detection"]["window"] = 1001; },
                "spec.mitigation.detection.window: must be <= 1000, got 1001"},
        BadCase{"StatusKAboveMaximum", [](json& d) { d["status"]["k"] = 1025; },
                "status.k: must be <= 1024, got 1025"},
        BadCase{"TooManyGroups",
                [](json& d) {
                  d["status"]["groups"] = std::vector<std::vector<int>>(1025, {0});
                },
                "status.groups: must have at most 1024 items, got 1025"},
        BadCase{"GroupTooLong",
                [](json& d) { d["status"]["groups"][0] = std::vector<int>(1025, 0); },
                "status.groups[0]: must have at most 1024 items, got 1025"},
        BadCase{"GroupRankAboveMaximum", [](json& d) { d["status"]["groups"][0][0] = 1024; },
                "status.groups[0][0]: must be <= 1023, got 1024"},
        BadCase{"GroupRankNegative", [](json& d) { d["status"]["groups"][0][0] = -1; },
                "status.groups[0][0]: must be >= 0, got -1"},
        BadCase{"TooManyWorkerStatuses",
                [](json& d) {
                  d["status"]["workers"] = std::vector<json>(1025, {{"batch", 1}});
                },
                "status.workers: must have at most 1024 items, got 1025"},
        BadCase{"StragglerRankAboveMaximum",
                [](json& d) { d["status"]["stragglers"][0]["worker"] = 1024; },
                "status.stragglers[0].worker: must be <= 1023, got 1024"},
        BadCase{"StragglerNodeTooLong",
                [](json& d) { d["status"]["stragglers"][0]["node"] = std::string(254, 'n'); },
                "status.stragglers[0].node: must be at most 253 characters, got 254"},
        BadCase{"TooManyConditions",
                [](json& d) {
                  json& c = d["status"]["conditions"];
                  for (int i = 0; c.size() < 33; ++i) {
                    c.push_back({{"type", "T" + std::to_string(i)}, {"status", "True"}});
                  }
                },
                "status.conditions: must have at most 32 items, got 33"},
        BadCase{"ConditionMessageTooLong",
                [](json& d) { d["status"]["conditions"][0]["message"] = std::string(32769, 'm'); },
                "status.conditions[0].message: must be at most 32768 characters, got 32769"},
        BadCase{"UnknownStatusField", [](json& d) { d["status"]["mode"] = "ssgd"; },
                "status.mode: unknown field"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(TrainingJob, UnknownFieldsInsidePodTemplateAreKept) {
  json doc = FmnistJob();
  Container(doc)["securityContext"] = {{"runAsNonRoot", true}};
  Spec(doc)["workers"]["template"]["spec"]["nodeSelector"] = {{"gpu", "a100"}};
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job->spec.workers.pod_template)["spec"]["nodeSelector"]["gpu"], "a100");
  EXPECT_EQ(ToJson(*job), doc);
}

TEST(TrainingJob, UnknownMetadataFieldsAreIgnored) {
  json doc = MinimalJob();
  doc["metadata"]["creationTimestamp"] = "2024-05-01T12:00:00Z";
  doc["metadata"]["finalizers"] = {"star.dev/cleanup"};
  auto job = TrainingJobFromJson(doc);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(ToJson(*job)["metadata"].contains("finalizers"));
}

TEST(TrainingJob, ValidateChecksStructsBuiltInCode) {
  TrainingJobSpec s;
  s.workers.replicas = 4;
  s.training.global_batch_size = 128;
  s.training.target_accuracy = 0.9;
  EXPECT_TRUE(Validate(s).ok()) << Validate(s);
  s.synchronization.policy = SyncPolicy::kAsgd;
  EXPECT_EQ(Validate(s).message(),
            "spec.synchronization.policy: ASGD requires spec.architecture ParameterServer, got "
            "AllReduce");
  s.architecture = Architecture::kParameterServer;
  s.parameter_servers = ReplicaSpec{1, std::nullopt};
  EXPECT_TRUE(Validate(s).ok()) << Validate(s);
  s.workers.replicas = 0;
  EXPECT_EQ(Validate(s, "job.spec").message(), "job.spec.workers.replicas: must be >= 1, got 0");
}

TEST(TrainingJob, SpecDecoderUsesTheGivenPath) {
  json spec = FmnistJob()["spec"];
  spec["workers"]["replicas"] = 0;
  auto s = TrainingJobSpecFromJson(spec, "items[2].spec");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "items[2].spec.workers.replicas: must be >= 1, got 0");
}

TEST(FirstContainer, SummarizesTheFirstContainer) {
  auto c = FirstContainer(FmnistJob()["spec"]["workers"]["template"]);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  const ContainerSummary& s = **c;
  EXPECT_EQ(s.name, "trainer");
  EXPECT_EQ(s.image, "ghcr.io/star/fmnist:0.1");
  EXPECT_EQ(s.command, std::vector<std::string>{"star-run"});
  EXPECT_EQ(s.args, (std::vector<std::string>{"--", "fmnist-train", "--epochs", "5"}));
  EXPECT_EQ(s.cpu_limit_millicores, 2000);
  EXPECT_EQ(s.cpu_request_millicores, 500);
}

TEST(FirstContainer, AbsentContainersGiveNoSummary) {
  auto c = FirstContainer(json::object());
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
  auto d = FirstContainer(json{{"spec", {{"restartPolicy", "Never"}}}});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_value());
}

TEST(ParseCpuMillicores, AcceptsKubernetesQuantitiesAndRoundsUp) {
  EXPECT_EQ(ParseCpuMillicores("500m"), 500);
  EXPECT_EQ(ParseCpuMillicores("2"), 2000);
  EXPECT_EQ(ParseCpuMillicores("0.1"), 100);
  EXPECT_EQ(ParseCpuMillicores("1.5"), 1500);
  EXPECT_EQ(ParseCpuMillicores("0.0005"), 1);  // rounds up
  EXPECT_EQ(ParseCpuMillicores("1500000u"), 1500);
  EXPECT_EQ(ParseCpuMillicores("1n"), 1);
  EXPECT_EQ(ParseCpuMillicores("1k"), 1000000);
  EXPECT_EQ(ParseCpuMillicores(json(0.25)), 250);
  EXPECT_EQ(ParseCpuMillicores(json(3)), 3000);
  EXPECT_EQ(ParseCpuMillicores(json(0.1)), 100);
  EXPECT_EQ(ParseCpuMillicores("0"), 0);
  EXPECT_FALSE(ParseCpuMillicores("").has_value());
  EXPECT_FALSE(ParseCpuMillicores("m").has_value());
  EXPECT_FALSE(ParseCpuMillicores("-1").has_value());
  EXPECT_FALSE(ParseCpuMillicores("1Gi").has_value());
  EXPECT_FALSE(ParseCpuMillicores("1.2.3").has_value());
  EXPECT_FALSE(ParseCpuMillicores("1e3").has_value());
  EXPECT_FALSE(ParseCpuMillicores("9999999999999").has_value());
  EXPECT_FALSE(ParseCpuMillicores(json(-0.5)).has_value());
  EXPECT_FALSE(ParseCpuMillicores(json(true)).has_value());
}

TEST(TrainingJobEnums, WireNamesRoundTrip) {
  for (auto p : {SyncPolicy::kAuto, SyncPolicy::kSsgd, SyncPolicy::kAsgd, SyncPolicy::kFixedK,
                 SyncPolicy::kGroups}) {
    EXPECT_EQ(ParseSyncPolicy(ToString(p)), p);
  }
  for (auto r : {DetectionRule::kMad, DetectionRule::kRelativeScore, DetectionRule::kStar,
                 DetectionRule::kChangePoint}) {
    EXPECT_EQ(ParseDetectionRule(ToString(r)), r);
  }
  for (auto p : {JobPhase::kPending, JobPhase::kCreated, JobPhase::kRunning, JobPhase::kRestarting,
                 JobPhase::kSucceeded, JobPhase::kFailed}) {
    EXPECT_EQ(ParseJobPhase(ToString(p)), p);
  }
  EXPECT_EQ(ParseModeSelector("ML"), ModeSelector::kMl);
  EXPECT_EQ(ParseAmpDtype("float16"), AmpDtype::kFloat16);
  EXPECT_FALSE(ParseSyncPolicy("auto").has_value());
}

}  // namespace
}  // namespace star::api
