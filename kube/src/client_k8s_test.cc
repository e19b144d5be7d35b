// The client against the real API server (test_env.h): CRUD of TrainingJobs and pods, the
// error mapping, merge patches and the status subresource, and watches; retries and
// timeouts through star-faultproxy.
#include "star/kube/client.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <vector>

#include "test_env.h"

namespace star::kube {
namespace {

using nlohmann::json;
using testing::ClusterTest;
using testing::WaitFor;
using namespace std::chrono_literals;

std::string Rv(const json& object) { return object["metadata"]["resourceVersion"].get<std::string>(); }

class ClientTest : public ClusterTest {};

TEST_F(ClientTest, CreateGetListUpdateDeleteATrainingJob) {
  auto created = client_->Create(TrainingJobs(), "", Job("a"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["metadata"]["namespace"], ns_) << "ns \"\": the object's namespace";
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());

  auto got = client_->Get(TrainingJobs(), ns_, "a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["workers"]["replicas"], 2);

  auto list = client_->List(TrainingJobs(), ns_);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_FALSE((*list)["metadata"]["resourceVersion"].get<std::string>().empty());

  json next = *got;
  next["spec"]["workers"]["replicas"] = 3;
  auto updated = client_->Update(TrainingJobs(), "", next);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*updated)["spec"]["workers"]["replicas"], 3);
  EXPECT_EQ((*updated)["metadata"]["generation"], 2);
  EXPECT_NE(Rv(*updated), Rv(*got));

  EXPECT_TRUE(client_->Delete(TrainingJobs(), ns_, "a").ok());
  EXPECT_EQ(client_->Get(TrainingJobs(), ns_, "a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Delete(TrainingJobs(), ns_, "a").code(), StatusCode::kNotFound) << "already gone";
}

TEST_F(ClientTest, PodsAcrossNamespacesAndSelectors) {
  const std::string other_ns = MakeNamespace("kube-test-b");
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("p1")).ok());
  ASSERT_TRUE(client_->Create(Pods(), "", Pod("p2", other_ns)).ok()) << "the object's namespace is used";
  json other = Pod("p3");
  other["metadata"]["labels"]["app"] = "other";
  ASSERT_TRUE(client_->Create(Pods(), ns_, other).ok());

  const std::string mine = "test=" + ns_;  // the cluster holds other tests' pods too
  auto all = client_->List(Pods(), "", ListOptions{mine, ""});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)["items"].size(), 3u) << "ns \"\" lists every namespace";
  auto in_mine = client_->List(Pods(), ns_);
  ASSERT_TRUE(in_mine.ok());
  EXPECT_EQ((*in_mine)["items"].size(), 2u);
  auto star = client_->List(Pods(), "", ListOptions{"app=star," + mine, ""});
  ASSERT_TRUE(star.ok());
  EXPECT_EQ((*star)["items"].size(), 2u);
  auto named = client_->List(Pods(), "", ListOptions{mine, "metadata.name=p3"});
  ASSERT_TRUE(named.ok());
  ASSERT_EQ((*named)["items"].size(), 1u);
  EXPECT_EQ((*named)["items"][0]["metadata"]["name"], "p3");
  auto pod = client_->Get(Pods(), other_ns, "p2");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["status"]["phase"], "Pending");
}

TEST_F(ClientTest, ServerErrorsMapToStatusCodesWithTheServersMessage) {
  const Status missing = client_->Get(TrainingJobs(), ns_, "missing").status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "trainingjobs.star.dev \"missing\" not found");

  auto first = client_->Create(TrainingJobs(), ns_, Job("a"));
  ASSERT_TRUE(first.ok());
  const Status exists = client_->Create(TrainingJobs(), ns_, Job("a")).status();
  EXPECT_EQ(exists.code(), StatusCode::kAlreadyExists) << exists;
  EXPECT_NE(exists.message().find("already exists"), std::string::npos) << exists;

  json stale = *first;
  ASSERT_TRUE(client_->MergePatch(TrainingJobs(), ns_, "a", {{"spec", {{"workers", {{"replicas", 4}}}}}}).ok());
  stale["spec"]["workers"]["replicas"] = 5;
  const Status conflict = client_->Update(TrainingJobs(), ns_, stale).status();
  EXPECT_EQ(conflict.code(), StatusCode::kAborted) << conflict;
  EXPECT_NE(conflict.message().find("the object has been modified"), std::string::npos) << conflict;

  const Status invalid = client_->Create(TrainingJobs(), ns_, Job("b", 0)).status();
  EXPECT_EQ(invalid.code(), StatusCode::kInvalidArgument) << invalid;
  EXPECT_NE(invalid.message().find("spec.workers.replicas"), std::string::npos) << invalid;

  const Status bad_selector = client_->List(Pods(), "", ListOptions{"app in (", ""}).status();
  EXPECT_EQ(bad_selector.code(), StatusCode::kInvalidArgument) << bad_selector;

  const Status unknown = client_->List(ResourceRef{"star.dev", "v1alpha1", "nothings", true, "Nothing"}, "").status();
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound) << unknown;
}

TEST_F(ClientTest, RetryOnConflictRereadsUntilTheUpdateLands) {
  ASSERT_TRUE(client_->Create(TrainingJobs(), ns_, Job("a")).ok());
  int attempts = 0;
  const Status s = RetryOnConflict([&]() -> Status {
    ++attempts;
    STAR_ASSIGN_OR_RETURN(json job, client_->Get(TrainingJobs(), ns_, "a"));
    if (attempts == 1) {  // someone else writes between our read and our write
      STAR_RETURN_IF_ERROR(
          client_->MergePatch(TrainingJobs(), ns_, "a", {{"metadata", {{"labels", {{"x", "y"}}}}}}).status());
    }
    job["spec"]["workers"]["replicas"] = 7;
    return client_->Update(TrainingJobs(), ns_, job).status();
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(attempts, 2);
  auto job = client_->Get(TrainingJobs(), ns_, "a");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["spec"]["workers"]["replicas"], 7);
  EXPECT_EQ((*job)["metadata"]["labels"]["x"], "y");

  int calls = 0;
  const Status always = RetryOnConflict([&] { ++calls; return Status::Aborted("conflict"); }, 3);
  EXPECT_EQ(always.code(), StatusCode::kAborted);
  EXPECT_EQ(calls, 3);
  calls = 0;
  EXPECT_EQ(RetryOnConflict([&] { ++calls; return Status::NotFound("gone"); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(calls, 1) << "only conflicts are retried";
}

TEST_F(ClientTest, MergePatchAndTheStatusSubresource) {
  ASSERT_TRUE(client_->Create(TrainingJobs(), ns_, Job("a")).ok());
  auto patched = client_->MergePatch(TrainingJobs(), "", "a", {{"spec", {{"workers", {{"replicas", 3}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ((*patched)["spec"]["workers"]["replicas"], 3);
  EXPECT_EQ((*patched)["spec"]["training"]["globalBatchSize"], 256) << "a merge patch keeps what it does not name";
  EXPECT_EQ((*patched)["metadata"]["generation"], 2);

  auto status = client_->MergePatch(TrainingJobs(), "", "a", {{"status", {{"phase", "Running"}}}}, /*status=*/true);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ((*status)["status"]["phase"], "Running");
  EXPECT_EQ((*status)["metadata"]["generation"], 2) << "status writes do not bump the generation";

  auto ignored = client_->MergePatch(TrainingJobs(), "", "a", {{"status", {{"phase", "Failed"}}}});
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_EQ((*ignored)["status"]["phase"], "Running") << "the main resource ignores status";

  json object = *ignored;
  object["status"]["phase"] = "Succeeded";
  auto written = client_->UpdateStatus(TrainingJobs(), "", object);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ((*written)["status"]["phase"], "Succeeded");

  const Status bad = client_->MergePatch(TrainingJobs(), "", "a", {{"status", {{"phase", "Dancing"}}}}, true).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("status.phase"), std::string::npos) << bad;
}

TEST_F(ClientTest, ServerErrorsAndThrottlingAreRetriedThenSucceed) {
  AddFault({{"verb", "create"}, {"resource", "trainingjobs"}, {"status", 500}, {"count", 2}, {"message", "storage hiccup"}});
  auto created = client_->Create(TrainingJobs(), ns_, Job("a"));
  EXPECT_TRUE(created.ok()) << created.status();

  AddFault({{"verb", "get"}, {"resource", "trainingjobs"}, {"status", 429}, {"count", 2}});
  auto got = client_->Get(TrainingJobs(), ns_, "a");
  EXPECT_TRUE(got.ok()) << got.status();

  EXPECT_EQ(Requests("trainingjobs", "create"), 3);
  EXPECT_EQ(Requests("trainingjobs", "get"), 3);
  EXPECT_EQ(FaultsApplied(), 4);
}

TEST_F(ClientTest, RetriesRunOutAsUnavailableWithTheServersMessage) {
  AddFault({{"verb", "list"}, {"resource", "pods"}, {"status", 503}, {"count", 10}, {"message", "etcd is away"}});
  ClientOptions options = Options();
  options.max_retries = 2;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok());
  const Status s = (*client)->List(Pods(), ns_).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("etcd is away"), std::string::npos) << s;
  EXPECT_EQ(Requests("pods", "list"), 3) << "one try and two retries";
}

TEST_F(ClientTest, NoServerIsUnavailableAndNoAnswerIsDeadlineExceeded) {
  AddFault({{"verb", "get"}, {"resource", "pods"}, {"latencyMs", 10000}, {"count", 1}});
  ClientOptions options = Options();
  options.max_retries = 1;
  options.request_timeout = 300ms;
  auto slow = Client::Create(options);
  ASSERT_TRUE(slow.ok());
  const Status late = (*slow)->Get(Pods(), ns_, "p").status();
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late;

  proxy_->Stop();
  auto gone = Client::Create(options);
  ASSERT_TRUE(gone.ok());
  const Status refused = (*gone)->List(Pods(), ns_).status();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find(proxy_->url().substr(8)), std::string::npos) << refused;
}

// Watches.

TEST_F(ClientTest, WatchFromAResourceVersionDeliversAddedModifiedDeletedInOrder) {
  auto list = client_->List(TrainingJobs(), ns_);
  ASSERT_TRUE(list.ok());
  const std::string from = (*list)["metadata"]["resourceVersion"];
  ASSERT_TRUE(client_->Create(TrainingJobs(), ns_, Job("a")).ok());
  ASSERT_TRUE(client_->MergePatch(TrainingJobs(), ns_, "a", {{"spec", {{"workers", {{"replicas", 3}}}}}}).ok());
  ASSERT_TRUE(client_->Delete(TrainingJobs(), ns_, "a").ok());

  std::vector<WatchEvent> events;
  WatchOptions options;
  options.resource_version = from;
  options.timeout = 20s;
  const Status s = client_->Watch(TrainingJobs(), ns_, options, [&](const WatchEvent& e) {
    if (e.type != "BOOKMARK") events.push_back(e);
    return events.size() < 3;
  });
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, "ADDED");
  EXPECT_EQ(events[1].type, "MODIFIED");
  EXPECT_EQ(events[1].object["spec"]["workers"]["replicas"], 3);
  EXPECT_EQ(events[2].type, "DELETED");
  for (const auto& e : events) EXPECT_EQ(e.object["metadata"]["name"], "a");
}

// A watch running on its own thread, events collected for the test to wait on.
class Watcher {
 public:
  Watcher(Client* client, ResourceRef r, std::string ns, WatchOptions options) {
    result_ = std::async(std::launch::async, [=, this] {
      return client->Watch(r, ns, options, [this](const WatchEvent& e) {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(e);
        return true;
      }, &stop_);
    });
  }
  ~Watcher() {
    stop_ = true;
    if (result_.valid()) result_.wait();
  }
  std::vector<WatchEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  size_t count(const std::string& type) {
    size_t n = 0;
    for (const auto& e : events()) n += e.type == type ? 1 : 0;
    return n;
  }
  // Sets the stop flag; the watch's result if it returned within `timeout`.
  std::optional<Status> Stop(std::chrono::milliseconds timeout = 10s) {
    stop_ = true;
    if (result_.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return result_.get();
  }
  std::future<Status>& result() { return result_; }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<WatchEvent> events_;
  std::future<Status> result_;
};

TEST_F(ClientTest, WatchDeliversEventsAsTheyHappenAndStopEndsIt) {
  UseFaultProxy();  // it counts the open watches
  WatchOptions options;
  options.timeout = 60s;
  options.allow_bookmarks = false;
  Watcher watch(client_.get(), Pods(), ns_, options);
  ASSERT_TRUE(WaitFor([&] { return ActiveWatches() == 1; }));

  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("p")).ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count("ADDED") == 1; })) << "delivered while the stream stays open";
  ASSERT_TRUE(client_->MergePatch(Pods(), ns_, "p", {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count("MODIFIED") == 1; }));
  EXPECT_EQ(watch.events().back().object["metadata"]["labels"]["v"], "2");

  const std::optional<Status> stopped = watch.Stop();
  ASSERT_TRUE(stopped.has_value()) << "Stop must end a watch that has nothing to deliver";
  EXPECT_TRUE(stopped->ok()) << *stopped;
}

TEST_F(ClientTest, WatchEndsOkWhenTheServerEndsTheStream) {
  WatchOptions options;
  options.timeout = 1s;
  const Status s = client_->Watch(Pods(), ns_, options, [](const WatchEvent&) { return true; });
  EXPECT_TRUE(s.ok()) << s;
}

// The API server sends a bookmark 2 s before a watch's deadline (and each minute).
TEST_F(ClientTest, WatchPassesBookmarks) {
  auto list = client_->List(Pods(), ns_);
  ASSERT_TRUE(list.ok());
  WatchOptions options;
  options.resource_version = (*list)["metadata"]["resourceVersion"];
  options.timeout = 5s;
  std::optional<WatchEvent> bookmark;
  const Status s = client_->Watch(Pods(), ns_, options, [&](const WatchEvent& e) {
    if (e.type == "BOOKMARK") bookmark = e;
    return !bookmark;
  });
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_TRUE(bookmark.has_value());
  EXPECT_FALSE(bookmark->object["metadata"]["resourceVersion"].get<std::string>().empty());
}

// The API server's watch cache keeps the events since it last listed etcd: a version older
// than those is gone (410 Expired, in the watch stream).
TEST_F(ClientTest, WatchFromAnExpiredVersionIsOutOfRange) {
  WatchOptions options;
  options.resource_version = "1";
  options.timeout = 20s;
  int delivered = 0;
  const Status s = client_->Watch(TrainingJobs(), ns_, options, [&](const WatchEvent&) { ++delivered; return true; });
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s;
  EXPECT_NE(s.message().find("too old resource version"), std::string::npos) << s;
  EXPECT_EQ(delivered, 0);
}

TEST_F(ClientTest, AnInjected410OnAWatchIsOutOfRange) {
  AddFault({{"verb", "watch"}, {"resource", "trainingjobs"}, {"status", 410}, {"count", 1}});
  WatchOptions options;
  options.resource_version = "1";
  options.timeout = 20s;
  const Status s = client_->Watch(TrainingJobs(), ns_, options, [](const WatchEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s;
}

TEST_F(ClientTest, WatchOfAnUnknownResourceIsNotFound) {
  WatchOptions options;
  options.timeout = 5s;
  const Status s = client_->Watch(ResourceRef{"star.dev", "v1alpha1", "nothings", true, "Nothing"}, "", options,
                                  [](const WatchEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
}

}  // namespace
}  // namespace star::kube
