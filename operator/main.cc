// star-operator: the TrainingJob and NodeAllocation controllers on one Manager
// (star/operator/reconciler/manager.h, operator_controllers.h).
//
//   star-operator [--kubeconfig FILE] [--namespace NS] [--report-listen HOST:PORT]
//                 [--report-url URL] [--report-tls-cert-file FILE --report-tls-key-file FILE]
//                 [--report-ca-file FILE] [--report-tls-secret [NS/]NAME [--report-tls-host HOST]...]
//                 [--metrics-listen HOST:PORT] [--leader-elect]
//                 [--identity ID] [--lease-duration 15s] [--renew-period 5s]
//                 [--retry-period 2s] [--status-interval 2s] [--max-restarts 3]
//                 [--restart-backoff 1s] [--selector-model FILE]
//
// --selector-model: the learned selector's XGBoost model for jobs with
// spec.synchronization.selector ML (default: the installed share/star/selector.json,
// where star-operator was built with XGBoost). It is loaded at start; a model that is
// missing or invalid is logged in one line naming the file and why, and the operator runs
// on: such jobs use the heuristic, with a Warning Event LearnedSelectorUnavailable.
//
// Leader election (--leader-elect, the Lease star-operator in --namespace or the
// kubeconfig's namespace): others take the lease once they have seen it unrenewed for
// --lease-duration (whole seconds); the leader renews it every --renew-period (whole
// seconds, under 2/3 of --lease-duration, the time after which a leader that could not
// renew stops leading); a standby, or a leader whose renewal failed, retries every
// --retry-period (under --lease-duration).
//
// The report endpoint serves HTTPS (TLS 1.2 or later) given --report-tls-cert-file and
// --report-tls-key-file (PEM; the certificate must name the host of the URL pods use);
// --report-url must then be https://. --report-ca-file (PEM) is the CA workers verify
// it with: pods get its text as STAR_REPORT_CA (without it, their system's CAs).
// --report-tls-secret instead has the operator make its own: a CA and a certificate it
// signs for the host of --report-url (or of --report-listen) and each --report-tls-host,
// kept in that Secret (NS defaults to the operator's namespace: in-cluster, its pod's),
// which every replica and restart reuses while it fits; pods get that CA. Without any of
// these flags the endpoint is plain HTTP.
//
// Without --kubeconfig it runs in-cluster (service account), else $KUBECONFIG or
// ~/.kube/config. Prints, once each is up:
//   report-url <URL>          the report endpoint (what pods get as STAR_CONTROLLER_URL)
//   metrics http://HOST:PORT  /metrics, /healthz (alive: no reconcile stuck for 5 minutes;
//                             a slow API server alone never trips it), /readyz (caches
//                             synced, leading)
//   ready                     reconciling
// SIGTERM/SIGINT stop it cleanly (exit 0); losing the leader lease exits 1; bad flags or
// an unreachable API at start exit 2.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "star/kube/client.h"
#include "star/kube/leader_election.h"
#include "star/operator/learned_model.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/metrics.h"
#include "star/operator/reconciler/operator_controllers.h"
#include "star/operator/reconciler/report_certificate.h"

namespace {

using namespace star;  // NOLINT

void Log(const std::string& line) { std::cerr << "star-operator: " << line << std::endl; }

struct Flags {
  std::string kubeconfig, ns, report_listen = "0.0.0.0:8443", report_url;
  std::string report_tls_cert_file, report_tls_key_file, report_ca_file;
  std::string report_tls_secret;                // [NS/]NAME of the managed certificate's Secret
  std::vector<std::string> report_tls_hosts;    // more names for the managed certificate
  std::string metrics_listen = "0.0.0.0:8080", identity;
  std::string selector_model = op::DefaultSelectorModelPath();
  bool leader_elect = false;
  int status_interval_ms = 2000, max_restarts = 3, restart_backoff_ms = 1000;
  int lease_duration_s = 15, renew_period_s = 5, retry_period_ms = 2000;
};

void AddFlags(CLI::App& app, Flags& f) {
  const std::map<std::string, int> units{{"ms", 1}, {"s", 1000}, {"m", 60000}};
  const std::map<std::string, int> second_units{{"s", 1}, {"m", 60}};
  const auto kUnits = CLI::AsNumberWithUnit::CASE_SENSITIVE;
  app.add_option("--kubeconfig", f.kubeconfig, "Kubeconfig file (default: in-cluster, else $KUBECONFIG)");
  app.add_option("--namespace", f.ns, "Namespace to watch (\"\" = all)");
  app.add_option("--report-listen", f.report_listen, "HOST:PORT of the report endpoint (port 0 = any)")
      ->capture_default_str();
  app.add_option("--report-url", f.report_url,
                 "URL pods reach the report endpoint at (default: http://<report-listen>, https:// with "
                 "--report-tls-cert-file)");
  app.add_option("--report-tls-cert-file", f.report_tls_cert_file,
                 "Serve the report endpoint over HTTPS with this certificate (PEM; with --report-tls-key-file)");
  app.add_option("--report-tls-key-file", f.report_tls_key_file,
                 "The private key of --report-tls-cert-file (PEM)");
  app.add_option("--report-ca-file", f.report_ca_file,
                 "CA that workers verify the report endpoint with (PEM; pods get it as STAR_REPORT_CA; "
                 "default: their system's CAs)");
  app.add_option("--report-tls-secret", f.report_tls_secret,
                 "Serve the report endpoint over HTTPS with a certificate the operator makes and keeps in "
                 "this Secret ([NS/]NAME; NS default: the operator's namespace); pods get its CA");
  app.add_option("--report-tls-host", f.report_tls_hosts,
                 "A host name (or IP) the managed certificate names besides --report-url's host (repeatable)");
  app.add_option("--metrics-listen", f.metrics_listen, "HOST:PORT for /metrics /healthz /readyz (\"\" = off)")
      ->capture_default_str();
  app.add_option("--selector-model", f.selector_model,
                 "The learned selector's model for jobs with selector ML (default: the installed one)")
      ->capture_default_str();
  app.add_flag("--leader-elect", f.leader_elect, "Reconcile only while holding the Lease star-operator");
  app.add_option("--identity", f.identity, "Leader-election identity (default: hostname_pid)");
  app.add_option("--lease-duration", f.lease_duration_s,
                 "Leader lease: others take it after seeing it unrenewed this long (whole seconds)")
      ->transform(CLI::AsNumberWithUnit(second_units, kUnits))->check(CLI::Range(2, 3600))->default_str("15s");
  app.add_option("--renew-period", f.renew_period_s,
                 "Leader lease renewals, one per period (whole seconds, under 2/3 of --lease-duration)")
      ->transform(CLI::AsNumberWithUnit(second_units, kUnits))->check(CLI::Range(1, 3600))->default_str("5s");
  app.add_option("--retry-period", f.retry_period_ms,
                 "Leader lease attempts while not leading or after a failed renewal (under --lease-duration)")
      ->transform(CLI::AsNumberWithUnit(units, kUnits))->check(CLI::Range(10, 3'600'000))->default_str("2s");
  app.add_option("--status-interval", f.status_interval_ms,
                 "Status writes from reports, at most one per job per interval (e.g. 2s, 500ms)")
      ->transform(CLI::AsNumberWithUnit(units, kUnits))->check(CLI::Range(10, 3'600'000))->default_str("2s");
  app.add_option("--max-restarts", f.max_restarts, "Gang restarts after pod failures before the job fails")
      ->capture_default_str()->check(CLI::Range(0, 1000));
  app.add_option("--restart-backoff", f.restart_backoff_ms, "First restart backoff (doubles per restart)")
      ->transform(CLI::AsNumberWithUnit(units, kUnits))->check(CLI::Range(0, 3'600'000))->default_str("1s");
}

// InvalidArgument naming the flag when the lease timings do not fit together.
Status CheckLeaseFlags(const Flags& f) {
  if (f.renew_period_s * 3 >= f.lease_duration_s * 2) {
    return Status::InvalidArgument("--renew-period must be under 2/3 of --lease-duration (the renew deadline)");
  }
  if (f.retry_period_ms >= f.lease_duration_s * 1000) {
    return Status::InvalidArgument("--retry-period must be under --lease-duration");
  }
  return Status::Ok();
}

op::ManagerOptions ManagerOptionsOf(const Flags& f, const kube::ClientOptions& client) {
  op::ManagerOptions mo;
  mo.ns = f.ns;
  mo.metrics_listen = f.metrics_listen;
  if (!f.leader_elect) return mo;
  kube::LeaderElectionOptions le;
  le.ns = f.ns.empty() ? client.default_namespace : f.ns;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  le.identity = f.identity.empty() ? std::string(host) + "_" + std::to_string(getpid()) : f.identity;
  le.lease_duration = std::chrono::seconds(f.lease_duration_s);
  le.renew_period = std::chrono::seconds(f.renew_period_s);
  le.retry_period = std::chrono::milliseconds(f.retry_period_ms);
  mo.leader_election = le;
  return mo;
}

op::ReportEndpointOptions ReportOptionsOf(const Flags& f) {
  op::ReportEndpointOptions ro;
  ro.listen = f.report_listen;
  ro.url = f.report_url;
  ro.tls_cert_file = f.report_tls_cert_file;
  ro.tls_key_file = f.report_tls_key_file;
  ro.ca_file = f.report_ca_file;
  return ro;
}

op::OperatorControllerOptions ControllerOptionsOf(const Flags& f) {
  op::OperatorControllerOptions co;
  co.report = ReportOptionsOf(f);
  co.status_interval = std::chrono::milliseconds(f.status_interval_ms);
  co.job.max_restarts = f.max_restarts;
  co.job.restart_backoff = std::chrono::milliseconds(f.restart_backoff_ms);
  return co;
}

// The managed certificate (--report-tls-secret) put into `report`: made, or read from
// its Secret. Nothing without the flag.
Status UseManagedCertificate(const Flags& f, const kube::ClientOptions& client_options, kube::Client* client,
                             op::ReportEndpointOptions* report) {
  if (f.report_tls_secret.empty()) return Status::Ok();
  if (!f.report_tls_cert_file.empty() || !f.report_ca_file.empty()) {
    return Status::InvalidArgument("--report-tls-secret: not with --report-tls-cert-file or --report-ca-file");
  }
  op::ReportCertificateOptions o;
  const auto slash = f.report_tls_secret.find('/');
  o.ns = slash == std::string::npos ? client_options.default_namespace : f.report_tls_secret.substr(0, slash);
  o.name = slash == std::string::npos ? f.report_tls_secret : f.report_tls_secret.substr(slash + 1);
  auto listen = op::SplitHostPort(f.report_listen, "--report-listen");
  o.hosts = op::ReportCertificateHosts(f.report_url, listen.ok() ? listen->first : "", f.report_tls_hosts);
  STAR_ASSIGN_OR_RETURN(report::ServingCertificate c, op::EnsureReportCertificate(client, o));
  Log("report endpoint: the certificate of Secret " + o.ns + "/" + o.name);
  report->tls_cert_pem = c.cert_pem;
  report->tls_key_pem = c.key_pem;
  report->ca_pem = c.ca_pem;
  return Status::Ok();
}

StatusOr<std::unique_ptr<kube::Client>> Connect(const Flags& f, kube::ClientOptions* options) {
  StatusOr<kube::ClientOptions> o =
      f.kubeconfig.empty() ? kube::InClusterOptions() : kube::OptionsFromKubeconfig(f.kubeconfig);
  if (!o.ok() && f.kubeconfig.empty()) o = kube::OptionsFromKubeconfig("");
  if (!o.ok()) return o.status();
  *options = *o;
  return kube::Client::Create(*o);
}

}  // namespace

int main(int argc, char** argv) {
  // The API's answers (list pages of up to 500 objects, a few MB each) are read and
  // parsed on many threads, so they land in many glibc arenas. With glibc's default,
  // freeing such a buffer raises the mmap threshold to its size (and the trim threshold
  // to twice that): later ones come from the arenas, which keep what was freed. An
  // operator starting on 500 jobs x 16 bound pods held 185 MiB after its first lists,
  // 128 MiB with the threshold fixed at 128 KiB (the default's start): buffers above it
  // are mapped and unmapped on their own. (At most 2 arenas held 111 MiB there, but
  // 152 MiB instead of 137 MiB after the reports and a 10x decision latency p99.)
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  CLI::App app{"star-operator: the TrainingJob controller"};
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (Status s = CheckLeaseFlags(flags); !s.ok()) return Log(s.message()), 2;
  if (auto tls = op::CheckReportTls(ReportOptionsOf(flags)); !tls.ok()) return Log(tls.status().message()), 2;

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  kube::ClientOptions client_options;
  auto client = Connect(flags, &client_options);
  if (!client.ok()) return Log(client.status().ToString()), 2;

  op::OperatorMetrics metrics;
  std::unique_ptr<op::OperatorControllers> controllers;  // outlives the manager
  auto manager = op::Manager::Create(client->get(), ManagerOptionsOf(flags, client_options), &metrics);
  if (!manager.ok()) return Log(manager.status().ToString()), 2;
  op::Manager& m = **manager;
  op::OperatorControllerOptions controller_options = ControllerOptionsOf(flags);
  if (Status s = UseManagedCertificate(flags, client_options, client->get(), &controller_options.report); !s.ok()) {
    return Log(s.ToString()), 2;
  }
  auto model = op::LoadSelectorModel(flags.selector_model);
  if (model.ok()) {
    Log("learned selector: loaded " + flags.selector_model);
  } else {
    Log("--selector-model: learned selector unavailable: " + model.status().message() +
        "; jobs with selector ML use the heuristic");
  }
  controller_options.learned = op::LearnedModelOf(model);
  auto added = op::AddOperatorControllers(&m, std::move(controller_options));
  if (!added.ok()) return Log(added.status().ToString()), 2;
  controllers = std::move(added).value();
  if (Status s = m.ServeProbes(); !s.ok()) return Log(s.ToString()), 2;
  if (!flags.metrics_listen.empty()) std::cout << "metrics http://" << flags.metrics_listen << std::endl;

  std::atomic<int> exit_code{-1};
  m.Run(
      [&](const Status& s) {
        if (!s.ok()) {
          Log(s.ToString());
          exit_code = 2;
          kill(getpid(), SIGTERM);
          return;
        }
        std::cout << "report-url " << controllers->endpoint->url() << std::endl;
        std::cout << "ready" << std::endl;
      },
      [&] {
        Log("lost the leader lease; exiting");
        exit_code = 1;
        kill(getpid(), SIGTERM);
      });

  int sig = 0;
  sigwait(&stop_signals, &sig);
  Log("stopping");
  m.Stop();
  return exit_code < 0 ? 0 : exit_code.load();
}
