// tta_bench: the straggler testbed's scenario matrix. Runs a TrainingJob (by default
// bench/tta/job.yaml) with `star local`'s runtime under every policy in every scenario,
// to the same target accuracy, and writes:
//   OUT/results.json   every run's report summary, and per scenario the ideal TTA
//   OUT/results.md     the table: TTA per policy and scenario, the ideal, auto's gap to
//                      the best policy, the delay auto offsets, final accuracies
//   OUT/<scenario>-<policy>.png   the run's plot
//   OUT/runs/<scenario>-<policy>.json   the run's full report (the tables are built from
//                      every report there, so re-running a subset replaces just those)
//
// Ideal TTA (a reference no policy can beat on average): the clean run's TTA stretched
// by the workers' lost speed, TTA_clean * n / sum of worker speeds, where a worker's
// speed is its clean iteration time over its iteration time under the injection
// (measured from the SSGD run); for injections with a window, the job runs at that rate
// only inside the window.
//
// Needs root (it starts workers in cgroups and namespaces). Usage:
//   tta_bench [--job FILE] [--out DIR] [--scenarios a,b] [--policies a,b] [--timeout 10m]
// The bundled trainer is this build tree's star-fmnist, or $STAR_TRAINER_BINARY (a copy
// of tta_bench from another build, say). A job whose workers run a PyTorch script
// (bench/tta/python-job.yaml) finds star.torch in this build tree (build/python), or at
// $STAR_PYTHONPATH. SIGINT, SIGTERM or SIGHUP end the run in progress (its workers,
// cgroups and namespaces removed, its report not kept) and exit 130 without starting
// another.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "local/inject_spec.h"
#include "local/manifest.h"
#include "local/plot.h"
#include "local/runtime.h"
#include "local/sandbox.h"

namespace {

using nlohmann::json;
using namespace star::local;

// Set by SIGINT, SIGTERM or SIGHUP: the run in progress ends (its workers, cgroups and
// namespaces removed) and no other starts.
std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

struct Scenario {
  std::string name;
  std::string description;
  std::vector<std::string> injections;
};

const std::vector<Scenario> kScenarios = {
    {"clean", "no injection", {}},
    {"neighbor", "persistent compute straggler: 3 busy neighbor threads beside worker 2 from 5 s",
     {"worker=2,neighbor=3,start=5s"}},
    {"transient", "transient compute straggler: the same neighbor from 5 s to 20 s",
     {"worker=2,neighbor=3,start=5s,end=20s"}},
    {"bandwidth", "bandwidth straggler: worker 2's link shaped to 200 Mbit/s from 5 s",
     {"worker=2,bandwidth=200mbit,start=5s"}},
    {"bwneighbor", "co-located sender: 800 of worker 2's 1 Gbit/s uplink from 5 s (guarantee 100 Mbit/s)",
     {"worker=2,bwneighbor=800mbit,guarantee=100mbit,start=5s"}},
    {"two", "two compute stragglers: neighbors of 3 and 2 threads beside workers 1 and 3",
     {"worker=1,neighbor=3,start=5s", "worker=3,neighbor=2,start=5s"}},
    {"static", "static slow worker: worker 2 keeps half its CPU for the whole run",
     {"worker=2,cpu=0.5"}},
};

const std::vector<std::string> kPolicies = {"ssgd", "auto", "asgd", "fixed-k", "groups", "amp", "boa"};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Median compute + communication time of `worker` over samples with t in [from, to).
double MedianIterationTime(const json& report, int worker, double from, double to) {
  std::vector<double> v;
  for (const auto& s : report["samples"]) {
    const double t = s["t"].get<double>();
    if (s["worker"].get<int>() != worker || t < from || t >= to) continue;
    v.push_back(s["compute_seconds"].get<double>() + s["communication_seconds"].get<double>());
  }
  return Median(v);
}

// See the file comment. nullopt when the inputs are missing.
std::optional<double> IdealTta(const Scenario& sc, const json& clean, const json& ssgd, int n) {
  if (!clean["tta_seconds"].is_number()) return std::nullopt;
  const double tta_clean = clean["tta_seconds"].get<double>();
  if (sc.injections.empty()) return tta_clean;
  double start = 1e18, end = 0;
  bool open_ended = false;
  for (const auto& text : sc.injections) {
    auto inj = ParseInjection(text);
    if (!inj.ok()) return std::nullopt;
    start = std::min(start, inj->start_seconds);
    if (inj->end_seconds) {
      end = std::max(end, *inj->end_seconds);
    } else {
      open_ended = true;
    }
  }
  if (open_ended) end = 1e18;
  double speed_sum = 0;
  for (int w = 0; w < n; ++w) {
    const double t_clean = MedianIterationTime(clean, w, 0, 1e18);
    const double t_inj = MedianIterationTime(ssgd, w, start + 2, end);
    if (t_clean <= 0 || t_inj <= 0) return std::nullopt;
    speed_sum += std::min(1.0, t_clean / t_inj);
  }
  const double rate = speed_sum / n;  // job progress per second inside the window
  // Progress at rate 1 outside [start, end), `rate` inside, until tta_clean is done.
  if (tta_clean <= start) return tta_clean;
  double done = start;
  const double window = end - start;
  if ((tta_clean - done) <= rate * window) return start + (tta_clean - done) / rate;
  done += rate * window;
  return end + (tta_clean - done);
}

std::string Cell(const json& v, int digits = 1) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v.get<double>());
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string job_path = "bench/tta/job.yaml";
  std::string out_dir = "bench/tta/out";
  std::string scenarios_arg, policies_arg, timeout_arg = "4m";
  std::string selector_model = "models/selector.json";
  CLI::App app{"tta_bench: every policy on every straggler scenario, to the same target accuracy"};
  app.add_option("--job", job_path, "TrainingJob manifest")->capture_default_str();
  app.add_option("--out", out_dir, "output directory")->capture_default_str();
  app.add_option("--scenarios", scenarios_arg, "comma-separated subset (default: all)");
  app.add_option("--policies", policies_arg, "comma-separated subset (default: all)");
  app.add_option("--timeout", timeout_arg, "bound on each run")->capture_default_str();
  app.add_option("--selector-model", selector_model,
                 "the learned selector's model, for a job with selector ML")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (::geteuid() != 0) {
    std::cerr << "tta_bench: needs root (workers run in cgroups and namespaces)\n";
    return 1;
  }
  auto job = LoadManifest(job_path);
  if (!job.ok()) {
    std::cerr << "tta_bench: " << job.status().message() << "\n";
    return 1;
  }
  auto timeout = ParseDuration(timeout_arg);
  if (!timeout.ok()) {
    std::cerr << "tta_bench: --timeout: " << timeout.status().message() << "\n";
    return 1;
  }
  std::vector<Scenario> scenarios;
  for (const auto& sc : kScenarios) {
    auto wanted = Split(scenarios_arg);
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), sc.name) != wanted.end()) {
      scenarios.push_back(sc);
    }
  }
  std::vector<std::string> policies = policies_arg.empty() ? kPolicies : Split(policies_arg);
  for (const auto& p : policies) {
    if (!ParsePolicy(p).ok()) {
      std::cerr << "tta_bench: --policies: unknown policy \"" << p << "\"\n";
      return 1;
    }
  }
  if (auto swept = SweepStaleSandboxes(); swept.ok() && *swept > 0) {
    std::cerr << "tta_bench: removed " << *swept << " sandbox(es) left by a killed run\n";
  }
  std::filesystem::create_directories(out_dir);
  InstallStopHandlers();
  // Other processes on this machine (a build, say) must not take the workers' CPU: the
  // parent of every `star local` cgroup gets 100x the default weight (the workers stay
  // capped by their quotas).
  {
    std::error_code ec;
    std::filesystem::create_directories("/sys/fs/cgroup/cpu/star-local", ec);
    std::ofstream shares("/sys/fs/cgroup/cpu/star-local/cpu.shares");
    shares << 102400 << "\n";
    if (!shares) std::cerr << "tta_bench: could not raise star-local's cpu.shares (continuing)\n";
  }
  std::string self_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  // The bundled trainer: $STAR_TRAINER_BINARY (as `star local` takes it), else this
  // build tree's.
  const char* trainer_env = std::getenv("STAR_TRAINER_BINARY");
  const std::string trainer =
      trainer_env ? trainer_env : self_dir + "/../training-shim/examples/fmnist/star-fmnist";
  const std::string star = self_dir + "/../cli/star";
  // The star Python package of this build tree (star.torch), for jobs of PyTorch scripts.
  const char* python_env = std::getenv("STAR_PYTHONPATH");
  const std::string python_path = python_env ? python_env : self_dir + "/../python";

  json results = json::object();
  results["job"] = job_path;
  results["target_accuracy"] = job->job.spec.training.target_accuracy.value_or(0);
  results["workers"] = job->job.spec.workers.replicas;
  results["scenarios"] = json::array();
  std::map<std::string, json> full;  // "scenario/policy" -> report
  const int n = job->job.spec.workers.replicas;
  std::filesystem::create_directories(out_dir + "/runs");
  for (const auto& sc : scenarios) {
    for (const auto& p : policies) {
      RunOptions o;
      o.job = *job;
      o.policy = *ParsePolicy(p);
      for (const auto& text : sc.injections) o.injections.push_back(*ParseInjection(text));
      o.trainer_binary = trainer;
      o.busy_command = {star, "busy"};
      o.blast_command = {star, "blast"};
      o.python_path = python_path;
      o.timeout_seconds = *timeout;
      o.selector_model = selector_model;
      o.stop = &g_stop;
      std::fprintf(stderr, "tta_bench: %-10s %-8s ...", sc.name.c_str(), p.c_str());
      std::fflush(stderr);
      RunResult r = RunLocalJob(o);
      if (g_stop.load()) {
        std::fprintf(stderr, " interrupted; its workers, cgroups and namespaces were removed\n");
        return 130;
      }
      if (r.report.is_null()) {
        std::fprintf(stderr, " failed to start: %s\n", r.status.message().c_str());
        return 1;
      }
      json summary;
      summary["status"] = r.status.ok() ? "ok" : r.status.message();
      std::fprintf(stderr, " tta %s s, final accuracy %s, %lld iterations, %s\n",
                   Cell(r.report["tta_seconds"]).c_str(), Cell(r.report["final_accuracy"], 4).c_str(),
                   static_cast<long long>(r.report["iterations"].get<int64_t>()),
                   r.report["outcome"].get<std::string>().c_str());
      const std::string png = out_dir + "/" + sc.name + "-" + p + ".png";
      if (auto s = WritePlot(r.report, png); !s.ok()) {
        std::fprintf(stderr, "tta_bench: plot: %s\n", s.message().c_str());
      }
      r.report["status"] = summary["status"];
      std::ofstream(out_dir + "/runs/" + sc.name + "-" + p + ".json") << r.report.dump() << "\n";
    }
  }
  // The tables are assembled from every run on file (OUT/runs), so a later invocation on
  // a subset of scenarios or policies replaces just those runs.
  std::vector<std::string> all_policies = kPolicies;
  for (const auto& sc : kScenarios) {
    json row = {{"scenario", sc.name}, {"description", sc.description}, {"injections", sc.injections},
                {"runs", json::object()}};
    bool any = false;
    for (const auto& p : all_policies) {
      std::ifstream in(out_dir + "/runs/" + sc.name + "-" + p + ".json");
      if (!in) continue;
      json report = json::parse(in, nullptr, false);
      if (report.is_discarded()) continue;
      any = true;
      json summary = report;
      summary.erase("samples");
      row["runs"][p] = summary;
      full[sc.name + "/" + p] = report;
    }
    if (any) results["scenarios"].push_back(row);
  }
  policies = all_policies;
  // Ideal TTA and auto's figures per scenario.
  for (auto& row : results["scenarios"]) {
    const std::string sc_name = row["scenario"];
    const Scenario& sc = *std::find_if(kScenarios.begin(), kScenarios.end(),
                                       [&](const Scenario& s) { return s.name == sc_name; });
    std::optional<double> ideal;
    if (full.count("clean/ssgd") && full.count(sc_name + "/ssgd")) {
      ideal = IdealTta(sc, full["clean/ssgd"], full[sc_name + "/ssgd"], n);
    }
    row["ideal_tta_seconds"] = ideal ? json(*ideal) : json(nullptr);
    std::optional<double> best;
    for (auto& [p, run] : row["runs"].items()) {
      if (run["tta_seconds"].is_number()) {
        best = std::min(best.value_or(1e18), run["tta_seconds"].get<double>());
      }
    }
    row["best_tta_seconds"] = best ? json(*best) : json(nullptr);
    const json& runs = row["runs"];
    if (runs.contains("auto") && runs["auto"]["tta_seconds"].is_number() && best) {
      row["auto_vs_best"] = runs["auto"]["tta_seconds"].get<double>() / *best - 1;
    }
    if (runs.contains("auto") && runs.contains("ssgd") && runs["auto"]["tta_seconds"].is_number() &&
        runs["ssgd"]["tta_seconds"].is_number() && full.count("clean/ssgd") &&
        full["clean/ssgd"]["tta_seconds"].is_number() && sc_name != "clean") {
      const double ssgd = runs["ssgd"]["tta_seconds"].get<double>();
      const double clean = full["clean/ssgd"]["tta_seconds"].get<double>();
      if (ssgd > clean) {
        row["auto_offset"] = (ssgd - runs["auto"]["tta_seconds"].get<double>()) / (ssgd - clean);
      }
    }
  }
  std::ofstream(out_dir + "/results.json") << results.dump(2) << "\n";

  std::ostringstream md;
  md << "TTA in seconds to test accuracy " << Cell(results["target_accuracy"], 2) << ", " << n
     << " workers (" << job_path << "); '-' = not reached.\n\n| scenario |";
  for (const auto& p : policies) md << " " << p << " |";
  md << " ideal | auto vs best | auto offset | final acc ssgd / auto |\n|---|";
  for (size_t i = 0; i < policies.size() + 4; ++i) md << "---|";
  md << "\n";
  for (const auto& row : results["scenarios"]) {
    md << "| " << row["scenario"].get<std::string>() << " |";
    for (const auto& p : policies) {
      md << " " << (row["runs"].contains(p) ? Cell(row["runs"][p]["tta_seconds"]) : std::string("n/a")) << " |";
    }
    md << " " << Cell(row["ideal_tta_seconds"]) << " |";
    md << " " << (row.contains("auto_vs_best") ? Cell(json(100 * row["auto_vs_best"].get<double>()), 1) + "%" : "-") << " |";
    md << " " << (row.contains("auto_offset") ? Cell(json(100 * row["auto_offset"].get<double>()), 0) + "%" : "-") << " |";
    const json& runs = row["runs"];
    md << " " << (runs.contains("ssgd") ? Cell(runs["ssgd"]["final_accuracy"], 4) : "-") << " / "
       << (runs.contains("auto") ? Cell(runs["auto"]["final_accuracy"], 4) : "-") << " |\n";
  }
  std::ofstream(out_dir + "/results.md") << md.str();
  std::cout << md.str();
  return 0;
}
