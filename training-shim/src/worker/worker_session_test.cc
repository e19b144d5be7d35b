#include "star/shim/worker_session.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "star/report/server.h"
#include "star/test_support/tls.h"

namespace star::shim {
namespace {

using report::ReportServer;
using report::ReportServerOptions;

api::Decision MakeDecision(int64_t epoch, int64_t apply_at, api::SyncMode mode, int k,
                           std::vector<api::WorkerSetting> workers) {
  api::Decision d;
  d.epoch = epoch;
  d.apply_at_iteration = apply_at;
  d.mode = mode;
  d.k = k;
  d.workers = std::move(workers);
  return d;
}

// A controller in this process: answers the n-th report with answers[n] (the last one
// once they run out); an answer of nullopt throws (a refused report: 400). HTTPS given a
// certificate and key file.
class Controller {
 public:
  explicit Controller(std::vector<std::optional<api::Decision>> answers, std::string token = "",
                      std::string tls_cert_file = "", std::string tls_key_file = "")
      : answers_(std::move(answers)) {
    ReportServerOptions options{"127.0.0.1", 0, std::move(token), {}};
    options.tls_cert_file = std::move(tls_cert_file);
    options.tls_key_file = std::move(tls_key_file);
    auto server = ReportServer::Start(std::move(options), [this](const api::WorkerReport& r) { return Answer(r); });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = std::move(*server);
  }
  std::string url() const { return server_ ? server_->base_url() : ""; }
  std::vector<api::WorkerReport> reports() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_;
  }

 private:
  std::optional<api::Decision> Answer(const api::WorkerReport& r) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = reports_.size();
    reports_.push_back(r);
    const auto& a = answers_[std::min(n, answers_.size() - 1)];
    if (!a) throw std::invalid_argument("report " + std::to_string(n) + " refused");
    return a;
  }

  mutable std::mutex mu_;
  std::vector<std::optional<api::Decision>> answers_;
  std::vector<api::WorkerReport> reports_;
  std::unique_ptr<ReportServer> server_;
};

WorkerSessionOptions Options(const std::string& url, int64_t report_every = 2) {
  WorkerSessionOptions o;
  o.config.job = "test";
  o.config.world_size = 2;
  o.config.rank = 1;
  o.config.controller_url = url;
  o.config.report_every = report_every;
  o.local_batch = 32;
  o.now = [] { return 1.0; };  // reports need no real clock
  o.on_report_error = [](const Status&) {};
  return o;
}

// Runs iterations [from, to): BeginIteration, EndIteration, and waits for the report
// sent, so decisions are taken up at the next iteration. Returns the plans.
std::vector<IterationPlan> RunIterations(WorkerSession& s, int64_t from, int64_t to) {
  std::vector<IterationPlan> plans;
  for (int64_t i = from; i < to; ++i) {
    auto plan = s.BeginIteration(i);
    EXPECT_TRUE(plan.ok()) << "iteration " << i << ": " << plan.status();
    if (!plan.ok()) break;
    IterationInfo info;
    info.iteration = i + 1;
    info.local_batch = static_cast<int>(plan->local_batch);
    info.amp = plan->amp;
    EXPECT_TRUE(s.EndIteration(info).ok());
    EXPECT_TRUE(s.Flush(std::chrono::seconds(10)).ok());
    plans.push_back(*plan);
  }
  return plans;
}

TEST(WorkerSession, DecisionTakesEffectExactlyAtItsApplyIteration) {
  const auto d = MakeDecision(1, 6, api::SyncMode::kFixedK, 1, {{0, false, 32}, {1, true, 16}});
  Controller controller({d});
  auto session = WorkerSession::Create(Options(controller.url()));
  ASSERT_TRUE(session.ok()) << session.status();
  const auto plans = RunIterations(**session, 0, 10);
  ASSERT_EQ(plans.size(), 10u);
  for (const IterationPlan& p : plans) {
    const bool after = p.iteration >= 6;
    EXPECT_EQ(p.mode, after ? api::SyncMode::kFixedK : api::SyncMode::kSsgd) << p.iteration;
    EXPECT_EQ(p.k, after ? 1 : 2) << p.iteration;
    EXPECT_EQ(p.amp, after) << p.iteration;
    EXPECT_EQ(p.local_batch, after ? 16 : 32) << p.iteration;
    EXPECT_EQ(p.decision_epoch, after ? 1 : -1) << p.iteration;
    // The first report (after iteration 1) brings it; it is handed out once.
    EXPECT_EQ(p.received.size(), p.iteration == 2 ? 1u : 0u) << p.iteration;
  }
  EXPECT_EQ((*session)->report_stats().answered, 5);
  const auto reports = controller.reports();
  ASSERT_EQ(reports.size(), 5u);
  EXPECT_EQ(reports.back().worker, 1);
  EXPECT_EQ(reports.back().iteration, 10);
  EXPECT_EQ(reports.back().local_batch, 16);
}

TEST(WorkerSession, APipelinesWarmupTakesEffectAtItsApplyIteration) {
  auto d = MakeDecision(1, 4, api::SyncMode::kSsgd, 2, {{0, false, 32}, {1, false, 32}});
  d.warmup = {2, 1};
  d.predicted_iteration_seconds = 0.5;
  Controller controller({d});
  auto session = WorkerSession::Create(Options(controller.url()));
  ASSERT_TRUE(session.ok()) << session.status();
  for (const IterationPlan& p : RunIterations(**session, 0, 6)) {
    EXPECT_EQ(p.warmup, p.iteration >= 4 ? std::vector<int>({2, 1}) : std::vector<int>()) << p.iteration;
  }
}

TEST(WorkerSession, DecisionsOfAnOlderOrTheSameEpochAreIgnored) {
  const auto newer = MakeDecision(2, 4, api::SyncMode::kSsgd, 2, {{0, false, 32}, {1, false, 8}});
  const auto older = MakeDecision(1, 6, api::SyncMode::kSsgd, 2, {{0, false, 32}, {1, true, 99}});
  Controller controller({newer, older, newer, older});
  auto session = WorkerSession::Create(Options(controller.url()));
  ASSERT_TRUE(session.ok()) << session.status();
  const auto plans = RunIterations(**session, 0, 10);
  ASSERT_EQ(plans.size(), 10u);
  int received = 0;
  for (const IterationPlan& p : plans) {
    received += static_cast<int>(p.received.size());
    EXPECT_EQ(p.local_batch, p.iteration >= 4 ? 8 : 32) << p.iteration;
    EXPECT_FALSE(p.amp) << p.iteration;
  }
  EXPECT_EQ(received, 1);
  EXPECT_EQ((*session)->report_stats().decisions, 1);
}

TEST(WorkerSession, ARefusedReportCostsThatReportOnly) {
  const auto d = MakeDecision(1, 8, api::SyncMode::kSsgd, 2, {{0, false, 32}, {1, false, 24}});
  Controller controller({std::nullopt, d});
  auto options = Options(controller.url());
  std::vector<std::string> errors;
  std::mutex mu;
  options.on_report_error = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(s.ToString());
  };
  auto session = WorkerSession::Create(options);
  ASSERT_TRUE(session.ok()) << session.status();
  const auto plans = RunIterations(**session, 0, 10);
  ASSERT_EQ(plans.size(), 10u);
  EXPECT_EQ(plans.back().local_batch, 24);
  const ReportStats stats = (*session)->report_stats();
  EXPECT_EQ(stats.failed, 1);
  EXPECT_EQ(stats.answered, 4);
  EXPECT_NE(stats.last_error.find("report 0 refused"), std::string::npos) << stats.last_error;
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(errors.size(), 1u);
}

TEST(WorkerSession, AWrongTokenIsReportedAndTrainingGoesOn) {
  Controller controller({std::optional<api::Decision>()}, "secret");
  auto options = Options(controller.url());
  options.config.token = "wrong";
  auto session = WorkerSession::Create(options);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(RunIterations(**session, 0, 6).size(), 6u);
  const ReportStats stats = (*session)->report_stats();
  EXPECT_EQ(stats.failed, 3);
  EXPECT_NE(stats.last_error.find("401"), std::string::npos) << stats.last_error;
}

TEST(WorkerSession, AControllerThatIsDownDoesNotStopTraining) {
  std::string url;
  {
    Controller gone({std::nullopt});
    url = gone.url();
  }  // nothing listens there any more
  auto session = WorkerSession::Create(Options(url));
  ASSERT_TRUE(session.ok()) << session.status();
  const auto plans = RunIterations(**session, 0, 20);
  ASSERT_EQ(plans.size(), 20u);
  EXPECT_EQ(plans.back().local_batch, 32);
  const ReportStats stats = (*session)->report_stats();
  EXPECT_EQ(stats.queued, 10);
  EXPECT_EQ(stats.failed, 10);
  EXPECT_EQ(stats.answered, 0);
}

TEST(WorkerSession, ADecisionThatArrivesAfterItsIterationIsAnError) {
  const auto d = MakeDecision(1, 1, api::SyncMode::kSsgd, 2, {});
  Controller controller({d});
  auto session = WorkerSession::Create(Options(controller.url()));
  ASSERT_TRUE(session.ok()) << session.status();
  RunIterations(**session, 0, 2);  // the report after iteration 1 brings it
  auto plan = (*session)->BeginIteration(2);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("apply_at_iteration"), std::string::npos);
}

TEST(WorkerSession, WithoutAControllerNothingIsReported) {
  auto session = WorkerSession::Create(Options(""));
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_FALSE((*session)->report_due());
  EXPECT_EQ(RunIterations(**session, 0, 4).size(), 4u);
  EXPECT_EQ((*session)->report_stats().queued, 0);
}

TEST(WorkerSession, BadOptionsNameTheField) {
  auto server_rank = Options("");
  server_rank.config.parameter_servers = 1;
  server_rank.config.rank = 0;
  auto s = WorkerSession::Create(server_rank);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("config.rank"), std::string::npos) << s.status();

  auto batch = Options("");
  batch.local_batch = 0;
  s = WorkerSession::Create(batch);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("local_batch"), std::string::npos) << s.status();

  auto url = Options("ftp://nowhere");
  s = WorkerSession::Create(url);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("base_url"), std::string::npos) << s.status();
}

TEST(WorkerSession, IterationsMustNotGoBack) {
  auto session = WorkerSession::Create(Options(""));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->BeginIteration(5).ok());
  auto back = (*session)->BeginIteration(4);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace star::shim

namespace star::shim {
namespace {

// Regression: with reports answered in the background, a slow worker learnt a decision
// only after passing its apply_at_iteration and applied it on another iteration than
// its peers (star local aborted with "rank(s) 2 apply a different decision"). By default
// the iteration that sends a report has the answer before the next one begins.
TEST(WorkerSession, TheIterationAfterAReportAlreadyHasItsDecision) {
  const auto d = MakeDecision(1, 3, api::SyncMode::kFixedK, 1, {{0, false, 32}, {1, false, 32}});
  Controller controller({d});
  auto session = WorkerSession::Create(Options(controller.url(), /*report_every=*/1));
  ASSERT_TRUE(session.ok()) << session.status();
  WorkerSession& s = **session;
  ASSERT_TRUE(s.BeginIteration(0).ok());
  IterationInfo info;
  info.iteration = 1;
  info.local_batch = 32;
  ASSERT_TRUE(s.EndIteration(info).ok());  // sends the report; no Flush here
  auto next = s.BeginIteration(1);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->received.size(), 1u);
  EXPECT_EQ(next->received[0].epoch, 1);
}

}  // namespace
}  // namespace star::shim

namespace star::shim {
namespace {

// The config's report CA reaches the report client: an https controller whose
// certificate only that CA verifies gets the reports; without it they fail on TLS.
TEST(WorkerSession, ReportsReachAnHttpsControllerThroughTheConfiguredCa) {
  std::string dir = (std::filesystem::temp_directory_path() / "star-session-tls-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  test_support::TestCa ca;
  const test_support::CertifiedKey id = ca.IssueServer({"localhost"});
  const std::string cert = test_support::WriteTextFile(dir + "/server.crt", id.cert);
  const std::string key = test_support::WriteTextFile(dir + "/server.key", id.key);
  const auto d = MakeDecision(1, 4, api::SyncMode::kFixedK, 1, {{0, false, 32}, {1, false, 32}});
  Controller controller({d}, "", cert, key);
  ASSERT_EQ(controller.url().rfind("https://", 0), 0u) << controller.url();

  auto trusting = Options(controller.url());
  trusting.config.report_ca_data = ca.cert_pem();
  auto session = WorkerSession::Create(trusting);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(RunIterations(**session, 0, 6).back().decision_epoch, 1);
  EXPECT_EQ((*session)->report_stats().answered, 3);

  auto session_without_ca = WorkerSession::Create(Options(controller.url()));
  ASSERT_TRUE(session_without_ca.ok()) << session_without_ca.status();
  EXPECT_EQ(RunIterations(**session_without_ca, 0, 2).size(), 2u);
  const ReportStats stats = (*session_without_ca)->report_stats();
  EXPECT_EQ(stats.failed, 1);
  EXPECT_NE(stats.last_error.find("TLS"), std::string::npos) << stats.last_error;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace star::shim

namespace star::shim {
namespace {

// The controller's answer to every report: a decision that changes nothing in the tests.
api::Decision NoChange() {
  return MakeDecision(1, 1000000, api::SyncMode::kSsgd, 2, {{0, false, 32}, {1, false, 32}});
}

// A session whose clock the test sets (seconds), with report times counted from 100.
struct ClockedSession {
  std::shared_ptr<double> now = std::make_shared<double>(100);
  std::unique_ptr<WorkerSession> session;

  ClockedSession(const std::string& url, int64_t report_every, double report_seconds = 0) {
    WorkerSessionOptions o = Options(url, report_every);
    o.config.report_seconds = report_seconds;
    o.now = [now = now] { return *now; };
    o.config.clock_origin = 100;
    auto s = WorkerSession::Create(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) session = std::move(*s);
  }
  // Iterations [from, to) without Flush: only the reports the session itself sends.
  // Each advances the clock by `seconds`.
  void Run(int64_t from, int64_t to, double seconds = 0) {
    for (int64_t i = from; i < to; ++i) {
      ASSERT_TRUE(session->BeginIteration(i).ok());
      *now += seconds;
      IterationInfo info;
      info.iteration = i;
      info.local_batch = 32;
      ASSERT_TRUE(session->EndIteration(info).ok());
    }
  }
};

TEST(WorkerSessionReports, GoEveryReportEveryIterationsOrReportSecondsWhicheverComesFirst) {
  Controller controller({NoChange()});
  ClockedSession c(controller.url(), 10, 1.0);
  ASSERT_NE(c.session, nullptr);
  c.Run(0, 20, 0.01);  // fast iterations: every 10
  c.Run(20, 26, 0.6);  // slow ones: once a second has passed, every 2
  const std::vector<api::WorkerReport> reports = controller.reports();
  ASSERT_EQ(reports.size(), 5u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(reports[i].iterations, 10) << i;
  for (size_t i = 2; i < 5; ++i) {
    EXPECT_EQ(reports[i].iterations, 2) << i;
    EXPECT_EQ(reports[i].iteration, 21 + 2 * static_cast<int64_t>(i - 2)) << i;
  }

  Controller by_count({NoChange()});
  ClockedSession plain(by_count.url(), 10);  // report_seconds 0: iterations only
  ASSERT_NE(plain.session, nullptr);
  plain.Run(0, 20, 0.6);
  ASSERT_EQ(by_count.reports().size(), 2u);
  EXPECT_EQ(by_count.reports()[0].iterations, 10);
}

TEST(WorkerSessionAccuracy, GoesOutWithTheNextReportStampedWithTheTimeItWasReported) {
  Controller controller({NoChange()});
  ClockedSession c(controller.url(), 2);
  ASSERT_NE(c.session, nullptr);
  *c.now = 105;
  c.Run(0, 2);  // report 1: no accuracy
  *c.now = 107.5;
  ASSERT_TRUE(c.session->ReportAccuracy(0.5).ok());
  *c.now = 108;
  ASSERT_TRUE(c.session->ReportAccuracy(0.625).ok());  // the newest of the two goes
  *c.now = 110;
  c.Run(2, 4);  // report 2: carries it
  c.Run(4, 6);  // report 3: nothing new
  const std::vector<api::WorkerReport> reports = controller.reports();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_FALSE(reports[0].accuracy.has_value());
  EXPECT_FALSE(reports[0].accuracy_time_seconds.has_value());
  EXPECT_EQ(reports[1].accuracy, 0.625);
  EXPECT_EQ(reports[1].accuracy_time_seconds, 8.0);
  EXPECT_EQ(reports[1].time_seconds, 10.0);
  EXPECT_EQ(reports[1].iterations, 2);
  EXPECT_FALSE(reports[2].accuracy.has_value());
  EXPECT_FALSE(reports[2].accuracy_time_seconds.has_value());
}

TEST(WorkerSessionAccuracy, ABadValueIsRefusedNamingAccuracyAndChangesNothing) {
  Controller controller({NoChange()});
  ClockedSession c(controller.url(), 2);
  ASSERT_NE(c.session, nullptr);
  *c.now = 104;
  ASSERT_TRUE(c.session->ReportAccuracy(0.75).ok());
  *c.now = 106;
  for (double bad : {1.5, -0.25, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const Status s = c.session->ReportAccuracy(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().rfind("accuracy: must be finite and in [0, 1], got ", 0), 0u) << s;
  }
  EXPECT_EQ(c.session->ReportAccuracy(1.5).message(),
            "accuracy: must be finite and in [0, 1], got 1.5");
  c.Run(0, 2);
  const std::vector<api::WorkerReport> reports = controller.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].accuracy, 0.75) << "the held accuracy is the one before the bad values";
  EXPECT_EQ(reports[0].accuracy_time_seconds, 4.0);
}

TEST(WorkerSessionAccuracy, FlushSendsTheHeldAccuracyWithThePendingIterations) {
  Controller controller({NoChange()});
  ClockedSession c(controller.url(), 10);
  ASSERT_NE(c.session, nullptr);
  c.Run(0, 3);  // fewer than report_every: nothing sent
  ASSERT_TRUE(c.session->Flush(std::chrono::seconds(10)).ok());
  EXPECT_TRUE(controller.reports().empty()) << "no accuracy held: Flush sends no report";
  *c.now = 112;
  ASSERT_TRUE(c.session->ReportAccuracy(0.9).ok());
  ASSERT_TRUE(c.session->Flush(std::chrono::seconds(10)).ok());
  std::vector<api::WorkerReport> reports = controller.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].iterations, 3);
  EXPECT_EQ(reports[0].iteration, 2);
  EXPECT_EQ(reports[0].accuracy, 0.9);
  EXPECT_EQ(reports[0].accuracy_time_seconds, 12.0);

  // With no iteration pending there is no report to carry it: it waits for the next.
  ASSERT_TRUE(c.session->ReportAccuracy(0.95).ok());
  ASSERT_TRUE(c.session->Flush(std::chrono::seconds(10)).ok());
  EXPECT_EQ(controller.reports().size(), 1u);
  c.Run(3, 13);
  reports = controller.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].iterations, 10);
  EXPECT_EQ(reports[1].accuracy, 0.95);
}

TEST(WorkerSessionAccuracy, TheDestructorSendsTheHeldAccuracyWithThePendingIterations) {
  Controller controller({NoChange()});
  {
    ClockedSession c(controller.url(), 10);
    ASSERT_NE(c.session, nullptr);
    c.Run(0, 4);
    *c.now = 120.5;
    ASSERT_TRUE(c.session->ReportAccuracy(0.875).ok());
  }  // the trainer stops
  const std::vector<api::WorkerReport> reports = controller.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].iterations, 4);
  EXPECT_EQ(reports[0].accuracy, 0.875);
  EXPECT_EQ(reports[0].accuracy_time_seconds, 20.5);

  Controller plain({NoChange()});
  {
    ClockedSession c(plain.url(), 10);
    ASSERT_NE(c.session, nullptr);
    c.Run(0, 13);  // one report of 10, then 3 pending
  }
  ASSERT_EQ(plain.reports().size(), 2u) << "the last iterations are reported without an accuracy too";
  EXPECT_EQ(plain.reports()[1].iteration, 12);
  EXPECT_EQ(plain.reports()[1].iterations, 3);
}

TEST(WorkerSessionAccuracy, WithoutAControllerAGoodValueIsAcceptedAndABadOneRefused) {
  ClockedSession c("", 2);
  ASSERT_NE(c.session, nullptr);
  EXPECT_TRUE(c.session->ReportAccuracy(0.5).ok());
  EXPECT_EQ(c.session->ReportAccuracy(2).code(), StatusCode::kInvalidArgument);
  c.Run(0, 2);
  EXPECT_TRUE(c.session->Flush(std::chrono::seconds(1)).ok());
  EXPECT_EQ(c.session->report_stats().queued, 0);
}

}  // namespace
}  // namespace star::shim
