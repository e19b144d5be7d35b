// StagedCollective: bulk collectives run on the device communicator through the staging,
// messages on the host one; Split keeps both; mismatched communicators are refused.
#include "star/shim/staged_collective.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "star/shim/local_collective.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;

// Counts the operations that reach the communicator it wraps.
class Counting final : public Collective {
 public:
  struct Counts {
    std::atomic<int> bulk{0}, messages{0};
  };
  Counting(std::unique_ptr<Collective> inner, Counts* counts) : inner_(std::move(inner)), counts_(counts) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status AllReduceSum(float* d, size_t n) override { return ++counts_->bulk, inner_->AllReduceSum(d, n); }
  Status Broadcast(float* d, size_t n, int root) override { return ++counts_->bulk, inner_->Broadcast(d, n, root); }
  Status Send(const float* d, size_t n, int p, uint32_t t) override {
    return ++counts_->messages, inner_->Send(d, n, p, t);
  }
  Status Recv(float* d, size_t n, int p, uint32_t t) override { return ++counts_->messages, inner_->Recv(d, n, p, t); }
  StatusOr<int> RecvFromAny(float* d, size_t n, const std::vector<int>& ps, uint32_t t) override {
    return ++counts_->messages, inner_->RecvFromAny(d, n, ps, t);
  }
  Status Barrier() override { return ++counts_->messages, inner_->Barrier(); }
  StatusOr<std::unique_ptr<Collective>> Split(const std::vector<int>& members, const std::string& name) override {
    STAR_ASSIGN_OR_RETURN(auto inner, inner_->Split(members, name));
    return std::unique_ptr<Collective>(new Counting(std::move(inner), counts_));
  }

 private:
  std::unique_ptr<Collective> inner_;
  Counts* counts_;
};

// Staging in host memory that counts the bytes it copies each way.
class CountingStaging final : public DeviceStaging {
 public:
  StatusOr<float*> Reserve(size_t count) override { return inner_->Reserve(count); }
  Status ToDevice(float* d, const float* h, size_t n) override { return to_device += n, inner_->ToDevice(d, h, n); }
  Status ToHost(float* h, const float* d, size_t n) override { return to_host += n, inner_->ToHost(h, d, n); }
  std::atomic<size_t> to_device{0}, to_host{0};

 private:
  std::unique_ptr<DeviceStaging> inner_ = NewHostStaging();
};

class StagedCollectiveTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 3;
  void SetUp() override {
    auto host = NewLocalGroup(kRanks, milliseconds(10000));
    auto device = NewLocalGroup(kRanks, milliseconds(10000));
    for (int r = 0; r < kRanks; ++r) {
      staging_.push_back(std::make_shared<CountingStaging>());
      auto c = NewStagedCollective(std::make_unique<Counting>(std::move(host[r]), &host_counts_),
                                   std::make_unique<Counting>(std::move(device[r]), &device_counts_), staging_[r]);
      ASSERT_TRUE(c.ok()) << c.status();
      group_.push_back(std::move(*c));
    }
  }
  void Run(const std::function<void(Collective&)>& body) {
    std::vector<std::thread> threads;
    for (auto& c : group_) threads.emplace_back([&body, &c] { body(*c); });
    for (auto& t : threads) t.join();
  }

  Counting::Counts host_counts_, device_counts_;
  std::vector<std::shared_ptr<CountingStaging>> staging_;
  std::vector<std::unique_ptr<Collective>> group_;
};

TEST_F(StagedCollectiveTest, AllReducesAndBroadcastsRunOnTheDeviceThroughTheStaging) {
  Run([](Collective& c) {
    std::vector<float> data(100, static_cast<float>(c.rank() + 1));
    ASSERT_TRUE(c.AllReduceSum(data.data(), data.size()).ok());
    EXPECT_EQ(data, std::vector<float>(100, 6.0f));
    std::vector<float> from_root(10, c.rank() == 1 ? 9.0f : 0.0f);
    ASSERT_TRUE(c.Broadcast(from_root.data(), from_root.size(), 1).ok());
    EXPECT_EQ(from_root, std::vector<float>(10, 9.0f));
  });
  EXPECT_EQ(device_counts_.bulk, 2 * kRanks);
  EXPECT_EQ(host_counts_.bulk, 0);
  for (const auto& s : staging_) {
    EXPECT_EQ(s->to_device, 110u);
    EXPECT_EQ(s->to_host, 110u);
  }
}

TEST_F(StagedCollectiveTest, MessagesAndRecvFromAnyStayOnTheHost) {
  Run([](Collective& c) {
    std::vector<float> v(4, static_cast<float>(c.rank()));
    if (c.rank() == 0) {
      for (int i = 0; i < 2; ++i) {
        auto from = c.RecvFromAny(v.data(), v.size(), {1, 2}, 7);
        ASSERT_TRUE(from.ok()) << from.status();
        EXPECT_EQ(v[0], static_cast<float>(*from));
      }
    } else {
      ASSERT_TRUE(c.Send(v.data(), v.size(), 0, 7).ok());
    }
    ASSERT_TRUE(c.Barrier().ok());
  });
  EXPECT_EQ(device_counts_.messages, 0);
  EXPECT_EQ(host_counts_.messages, 2 + 2 + kRanks);
  for (const auto& s : staging_) EXPECT_EQ(s->to_device, 0u);
}

TEST_F(StagedCollectiveTest, ASplitStagesItsAllReducesToo) {
  Run([](Collective& c) {
    if (c.rank() == 2) return;
    auto pair = c.Split({0, 1}, "pair");
    ASSERT_TRUE(pair.ok()) << pair.status();
    EXPECT_EQ((*pair)->size(), 2);
    std::vector<float> data(8, static_cast<float>(c.rank() + 1));
    ASSERT_TRUE((*pair)->AllReduceSum(data.data(), data.size()).ok());
    EXPECT_EQ(data, std::vector<float>(8, 3.0f));
  });
  EXPECT_EQ(device_counts_.bulk, 2);
  EXPECT_EQ(staging_[0]->to_device, 8u);
  EXPECT_EQ(staging_[2]->to_device, 0u);
}

TEST(StagedCollective, CommunicatorsOfDifferentShapesAreRefused) {
  auto host = NewLocalGroup(2, milliseconds(1000));
  auto device = NewLocalGroup(3, milliseconds(1000));
  auto c = NewStagedCollective(std::move(host[0]), std::move(device[0]), NewHostStaging());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("rank 0 of 2"), std::string::npos) << c.status();
  auto missing = NewStagedCollective(std::move(host[1]), nullptr, NewHostStaging());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
}

TEST(StagedCollective, ADeadDevicePeerFailsTheAllReduceNotHangs) {
  auto host = NewLocalGroup(2, milliseconds(2000));
  auto device = NewLocalGroup(2, milliseconds(2000));
  auto c = NewStagedCollective(std::move(host[0]), std::move(device[0]), NewHostStaging());
  ASSERT_TRUE(c.ok());
  device[1].reset();  // the peer's device communicator is gone
  std::vector<float> data(4, 1.0f);
  const Status s = (*c)->AllReduceSum(data.data(), data.size());
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) << s;
}

}  // namespace
}  // namespace star::shim
