#include "sim/command.h"

#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "input.h"
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

}  // namespace

int RunSimCommand(const SimArgs& args, std::ostream& out, std::ostream& err) {
  auto policies = PoliciesOf(args.policy);
  if (!policies.ok()) return Fail(err, policies.status());
  auto selector = SelectorOf(args);
  if (!selector.ok()) return Fail(err, selector.status());
  if (args.seed && *args.seed < 0) {
    return Fail(err, Status::InvalidArgument("--seed: must be >= 0, got " +
                                             std::to_string(*args.seed)));
  }
  if (!args.trace.empty() && policies->size() > 1) {
    return Fail(err, Status::InvalidArgument("--trace: needs a single --policy, not all"));
  }
  auto doc = cli::ReadJsonDocument(args.scenario);
  if (!doc.ok()) return Fail(err, doc.status());
  auto scenario = ScenarioFromJson(*doc);
  if (!scenario.ok()) return Fail(err, scenario.status().WithPrefix(args.scenario));
  if (args.seed) scenario->seed = static_cast<uint64_t>(*args.seed);

  SimOptions options;
  options.selector = *selector;
  if (*selector == api::ModeSelector::kMl) {
    const std::string path = args.model.empty() ? op::DefaultSelectorModelPath() : args.model;
    auto model = op::LoadSelectorModel(path);
    if (!model.ok()) return Fail(err, model.status().WithPrefix("--model"));
    options.model = *model;
  }
  std::ofstream trace;
  if (!args.trace.empty()) {
    trace.open(args.trace);
    if (!trace) return Fail(err, Status::NotFound("--trace: cannot write \"" + args.trace + "\""));
    trace.precision(9);
    trace << "iteration,worker,compute_seconds,communication_seconds\n";
    options.trace = &trace;
  }

  nlohmann::json results = nlohmann::json::array();
  for (local::Policy p : *policies) {
    auto r = Simulate(*scenario, p, options);
    if (!r.ok()) return Fail(err, r.status().WithPrefix(std::string(local::ToString(p))));
    results.push_back(ToJson(*r));
  }
  if (trace.is_open()) {
    trace.close();
    if (!trace) return Fail(err, Status::Unavailable("--trace: writing \"" + args.trace + "\" failed"));
  }
  out << nlohmann::json{{"results", results}}.dump() << std::endl;
  return out ? 0 : kExitFailure;
}

}  // namespace star::sim
