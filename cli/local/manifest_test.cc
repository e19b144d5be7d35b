#include "local/manifest.h"

#include <gtest/gtest.h>

namespace star::local {
namespace {

const char* kValid = R"(
apiVersion: star.dev/v1alpha1
kind: TrainingJob
metadata:
  name: fmnist
spec:
  workers:
    replicas: 3
    template:
      spec:
        containers:
          - name: trainer
            command: ["python3", "train.py"]
            args: ["--epochs", "2"]
            env:
              - {name: MODE, value: fast}
              - {name: COUNT, value: "7"}
            resources:
              requests: {cpu: 250m}
              limits: {cpu: "0.5"}
  training: {globalBatchSize: 96, targetAccuracy: 0.8}
)";

TEST(ParseManifest, ReadsTheJobItsCommandEnvAndCpuLimit) {
  auto job = ParseManifest(kValid, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.metadata.name, "fmnist");
  EXPECT_EQ(job->job.spec.workers.replicas, 3);
  EXPECT_EQ(job->job.spec.training.global_batch_size, 96);
  EXPECT_EQ(job->worker_command, (std::vector<std::string>{"python3", "train.py", "--epochs", "2"}));
  ASSERT_EQ(job->worker_env.size(), 2u);
  EXPECT_EQ(job->worker_env[0], (std::pair<std::string, std::string>{"MODE", "fast"}));
  EXPECT_EQ(job->worker_env[1].second, "7");
  EXPECT_EQ(job->worker_cpu_millicores, 500);  // limits win over requests
  EXPECT_EQ(job->server_cpu_millicores, 0);
  // Defaults applied like the CRD's.
  EXPECT_EQ(job->job.spec.synchronization.policy, api::SyncPolicy::kAuto);
  EXPECT_TRUE(job->job.spec.mitigation.amp.enabled);
}

TEST(ParseManifest, NoContainerCommandMeansTheBundledTrainer) {
  auto job = ParseManifest(R"(
apiVersion: star.dev/v1alpha1
kind: TrainingJob
metadata: {name: plain}
spec:
  workers: {replicas: 2, template: {spec: {containers: [{name: t, resources: {requests: {cpu: 1}}}]}}}
  training: {globalBatchSize: 64, targetAccuracy: 0.9}
)",
                           "plain.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->worker_command.empty());
  EXPECT_EQ(job->worker_cpu_millicores, 1000);
}

TEST(ParseManifest, PicksTheTrainingJobOutOfSeveralDocuments) {
  std::string multi = std::string("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n") + kValid;
  auto job = ParseManifest(multi, "multi.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.metadata.name, "fmnist");
  auto two = ParseManifest(std::string(kValid) + "---\n" + kValid, "two.yaml");
  EXPECT_NE(two.status().message().find("more than one TrainingJob"), std::string::npos);
}

TEST(YamlToJson, QuotedScalarsStayStringsPlainOnesAreTyped) {
  auto j = YamlToJson("a: 1\nb: '1'\nc: 1.5\nd: true\ne: ~\nf: 500m\ng: \"true\"\n", "x");
  ASSERT_TRUE(j.ok()) << j.status();
  const auto& d = (*j)[0];
  EXPECT_TRUE(d["a"].is_number_integer());
  EXPECT_TRUE(d["b"].is_string());
  EXPECT_TRUE(d["c"].is_number_float());
  EXPECT_TRUE(d["d"].is_boolean());
  EXPECT_TRUE(d["e"].is_null());
  EXPECT_EQ(d["f"], "500m");
  EXPECT_TRUE(d["g"].is_string());
}

struct Bad {
  const char* name;
  std::string yaml;
  const char* message;
};

class ParseManifestRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(ParseManifestRejects, NamingTheFileAndTheField) {
  auto job = ParseManifest(GetParam().yaml, "job.yaml");
  ASSERT_FALSE(job.ok());
  const std::string m = job.status().message();
  EXPECT_EQ(m.rfind("job.yaml", 0), 0u) << m;
  EXPECT_NE(m.find(GetParam().message), std::string::npos) << m;
}

const std::string kHead = "apiVersion: star.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: j}\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseManifestRejects,
    ::testing::Values(
        Bad{"ZeroReplicas", kHead + "spec: {workers: {replicas: 0}, training: {globalBatchSize: 8, targetAccuracy: 0.5}}\n",
            "spec.workers.replicas"},
        Bad{"Unknown", kHead + "spec: {workers: {replicas: 1}, trainig: {}, training: {globalBatchSize: 8, targetAccuracy: 0.5}}\n",
            "spec.trainig"},
        Bad{"BadYaml", "spec: [1, 2\n", "job.yaml:"},
        Bad{"Empty", "", "no TrainingJob document"},
        Bad{"NotAnObject", "- 1\n- 2\n", "must be a TrainingJob object"},
        Bad{"BadCpu", kHead + "spec:\n  workers: {replicas: 1, template: {spec: {containers: [{name: t, resources: {limits: {cpu: lots}}}]}}}\n  training: {globalBatchSize: 8, targetAccuracy: 0.5}\n",
            "cpu"},
        Bad{"ValueFrom", kHead + "spec:\n  workers: {replicas: 1, template: {spec: {containers: [{name: t, command: [x], env: [{name: A, valueFrom: {}}]}]}}}\n  training: {globalBatchSize: 8, targetAccuracy: 0.5}\n",
            "env[0].valueFrom: not available in local mode"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LoadManifest, MissingFileIsNotFoundNamingIt) {
  auto job = LoadManifest("/nonexistent/job.yaml");
  EXPECT_EQ(job.status().code(), StatusCode::kNotFound);
  EXPECT_NE(job.status().message().find("/nonexistent/job.yaml: cannot read"), std::string::npos);
}

}  // namespace
}  // namespace star::local
