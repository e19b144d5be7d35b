// The emulator over HTTP, in-process, with cpprest's client: CRUD, resourceVersions,
// conflicts, patches, the status subresource, generation, finalizers, cascading delete,
// selectors, watches (from a resourceVersion, 410, bookmarks), validation, faults,
// latency, discovery and tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cpprest/http_client.h>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "server.h"

namespace star::apiserver {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace http = web::http;

const std::string kWidgets = "/apis/test.star.dev/v1/namespaces/default/widgets";

struct Reply {
  int code = 0;
  json body;
  http::http_headers headers;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking JSON client over cpprest.
class Client {
 public:
  explicit Client(const std::string& url) : client_(web::uri(url)) {}

  Reply Do(const std::string& method, const std::string& path, const json& body = nullptr,
           const std::string& content_type = "application/json", const std::string& accept = "application/json") {
    http::http_request req(method);
    req.set_request_uri(web::uri(path));
    req.headers().add("Accept", accept);
    if (!body.is_null()) {
      const std::string text = body.dump();
      req.set_body(std::vector<unsigned char>(text.begin(), text.end()));
      req.headers().set_content_type(content_type);
    }
    Reply r;
    try {
      http::http_response resp = client_.request(req).get();
      r.code = resp.status_code();
      r.headers = resp.headers();
      const std::vector<unsigned char> bytes = resp.extract_vector().get();
      const std::string text(bytes.begin(), bytes.end());
      r.body = text.empty() ? json() : json::parse(text, nullptr, false);
    } catch (const std::exception& e) {
      ADD_FAILURE() << method << " " << path << ": " << e.what();
    }
    return r;
  }
  Reply Get(const std::string& path, const std::string& accept = "application/json") {
    return Do("GET", path, nullptr, "application/json", accept);
  }
  Reply Post(const std::string& path, const json& body) { return Do("POST", path, body); }
  Reply Put(const std::string& path, const json& body) { return Do("PUT", path, body); }
  Reply Patch(const std::string& path, const json& body, const std::string& type = "application/merge-patch+json") {
    return Do("PATCH", path, body, type);
  }
  Reply Delete(const std::string& path, const json& body = nullptr) { return Do("DELETE", path, body); }

 private:
  http::client::http_client client_;
};

// A watch read line by line on a thread; events are waited for with a deadline.
class Watch {
 public:
  Watch(const std::string& url, const std::string& path_and_query) : client_(web::uri(url)) {
    reader_ = std::thread([this, path_and_query] { Read(path_and_query); });
  }
  ~Watch() {
    cancel_.cancel();
    reader_.join();
  }

  // The next event, or nullopt if none comes within `timeout` or the stream ended.
  std::optional<json> Next(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() || ended_; });
    if (events_.empty()) return std::nullopt;
    json e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // Waits for the server to end the stream; true if it did within `timeout`.
  bool Ended(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return ended_; });
  }
  int status() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return status_ != 0 || ended_; });
    return status_;
  }

 private:
  void Read(const std::string& path_and_query) {
    try {
      http::http_request req(http::methods::GET);
      req.set_request_uri(web::uri(path_and_query));
      http::http_response resp = client_.request(req, cancel_.get_token()).get();
      {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = resp.status_code();
      }
      cv_.notify_all();
      auto body = resp.body();
      while (true) {
        concurrency::streams::container_buffer<std::string> line;
        const size_t n = body.read_line(line).get();
        if (n == 0 && body.is_eof()) break;
        if (line.collection().empty()) continue;
        json event = json::parse(line.collection(), nullptr, false);
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(std::move(event));
        cv_.notify_all();
      }
    } catch (const std::exception&) {
      // Cancelled, or the connection closed.
    }
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    cv_.notify_all();
  }

  http::client::http_client client_;
  pplx::cancellation_token_source cancel_;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<json> events_;
  bool ended_ = false;
  int status_ = 0;
};

json Widget(const std::string& name, int replicas, json labels = json::object()) {
  return {{"apiVersion", "test.star.dev/v1"},
          {"kind", "Widget"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"replicas", replicas}}}};
}

std::uint64_t Rv(const json& object) { return std::stoull(object["metadata"]["resourceVersion"].get<std::string>()); }

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(ApiServerOptions{}); }

  void Start(ApiServerOptions options) {
    client_.reset();
    server_.reset();
    options.crds_dir = STAR_APISERVER_TESTDATA "/crds";
    server_ = std::make_unique<ApiServer>(options);
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = std::make_unique<Client>(server_->url());
  }

  Reply Create(const json& widget) {
    Reply r = client_->Post(kWidgets, widget);
    EXPECT_EQ(r.code, 201) << r.body.dump();
    return r;
  }

  std::unique_ptr<Watch> WatchWidgets(const std::string& query) {
    return std::make_unique<Watch>(server_->url(), kWidgets + "?watch=true&timeoutSeconds=30" + query);
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ApiServerTest, CreateGetListDelete) {
  const Reply created = Create(Widget("a", 2));
  EXPECT_EQ(created.body["metadata"]["namespace"], "default");
  EXPECT_FALSE(created.body["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(created.body["metadata"]["creationTimestamp"].get<std::string>().empty());
  EXPECT_EQ(created.body["metadata"]["generation"], 1);
  EXPECT_EQ(created.body["spec"]["mode"], "Fast") << "defaulted";

  const Reply got = client_->Get(kWidgets + "/a");
  EXPECT_EQ(got.code, 200);
  EXPECT_EQ(got.body, created.body);

  const Reply list = client_->Get(kWidgets);
  EXPECT_EQ(list.body["kind"], "WidgetList");
  EXPECT_EQ(list.body["apiVersion"], "test.star.dev/v1");
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["metadata"]["name"], "a");
  EXPECT_GE(std::stoull(list.body["metadata"]["resourceVersion"].get<std::string>()), Rv(created.body));
  EXPECT_EQ(client_->Get("/apis/test.star.dev/v1/widgets").body["items"].size(), 1u) << "all namespaces";

  EXPECT_EQ(client_->Delete(kWidgets + "/a").code, 200);
  const Reply gone = client_->Get(kWidgets + "/a");
  EXPECT_EQ(gone.code, 404);
  EXPECT_EQ(gone.body["kind"], "Status");
  EXPECT_EQ(gone.body["reason"], "NotFound");
  EXPECT_EQ(gone.body["message"], "widgets.test.star.dev \"a\" not found");
  EXPECT_EQ(gone.body["details"], json({{"name", "a"}, {"group", "test.star.dev"}, {"kind", "widgets"}}));
}

TEST_F(ApiServerTest, CreatingTwiceIsAlreadyExistsAndGenerateNameMakesUniqueNames) {
  Create(Widget("a", 1));
  const Reply again = client_->Post(kWidgets, Widget("a", 1));
  EXPECT_EQ(again.code, 409);
  EXPECT_EQ(again.body["reason"], "AlreadyExists");

  json generated = Widget("", 1);
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = "gen-";
  const std::string n1 = Create(generated).body["metadata"]["name"];
  const std::string n2 = Create(generated).body["metadata"]["name"];
  EXPECT_EQ(n1.rfind("gen-", 0), 0u);
  EXPECT_EQ(n1.size(), 9u);
  EXPECT_NE(n1, n2);
}

TEST_F(ApiServerTest, ResourceVersionsIncreaseWithEveryChange) {
  std::uint64_t last = 0;
  auto check = [&](const Reply& r) {
    ASSERT_LT(r.code, 300) << r.body.dump();
    EXPECT_GT(Rv(r.body), last);
    last = Rv(r.body);
  };
  check(Create(Widget("a", 1)));
  check(Create(Widget("b", 1)));
  check(client_->Patch(kWidgets + "/a", {{"spec", {{"replicas", 2}}}}));
  check(client_->Patch(kWidgets + "/b/status", {{"status", {{"phase", "Running"}}}}));
  check(client_->Delete(kWidgets + "/a"));
  EXPECT_EQ(std::stoull(client_->Get(kWidgets).body["metadata"]["resourceVersion"].get<std::string>()), last);
}

TEST_F(ApiServerTest, AStaleUpdateIsAConflict) {
  const json original = Create(Widget("a", 1)).body;
  json first = original;
  first["spec"]["replicas"] = 2;
  const Reply updated = client_->Put(kWidgets + "/a", first);
  ASSERT_EQ(updated.code, 200) << updated.body.dump();
  EXPECT_GT(Rv(updated.body), Rv(original));

  json stale = original;
  stale["spec"]["replicas"] = 3;
  const Reply conflict = client_->Put(kWidgets + "/a", stale);
  EXPECT_EQ(conflict.code, 409);
  EXPECT_EQ(conflict.body["reason"], "Conflict");
  EXPECT_EQ(conflict.body["message"],
            "Operation cannot be fulfilled on widgets.test.star.dev \"a\": the object has been modified; please "
            "apply your changes to the latest version and try again");
  EXPECT_EQ(client_->Get(kWidgets + "/a").body["spec"]["replicas"], 2);

  stale["metadata"].erase("resourceVersion");
  EXPECT_EQ(client_->Put(kWidgets + "/a", stale).code, 200) << "no resourceVersion: unconditional";
}

TEST_F(ApiServerTest, AnUpdateThatChangesNothingKeepsTheResourceVersion) {
  const json created = Create(Widget("a", 1)).body;
  const Reply same = client_->Put(kWidgets + "/a", created);
  EXPECT_EQ(same.code, 200);
  EXPECT_EQ(same.body["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
}

TEST_F(ApiServerTest, PatchesMergeAndJsonPatchApplies) {
  Create(Widget("a", 1, {{"x", "1"}, {"y", "2"}}));
  Reply r = client_->Patch(kWidgets + "/a", {{"metadata", {{"labels", {{"x", nullptr}, {"z", "3"}}}}},
                                             {"spec", {{"color", "red"}}}});
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_EQ(r.body["metadata"]["labels"], json({{"y", "2"}, {"z", "3"}}));
  EXPECT_EQ(r.body["spec"]["color"], "red");
  EXPECT_EQ(r.body["spec"]["replicas"], 1);

  r = client_->Patch(kWidgets + "/a", json::parse(R"([{"op":"replace","path":"/spec/replicas","value":4}])"),
                     "application/json-patch+json");
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_EQ(r.body["spec"]["replicas"], 4);
  r = client_->Patch(kWidgets + "/a", json::parse(R"([{"op":"test","path":"/spec/replicas","value":9}])"),
                     "application/json-patch+json");
  EXPECT_EQ(r.code, 422);
  EXPECT_EQ(client_->Patch(kWidgets + "/a", {{"spec", {{"replicas", 2}}}}, "text/plain").code, 415);
  EXPECT_EQ(client_->Patch(kWidgets + "/nope", {{"spec", {{"replicas", 2}}}}).code, 404);
}

TEST_F(ApiServerTest, TheStatusSubresourceIsolatesStatusFromSpec) {
  json created = Create(Widget("a", 1)).body;
  EXPECT_FALSE(created.contains("status"));

  // The main endpoint ignores status.
  json main = created;
  main["spec"]["replicas"] = 2;
  main["status"] = {{"phase", "Hacked"}};
  Reply r = client_->Put(kWidgets + "/a", main);
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_EQ(r.body["spec"]["replicas"], 2);
  EXPECT_FALSE(r.body.contains("status"));

  // /status changes only status.
  json status = r.body;
  status["spec"]["replicas"] = 9;
  status["status"] = {{"phase", "Running"}, {"ready", 2}};
  r = client_->Put(kWidgets + "/a/status", status);
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_EQ(r.body["spec"]["replicas"], 2);
  EXPECT_EQ(r.body["status"]["phase"], "Running");

  r = client_->Patch(kWidgets + "/a/status", {{"spec", {{"replicas", 5}}}, {"status", {{"ready", 3}}}});
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_EQ(r.body["spec"]["replicas"], 2);
  EXPECT_EQ(r.body["status"], json({{"phase", "Running"}, {"ready", 3}}));
  r = client_->Patch(kWidgets + "/a", {{"status", {{"phase", "Ignored"}}}});
  EXPECT_EQ(r.body["status"]["phase"], "Running");
  EXPECT_EQ(client_->Get(kWidgets + "/a/status").body["status"]["ready"], 3);

  // Status is validated against the schema too.
  r = client_->Patch(kWidgets + "/a/status", {{"status", {{"ready", "many"}}}});
  EXPECT_EQ(r.code, 422);
}

TEST_F(ApiServerTest, GenerationCountsSpecChangesOnly) {
  Create(Widget("a", 1));
  auto generation = [&] { return client_->Get(kWidgets + "/a").body["metadata"]["generation"].get<int>(); };
  EXPECT_EQ(generation(), 1);
  client_->Patch(kWidgets + "/a/status", {{"status", {{"phase", "Running"}}}});
  EXPECT_EQ(generation(), 1);
  client_->Patch(kWidgets + "/a", {{"metadata", {{"labels", {{"k", "v"}}}}}});
  EXPECT_EQ(generation(), 1);
  client_->Patch(kWidgets + "/a", {{"spec", {{"replicas", 2}}}});
  EXPECT_EQ(generation(), 2);
  client_->Patch(kWidgets + "/a", {{"spec", {{"replicas", 3}}}});
  EXPECT_EQ(generation(), 3);
}

TEST_F(ApiServerTest, FinalizersHoldADeletedObjectUntilTheyAreRemoved) {
  json w = Widget("a", 1);
  w["metadata"]["finalizers"] = {"test.star.dev/cleanup"};
  Create(w);
  const Reply deleting = client_->Delete(kWidgets + "/a");
  EXPECT_EQ(deleting.code, 202);
  Reply r = client_->Get(kWidgets + "/a");
  ASSERT_EQ(r.code, 200);
  EXPECT_TRUE(r.body["metadata"].contains("deletionTimestamp"));

  // Updates still work, and cannot clear the deletionTimestamp.
  json update = r.body;
  update["metadata"].erase("deletionTimestamp");
  update["spec"]["replicas"] = 2;
  r = client_->Put(kWidgets + "/a", update);
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_TRUE(r.body["metadata"].contains("deletionTimestamp"));

  r = client_->Patch(kWidgets + "/a", {{"metadata", {{"finalizers", nullptr}}}});
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(client_->Get(kWidgets + "/a").code, 404);
}

TEST_F(ApiServerTest, DeletingAnOwnerDeletesItsDependents) {
  const json owner = Create(Widget("owner", 1)).body;
  const json other = Create(Widget("other", 1)).body;
  auto ref = [](const json& o) {
    return json{{"apiVersion", "test.star.dev/v1"}, {"kind", "Widget"}, {"name", o["metadata"]["name"]},
                {"uid", o["metadata"]["uid"]}};
  };
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "worker-0"}, {"ownerReferences", {ref(owner)}}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
  ASSERT_EQ(client_->Post("/api/v1/namespaces/default/pods", pod).code, 201);
  json shared = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", "shared"}, {"ownerReferences", {ref(owner), ref(other)}}}}};
  ASSERT_EQ(client_->Post("/api/v1/namespaces/default/configmaps", shared).code, 201);
  json grandchild = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", {{"name", "grandchild"}}}};
  const json pod_stored = client_->Get("/api/v1/namespaces/default/pods/worker-0").body;
  grandchild["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", "worker-0"},
                                                {"uid", pod_stored["metadata"]["uid"]}}};
  ASSERT_EQ(client_->Post("/api/v1/namespaces/default/configmaps", grandchild).code, 201);

  EXPECT_EQ(client_->Delete(kWidgets + "/owner", {{"propagationPolicy", "Background"}}).code, 200);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/pods/worker-0").code, 404);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/configmaps/grandchild").code, 404);
  const Reply kept = client_->Get("/api/v1/namespaces/default/configmaps/shared");
  ASSERT_EQ(kept.code, 200) << "another owner is alive";
  EXPECT_EQ(kept.body["metadata"]["ownerReferences"], json({ref(other)}));
}

TEST_F(ApiServerTest, OrphanPropagationKeepsDependents) {
  const json owner = Create(Widget("owner", 1)).body;
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata",
              {{"name", "child"},
               {"ownerReferences",
                {{{"apiVersion", "test.star.dev/v1"}, {"kind", "Widget"}, {"name", "owner"}, {"uid", owner["metadata"]["uid"]}}}}}}};
  ASSERT_EQ(client_->Post("/api/v1/namespaces/default/configmaps", cm).code, 201);
  EXPECT_EQ(client_->Delete(kWidgets + "/owner?propagationPolicy=Orphan").code, 200);
  const Reply child = client_->Get("/api/v1/namespaces/default/configmaps/child");
  ASSERT_EQ(child.code, 200);
  EXPECT_FALSE(child.body["metadata"].contains("ownerReferences"));
}

TEST_F(ApiServerTest, LabelAndFieldSelectorsFilterLists) {
  Create(Widget("a", 1, {{"app", "web"}, {"tier", "front"}}));
  Create(Widget("b", 1, {{"app", "db"}}));
  Create(Widget("c", 1, json::object()));
  auto names = [&](const std::string& query) {
    std::set<std::string> out;
    const Reply r = client_->Get(kWidgets + "?" + query);
    EXPECT_EQ(r.code, 200) << query << ": " << r.body.dump();
    for (const auto& item : r.body["items"]) out.insert(item["metadata"]["name"].get<std::string>());
    return out;
  };
  using Names = std::set<std::string>;
  EXPECT_EQ(names("labelSelector=app%3Dweb"), (Names{"a"}));
  EXPECT_EQ(names("labelSelector=app%3D%3Dweb"), (Names{"a"}));
  EXPECT_EQ(names("labelSelector=app!%3Dweb"), (Names{"b", "c"}));
  EXPECT_EQ(names("labelSelector=app+in+(web,db)"), (Names{"a", "b"}));
  EXPECT_EQ(names("labelSelector=app%20notin%20(web)"), (Names{"b", "c"}));
  EXPECT_EQ(names("labelSelector=tier"), (Names{"a"}));
  EXPECT_EQ(names("labelSelector=!app"), (Names{"c"}));
  EXPECT_EQ(names("labelSelector=app,!tier"), (Names{"b"}));
  EXPECT_EQ(names("fieldSelector=metadata.name%3Db"), (Names{"b"}));
  EXPECT_EQ(names("fieldSelector=metadata.namespace!%3Ddefault"), (Names{}));
  EXPECT_EQ(client_->Get(kWidgets + "?labelSelector=app+in+(").code, 400);
}

TEST_F(ApiServerTest, AWatchFromAResourceVersionStreamsTheLaterEventsInOrder) {
  const std::uint64_t start = Rv(Create(Widget("a", 1)).body);
  Create(Widget("b", 1));
  client_->Patch(kWidgets + "/b", {{"spec", {{"replicas", 2}}}});
  client_->Delete(kWidgets + "/a");

  auto watch = WatchWidgets("&resourceVersion=" + std::to_string(start));
  EXPECT_EQ(watch->status(), 200);
  std::vector<std::pair<std::string, std::string>> seen;
  std::uint64_t last = start;
  for (int i = 0; i < 3; ++i) {
    auto e = watch->Next();
    ASSERT_TRUE(e.has_value()) << "event " << i;
    seen.emplace_back((*e)["type"], (*e)["object"]["metadata"]["name"]);
    EXPECT_GT(Rv((*e)["object"]), last);
    last = Rv((*e)["object"]);
    EXPECT_EQ((*e)["object"]["apiVersion"], "test.star.dev/v1");
  }
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::string>>{{"ADDED", "b"}, {"MODIFIED", "b"}, {"DELETED", "a"}}));

  // Then live changes.
  Create(Widget("c", 1));
  auto live = watch->Next();
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ((*live)["type"], "ADDED");
  EXPECT_EQ((*live)["object"]["metadata"]["name"], "c");
}

TEST_F(ApiServerTest, AWatchWithoutResourceVersionStartsWithTheCurrentState) {
  Create(Widget("a", 1));
  auto watch = WatchWidgets("");
  auto e = watch->Next();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ((*e)["type"], "ADDED");
  EXPECT_EQ((*e)["object"]["metadata"]["name"], "a");
}

TEST_F(ApiServerTest, ALabelSelectedWatchSeesObjectsEnterAndLeave) {
  Create(Widget("a", 1, {{"app", "web"}}));
  auto watch = WatchWidgets("&labelSelector=app%3Dweb&resourceVersion=" +
                            client_->Get(kWidgets).body["metadata"]["resourceVersion"].get<std::string>());
  client_->Patch(kWidgets + "/a", {{"metadata", {{"labels", {{"app", "db"}}}}}});
  client_->Patch(kWidgets + "/a", {{"metadata", {{"labels", {{"app", "web"}}}}}});
  auto left = watch->Next();
  auto entered = watch->Next();
  ASSERT_TRUE(left.has_value() && entered.has_value());
  EXPECT_EQ((*left)["type"], "DELETED");
  EXPECT_EQ((*entered)["type"], "ADDED");
}

TEST_F(ApiServerTest, ATooOldResourceVersionGets410Gone) {
  ApiServerOptions options;
  options.api.history_limit = 3;
  Start(options);
  const std::uint64_t first = Rv(Create(Widget("w0", 1)).body);
  for (int i = 1; i < 8; ++i) Create(Widget("w" + std::to_string(i), 1));

  auto watch = WatchWidgets("&resourceVersion=" + std::to_string(first));
  auto e = watch->Next();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ((*e)["type"], "ERROR");
  EXPECT_EQ((*e)["object"]["kind"], "Status");
  EXPECT_EQ((*e)["object"]["code"], 410);
  EXPECT_EQ((*e)["object"]["reason"], "Expired");
  EXPECT_NE((*e)["object"]["message"].get<std::string>().find("too old resource version"), std::string::npos);
  EXPECT_TRUE(watch->Ended()) << "the stream ends after the error";

  // The history still serves recent versions.
  auto recent = WatchWidgets("&resourceVersion=" + std::to_string(first + 5));
  auto r = recent->Next();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["type"], "ADDED");
  EXPECT_EQ(Rv((*r)["object"]), first + 6);
}

TEST_F(ApiServerTest, BookmarksCarryTheCurrentResourceVersion) {
  ApiServerOptions options;
  options.api.bookmark_interval = 50ms;
  Start(options);
  const std::uint64_t rv = Rv(Create(Widget("a", 1)).body);
  auto watch = WatchWidgets("&allowWatchBookmarks=true&resourceVersion=" + std::to_string(rv));
  auto e = watch->Next();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ((*e)["type"], "BOOKMARK");
  EXPECT_EQ((*e)["object"]["kind"], "Widget");
  EXPECT_EQ((*e)["object"]["apiVersion"], "test.star.dev/v1");
  EXPECT_EQ(Rv((*e)["object"]), rv);

  auto quiet = WatchWidgets("&resourceVersion=" + std::to_string(rv));
  Create(Widget("b", 1));
  auto next = quiet->Next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ((*next)["type"], "ADDED") << "no bookmarks unless asked";
}

TEST_F(ApiServerTest, TimeoutSecondsEndsTheWatch) {
  Watch watch(server_->url(), kWidgets + "?watch=1&timeoutSeconds=1");
  EXPECT_TRUE(watch.Ended(20s));
}

TEST_F(ApiServerTest, SendInitialEventsEndsWithAnAnnotatedBookmark) {
  Create(Widget("a", 1));
  auto watch = WatchWidgets("&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan");
  auto added = watch->Next();
  auto bookmark = watch->Next();
  ASSERT_TRUE(added.has_value() && bookmark.has_value());
  EXPECT_EQ((*added)["type"], "ADDED");
  EXPECT_EQ((*bookmark)["type"], "BOOKMARK");
  EXPECT_EQ((*bookmark)["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
}

TEST_F(ApiServerTest, StoppingTheServerEndsOpenWatches) {
  auto watch = WatchWidgets("");
  EXPECT_EQ(watch->status(), 200);
  server_->Stop();
  EXPECT_TRUE(watch->Ended());
}

TEST_F(ApiServerTest, ConcurrentWritesGetDistinctResourceVersions) {
  constexpr int kThreads = 8, kPerThread = 10;
  std::vector<std::vector<std::uint64_t>> versions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client(server_->url());
      for (int i = 0; i < kPerThread; ++i) {
        const Reply r = client.Post(kWidgets, Widget("w-" + std::to_string(t) + "-" + std::to_string(i), 1));
        if (r.code == 201) versions[t].push_back(Rv(r.body));
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::uint64_t> all;
  for (const auto& v : versions) {
    EXPECT_EQ(v.size(), static_cast<size_t>(kPerThread));
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << "one client's writes are ordered";
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(client_->Get(kWidgets).body["items"].size(), static_cast<size_t>(kThreads * kPerThread));
}

// Wrong JSON types are a 400 (the Go types cannot decode them); a missing ownerReference
// field is a 422.
TEST_F(ApiServerTest, MalformedObjectMetaIsRefusedNamingTheFieldForBuiltInKindsToo) {
  const std::string pods = "/api/v1/namespaces/default/pods";
  auto pod = [](const json& meta) {
    json p = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", {{"containers", json::array()}}}};
    return p;
  };
  struct Case {
    json meta;
    std::string field;
  };
  for (const Case& c : {Case{{{"name", "a"}, {"ownerReferences", {{{"uid", 5}}}}}, "metadata.ownerReferences[0].uid"},
                        Case{{{"name", "a"}, {"ownerReferences", "x"}}, "metadata.ownerReferences"},
                        Case{{{"name", "a"}, {"labels", {{"app", 1}}}}, "metadata.labels[app]"},
                        Case{{{"name", "a"}, {"finalizers", {7}}}, "metadata.finalizers[0]"}}) {
    const Reply r = client_->Post(pods, pod(c.meta));
    EXPECT_EQ(r.code, 400) << c.meta.dump();
    EXPECT_NE(r.body.value("message", "").find(c.field), std::string::npos) << r.body.dump();
    EXPECT_EQ(client_->Get(pods + "/a").code, 404) << "nothing stored";
  }
  // A valid pod, then an update that breaks its metadata: refused, unchanged.
  ASSERT_EQ(client_->Post(pods, pod({{"name", "a"}, {"labels", {{"app", "x"}}}})).code, 201);
  EXPECT_EQ(client_->Patch(pods + "/a", {{"metadata", {{"labels", {{"app", 2}}}}}}).code, 400);
  const Reply missing = client_->Post(pods, pod({{"name", "b"}, {"ownerReferences", {{{"uid", "u"}}}}}));
  EXPECT_EQ(missing.code, 422);
  EXPECT_NE(missing.body.value("message", "").find("metadata.ownerReferences[0].apiVersion"), std::string::npos);
  EXPECT_EQ(client_->Get(pods + "/a").body["metadata"]["labels"]["app"], "x");
  EXPECT_EQ(client_->Delete(pods + "/a").code, 200);
}

TEST_F(ApiServerTest, DeleteCollectionWithBadOptionsIs400AndDeletesNothing) {
  Create(Widget("a", 1));
  Create(Widget("b", 1));
  const Reply bad = client_->Delete(kWidgets + "?propagationPolicy=Bogus");
  EXPECT_EQ(bad.code, 400) << bad.body.dump();
  EXPECT_EQ(client_->Get(kWidgets).body["items"].size(), 2u);
  const Reply all = client_->Delete(kWidgets);
  EXPECT_EQ(all.code, 200) << all.body.dump();
  EXPECT_EQ(all.body["items"].size(), 2u);
  EXPECT_EQ(client_->Get(kWidgets).body["items"].size(), 0u);
}

TEST_F(ApiServerTest, AnInvalidObjectIs422NamingTheField) {
  const Reply r = client_->Post(kWidgets, Widget("x", 0));
  EXPECT_EQ(r.code, 422);
  EXPECT_EQ(r.body["kind"], "Status");
  EXPECT_EQ(r.body["status"], "Failure");
  EXPECT_EQ(r.body["reason"], "Invalid");
  EXPECT_EQ(r.body["message"],
            "Widget.test.star.dev \"x\" is invalid: spec.replicas: Invalid value: 0: spec.replicas in body should be "
            "greater than or equal to 1");
  EXPECT_EQ(r.body["details"]["name"], "x");
  EXPECT_EQ(r.body["details"]["group"], "test.star.dev");
  EXPECT_EQ(r.body["details"]["kind"], "Widget");
  ASSERT_EQ(r.body["details"]["causes"].size(), 1u);
  EXPECT_EQ(r.body["details"]["causes"][0],
            json({{"reason", "FieldValueInvalid"},
                  {"message", "Invalid value: 0: spec.replicas in body should be greater than or equal to 1"},
                  {"field", "spec.replicas"}}));
  EXPECT_EQ(client_->Get(kWidgets + "/x").code, 404);

  // Updates and patches are validated too, and change nothing when refused.
  Create(Widget("ok", 1));
  EXPECT_EQ(client_->Patch(kWidgets + "/ok", {{"spec", {{"mode", "Turbo"}}}}).code, 422);
  EXPECT_EQ(client_->Get(kWidgets + "/ok").body["spec"]["mode"], "Fast");
  const Reply name = client_->Post(kWidgets, Widget("Bad_Name", 1));
  EXPECT_EQ(name.code, 422);
  EXPECT_EQ(name.body["details"]["causes"][0]["field"], "metadata.name");
}

TEST_F(ApiServerTest, UnknownFieldsArePrunedOrRefusedUnderStrictValidation) {
  json w = Widget("a", 1);
  w["spec"]["colour"] = "red";
  w["spec"]["template"] = {{"anything", {{"goes", true}}}};
  const Reply created = client_->Post(kWidgets, w);
  ASSERT_EQ(created.code, 201);
  EXPECT_FALSE(created.body["spec"].contains("colour"));
  EXPECT_EQ(created.body["spec"]["template"]["anything"]["goes"], true);

  w["metadata"]["name"] = "b";
  const Reply strict = client_->Post(kWidgets + "?fieldValidation=Strict", w);
  EXPECT_EQ(strict.code, 400);
  EXPECT_NE(strict.body["message"].get<std::string>().find("unknown field \"spec.colour\""), std::string::npos);
  const Reply warn = client_->Post(kWidgets + "?fieldValidation=Warn", w);
  EXPECT_EQ(warn.code, 201);
  EXPECT_NE(warn.Header("Warning").find("unknown field"), std::string::npos);
}

TEST_F(ApiServerTest, InjectedFaultsAnswerForTheNextNRequests) {
  Reply r = client_->Post("/emulator/faults",
                          {{"rules", {{{"verb", "create"}, {"resource", "widgets"}, {"status", 500}, {"count", 2}},
                                      {{"verb", "list"}, {"resource", "*"}, {"status", 429}, {"count", 1}}}}});
  ASSERT_EQ(r.code, 200) << r.body.dump();
  EXPECT_EQ(r.body["rules"].size(), 2u);
  EXPECT_EQ(client_->Post(kWidgets, Widget("a", 1)).code, 500);
  const Reply second = client_->Post(kWidgets, Widget("a", 1));
  EXPECT_EQ(second.code, 500);
  EXPECT_EQ(second.body["reason"], "InternalError");
  EXPECT_EQ(client_->Post(kWidgets, Widget("a", 1)).code, 201);

  const Reply throttled = client_->Get(kWidgets);
  EXPECT_EQ(throttled.code, 429);
  EXPECT_EQ(throttled.body["reason"], "TooManyRequests");
  EXPECT_EQ(throttled.Header("Retry-After"), "1");
  EXPECT_EQ(client_->Get(kWidgets).code, 200);

  const json stats = client_->Get("/emulator/stats").body;
  EXPECT_EQ(stats["requests"]["widgets"]["create"], 3);
  EXPECT_EQ(stats["requests"]["widgets"]["list"], 2);
  EXPECT_EQ(stats["faults"]["errors"], 3);

  EXPECT_EQ(client_->Post("/emulator/faults", {{"rules", {{{"verb", "get"}, {"status", 503}}}}}).code, 200);
  EXPECT_EQ(client_->Get(kWidgets + "/a").code, 503);
  EXPECT_EQ(client_->Delete("/emulator/faults").code, 200);
  EXPECT_EQ(client_->Get(kWidgets + "/a").code, 200);
  EXPECT_EQ(client_->Post("/emulator/faults", {{"rules", {{{"verb", "get"}, {"bogus", 1}}}}}).code, 400);
}

TEST_F(ApiServerTest, FaultsFromTheOptionsAndDroppedWatches) {
  ApiServerOptions options;
  options.faults.push_back(*FaultRule::Parse("verb=create,resource=pods,status=500,count=1"));
  options.faults.push_back(*FaultRule::Parse("verb=watch,resource=widgets,dropWatchAfter=2,count=1"));
  Start(options);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}};
  EXPECT_EQ(client_->Post("/api/v1/namespaces/default/pods", pod).code, 500);
  EXPECT_EQ(client_->Post("/api/v1/namespaces/default/pods", pod).code, 201);

  for (const char* name : {"a", "b", "c"}) Create(Widget(name, 1));
  auto dropped = WatchWidgets("");
  EXPECT_TRUE(dropped->Next().has_value());
  EXPECT_TRUE(dropped->Next().has_value());
  EXPECT_TRUE(dropped->Ended()) << "closed after 2 events";
  auto whole = WatchWidgets("");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(whole->Next().has_value()) << i;
}

TEST_F(ApiServerTest, InjectedLatencyDelaysTheAnswer) {
  Create(Widget("a", 1));
  ASSERT_EQ(client_->Post("/emulator/faults", {{"rules", {{{"verb", "get"}, {"latency", "300ms"}, {"count", 1}}}}}).code,
            200);
  const auto start = Clock::now();
  EXPECT_EQ(client_->Get(kWidgets + "/a").code, 200);
  EXPECT_GE(Clock::now() - start, 300ms) << "a lower bound: the answer cannot come before the latency";
  EXPECT_EQ(client_->Get("/emulator/stats").body["faults"]["delayed"], 1);
}

TEST_F(ApiServerTest, GlobalLatencyAppliesToResourceRequests) {
  ApiServerOptions options;
  options.api.latency = 200ms;
  Start(options);
  const auto start = Clock::now();
  EXPECT_EQ(client_->Get(kWidgets).code, 200);
  EXPECT_GE(Clock::now() - start, 200ms);
}

TEST_F(ApiServerTest, DiscoveryDescribesEveryKind) {
  const Reply api = client_->Get("/api");
  EXPECT_EQ(api.body["kind"], "APIVersions");
  EXPECT_EQ(api.body["versions"], json({"v1"}));

  const Reply groups = client_->Get("/apis");
  EXPECT_EQ(groups.body["kind"], "APIGroupList");
  std::set<std::string> names;
  for (const auto& g : groups.body["groups"]) names.insert(g["name"].get<std::string>());
  EXPECT_TRUE(names.count("apiextensions.k8s.io") && names.count("coordination.k8s.io") && names.count("test.star.dev"));

  const Reply group = client_->Get("/apis/test.star.dev");
  EXPECT_EQ(group.body["preferredVersion"]["groupVersion"], "test.star.dev/v1");

  const Reply resources = client_->Get("/apis/test.star.dev/v1");
  EXPECT_EQ(resources.body["kind"], "APIResourceList");
  EXPECT_EQ(resources.body["groupVersion"], "test.star.dev/v1");
  ASSERT_EQ(resources.body["resources"].size(), 2u);
  const json& widgets = resources.body["resources"][0];
  EXPECT_EQ(widgets["name"], "widgets");
  EXPECT_EQ(widgets["singularName"], "widget");
  EXPECT_EQ(widgets["namespaced"], true);
  EXPECT_EQ(widgets["kind"], "Widget");
  EXPECT_EQ(widgets["shortNames"], json({"wd"}));
  EXPECT_EQ(widgets["categories"], json({"all"}));
  EXPECT_EQ(widgets["verbs"].size(), 8u);
  EXPECT_EQ(resources.body["resources"][1]["name"], "widgets/status");

  const Reply core = client_->Get("/api/v1");
  std::set<std::string> core_names;
  for (const auto& r : core.body["resources"]) core_names.insert(r["name"].get<std::string>());
  for (const char* n : {"pods", "pods/status", "services", "events", "namespaces", "configmaps"}) {
    EXPECT_TRUE(core_names.count(n)) << n;
  }
  EXPECT_EQ(client_->Get("/apis/coordination.k8s.io/v1").body["resources"][0]["name"], "leases");
  EXPECT_EQ(client_->Get("/version").body["minor"], "32");
  EXPECT_EQ(client_->Get("/apis/nope.dev/v1").code, 404);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/nopes").code, 404);
}

TEST_F(ApiServerTest, TablesCarryThePrinterColumns) {
  Create(Widget("a", 3));
  client_->Patch(kWidgets + "/a/status", {{"status", {{"phase", "Running"}}}});
  const Reply r = client_->Get(kWidgets, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
  ASSERT_EQ(r.code, 200);
  EXPECT_EQ(r.body["kind"], "Table");
  std::vector<std::string> columns;
  for (const auto& c : r.body["columnDefinitions"]) columns.push_back(c["name"]);
  EXPECT_EQ(columns, (std::vector<std::string>{"Name", "Phase", "Replicas", "Mode", "Age"}));
  ASSERT_EQ(r.body["rows"].size(), 1u);
  const json& cells = r.body["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "a");
  EXPECT_EQ(cells[1], "Running");
  EXPECT_EQ(cells[2], 3);
  EXPECT_EQ(cells[3], "Fast");
  EXPECT_EQ(r.body["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  const Reply full = client_->Get(kWidgets + "/a?includeObject=Object", "application/json;as=Table;v=v1;g=meta.k8s.io");
  EXPECT_EQ(full.body["rows"][0]["object"]["spec"]["replicas"], 3);
}

TEST_F(ApiServerTest, ACrdCreatedThroughTheApiIsServedAndItsDeletionRemovesItsObjects) {
  json crd = json::parse(R"({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
      "metadata": {"name": "gadgets.example.com"},
      "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "gadgets", "kind": "Gadget"},
               "versions": [{"name": "v1", "served": true, "storage": true,
                             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                 "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}})");
  const Reply created = client_->Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  ASSERT_EQ(created.code, 201) << created.body.dump();
  EXPECT_EQ(created.body["status"]["conditions"][1]["type"], "Established");
  const std::string gadgets = "/apis/example.com/v1/gadgets";
  const Reply g = client_->Post(gadgets, {{"metadata", {{"name", "g"}}}, {"spec", {{"size", 2}, {"junk", 1}}}});
  ASSERT_EQ(g.code, 201) << g.body.dump();
  EXPECT_EQ(g.body["kind"], "Gadget");
  EXPECT_FALSE(g.body["spec"].contains("junk"));
  EXPECT_EQ(client_->Post(gadgets, {{"metadata", {{"name", "h"}}}, {"spec", {{"size", "big"}}}}).code, 422);

  EXPECT_EQ(client_->Delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com").code, 200);
  EXPECT_EQ(client_->Get(gadgets).code, 404);
  EXPECT_EQ(client_->Get("/apis/example.com/v1").code, 404);

  crd["metadata"]["name"] = "wrong.example.com";
  EXPECT_EQ(client_->Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).code, 422);
}

TEST_F(ApiServerTest, DeletingANamespaceDeletesWhatIsInIt) {
  ASSERT_EQ(client_->Post("/api/v1/namespaces", {{"metadata", {{"name", "team"}}}}).code, 201);
  ASSERT_EQ(client_->Post("/apis/test.star.dev/v1/namespaces/team/widgets", Widget("a", 1)).code, 201);
  Create(Widget("a", 1));
  EXPECT_EQ(client_->Delete("/api/v1/namespaces/team").code, 200);
  EXPECT_EQ(client_->Get("/apis/test.star.dev/v1/namespaces/team/widgets/a").code, 404);
  EXPECT_EQ(client_->Get(kWidgets + "/a").code, 200) << "other namespaces are untouched";
}

TEST_F(ApiServerTest, PodsStartPendingAndTakeStatusThroughTheSubresource) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}, {"status", {{"phase", "Running"}}}};
  const Reply created = client_->Post("/api/v1/namespaces/default/pods", pod);
  ASSERT_EQ(created.code, 201);
  EXPECT_EQ(created.body["status"]["phase"], "Pending");
  const Reply running = client_->Patch("/api/v1/namespaces/default/pods/p/status", {{"status", {{"phase", "Running"}}}});
  EXPECT_EQ(running.body["status"]["phase"], "Running");
  const Reply strategic = client_->Patch("/api/v1/namespaces/default/pods/p", {{"metadata", {{"labels", {{"a", "b"}}}}}},
                                         "application/strategic-merge-patch+json");
  EXPECT_EQ(strategic.code, 200);
  EXPECT_EQ(strategic.body["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(client_->Post("/api/v1/pods", pod).code, 404) << "a namespaced kind needs a namespace";
}

}  // namespace
}  // namespace star::apiserver
