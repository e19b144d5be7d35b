#include "star/report/client.h"
#include "star/report/server.h"

#include <atomic>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace star::report {
namespace {

using std::chrono::milliseconds;

api::WorkerReport SampleReport() {
  api::WorkerReport r;
  r.job = "team-a/resnet";  // the slash must survive the URL
  r.worker = 2;
  r.iteration = 99;
  r.iterations = 10;
  r.time_seconds = 12.5;
  r.compute_seconds = 0.25;
  r.communication_seconds = 0.125;
  r.wait_seconds = 0.0625;
  r.local_batch = 64;
  r.amp = true;
  r.local_grad_sq_norm = 4.0;
  r.global_grad_sq_norm = 1.5;
  r.loss = 0.75;
  r.accuracy = 0.8125;
  r.accuracy_time_seconds = 11.75;
  return r;
}

api::Decision SampleDecision() {
  api::Decision d;
  d.epoch = 3;
  d.apply_at_iteration = 120;
  d.mode = api::SyncMode::kFixedK;
  d.k = 2;
  d.workers = {{.worker = 0, .amp = false, .batch = 48},
               {.worker = 1, .amp = false, .batch = 48},
               {.worker = 2, .amp = true, .batch = 32}};
  return d;
}

// A server that records what it receives and answers with `answer`.
struct Recorder {
  std::mutex mu;
  std::vector<api::WorkerReport> reports;
  std::optional<api::Decision> answer;

  ReportHandler Handler() {
    return [this](const api::WorkerReport& r) {
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(r);
      return answer;
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return reports.size();
  }
};

std::unique_ptr<ReportServer> StartServer(Recorder& rec, const std::string& token) {
  StatusOr<std::unique_ptr<ReportServer>> s =
      ReportServer::Start({.host = "127.0.0.1", .port = 0, .token = token, .job_token = {}}, rec.Handler());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::unique_ptr<ReportClient> MakeClient(const std::string& url, const std::string& token,
                                         milliseconds timeout = milliseconds(5000)) {
  StatusOr<std::unique_ptr<ReportClient>> c =
      ReportClient::Create({.base_url = url, .token = token, .timeout = timeout});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(c).value() : nullptr;
}

TEST(ReportClient, ReportRoundTripsAndTheDecisionComesBack) {
  Recorder rec;
  rec.answer = SampleDecision();
  auto server = StartServer(rec, "s3cret");
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  auto client = MakeClient(server->base_url(), "s3cret");
  ASSERT_NE(client, nullptr);

  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, SampleDecision());
  ASSERT_EQ(rec.count(), 1u);
  const api::WorkerReport& seen = rec.reports[0];
  EXPECT_EQ(api::ToJson(seen), api::ToJson(SampleReport()));
}

TEST(ReportClient, NoDecisionIsNullopt) {
  Recorder rec;
  auto server = StartServer(rec, "");
  ASSERT_NE(server, nullptr);
  auto client = MakeClient(server->base_url(), "");
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(rec.count(), 1u);
}

TEST(ReportClient, WrongOrMissingTokenIsRejectedBeforeTheHandler) {
  Recorder rec;
  auto server = StartServer(rec, "s3cret");
  ASSERT_NE(server, nullptr);
  for (const std::string token : {"wrong", ""}) {
    auto client = MakeClient(server->base_url(), token);
    ASSERT_NE(client, nullptr);
    StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
    EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status();
    EXPECT_EQ(got.status().message(), "report rejected: 401 unauthorized");
  }
  EXPECT_EQ(rec.count(), 0u);
}

TEST(ReportClient, MalformedDecisionIsInvalidArgumentNamingTheField) {
  Recorder rec;
  api::Decision bad = SampleDecision();
  bad.k = 0;
  rec.answer = bad;
  auto server = StartServer(rec, "");
  ASSERT_NE(server, nullptr);
  auto client = MakeClient(server->base_url(), "");
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status();
  EXPECT_NE(got.status().message().find("decision.k"), std::string::npos) << got.status();
}

TEST(ReportServer, BadReportIs400NamingTheFieldAndNeverReachesTheHandler) {
  Recorder rec;
  auto server = StartServer(rec, "");
  ASSERT_NE(server, nullptr);
  auto client = MakeClient(server->base_url(), "");
  ASSERT_NE(client, nullptr);
  api::WorkerReport r = SampleReport();
  r.worker = -1;
  StatusOr<std::optional<api::Decision>> got = client->Send(r);
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status();
  EXPECT_NE(got.status().message().find("worker"), std::string::npos) << got.status();
  EXPECT_EQ(rec.count(), 0u);
}

TEST(ReportServer, AReportTheHandlerRefusesIs400AndOtherHandlerFailuresAre500) {
  for (const bool refuse : {true, false}) {
    auto s = ReportServer::Start({.host = "127.0.0.1", .port = 0, .token = "", .job_token = {}},
                                 [refuse](const api::WorkerReport&) -> std::optional<api::Decision> {
                                   if (refuse) throw std::invalid_argument("worker: 9 is outside [0, 4)");
                                   throw std::runtime_error("store down");
                                 });
    ASSERT_TRUE(s.ok()) << s.status();
    auto client = MakeClient((*s)->base_url(), "");
    ASSERT_NE(client, nullptr);
    StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
    ASSERT_FALSE(got.ok());
    if (refuse) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status();
      EXPECT_NE(got.status().message().find("worker: 9 is outside"), std::string::npos) << got.status();
    } else {
      EXPECT_NE(got.status().code(), StatusCode::kInvalidArgument) << got.status();
      EXPECT_NE(got.status().message().find("500"), std::string::npos) << got.status();
    }
  }
}

TEST(ReportClient, NoServerIsUnavailable) {
  int port = 0;
  {
    Recorder rec;
    auto server = StartServer(rec, "");
    ASSERT_NE(server, nullptr);
    port = server->port();
  }  // closed: nothing listens there now
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(port), "", milliseconds(5000));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status();
}

TEST(ReportClient, SlowServerIsDeadlineExceeded) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  StatusOr<std::unique_ptr<ReportServer>> server =
      ReportServer::Start({}, [&](const api::WorkerReport&) -> std::optional<api::Decision> {
        ++calls;
        released.wait_for(std::chrono::seconds(20));  // bounded; released below
        return std::nullopt;
      });
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = MakeClient((*server)->base_url(), "", milliseconds(200));
  ASSERT_NE(client, nullptr);
  StatusOr<std::optional<api::Decision>> got = client->Send(SampleReport());
  release.set_value();
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded) << got.status();
}

TEST(ReportClient, CreateRejectsBadOptions) {
  auto options = [](const std::string& url, milliseconds timeout) {
    ReportClientOptions o;
    o.base_url = url;
    o.timeout = timeout;
    return o;
  };
  EXPECT_EQ(ReportClient::Create(options("not a url", milliseconds(100))).status().code(),
            StatusCode::kInvalidArgument);
  StatusOr<std::unique_ptr<ReportClient>> ftp =
      ReportClient::Create(options("ftp://x", milliseconds(100)));
  EXPECT_NE(ftp.status().message().find("base_url"), std::string::npos);
  StatusOr<std::unique_ptr<ReportClient>> t =
      ReportClient::Create(options("http://127.0.0.1:1", milliseconds(0)));
  EXPECT_NE(t.status().message().find("timeout"), std::string::npos);
}

TEST(ReportClient, EmptyJobIsInvalidArgument) {
  auto client = MakeClient("http://127.0.0.1:1", "");
  ASSERT_NE(client, nullptr);
  api::WorkerReport r = SampleReport();
  r.job.clear();
  StatusOr<std::optional<api::Decision>> got = client->Send(r);
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("job"), std::string::npos);
}

TEST(ReportServer, ConcurrentReportsAreAllAnswered) {
  Recorder rec;
  rec.answer = SampleDecision();
  auto server = StartServer(rec, "t");
  ASSERT_NE(server, nullptr);
  auto client = MakeClient(server->base_url(), "t");
  ASSERT_NE(client, nullptr);
  constexpr int kThreads = 4;
  std::vector<std::future<bool>> done;
  for (int i = 0; i < kThreads; ++i) {
    done.push_back(std::async(std::launch::async, [&, i] {
      api::WorkerReport r = SampleReport();
      r.worker = i;
      StatusOr<std::optional<api::Decision>> got = client->Send(r);
      return got.ok() && got->has_value() && **got == SampleDecision();
    }));
  }
  for (auto& f : done) EXPECT_TRUE(f.get());
  EXPECT_EQ(rec.count(), static_cast<size_t>(kThreads));
}

// How many handler calls overlap when two reports arrive together: each call waits (at
// most 5 s) for the other to come in.
int MostConcurrentCalls(bool serialize) {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0, most = 0;
  auto server = ReportServer::Start(
      {.host = "127.0.0.1", .port = 0, .token = "", .job_token = {}, .serialize_handler = serialize},
      [&](const api::WorkerReport&) -> std::optional<api::Decision> {
        std::unique_lock lock(mu);
        most = std::max(most, ++inside);
        cv.notify_all();
        cv.wait_for(lock, std::chrono::seconds(5), [&] { return most >= 2; });
        --inside;
        return std::nullopt;
      });
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return -1;
  auto client = MakeClient((*server)->base_url(), "", milliseconds(20000));
  std::vector<std::future<bool>> done;
  for (int i = 0; i < 2; ++i) {
    done.push_back(std::async(std::launch::async, [&, i] {
      api::WorkerReport r = SampleReport();
      r.worker = i;
      return client->Send(r).ok();
    }));
  }
  for (auto& f : done) EXPECT_TRUE(f.get());
  return most;
}

TEST(ReportServer, AnUnserialisedHandlerTakesReportsConcurrently) {
  EXPECT_EQ(MostConcurrentCalls(/*serialize=*/false), 2);
}

}  // namespace
}  // namespace star::report
