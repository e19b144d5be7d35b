// star-agent: makes this node's cgroups and interfaces match its NodeAllocation.
//
//   star-agent --node NAME (--allocation-file PATH | --kubeconfig PATH | --in-cluster)
//              [--cgroup-root PATH] [--journal PATH] [--driver cgroupfs|systemd]
//              [--metrics-address HOST:PORT] [--poll-ms N] [--once]
//              [--mode reconcile|release] [--release]
//   star-agent --node NAME (--kubeconfig PATH | --in-cluster)
//              --release-daemonset NAME [--daemonset-namespace NS] [--release-timeout-s N]
//
// --mode release (or $STAR_AGENT_MODE=release, which the chart's DaemonSet takes from its
// pod template's annotation star.dev/agent-mode): restore every journalled original, then
// hold without touching anything until stopped; ready (/readyz) once all is restored, and
// retried every --poll-ms until then. --release-daemonset: the chart's pre-delete hook;
// switches the agent DaemonSet NAME to release mode and waits until every node is restored
// (release_daemonset.h), exit 0 then, 1 on timeout or an API error.
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
// Bandwidth goes to each pod's host-side veth, found from the pod's network namespace (a
// process in its cgroup; NodeOs::PodInterface), or named by the NodeAllocation annotation
// ifname.star.dev/<pod uid> which overrides that. A pod whose interface is not found (no
// process yet, host network, interface gone) gets its CPU but no shaping, is logged, and
// is looked for again next pass. Needs hostPID and hostNetwork, CAP_SYS_ADMIN (setns) and
// CAP_SYS_PTRACE (other users' /proc/PID/ns/net) besides CAP_NET_ADMIN.
// A corrupt journal is moved aside (<journal>.corrupt-<UTC time>) and what to restore is
// rebuilt from what the node shows (journal_rebuild.h); from the API server, a Warning
// Event CorruptJournal on the Node says so.
// Exit status: 0 on a clean stop (--once: the allocation was fully applied), 1 when a pass
// failed with --once (or, from the API server, the object could not be listed or its status
// not written), 2 on bad flags, an unusable kubeconfig, an unreadable journal or an
// unusable OS.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "star/agent/agent_metrics.h"
#include "star/agent/allocation_source.h"
#include "star/agent/headroom_reporter.h"
#include "star/agent/host_counters.h"
#include "star/agent/journal.h"
#include "star/agent/journal_rebuild.h"
#include "star/agent/k8s_source.h"
#include "star/agent/node_event.h"
#include "star/agent/pod_cgroup.h"
#include "star/agent/real_node_os.h"
#include "star/agent/reconciler.h"
#include "star/agent/release_daemonset.h"
#include "star/core/api/pod_bandwidth.h"
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

// The pods whose shaping was skipped this pass (their interface was not found) and why.
std::string SkippedNetworks(const StatusOr<ReconcileResult>& r) {
  if (!r.ok()) return "";
  std::string s;
  for (const PodResult& p : r->pods) {
    if (p.network_skipped.ok()) continue;
    s += (s.empty() ? "" : "; ") + p.namespace_ + "/" + p.name + ": " + p.network_skipped.ToString();
  }
  return s.empty() ? "" : "bandwidth not shaped (retried each pass): " + s;
}

struct Flags {
  std::string node, file, kubeconfig, cgroup_root, driver_name = "cgroupfs";
  std::string journal_path = "/var/lib/star-agent/journal.json";
  std::string metrics_address = "127.0.0.1:9401";
  std::string mode = "reconcile";
  std::string release_daemonset, daemonset_namespace = "default";
  int poll_ms = 500, release_timeout_s = 240;
  bool once = false, release = false, in_cluster = false;
  std::string nic = "auto", nic_capacity;
  int headroom_interval_ms = 5000;
};

// Parses the command line into `f`. Returns the exit status when the process stops here
// (0 after --help, 2 on bad flags), else nullopt.
std::optional<int> ParseFlags(int argc, char** argv, Flags& f) {
  CLI::App app{"star-agent: makes this node match its NodeAllocation"};
  app.add_option("--node", f.node, "This node's name (the NodeAllocation's name)")->required();
  CLI::Option_group* sources = app.add_option_group("source", "Where the allocation comes from");
  sources->add_option("--allocation-file", f.file, "NodeAllocation file to apply (JSON or YAML)");
  sources->add_option("--kubeconfig", f.kubeconfig,
                      "Watch the NodeAllocation through this kubeconfig's API server");
  sources->add_flag("--in-cluster", f.in_cluster,
                    "Watch the NodeAllocation with the pod's service account");
  sources->require_option(1);
  app.add_option("--cgroup-root", f.cgroup_root,
                 "The kubelet's --cgroup-root, relative to the cpu hierarchy (default: none)");
  app.add_option("--journal", f.journal_path, "Where original limits are kept")
      ->capture_default_str();
  app.add_option("--driver", f.driver_name, "Kubelet cgroup driver: cgroupfs|systemd")
      ->capture_default_str();
  app.add_option("--metrics-address", f.metrics_address,
                 "HOST:PORT for /metrics, /healthz, /readyz (\"\" = off)")
      ->capture_default_str();
  app.add_option("--poll-ms", f.poll_ms, "Poll/resync interval, ms")
      ->capture_default_str()->check(CLI::Range(10, 3'600'000));
  app.add_flag("--once", f.once, "Reconcile once and exit");
  app.add_flag("--release", f.release, "Restore every journalled original and exit");
  app.add_option("--mode", f.mode, "reconcile, or release: restore every original, then hold")
      ->envname("STAR_AGENT_MODE")->capture_default_str()
      ->check(CLI::IsMember({"", "reconcile", "release"}));
  app.add_option("--release-daemonset", f.release_daemonset,
                 "Switch this agent DaemonSet to release mode and wait for every node");
  app.add_option("--daemonset-namespace", f.daemonset_namespace,
                 "Namespace of --release-daemonset")->capture_default_str();
  app.add_option("--release-timeout-s", f.release_timeout_s,
                 "How long --release-daemonset waits for every node")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  app.add_option("--nic", f.nic,
                 "The NIC whose headroom is published: a name, auto (the default route's) or none")
      ->capture_default_str();
  app.add_option("--nic-capacity", f.nic_capacity,
                 "The NIC's capacity each way, bits per second like 10G (default: its link speed)");
  app.add_option("--headroom-interval-ms", f.headroom_interval_ms,
                 "Least time between two writes of the node's headroom, ms (0 = none written)")
      ->capture_default_str()->check(CLI::Range(0, 3'600'000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, or the error
    return rc == 0 ? 0 : 2;      // the documented exit status for bad flags
  }
  return std::nullopt;
}

// Signals are taken synchronously by the loop (sigtimedwait); this blocks them, and must
// run before any thread starts so that every thread inherits the mask.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// The real OS, allowed to touch only the kubelet's pod cgroups.
StatusOr<std::unique_ptr<NodeOs>> OpenNodeOs(CgroupDriver driver, const std::string& cgroup_root) {
  RealNodeOsOptions os_options;
  const std::string pods_dir = driver == CgroupDriver::kSystemd ? "kubepods.slice" : "kubepods";
  os_options.allowed_prefix = cgroup_root.empty() ? pods_dir : cgroup_root + "/" + pods_dir;
  return NewRealNodeOs(os_options);
}

// Opens the journal, creating its directory first if need be. A corrupt one is moved
// aside once the originals were rebuilt from the node, and a fresh one holds those;
// `notice` then says what happened (it stays empty otherwise).
StatusOr<Journal> OpenJournal(const std::string& journal_path, NodeOs& os, CgroupDriver driver,
                              const std::string& cgroup_root, std::string& notice) {
  std::error_code ec;
  const auto journal_dir = std::filesystem::path(journal_path).parent_path();
  if (!journal_dir.empty()) std::filesystem::create_directories(journal_dir, ec);
  bool corrupt = false;
  auto opened = Journal::Open(journal_path, &corrupt);
  if (opened.ok() || !corrupt) return opened;
  STAR_ASSIGN_OR_RETURN(JournalEntries rebuilt, RebuildOriginals(os, driver, cgroup_root));
  STAR_ASSIGN_OR_RETURN(std::string aside,
                        MoveJournalAside(journal_path, std::chrono::system_clock::now()));
  STAR_ASSIGN_OR_RETURN(Journal fresh, Journal::Open(journal_path));
  const std::map<std::string, std::optional<JournalEntry>> record(rebuilt.begin(), rebuilt.end());
  STAR_RETURN_IF_ERROR(fresh.Commit(record));
  notice = opened.status().message() + ": moved to " + aside + "; the originals of " +
           std::to_string(rebuilt.size()) +
           " pod(s) rebuilt from their containers' cgroups; interfaces count as unshaped";
  return fresh;
}

// --release: restores every journalled original. Returns the exit status.
int Release(Reconciler& reconciler) {
  auto r = reconciler.ReleaseAll();
  const std::string s = Summary(r);
  if (!s.empty()) Log(s);
  return r.ok() && r->all_ok() ? 0 : 1;
}

// --mode release: restores every journalled original (retried every `poll_ms` until all
// is restored, /readyz turning ready then), then holds until SIGINT or SIGTERM. Returns
// the exit status.
int ReleaseAndHold(Reconciler& reconciler, Health& health, const sigset_t& stop_signals,
                   int poll_ms) {
  bool done = false;
  for (;;) {
    if (!done) {
      auto r = reconciler.ReleaseAll();
      const std::string s = Summary(r);
      done = r.ok() && r->all_ok();
      health.Set(done, done ? "" : s);
      Log(done ? "release mode: every original restored; holding" : "release mode: " + s);
    }
    timespec wait{poll_ms / 1000, static_cast<long>(poll_ms % 1000) * 1'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) return 0;
  }
}

// --release-daemonset: the chart's pre-delete hook. Returns the exit status.
int ReleaseNodes(const Flags& flags) {
  auto options = flags.in_cluster ? kube::InClusterOptions()
                                  : kube::OptionsFromKubeconfig(flags.kubeconfig);
  if (!options.ok()) return Log(options.status().ToString()), 2;
  options->user_agent = "star-agent";
  auto client = kube::Client::Create(*options);
  if (!client.ok()) return Log(client.status().ToString()), 2;
  ReleaseOptions release;
  release.timeout = std::chrono::seconds(flags.release_timeout_s);
  Status s = ReleaseDaemonSet(**client, flags.daemonset_namespace, flags.release_daemonset, release);
  Log(s.ok() ? "every node of daemonset " + flags.daemonset_namespace + "/" +
                   flags.release_daemonset + " restored"
             : s.ToString());
  return s.ok() ? 0 : 1;
}

// /metrics, /healthz and /readyz on `address`; borrows `metrics` and `health`.
StatusOr<std::unique_ptr<kube::ProbeServer>> StartProbeServer(const std::string& address,
                                                              AgentMetrics& metrics,
                                                              Health& health) {
  return kube::ProbeServer::Start(
      address,
      {[&metrics] { return metrics.Serialize(); },
       [&health]() -> std::optional<std::string> {
         std::lock_guard lock(health.mu);
         if (health.ready) return std::nullopt;
         return health.why;
       },
       [](const std::string& m) { Log(m); }},
      "--metrics-address");
}

// The node's headroom reporter, for the API server's source; nullptr with
// --headroom-interval-ms 0. A NIC that cannot be read is refused here, naming the flag.
StatusOr<std::unique_ptr<HeadroomReporter>> OpenHeadroom(const Flags& flags) {
  if (flags.headroom_interval_ms == 0) return std::unique_ptr<HeadroomReporter>();
  HeadroomConfig config;
  if (flags.nic == "auto") {
    config.interface = DefaultRouteInterface(config.paths).value_or("");
  } else if (flags.nic != "none") {
    config.interface = flags.nic;
  }
  if (!flags.nic_capacity.empty()) {
    const auto bps = api::ParseBitsPerSecond(nlohmann::json(flags.nic_capacity));
    if (!bps) {
      return Status::InvalidArgument("--nic-capacity: \"" + flags.nic_capacity +
                                     "\" is not a rate in bits per second like 10G");
    }
    config.nic_capacity_bits_per_second = static_cast<double>(*bps);
  }
  if (auto read = ReadHostCounters(config.paths, config.interface); !read.ok()) {
    return read.status().WithPrefix("--nic " + flags.nic);
  }
  config.options.interval = std::chrono::milliseconds(flags.headroom_interval_ms);
  config.options.refresh = std::max(config.options.refresh, 6 * config.options.interval);
  return std::make_unique<HeadroomReporter>(std::move(config));
}

// Exactly one source: the file, or the API server.
struct Source {
  std::unique_ptr<FileSource> file;
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<K8sSource> k8s;
  std::unique_ptr<HeadroomReporter> headroom;  // with the API server's
  std::string what;  // how the allocation is named in the log
  std::string node;
  std::optional<NodeEvent> event;  // to record on the Node (API server only), until it is

  StatusOr<bool> Poll() { return file ? file->Poll() : k8s->Poll(); }
  const std::optional<DesiredState>& desired() const {
    return file ? file->desired() : k8s->desired();
  }
  bool released() const { return k8s && k8s->released(); }
};

// Opens the source the flags name; the API server's is started (and, with --once, synced).
StatusOr<Source> OpenSource(const Flags& flags) {
  Source source;
  source.what = "allocation " + flags.file;
  source.node = flags.node;
  if (!flags.file.empty()) {
    source.file = std::make_unique<FileSource>(flags.file, flags.node);
    return source;
  }
  auto headroom = OpenHeadroom(flags);
  if (!headroom.ok()) return headroom.status();
  source.headroom = std::move(headroom).value();
  auto options = flags.in_cluster ? kube::InClusterOptions()
                                  : kube::OptionsFromKubeconfig(flags.kubeconfig);
  if (!options.ok()) return options.status();
  options->user_agent = "star-agent";
  auto created = kube::Client::Create(*options);
  if (!created.ok()) return created.status();
  source.client = std::move(created).value();
  source.k8s = std::make_unique<K8sSource>(*source.client, flags.node);
  source.k8s->Start();
  // --once: one pass over what the first list says (a failed list is reported below).
  if (flags.once) source.k8s->WaitForSync(source.client->options().request_timeout * 2);
  source.what = "nodeallocation " + flags.node;
  return source;
}

// One pass: polls the source, reconciles what it says and reports the outcome. Returns
// what went wrong, "" when the whole allocation is applied; `skipped` gets the pods whose
// shaping was skipped (not a failure).
std::string RunPass(Source& source, Reconciler& reconciler, AgentMetrics& metrics,
                    std::string& skipped) {
  auto polled = source.Poll();
  const std::optional<DesiredState>& desired = source.desired();
  const bool released = source.released();
  std::string problem = polled.ok() ? "" : polled.status().ToString();
  if (polled.ok() && *polled) {
    Log(released ? source.what + " is absent: releasing every pod" : source.what + " loaded");
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
    skipped = SkippedNetworks(*r);
  }
  if (source.k8s) {
    if (Status w = source.k8s->ReportStatus(r ? &*r : nullptr); !w.ok()) {
      problem += (problem.empty() ? "" : "; ") + w.ToString();
    }
    if (Status h = source.headroom ? source.headroom->Tick(*source.k8s) : Status(); !h.ok()) {
      problem += (problem.empty() ? "" : "; ") + h.ToString();
    }
  }
  if (source.client && source.event) {
    if (Status e = RecordNodeEvent(*source.client, source.node, *source.event); e.ok()) {
      source.event.reset();
    } else {
      problem += (problem.empty() ? "" : "; ") + e.ToString();
    }
  }
  if (problem.empty() && !desired && !released) problem = "waiting for " + source.what;
  return problem;
}

// Runs a pass every `poll_ms` until SIGINT or SIGTERM (one pass with `once`), keeping
// `health` and the log up to date. Returns whether the last pass applied everything.
bool RunLoop(Source& source, Reconciler& reconciler, AgentMetrics& metrics, Health& health,
             const sigset_t& stop_signals, int poll_ms, bool once) {
  std::optional<std::string> last_log;  // nothing logged yet
  std::string skipped, last_skipped;
  bool ok = false;
  for (;;) {
    const std::string problem = RunPass(source, reconciler, metrics, skipped);
    if (skipped != last_skipped) {
      Log(skipped.empty() ? "every pod to be shaped has its interface" : skipped);
      last_skipped = skipped;
    }
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
  return ok;
}


}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (std::optional<int> rc = ParseFlags(argc, argv, flags)) return *rc;
  if (!flags.release_daemonset.empty()) {
    if (!flags.file.empty()) return Log("--release-daemonset needs --kubeconfig or --in-cluster"), 2;
    return ReleaseNodes(flags);
  }
  const bool hold_released = flags.mode == "release";

  auto driver = ParseCgroupDriver(flags.driver_name);
  if (!driver.ok()) return Log(driver.status().ToString()), 2;
  if (Status s = CheckCgroupRoot(flags.cgroup_root, "--cgroup-root"); !s.ok()) {
    return Log(s.ToString()), 2;
  }
  const sigset_t stop_signals = BlockStopSignals();

  auto os = OpenNodeOs(*driver, flags.cgroup_root);
  if (!os.ok()) return Log(os.status().ToString()), 2;
  std::string journal_notice;
  auto journal = OpenJournal(flags.journal_path, **os, *driver, flags.cgroup_root, journal_notice);
  if (!journal.ok()) return Log(journal.status().ToString()), 2;
  if (!journal_notice.empty()) Log(journal_notice);

  ReconcilerOptions options;
  options.driver = *driver;
  options.cgroup_root = flags.cgroup_root;
  options.unshaped_net_originals = !journal_notice.empty();
  Reconciler reconciler(**os, *journal, options);
  if (flags.release) return Release(reconciler);

  AgentMetrics metrics;
  Health health;
  std::unique_ptr<kube::ProbeServer> server;
  if (!flags.metrics_address.empty() && !flags.once) {
    auto started = StartProbeServer(flags.metrics_address, metrics, health);
    if (!started.ok()) return Log(started.status().ToString()), 2;
    server = std::move(started).value();
  }
  if (hold_released && flags.once) return Release(reconciler);
  if (hold_released) return ReleaseAndHold(reconciler, health, stop_signals, flags.poll_ms);

  auto source = OpenSource(flags);
  if (!source.ok()) return Log(source.status().ToString()), 2;
  if (!journal_notice.empty()) source->event = NodeEvent{"Warning", "CorruptJournal", journal_notice};
  const bool ok = RunLoop(*source, reconciler, metrics, health, stop_signals, flags.poll_ms,
                          flags.once);
  return flags.once && !ok ? 1 : 0;
}
