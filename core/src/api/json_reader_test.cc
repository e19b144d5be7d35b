#include "star/core/api/json_reader.h"

#include <gtest/gtest.h>

#include "star/core/api/worker_report.h"

namespace star::api {
namespace {

using nlohmann::json;

TEST(ObjectReader, NamesFieldPathAndReasonOnRangeError) {
  json j = {{"replicas", 0}};
  int replicas = 1;
  ObjectReader rd(j, "spec.workers");
  rd.Int("replicas", &replicas).AtLeast("replicas", replicas, 1);
  EXPECT_EQ(rd.status().message(), "spec.workers.replicas: must be >= 1, got 0");
}

TEST(ObjectReader, MissingRequiredAndWrongType) {
  json j = {{"a", "text"}};
  int64_t a = 0, b = 0;
  EXPECT_EQ(ObjectReader(j, "").Int("b", &b).status().message(), "b: required field is missing");
  EXPECT_EQ(ObjectReader(j, "x").Int("a", &a).status().message(),
            "x.a: must be an integer, got string");
  EXPECT_EQ(ObjectReader(json::array(), "spec").status().message(),
            "spec: must be an object, got array");
}

TEST(ObjectReader, OptionalKeepsDefaultAndFirstErrorWins) {
  json j = {{"x", 1.5}, {"y", true}};
  int64_t x = 0;
  double z = 7;
  bool y = false;
  ObjectReader rd(j, "");
  rd.Number("z", &z, Need::kOptional).Bool("y", &y).Int("x", &x).Fail("y", "second error");
  EXPECT_EQ(z, 7);
  EXPECT_TRUE(y);
  EXPECT_EQ(rd.status().message(), "x: must be an integer, got 1.5");
}

TEST(ObjectReader, EnumListsAllowedValues) {
  json j = {{"policy", "Fast"}};
  std::string p;
  ObjectReader rd(j, "spec.synchronization");
  rd.Enum("policy", &p, {"Auto", "SSGD"});
  EXPECT_EQ(rd.status().message(),
            "spec.synchronization.policy: must be one of Auto, SSGD, got \"Fast\"");
}

TEST(ObjectReader, ArraysReportTheBadElement) {
  json j = {{"t", {1.0, 2.0, "x"}}};
  std::vector<double> t;
  ObjectReader rd(j, "");
  rd.NumberArray("t", &t);
  EXPECT_EQ(rd.status().message(), "t[2]: must be a number, got string");
}

TEST(ObjectReader, RejectUnknownNamesTheField) {
  json j = {{"a", 1}, {"typo", 2}};
  ObjectReader rd(j, "spec");
  rd.RejectUnknown({"a"});
  EXPECT_EQ(rd.status().message(), "spec.typo: unknown field");
}

TEST(WorkerReportCodec, RoundTrips) {
  WorkerReport r;
  r.job = "default/mnist";
  r.worker = 3;
  r.iteration = 120;
  r.iterations = 5;
  r.time_seconds = 12.5;
  r.compute_seconds = 0.25;
  r.communication_seconds = 0.05;
  r.wait_seconds = 0.1;
  r.local_batch = 64;
  r.amp = true;
  r.local_grad_sq_norm = 4.0;
  r.global_grad_sq_norm = 1.5;
  auto back = WorkerReportFromJson(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ToJson(*back), ToJson(r));
  EXPECT_FALSE(back->loss.has_value());
  // Not measured: absent on the wire, as in reports from before the accuracy fields.
  EXPECT_FALSE(ToJson(r).contains("accuracy"));
  EXPECT_FALSE(ToJson(r).contains("accuracy_time_seconds"));
  EXPECT_FALSE(back->accuracy.has_value());
  EXPECT_FALSE(back->accuracy_time_seconds.has_value());
}

TEST(WorkerReportCodec, AccuracyRoundTripsWithTheTimeItWasMeasured) {
  WorkerReport r;
  r.worker = 1;
  r.iteration = 40;
  r.time_seconds = 30;
  r.local_batch = 16;
  r.accuracy = 0.82;
  r.accuracy_time_seconds = 27.5;
  const json j = ToJson(r);
  EXPECT_EQ(j["accuracy"], 0.82);
  EXPECT_EQ(j["accuracy_time_seconds"], 27.5);
  auto back = WorkerReportFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->accuracy, 0.82);
  EXPECT_EQ(back->accuracy_time_seconds, 27.5);
  EXPECT_EQ(ToJson(*back), j);
}

TEST(WorkerReportCodec, AccuracyWithoutItsTimeWasMeasuredAtTheReportsTime) {
  WorkerReport r;
  r.time_seconds = 12.25;
  r.local_batch = 8;
  json j = ToJson(r);
  j["accuracy"] = 0.5;
  auto back = WorkerReportFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->accuracy, 0.5);
  EXPECT_EQ(back->accuracy_time_seconds, 12.25);
  r.accuracy = 0.5;  // set in code without a time: written with the report's time
  EXPECT_EQ(ToJson(r)["accuracy_time_seconds"], 12.25);
}

TEST(WorkerReportCodec, LookaheadRoundTripsAndIsBounded) {
  WorkerReport r;
  r.local_batch = 8;
  EXPECT_FALSE(ToJson(r).contains("lookahead"));
  r.lookahead = 8;
  json j = ToJson(r);
  EXPECT_EQ(j["lookahead"], 8);
  auto back = WorkerReportFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lookahead, 8);
  j["lookahead"] = -1;
  EXPECT_EQ(WorkerReportFromJson(j).status().message(), "lookahead: must be >= 0, got -1");
  j["lookahead"] = kMaxLookahead + 1;
  EXPECT_EQ(WorkerReportFromJson(j).status().message(), "lookahead: must be <= 1024, got 1025");
}

TEST(WorkerReportCodec, LinkRoundTripsAsThreeFieldsOrNone) {
  WorkerReport r;
  r.worker = 2;
  r.local_batch = 8;
  EXPECT_FALSE(ToJson(r).contains("link_peer"));
  r.link = LinkReading{1, 0.004, 65536};
  json j = ToJson(r);
  EXPECT_EQ(j["link_peer"], 1);
  EXPECT_EQ(j["link_bytes"], 65536);
  auto back = WorkerReportFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->link, r.link);
  auto message = [](json bad) { return WorkerReportFromJson(bad).status().message(); };
  json self = j;
  self["link_peer"] = 2;
  EXPECT_EQ(message(self), "link_peer: must not be the worker itself");
  json no_bytes = j;
  no_bytes.erase("link_bytes");
  EXPECT_EQ(message(no_bytes), "link_bytes: required with the other link_ fields");
  json empty = j;
  empty["link_bytes"] = 0;
  EXPECT_EQ(message(empty), "link_bytes: must be >= 1, got 0");
  json negative = j;
  negative["link_seconds"] = -1;
  EXPECT_EQ(message(negative), "link_seconds: must be >= 0, got -1");
}

TEST(WorkerReportCodec, PipelineRoundTripsAndNamesItsBadFields) {
  WorkerReport r;
  r.worker = 5;
  r.local_batch = 32;
  EXPECT_FALSE(ToJson(r).contains("pipeline"));
  r.pipeline = PipelineReading{1, 0.002, 0.004, {{4, 0.0005, 32768, 0.01, 0.04}, {6, 0.02, 32768, 0}}};
  json j = ToJson(r);
  EXPECT_EQ(j["pipeline"]["links"][1]["peer"], 6);
  EXPECT_FALSE(j["pipeline"]["links"][1].contains("latency_seconds"));  // none: left out
  auto back = WorkerReportFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pipeline, r.pipeline);
  auto message = [&j](const char* pointer, json v) {
    json bad = j;
    bad[json::json_pointer(pointer)] = std::move(v);
    return WorkerReportFromJson(bad).status().message();
  };
  EXPECT_EQ(message("/pipeline/links/0/peer", 5), "pipeline.links[0].peer: must not be the worker itself");
  EXPECT_EQ(message("/pipeline/links/1/bytes", 0), "pipeline.links[1].bytes: must be >= 1, got 0");
  EXPECT_EQ(message("/pipeline/links/0/latency_seconds", -0.5),
            "pipeline.links[0].latency_seconds: must be >= 0, got -0.5");
  EXPECT_EQ(message("/pipeline/forward_seconds", -1), "pipeline.forward_seconds: must be >= 0, got -1");
  EXPECT_EQ(message("/pipeline/links/2", j["pipeline"]["links"][0]),
            "pipeline.links: must have at most 2 items, got 3");
  EXPECT_EQ(message("/pipeline/links", 3), "pipeline.links: must be an array, got integer");
  EXPECT_EQ(message("/pipeline/depth", 3), "pipeline.depth: unknown field");
  json no_links = j;
  no_links["pipeline"].erase("links");
  auto bare = WorkerReportFromJson(no_links);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->pipeline->links.empty());
}

TEST(WorkerReportCodec, RejectsBadAccuracyNamingTheField) {
  WorkerReport valid;
  valid.local_batch = 8;
  valid.accuracy = 0.5;
  json base = ToJson(valid);
  auto with = [&](const char* k, json v) {
    json j = base;
    j[k] = std::move(v);
    return WorkerReportFromJson(j).status().message();
  };
  EXPECT_EQ(with("accuracy", 1.5), "accuracy: must be <= 1, got 1.5");
  EXPECT_EQ(with("accuracy", -0.25), "accuracy: must be >= 0, got -0.25");
  EXPECT_EQ(with("accuracy", "high"), "accuracy: must be a number, got string");
  EXPECT_EQ(with("accuracy_time_seconds", -1), "accuracy_time_seconds: must be >= 0, got -1");
  json alone = base;
  alone.erase("accuracy");
  EXPECT_EQ(WorkerReportFromJson(alone).status().message(),
            "accuracy_time_seconds: only allowed with accuracy");
}

TEST(WorkerReportCodec, RejectsMalformed) {
  WorkerReport valid;
  valid.local_batch = 8;
  json base = ToJson(valid);
  auto with = [&](const char* k, json v) {
    json j = base;
    j[k] = std::move(v);
    return WorkerReportFromJson(j).status().message();
  };
  EXPECT_EQ(with("worker", -1), "worker: must be >= 0, got -1");
  EXPECT_EQ(with("compute_seconds", "fast"), "compute_seconds: must be a number, got string");
  EXPECT_EQ(with("local_batch", 0), "local_batch: must be >= 1, got 0");
  EXPECT_EQ(with("global_grad_sq_norm", -2.0), "global_grad_sq_norm: must be >= 0, got -2");
  EXPECT_EQ(with("extra", 1), "extra: unknown field");
  json missing = base;
  missing.erase("iteration");
  EXPECT_EQ(WorkerReportFromJson(missing).status().message(), "iteration: required field is missing");
}

}  // namespace
}  // namespace star::api
