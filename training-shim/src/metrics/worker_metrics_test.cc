#include "star/shim/worker_metrics.h"

// cpprest otherwise defines a macro U(), which breaks any template parameter named U.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace star::shim {
namespace {

using Labels = std::map<std::string, std::string>;

// Fetches http://127.0.0.1:port/metrics; "" on any failure (reported by the caller).
std::string Scrape(int port) {
  try {
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::seconds(10));
    web::http::client::http_client client("http://127.0.0.1:" + std::to_string(port), config);
    web::http::http_response r = client.request(web::http::methods::GET, "/metrics").get();
    if (r.status_code() != web::http::status_codes::OK) return "";
    return r.extract_utf8string(true).get();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "scrape failed: " << e.what();
    return "";
  }
}

// The samples of a text exposition: (name, labels) -> value.
class Exposition {
 public:
  explicit Exposition(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      size_t open = line.find('{');
      size_t close = line.find('}');
      size_t space = line.rfind(' ');
      if (space == std::string::npos) continue;
      Labels labels;
      std::string name = line.substr(0, std::min(open, space));
      if (open != std::string::npos && close != std::string::npos && open < close) {
        std::string body = line.substr(open + 1, close - open - 1);
        size_t pos = 0;
        while (pos < body.size()) {  // key="value",...  (values here hold no quotes)
          size_t eq = body.find('=', pos);
          size_t q1 = body.find('"', eq);
          size_t q2 = body.find('"', q1 + 1);
          if (eq == std::string::npos || q1 == std::string::npos || q2 == std::string::npos) break;
          labels[body.substr(pos, eq - pos)] = body.substr(q1 + 1, q2 - q1 - 1);
          pos = q2 + 1;
          if (pos < body.size() && body[pos] == ',') ++pos;
        }
      }
      samples_[{name, labels}] = std::strtod(line.c_str() + space + 1, nullptr);
    }
  }

  std::optional<double> Get(const std::string& name, Labels labels) const {
    auto it = samples_.find({name, labels});
    if (it == samples_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::pair<std::string, Labels>, double> samples_;
};

const Labels kLabels = {{"namespace", "ns"}, {"trainingjob", "train"}, {"worker", "1"}, {"node", "n7"}};

Labels With(Labels l, const std::string& k, const std::string& v) {
  l[k] = v;
  return l;
}

std::unique_ptr<WorkerMetrics> StartMetrics() {
  StatusOr<std::unique_ptr<WorkerMetrics>> m = WorkerMetrics::Start("127.0.0.1:0", "ns/train", 1, "n7");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(WorkerMetrics, EverySeriesExistsAtZeroBeforeTheFirstIteration) {
  auto metrics = StartMetrics();
  ASSERT_NE(metrics, nullptr);
  EXPECT_GT(metrics->port(), 0);
  Exposition e(Scrape(metrics->port()));
  EXPECT_EQ(e.Get("star_worker_iterations_total", kLabels), 0.0);
  EXPECT_EQ(e.Get("star_worker_amp_enabled", kLabels), 0.0);
  EXPECT_EQ(e.Get("star_worker_local_batch_size", kLabels), 0.0);
  for (const char* h : {"star_worker_iteration_seconds", "star_worker_compute_seconds",
                        "star_worker_communication_seconds", "star_worker_wait_seconds"}) {
    EXPECT_EQ(e.Get(std::string(h) + "_count", kLabels), 0.0) << h;
  }
}

TEST(WorkerMetrics, ExposesObservedIterationsWithJobAndWorkerLabels) {
  auto metrics = StartMetrics();
  ASSERT_NE(metrics, nullptr);
  metrics->Observe({.compute_seconds = 0.25,
                    .communication_seconds = 0.125,
                    .wait_seconds = 0,
                    .info = {.iteration = 0, .local_batch = 64, .amp = false}});
  metrics->Observe({.compute_seconds = 0.5,
                    .communication_seconds = 0.25,
                    .wait_seconds = 0.5,
                    .info = {.iteration = 1, .local_batch = 32, .amp = true}});

  Exposition e(Scrape(metrics->port()));
  EXPECT_EQ(e.Get("star_worker_iterations_total", kLabels), 2.0);
  EXPECT_EQ(e.Get("star_worker_amp_enabled", kLabels), 1.0);
  EXPECT_EQ(e.Get("star_worker_local_batch_size", kLabels), 32.0);

  EXPECT_EQ(e.Get("star_worker_compute_seconds_count", kLabels), 2.0);
  EXPECT_EQ(e.Get("star_worker_compute_seconds_sum", kLabels), 0.75);
  EXPECT_EQ(e.Get("star_worker_compute_seconds_bucket", With(kLabels, "le", "0.25")), 1.0);
  EXPECT_EQ(e.Get("star_worker_compute_seconds_bucket", With(kLabels, "le", "0.5")), 2.0);
  EXPECT_EQ(e.Get("star_worker_compute_seconds_bucket", With(kLabels, "le", "+Inf")), 2.0);
  EXPECT_EQ(e.Get("star_worker_communication_seconds_sum", kLabels), 0.375);
  EXPECT_EQ(e.Get("star_worker_wait_seconds_sum", kLabels), 0.5);
  EXPECT_EQ(e.Get("star_worker_wait_seconds_bucket", With(kLabels, "le", "0.001")), 1.0);
  // Iteration time is compute + communication (0.375 and 0.75), wait excluded.
  EXPECT_EQ(e.Get("star_worker_iteration_seconds_sum", kLabels), 1.125);
  EXPECT_EQ(e.Get("star_worker_iteration_seconds_bucket", With(kLabels, "le", "0.5")), 1.0);
  EXPECT_EQ(e.Get("star_worker_iteration_seconds_bucket", With(kLabels, "le", "1")), 2.0);
}

// Regression: the series were labelled `job`, which Prometheus's own target label renames
// to exported_job unless scraped with honor_labels; and they carried no node.
TEST(WorkerMetrics, SeriesCarryNamespaceTrainingjobAndNodeNotJob) {
  auto metrics = StartMetrics();
  ASSERT_NE(metrics, nullptr);
  const std::string text = Scrape(metrics->port());
  EXPECT_EQ(text.find("{job="), std::string::npos) << text;
  EXPECT_EQ(text.find(",job="), std::string::npos) << text;
  EXPECT_NE(text.find("star_worker_iterations_total{namespace=\"ns\",node=\"n7\",trainingjob=\"train\",worker=\"1\"} 0"),
            std::string::npos) << text;
  // Without a namespace in the job or a known node, those labels are left out.
  StatusOr<std::unique_ptr<WorkerMetrics>> local = WorkerMetrics::Start("127.0.0.1:0", "fmnist", 0);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_NE(Scrape((*local)->port()).find("star_worker_iterations_total{trainingjob=\"fmnist\",worker=\"0\"} 0"),
            std::string::npos) << Scrape((*local)->port());
}

TEST(WorkerMetrics, BadBindAddressOrWorkerFails) {
  EXPECT_EQ(WorkerMetrics::Start("127.0.0.1:0", "j", -1).status().code(),
            StatusCode::kInvalidArgument);
  auto first = StartMetrics();
  ASSERT_NE(first, nullptr);
  // The port is taken by `first`.
  StatusOr<std::unique_ptr<WorkerMetrics>> second =
      WorkerMetrics::Start("127.0.0.1:" + std::to_string(first->port()), "j", 0);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status();
}

}  // namespace
}  // namespace star::shim
