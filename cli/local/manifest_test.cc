#include "local/manifest.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace star::local {
namespace {

using nlohmann::json;

// A realistic manifest: 3 workers running a custom command, env, CPU requests and limits.
const std::string kCustom = R"(# three workers on this machine
apiVersion: star.dev/v1alpha1
kind: TrainingJob
metadata:
  name: fmnist
  labels: {app: fmnist}
spec:
  workers:
    replicas: 3
    template:
      metadata:
        labels: {app: fmnist}
      spec:
        restartPolicy: Never
        containers:
          - name: trainer
            image: ghcr.io/star-dev/fmnist:0.1
            command: ["python3", "train.py"]
            args: ["--epochs", "2"]
            env:
              - {name: MODE, value: fast}
              - name: COUNT
                value: "7"
              - name: EMPTY
            resources:
              requests: {cpu: 250m}
              limits: {cpu: "0.5", memory: 1Gi}
          - name: sidecar
            image: busybox
  training: {globalBatchSize: 96, targetAccuracy: 0.8, maxIterations: 500}
  mitigation:
    detection: {rule: MAD, window: 10, threshold: 3}
    amp: {enabled: false}
)";

// The bundled trainer (no command) as a parameter-server job.
const std::string kParameterServer = R"(
apiVersion: star.dev/v1alpha1
kind: TrainingJob
metadata: {name: ps}
spec:
  architecture: ParameterServer
  workers:
    replicas: 2
    template: {spec: {containers: [{name: t, resources: {requests: {cpu: 1}}}]}}
  parameterServers:
    replicas: 1
    template: {spec: {containers: [{name: ps, resources: {limits: {cpu: 1.5}, requests: {cpu: 100m}}}]}}
  training: {globalBatchSize: 64, targetAccuracy: 0.9}
  synchronization: {policy: ASGD}
)";

// The smallest manifest: no template at all.
const std::string kMinimal = R"(
metadata: {name: tiny}
spec:
  workers: {replicas: 1}
  training: {globalBatchSize: 8, targetAccuracy: 0.5}
)";

TEST(ParseManifest, ReadsTheJobItsCommandEnvAndCpuLimit) {
  auto job = ParseManifest(kCustom, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.metadata.name, "fmnist");
  EXPECT_EQ(job->job.metadata.namespace_, "default");
  EXPECT_EQ(job->job.spec.workers.replicas, 3);
  EXPECT_EQ(job->job.spec.training.global_batch_size, 96);
  EXPECT_DOUBLE_EQ(job->job.spec.training.target_accuracy.value_or(-1), 0.8);
  EXPECT_EQ(job->job.spec.training.max_iterations, 500);
  EXPECT_EQ(job->job.spec.mitigation.detection.window, 10);
  EXPECT_EQ(job->job.spec.mitigation.detection.threshold, 3.0);
  EXPECT_FALSE(job->job.spec.mitigation.amp.enabled);
  EXPECT_TRUE(job->job.spec.mitigation.batch_adaptation.enabled);  // CRD default
  EXPECT_EQ(job->job.spec.synchronization.policy, api::SyncPolicy::kAuto);
  EXPECT_EQ(job->worker_command,
            (std::vector<std::string>{"python3", "train.py", "--epochs", "2"}));
  EXPECT_EQ(job->worker_env, (std::vector<std::pair<std::string, std::string>>{
                                 {"MODE", "fast"}, {"COUNT", "7"}, {"EMPTY", ""}}));
  EXPECT_EQ(job->worker_cpu_millicores, 500);  // limits win over requests
  EXPECT_EQ(job->server_cpu_millicores, 0);
}

TEST(ParseManifest, NoCommandMeansTheBundledTrainerAndServersGetTheirOwnCpu) {
  auto job = ParseManifest(kParameterServer, "ps.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.spec.architecture, api::Architecture::kParameterServer);
  EXPECT_TRUE(job->worker_command.empty());
  EXPECT_TRUE(job->worker_env.empty());
  EXPECT_EQ(job->worker_cpu_millicores, 1000);  // requests when there is no limit
  EXPECT_EQ(job->server_cpu_millicores, 1500);  // a YAML number is cores
}

TEST(ParseManifest, WithoutTemplatesNothingIsGiven) {
  auto job = ParseManifest(kMinimal, "tiny.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->worker_command.empty());
  EXPECT_EQ(job->worker_cpu_millicores, 0);
  EXPECT_EQ(job->server_cpu_millicores, 0);
}

TEST(ParseManifest, AcceptsJson) {
  auto job = ParseManifest(R"({"apiVersion": "star.dev/v1alpha1", "kind": "TrainingJob",
      "metadata": {"name": "j"},
      "spec": {"workers": {"replicas": 2, "template": {"spec": {"containers": [
                 {"name": "t", "command": ["./train"], "env": [{"name": "A", "value": "1"}],
                  "resources": {"limits": {"cpu": "250m"}}}]}}},
               "training": {"globalBatchSize": 32, "targetAccuracy": 0.75}}})",
                           "job.json");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->worker_command, std::vector<std::string>{"./train"});
  EXPECT_EQ(job->worker_env.at(0).second, "1");
  EXPECT_EQ(job->worker_cpu_millicores, 250);
  EXPECT_DOUBLE_EQ(job->job.spec.training.target_accuracy.value_or(-1), 0.75);
}

TEST(ParseManifest, PicksTheOneTrainingJobOutOfSeveralDocuments) {
  const std::string multi =
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n" + kCustom + "---\n";
  auto job = ParseManifest(multi, "multi.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.metadata.name, "fmnist");
}






struct Bad {
  std::string name;
  std::string yaml;
  std::string want;  // exact message
};

class ParseManifestRejects : public testing::TestWithParam<Bad> {};

TEST_P(ParseManifestRejects, NamingTheFileAndTheField) {
  auto job = ParseManifest(GetParam().yaml, "job.yaml");
  ASSERT_FALSE(job.ok()) << "accepted:\n" << GetParam().yaml;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), GetParam().want);
}

const std::string kHead = "apiVersion: star.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: j}\n";
const std::string kTraining = "  training: {globalBatchSize: 8, targetAccuracy: 0.5}\n";

// A job whose only worker container is `container` (a YAML flow mapping).
std::string WithContainer(const std::string& container) {
  return kHead + "spec:\n  workers: {replicas: 1, template: {spec: {containers: [" + container +
         "]}}}\n" + kTraining;
}

const std::string kContainer0 = "job.yaml: spec.workers.template.spec.containers[0]";

INSTANTIATE_TEST_SUITE_P(
    Table, ParseManifestRejects,
    testing::Values(
        // the decoder's errors, prefixed with the file name
        Bad{"ZeroReplicas", kHead + "spec:\n  workers: {replicas: 0}\n" + kTraining,
            "job.yaml: spec.workers.replicas: must be >= 1, got 0"},
        Bad{"QuotedReplicas", kHead + "spec:\n  workers: {replicas: \"2\"}\n" + kTraining,
            "job.yaml: spec.workers.replicas: must be an integer, got string"},
        Bad{"UnknownField", kHead + "spec:\n  workers: {replicas: 1}\n  trainig: {}\n" + kTraining,
            "job.yaml: spec.trainig: unknown field"},
        Bad{"MissingTraining", kHead + "spec:\n  workers: {replicas: 1}\n",
            "job.yaml: spec.training: required field is missing"},
        Bad{"WrongKind", "kind: Deployment\nmetadata: {name: j}\nspec: {}\n",
            "job.yaml: kind: must be \"TrainingJob\", got \"Deployment\""},
        Bad{"NotAnObject", "- 1\n- 2\n", "job.yaml: document: must be an object, got array"},
        Bad{"BadCpu", WithContainer("{name: t, resources: {limits: {cpu: abc}}}"),
            kContainer0 + ".resources.limits.cpu: must be a non-negative CPU quantity like "
                          "\"500m\" or \"2\", got \"abc\""},
        Bad{"ContainerWithoutName", WithContainer("{image: x}"),
            kContainer0 + ".name: required field is missing"},
        // YAML and document selection
        Bad{"BadYaml", "spec: [1, 2\n", "job.yaml:2:1: did not find expected ',' or ']'"},
        Bad{"DuplicateKey", kHead + "metadata: {name: k}\n", "job.yaml:4:1: duplicate key \"metadata\""},
        Bad{"Empty", "", "job.yaml: no TrainingJob document (the file is empty)"},
        Bad{"OnlyComments", "# nothing\n---\n", "job.yaml: no TrainingJob document (the file is empty)"},
        Bad{"NoTrainingJobAmongSeveral", "kind: ConfigMap\n---\nkind: Service\n",
            "job.yaml: none of its 2 documents has kind TrainingJob"},
        Bad{"SeveralTrainingJobs", kMinimal + "---\nkind: TrainingJob\n---\nkind: X\n---\nkind: TrainingJob\n",
            "job.yaml: documents 2 and 4 all have kind TrainingJob; star local runs one job per file"},
        // what star local cannot run
        Bad{"ValueFrom",
            WithContainer("{name: t, env: [{name: A, value: x}, {name: B, valueFrom: {fieldRef: {}}}]}"),
            kContainer0 + ".env[1].valueFrom: not supported by star local (give a literal value)"},
        Bad{"EnvFrom", WithContainer("{name: t, envFrom: [{configMapRef: {name: c}}]}"),
            kContainer0 + ".envFrom: not supported by star local (list the variables under env "
                          "with literal values)"},
        Bad{"EnvValueNotString", WithContainer("{name: t, env: [{name: A, value: 2}]}"),
            kContainer0 + ".env[0].value: must be a string (quote it: \"2\"), got integer"},
        Bad{"EnvWithoutName", WithContainer("{name: t, env: [{value: x}]}"),
            kContainer0 + ".env[0].name: required field is missing"},
        Bad{"EnvUnknownField", WithContainer("{name: t, env: [{name: A, vaule: x}]}"),
            kContainer0 + ".env[0].vaule: unknown field"},
        Bad{"EnvNotAList", WithContainer("{name: t, env: {A: x}}"),
            kContainer0 + ".env: must be an array, got object"},
        Bad{"ArgsWithoutCommand", WithContainer("{name: t, args: [--epochs, '2']}"),
            kContainer0 + ".args: needs a command in star local (there is no image entrypoint; "
                          "drop args to run the bundled trainer)"}),
    [](const testing::TestParamInfo<Bad>& info) { return info.param.name; });

// A temporary directory, removed when the test ends (also on failure).
class LoadManifestTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string t = (std::filesystem::temp_directory_path() / "star-manifest-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;
};

TEST_F(LoadManifestTest, ReadsAFile) {
  const std::string path = (dir_ / "job.yaml").string();
  std::ofstream(path) << kCustom;
  auto job = LoadManifest(path);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.metadata.name, "fmnist");
}

TEST_F(LoadManifestTest, ErrorsNameTheFile) {
  const std::string path = (dir_ / "job.yaml").string();
  std::ofstream(path) << kHead << "spec:\n  workers: {replicas: 0}\n" << kTraining;
  EXPECT_EQ(LoadManifest(path).status().message(),
            path + ": spec.workers.replicas: must be >= 1, got 0");
}

TEST_F(LoadManifestTest, MissingFileIsNotFound) {
  const std::string path = (dir_ / "absent.yaml").string();
  auto job = LoadManifest(path);
  EXPECT_EQ(job.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), path + ": cannot read: No such file or directory");
}

TEST_F(LoadManifestTest, DirectoryCannotBeRead) {
  auto job = LoadManifest(dir_.string());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), dir_.string() + ": cannot read: Is a directory");
}

}  // namespace
}  // namespace star::local
