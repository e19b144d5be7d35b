// star-test-apiserver: the Kubernetes API emulator the operator's end-to-end tests run
// against with the real kubectl.
//
//   star-test-apiserver --listen 127.0.0.1:0 --crds DIR --kubeconfig-out FILE
//                       [--fault SPEC]... [--latency DUR] [--bookmark-interval DUR]
//                       [--history N] [--watch-timeout DUR]
//                       [--tls-cert-file F --tls-private-key-file F [--client-ca-file F]
//                        [--tls-ca-file F]] [--token T]...
//                       [--kubeconfig-client-certificate F --kubeconfig-client-key F]
//
// Prints "listening on http(s)://127.0.0.1:PORT" once it serves (the kubeconfig is
// written before), then serves until SIGTERM or SIGINT.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <pthread.h>

#include "faults.h"
#include "server.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "star-test-apiserver: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace star::apiserver;
  CLI::App app{"star-test-apiserver: a Kubernetes API emulator for tests (HTTP or HTTPS, in memory)"};
  std::string listen = "127.0.0.1:0";
  std::string crds;
  std::string kubeconfig_out;
  std::vector<std::string> fault_specs;
  std::string latency = "0ms";
  std::string bookmark_interval = "5s";
  std::string watch_timeout = "30m";
  size_t history = 10000;
  app.add_option("--listen", listen, "HOST:PORT to serve on; port 0 picks a free one")->capture_default_str();
  app.add_option("--crds", crds, "directory whose *.yaml/*.yml/*.json CustomResourceDefinitions are served");
  app.add_option("--kubeconfig-out", kubeconfig_out, "write a kubeconfig for the server here");
  app.add_option("--fault", fault_specs,
                 "fault rule, e.g. verb=create,resource=pods,status=500,count=2 (repeatable)");
  app.add_option("--latency", latency, "latency added to every resource request (e.g. 50ms)")->capture_default_str();
  app.add_option("--bookmark-interval", bookmark_interval, "interval of watch BOOKMARK events")->capture_default_str();
  app.add_option("--watch-timeout", watch_timeout, "longest watch without timeoutSeconds")->capture_default_str();
  app.add_option("--history", history, "changes kept for watches from a resourceVersion")->capture_default_str();
  ApiServerOptions options;
  app.add_option("--tls-cert-file", options.tls.cert_file, "serve HTTPS with this certificate chain (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-private-key-file", options.tls.key_file, "the serving certificate's key (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--client-ca-file", options.tls.client_ca_file,
                 "require client certificates signed by this CA (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-ca-file", options.tls.ca_file, "the CA written into --kubeconfig-out (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--token", options.tokens, "accept only requests with this bearer token (repeatable)");
  app.add_option("--kubeconfig-client-certificate", options.kubeconfig_user.client_cert_file,
                 "the user of --kubeconfig-out authenticates with this certificate");
  app.add_option("--kubeconfig-client-key", options.kubeconfig_user.client_key_file,
                 "... and this key");
  CLI11_PARSE(app, argc, argv);
  if (!options.tokens.empty()) options.kubeconfig_user.token = options.tokens.front();

  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Fail("--listen " + listen + ": expected HOST:PORT");
  options.host = listen.substr(0, colon);
  try {
    options.port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    return Fail("--listen " + listen + ": the port is not a number");
  }
  options.crds_dir = crds;
  for (const auto& spec : fault_specs) {
    auto rule = FaultRule::Parse(spec);
    if (!rule.ok()) return Fail("--fault: " + rule.status().message());
    options.faults.push_back(*rule);
  }
  auto parsed_latency = ParseDuration(latency);
  if (!parsed_latency.ok()) return Fail("--latency: " + parsed_latency.status().message());
  options.api.latency = *parsed_latency;
  auto parsed_bookmarks = ParseDuration(bookmark_interval);
  if (!parsed_bookmarks.ok()) return Fail("--bookmark-interval: " + parsed_bookmarks.status().message());
  options.api.bookmark_interval = *parsed_bookmarks;
  auto parsed_timeout = ParseDuration(watch_timeout);
  if (!parsed_timeout.ok()) return Fail("--watch-timeout: " + parsed_timeout.status().message());
  options.api.default_watch_timeout = std::chrono::duration_cast<std::chrono::seconds>(*parsed_timeout);
  options.api.history_limit = history;

  // Every thread started from here on inherits the mask: the signals wait for sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  ApiServer server(options);
  const star::Status started = server.Start();
  if (!started.ok()) return Fail(started.message());
  if (!kubeconfig_out.empty()) {
    const star::Status written = server.WriteKubeconfig(kubeconfig_out);
    if (!written.ok()) return Fail(written.message());
  }
  std::cout << "listening on " << server.url() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  server.Stop();
  return 0;
}
