// The informer against the real API server, through star-faultproxy (test_env.h): sync, the
// cache following changes, re-lists after a dropped watch and after 410 Gone, and
// convergence (events synthesised for what it missed).
#include "star/kube/informer.h"

#include <gtest/gtest.h>

#include <future>
#include <set>

#include "test_env.h"

namespace star::kube {
namespace {

using nlohmann::json;
using testing::InformerClusterTest;
using testing::WaitFor;
using namespace std::chrono_literals;

struct Seen {
  std::string type, key;
  json object;
};

class InformerTest : public InformerClusterTest {
 protected:

  void StartInformer(InformerOptions options = {}) {
    options.ns = ns_;
    if (options.relist_backoff == InformerOptions().relist_backoff) options.relist_backoff = 10ms;
    informer_ = std::make_unique<Informer>(client_.get(), Pods(), options, [this](const std::string& type, const json& o) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back({type, KeyOf(o), o});
    });
    informer_->Start();
    ASSERT_TRUE(informer_->WaitForSync(20s));
  }

  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  std::vector<std::string> TypesFor(const std::string& key, size_t from = 0) {
    std::vector<std::string> types;
    const auto all = seen();
    for (size_t i = from; i < all.size(); ++i) {
      if (all[i].key == key) types.push_back(all[i].type);
    }
    return types;
  }
  // The cache equals the server's list (keys and resourceVersions).
  bool Converged() {
    auto list = client_->List(Pods(), ns_);
    if (!list.ok()) return false;
    std::map<std::string, std::string> server, cache;
    for (const auto& item : (*list)["items"]) server[KeyOf(item)] = item["metadata"]["resourceVersion"];
    for (const auto& item : informer_->List()) cache[KeyOf(item)] = item["metadata"]["resourceVersion"];
    return server == cache;
  }

  std::mutex mu_;
  std::vector<Seen> seen_;
};

TEST_F(InformerTest, SyncsTheFirstListIntoTheCache) {
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("b")).ok());
  const std::string elsewhere = MakeNamespace("kube-test-b");
  ASSERT_TRUE(client_->Create(Pods(), elsewhere, Pod("elsewhere", elsewhere)).ok());
  StartInformer();
  EXPECT_TRUE(informer_->synced());
  EXPECT_EQ(informer_->lists(), 1);
  EXPECT_EQ(informer_->List().size(), 2u) << "only its namespace";
  auto a = informer_->Get(Key("a"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ((*a)["kind"], "Pod");
  EXPECT_FALSE(informer_->Get(elsewhere + "/elsewhere").has_value());
  EXPECT_TRUE(WaitFor([&] { return seen().size() == 2; }));
  EXPECT_EQ(TypesFor(Key("a")), std::vector<std::string>{"ADDED"});
}

TEST_F(InformerTest, TheCacheFollowsCreatesUpdatesAndDeletes) {
  StartInformer();
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("c")).ok());
  ASSERT_TRUE(WaitFor([&] { return informer_->Get(Key("c")).has_value(); }));
  ASSERT_TRUE(client_->MergePatch(Pods(), ns_, "c", {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto c = informer_->Get(Key("c"));
    return c && (*c)["metadata"]["labels"].value("v", "") == "2";
  }));
  ASSERT_TRUE(client_->Delete(Pods(), ns_, "c").ok());
  ASSERT_TRUE(WaitFor([&] { return !informer_->Get(Key("c")).has_value(); }));
  // The server may write the pod more than once on the way out (a deletion timestamp).
  EXPECT_TRUE(WaitFor([&] { return !TypesFor(Key("c")).empty() && TypesFor(Key("c")).back() == "DELETED"; }));
  const std::vector<std::string> types = TypesFor(Key("c"));
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types.front(), "ADDED");
  for (size_t i = 1; i + 1 < types.size(); ++i) EXPECT_EQ(types[i], "MODIFIED") << i;
  EXPECT_EQ(informer_->lists(), 1) << "no re-list without a reason";
}

TEST_F(InformerTest, ADroppedWatchIsFollowedByAReList) {
  AddFault({{"verb", "watch"}, {"resource", "pods"}, {"dropWatchAfterEvents", 1}, {"count", 1}});
  StartInformer();
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("x")).ok());  // the one event before the drop
  EXPECT_TRUE(WaitFor([&] { return informer_->lists() >= 2; }));
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("y")).ok());
  EXPECT_TRUE(WaitFor([&] { return informer_->Get(Key("y")).has_value(); }));
  EXPECT_TRUE(WaitFor([&] { return Converged(); }));
}

TEST_F(InformerTest, GoneIsFollowedByAReList) {
  AddFault({{"verb", "watch"}, {"resource", "pods"}, {"status", 410}, {"count", 1}});
  StartInformer();
  EXPECT_TRUE(WaitFor([&] { return informer_->lists() >= 2; }));
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("z")).ok());
  EXPECT_TRUE(WaitFor([&] { return informer_->Get(Key("z")).has_value(); }));
}

TEST_F(InformerTest, AfterAnOutageTheCacheConvergesWithSynthesisedEvents) {
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("b")).ok());
  InformerOptions options;
  options.watch_timeout = 1s;  // the open watch ends soon after the outage begins
  StartInformer(options);

  // The outage: lists and watches fail. Wait until the informer has given up its watch and
  // failed to re-list (its first list was the sync).
  AddFault({{"verb", "watch"}, {"resource", "pods"}, {"status", 500}});
  AddFault({{"verb", "list"}, {"resource", "pods"}, {"status", 500}});
  ASSERT_TRUE(WaitFor([&] { return Requests("pods", "list") >= 2 && ActiveWatches() == 0; }));

  // Changes it cannot see.
  ASSERT_TRUE(client_->Delete(Pods(), ns_, "a").ok());
  ASSERT_TRUE(client_->MergePatch(Pods(), ns_, "b", {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("c")).ok());
  const size_t mark = seen().size();
  const int lists = informer_->lists();
  EXPECT_TRUE(informer_->Get(Key("a")).has_value()) << "the informer cannot have seen the delete";

  proxy_->Clear();
  ASSERT_TRUE(WaitFor([&] { return informer_->lists() > lists && Converged(); }));
  ASSERT_TRUE(WaitFor([&] { return seen().size() >= mark + 3; }));
  EXPECT_EQ(TypesFor(Key("a"), mark), std::vector<std::string>{"DELETED"});
  EXPECT_EQ(TypesFor(Key("b"), mark), std::vector<std::string>{"MODIFIED"});
  EXPECT_EQ(TypesFor(Key("c"), mark), std::vector<std::string>{"ADDED"});
  for (const auto& s : seen()) {
    if (s.key == Key("a") && s.type == "DELETED") {
      EXPECT_EQ(s.object["metadata"]["name"], "a") << "a DELETED carries the last known object";
    }
  }
}

TEST_F(InformerTest, ListsInPagesOfPageSize) {
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(client_->Create(Pods(), ns_, Pod(name)).ok());
  InformerOptions options;
  options.page_size = 2;
  StartInformer(options);
  EXPECT_EQ(informer_->List().size(), 3u);
  EXPECT_EQ(informer_->lists(), 1);
  EXPECT_EQ(Requests("pods", "list"), 2) << "two pages: 2 pods, then 1";
  EXPECT_TRUE(Converged());
}

TEST_F(InformerTest, TheTransformShapesWhatIsCachedAndHandedOut) {
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  InformerOptions options;
  options.transform = [](json* pod) {
    (*pod)["metadata"].erase("managedFields");
    pod->erase("spec");
  };
  StartInformer(options);
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("b")).ok());
  ASSERT_TRUE(WaitFor([&] { return informer_->Get(Key("b")).has_value(); }));
  for (const char* name : {"a", "b"}) {
    const std::optional<json> cached = informer_->Get(Key(name));
    ASSERT_TRUE(cached.has_value()) << name;
    EXPECT_FALSE(cached->contains("spec")) << name << " (from the " << (name[0] == 'a' ? "list" : "watch") << ")";
    EXPECT_FALSE((*cached)["metadata"].contains("managedFields")) << name;
    EXPECT_EQ((*cached)["metadata"]["labels"]["app"], "star") << "the rest is kept";
  }
  for (const Seen& s : seen()) EXPECT_FALSE(s.object.contains("spec")) << s.type << " " << s.key;
}

TEST_F(InformerTest, ResyncReListsWithoutErrorsAndReportsNoChanges) {
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  InformerOptions options;
  options.resync = 1s;
  StartInformer(options);
  EXPECT_TRUE(WaitFor([&] { return informer_->lists() >= 3; }));
  EXPECT_EQ(TypesFor(Key("a")), std::vector<std::string>{"ADDED"}) << "nothing changed, nothing reported";
}

TEST_F(InformerTest, StopEndsTheInformerWhileItWatches) {
  StartInformer();
  ASSERT_TRUE(WaitFor([&] { return ActiveWatches() == 1; }));
  auto stopped = std::async(std::launch::async, [&] { informer_->Stop(); });
  EXPECT_EQ(stopped.wait_for(10s), std::future_status::ready);
  stopped.wait();
  EXPECT_TRUE(informer_->synced()) << "the cache stays readable";
}

TEST_F(InformerTest, WaitForSyncTimesOutWhileTheServerCannotList) {
  AddFault({{"verb", "list"}, {"resource", "pods"}, {"status", 403}});
  informer_ = std::make_unique<Informer>(client_.get(), Pods(), InformerOptions{}, nullptr);
  informer_->Start();
  EXPECT_FALSE(informer_->WaitForSync(300ms));
  EXPECT_EQ(informer_->lists(), 0);
}

}  // namespace
}  // namespace star::kube
