#include "train/train_selector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>

#include "flag_error.h"
#include "local/runtime.h"
#include "sim/simulator.h"
#include "star/operator/xgboost_selector.h"

namespace star::train {

namespace {

double Uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

int UniformInt(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Each worker's iteration time (and its communication part) with every episode in force.
void ContendedTimes(const sim::Scenario& s, std::vector<double>& t, double& comm_share) {
  const double compute = static_cast<double>(s.batch_per_worker) * s.compute_seconds_per_sample;
  std::vector<double> cpu(s.workers, 1), link(s.workers, 1);
  for (const auto& e : s.episodes) {
    if (e.cpu) cpu[e.worker] = std::min(cpu[e.worker], *e.cpu);
    if (e.bandwidth) link[e.worker] = std::min(link[e.worker], *e.bandwidth);
  }
  t.assign(s.workers, 0);
  double share = 0;
  for (int i = 0; i < s.workers; ++i) {
    const double c = compute / cpu[i], m = s.communication_seconds / link[i];
    t[i] = c + m;
    share += m / t[i];
  }
  comm_share = share / s.workers;
}

double TtaOr(const sim::SimResult& r, const sim::Scenario& s) {
  return r.tta_seconds ? *r.tta_seconds : sim::TimeLimitSeconds(s);
}

int Argmax(const float* p) {
  int best = 0;
  for (int c = 1; c < static_cast<int>(select::kSelectorClassCount); ++c) {
    if (p[c] > p[best]) best = c;
  }
  return best;
}

// A learned selector that always names one class.
class ConstantSelector : public select::LearnedSelector {
 public:
  explicit ConstantSelector(int c) : c_(c) {}
  StatusOr<std::vector<float>> Scores(const select::SelectorFeatures&) override {
    std::vector<float> s(select::kSelectorClassCount, 0.0F);
    s[static_cast<std::size_t>(c_)] = 1.0F;
    return s;
  }

 private:
  int c_;
};

}  // namespace

sim::Scenario RandomScenario(std::mt19937_64& rng, int min_workers, int max_workers) {
  sim::Scenario s;
  s.workers = std::clamp(static_cast<int>(std::lround(std::exp2(
                             Uniform(rng, std::log2(min_workers), std::log2(max_workers))))),
                         min_workers, max_workers);
  s.architecture = UniformInt(rng, 0, 1) ? api::Architecture::kParameterServer
                                         : api::Architecture::kAllReduce;
  const int batches[] = {16, 32, 64, 128};
  s.batch_per_worker = batches[UniformInt(rng, 0, 3)];
  s.noise_scale = std::pow(10.0, Uniform(rng, 1, 4));
  s.compute_seconds_per_sample = std::pow(10.0, Uniform(rng, -4, -2.5));
  const double share = Uniform(rng, 0.05, 0.6);
  const double compute = static_cast<double>(s.batch_per_worker) * s.compute_seconds_per_sample;
  s.communication_seconds = compute * share / (1 - share);
  s.jitter = Uniform(rng, 0, 0.1);
  s.min_updates = Uniform(rng, 100, 300);
  s.seed = std::uniform_int_distribution<uint64_t>(0, 1u << 30)(rng);
  const double clean = sim::CleanSsgdSeconds(s);
  const int stragglers = UniformInt(rng, 1, std::max(1, s.workers / 8));
  std::vector<int> ranks(s.workers);
  for (int i = 0; i < s.workers; ++i) ranks[i] = i;
  std::shuffle(ranks.begin(), ranks.end(), rng);
  for (int j = 0; j < stragglers; ++j) {
    sim::Episode e;
    e.worker = ranks[j];
    const double kept = Uniform(rng, 0.15, 0.8);
    if (UniformInt(rng, 0, 1)) {
      e.cpu = kept;
    } else {
      e.bandwidth = kept;
    }
    if (UniformInt(rng, 0, 1)) {  // dynamic: part of the run
      e.start = Uniform(rng, 0, 0.3) * clean;
      e.end = e.start + Uniform(rng, 0.2, 1.0) * clean;
    }
    s.episodes.push_back(e);
  }
  return s;
}

StatusOr<LabelledScenario> Label(const sim::Scenario& s, bool closed_loop) {
  LabelledScenario l;
  l.scenario = s;
  std::vector<double> t;
  double comm_share = 0;
  ContendedTimes(s, t, comm_share);
  select::SelectionInput in;
  in.architecture = s.architecture;
  in.batch_per_worker = static_cast<double>(s.batch_per_worker);
  in.noise_scale = s.noise_scale;
  in.iteration_seconds = t;
  auto f = select::FeaturesOf(in, select::SelectorContext{std::clamp(comm_share, 0.0, 1.0)});
  if (!f.ok()) return f.status();
  l.features = *f;
  select::SelectOptions loop_select = sim::SimOptions{}.select;
  loop_select.min_k = s.min_k.value_or(1);  // as the loop takes spec.synchronization.minK
  auto h = select::Select(in, loop_select);
  if (!h.ok()) return h.status();
  l.heuristic_class = select::ClassOf(h->mode, h->k, s.workers);

  l.tta.assign(select::kSelectorClassCount, -1);
  auto run = [&](const sim::Scenario& sc, local::Policy p) -> StatusOr<double> {
    auto r = sim::Simulate(sc, p);
    if (!r.ok()) return r.status();
    return TtaOr(*r, sc);
  };
  auto put = [&](int c, const sim::Scenario& sc, local::Policy p) -> Status {
    auto v = run(sc, p);
    if (!v.ok()) return v.status();
    l.tta[c] = *v;
    return Status::Ok();
  };
  if (closed_loop) {
    for (int c = 0; c < static_cast<int>(select::kSelectorClassCount); ++c) {
      if (c == select::kSelectorClassAsgd &&
          s.architecture != api::Architecture::kParameterServer) {
        continue;
      }
      if (c >= select::kSelectorClassFixedKFirst) {
        const auto j = static_cast<std::size_t>(c - select::kSelectorClassFixedKFirst);
        const int k = static_cast<int>(std::lround(select::kFixedKFractions[j] * s.workers));
        if (k < 1 || k >= s.workers) continue;
      }
      sim::SimOptions o;
      o.selector = api::ModeSelector::kMl;
      o.model = std::make_shared<ConstantSelector>(c);
      auto r = sim::Simulate(s, local::Policy::kAuto, o);
      if (!r.ok()) return r.status();
      l.tta[static_cast<std::size_t>(c)] = TtaOr(*r, s);
    }
  } else {
    if (Status st = put(select::kSelectorClassSsgd, s, local::Policy::kSsgd); !st.ok()) return st;
    if (Status st = put(select::kSelectorClassGroups, s, local::Policy::kGroups); !st.ok()) return st;
    if (s.architecture == api::Architecture::kParameterServer) {
      if (Status st = put(select::kSelectorClassAsgd, s, local::Policy::kAsgd); !st.ok()) return st;
    }
    for (std::size_t j = 0; j < select::kFixedKFractions.size(); ++j) {
      sim::Scenario fk = s;
      const int k = static_cast<int>(std::lround(select::kFixedKFractions[j] * s.workers));
      if (k < 1 || k >= s.workers) continue;
      fk.min_k = k;
      if (Status st = put(select::kSelectorClassFixedKFirst + static_cast<int>(j), fk,
                          local::Policy::kFixedK);
          !st.ok()) {
        return st;
      }
    }
  }
  auto a = run(s, local::Policy::kAuto);
  if (!a.ok()) return a.status();
  l.auto_tta = *a;
  double best = std::numeric_limits<double>::infinity();
  for (int c = 0; c < static_cast<int>(select::kSelectorClassCount); ++c) {
    if (l.tta[c] >= 0 && l.tta[c] < best) {  // ties to the lower class (ssgd first)
      best = l.tta[c];
      l.best = c;
    }
  }
  l.label = l.best;
  return l;
}

int DeferredLabel(const LabelledScenario& l, double within) {
  if (within < 0) return l.best;
  return l.auto_tta <= (1 + within) * l.tta[static_cast<std::size_t>(l.best)] ? l.heuristic_class
                                                                            : l.best;
}

StatusOr<EvaluatedScenario> Evaluate(const sim::Scenario& s,
                                     const std::shared_ptr<select::LearnedSelector>& model,
                                     const sim::SimOptions& ml_options) {
  EvaluatedScenario e;
  e.scenario = s;
  auto h = sim::Simulate(s, local::Policy::kAuto);
  if (!h.ok()) return h.status().WithPrefix("heuristic");
  sim::SimOptions ml = ml_options;
  ml.selector = api::ModeSelector::kMl;
  ml.model = model;
  auto m = sim::Simulate(s, local::Policy::kAuto, ml);
  if (!m.ok()) return m.status().WithPrefix("ml");
  e.heuristic_tta = TtaOr(*h, s);
  e.heuristic_reached = h->tta_seconds.has_value();
  e.ml_tta = TtaOr(*m, s);
  e.ml_reached = m->tta_seconds.has_value();
  return e;
}

namespace {

int RunEvaluate(const TrainSelectorArgs& args, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& m) {
    err << "star train-selector: " << m << "\n";
    return 1;
  };
  if (args.model.empty()) return bad("--evaluate: needs --model FILE");
  sim::SimOptions ml_options;
  ml_options.select.learned_override_margin = args.margin;
  ml_options.select.learned_max_estimate_ratio = args.max_estimate_ratio;
  // A bad gate would make every ML decision fail over to the heuristic: refuse it.
  if (Status st = select::Validate(ml_options.select); !st.ok()) {
    return bad(cli::AsFlagError(st, {{"learned_override_margin", "--margin"},
                                     {"learned_max_estimate_ratio", "--max-estimate-ratio"}})
                   .message());
  }
  auto model = op::XgboostSelector::Load(args.model);
  if (!model.ok()) return bad("--model: " + model.status().ToString());
  const std::shared_ptr<select::LearnedSelector> shared = std::move(*model);
  std::ofstream worst_file;  // opened now: a bad path fails before the evaluation's work
  if (!args.worst_scenario.empty()) {
    worst_file.open(args.worst_scenario);
    if (!worst_file) return bad("--worst-scenario " + args.worst_scenario + ": cannot write");
  }
  const auto started = std::chrono::steady_clock::now();
  std::mt19937_64 rng(args.seed);
  std::vector<double> gains;
  int at_least = 0, better = 0, worse = 0, h_missed = 0, m_missed = 0;
  nlohmann::json runs = nlohmann::json::array();
  std::optional<sim::Scenario> worst;  // the scenario of the lowest gain so far
  double worst_gain = std::numeric_limits<double>::infinity();
  for (int i = 0; i < args.evaluate; ++i) {
    const sim::Scenario s = RandomScenario(rng, args.min_workers, args.max_workers);
    auto e = Evaluate(s, shared, ml_options);
    if (!e.ok()) return bad("scenario " + std::to_string(i) + ": " + e.status().ToString());
    at_least += e->ml_tta <= e->heuristic_tta;
    better += e->ml_tta < e->heuristic_tta;
    worse += e->ml_tta > e->heuristic_tta;
    h_missed += !e->heuristic_reached;
    m_missed += !e->ml_reached;
    gains.push_back((e->heuristic_tta - e->ml_tta) / e->heuristic_tta);
    if (gains.back() <= worst_gain) {
      worst_gain = gains.back();
      worst = s;
    }
    runs.push_back({s.workers, api::ToString(s.architecture), e->heuristic_tta, e->ml_tta});
    if ((i + 1) % 10 == 0 || i + 1 == args.evaluate) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      err << "star train-selector: " << (i + 1) << "/" << args.evaluate << " scenarios evaluated ("
          << secs << " s)\n";
    }
  }
  const auto n = static_cast<double>(args.evaluate);
  double sum = 0;
  for (double g : gains) sum += g;
  std::vector<double> sorted = gains;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  const double median =
      sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  nlohmann::json summary = {{"evaluated", args.evaluate},
                            {"seed", args.seed},
                            {"model", args.model},
                            {"margin", args.margin},
                            {"max_estimate_ratio", std::isfinite(args.max_estimate_ratio)
                                                       ? nlohmann::json(args.max_estimate_ratio)
                                                       : nlohmann::json(nullptr)},
                            {"min_workers", args.min_workers},
                            {"max_workers", args.max_workers},
                            {"ml_at_least_as_good", at_least / n},
                            {"ml_better", better},
                            {"ml_worse", worse},
                            {"mean_gain", sum / n},
                            {"median_gain", median},
                            {"worst_gain", sorted.front()},
                            {"best_gain", sorted.back()},
                            {"heuristic_missed", h_missed},
                            {"ml_missed", m_missed},
                            {"runs", runs}};
  summary["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (worst_file.is_open() && worst) {
    worst_file << sim::ScenarioToJson(*worst).dump(1) << "\n";
    if (!worst_file.flush()) return bad("--worst-scenario " + args.worst_scenario + ": cannot write");
  }
  out << summary.dump() << "\n";
  return 0;
}

}  // namespace

int RunTrainSelectorCommand(const TrainSelectorArgs& args, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& m) {
    err << "star train-selector: " << m << "\n";
    return 1;
  };
  if (args.evaluate < 0) return bad("--evaluate: must be >= 0, got " + std::to_string(args.evaluate));
  if (args.min_workers < 1 || args.max_workers < args.min_workers) {
    return bad("--min-workers/--max-workers: need 1 <= min <= max");
  }
  if (args.evaluate > 0) return RunEvaluate(args, out, err);
  if (!args.model.empty()) return bad("--model: only with --evaluate");
  if (args.labels != "open" && args.labels != "closed") {
    return bad("--labels: must be open or closed, got \"" + args.labels + "\"");
  }
  if (args.defer_within >= 0 && args.labels != "closed") {
    return bad("--defer-within: only with --labels closed (the heuristic's run is a closed-loop one)");
  }
  if (args.scenarios < 2) return bad("--scenarios: must be >= 2, got " + std::to_string(args.scenarios));
  if (args.out.empty()) return bad("--out: required");
  if (args.rounds < 1) return bad("--rounds: must be >= 1, got " + std::to_string(args.rounds));
  if (!(args.holdout >= 0 && args.holdout < 1)) {
    return bad("--holdout: must be in [0, 1), got " + std::to_string(args.holdout));
  }
  if (args.min_workers < 1 || args.max_workers < args.min_workers) {
    return bad("--min-workers/--max-workers: need 1 <= min <= max");
  }
  const auto started = std::chrono::steady_clock::now();
  std::mt19937_64 rng(args.seed);
  std::vector<LabelledScenario> all;
  for (int i = 0; i < args.scenarios; ++i) {
    const sim::Scenario s = RandomScenario(rng, args.min_workers, args.max_workers);
    auto l = Label(s, args.labels == "closed");
    if (!l.ok()) return bad("scenario " + std::to_string(i) + ": " + l.status().ToString());
    l->label = DeferredLabel(*l, args.defer_within);
    all.push_back(std::move(*l));
    if ((i + 1) % 10 == 0 || i + 1 == args.scenarios) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      err << "star train-selector: " << (i + 1) << "/" << args.scenarios << " scenarios labelled ("
          << secs << " s)\n";
    }
  }
  const int holdout = static_cast<int>(std::floor(args.holdout * args.scenarios));
  const int train = args.scenarios - holdout;
  op::SelectorTrainingSet set;
  std::vector<int> counts(select::kSelectorClassCount, 0);
  int deferred = 0;  // training labels that name the heuristic's class instead of the best
  for (int i = 0; i < train; ++i) {
    const auto v = select::FeatureVector(all[i].features);
    set.features.insert(set.features.end(), v.begin(), v.end());
    set.labels.push_back(all[i].label);
    ++counts[all[i].label];
    deferred += all[i].label != all[i].best;
  }
  op::SelectorTrainOptions options;
  options.seed = args.seed;
  options.rounds = args.rounds;
  auto model = op::XgboostSelector::Train(set, options);
  if (!model.ok()) return bad(model.status().ToString());
  if (Status st = (*model)->Save(args.out); !st.ok()) return bad(st.ToString());

  nlohmann::json summary = {{"scenarios", args.scenarios}, {"train", train}, {"holdout", holdout},
                            {"seed", args.seed}, {"label_counts", counts}, {"model", args.out},
                            {"labels", args.labels}};
  if (args.defer_within >= 0) {
    summary["defer_within"] = args.defer_within;
    summary["deferred"] = deferred;
  }
  if (holdout > 0) {
    std::vector<float> rows;
    for (int i = train; i < args.scenarios; ++i) {
      const auto v = select::FeatureVector(all[i].features);
      rows.insert(rows.end(), v.begin(), v.end());
    }
    auto p = (*model)->Predict(rows);
    if (!p.ok()) return bad(p.status().ToString());
    int right = 0;
    double model_ratio = 0, heuristic_ratio = 0;
    for (int i = train; i < args.scenarios; ++i) {
      const LabelledScenario& l = all[i];
      const float* probs = p->data() + static_cast<std::size_t>(i - train) * select::kSelectorClassCount;
      // The model's best class among those simulated (SelectLearned's next-best rule).
      std::vector<float> allowed(probs, probs + select::kSelectorClassCount);
      for (int c = 0; c < static_cast<int>(select::kSelectorClassCount); ++c) {
        if (l.tta[c] < 0) allowed[c] = -1;
      }
      const int choice = Argmax(allowed.data());
      right += choice == l.label;
      const double best = l.tta[l.best];
      model_ratio += l.tta[choice] / best;
      heuristic_ratio += l.auto_tta / best;
    }
    summary["holdout_accuracy"] = static_cast<double>(right) / holdout;
    summary["holdout_tta_ratio_model"] = model_ratio / holdout;
    summary["holdout_tta_ratio_heuristic"] = heuristic_ratio / holdout;
  }
  summary["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out << summary.dump() << "\n";
  return 0;
}

}  // namespace star::train
