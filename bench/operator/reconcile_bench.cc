// operator_reconcile_bench: reconcile throughput and memory of star-operator on a real
// Kubernetes API server (issue "reconcile throughput and memory with 500 TrainingJobs of
// 16 workers"). Not a Google Benchmark: a plain executable that prints its numbers.
//
//   operator_reconcile_bench [--kubeconfig FILE] [--namespace star-bench] [--jobs 500]
//                            [--workers 16] [--timeout 600] [--nodes 50]
//                            [--bind-threads 4] [--report-rounds 30] [--report-threads 8]
//                            [--operator PATH] [--operator-log FILE] [--no-restart] [--keep]
//
// The cluster: --kubeconfig (default $KUBECONFIG), a cluster admin, with the CRDs applied.
// bench/operator/run.sh starts a throwaway one (scripts/cluster.sh) and runs this.
//
// Runs the real star-operator (--operator, default the one built with this bench) as a
// child process watching --namespace (created here; refused if it exists), so that its
// memory is its own: VmRSS and VmHWM (peak) from /proc/PID/status after each phase. Its
// /metrics (--metrics-listen on a free loopback port) gives the reconcile counts and the
// reconcile duration's p99 per phase (star_operator_reconcile_duration_seconds, estimated
// from the histogram's buckets as Prometheus' histogram_quantile does).
//
// 1. Reconcile: creates --jobs TrainingJobs of --workers workers, and waits (at most
//    --timeout s) until all jobs x workers pods exist and every job has status.phase (the
//    bench's own informers on pods and jobs, so no polling load), then until the reconcile
//    count has stayed the same for 2 s.
// 2. NodeAllocations, with --nodes N > 0: the bench plays the scheduler. The pod template
//    names schedulerName star-bench, which no scheduler serves, so no pod runs anywhere;
//    the bench creates N Nodes (Ready, their Leases in kube-node-lease renewed every 10 s
//    so the node lifecycle controller leaves them and their pods alone), binds every pod
//    round robin with the pods/binding subresource from --bind-threads threads, and waits
//    until the NodeAllocations of those nodes list every pod.
// 3. Reports, with --report-rounds R > 0: every worker of every job sends R reports (one per
//    round, with its job's token, over HTTP to the operator's report endpoint) from
//    --report-threads threads, each owning whole jobs; in every tenth job worker 1
//    computes 4x slower, so those jobs' loops decide (and record the decisions in status).
//    Prints reports/s, the latency of one report (p50, p99, max), the decisions seen.
//
// 4. Restart, unless --no-restart: stops star-operator and starts a new one, which lists
//    every object of the phases above into its caches (in pages) and reconciles every job
//    once more; prints when it was ready, its reconciles until quiet and its memory.
//
// Then (unless --keep) deletes the jobs while the operator still runs (it releases their
// finalizers), the Nodes and their Leases, the namespace (the pod garbage collector removes
// the pods of the deleted nodes: a minute or two) and the NodeAllocations; then stops the
// operator.
// Exit 0 when every phase completed, 2 when one timed out or failed, 1 on a setup error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "star/kube/client.h"
#include "star/kube/informer.h"
#include "star/kube/time.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/report/client.h"

namespace {

using namespace star;  // NOLINT
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const kube::ResourceRef kNodes{"", "v1", "nodes", false, "Node"};
const kube::ResourceRef kNamespaces{"", "v1", "namespaces", false, "Namespace"};
const kube::ResourceRef kSecrets{"", "v1", "secrets", true, "Secret"};
constexpr char kBenchScheduler[] = "star-bench";

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string JobName(int j) {
  char name[32];
  std::snprintf(name, sizeof name, "job-%05d", j);
  return name;
}

// ---- the machine, the date, the commit ----------------------------------------------------

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string CommandOutput(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  return Trim(out);
}

void PrintProvenance() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "?";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = Trim(line.substr(line.find(':') + 2));
      break;
    }
  }
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string git = "git -C '" STAR_SOURCE_DIR "' ";
  std::string commit = CommandOutput(git + "rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) commit = "?";
  if (!CommandOutput(git + "status --porcelain --untracked-files=no 2>/dev/null").empty()) commit += " (with changes)";
  std::printf("machine: %s, %u CPUs; load average %s\ndate: %s\ncommit: %s\n", model.c_str(),
              std::thread::hardware_concurrency(), CommandOutput("cut -d' ' -f1-3 /proc/loadavg").c_str(), date,
              commit.c_str());
  std::fflush(stdout);
}

// ---- the operator as a child process ------------------------------------------------------

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

// One HTTP/1.0 GET of http://127.0.0.1:port/path: the body, or nullopt.
std::optional<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return close(fd), std::nullopt;
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) return close(fd), std::nullopt;
  std::string resp;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.", 0) != 0 || resp.find(" 200 ") == std::string::npos || body == std::string::npos) {
    return std::nullopt;
  }
  return resp.substr(body + 4);
}

// star-operator, started by Start and stopped (SIGTERM, then SIGKILL after 30 s) by Stop or
// the destructor. It dies with the bench (PR_SET_PDEATHSIG).
class OperatorProcess {
 public:
  ~OperatorProcess() { Stop(); }

  // Starts `argv` and waits (at most `timeout`) for its "ready" line; report_url() is then
  // the endpoint it printed. `log` "" = the operator's stderr is the bench's (truncated by
  // the first Start, appended to by later ones).
  bool Start(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds timeout) {
    int out[2];
    if (pipe(out) != 0) return false;
    const bool restarted = started_;  // a restart's log follows the first one's
    started_ = true;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      dup2(out[1], STDOUT_FILENO);
      if (!log.empty()) {
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | (restarted ? O_APPEND : O_TRUNC), 0644);
        if (fd >= 0) dup2(fd, STDERR_FILENO);
      }
      close(out[0]);
      close(out[1]);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      std::perror(args[0]);
      _exit(127);
    }
    close(out[1]);
    out_ = out[0];
    const auto deadline = Clock::now() + timeout;
    std::string pending;
    while (Clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return false;  // exited
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
        const std::string line = pending.substr(0, nl);
        if (line.rfind("report-url ", 0) == 0) report_url_ = line.substr(11);
        if (line == "ready") {
          drain_ = std::thread([fd = out_] {  // it prints nothing more; keep the pipe open and empty
            char b[4096];
            while (read(fd, b, sizeof b) > 0) {
            }
          });
          return true;
        }
      }
    }
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 300 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    if (drain_.joinable()) drain_.join();
    if (out_ >= 0) close(out_);
    out_ = -1;
  }

  bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  const std::string& report_url() const { return report_url_; }

  // A field of /proc/PID/status in MiB ("VmRSS", "VmHWM"); -1 when unreadable.
  double MemoryMiB(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;  // kB
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool started_ = false;
  std::string report_url_;
  std::thread drain_;
};

// ---- /metrics -------------------------------------------------------------------------------

// The operator's metrics that the bench reads, from one scrape.
struct Scrape {
  std::map<std::string, double> reconciles;         // star_operator_reconcile_total by result
  std::map<double, double> reconcile_buckets;       // le -> cumulative count (+Inf as infinity)
  std::map<double, double> decision_buckets;        // star_job_decision_latency_seconds
  double decisions = 0;                             // sum of star_job_decisions_total
  double reports = 0;                               // sum of star_job_reports_total
  double ReconcileTotal() const {
    double t = 0;
    for (const auto& [result, n] : reconciles) t += n;
    return t;
  }
};

double LastNumber(const std::string& line) { return std::stod(line.substr(line.rfind(' ') + 1)); }

double LeOf(const std::string& line) {
  const size_t a = line.find("le=\"") + 4;
  const std::string le = line.substr(a, line.find('"', a) - a);
  return le == "+Inf" ? INFINITY : std::stod(le);
}

std::optional<Scrape> ScrapeMetrics(int port) {
  auto text = HttpGet(port, "/metrics");
  if (!text) return std::nullopt;
  Scrape s;
  std::istringstream in(*text);
  std::string line;
  const std::string total = "star_operator_reconcile_total{result=\"";
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(total, 0) == 0) {
      s.reconciles[line.substr(total.size(), line.find('"', total.size()) - total.size())] = LastNumber(line);
    } else if (line.rfind("star_operator_reconcile_duration_seconds_bucket{", 0) == 0) {
      s.reconcile_buckets[LeOf(line)] = LastNumber(line);
    } else if (line.rfind("star_job_decision_latency_seconds_bucket{", 0) == 0) {
      s.decision_buckets[LeOf(line)] = LastNumber(line);
    } else if (line.rfind("star_job_decisions_total{", 0) == 0) {
      s.decisions += LastNumber(line);
    } else if (line.rfind("star_job_reports_total{", 0) == 0) {
      s.reports += LastNumber(line);
    }
  }
  return s;
}

// The q-quantile of the observations between two scrapes of a histogram, interpolated
// linearly inside its bucket (Prometheus' histogram_quantile); "-" without observations.
std::string Quantile(const std::map<double, double>& before, const std::map<double, double>& after, double q) {
  std::vector<std::pair<double, double>> b;  // le, count in the interval
  for (const auto& [le, n] : after) {
    auto it = before.find(le);
    b.emplace_back(le, n - (it == before.end() ? 0 : it->second));
  }
  if (b.empty() || b.back().second <= 0) return "-";
  const double rank = q * b.back().second;
  double lower = 0, below = 0;
  for (const auto& [le, n] : b) {
    if (n >= rank) {
      char out[96];
      if (std::isinf(le)) {
        std::snprintf(out, sizeof out, "> %g s (above the last bucket)", lower);
      } else {
        const double v = lower + (le - lower) * (n > below ? (rank - below) / (n - below) : 1.0);
        std::snprintf(out, sizeof out, "%.4f s (bucket %g-%g s)", v, lower, le);
      }
      return out;
    }
    lower = le;
    below = n;
  }
  return "-";
}

// "success 1000 error 0 requeue 0 (total 1000, 2.0 per job)" for the reconciles between two scrapes.
std::string ReconcileCounts(const Scrape& before, const Scrape& after, int jobs) {
  std::ostringstream o;
  for (const auto& [result, n] : after.reconciles) {
    auto it = before.reconciles.find(result);
    o << result << " " << n - (it == before.reconciles.end() ? 0 : it->second) << " ";
  }
  const double total = after.ReconcileTotal() - before.ReconcileTotal();
  o << "(total " << total << ", " << total / jobs << " per job)";
  return o.str();
}

// ---- the objects ----------------------------------------------------------------------------

// A minimal valid TrainingJob (as examples/fmnist-job.yaml, without the optional parts). Its
// pods name a scheduler that does not exist (the bench binds them) and tolerate every taint
// (no eviction from the fake nodes, whatever their state).
json JobObject(const std::string& ns, const std::string& name, int workers) {
  json container = {{"name", "trainer"},
                    {"image", "ghcr.io/star-dev/fmnist:0.1"},
                    {"resources", {{"requests", {{"cpu", "100m"}}}, {"limits", {{"cpu", "100m"}}}}}};
  json pod_spec = {{"schedulerName", kBenchScheduler},
                   {"tolerations", json::array({{{"operator", "Exists"}}})},
                   {"containers", json::array({container})}};
  return {{"apiVersion", "star.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"workers", {{"replicas", workers}, {"template", {{"spec", pod_spec}}}}},
            {"training", {{"globalBatchSize", 16 * workers}, {"targetAccuracy", 0.85}}}}}};
}

// Items in a list, or -1 on error.
long CountItems(kube::Client& kc, const kube::ResourceRef& r, const std::string& ns) {
  auto list = kc.List(r, ns);
  if (!list.ok()) return -1;
  const json& items = (*list)["items"];
  return items.is_array() ? static_cast<long>(items.size()) : 0;
}

// Now as a metav1.MicroTime ("2025-01-31T12:00:00.123456Z"), which Lease times must be.
std::string NowMicro() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long us = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  char out[64];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%S", std::gmtime(&t));
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06ldZ", us);
  return std::string(out) + frac;
}

// The fake Nodes of the NodeAllocation phase: created Ready, their Leases renewed every 10 s
// on a thread of their own until Stop. Delete removes Nodes, Leases and NodeAllocations.
class FakeNodes {
 public:
  FakeNodes(kube::Client* kc, std::vector<std::string> names) : kc_(kc), names_(std::move(names)) {}
  ~FakeNodes() { Stop(); }

  bool Create() {
    for (const std::string& name : names_) {
      json node = {{"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}, {"star.dev/bench", "true"}}}}}};
      if (auto r = kc_->Create(kNodes, "", node); !r.ok()) {
        return std::cerr << "node " << name << ": " << r.status().ToString() << "\n", false;
      }
      const std::string now = kube::NowRfc3339();
      json capacity = {{"cpu", "32"}, {"memory", "64Gi"}, {"pods", "1000"}};
      json status = {{"status",
                      {{"capacity", capacity},
                       {"allocatable", capacity},
                       {"conditions", json::array({{{"type", "Ready"},
                                                    {"status", "True"},
                                                    {"reason", "KubeletReady"},
                                                    {"message", "a fake node of operator_reconcile_bench"},
                                                    {"lastHeartbeatTime", now},
                                                    {"lastTransitionTime", now}}})}}}};
      if (auto r = kc_->MergePatch(kNodes, "", name, status, /*status=*/true); !r.ok()) {
        return std::cerr << "node " << name << " status: " << r.status().ToString() << "\n", false;
      }
      json lease = {{"metadata", {{"name", name}, {"namespace", "kube-node-lease"}}},
                    {"spec", {{"holderIdentity", name}, {"leaseDurationSeconds", 40}, {"renewTime", NowMicro()}}}};
      if (auto r = kc_->Create(kube::Leases(), "kube-node-lease", lease); !r.ok()) {
        return std::cerr << "lease " << name << ": " << r.status().ToString() << "\n", false;
      }
    }
    renew_ = std::thread([this] {
      while (!stop_) {
        for (int i = 0; i < 100 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        for (const std::string& name : names_) {
          if (stop_) break;
          (void)kc_->MergePatch(kube::Leases(), "kube-node-lease", name, {{"spec", {{"renewTime", NowMicro()}}}});
        }
      }
    });
    return true;
  }

  void Stop() {
    stop_ = true;
    if (renew_.joinable()) renew_.join();
  }

  // The Nodes and their Leases: pods bound to them are then removed by the pod garbage
  // collector (no kubelet will finish their deletion).
  void DeleteNodes() {
    Stop();
    for (const std::string& name : names_) {
      (void)kc_->Delete(kNodes, "", name);
      (void)kc_->Delete(kube::Leases(), "kube-node-lease", name);
    }
  }
  void DeleteAllocations() {
    for (const std::string& name : names_) (void)kc_->Delete(kube::NodeAllocations(), "", name);
  }

 private:
  kube::Client* kc_;
  std::vector<std::string> names_;
  std::atomic<bool> stop_{false};
  std::thread renew_;
};

// ---- the phases -----------------------------------------------------------------------------

// Counts from the bench's informers on the namespace's job pods and TrainingJobs, with the
// time each count first reached its target.
class Progress {
 public:
  Progress(kube::Client* kc, const std::string& ns, long want_pods, long want_jobs)
      : want_pods_(want_pods), want_jobs_(want_jobs) {
    kube::InformerOptions po;
    po.ns = ns;
    po.label_selector = op::kJobLabel;
    pods_ = std::make_unique<kube::Informer>(kc, kube::Pods(), po, [this](const std::string& type, const json&) {
      if (type == "ADDED") ++pods_seen_;
      if (type == "DELETED") --pods_seen_;
      if (pods_seen_ >= want_pods_) Reached(&t_pods_);
    });
    kube::InformerOptions jo;
    jo.ns = ns;
    jobs_ = std::make_unique<kube::Informer>(kc, kube::TrainingJobs(), jo, [this](const std::string& type, const json& j) {
      const std::string key = kube::KeyOf(j);
      const auto st = j.find("status");
      const bool has = type != "DELETED" && st != j.end() && st->is_object() && st->contains("phase");
      const bool had = phased_set_.count(key) > 0;
      if (has && !had) phased_set_.insert(key), ++phased_;
      if (!has && had) phased_set_.erase(key), --phased_;
      if (phased_ >= want_jobs_) Reached(&t_phase_);
    });
  }

  bool Start(std::chrono::milliseconds timeout) {
    pods_->Start();
    jobs_->Start();
    return pods_->WaitForSync(timeout) && jobs_->WaitForSync(timeout);
  }
  void Stop() {
    pods_->Stop();
    jobs_->Stop();
  }
  long pods() const { return pods_seen_; }
  long phased() const { return phased_; }
  std::optional<Clock::time_point> t_pods() const { return Get(t_pods_); }
  std::optional<Clock::time_point> t_phase() const { return Get(t_phase_); }

 private:
  void Reached(std::optional<Clock::time_point>* t) {
    std::lock_guard<std::mutex> l(mu_);
    if (!*t) *t = Clock::now();
  }
  std::optional<Clock::time_point> Get(const std::optional<Clock::time_point>& t) const {
    std::lock_guard<std::mutex> l(mu_);
    return t;
  }
  const long want_pods_, want_jobs_;
  std::atomic<long> pods_seen_{0}, phased_{0};
  std::set<std::string> phased_set_;  // the jobs informer's thread only
  mutable std::mutex mu_;
  std::optional<Clock::time_point> t_pods_, t_phase_;
  std::unique_ptr<kube::Informer> pods_, jobs_;
};

// Waits (until `deadline`) until the reconcile count has not changed for 2 s; the last scrape.
Scrape WaitForQuiet(int metrics_port, Clock::time_point deadline) {
  Scrape last = ScrapeMetrics(metrics_port).value_or(Scrape{});
  auto since = Clock::now();
  while (Clock::now() < deadline && Seconds(since, Clock::now()) < 2.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto s = ScrapeMetrics(metrics_port);
    if (!s) continue;
    if (s->ReconcileTotal() != last.ReconcileTotal()) since = Clock::now();
    last = *s;
  }
  return last;
}

// The NodeAllocation phase (see the file comment). False when a binding failed or the
// NodeAllocations did not list every pod within `timeout`.
bool BindPhase(kube::Client& kc, const std::string& ns, int jobs, int workers, const std::vector<std::string>& nodes,
               int threads, std::chrono::seconds timeout) {
  const auto t0 = Clock::now();
  std::atomic<long> bound{0}, failed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int j = t; j < jobs && failed == 0; j += threads) {
        for (int w = 0; w < workers; ++w) {
          const std::string pod = op::WorkerPodName(JobName(j), w);
          const std::string& node = nodes[static_cast<size_t>((static_cast<long>(j) * workers + w) % static_cast<long>(nodes.size()))];
          const kube::ResourceRef binding{"", "v1", "pods/" + pod + "/binding", true, "Binding"};
          json b = {{"metadata", {{"name", pod}, {"namespace", ns}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
          auto r = kc.Create(binding, ns, b);
          if (!r.ok()) {
            if (failed++ == 0) std::cerr << "bind " << pod << ": " << r.status().ToString() << "\n";
            return;
          }
          ++bound;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto t_bound = Clock::now();
  const std::set<std::string> ours(nodes.begin(), nodes.end());
  long listed = 0;
  const auto deadline = t_bound + timeout;
  while (failed == 0 && Clock::now() < deadline) {
    auto list = kc.List(kube::NodeAllocations(), "");
    listed = 0;
    if (list.ok()) {
      for (const json& na : (*list)["items"]) {
        if (ours.count(na["metadata"].value("name", "")) == 0) continue;
        listed += static_cast<long>(na["spec"].value("pods", json::array()).size());
      }
    }
    if (listed >= bound) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const auto t_listed = Clock::now();
  std::printf("bound %ld pods to %zu nodes (pods/binding, %d threads) in %.2f s (%.0f bindings/s); the "
              "NodeAllocations list %ld pods %.2f s after the first binding (%.2f s after the last)\n",
              bound.load(), nodes.size(), threads, Seconds(t0, t_bound),
              static_cast<double>(bound) / Seconds(t0, t_bound), listed, Seconds(t0, t_listed),
              Seconds(t_bound, t_listed));
  std::fflush(stdout);
  return failed == 0 && listed >= bound && bound == static_cast<long>(jobs) * workers;
}

// The report phase (see the file comment). False when a report failed.
bool ReportPhase(kube::Client& kc, const std::string& ns, const std::string& report_url, int jobs, int workers,
                 int rounds, int threads) {
  auto list = kc.List(kSecrets, ns);
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
        report::ReportClientOptions co;
        co.base_url = report_url;
        co.token = tokens[JobName(j)];
        co.timeout = std::chrono::seconds(60);
        auto c = report::ReportClient::Create(co);
        if (!c.ok()) {
          ++failures;
          return;
        }
        clients.push_back(std::move(c).value());
        names.push_back(JobName(j));
      }
      std::vector<int64_t> epoch(clients.size(), 0);
      for (int round = 1; round <= rounds; ++round) {
        for (size_t i = 0; i < clients.size(); ++i) {
          const bool slow_job = (t + static_cast<int>(i) * threads) % 10 == 0;
          for (int w = 0; w < workers; ++w) {
            api::WorkerReport r;
            r.job = ns + "/" + names[i];
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
              if (failures++ == 0) std::cerr << "report: " << got.status().ToString() << "\n";
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

// The restart phase (see the file comment): stops `oper`, starts it again with `argv` and
// waits until its reconciles are quiet; *peak becomes the larger VmHWM. False when the new
// one is not ready within 120 s or exits.
bool RestartPhase(OperatorProcess* oper, const std::vector<std::string>& argv, const std::string& log,
                  int metrics_port, int jobs, int timeout_s, double* peak) {
  oper->Stop();
  const auto t0 = Clock::now();
  if (!oper->Start(argv, log, std::chrono::seconds(120))) {
    std::printf("restart: star-operator did not print \"ready\" within 120 s\n");
    return false;
  }
  const double ready = Seconds(t0, Clock::now());
  const double rss_ready = oper->MemoryMiB("VmRSS"), hwm_ready = oper->MemoryMiB("VmHWM");
  const Scrape after = WaitForQuiet(metrics_port, Clock::now() + std::chrono::seconds(timeout_s));
  const double hwm = oper->MemoryMiB("VmHWM");
  std::printf("restart: a new star-operator ready (caches listed) after %.2f s, VmRSS %.1f MiB, VmHWM %.1f MiB; "
              "reconciles until quiet %.2f s after the start: %s; reconcile p99 %s; memory MiB then VmRSS %.1f, "
              "VmHWM %.1f\n",
              ready, rss_ready, hwm_ready, Seconds(t0, Clock::now()), ReconcileCounts(Scrape{}, after, jobs).c_str(),
              Quantile({}, after.reconcile_buckets, 0.99).c_str(), oper->MemoryMiB("VmRSS"), hwm);
  std::fflush(stdout);
  *peak = std::max(*peak, hwm);
  return oper->alive();
}

// Deletes the jobs (the operator, still running, takes their pods out of the
// NodeAllocations and releases their finalizers), the fake nodes, the namespace, and the
// nodes' NodeAllocations; waits at most `timeout` for the jobs and the namespace to go.
void CleanUp(kube::Client& kc, const std::string& ns, int jobs, FakeNodes* nodes, std::chrono::seconds timeout) {
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  for (int j = 0; j < jobs; ++j) (void)kc.Delete(kube::TrainingJobs(), ns, JobName(j));
  long left = 0;
  while (Clock::now() < deadline && (left = CountItems(kc, kube::TrainingJobs(), ns)) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const auto t_jobs = Clock::now();
  if (nodes != nullptr) nodes->DeleteNodes();
  (void)kc.Delete(kNamespaces, "", ns);
  bool gone = false;
  while (Clock::now() < deadline && !gone) {
    auto got = kc.Get(kNamespaces, "", ns);
    gone = !got.ok() && got.status().code() == StatusCode::kNotFound;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (nodes != nullptr) nodes->DeleteAllocations();
  std::printf("clean-up: jobs %s after %.1f s, namespace %s %s after %.1f s\n", left == 0 ? "deleted" : "NOT deleted",
              Seconds(t0, t_jobs), ns.c_str(), gone ? "deleted" : "NOT deleted yet", Seconds(t0, Clock::now()));
  std::fflush(stdout);
}

std::string KubeconfigPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("KUBECONFIG");
  if (env == nullptr) return "";
  std::istringstream in(env);
  std::string entry;
  while (std::getline(in, entry, ':')) {
    if (!entry.empty() && access(entry.c_str(), R_OK) == 0) return entry;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"operator_reconcile_bench: star-operator's reconcile throughput and memory on a real API server"};
  std::string kubeconfig, ns = "star-bench", operator_bin = STAR_OPERATOR_BIN, operator_log;
  int jobs = 500, workers = 16, timeout_s = 600, report_rounds = 30, report_threads = 8, nodes = 50, bind_threads = 4;
  bool keep = false, restart = true;
  app.add_option("--kubeconfig", kubeconfig, "A cluster admin's kubeconfig (default $KUBECONFIG)");
  app.add_option("--namespace", ns, "Namespace to create and run the jobs in (must not exist)")->capture_default_str();
  app.add_option("--jobs", jobs, "TrainingJobs to create")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--workers", workers, "Workers per job")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--timeout", timeout_s, "Seconds each phase may wait")->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--nodes", nodes, "Fake nodes to bind the pods to after the reconcile (0 = skip)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--bind-threads", bind_threads, "Threads binding the pods")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--report-rounds", report_rounds, "Reports per worker after the reconcile (0 = skip)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--report-threads", report_threads, "Client threads sending the reports")
      ->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--operator", operator_bin, "The star-operator binary")->capture_default_str();
  app.add_option("--operator-log", operator_log, "File for the operator's stderr (default: this one's stderr)");
  app.add_flag("--restart,!--no-restart", restart,
               "After the reports, restart star-operator and measure the new one (default on)");
  app.add_flag("--keep", keep, "Leave the namespace, the jobs and the fake nodes (for a throwaway cluster)");
  CLI11_PARSE(app, argc, argv);

  const std::string kubeconfig_path = KubeconfigPath(kubeconfig);
  if (kubeconfig_path.empty()) {
    std::cerr << "--kubeconfig: none given and $KUBECONFIG names no readable file (bench/operator/run.sh starts a "
                 "cluster and runs the bench on it)\n";
    return 1;
  }
  auto options = kube::OptionsFromKubeconfig(kubeconfig_path);
  if (!options.ok()) return std::cerr << options.status().ToString() << "\n", 1;
  options->request_timeout = std::chrono::seconds(60);
  options->user_agent = "operator-reconcile-bench";
  auto client = kube::Client::Create(*options);
  if (!client.ok()) return std::cerr << "client: " << client.status().ToString() << "\n", 1;
  kube::Client& kc = **client;

  PrintProvenance();
  if (auto crd = kc.List(kube::TrainingJobs(), "default"); !crd.ok()) {
    std::cerr << "listing TrainingJobs failed (are the CRDs applied? kubectl apply --server-side -f crds/): "
              << crd.status().ToString() << "\n";
    return 1;
  }
  if (auto created = kc.Create(kNamespaces, "", {{"metadata", {{"name", ns}}}}); !created.ok()) {
    std::cerr << "namespace " << ns << ": " << created.status().ToString()
              << (created.status().code() == StatusCode::kAlreadyExists ? " (left by an earlier run? delete it or "
                                                                         "pick another --namespace)"
                                                                       : "")
              << "\n";
    return 1;
  }

  const int metrics_port = FreeLoopbackPort();
  OperatorProcess oper;
  const auto t_start = Clock::now();
  const std::vector<std::string> operator_argv = {operator_bin, "--kubeconfig", kubeconfig_path, "--namespace", ns,
                                                  "--report-listen", "127.0.0.1:0", "--metrics-listen",
                                                  "127.0.0.1:" + std::to_string(metrics_port)};
  if (!oper.Start(operator_argv, operator_log, std::chrono::seconds(60))) {
    std::cerr << "star-operator (" << operator_bin << ") did not print \"ready\" within 60 s\n";
    if (!keep) CleanUp(kc, ns, 0, nullptr, std::chrono::seconds(timeout_s));
    return 1;
  }
  const double rss_idle = oper.MemoryMiB("VmRSS");
  const Scrape scrape0 = ScrapeMetrics(metrics_port).value_or(Scrape{});

  const long want_pods = static_cast<long>(jobs) * workers;
  std::printf("jobs %d, workers %d, pods wanted %ld, namespace %s; star-operator (4 reconcile threads, "
              "--status-interval 2s) ready after %.2f s, VmRSS %.1f MiB\n",
              jobs, workers, want_pods, ns.c_str(), Seconds(t_start, Clock::now()), rss_idle);
  std::fflush(stdout);

  Progress progress(&kc, ns, want_pods, jobs);
  if (!progress.Start(std::chrono::seconds(60))) return std::cerr << "the bench's informers did not sync\n", 1;

  const auto t0 = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    auto c = kc.Create(kube::TrainingJobs(), ns, JobObject(ns, JobName(i), workers));
    if (!c.ok()) return std::cerr << "create " << JobName(i) << ": " << c.status().ToString() << "\n", 1;
  }
  const auto t_created = Clock::now();
  std::printf("created %d TrainingJobs in %.2f s\n", jobs, Seconds(t0, t_created));
  std::fflush(stdout);

  const auto deadline = t0 + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline && (!progress.t_pods() || !progress.t_phase()) && oper.alive()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto t_pods = progress.t_pods();
  const auto t_phase = progress.t_phase();
  const Scrape scrape1 = WaitForQuiet(metrics_port, deadline);
  const auto t_quiet = Clock::now();
  progress.Stop();

  std::printf("pods %ld / %ld, jobs with a phase %ld / %d\n", progress.pods(), want_pods, progress.phased(), jobs);
  if (t_pods) {
    const double s = Seconds(t0, *t_pods);
    std::printf("all pods exist after %.2f s (from the first create): %.1f jobs/s, %.0f pods/s\n", s, jobs / s,
                static_cast<double>(want_pods) / s);
  } else {
    std::printf("TIMEOUT: not every pod exists after %d s\n", timeout_s);
  }
  if (t_phase) {
    std::printf("every job has a phase after %.2f s\n", Seconds(t0, *t_phase));
  } else {
    std::printf("TIMEOUT: not every job has a phase after %d s\n", timeout_s);
  }
  std::printf("reconciles stopped %.2f s after the first create: %s; reconcile p50 %s, p99 %s\n", Seconds(t0, t_quiet),
              ReconcileCounts(scrape0, scrape1, jobs).c_str(),
              Quantile(scrape0.reconcile_buckets, scrape1.reconcile_buckets, 0.5).c_str(),
              Quantile(scrape0.reconcile_buckets, scrape1.reconcile_buckets, 0.99).c_str());
  std::printf("objects in %s: trainingjobs %ld, pods %ld, services %ld, secrets %ld, events %ld\n", ns.c_str(),
              CountItems(kc, kube::TrainingJobs(), ns), CountItems(kc, kube::Pods(), ns),
              CountItems(kc, kube::Services(), ns), CountItems(kc, kSecrets, ns), CountItems(kc, kube::Events(), ns));
  std::printf("operator memory MiB: started %.1f; after the reconcile VmRSS %.1f, VmHWM (peak) %.1f\n", rss_idle,
              oper.MemoryMiB("VmRSS"), oper.MemoryMiB("VmHWM"));
  std::fflush(stdout);
  bool ok = t_pods && t_phase && oper.alive();

  std::unique_ptr<FakeNodes> fake;
  if (ok && nodes > 0) {
    std::vector<std::string> names;
    for (int n = 0; n < nodes; ++n) names.push_back(ns + "-node-" + std::to_string(n));
    fake = std::make_unique<FakeNodes>(&kc, names);
    ok = fake->Create();
    if (ok) {
      const Scrape before = ScrapeMetrics(metrics_port).value_or(scrape1);
      ok = BindPhase(kc, ns, jobs, workers, names, bind_threads, std::chrono::seconds(timeout_s));
      const Scrape after = WaitForQuiet(metrics_port, Clock::now() + std::chrono::seconds(timeout_s));
      std::printf("reconciles while binding: %s; reconcile p50 %s, p99 %s\n", ReconcileCounts(before, after, jobs).c_str(),
                  Quantile(before.reconcile_buckets, after.reconcile_buckets, 0.5).c_str(),
                  Quantile(before.reconcile_buckets, after.reconcile_buckets, 0.99).c_str());
      std::printf("operator memory MiB after binding: VmRSS %.1f, VmHWM %.1f\n", oper.MemoryMiB("VmRSS"),
                  oper.MemoryMiB("VmHWM"));
      std::fflush(stdout);
    }
  }
  if (ok && report_rounds > 0) {
    const Scrape before = ScrapeMetrics(metrics_port).value_or(Scrape{});
    ok = ReportPhase(kc, ns, oper.report_url(), jobs, workers, report_rounds, report_threads);
    const Scrape after = WaitForQuiet(metrics_port, Clock::now() + std::chrono::seconds(timeout_s));
    std::printf("operator while reporting: reports accepted %.0f, decisions %.0f (star_job_decisions_total, by "
                "kind), decision latency p99 %s; reconciles %s, reconcile p99 %s\n",
                after.reports - before.reports, after.decisions - before.decisions,
                Quantile(before.decision_buckets, after.decision_buckets, 0.99).c_str(),
                ReconcileCounts(before, after, jobs).c_str(),
                Quantile(before.reconcile_buckets, after.reconcile_buckets, 0.99).c_str());
    std::printf("operator memory MiB after the reports: VmRSS %.1f, VmHWM %.1f\n", oper.MemoryMiB("VmRSS"),
                oper.MemoryMiB("VmHWM"));
    std::fflush(stdout);
  }
  const Scrape last = ScrapeMetrics(metrics_port).value_or(Scrape{});
  double peak = oper.MemoryMiB("VmHWM");
  if (!oper.alive()) std::printf("star-operator exited during the run\n"), ok = false;
  if (ok && restart) ok = RestartPhase(&oper, operator_argv, operator_log, metrics_port, jobs, timeout_s, &peak);
  std::printf("operator peak RSS (VmHWM, the larger of the two processes with --restart) %.1f MiB (target <= 200 MB "
              "= 190.7 MiB: %s); all reconciles of the first: %s, "
              "p99 %s\n",
              peak, peak <= 200e6 / (1024.0 * 1024.0) ? "met" : "NOT met", ReconcileCounts(scrape0, last, jobs).c_str(),
              Quantile(scrape0.reconcile_buckets, last.reconcile_buckets, 0.99).c_str());
  std::fflush(stdout);

  if (!keep) CleanUp(kc, ns, jobs, fake.get(), std::chrono::seconds(timeout_s));
  if (fake) fake->Stop();
  oper.Stop();
  return ok ? 0 : 2;
}
