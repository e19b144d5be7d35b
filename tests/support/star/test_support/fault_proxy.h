// star-faultproxy (tests/support/faultproxy) between a client and the real API server: it
// injects the faults the real server does not produce on demand (error answers, latency,
// dropped watches), by rules set over its control API.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/test_support/http.h"
#include "star/test_support/process.h"
// After gtest: cpprest defines a macro U that breaks gtest's templates.
#include <cpprest/http_client.h>

namespace star::test_support {

// The proxy in front of the API server of `kubeconfig` (the cluster's admin kubeconfig),
// and a kubeconfig through it. The binary is $STAR_FAULTPROXY, else the cluster's
// bin/star-faultproxy; the cluster's directory (its pki/) is $STAR_CLUSTER_DIR, else the
// kubeconfig's directory (scripts/cluster.sh writes DIR/kubeconfig).
class FaultProxy {
 public:
  // Starts it, with `flags` besides those naming the cluster (e.g. --listen ADDR); writes
  // `dir`/proxy.kubeconfig (the admin's client certificate, which the proxy impersonates
  // upstream) and its log to `dir`/proxy.log.
  void Start(const std::string& kubeconfig, const std::string& dir, const std::vector<std::string>& flags = {}) {
    namespace fs = std::filesystem;
    const char* cluster_env = std::getenv("STAR_CLUSTER_DIR");
    const std::string cluster = cluster_env != nullptr && *cluster_env != '\0'
                                    ? cluster_env
                                    : fs::path(kubeconfig).parent_path().string();
    const char* binary_env = std::getenv("STAR_FAULTPROXY");
    const std::string binary =
        binary_env != nullptr && *binary_env != '\0' ? binary_env : cluster + "/bin/star-faultproxy";
    ASSERT_TRUE(fs::exists(binary)) << binary << " (scripts/k8s-tools.sh DIR builds it into DIR/bin)";
    const std::string pki = cluster + "/pki";
    const std::string upstream = Server(kubeconfig);
    ASSERT_FALSE(upstream.empty()) << "no server in " << kubeconfig;
    log_ = dir + "/proxy.log";
    std::vector<std::string> argv = {binary,          "--upstream",    upstream,           "--ca-cert",
                                     pki + "/ca.crt", "--ca-key",      pki + "/ca.key",    "--client-cert",
                                     pki + "/admin.crt", "--client-key", pki + "/admin.key"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ASSERT_TRUE(process_.Start(argv, log_));
    std::optional<std::string> control = Line("control on ");
    ASSERT_TRUE(control.has_value()) << ReadFile(log_);
    control_ = *control;
    std::optional<std::string> url = Line("listening on ");
    ASSERT_TRUE(url.has_value()) << ReadFile(log_);
    url_ = *url;
    kubeconfig_ = dir + "/proxy.kubeconfig";
    std::ofstream(kubeconfig_) << "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {server: \"" << *url
                               << "\", certificate-authority: \"" << pki << "/ca.crt\"}\nusers:\n- name: admin\n"
                               << "  user: {client-certificate: \"" << pki << "/admin.crt\", client-key: \"" << pki
                               << "/admin.key\"}\ncontexts:\n- name: proxy\n  context: {cluster: proxy, user: admin}\n"
                               << "current-context: proxy\n";
  }

  // Adds a rule (tests/support/faultproxy/README.md: verb, resource, namespace, count, status, latencyMs,
  // dropWatchAfterEvents ...).
  void Add(const nlohmann::json& rule) {
    const HttpReply r = Request(web::http::methods::POST, control_, "/faults", rule.dump());
    ASSERT_EQ(r.status, 201) << rule.dump() << ": " << r.body;
  }
  // Removes every rule.
  void Clear() {
    const HttpReply r = Request(web::http::methods::DEL, control_, "/faults");
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // The rules with what each has matched and applied (GET /faults); null when unanswered.
  nlohmann::json Rules() {
    const HttpReply r = Get(control_, "/faults");
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    return r.status == 200 && !j.is_discarded() ? j.value("rules", nlohmann::json()) : nlohmann::json();
  }

  // What the proxy has seen (GET /traffic): {"requests": {resource: {verb: N}},
  // "activeWatches": N}; null when unanswered.
  nlohmann::json Traffic() {
    const HttpReply r = Get(control_, "/traffic");
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    return r.status == 200 && !j.is_discarded() ? j : nlohmann::json();
  }
  // The requests of `verb` on `resource` seen so far.
  int Requests(const std::string& resource, const std::string& verb) {
    const nlohmann::json t = Traffic();
    return t.is_object() ? t["requests"].value(resource, nlohmann::json::object()).value(verb, 0) : -1;
  }
  int ActiveWatches() {
    const nlohmann::json t = Traffic();
    return t.is_object() ? t.value("activeWatches", -1) : -1;
  }

  // Stops the proxy: clients of its kubeconfig then find nothing listening.
  void Stop() { process_.Stop(); }

  const std::string& kubeconfig() const { return kubeconfig_; }
  // The proxy's address, https://127.0.0.1:PORT.
  const std::string& url() const { return url_; }
  std::string Log() const { return ReadFile(log_); }

 private:
  // The rest of the proxy's next stdout line that starts with `prefix`, within 30 s.
  std::optional<std::string> Line(const std::string& prefix) {
    std::optional<std::string> line = process_.WaitForLine(prefix, std::chrono::seconds(30));
    if (!line || line->rfind(prefix, 0) != 0) return std::nullopt;
    std::string rest = line->substr(prefix.size());
    rest.erase(rest.find_last_not_of(" \r\n") + 1);
    return rest;
  }

  // The `server:` of a kubeconfig ("" when there is none).
  static std::string Server(const std::string& kubeconfig) {
    std::istringstream in(ReadFile(kubeconfig));
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find("server:");
      if (at != std::string::npos) {
        std::string v = line.substr(at + 7);
        v.erase(0, v.find_first_not_of(" \""));
        v.erase(v.find_last_not_of(" \"\r") + 1);
        return v;
      }
    }
    return "";
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  BackgroundProcess process_;
  std::string log_, control_, kubeconfig_, url_;
};

}  // namespace star::test_support
