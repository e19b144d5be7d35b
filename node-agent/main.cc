// star-agent: makes this node's cgroups and interfaces match its NodeAllocation.
//
//   star-agent --node NAME (--allocation-file PATH | --kubeconfig PATH | --in-cluster)
//              [--cgroup-root PATH] [--journal PATH] [--driver cgroupfs|systemd]
//              [--metrics-address HOST:PORT] [--poll-ms N] [--once]
//
// The allocation comes from a file (re-read when it changed) or from the API server
// (--kubeconfig / --in-cluster: the NodeAllocation named NAME is watched, and its status
// written after each pass that changes it; see star/agent/k8s_source.h). Every --poll-ms it
// reconciles (level-based: drift is corrected even when the allocation did not change). A
// malformed file or object is reported and the last good allocation stays in force. A
// deleted NodeAllocation releases the node: every pod gets its journalled originals back. SIGTERM/SIGINT stop it cleanly
// between passes; a plain stop does NOT restore original limits (pods keep what they were
// given; a restarted agent finds the originals in the journal). Originals are restored
// when a pod leaves the allocation, or for every pod with --release.
// HTTP on --metrics-address: /metrics (Prometheus), /healthz (the loop is alive), /readyz
// (200 once the last pass applied the whole allocation, else 503 and why).
// Exit status: 0 on a clean stop (--once: the allocation was fully applied), 1 when a pass
// failed with --once (or, from the API server, the object could not be listed or its status
// not written), 2 on bad flags, an unusable kubeconfig, a corrupt journal or an unusable OS.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "star/agent/agent_metrics.h"
#include "star/agent/allocation_source.h"
#include "star/agent/journal.h"
#include "star/agent/k8s_source.h"
#include "star/agent/pod_cgroup.h"
#include "star/agent/real_node_os.h"
#include "star/agent/reconciler.h"
#include "star/kube/client.h"
#include "star/kube/probe_server.h"

namespace {

using namespace star;         // NOLINT
using namespace star::agent;  // NOLINT

void Log(const std::string& line) { std::cerr << "star-agent: " << line << std::endl; }

// Health and readiness shared between the loop and the HTTP handlers.
struct Health {
  std::mutex mu;
  bool ready = false;
  std::string why = "no allocation applied yet";
  void Set(bool r, std::string w) {
    std::lock_guard lock(mu);
    ready = r;
    why = std::move(w);
  }
};

std::string Summary(const StatusOr<ReconcileResult>& r) {
  if (!r.ok()) return "allocation refused: " + r.status().ToString();
  std::string s;
  for (const PodResult& p : r->pods) {
    if (p.status.ok()) continue;
    s += (s.empty() ? "" : "; ") + p.uid + ": " + p.status.ToString();
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"star-agent: makes this node match its NodeAllocation"};
  std::string node, file, kubeconfig, cgroup_root, driver_name = "cgroupfs";
  std::string journal_path = "/var/lib/star-agent/journal.json";
  std::string metrics_address = "127.0.0.1:9401";
  int poll_ms = 500;
  bool once = false, release = false, in_cluster = false;
  app.add_option("--node", node, "This node's name (the NodeAllocation's name)")->required();
  CLI::Option_group* sources = app.add_option_group("source", "Where the allocation comes from");
  sources->add_option("--allocation-file", file, "NodeAllocation JSON file to apply");
  sources->add_option("--kubeconfig", kubeconfig,
                      "Watch the NodeAllocation through this kubeconfig's API server");
  sources->add_flag("--in-cluster", in_cluster,
                    "Watch the NodeAllocation with the pod's service account");
  sources->require_option(1);
  app.add_option("--cgroup-root", cgroup_root,
                 "The kubelet's --cgroup-root, relative to the cpu hierarchy (default: none)");
  app.add_option("--journal", journal_path, "Where original limits are kept")
      ->capture_default_str();
  app.add_option("--driver", driver_name, "Kubelet cgroup driver: cgroupfs|systemd")
      ->capture_default_str();
  app.add_option("--metrics-address", metrics_address,
                 "HOST:PORT for /metrics, /healthz, /readyz (\"\" = off)")
      ->capture_default_str();
  app.add_option("--poll-ms", poll_ms, "Poll/resync interval, ms")
      ->capture_default_str()->check(CLI::Range(10, 3'600'000));
  app.add_flag("--once", once, "Reconcile once and exit");
  app.add_flag("--release", release, "Restore every journalled original and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, or the error
    return rc == 0 ? 0 : 2;      // the documented exit status for bad flags
  }

  auto driver = ParseCgroupDriver(driver_name);
  if (!driver.ok()) return Log(driver.status().ToString()), 2;
  if (Status s = CheckCgroupRoot(cgroup_root, "--cgroup-root"); !s.ok()) {
    return Log(s.ToString()), 2;
  }

  // Signals are taken synchronously by the loop (sigtimedwait); block them before any
  // thread starts so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  RealNodeOsOptions os_options;
  const std::string pods_dir =
      *driver == CgroupDriver::kSystemd ? "kubepods.slice" : "kubepods";
  os_options.allowed_prefix = cgroup_root.empty() ? pods_dir : cgroup_root + "/" + pods_dir;
  auto os = NewRealNodeOs(os_options);
  if (!os.ok()) return Log(os.status().ToString()), 2;

  std::error_code ec;
  const auto journal_dir = std::filesystem::path(journal_path).parent_path();
  if (!journal_dir.empty()) std::filesystem::create_directories(journal_dir, ec);
  auto journal = Journal::Open(journal_path);
  if (!journal.ok()) return Log(journal.status().ToString()), 2;

  ReconcilerOptions options;
  options.driver = *driver;
  options.cgroup_root = cgroup_root;
  Reconciler reconciler(**os, *journal, options);

  if (release) {
    auto r = reconciler.ReleaseAll();
    const std::string s = Summary(r);
    if (!s.empty()) Log(s);
    return r.ok() && r->all_ok() ? 0 : 1;
  }

  AgentMetrics metrics;
  Health health;
  std::unique_ptr<kube::ProbeServer> server;
  if (!metrics_address.empty() && !once) {
    auto started = kube::ProbeServer::Start(
        metrics_address,
        {[&metrics] { return metrics.Serialize(); },
         [&health]() -> std::optional<std::string> {
           std::lock_guard lock(health.mu);
           if (health.ready) return std::nullopt;
           return health.why;
         },
         [](const std::string& m) { Log(m); }},
        "--metrics-address");
    if (!started.ok()) return Log(started.status().ToString()), 2;
    server = std::move(started).value();
  }

  // Exactly one source: the file, or the API server.
  std::unique_ptr<FileSource> file_source;
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<K8sSource> k8s_source;
  std::string what = "allocation " + file;
  if (!file.empty()) {
    file_source = std::make_unique<FileSource>(file, node);
  } else {
    auto options = in_cluster ? kube::InClusterOptions() : kube::OptionsFromKubeconfig(kubeconfig);
    if (!options.ok()) return Log(options.status().ToString()), 2;
    options->user_agent = "star-agent";
    auto created = kube::Client::Create(*options);
    if (!created.ok()) return Log(created.status().ToString()), 2;
    client = std::move(created).value();
    k8s_source = std::make_unique<K8sSource>(*client, node);
    k8s_source->Start();
    // --once: one pass over what the first list says (a failed list is reported below).
    if (once) k8s_source->WaitForSync(client->options().request_timeout * 2);
    what = "nodeallocation " + node;
  }

  std::optional<std::string> last_log;  // nothing logged yet
  bool ok = false;
  for (;;) {
    auto polled = file_source ? file_source->Poll() : k8s_source->Poll();
    const std::optional<DesiredState>& desired =
        file_source ? file_source->desired() : k8s_source->desired();
    const bool released = k8s_source && k8s_source->released();
    std::string problem = polled.ok() ? "" : polled.status().ToString();
    if (polled.ok() && *polled) {
      Log(released ? what + " is absent: releasing every pod" : what + " loaded");
    }
    std::optional<StatusOr<ReconcileResult>> r;
    if (desired || released) {
      const auto start = std::chrono::steady_clock::now();
      r = desired ? reconciler.Reconcile(desired->allocation, desired->interfaces)
                  : reconciler.ReleaseAll();
      metrics.Observe(*r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
      const std::string s = Summary(*r);
      if (!s.empty()) problem += (problem.empty() ? "" : "; ") + s;
    }
    if (k8s_source) {
      if (Status w = k8s_source->ReportStatus(r ? &*r : nullptr); !w.ok()) {
        problem += (problem.empty() ? "" : "; ") + w.ToString();
      }
    }
    if (problem.empty() && !desired && !released) problem = "waiting for " + what;
    ok = problem.empty();
    health.Set(ok, ok ? "" : (problem.empty() ? "no allocation yet" : problem));
    if (problem != last_log) {
      Log(problem.empty() ? "allocation applied" : problem);
      last_log = problem;
    }
    if (once) break;
    timespec wait{poll_ms / 1000, static_cast<long>(poll_ms % 1000) * 1'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      Log("stopping (originals are kept in the journal, not restored)");
      break;
    }
  }
  return once && !ok ? 1 : 0;
}
