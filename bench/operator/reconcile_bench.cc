// operator_reconcile_bench: reconcile throughput and memory of the operator (issue
// "reconcile throughput and memory with 500 TrainingJobs of 16 workers on the emulator").
// Not a Google Benchmark: a plain executable that prints its numbers.
//
//   operator_reconcile_bench [--jobs 500] [--workers 16] [--timeout 600] [--threads 4]
//                            [--nodes 50] [--report-rounds 30] [--report-threads 8]
//
// Starts the Kubernetes API emulator (tests/apiserver) and the operator in-process,
// creates --jobs TrainingJobs of --workers workers through the operator's client, and
// waits (at most --timeout seconds) until all jobs x workers pods exist and every job has
// status.phase (polled every 200 ms). Prints the times, the rates, the process's peak RSS (ru_maxrss, which
// includes the emulator: the RSS before the operator starts is the baseline, and the
// emulator's object counts are printed) and the operator's reconcile counts.
//
// Then, with --nodes N > 0, the bench plays the scheduler: it binds every pod to one of N
// nodes (spec.nodeName, round robin) and waits until the NodeAllocations list every pod,
// which is the operator's NodeAllocation path under load.
//
// Then the report path: every worker of every job sends --report-rounds reports (one per
// round, with its job's token, over HTTP to the operator's report endpoint) from
// --report-threads client threads, each owning whole jobs; in every tenth job worker 1
// computes 4x slower, so those jobs' loops decide (and record the decisions in status).
// Prints reports/s, the latency of one report (p50, p99, max) and the decisions seen.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>
#include <atomic>
#include <random>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apiserver/server.h"
#include "star/kube/client.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/metrics.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/operator_controllers.h"
#include "star/report/client.h"

namespace {

using namespace star;  // NOLINT
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double CurrentRssMiB() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// A minimal valid TrainingJob (as examples/fmnist-job.yaml, without the optional parts).
json JobObject(const std::string& name, int workers) {
  json container = {{"name", "trainer"},
                    {"image", "ghcr.io/star-dev/fmnist:0.1"},
                    {"resources", {{"requests", {{"cpu", "100m"}}}, {"limits", {{"cpu", "100m"}}}}}};
  return {{"apiVersion", "star.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"workers", {{"replicas", workers}, {"template", {{"spec", {{"containers", json::array({container})}}}}}}},
            {"training", {{"globalBatchSize", 16 * workers}, {"targetAccuracy", 0.85}}}}}};
}

// Items in a list of `r` (all namespaces), or -1 on error.
long CountItems(kube::Client& client, const kube::ResourceRef& r, const kube::ListOptions& o = {}) {
  auto list = client.List(r, "", o);
  if (!list.ok()) return -1;
  const json& items = (*list)["items"];
  return items.is_array() ? static_cast<long>(items.size()) : 0;
}

// Jobs of `list` with a status.phase.
long JobsWithPhase(const json& list) {
  long n = 0;
  for (const json& j : list.value("items", json::array())) {
    auto st = j.find("status");
    if (st != j.end() && st->is_object() && st->contains("phase")) ++n;
  }
  return n;
}

// star_operator_reconcile_total{result="..."} values from the text exposition.
std::map<std::string, double> ReconcileCounts(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  const std::string prefix = "star_operator_reconcile_total{result=\"";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t q = line.find('"', prefix.size());
    const size_t sp = line.rfind(' ');
    if (q == std::string::npos || sp == std::string::npos) continue;
    out[line.substr(prefix.size(), q - prefix.size())] = std::stod(line.substr(sp + 1));
  }
  return out;
}

// The binding phase (see the file comment). False when a binding failed or the
// NodeAllocations did not list every pod by `deadline`.
bool BindPhase(kube::Client& kc, int jobs, int workers, int nodes, Clock::time_point deadline) {
  const auto t0 = Clock::now();
  long bound = 0;
  for (int j = 0; j < jobs; ++j) {
    char name[32];
    std::snprintf(name, sizeof name, "job-%05d", j);
    for (int w = 0; w < workers; ++w) {
      const std::string node = "node-" + std::to_string((static_cast<long>(j) * workers + w) % nodes);
      auto r = kc.MergePatch(kube::Pods(), "default", op::WorkerPodName(name, w), {{"spec", {{"nodeName", node}}}});
      if (!r.ok()) return std::cerr << "bind: " << r.status().ToString() << "\n", false;
      ++bound;
    }
  }
  const auto t_bound = Clock::now();
  long listed = 0;
  while (Clock::now() < deadline) {
    auto list = kc.List(kube::NodeAllocations(), "");
    listed = 0;
    if (list.ok()) {
      for (const json& na : (*list)["items"]) listed += static_cast<long>(na["spec"].value("pods", json::array()).size());
    }
    if (listed >= bound) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const auto t_listed = Clock::now();
  std::printf("bound %ld pods to %d nodes in %.2f s (%.0f bindings/s); NodeAllocations list %ld pods %.2f s after "
              "the first binding\n",
              bound, nodes, Seconds(t0, t_bound), static_cast<double>(bound) / Seconds(t0, t_bound), listed,
              Seconds(t0, t_listed));
  std::fflush(stdout);
  return listed >= bound;
}

// The report phase (see the file comment). False when a report failed.
bool ReportPhase(kube::Client& kc, const std::string& report_url, int jobs, int workers, int rounds, int threads) {
  const kube::ResourceRef secrets{"", "v1", "secrets", true, "Secret"};
  auto list = kc.List(secrets, "default");
  if (!list.ok()) return std::cerr << "secrets: " << list.status().ToString() << "\n", false;
  std::map<std::string, std::string> tokens;  // job name -> token
  for (const json& sec : (*list)["items"]) {
    const std::string name = sec["metadata"].value("name", "");
    const auto dash = name.rfind("-token");
    auto token = op::SecretToken(sec);
    if (dash != std::string::npos && token) tokens[name.substr(0, dash)] = *token;
  }
  std::atomic<long> failures{0}, decisions{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(threads));
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      std::lognormal_distribution<double> noise(0.0, 0.05);
      std::vector<std::unique_ptr<report::ReportClient>> clients;
      std::vector<std::string> names;
      for (int j = t; j < jobs; j += threads) {
        char name[32];
        std::snprintf(name, sizeof name, "job-%05d", j);
        report::ReportClientOptions co;
        co.base_url = report_url;
        co.token = tokens[name];
        co.timeout = std::chrono::seconds(60);
        auto c = report::ReportClient::Create(co);
        if (!c.ok()) {
          ++failures;
          return;
        }
        clients.push_back(std::move(c).value());
        names.push_back(name);
      }
      std::vector<int64_t> epoch(clients.size(), 0);
      for (int round = 1; round <= rounds; ++round) {
        for (size_t i = 0; i < clients.size(); ++i) {
          const bool slow_job = (t + static_cast<int>(i) * threads) % 10 == 0;
          for (int w = 0; w < workers; ++w) {
            api::WorkerReport r;
            r.job = "default/" + names[i];
            r.worker = w;
            r.iteration = round;
            r.time_seconds = round * 0.5;
            r.local_batch = 16;
            r.compute_seconds = (slow_job && w == 1 ? 0.4 : 0.1) * noise(rng);
            r.communication_seconds = 0.01;
            const auto a = Clock::now();
            auto got = clients[i]->Send(r);
            latencies[static_cast<size_t>(t)].push_back(Seconds(a, Clock::now()));
            if (!got.ok()) {
              ++failures;
            } else if (*got && (*got)->epoch > epoch[i]) {
              epoch[i] = (*got)->epoch;
              ++decisions;
            }
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const double wall = Seconds(t0, Clock::now());
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))]; };
  std::printf("reports: %zu in %.2f s from %d threads: %.0f reports/s; latency ms p50 %.2f p99 %.2f max %.2f; "
              "new decisions seen %ld; failures %ld\n",
              all.size(), wall, threads, static_cast<double>(all.size()) / wall, pct(0.5) * 1e3, pct(0.99) * 1e3,
              all.empty() ? 0.0 : all.back() * 1e3, decisions.load(), failures.load());
  std::fflush(stdout);
  return failures == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"operator_reconcile_bench: reconcile throughput and memory on the API emulator"};
  int jobs = 500, workers = 16, timeout_s = 600, threads = 4, report_rounds = 30, report_threads = 8, nodes = 50;
  app.add_option("--jobs", jobs, "TrainingJobs to create")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--workers", workers, "Workers per job")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--timeout", timeout_s, "Seconds to wait for every pod and phase")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--threads", threads, "Operator reconcile threads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--nodes", nodes, "Nodes to bind the pods to after the reconcile (0 = skip)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--report-rounds", report_rounds, "Reports per worker after the reconcile (0 = skip)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--report-threads", report_threads, "Client threads sending the reports")
      ->capture_default_str()->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);

  apiserver::ApiServerOptions so;
  so.crds_dir = STAR_CRDS_DIR;
  so.api.history_limit = 100000;  // watches resume through bursts of many changes
  apiserver::ApiServer server(so);
  if (Status s = server.Start(); !s.ok()) return std::cerr << "emulator: " << s.ToString() << "\n", 1;

  kube::ClientOptions co;
  co.server = server.url();
  co.request_timeout = std::chrono::seconds(60);
  co.user_agent = "operator-reconcile-bench";
  auto client = kube::Client::Create(co);
  if (!client.ok()) return std::cerr << "client: " << client.status().ToString() << "\n", 1;
  kube::Client& kc = **client;

  const double rss_baseline = CurrentRssMiB();
  const double peak_baseline = PeakRssMiB();

  op::ManagerOptions mo;
  mo.reconcile_threads = threads;
  op::OperatorMetrics metrics;
  std::unique_ptr<op::OperatorControllers> controllers;  // outlives the manager
  auto created_op = op::Manager::Create(&kc, mo, &metrics);
  if (!created_op.ok()) return std::cerr << "operator: " << created_op.status().ToString() << "\n", 1;
  std::unique_ptr<op::Manager> oper = std::move(created_op).value();
  op::OperatorControllerOptions oo;
  oo.report.listen = "127.0.0.1:0";
  auto added = op::AddOperatorControllers(oper.get(), oo);
  if (!added.ok()) return std::cerr << "operator: " << added.status().ToString() << "\n", 1;
  controllers = std::move(added).value();
  if (Status s = oper->Start(); !s.ok()) return std::cerr << "operator start: " << s.ToString() << "\n", 1;
  const double rss_operator_idle = CurrentRssMiB();

  const long want_pods = static_cast<long>(jobs) * workers;
  std::cout << "jobs " << jobs << ", workers " << workers << ", pods wanted " << want_pods
            << ", reconcile threads " << threads << std::endl;

  const auto t0 = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "job-%05d", i);
    auto c = kc.Create(kube::TrainingJobs(), "default", JobObject(name, workers));
    if (!c.ok()) return std::cerr << "create " << name << ": " << c.status().ToString() << "\n", 1;
  }
  const auto t_created = Clock::now();
  std::cout << "created " << jobs << " TrainingJobs in " << Seconds(t0, t_created) << " s" << std::endl;

  const auto deadline = t0 + std::chrono::seconds(timeout_s);
  kube::ListOptions pod_sel;
  pod_sel.label_selector = op::kJobLabel;
  long pods = 0, phased = 0;
  std::optional<Clock::time_point> t_pods, t_phase;
  while (Clock::now() < deadline && (!t_pods || !t_phase)) {
    if (!t_pods) {
      pods = CountItems(kc, kube::Pods(), pod_sel);
      if (pods >= want_pods) t_pods = Clock::now();
    }
    if (!t_phase) {
      auto list = kc.List(kube::TrainingJobs(), "");
      phased = list.ok() ? JobsWithPhase(*list) : -1;
      if (phased >= jobs) t_phase = Clock::now();
    }
    if (!t_pods || !t_phase) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Let the queue drain (bounded by the same deadline) so the reconcile count is final.
  while (Clock::now() < deadline && oper->pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t_end = Clock::now();

  const auto counts = ReconcileCounts(metrics.Serialize());
  const double rss_end = CurrentRssMiB();
  const double peak = PeakRssMiB();

  std::cout << "pods listed " << pods << " / " << want_pods << ", jobs with a phase " << phased << " / " << jobs << "\n";
  if (t_pods) {
    const double s = Seconds(t0, *t_pods);
    std::cout << "all pods exist after " << s << " s (from the first create): " << jobs / s << " jobs/s, "
              << want_pods / s << " pods/s\n";
  } else {
    std::cout << "TIMEOUT: not every pod exists after " << timeout_s << " s\n";
  }
  if (t_phase) {
    std::cout << "every job has a phase after " << Seconds(t0, *t_phase) << " s\n";
  } else {
    std::cout << "TIMEOUT: not every job has a phase after " << timeout_s << " s\n";
  }
  std::cout << "queue drained after " << Seconds(t0, t_end) << " s (pending " << oper->pending() << ")\n";
  std::cout << "reconciles:";
  double total = 0;
  for (const auto& [result, n] : counts) std::cout << " " << result << " " << n, total += n;
  std::cout << " (total " << total << ", " << total / jobs << " per job)\n";

  const kube::ResourceRef secrets{"", "v1", "secrets", true, "Secret"};
  std::cout << "emulator objects: trainingjobs " << CountItems(kc, kube::TrainingJobs())
            << ", pods " << CountItems(kc, kube::Pods()) << ", services " << CountItems(kc, kube::Services())
            << ", secrets " << CountItems(kc, secrets) << ", nodeallocations "
            << CountItems(kc, kube::NodeAllocations()) << ", events " << CountItems(kc, kube::Events())
            << "\n";
  std::printf("RSS MiB: before operator %.1f (peak %.1f), operator started %.1f, end %.1f, peak %.1f; "
              "peak - baseline %.1f (operator + emulator objects)\n",
              rss_baseline, peak_baseline, rss_operator_idle, rss_end, peak, peak - rss_baseline);
  std::fflush(stdout);

  bool bound_ok = true;
  if (nodes > 0) bound_ok = BindPhase(kc, jobs, workers, nodes, deadline);
  bool reports_ok = true;
  if (report_rounds > 0) reports_ok = ReportPhase(kc, controllers->endpoint->url(), jobs, workers, report_rounds, report_threads);
  if (nodes > 0 || report_rounds > 0) {
    std::printf("RSS MiB after every phase: %.1f, peak %.1f\n", CurrentRssMiB(), PeakRssMiB());
    std::fflush(stdout);
  }

  oper->Stop();
  server.Stop();
  return t_pods && t_phase && bound_ok && reports_ok ? 0 : 2;
}
