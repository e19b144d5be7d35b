// The informer's field selector, its report of each list's outcome (on_list), and synced()
// telling "the object does not exist" from "nothing known yet".
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "star/kube/informer.h"
#include "test_env.h"

namespace star::kube {
namespace {

using nlohmann::json;
using testing::InformerClusterTest;
using testing::WaitFor;
using namespace std::chrono_literals;

// What on_list said, and whether the informer was synced when it said it.
struct Outcome {
  Status status;
  bool synced = false;
};

class InformerOptionsTest : public InformerClusterTest {
 protected:

  // Starts an informer on ns_'s pods, recording events and outcomes.
  void Start(InformerOptions options) {
    options.ns = ns_;
    options.relist_backoff = 10ms;
    options.on_list = [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_.push_back({s, informer_->synced()});
    };
    informer_ = std::make_unique<Informer>(client_.get(), Pods(), options, [this](const std::string& type, const json& o) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(type + " " + KeyOf(o));
    });
    informer_->Start();
  }
  std::vector<Outcome> outcomes() {
    std::lock_guard<std::mutex> lock(mu_);
    return outcomes_;
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  bool Saw(const std::string& event) {
    for (const std::string& e : events()) {
      if (e == event) return true;
    }
    return false;
  }
  // An outcome after the first `from` that is an error.
  bool ErrorAfter(size_t from) {
    const auto all = outcomes();
    for (size_t i = from; i < all.size(); ++i) {
      if (!all[i].status.ok()) return true;
    }
    return false;
  }

  std::mutex mu_;
  std::vector<Outcome> outcomes_;
  std::vector<std::string> events_;
};

TEST_F(InformerOptionsTest, AFieldSelectorKeepsOnlyTheMatchingObjectOnListAndWatch) {
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("b")).ok());
  InformerOptions options;
  options.field_selector = "metadata.name=a";
  Start(options);
  ASSERT_TRUE(informer_->WaitForSync(20s));
  ASSERT_EQ(informer_->List().size(), 1u);
  EXPECT_TRUE(informer_->Get(Key("a")).has_value());

  // b changes first, then a: the watch delivers in order, so once a's change is seen any
  // change of b it were sent would have been seen too.
  const json label = {{"metadata", {{"labels", {{"v", "2"}}}}}};
  ASSERT_TRUE(client_->MergePatch(Pods(), ns_, "b", label).ok());
  ASSERT_TRUE(client_->MergePatch(Pods(), ns_, "a", label).ok());
  ASSERT_TRUE(WaitFor([&] { return Saw("MODIFIED " + Key("a")); }));
  EXPECT_EQ(events(), (std::vector<std::string>{"ADDED " + Key("a"), "MODIFIED " + Key("a")}));
  EXPECT_FALSE(informer_->Get(Key("b")).has_value());
}

TEST_F(InformerOptionsTest, OnListReportsAFailedListAndThenTheSyncingOne) {
  AddFault({{"verb", "list"}, {"resource", "pods"}, {"status", 403}, {"count", 1}});
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  Start({});
  ASSERT_TRUE(informer_->WaitForSync(20s));
  ASSERT_TRUE(WaitFor([&] { return outcomes().size() >= 2; }));
  const auto all = outcomes();
  EXPECT_EQ(all[0].status.code(), StatusCode::kFailedPrecondition) << all[0].status;
  EXPECT_FALSE(all[0].synced);
  EXPECT_TRUE(all[1].status.ok()) << all[1].status;
  EXPECT_TRUE(all[1].synced) << "OK is reported once the list is in the cache";
  EXPECT_TRUE(Saw("ADDED " + Key("a"))) << "and after its events were handed out";
}

TEST_F(InformerOptionsTest, SyncedTellsAnAbsentObjectFromNothingKnown) {
  AddFault({{"verb", "list"}, {"resource", "pods"}, {"status", 403}});
  Start({});
  ASSERT_TRUE(WaitFor([&] { return ErrorAfter(0); }));
  EXPECT_FALSE(informer_->synced()) << "nothing known yet";
  EXPECT_FALSE(informer_->Get(Key("a")).has_value());

  proxy_->Clear();
  ASSERT_TRUE(informer_->WaitForSync(20s));
  EXPECT_FALSE(informer_->Get(Key("a")).has_value()) << "now known not to exist";
  EXPECT_TRUE(informer_->List().empty());
}

TEST_F(InformerOptionsTest, ListErrorsAfterTheSyncKeepTheCacheAndSynced) {
  ASSERT_TRUE(client_->Create(Pods(), ns_, Pod("a")).ok());
  InformerOptions options;
  options.watch_timeout = 1s;  // the open watch ends soon after the outage begins
  Start(options);
  ASSERT_TRUE(informer_->WaitForSync(20s));
  const size_t synced_at = outcomes().size();

  AddFault({{"verb", "watch"}, {"resource", "pods"}, {"status", 500}});
  AddFault({{"verb", "list"}, {"resource", "pods"}, {"status", 403}});
  ASSERT_TRUE(WaitFor([&] { return ErrorAfter(synced_at); }));
  EXPECT_TRUE(informer_->synced());
  EXPECT_TRUE(informer_->Get(Key("a")).has_value()) << "the last list stays in the cache";
}

}  // namespace
}  // namespace star::kube
