// star: the command-line tool. `star local` runs a TrainingJob on this machine (see
// local/runtime.h); `star sim` simulates one at cluster scale (sim/simulator.h); tool
// verbs over the decision core (detect, select, plan-batches).
// JSON on stdout, errors on stderr with a non-zero exit.
//
// Exit codes: 0 success, 1 bad input or a failure while running, 2 bad usage,
// 130 `star local` interrupted.
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "flag_error.h"
#include "input.h"
#include "local/blast.h"
#include "local/command.h"
#include "sim/command.h"
#ifdef STAR_HAVE_XGBOOST
#include "train/train_selector.h"
#endif
#include "star/core/batch/planner.h"
#include "star/core/detect/detector.h"
#include "star/core/select/selector.h"
#include "star/operator/learned_model.h"
#include "trace_csv.h"

namespace star::cli {
namespace {

constexpr int kExitFailure = 1;

int Fail(const Status& s) {
  std::cerr << "star: " << s.message() << "\n";
  return kExitFailure;
}

struct DetectArgs {
  std::string trace;
  std::string rule = "mad";
  int window = 0;
  double threshold = 0;
  int onset_window = 0;
  double step_slowdown = detect::DetectorOptions{}.step_slowdown;
  int step_samples = detect::DetectorOptions{}.step_samples;
  double static_slowdown = detect::DetectorOptions{}.static_slowdown;
  double class_gap = detect::DetectorOptions{}.class_gap;
};

int RunDetect(const DetectArgs& args) {
  detect::DetectorOptions options;
  auto rule = detect::ParseRule(args.rule);
  if (!rule) {
    return Fail(Status::InvalidArgument("--rule: must be one of mad, relative, star, change_point, got \"" +
                                        args.rule + "\""));
  }
  options.rule = *rule;
  if (args.window != 0) options.window = args.window;
  if (args.threshold != 0) options.threshold = args.threshold;
  options.onset_window = args.onset_window;
  options.step_slowdown = args.step_slowdown;
  options.step_samples = args.step_samples;
  options.static_slowdown = args.static_slowdown;
  options.class_gap = args.class_gap;
  // Option fields name the flags: "onset_window: must be ..." -> "--onset-window: ...".
  if (Status s = detect::Validate(options); !s.ok()) return Fail(AsFlagError(s));

  std::ifstream f(args.trace);
  if (!f) return Fail(Status::NotFound(args.trace + ": cannot open"));
  auto samples = ParseTraceCsv(f, args.trace);
  if (!samples.ok()) return Fail(samples.status());

  detect::Detector detector(options);
  std::vector<detect::Event> events;
  auto print = [&] {
    for (const auto& e : events) std::cout << detect::ToJsonLine(e) << "\n";
    events.clear();
  };
  for (const auto& sample : *samples) {
    detector.Observe(sample, &events);
    print();
  }
  detector.Flush(&events);  // the last round
  print();
  std::cout.flush();
  return std::cout ? 0 : kExitFailure;
}

int RunSelect(const std::string& input) {
  auto doc = ReadJsonDocument(input);
  if (!doc.ok()) return Fail(doc.status());
  auto in = select::SelectionInputFromJson(*doc);
  if (!in.ok()) return Fail(in.status().WithPrefix(input));
  auto selection = select::Select(*in);
  if (!selection.ok()) return Fail(selection.status().WithPrefix(input));
  std::cout << select::ToJson(*selection).dump() << std::endl;
  return std::cout ? 0 : kExitFailure;
}

int RunPlanBatches(const std::string& input) {
  auto doc = ReadJsonDocument(input);
  if (!doc.ok()) return Fail(doc.status());
  auto in = batch::PlanInputFromJson(*doc);
  if (!in.ok()) return Fail(in.status().WithPrefix(input));
  auto plan = batch::PlanBatches(*in);
  if (!plan.ok()) return Fail(plan.status().WithPrefix(input));
  std::cout << batch::ToJson(*plan).dump() << std::endl;
  return std::cout ? 0 : kExitFailure;
}

// What the subcommands' flags are parsed into.
struct Args {
  DetectArgs detect;
  std::string select_input;
  std::string plan_input;
  star::local::LocalArgs local;
  star::sim::SimArgs sim;
  int busy_threads = 1;
  double busy_seconds = 60;
  int blast_listen = 0;
  std::string blast_to;
  double blast_seconds = 60;
};

CLI::App* AddDetect(CLI::App& app, DetectArgs& args) {
  auto* detect = app.add_subcommand(
      "detect", "Replay an iteration trace through the straggler detector; prints one JSON "
                "object per state change");
  detect->add_option("--trace", args.trace,
                     "CSV: iteration,worker,compute_seconds,communication_seconds")
      ->required();
  detect->add_option("--rule", args.rule, "mad (default) | relative | star | change_point");
  detect->add_option("--window", args.window, "iterations in the sliding window (default: rule's)");
  detect->add_option("--threshold", args.threshold, "rule threshold (default: rule's)");
  detect->add_option("--onset-window", args.onset_window,
                     "rules mad and relative: judge each worker by its newest N samples "
                     "(faster onsets; default 0: the full window, as the control loop does)");
  detect->add_option("--step-slowdown", args.step_slowdown,
                     "flag a worker at once when each of its newest --step-samples samples is "
                     "this many times the cohort's typical (0 = off)")
      ->capture_default_str();
  detect->add_option("--step-samples", args.step_samples,
                     "slow samples in a row the step path needs")
      ->capture_default_str();
  detect->add_option("--static-slowdown", args.static_slowdown,
                     "rule mad: a worker slow since its first window is a (static) straggler "
                     "from this slowdown; below it, ordinary heterogeneity")
      ->capture_default_str();
  detect->add_option("--class-gap", args.class_gap,
                     "two speed classes this far apart make the faster one the reference "
                     "(0 = off)")
      ->capture_default_str();
  return detect;
}

CLI::App* AddSelect(CLI::App& app, std::string& input) {
  auto* select = app.add_subcommand(
      "select", "Choose the synchronization mode (ssgd, fixed_k, groups, asgd) for given worker times");
  select->add_option("--input", input,
                     "JSON {architecture, batch_per_worker, noise_scale, iteration_seconds}; - for stdin")
      ->required();
  return select;
}

CLI::App* AddPlanBatches(CLI::App& app, std::string& input) {
  auto* plan = app.add_subcommand(
      "plan-batches", "Split a global batch across workers to minimise the slowest iteration (BOA)");
  plan->add_option("--input", input,
                   "JSON {global_batch, min_batch, workers:[{alpha, beta}]}; - for stdin")
      ->required();
  return plan;
}

CLI::App* AddLocal(CLI::App& app, star::local::LocalArgs& args) {
  auto* local = app.add_subcommand(
      "local", "Run a TrainingJob manifest on this machine: real worker processes in their own "
               "cgroups and network namespaces, injected contention, the STAR control loop");
  local->add_option("JOB.yaml", args.manifest, "TrainingJob manifest (YAML or JSON)")
      ->required();
  local->add_option("--policy", args.policy,
                    "auto | ssgd | asgd | fixed-k | groups | amp | boa (default: the manifest's)");
  local->add_option("--inject", args.injects,
                    "worker=W,cpu=F | neighbor=N[,guarantee=C] | bandwidth=RATE | delay=D | "
                    "bwneighbor=RATE[,guarantee=RATE][,link=RATE] [,start=DUR][,end=DUR] "
                    "(repeatable)");
  local->add_option("--report", args.report, "write the full JSON report here");
  local->add_option("--plot", args.plot, "draw iteration times, events and accuracy (PNG)");
  local->add_option("--timeout", args.timeout, "bound on the whole run (default 30m)");
  local->add_option("--log-dir", args.log_dir,
                    "keep the processes' logs here (default: a temporary directory, removed "
                    "unless the run fails)");
  local->add_flag("--no-network", args.no_network,
                  "no network namespaces: workers share loopback (bandwidth and delay "
                  "injections unavailable)");
  local->add_flag("--quiet", args.quiet, "no progress output");
  args.selector_model = star::op::DefaultSelectorModelPath();
  local->add_option("--selector-model", args.selector_model,
                    "the learned selector's model, for a job with selector ML (default: the "
                    "installed one)")
      ->capture_default_str();
  return local;
}

CLI::App* AddSim(CLI::App& app, star::sim::SimArgs& args) {
  auto* sim = app.add_subcommand(
      "sim", "Simulate a job at cluster scale: simulated workers (SCENARIO.json) against the "
             "STAR control loop; prints each policy's time to accuracy");
  sim->add_option("SCENARIO.json", args.scenario, "the scenario (JSON); - for stdin")->required();
  sim->add_option("--policy", args.policy,
                  "auto (default) | ssgd | asgd | fixed-k | groups | amp | boa | all");
  sim->add_option("--selector", args.selector, "heuristic (default) | ml");
  sim->add_option("--model", args.model,
                  "the learned selector's model file (with --selector ml; default: the installed "
                  "one)");
  sim->add_option("--seed", args.seed, "replaces the scenario's seed");
  sim->add_option("--trace", args.trace,
                  "write every worker iteration as CSV (star detect's trace form)");
  sim->add_option("--timeline", args.timeline,
                  "write each policy's control-loop timeline (modes, stragglers, batches) as JSON");
  return sim;
}

CLI::App* AddBusy(CLI::App& app, int& threads, double& seconds) {
  auto* busy = app.add_subcommand("busy", "Spin N threads for S seconds (a co-located neighbor)");
  busy->group("");  // internal: started by `star local`
  busy->add_option("--threads", threads)->check(CLI::Range(1, 256));
  busy->add_option("--seconds", seconds)->check(CLI::Range(0.0, 86400.0));
  return busy;
}

// Parses argv into the app; returns the exit status when the process stops here (help,
// version, or bad usage: 2), else nullopt.
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "star: " << e.what() << "\n" << "Run 'star --help' for usage.\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace
}  // namespace star::cli

int main(int argc, char** argv) {
  using namespace star::cli;
  CLI::App app{
      "star: keeps synchronous data-parallel training fast when workers straggle.\n"
      "Tool verbs over the decision core; JSON on stdout, errors on stderr.",
      "star"};
  app.set_version_flag("--version", "star 0.1.0");
  app.require_subcommand(1);
  app.fallthrough(false);

  Args args;
  const CLI::App* detect = AddDetect(app, args.detect);
  const CLI::App* select = AddSelect(app, args.select_input);
  const CLI::App* plan = AddPlanBatches(app, args.plan_input);
  const CLI::App* local = AddLocal(app, args.local);
  const CLI::App* sim = AddSim(app, args.sim);
  const CLI::App* busy = AddBusy(app, args.busy_threads, args.busy_seconds);
  auto* blast = app.add_subcommand("blast", "Stream TCP to a sink for S seconds (a co-located sender)");
  blast->group("");  // internal: started by `star local`
  auto* listen = blast->add_option("--listen", args.blast_listen, "be the sink on this port")
                     ->check(CLI::Range(1, 65535));
  blast->add_option("--to", args.blast_to, "send to A.B.C.D:PORT")->excludes(listen);
  blast->add_option("--seconds", args.blast_seconds)->check(CLI::Range(0.0, 86400.0));
#ifdef STAR_HAVE_XGBOOST
  star::train::TrainSelectorArgs train;
  auto* train_cmd = app.add_subcommand(
      "train-selector", "Train the learned mode selector (XGBoost) on scenarios labelled by "
                        "the simulator; the model to --out, a summary JSON on stdout");
  train_cmd->add_option("--scenarios", train.scenarios, "scenarios to generate (default 300)");
  train_cmd->add_option("--seed", train.seed, "seed of the scenarios and of training (default 1)");
  train_cmd->add_option("--out", train.out, "the model file to write (.json; not with --evaluate)");
  train_cmd->add_option("--rounds", train.rounds, "boosting rounds (default 50)");
  train_cmd->add_option("--holdout", train.holdout, "share of scenarios kept out (default 0.2)");
  train_cmd->add_option("--min-workers", train.min_workers, "fewest workers (default 8)");
  train_cmd->add_option("--max-workers", train.max_workers, "most workers (default 1024)");
  train_cmd->add_option("--labels", train.labels,
                        "open (default): label by each candidate policy run alone; closed: "
                        "by policy auto run with the loop selecting each class");
  train_cmd
      ->add_option("--defer-within", train.defer_within,
                   "with --labels closed: label a scenario with the heuristic's class where "
                   "its own run is within this share of the best class's TTA (default off)")
      ->check(CLI::NonNegativeNumber);
  train_cmd->add_option("--evaluate", train.evaluate,
                        "instead of training: run N random scenarios in the closed loop with "
                        "the heuristic and with --model, and compare their TTA");
  train_cmd->add_option("--model", train.model, "the model file --evaluate runs");
  train_cmd->add_option("--margin", train.margin,
                        "with --evaluate: how much more probable the model's class must be "
                        "than the heuristic's to override it (default the loop's)");
  train_cmd->add_option("--max-estimate-ratio", train.max_estimate_ratio,
                        "with --evaluate: override the heuristic only when the cost model puts "
                        "the model's class at most this many times the heuristic's estimate");
  train_cmd->add_option("--worst-scenario", train.worst_scenario,
                        "with --evaluate: write the scenario where ML lost the most here (for star sim)");
#endif
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;
#ifdef STAR_HAVE_XGBOOST
  if (*train_cmd) return star::train::RunTrainSelectorCommand(train, std::cout, std::cerr);
#endif

  if (*detect) return RunDetect(args.detect);
  if (*select) return RunSelect(args.select_input);
  if (*plan) return RunPlanBatches(args.plan_input);
  if (*local) return star::local::RunLocalCommand(args.local);
  if (*sim) return star::sim::RunSimCommand(args.sim, std::cout, std::cerr);
  if (*busy) return star::local::RunBusy(args.busy_threads, args.busy_seconds);
  if (*blast) {
    if (args.blast_listen > 0) return star::local::RunBlastSink(args.blast_listen, args.blast_seconds);
    return star::local::RunBlastSender(args.blast_to, args.blast_seconds);
  }
  return 2;
}
