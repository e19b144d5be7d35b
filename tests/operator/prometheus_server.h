// A real Prometheus server (the `prometheus` binary, STAR_PROMETHEUS) for the end-to-end
// tests: it listens on loopback, scrapes the given targets every second with
// honor_labels (as the chart's ServiceMonitor does: the metrics' own job label wins) and
// answers PromQL over its HTTP API. Its storage lives in the test's directory; the process
// is stopped by the destructor.
#pragma once

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <cpprest/uri_builder.h>
#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "star/test_support/http.h"
#include "star/test_support/process.h"

namespace star::op::e2e {

using test_support::Get;
using test_support::HttpReply;

class PrometheusServer {
 public:
  // Starts it with its files under `dir`, scraping `targets` ("host:port", path
  // /metrics); true once it answers /-/ready. A port taken meanwhile is retried.
  bool Start(const std::string& binary, const std::string& dir, const std::vector<std::string>& targets) {
    const std::string config = dir + "/prometheus.yml";
    std::ofstream(config) << Config(targets);
    for (int attempt = 0; attempt < 3; ++attempt) {
      base_ = "http://127.0.0.1:" + std::to_string(FreePort());
      const std::vector<std::string> argv = {binary,
                                             "--config.file=" + config,
                                             "--storage.tsdb.path=" + dir + "/tsdb",
                                             "--web.listen-address=" + base_.substr(7),
                                             "--log.level=warn"};
      if (!process_.Start(argv, dir + "/prometheus.log")) return false;
      if (Eventually([&] { return Get(base_, "/-/ready").status == 200; })) return true;
      process_.Stop();
    }
    return false;
  }

  // The result of an instant query (data.result: one entry per series), or nullopt with
  // the reason in *error.
  std::optional<nlohmann::json> Query(const std::string& expr, std::string* error) const {
    web::uri_builder b("/api/v1/query");
    b.append_query("query", expr);
    return Data(b.to_string(), error);
  }

  // The values `label` takes on the series `match` selects (label_values(match, label)).
  std::optional<nlohmann::json> LabelValues(const std::string& label, const std::string& match,
                                            std::string* error) const {
    web::uri_builder b("/api/v1/label/" + label + "/values");
    b.append_query("match[]", match);
    return Data(b.to_string(), error);
  }

  // How many of the targets the last scrapes found up.
  int TargetsUp() const {
    std::string error;
    auto r = Query("sum(up)", &error);
    if (!r || r->empty()) return 0;
    return std::stoi((*r)[0]["value"][1].get<std::string>());
  }

 private:
  static std::string Config(const std::vector<std::string>& targets) {
    std::string yaml =
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: star\n    honor_labels: true\n    static_configs:\n"
        "      - targets:\n";
    for (const std::string& t : targets) yaml += "          - \"" + t + "\"\n";
    return yaml;
  }

  std::optional<nlohmann::json> Data(const std::string& path_and_query, std::string* error) const {
    const HttpReply r = Get(base_, path_and_query);
    const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status != 200 || body.is_discarded() || body.value("status", "") != "success") {
      *error = "HTTP " + std::to_string(r.status) + ": " + r.body;
      return std::nullopt;
    }
    const nlohmann::json& data = body["data"];
    return data.is_object() ? data["result"] : data;
  }

  std::string base_;
  test_support::BackgroundProcess process_;
};

}  // namespace star::op::e2e
