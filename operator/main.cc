// star-operator: the TrainingJob controller (star/operator/reconciler/operator.h).
//
//   star-operator [--kubeconfig FILE] [--namespace NS] [--report-listen HOST:PORT]
//                 [--report-url URL] [--metrics-listen HOST:PORT] [--leader-elect]
//                 [--identity ID] [--lease-duration 15s] [--renew-period 5s]
//                 [--retry-period 2s] [--status-interval 2s] [--max-restarts 3]
//                 [--restart-backoff 1s]
//
// Leader election (--leader-elect, the Lease star-operator in --namespace or the
// kubeconfig's namespace): others take the lease once they have seen it unrenewed for
// --lease-duration (whole seconds); the leader renews it every --renew-period (whole
// seconds, under 2/3 of --lease-duration, the time after which a leader that could not
// renew stops leading); a standby, or a leader whose renewal failed, retries every
// --retry-period (under --lease-duration).
//
// Without --kubeconfig it runs in-cluster (service account), else $KUBECONFIG or
// ~/.kube/config. Prints, once each is up:
//   report-url <URL>          the report endpoint (what pods get as STAR_CONTROLLER_URL)
//   metrics http://HOST:PORT  /metrics, /healthz (alive), /readyz (caches synced, leading)
//   ready                     reconciling
// SIGTERM/SIGINT stop it cleanly (exit 0); losing the leader lease exits 1; bad flags or
// an unreachable API at start exit 2.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>
#include <optional>

#include "star/kube/client.h"
#include "star/kube/informer.h"
#include "star/kube/probe_server.h"
#include "star/operator/reconciler/metrics.h"
#include "star/operator/reconciler/operator.h"

namespace {

using namespace star;  // NOLINT

void Log(const std::string& line) { std::cerr << "star-operator: " << line << std::endl; }

struct Health {
  std::atomic<bool> ready{false};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"star-operator: the TrainingJob controller"};
  std::string kubeconfig, ns, report_listen = "0.0.0.0:8443", report_url;
  std::string metrics_listen = "0.0.0.0:8080", identity;
  bool leader_elect = false;
  int status_interval_ms = 2000, max_restarts = 3, restart_backoff_ms = 1000;
  int lease_duration_s = 15, renew_period_s = 5, retry_period_ms = 2000;
  const std::map<std::string, int> units{{"ms", 1}, {"s", 1000}, {"m", 60000}};
  const std::map<std::string, int> second_units{{"s", 1}, {"m", 60}};
  app.add_option("--kubeconfig", kubeconfig, "Kubeconfig file (default: in-cluster, else $KUBECONFIG)");
  app.add_option("--namespace", ns, "Namespace to watch (\"\" = all)");
  app.add_option("--report-listen", report_listen, "HOST:PORT of the report endpoint (port 0 = any)")
      ->capture_default_str();
  app.add_option("--report-url", report_url,
                 "URL pods reach the report endpoint at (default: http://<report-listen>)");
  app.add_option("--metrics-listen", metrics_listen, "HOST:PORT for /metrics /healthz /readyz (\"\" = off)")
      ->capture_default_str();
  app.add_flag("--leader-elect", leader_elect, "Reconcile only while holding the Lease star-operator");
  app.add_option("--identity", identity, "Leader-election identity (default: hostname_pid)");
  app.add_option("--lease-duration", lease_duration_s,
                 "Leader lease: others take it after seeing it unrenewed this long (whole seconds)")
      ->transform(CLI::AsNumberWithUnit(second_units, CLI::AsNumberWithUnit::CASE_SENSITIVE))
      ->check(CLI::Range(2, 3600))->default_str("15s");
  app.add_option("--renew-period", renew_period_s,
                 "Leader lease renewals, one per period (whole seconds, under 2/3 of --lease-duration)")
      ->transform(CLI::AsNumberWithUnit(second_units, CLI::AsNumberWithUnit::CASE_SENSITIVE))
      ->check(CLI::Range(1, 3600))->default_str("5s");
  app.add_option("--retry-period", retry_period_ms,
                 "Leader lease attempts while not leading or after a failed renewal (under --lease-duration)")
      ->transform(CLI::AsNumberWithUnit(units, CLI::AsNumberWithUnit::CASE_SENSITIVE))
      ->check(CLI::Range(10, 3'600'000))->default_str("2s");
  app.add_option("--status-interval", status_interval_ms, "Status writes from reports, at most one per job per interval (e.g. 2s, 500ms)")
      ->transform(CLI::AsNumberWithUnit(units, CLI::AsNumberWithUnit::CASE_SENSITIVE))
      ->check(CLI::Range(10, 3'600'000))->default_str("2s");
  app.add_option("--max-restarts", max_restarts, "Gang restarts after pod failures before the job fails")
      ->capture_default_str()->check(CLI::Range(0, 1000));
  app.add_option("--restart-backoff", restart_backoff_ms, "First restart backoff (doubles per restart)")
      ->transform(CLI::AsNumberWithUnit(units, CLI::AsNumberWithUnit::CASE_SENSITIVE))
      ->check(CLI::Range(0, 3'600'000))->default_str("1s");
  CLI11_PARSE(app, argc, argv);
  if (renew_period_s * 3 >= lease_duration_s * 2) {
    return Log("--renew-period must be under 2/3 of --lease-duration (the renew deadline)"), 2;
  }
  if (retry_period_ms >= lease_duration_s * 1000) {
    return Log("--retry-period must be under --lease-duration"), 2;
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  StatusOr<kube::ClientOptions> client_options =
      kubeconfig.empty() ? kube::InClusterOptions() : kube::OptionsFromKubeconfig(kubeconfig);
  if (!client_options.ok() && kubeconfig.empty()) client_options = kube::OptionsFromKubeconfig("");
  if (!client_options.ok()) return Log(client_options.status().ToString()), 2;
  auto client = kube::Client::Create(*client_options);
  if (!client.ok()) return Log(client.status().ToString()), 2;

  op::OperatorOptions options;
  options.ns = ns;
  options.report_listen = report_listen;
  options.report_url = report_url;
  options.status_interval = std::chrono::milliseconds(status_interval_ms);
  options.max_restarts = max_restarts;
  options.restart_backoff = std::chrono::milliseconds(restart_backoff_ms);
  op::OperatorMetrics metrics;
  auto created = op::Operator::Create(client->get(), options, &metrics);
  if (!created.ok()) return Log(created.status().ToString()), 2;
  std::unique_ptr<op::Operator> op = std::move(created).value();

  Health health;
  std::unique_ptr<kube::ProbeServer> server;
  if (!metrics_listen.empty()) {
    auto started = kube::ProbeServer::Start(
        metrics_listen,
        {[&metrics] { return metrics.Serialize(); },
         [&health]() -> std::optional<std::string> {
           if (health.ready) return std::nullopt;
           return "not ready: caches not synced or not leading";
         },
         [](const std::string& m) { Log(m); }},
        "--metrics-listen");
    if (!started.ok()) return Log(started.status().ToString()), 2;
    server = std::move(started).value();
    std::cout << "metrics http://" << metrics_listen << std::endl;
  }

  std::atomic<int> exit_code{-1};
  std::atomic<bool> stopping{false};  // a stop signal came: giving up the lease is no loss
  std::mutex start_mu;
  auto start = [&] {
    std::lock_guard lock(start_mu);
    if (stopping) return;  // won the lease while stopping: the operator is stopped already
    Status s = op->Start();
    if (!s.ok()) {
      Log(s.ToString());
      exit_code = 2;
      kill(getpid(), SIGTERM);
      return;
    }
    std::cout << "report-url " << op->report_url() << std::endl;
    std::cout << "ready" << std::endl;
    health.ready = true;
  };
  std::unique_ptr<kube::LeaderElector> elector;
  if (leader_elect) {
    kube::LeaderElectionOptions le;
    le.ns = ns.empty() ? client_options->default_namespace : ns;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    le.identity = identity.empty() ? std::string(host) + "_" + std::to_string(getpid()) : identity;
    le.lease_duration = std::chrono::seconds(lease_duration_s);
    le.renew_period = std::chrono::seconds(renew_period_s);
    le.retry_period = std::chrono::milliseconds(retry_period_ms);
    elector = std::make_unique<kube::LeaderElector>(
        client->get(), le, start, [&] {
          if (stopping) return;
          Log("lost the leader lease; exiting");
          health.ready = false;
          exit_code = 1;
          kill(getpid(), SIGTERM);
        });
    elector->Start();
  } else {
    start();
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  Log("stopping");
  health.ready = false;
  {
    std::lock_guard lock(start_mu);
    stopping = true;
    op->Stop();
  }
  if (elector) elector->Stop();
  server.reset();
  return exit_code < 0 ? 0 : exit_code.load();
}
