#include "star/shim/worker_config.h"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "star/test_support/tls.h"

namespace star::shim {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it != vars.end() ? std::optional<std::string>(it->second) : std::nullopt;
  };
}

TEST(WorkerConfig, ReadsEveryStarVariable) {
  auto c = WorkerConfigFromEnvironment(Env({{"STAR_RANK", "2"},
                                            {"STAR_WORLD_SIZE", "3"},
                                            {"STAR_PARAMETER_SERVERS", "1"},
                                            {"STAR_JOB", "ns/job"},
                                            {"STAR_STORE_URL", "http://10.0.0.1:29500"},
                                            {"STAR_HOST_STORE", "true"},
                                            {"STAR_LISTEN_HOST", "10.0.0.2"},
                                            {"STAR_CONTROLLER_URL", "http://op:8080"},
                                            {"STAR_JOB_TOKEN", "t"},
                                            {"STAR_REPORT_EVERY", "7"},
                                            {"STAR_REPORT_SECONDS", "0.5"},
                                            {"STAR_METRICS_ADDRESS", "0.0.0.0:9400"},
                                            {"STAR_NODE_NAME", "gpu-7"},
                                            {"STAR_TIMEOUT_MS", "1500"},
                                            {"STAR_CLOCK_ORIGIN", "12.5"},
                                            {"STAR_BACKEND", "nccl"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->world_size, 3);
  EXPECT_EQ(c->parameter_servers, 1);
  EXPECT_EQ(c->worker(), 1);
  EXPECT_FALSE(c->is_server());
  EXPECT_EQ(c->job, "ns/job");
  EXPECT_EQ(c->store_url, "http://10.0.0.1:29500");
  EXPECT_TRUE(c->host_store);
  EXPECT_EQ(c->listen_host, "10.0.0.2");
  EXPECT_EQ(c->controller_url, "http://op:8080");
  EXPECT_EQ(c->token, "t");
  EXPECT_EQ(c->report_every, 7);
  EXPECT_EQ(c->report_seconds, 0.5);
  EXPECT_EQ(c->metrics_address, "0.0.0.0:9400");
  EXPECT_EQ(c->node, "gpu-7");
  EXPECT_EQ(c->timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c->clock_origin, 12.5);
  EXPECT_EQ(c->backend, "nccl");
}

TEST(WorkerConfig, UnsetOptionalVariablesKeepTheDefaults) {
  WorkerConfig base;
  base.report_every = 3;
  auto c = WorkerConfigFromEnvironment(Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "1"}}), base);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report_every, 3);
  EXPECT_EQ(c->job, "star");
  EXPECT_FALSE(c->clock_origin.has_value());
  EXPECT_EQ(c->backend, "gloo");
}

TEST(WorkerConfig, AMissingRequiredVariableIsNamed) {
  auto c = WorkerConfigFromEnvironment(Env({{"STAR_WORLD_SIZE", "2"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "STAR_RANK (or torchrun's RANK): not set");
  c = WorkerConfigFromEnvironment(Env({{"STAR_RANK", "0"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "STAR_WORLD_SIZE (or torchrun's WORLD_SIZE): not set");
}

TEST(WorkerConfig, TorchrunsRankAndWorldSizeStandInForMissingStarOnes) {
  auto c = WorkerConfigFromEnvironment(Env({{"RANK", "3"}, {"WORLD_SIZE", "4"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->world_size, 4);
  c = WorkerConfigFromEnvironment(Env({{"RANK", "x"}, {"WORLD_SIZE", "4"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "RANK: not an integer: \"x\"");
}

TEST(WorkerConfig, StarVariablesWinOverTorchruns) {
  auto c = WorkerConfigFromEnvironment(
      Env({{"STAR_RANK", "1"}, {"STAR_WORLD_SIZE", "2"}, {"RANK", "3"}, {"WORLD_SIZE", "8"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->world_size, 2);
}

TEST(WorkerConfig, InAPodOfSeveralProcessesOnlyRank0HostsTheStore) {
  // Pod 0 of a procsPerPod job: no STAR_RANK, the pod's STAR_HOST_STORE, torchrun's RANKs.
  std::map<std::string, std::string> pod = {{"STAR_WORLD_SIZE", "4"}, {"STAR_HOST_STORE", "1"},
                                            {"STAR_STORE_URL", "http://pod-0:29400"}};
  pod["RANK"] = "0";
  auto first = WorkerConfigFromEnvironment(Env(pod));
  pod["RANK"] = "1";
  auto second = WorkerConfigFromEnvironment(Env(pod));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(first->host_store);
  EXPECT_FALSE(second->host_store);
}

TEST(WorkerConfig, AMalformedValueIsNamed) {
  auto c = WorkerConfigFromEnvironment(
      Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "2"}, {"STAR_REPORT_EVERY", "10x"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "STAR_REPORT_EVERY: not an integer: \"10x\"");
  c = WorkerConfigFromEnvironment(
      Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "2"}, {"STAR_HOST_STORE", "yes"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("STAR_HOST_STORE"), std::string::npos);
  c = WorkerConfigFromEnvironment(
      Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "2"}, {"STAR_REPORT_SECONDS", "1s"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "STAR_REPORT_SECONDS: not a number: \"1s\"");
  c = WorkerConfigFromEnvironment(
      Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "2"}, {"STAR_REPORT_SECONDS", "-1"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("report_seconds: must be a finite number >= 0", 0), 0u)
      << c.status();
}

TEST(WorkerConfig, AnUnknownBackendIsNamed) {
  auto c = WorkerConfigFromEnvironment(Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "1"}, {"STAR_BACKEND", "mpi"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "backend: must be gloo or nccl, got \"mpi\"");
}

TEST(WorkerConfig, ARankOutsideTheJobIsRejected) {
  auto c = WorkerConfigFromEnvironment(Env({{"STAR_RANK", "3"}, {"STAR_WORLD_SIZE", "2"},
                                            {"STAR_PARAMETER_SERVERS", "1"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rank: must be"), std::string::npos) << c.status();
}

// STAR_REPORT_CA (with the required variables) read into a WorkerConfig.
StatusOr<WorkerConfig> WithReportCa(const std::string& value) {
  return WorkerConfigFromEnvironment(Env({{"STAR_RANK", "0"}, {"STAR_WORLD_SIZE", "1"}, {"STAR_REPORT_CA", value}}));
}

class ReportCaVariable : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "star-worker-ca-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string Path(const std::string& name) const { return (std::filesystem::path(dir_) / name).string(); }

  test_support::TestCa ca_;
  std::string dir_;
};

TEST_F(ReportCaVariable, PemTextIsTheCaItself) {
  auto c = WithReportCa(ca_.cert_pem());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report_ca_data, ca_.cert_pem());
  EXPECT_EQ(c->report_ca_file, "");
}

TEST_F(ReportCaVariable, AnythingElseIsTheNameOfAPemFile) {
  const std::string file = test_support::WriteTextFile(Path("ca.pem"), ca_.cert_pem());
  auto c = WithReportCa(file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report_ca_file, file);
  EXPECT_EQ(c->report_ca_data, "");
}

TEST_F(ReportCaVariable, UnsetOrEmptyIsTheSystemsCas) {
  auto c = WithReportCa("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report_ca_file, "");
  EXPECT_EQ(c->report_ca_data, "");
}

TEST_F(ReportCaVariable, AMissingFileIsNamed) {
  const std::string missing = Path("missing.pem");
  auto c = WithReportCa(missing);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "STAR_REPORT_CA: neither PEM text (\"-----BEGIN ...\") nor a file: cannot read \"" +
                                      missing + "\": No such file or directory");
}

TEST_F(ReportCaVariable, PemThatIsNotACaBundleIsNamed) {
  auto c = WithReportCa("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message().rfind("STAR_REPORT_CA: not a PEM CA bundle", 0), 0u) << c.status();
  const std::string junk = test_support::WriteTextFile(Path("junk.pem"), "no certificate here\n");
  c = WithReportCa(junk);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("STAR_REPORT_CA: file \"" + junk + "\": not a PEM CA bundle", 0), 0u)
      << c.status();
}

}  // namespace
}  // namespace star::shim
