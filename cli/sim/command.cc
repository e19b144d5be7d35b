#include "sim/command.h"

#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "input.h"
#include "staged_file.h"
#include "local/run_report.h"
#include "local/runtime.h"
#include "sim/scenario.h"
#include "sim/simulator.h"
#include "star/operator/learned_model.h"

namespace star::sim {
namespace {

constexpr int kExitFailure = 1;

int Fail(std::ostream& err, const Status& s) {
  err << "star: " << s.message() << "\n";
  return kExitFailure;
}

// The policies `--policy` names: one, or every policy for "all".
StatusOr<std::vector<local::Policy>> PoliciesOf(const std::string& text) {
  using local::Policy;
  if (text == "all") {
    return std::vector<Policy>{Policy::kAuto,   Policy::kSsgd, Policy::kAsgd, Policy::kFixedK,
                               Policy::kGroups, Policy::kAmp,  Policy::kBoa};
  }
  auto p = local::ParsePolicy(text);
  if (!p.ok()) {
    return Status::InvalidArgument(
        "--policy: must be one of auto, ssgd, asgd, fixed-k, groups, amp, boa, all; got \"" +
        text + "\"");
  }
  return std::vector<Policy>{*p};
}

StatusOr<api::ModeSelector> SelectorOf(const SimArgs& args) {
  api::ModeSelector selector;
  if (args.selector == "heuristic") {
    selector = api::ModeSelector::kHeuristic;
  } else if (args.selector == "ml") {
    selector = api::ModeSelector::kMl;
  } else {
    return Status::InvalidArgument("--selector: must be one of heuristic, ml; got \"" +
                                   args.selector + "\"");
  }
  if (!args.model.empty()) {
    if (selector != api::ModeSelector::kMl) {
      return Status::InvalidArgument("--model: only with --selector ml");
    }
    if (!std::ifstream(args.model)) {
      return Status::NotFound("--model: cannot open \"" + args.model + "\"");
    }
  }
  return selector;
}

// {"policy":P,"timeline":[...]}: one policy's control-loop timeline, in the report's form.
nlohmann::json TimelineOf(const SimResult& r) {
  return {{"policy", r.policy}, {"timeline", local::TimelineJson({}, r.timeline)}};
}

// A pipeline runs under auto (the loop's depths) or ssgd (static 1F1B) only: "all" is
// those two.
StatusOr<std::vector<local::Policy>> ForPipeline(const std::string& text, std::vector<local::Policy> policies) {
  using local::Policy;
  if (text == "all") return std::vector<Policy>{Policy::kAuto, Policy::kSsgd};
  for (Policy p : policies) {
    if (p != Policy::kAuto && p != Policy::kSsgd) {
      return Status::InvalidArgument("--policy: a pipeline scenario runs under auto or ssgd, got \"" + text + "\"");
    }
  }
  return policies;
}

// The flags' checks that need no scenario.
Status CheckArgs(const SimArgs& args, size_t policies) {
  if (args.seed && *args.seed < 0) {
    return Status::InvalidArgument("--seed: must be >= 0, got " + std::to_string(*args.seed));
  }
  if (!args.trace.empty() && policies > 1) {
    return Status::InvalidArgument("--trace: needs a single --policy, not all");
  }
  return Status::Ok();
}

StatusOr<Scenario> ScenarioOf(const SimArgs& args) {
  auto doc = cli::ReadJsonDocument(args.scenario);
  if (!doc.ok()) return doc.status();
  auto scenario = ScenarioFromJson(*doc);
  if (!scenario.ok()) return scenario.status().WithPrefix(args.scenario);
  if (args.seed) scenario->seed = static_cast<uint64_t>(*args.seed);
  return scenario;
}

StatusOr<SimOptions> OptionsOf(const SimArgs& args, api::ModeSelector selector) {
  SimOptions options;
  options.selector = selector;
  if (selector == api::ModeSelector::kMl) {
    const std::string path = args.model.empty() ? op::DefaultSelectorModelPath() : args.model;
    auto model = op::LoadSelectorModel(path);
    if (!model.ok()) return model.status().WithPrefix("--model");
    options.model = *model;
  }
  return options;
}

}  // namespace

int RunSimCommand(const SimArgs& args, std::ostream& out, std::ostream& err) {
  auto policies = PoliciesOf(args.policy);
  if (!policies.ok()) return Fail(err, policies.status());
  auto selector = SelectorOf(args);
  if (!selector.ok()) return Fail(err, selector.status());
  if (Status s = CheckArgs(args, policies->size()); !s.ok()) return Fail(err, s);
  auto scenario = ScenarioOf(args);
  if (!scenario.ok()) return Fail(err, scenario.status());
  if (scenario->pipeline) {
    policies = ForPipeline(args.policy, *std::move(policies));
    if (!policies.ok()) return Fail(err, policies.status());
  }
  auto options = OptionsOf(args, *selector);
  if (!options.ok()) return Fail(err, options.status());
  cli::StagedFile trace, timeline;  // written only when every policy ran
  if (Status s = trace.Open("--trace", args.trace); !s.ok()) return Fail(err, s);
  if (Status s = timeline.Open("--timeline", args.timeline); !s.ok()) return Fail(err, s);
  if (trace.is_open()) {
    trace.stream().precision(9);
    trace.stream() << "iteration,worker,compute_seconds,communication_seconds\n";
    options->trace = &trace.stream();
  }

  nlohmann::json results = nlohmann::json::array(), timelines = nlohmann::json::array();
  for (local::Policy p : *policies) {
    auto r = Simulate(*scenario, p, *options);
    if (!r.ok()) return Fail(err, r.status().WithPrefix(std::string(local::ToString(p))));
    results.push_back(ToJson(*r));
    if (timeline.is_open()) timelines.push_back(TimelineOf(*r));
  }
  if (timeline.is_open()) timeline.stream() << nlohmann::json{{"timelines", timelines}}.dump(1) << '\n';
  for (cli::StagedFile* f : {&trace, &timeline}) {
    if (Status s = f->Close(); !s.ok()) return Fail(err, s);
  }
  for (cli::StagedFile* f : {&trace, &timeline}) {
    if (Status s = f->Commit(); !s.ok()) return Fail(err, s);
  }
  out << nlohmann::json{{"results", results}}.dump() << std::endl;
  return out ? 0 : kExitFailure;
}

}  // namespace star::sim
