#include "sim/scenario.h"

#include <gtest/gtest.h>

namespace star::sim {
namespace {

using nlohmann::json;

json Contract() {
  return json::parse(R"({"architecture": "AllReduce", "workers": 64, "batch_per_worker": 32,
    "noise_scale": 1000, "min_updates": 2000,
    "compute_seconds_per_sample": 0.002, "communication_seconds": 0.05, "jitter": 0.05,
    "episodes": [{"worker": 3, "start": 100, "end": 400, "cpu": 0.4},
                 {"worker": 7, "start": 0, "bandwidth": 0.3}],
    "seed": 1})");
}

std::string ErrorOf(const json& j) {
  auto s = ScenarioFromJson(j);
  return s.ok() ? "" : s.status().message();
}

TEST(ScenarioFromJson, DecodesTheContractScenario) {
  auto s = ScenarioFromJson(Contract());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->architecture, api::Architecture::kAllReduce);
  EXPECT_EQ(s->workers, 64);
  EXPECT_EQ(s->batch_per_worker, 32);
  EXPECT_EQ(s->noise_scale, 1000);
  EXPECT_EQ(s->min_updates, 2000);
  EXPECT_EQ(s->compute_seconds_per_sample, 0.002);
  EXPECT_EQ(s->communication_seconds, 0.05);
  EXPECT_EQ(s->jitter, 0.05);
  EXPECT_EQ(s->seed, 1u);
  ASSERT_EQ(s->episodes.size(), 2u);
  EXPECT_EQ(s->episodes[0].worker, 3);
  EXPECT_EQ(s->episodes[0].start, 100);
  EXPECT_EQ(s->episodes[0].end, 400);
  EXPECT_EQ(s->episodes[0].cpu, 0.4);
  EXPECT_FALSE(s->episodes[0].bandwidth);
  EXPECT_FALSE(s->episodes[1].end);  // lasts to the end
  EXPECT_EQ(s->episodes[1].bandwidth, 0.3);
}

TEST(ScenarioToJson, RoundTripsEveryField) {
  json j = Contract();
  j["architecture"] = "ParameterServer";
  j["episodes"].push_back({{"worker", 5}, {"start", 7.5}, {"end", 9.25}, {"cpu", 0.5}, {"bandwidth", 0.25}});
  j.update({{"report_every", 3}, {"amp_speedup", 1.25}, {"staleness_penalty", 0.5},
            {"asgd_cpu_overhead", 1.5}, {"asgd_bandwidth_overhead", 2.5}, {"parameter_servers", 4},
            {"server_update_seconds", 0.001}, {"min_k", 40}, {"max_seconds", 1234.5}, {"seed", 99},
            {"amp_available", false}, {"momentum", 0.9}, {"group_replicas", true},
            {"detection_window", 10}});
  auto first = ScenarioFromJson(j);
  ASSERT_TRUE(first.ok()) << first.status();
  const json written = ScenarioToJson(*first);
  EXPECT_EQ(written, j) << "every field as given, and nothing more";
  auto second = ScenarioFromJson(written);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(ScenarioToJson(*second), written);
  EXPECT_FALSE(written["episodes"][1].contains("end")) << "an episode to the end of the run";
  EXPECT_FALSE(ScenarioToJson(*ScenarioFromJson(Contract())).contains("min_k"));
}

TEST(ScenarioFromJson, OptionalFieldsKeepTheirDocumentedDefaults) {
  json j = Contract();
  j.erase("architecture");
  j.erase("jitter");
  j.erase("seed");
  j.erase("episodes");
  auto s = ScenarioFromJson(j);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->architecture, api::Architecture::kAllReduce);
  EXPECT_EQ(s->jitter, 0);
  EXPECT_EQ(s->seed, 1u);
  EXPECT_TRUE(s->episodes.empty());
  EXPECT_EQ(s->report_every, 2);
  EXPECT_EQ(s->amp_speedup, kDefaultAmpSpeedup);
  EXPECT_EQ(s->staleness_penalty, kDefaultStalenessPenalty);
  EXPECT_EQ(s->asgd_cpu_overhead, kDefaultAsgdCpuOverhead);
  EXPECT_EQ(s->asgd_bandwidth_overhead, kDefaultAsgdBandwidthOverhead);
  EXPECT_EQ(s->parameter_servers, 1);
  EXPECT_FALSE(s->min_k);
  EXPECT_TRUE(s->amp_available);
  EXPECT_EQ(s->momentum, 0);
  EXPECT_FALSE(s->group_replicas);
  EXPECT_FALSE(s->detection_window);
  EXPECT_DOUBLE_EQ(TimeLimitSeconds(*s), kDefaultTimeLimitFactor * CleanSsgdSeconds(*s));
}

TEST(ScenarioFromJson, RefusesBadFieldsNamingThem) {
  json j = Contract();
  j["workers"] = 0;
  EXPECT_EQ(ErrorOf(j), "workers: must be >= 1, got 0");

  j = Contract();
  j["episodes"][1]["cpu"] = 2;
  EXPECT_EQ(ErrorOf(j), "episodes[1].cpu: must be in (0, 1], got 2");

  j = Contract();
  j["episodes"][0]["bandwidth"] = 0;
  EXPECT_EQ(ErrorOf(j), "episodes[0].bandwidth: must be in (0, 1], got 0");

  j = Contract();
  j["episodes"][0]["worker"] = 64;
  EXPECT_EQ(ErrorOf(j), "episodes[0].worker: must be < workers (64), got 64");

  j = Contract();
  j["episodes"][0]["end"] = 100;
  EXPECT_EQ(ErrorOf(j), "episodes[0].end: must be > 100, got 100");

  j = Contract();
  j["episodes"][0].erase("cpu");
  EXPECT_EQ(ErrorOf(j), "episodes[0].cpu: an episode needs cpu or bandwidth (or both)");

  j = Contract();
  j["batch_per_worker"] = 1.5;
  EXPECT_NE(ErrorOf(j).find("batch_per_worker: "), std::string::npos);

  j = Contract();
  j["compute_seconds_per_sample"] = 0;
  EXPECT_EQ(ErrorOf(j), "compute_seconds_per_sample: must be > 0, got 0");

  j = Contract();
  j["architecture"] = "Ring";
  EXPECT_NE(ErrorOf(j).find("architecture: "), std::string::npos);

  j = Contract();
  j["min_k"] = 65;
  EXPECT_EQ(ErrorOf(j), "min_k: must be <= workers (64), got 65");

  j = Contract();
  j["momentum"] = 1;
  EXPECT_EQ(ErrorOf(j), "momentum: must be < 1, got 1");

  j = Contract();
  j["momentum"] = -0.5;
  EXPECT_EQ(ErrorOf(j), "momentum: must be >= 0, got -0.5");

  j = Contract();
  j["group_replicas"] = "yes";
  EXPECT_NE(ErrorOf(j).find("group_replicas: "), std::string::npos);

  j = Contract();
  j["detection_window"] = 2;
  EXPECT_EQ(ErrorOf(j), "detection_window: must be >= 3, got 2");

  j = Contract();
  j["wrokers"] = 3;
  EXPECT_EQ(ErrorOf(j), "wrokers: unknown field");

  j = Contract();
  j["episodes"][1]["cpus"] = 0.5;
  EXPECT_EQ(ErrorOf(j), "episodes[1].cpus: unknown field");

  j = Contract();
  j.erase("min_updates");
  EXPECT_EQ(ErrorOf(j), "min_updates: required field is missing");
}

// Four stages in two replicas, the link between workers 1 and 2 delayed 40 ms from 10 s.
json Pipeline() {
  return json::parse(R"({"workers": 8, "batch_per_worker": 256, "noise_scale": 100,
    "min_updates": 50, "communication_seconds": 0.02,
    "pipeline": {"stages": 4, "micro_batches": 8, "max_in_flight": 6,
                 "forward_seconds": [0.006, 0.003, 0.003, 0.002],
                 "backward_seconds": [0.012, 0.006, 0.006, 0.004],
                 "activation_seconds": 0.0005, "gradient_seconds": 0.0004, "outside_seconds": 0.03},
    "episodes": [{"worker": 1, "start": 10, "delay": 0.04, "peer": 2}]})");
}

TEST(ScenarioFromJson, DecodesAPipelineAndRoundTripsIt) {
  auto s = ScenarioFromJson(Pipeline());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->pipeline);
  EXPECT_EQ(s->pipeline->stages, 4);
  EXPECT_EQ(s->pipeline->micro_batches, 8);
  EXPECT_EQ(s->pipeline->max_in_flight, 6);
  EXPECT_EQ(s->pipeline->forward_seconds, (std::vector<double>{0.006, 0.003, 0.003, 0.002}));
  EXPECT_EQ(s->pipeline->gradient_seconds, 0.0004);
  EXPECT_EQ(s->pipeline->outside_seconds, 0.03);
  EXPECT_EQ(s->episodes[0].delay, 0.04);
  EXPECT_EQ(s->episodes[0].peer, 2);
  auto back = ScenarioFromJson(ScenarioToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ScenarioToJson(*back), ScenarioToJson(*s));
  // The clean TTA bound: min_updates x (1 + phi / (2 x 256)) x (the model's 1F1B + 0.03
  // outside + 0.02 all-reduce across the two replicas).
  const auto model = pipeline::IterationSeconds(CleanCosts(*s->pipeline), {4, 3, 2, 1});
  ASSERT_TRUE(model.ok());
  EXPECT_DOUBLE_EQ(CleanSsgdSeconds(*s), 50 * (1 + 100.0 / 512) * (*model + 0.05));
}

TEST(ScenarioFromJson, RefusesBadPipelinesNamingTheField) {
  auto with = [](const char* pointer, json v) {
    json j = Pipeline();
    j[json::json_pointer(pointer)] = std::move(v);
    return ErrorOf(j);
  };
  EXPECT_EQ(with("/workers", 6), "workers: must be a multiple of pipeline.stages (4), got 6");
  EXPECT_EQ(with("/batch_per_worker", 100), "batch_per_worker: must be a multiple of pipeline.micro_batches (8), got 100");
  EXPECT_EQ(with("/pipeline/micro_batches", 3), "pipeline.micro_batches: must be >= 4, got 3");
  EXPECT_EQ(with("/pipeline/stages", 1), "pipeline.stages: must be >= 2, got 1");
  EXPECT_EQ(with("/pipeline/max_in_flight", 2), "pipeline.max_in_flight: must be >= 4, got 2");
  EXPECT_EQ(with("/pipeline/forward_seconds", json::array({0.1, 0.1})),
            "pipeline.forward_seconds: must have one entry per stage (4), got 2");
  EXPECT_EQ(with("/pipeline/backward_seconds/2", -1), "pipeline.backward_seconds: entries must be >= 0, got -1");
  EXPECT_EQ(with("/pipeline/links", 1), "pipeline.links: unknown field");
  EXPECT_EQ(with("/architecture", "ParameterServer"), "architecture: a pipeline must be AllReduce");
  EXPECT_EQ(with("/episodes/0/peer", 3), "episodes[0].peer: must be a neighbouring stage of worker 1 in its replica, got 3");
  EXPECT_EQ(with("/episodes/0/delay", 11), "episodes[0].delay: must be <= 10, got 11");
  json lone = Pipeline();
  lone["episodes"][0].erase("peer");
  EXPECT_EQ(ErrorOf(lone), "episodes[0].peer: required with delay: the stage whose link is delayed");
  // Across replicas: worker 3 is the last stage of replica 0, worker 4 the first of replica 1.
  json across = Pipeline();
  across["episodes"][0] = {{"worker", 3}, {"delay", 0.01}, {"peer", 4}};
  EXPECT_EQ(ErrorOf(across), "episodes[0].peer: must be a neighbouring stage of worker 3 in its replica, got 4");
  json data_parallel = Contract();
  data_parallel["episodes"][0]["delay"] = 0.01;
  data_parallel["episodes"][0]["peer"] = 4;
  EXPECT_EQ(ErrorOf(data_parallel), "episodes[0].delay: only for a pipeline");
  json no_compute = Contract();
  no_compute.erase("compute_seconds_per_sample");
  EXPECT_EQ(ErrorOf(no_compute), "compute_seconds_per_sample: required field is missing");
}

}  // namespace
}  // namespace star::sim
