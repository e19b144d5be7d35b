// The report's timeline: the control loop's typed events rendered as the report
// contract has them, merged by time with the runtime's own events.
#include "local/run_report.h"

#include <gtest/gtest.h>

namespace star::local {
namespace {

using nlohmann::json;

struct ReportRig {
  api::TrainingJobSpec spec;
  std::vector<ActiveInjection> injections;
  std::vector<std::pair<double, double>> curve;
  json samples = json::array();

  ReportInputs Inputs() {
    ReportInputs in;
    in.spec = &spec;
    in.injections = &injections;
    in.accuracy_curve = &curve;
    in.samples = &samples;
    return in;
  }
};

TEST(RunReportTimeline, LoopEventsAreRenderedWithTheReportStrings) {
  ReportRig rig;
  ReportInputs in = rig.Inputs();
  in.loop_events = {
      op::MakeStragglerEvent(7.5, 2, {api::StragglerCause::kCompute, api::StragglerKind::kDynamic,
                                      2.3456}),
      op::MakeAmpEvent(8, 2, true),
      op::MakeModeEvent(9, {api::SyncMode::kFixedK, 3, {{0, 1, 3, 2}}}),
      op::MakeBatchesEvent(10, {32, 32, 16, 48}),
  };
  const json timeline = BuildReport(in)["timeline"];
  EXPECT_EQ(timeline, json::parse(R"([
    {"t":7.5,"event":"straggler","worker":2,"detail":"cause=compute kind=dynamic slowdown=2.35"},
    {"t":8,"event":"amp_on","worker":2,"detail":""},
    {"t":9,"event":"mode","worker":-1,"detail":"fixed_k k=3 [[0,1,3,2]]"},
    {"t":10,"event":"batches","worker":-1,"detail":"[32,32,16,48]"}])"));
}

TEST(RunReportTimeline, RuntimeAndLoopEventsAreMergedByTimeRuntimeFirstOnATie) {
  ReportRig rig;
  ReportInputs in = rig.Inputs();
  in.run_events = {{0, "start", -1, "policy auto"},
                   {5, "inject", 2, "worker=2,neighbor=3,start=5s"},
                   {9, "reallocate", 2, "neighbor cpu 300m -> 100m"},
                   {20, "stop", -1, "max_iterations"}};
  in.loop_events = {op::MakeStragglerEvent(9, 2, {}), op::MakeRecoveredEvent(12, 2)};
  const json report = BuildReport(in);
  std::vector<std::string> order;
  for (const json& e : report["timeline"]) {
    order.push_back(e["event"].get<std::string>() + "@" + std::to_string(e["t"].get<int>()));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"start@0", "inject@5", "reallocate@9",
                                             "straggler@9", "recovered@12", "stop@20"}));
}

// A run of the manifest's own command: its workers' reports carry the accuracy. The
// report and the progress line take the curve, the final accuracy and the TTA from the
// control loop, and the target_reached event from its timeline.
TEST(RunReportAccuracy, ComesFromTheLoopFedByTheWorkersReports) {
  ReportRig rig;
  rig.spec.workers.replicas = 2;
  rig.spec.training.global_batch_size = 64;
  rig.spec.training.target_accuracy = 0.8;
  auto loop = op::JobControlLoop::Create(rig.spec);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::pair<double, double> measured[] = {{4, 0.55}, {8, 0.81}, {12, 0.79}};
  int64_t iteration = 0;
  for (const auto& [t, accuracy] : measured) {
    iteration += 10;
    for (int w = 0; w < 2; ++w) {
      api::WorkerReport r;
      r.worker = w;
      r.iteration = iteration;
      r.time_seconds = t + 0.5;
      r.local_batch = 32;
      r.compute_seconds = 0.1;
      if (w == 0) {  // the trainer's rank 0 evaluates
        r.accuracy = accuracy;
        r.accuracy_time_seconds = t;
      }
      ASSERT_TRUE(loop->Observe(r).ok());
    }
  }

  ReportInputs in = rig.Inputs();
  in.outcome = "target_reached";
  in.run_events = {{0, "start", -1, "policy auto"}, {13, "stop", -1, "target_reached"}};
  SetLoopFields(*loop, &in);
  const json report = BuildReport(in);
  EXPECT_EQ(report["accuracy_curve"], json::parse("[[4,0.55],[8,0.81],[12,0.79]]"));
  EXPECT_EQ(report["tta_seconds"], 8.0);
  EXPECT_EQ(report["final_accuracy"], 0.79);
  EXPECT_EQ(report["target_accuracy"], 0.8);
  EXPECT_EQ(report["timeline"], json::parse(R"([
    {"t":0,"event":"start","worker":-1,"detail":"policy auto"},
    {"t":8,"event":"target_reached","worker":-1,"detail":"accuracy >= 0.800"},
    {"t":13,"event":"stop","worker":-1,"detail":"target_reached"}])"));

  ProgressInputs p;
  p.t = 13;
  p.iteration = iteration;
  p.target_accuracy = rig.spec.training.target_accuracy;
  SetLoopFields(*loop, &p);
  EXPECT_TRUE(p.target_reached);
  EXPECT_EQ(ProgressLine(p), "[13.0s] iteration 30  accuracy 0.790/0.800  mode ssgd  stragglers []  amp []");
}

TEST(RunReportAccuracy, WithoutAnyAccuracyTheReportHasNullsAndAnEmptyCurve) {
  ReportRig rig;
  rig.spec.workers.replicas = 2;
  rig.spec.training.global_batch_size = 64;
  rig.spec.training.target_accuracy = 0.8;
  auto loop = op::JobControlLoop::Create(rig.spec);
  ASSERT_TRUE(loop.ok()) << loop.status();
  ReportInputs in = rig.Inputs();
  SetLoopFields(*loop, &in);
  const json report = BuildReport(in);
  EXPECT_EQ(report["accuracy_curve"], json::array());
  EXPECT_TRUE(report["tta_seconds"].is_null());
  EXPECT_TRUE(report["final_accuracy"].is_null());
}

}  // namespace
}  // namespace star::local
