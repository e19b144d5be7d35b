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
  json curve = json::array();
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

}  // namespace
}  // namespace star::local
