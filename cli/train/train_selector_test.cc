#include "train/train_selector.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "star/operator/xgboost_selector.h"

namespace star::train {
namespace {

std::string TempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("star-train-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TrainSelectorArgs Tiny(const std::string& out) {
  TrainSelectorArgs a;
  a.scenarios = 4;
  a.seed = 3;
  a.out = out;
  a.rounds = 3;
  a.holdout = 0.25;
  a.min_workers = 4;
  a.max_workers = 8;
  return a;
}

TEST(RandomScenario, StaysInItsRanges) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    const sim::Scenario s = RandomScenario(rng, 8, 1024);
    EXPECT_GE(s.workers, 8);
    EXPECT_LE(s.workers, 1024);
    ASSERT_FALSE(s.episodes.empty());
    EXPECT_LE(static_cast<int>(s.episodes.size()), std::max(1, s.workers / 8));
    for (const auto& e : s.episodes) {
      EXPECT_GE(e.worker, 0);
      EXPECT_LT(e.worker, s.workers);
      EXPECT_TRUE(e.cpu.has_value() != e.bandwidth.has_value());
    }
  }
}

TEST(Label, PicksTheClassWithTheLowestSimulatedTta) {
  std::mt19937_64 rng(2);
  const sim::Scenario s = RandomScenario(rng, 4, 8);
  auto l = Label(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_GE(l->tta[l->label], 0);
  for (double t : l->tta) {
    if (t >= 0) {
      EXPECT_LE(l->tta[l->label], t);
    }
  }
  EXPECT_GT(l->auto_tta, 0);
  EXPECT_EQ(l->features.workers, s.workers);
}

TEST(Label, ClosedLoopPicksTheClassOfTheFastestAutoRun) {
  std::mt19937_64 rng(2);
  const sim::Scenario s = RandomScenario(rng, 4, 8);
  auto l = Label(s, /*closed_loop=*/true);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_GE(l->tta[l->label], 0);
  int simulated = 0;
  for (double t : l->tta) {
    if (t < 0) continue;
    ++simulated;
    EXPECT_LE(l->tta[l->label], t);
  }
  EXPECT_GE(simulated, 2);
  if (s.architecture == api::Architecture::kAllReduce) {
    EXPECT_LT(l->tta[select::kSelectorClassAsgd], 0);
  }
  // The heuristic's run (policy auto, selector Heuristic) is the same either way.
  auto open = Label(s);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->auto_tta, l->auto_tta);
}

// The heuristic's class of an 8-worker scenario whose worker 0 keeps `cpu` of its compute
// speed throughout, computed here from the same times.
int HeuristicClassOf(const sim::Scenario& s, double cpu) {
  select::SelectionInput in;
  in.architecture = s.architecture;
  in.batch_per_worker = s.batch_per_worker;
  in.noise_scale = s.noise_scale;
  const double compute = s.batch_per_worker * s.compute_seconds_per_sample;
  in.iteration_seconds.assign(s.workers, compute + s.communication_seconds);
  in.iteration_seconds[0] = compute / cpu + s.communication_seconds;
  select::SelectOptions o = sim::SimOptions{}.select;
  o.min_k = s.min_k.value_or(1);
  auto h = select::Select(in, o);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return h.ok() ? select::ClassOf(h->mode, h->k, s.workers) : -1;
}

TEST(Label, NamesTheHeuristicsClassForTheContendedTimes) {
  sim::Scenario s;
  s.architecture = api::Architecture::kParameterServer;
  s.workers = 8;
  s.batch_per_worker = 32;
  s.noise_scale = 100;
  s.compute_seconds_per_sample = 0.002;
  s.communication_seconds = 0.01;
  s.min_updates = 50;
  auto clean = Label(s);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_EQ(clean->heuristic_class, select::kSelectorClassSsgd);
  EXPECT_EQ(clean->label, clean->best);

  sim::Episode e;
  e.worker = 0;
  e.cpu = 0.1;
  s.episodes = {e};
  const int expected = HeuristicClassOf(s, 0.1);
  ASSERT_NE(expected, select::kSelectorClassSsgd) << "the straggler should move the heuristic";
  auto slow = Label(s);
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->heuristic_class, expected);

  s.min_k = 7;  // the loop's minK bounds the heuristic's k as in the loop
  ASSERT_NE(HeuristicClassOf(s, 0.1), expected) << "minK should change the heuristic's class";
  auto bounded = Label(s);
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  EXPECT_EQ(bounded->heuristic_class, HeuristicClassOf(s, 0.1));
}

TEST(DeferredLabel, TakesTheHeuristicsClassOnlyWhereItsRunIsCloseEnoughToTheBest) {
  LabelledScenario l;
  l.tta = {10, 20, -1, 8, 30, 30, 30};
  l.best = l.label = 3;
  l.heuristic_class = select::kSelectorClassGroups;
  l.auto_tta = 8.6;  // 7.5% above the best class
  EXPECT_EQ(DeferredLabel(l, -1), 3);  // off
  EXPECT_EQ(DeferredLabel(l, 0.05), 3);
  EXPECT_EQ(DeferredLabel(l, 0.1), select::kSelectorClassGroups);
  l.auto_tta = 7.9;  // the heuristic beat every single class
  EXPECT_EQ(DeferredLabel(l, 0), select::kSelectorClassGroups);
}

TEST(TrainSelector, WritesALoadableModelReproduciblyFromTheSeed) {
  const std::string a = TempFile("a.json"), b = TempFile("b.json");
  std::ostringstream out, err;
  ASSERT_EQ(RunTrainSelectorCommand(Tiny(a), out, err), 0) << err.str();
  EXPECT_NE(out.str().find("\"holdout_accuracy\""), std::string::npos);
  EXPECT_NE(err.str().find("4/4 scenarios labelled"), std::string::npos);
  std::ostringstream out2, err2;
  ASSERT_EQ(RunTrainSelectorCommand(Tiny(b), out2, err2), 0) << err2.str();
  EXPECT_EQ(Slurp(a), Slurp(b));
  auto model = op::XgboostSelector::Load(a);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(TrainSelector, DeferringLabelsAreCountedInTheSummary) {
  const std::string file = TempFile("deferred.json");
  TrainSelectorArgs args = Tiny(file);
  args.labels = "closed";
  args.defer_within = 0.5;
  std::ostringstream out, err;
  ASSERT_EQ(RunTrainSelectorCommand(args, out, err), 0) << err.str();
  const nlohmann::json summary = nlohmann::json::parse(out.str());
  EXPECT_EQ(summary["defer_within"], 0.5);
  // The same scenarios, labelled here: the training ones come first.
  std::mt19937_64 rng(args.seed);
  int deferred = 0;
  for (int i = 0; i < summary["train"].get<int>(); ++i) {
    auto l = Label(RandomScenario(rng, args.min_workers, args.max_workers), true);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    deferred += DeferredLabel(*l, args.defer_within) != l->best;
  }
  EXPECT_EQ(summary["deferred"].get<int>(), deferred);
  std::filesystem::remove(file);
}

TEST(TrainSelector, RefusesBadArgumentsNamingTheFlag) {
  std::ostringstream out, err;
  TrainSelectorArgs args = Tiny(TempFile("never.json"));
  args.scenarios = 1;
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--scenarios"), std::string::npos);
  args = Tiny("");
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--out"), std::string::npos);
  args = Tiny(TempFile("never.json"));
  args.labels = "both";
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--labels"), std::string::npos);
  args = Tiny(TempFile("never.json"));
  args.defer_within = 0.05;  // with the default open labels
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--defer-within"), std::string::npos);
  EXPECT_TRUE(out.str().empty());
}

TEST(TrainSelector, EvaluatesAModelInTheClosedLoop) {
  const std::string model = TempFile("eval.json");
  std::ostringstream out, err;
  ASSERT_EQ(RunTrainSelectorCommand(Tiny(model), out, err), 0) << err.str();

  TrainSelectorArgs args;
  args.evaluate = 3;
  args.model = model;
  args.seed = 9;
  args.min_workers = 4;
  args.max_workers = 8;
  args.worst_scenario = TempFile("worst-scenario.json");
  std::ostringstream eout, eerr;
  ASSERT_EQ(RunTrainSelectorCommand(args, eout, eerr), 0) << eerr.str();
  const auto summary = nlohmann::json::parse(eout.str());
  EXPECT_EQ(summary["evaluated"], 3);
  ASSERT_EQ(summary["runs"].size(), 3u);
  int at_least = 0;
  for (const auto& r : summary["runs"]) at_least += r[3].get<double>() <= r[2].get<double>();
  EXPECT_DOUBLE_EQ(summary["ml_at_least_as_good"].get<double>(), at_least / 3.0);
  EXPECT_NE(eerr.str().find("3/3 scenarios evaluated"), std::string::npos);

  // The same scenarios, simulated one by one, give the same TTAs (closed loop: the
  // model selects inside the control loop, as `star sim --selector ml` runs it).
  auto loaded = op::XgboostSelector::Load(model);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const std::shared_ptr<select::LearnedSelector> shared = std::move(*loaded);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 3; ++i) {
    auto e = Evaluate(RandomScenario(rng, 4, 8), shared);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_DOUBLE_EQ(e->heuristic_tta, summary["runs"][i][2].get<double>());
    EXPECT_DOUBLE_EQ(e->ml_tta, summary["runs"][i][3].get<double>());
  }
  // A --worst-scenario that cannot be written is refused before any scenario is run.
  TrainSelectorArgs unwritable = args;
  unwritable.worst_scenario = TempFile("no-such-dir") + "/worst.json";
  std::ostringstream uout, uerr;
  EXPECT_EQ(RunTrainSelectorCommand(unwritable, uout, uerr), 1);
  EXPECT_NE(uerr.str().find("--worst-scenario"), std::string::npos) << uerr.str();
  EXPECT_EQ(uerr.str().find("scenarios evaluated"), std::string::npos) << "it ran scenarios first";
  EXPECT_TRUE(uout.str().empty());
  // --worst-scenario: the scenario of the worst gain, readable by star sim.
  std::ifstream worst_file(args.worst_scenario);
  auto worst = sim::ScenarioFromJson(nlohmann::json::parse(worst_file));
  ASSERT_TRUE(worst.ok()) << worst.status();
  auto w = Evaluate(*worst, shared);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_DOUBLE_EQ((w->heuristic_tta - w->ml_tta) / w->heuristic_tta, summary["worst_gain"].get<double>());
  std::filesystem::remove(args.worst_scenario);
  std::filesystem::remove(model);
}

TEST(TrainSelector, EvaluateNeedsALoadableModel) {
  TrainSelectorArgs args;
  args.evaluate = 2;
  std::ostringstream out, err;
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--model"), std::string::npos);
  args.model = "/nonexistent/selector.json";
  std::ostringstream out2, err2;
  EXPECT_EQ(RunTrainSelectorCommand(args, out2, err2), 1);
  EXPECT_NE(err2.str().find("/nonexistent/selector.json"), std::string::npos);
  EXPECT_TRUE(out2.str().empty());
}

TEST(TrainSelector, EvaluateRefusesABadGateNamingTheFlag) {
  TrainSelectorArgs args;
  args.evaluate = 2;
  args.model = "/nonexistent/selector.json";  // refused before the model is read
  args.margin = -0.5;
  std::ostringstream out, err;
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--margin: must be >= 0"), std::string::npos) << err.str();
  EXPECT_TRUE(out.str().empty());
  args.margin = 0.4;
  args.max_estimate_ratio = 0.5;
  std::ostringstream out2, err2;
  EXPECT_EQ(RunTrainSelectorCommand(args, out2, err2), 1);
  EXPECT_NE(err2.str().find("--max-estimate-ratio: must be >= 1"), std::string::npos) << err2.str();
  EXPECT_TRUE(out2.str().empty());
}

}  // namespace
}  // namespace star::train
