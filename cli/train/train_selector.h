// `star train-selector`: generates labelled scenarios with the simulator (sim/) and
// trains the learned selector's XGBoost model (operator/xgboost_selector.h) on them.
//
// Each scenario is random (workers log-uniform in [min_workers, max_workers], both
// architectures, noise scales, batches, communication shares, jitter, 1 to n/8
// stragglers slowed in compute or communication, static or for part of the run). Its
// features are select::FeaturesOf the workers' times with every episode in force (what
// the control loop measures during the contention). Its label is the selector class
// with the lowest simulated TTA among: ssgd, groups, fixed-k at each of
// select::kFixedKFractions (policy fixed-k with the scenario's min_k = fraction x n, so
// the loop's k is at least that fraction) and, for ParameterServer jobs, asgd. A run
// that misses the target counts at the scenario's time limit. With `labels` closed, each
// class is instead run as policy auto with the control loop, its learned selector always
// naming that class, and the label is the class of the fastest such run.
//
// The last `holdout` share of the scenarios is kept out of training and reported:
// how often the model picks the best class, and the mean of TTA(choice) / TTA(best) for
// the model and for the heuristic (policy auto). Everything is deterministic for the
// seed. Progress goes to stderr; the summary JSON to stdout.
//
// That holdout report is open-loop (it scores the model's class against the labelled
// candidates' TTAs). With `evaluate` > 0 the verb trains nothing and evaluates the model
// file `model` in the closed loop instead: it generates `evaluate` random scenarios from
// the seed (the same generator; use a seed and worker range other than training's for
// held-out ones) and simulates each with policy auto twice, the control loop selecting
// with the heuristic and with the model (selector ML), as `star sim --policy auto
// --selector heuristic|ml --model FILE` does.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario.h"
#include "sim/simulator.h"
#include "star/core/select/learned.h"
#include "star/core/status.h"

namespace star::train {

struct TrainSelectorArgs {
  int scenarios = 300;        // --scenarios N, >= 2
  uint64_t seed = 1;          // --seed S
  std::string out;            // --out FILE (the model; .json for XGBoost's JSON form)
  int rounds = 50;            // --rounds R, boosting rounds, >= 1
  double holdout = 0.2;       // --holdout F, share of scenarios kept out, in [0, 1)
  int min_workers = 8;        // --min-workers, >= 1
  int max_workers = 1024;     // --max-workers, >= min_workers
  // --labels open|closed: how a scenario's label is found. open (the default): each
  // candidate policy run on its own from the start; closed: policy auto run with the
  // control loop once per class, its learned selector always naming that class (the
  // loop's checks and gating, AMP and batch adaptation as in any auto run).
  std::string labels = "open";
  // --defer-within F (closed labels only; < 0, the default, is off): a scenario where the
  // heuristic's own run (policy auto) takes at most (1 + F) x the best class's TTA is
  // labelled with the heuristic's class instead (select::ClassOf the loop's Select() on
  // the scenario's contended times), so the model learns to agree with the heuristic
  // wherever overriding it would gain less than F, and the loop's override margin keeps
  // the heuristic's choice there.
  double defer_within = -1;
  int evaluate = 0;           // --evaluate N: closed-loop evaluation of --model, >= 0
  std::string model;          // --model FILE: the model --evaluate runs
  // --margin M: the loop's learned_override_margin in --evaluate's ML runs (how clearly
  // the model must prefer a class to override the heuristic), >= 0; default the loop's.
  double margin = sim::SimOptions{}.select.learned_override_margin;
  // --max-estimate-ratio R: the loop's learned_max_estimate_ratio in --evaluate's ML runs,
  // >= 1; default the loop's.
  double max_estimate_ratio = sim::SimOptions{}.select.learned_max_estimate_ratio;
  // --worst-scenario FILE: with --evaluate, write the scenario where ML lost the most
  // (a `star sim` scenario) here, to replay it with each selector. "" = none.
  std::string worst_scenario;
};

// One scenario of the closed-loop evaluation: policy auto's TTA with each selector
// (a run that misses the target counts at the scenario's time limit).
struct EvaluatedScenario {
  sim::Scenario scenario;
  double heuristic_tta = 0, ml_tta = 0;
  bool heuristic_reached = false, ml_reached = false;
};

// Simulates `s` under policy auto with the heuristic and with `model`. Errors: the
// simulator's.
[[nodiscard]] StatusOr<EvaluatedScenario> Evaluate(
    const sim::Scenario& s, const std::shared_ptr<select::LearnedSelector>& model,
    const sim::SimOptions& ml_options = {});

// One labelled scenario.
struct LabelledScenario {
  sim::Scenario scenario;
  select::SelectorFeatures features;
  int label = 0;                     // the best class (or, deferred, the heuristic's)
  int best = 0;                      // the class with the lowest TTA
  int heuristic_class = 0;           // select::ClassOf the loop's Select() on the contended
                                     // times (with the scenario's min_k, as the loop)
  std::vector<double> tta;           // per class; < 0 where not simulated
  double auto_tta = 0;               // the heuristic's (policy auto)
};

// A random scenario (see the file comment) from `rng`.
[[nodiscard]] sim::Scenario RandomScenario(std::mt19937_64& rng, int min_workers,
                                           int max_workers);
// Simulates the candidate policies and the heuristic. Errors: the simulator's. With
// `closed_loop`, each class is instead simulated as policy auto whose learned selector
// always names it (a class the loop does not allow falls back as SelectLearned says).
[[nodiscard]] StatusOr<LabelledScenario> Label(const sim::Scenario& s, bool closed_loop = false);
// `l`'s training label with --defer-within `within` (< 0: off): the heuristic's class
// where l.auto_tta <= (1 + within) x the best class's TTA, else the best class.
[[nodiscard]] int DeferredLabel(const LabelledScenario& l, double within);

// Runs the verb: writes the summary JSON
//   {"scenarios","train","holdout","holdout_accuracy","holdout_tta_ratio_model",
//    "holdout_tta_ratio_heuristic","label_counts":[...],"seconds"} (with --defer-within,
//   also "defer_within" and "deferred", the training labels that name the heuristic's
//   class instead of the best one)
// to `out`, progress and errors to `err`. With `evaluate` > 0 (then `model` is required
// and `out` is not used) the summary is instead
//   {"evaluated","seed","model","ml_at_least_as_good" (share of scenarios with
//    ml_tta <= heuristic_tta),"ml_better","ml_worse" (counts),"mean_gain" (mean of
//    (heuristic_tta - ml_tta) / heuristic_tta),"median_gain","worst_gain","best_gain",
//    "heuristic_missed","ml_missed" (runs that did not reach the target),"seconds"}. Returns 0, or 1 on bad arguments or a failure.
int RunTrainSelectorCommand(const TrainSelectorArgs& args, std::ostream& out, std::ostream& err);

}  // namespace star::train
