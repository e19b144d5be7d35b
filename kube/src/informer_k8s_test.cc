// The informer against the emulator: sync, the cache following changes, re-lists after a
// dropped watch and after 410 Gone, and convergence (events synthesised for what it missed).
#include "star/kube/informer.h"

#include <gtest/gtest.h>

#include <future>
#include <set>

#include "test_env.h"

namespace star::kube {
namespace {

using nlohmann::json;
using testing::EmulatorTest;
using testing::WaitFor;
using namespace std::chrono_literals;

struct Seen {
  std::string type, key;
  json object;
};

class InformerTest : public EmulatorTest {
 protected:
  void TearDown() override {
    if (informer_) informer_->Stop();
    informer_.reset();
    EmulatorTest::TearDown();
  }

  void StartInformer(InformerOptions options = {}) {
    options.ns = "default";
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
    auto list = client_->List(Pods(), "default");
    if (!list.ok()) return false;
    std::map<std::string, std::string> server, cache;
    for (const auto& item : (*list)["items"]) server[KeyOf(item)] = item["metadata"]["resourceVersion"];
    for (const auto& item : informer_->List()) cache[KeyOf(item)] = item["metadata"]["resourceVersion"];
    return server == cache;
  }

  std::unique_ptr<Informer> informer_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

TEST(KeyOfTest, NamespacedAndClusterScoped) {
  EXPECT_EQ(KeyOf({{"metadata", {{"namespace", "a"}, {"name", "b"}}}}), "a/b");
  EXPECT_EQ(KeyOf({{"metadata", {{"name", "node-1"}}}}), "node-1");
  EXPECT_EQ(KeyOf(json::object()), "");
}

TEST_F(InformerTest, SyncsTheFirstListIntoTheCache) {
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("a")).ok());
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("b")).ok());
  ASSERT_TRUE(client_->Create(Pods(), "kube-system", Pod("elsewhere", "kube-system")).ok());
  StartInformer();
  EXPECT_TRUE(informer_->synced());
  EXPECT_EQ(informer_->lists(), 1);
  EXPECT_EQ(informer_->List().size(), 2u) << "only its namespace";
  auto a = informer_->Get("default/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ((*a)["kind"], "Pod");
  EXPECT_FALSE(informer_->Get("kube-system/elsewhere").has_value());
  EXPECT_TRUE(WaitFor([&] { return seen().size() == 2; }));
  EXPECT_EQ(TypesFor("default/a"), std::vector<std::string>{"ADDED"});
}

TEST_F(InformerTest, TheCacheFollowsCreatesUpdatesAndDeletes) {
  StartInformer();
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("c")).ok());
  ASSERT_TRUE(WaitFor([&] { return informer_->Get("default/c").has_value(); }));
  ASSERT_TRUE(client_->MergePatch(Pods(), "default", "c", {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto c = informer_->Get("default/c");
    return c && (*c)["metadata"]["labels"].value("v", "") == "2";
  }));
  ASSERT_TRUE(client_->Delete(Pods(), "default", "c").ok());
  ASSERT_TRUE(WaitFor([&] { return !informer_->Get("default/c").has_value(); }));
  EXPECT_TRUE(WaitFor([&] { return TypesFor("default/c").size() == 3; }));
  EXPECT_EQ(TypesFor("default/c"), (std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"}));
  EXPECT_EQ(informer_->lists(), 1) << "no re-list without a reason";
}

TEST_F(InformerTest, ADroppedWatchIsFollowedByAReList) {
  AddFault("verb=watch,resource=pods,dropWatchAfter=1,count=1");
  StartInformer();
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("x")).ok());  // the one event before the drop
  EXPECT_TRUE(WaitFor([&] { return informer_->lists() >= 2; }));
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("y")).ok());
  EXPECT_TRUE(WaitFor([&] { return informer_->Get("default/y").has_value(); }));
  EXPECT_TRUE(WaitFor([&] { return Converged(); }));
}

TEST_F(InformerTest, GoneIsFollowedByAReList) {
  AddFault("verb=watch,resource=pods,status=410,count=1");
  StartInformer();
  EXPECT_TRUE(WaitFor([&] { return informer_->lists() >= 2; }));
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("z")).ok());
  EXPECT_TRUE(WaitFor([&] { return informer_->Get("default/z").has_value(); }));
}

TEST_F(InformerTest, AfterAnOutageTheCacheConvergesWithSynthesisedEvents) {
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("a")).ok());
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("b")).ok());
  InformerOptions options;
  options.watch_timeout = 1s;  // the open watch ends soon after the outage begins
  StartInformer(options);

  // The outage: lists and watches fail. Wait until the informer has given up its watch and
  // failed to re-list (its first list was the sync).
  AddFault("verb=watch,resource=pods,status=500");
  AddFault("verb=list,resource=pods,status=500");
  ASSERT_TRUE(WaitFor([&] {
    return server_->api().Stats()["requests"]["pods"].value("list", 0) >= 2 && ActiveWatches() == 0;
  }));

  // Changes it cannot see.
  ASSERT_TRUE(client_->Delete(Pods(), "default", "a").ok());
  ASSERT_TRUE(client_->MergePatch(Pods(), "default", "b", {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("c")).ok());
  const size_t mark = seen().size();
  const int lists = informer_->lists();
  EXPECT_TRUE(informer_->Get("default/a").has_value()) << "the informer cannot have seen the delete";

  server_->api().faults().Clear();
  ASSERT_TRUE(WaitFor([&] { return informer_->lists() > lists && Converged(); }));
  ASSERT_TRUE(WaitFor([&] { return seen().size() >= mark + 3; }));
  EXPECT_EQ(TypesFor("default/a", mark), std::vector<std::string>{"DELETED"});
  EXPECT_EQ(TypesFor("default/b", mark), std::vector<std::string>{"MODIFIED"});
  EXPECT_EQ(TypesFor("default/c", mark), std::vector<std::string>{"ADDED"});
  for (const auto& s : seen()) {
    if (s.key == "default/a" && s.type == "DELETED") {
      EXPECT_EQ(s.object["metadata"]["name"], "a") << "a DELETED carries the last known object";
    }
  }
}

TEST_F(InformerTest, ResyncReListsWithoutErrorsAndReportsNoChanges) {
  ASSERT_TRUE(client_->Create(Pods(), "default", Pod("a")).ok());
  InformerOptions options;
  options.resync = 1s;
  StartInformer(options);
  EXPECT_TRUE(WaitFor([&] { return informer_->lists() >= 3; }));
  EXPECT_EQ(TypesFor("default/a"), std::vector<std::string>{"ADDED"}) << "nothing changed, nothing reported";
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
  AddFault("verb=list,resource=pods,status=403");
  informer_ = std::make_unique<Informer>(client_.get(), Pods(), InformerOptions{}, nullptr);
  informer_->Start();
  EXPECT_FALSE(informer_->WaitForSync(300ms));
  EXPECT_EQ(informer_->lists(), 0);
}

}  // namespace
}  // namespace star::kube
