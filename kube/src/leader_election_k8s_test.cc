// Leader election on a Lease of the real API server (test_env.h): one leader of two,
// hand-over on Stop, takeover of an expired lease, stepping down when the lease is taken or
// the server cannot be reached (through star-faultproxy).
#include <gtest/gtest.h>

#include "test_env.h"
#include "star/kube/leader_election.h"

namespace star::kube {
namespace {

using nlohmann::json;
using testing::ClusterTest;
using testing::WaitFor;
using namespace std::chrono_literals;

struct Candidate {
  Candidate(Client* client, const std::string& identity, const std::string& ns) {
    LeaderElectionOptions o;
    o.ns = ns;
    o.identity = identity;
    o.name = "star-operator-test";
    o.lease_duration = 4s;
    o.renew_period = 1s;
    o.retry_period = 50ms;
    elector = std::make_unique<LeaderElector>(client, o, [this] { ++started; }, [this] { ++stopped; });
  }
  std::atomic<int> started{0}, stopped{0};
  std::unique_ptr<LeaderElector> elector;
};

class LeaderElectionTest : public ClusterTest {
 protected:
  json Lease() {
    auto lease = client_->Get(Leases(), ns_, "star-operator-test");
    return lease.ok() ? *lease : json();
  }
  std::string Holder() {
    const json lease = Lease();
    return lease.is_object() ? lease["spec"].value("holderIdentity", "") : "";
  }
  std::string LeaseRv() {
    const json lease = Lease();
    return lease.is_object() ? lease["metadata"].value("resourceVersion", "") : "";
  }
};

TEST_F(LeaderElectionTest, OfTwoElectorsOnOneLeaseExactlyOneLeads) {
  Candidate a(client_.get(), "a", ns_), b(client_.get(), "b", ns_);
  a.elector->Start();
  b.elector->Start();
  ASSERT_TRUE(WaitFor([&] { return a.elector->leading() || b.elector->leading(); }));
  Candidate& leader = a.elector->leading() ? a : b;
  Candidate& follower = a.elector->leading() ? b : a;
  // Across several renewals: the leader renews, the follower never leads.
  for (int renewal = 0; renewal < 3; ++renewal) {
    const std::string rv = LeaseRv();
    ASSERT_TRUE(WaitFor([&] { return LeaseRv() != rv; })) << "the leader renews";
    EXPECT_TRUE(leader.elector->leading());
    EXPECT_FALSE(follower.elector->leading());
    EXPECT_EQ(Holder(), &leader == &a ? "a" : "b");
  }
  EXPECT_EQ(leader.started, 1);
  EXPECT_EQ(follower.started, 0);
  EXPECT_EQ(leader.stopped, 0);
}

TEST_F(LeaderElectionTest, StoppingTheLeaderReleasesTheLeaseAndTheOtherTakesOver) {
  Candidate a(client_.get(), "a", ns_);
  a.elector->Start();
  ASSERT_TRUE(WaitFor([&] { return a.elector->leading(); }));
  Candidate b(client_.get(), "b", ns_);
  b.elector->Start();
  ASSERT_TRUE(WaitFor([&] { return Lease().is_object(); }));

  a.elector->Stop();
  EXPECT_FALSE(a.elector->leading());
  EXPECT_EQ(a.stopped, 1) << "on_stopped_leading on Stop";
  ASSERT_TRUE(WaitFor([&] { return b.elector->leading(); })) << "a released lease is taken at once";
  EXPECT_EQ(Holder(), "b");
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 1);
  b.elector->Stop();
  EXPECT_EQ(Holder(), "") << "Stop hands the lease back";
}

TEST_F(LeaderElectionTest, AnExpiredLeaseIsTakenOver) {
  // Held by a process that died: it will never renew.
  const json ghost = {{"metadata", {{"name", "star-operator-test"}, {"namespace", ns_}}},
                      {"spec",
                       {{"holderIdentity", "ghost"},
                        {"leaseDurationSeconds", 1},
                        {"renewTime", "2025-01-01T00:00:00.000000Z"},
                        {"leaseTransitions", 3}}}};
  ASSERT_TRUE(client_->Create(Leases(), ns_, ghost).ok());
  Candidate b(client_.get(), "b", ns_);
  b.elector->Start();
  ASSERT_TRUE(WaitFor([&] { return b.elector->leading(); }));
  EXPECT_EQ(Holder(), "b");
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 4);
  EXPECT_EQ(Lease()["spec"]["leaseDurationSeconds"], 4);
  EXPECT_EQ(b.started, 1);
}

TEST_F(LeaderElectionTest, ALeaderWhoseLeaseIsTakenStopsLeading) {
  Candidate a(client_.get(), "a", ns_);
  a.elector->Start();
  ASSERT_TRUE(WaitFor([&] { return a.elector->leading(); }));
  const Status taken = RetryOnConflict([&]() -> Status {
    STAR_ASSIGN_OR_RETURN(json lease, client_->Get(Leases(), ns_, "star-operator-test"));
    lease["spec"]["holderIdentity"] = "intruder";
    lease["spec"]["leaseDurationSeconds"] = 3600;
    return client_->Update(Leases(), ns_, lease).status();
  });
  ASSERT_TRUE(taken.ok()) << taken;
  ASSERT_TRUE(WaitFor([&] { return !a.elector->leading(); }));
  EXPECT_EQ(a.stopped, 1);
  EXPECT_EQ(Holder(), "intruder") << "a does not take a live lease back";
  a.elector->Stop();
  EXPECT_EQ(Holder(), "intruder") << "Stop releases only a lease it holds";
  EXPECT_EQ(a.stopped, 1);
}

TEST_F(LeaderElectionTest, ALeaderCutOffFromTheApiServerStopsLeadingOnce) {
  UseFaultProxy();  // before the elector copies the client's options
  Candidate a(client_.get(), "a", ns_);
  a.elector->Start();
  ASSERT_TRUE(WaitFor([&] { return a.elector->leading(); }));
  AddFault({{"verb", "*"}, {"resource", "leases"}, {"status", 503}});
  ASSERT_TRUE(WaitFor([&] { return !a.elector->leading(); })) << "renewals fail until the renew deadline";
  EXPECT_EQ(a.stopped, 1);
  proxy_->Clear();
  ASSERT_TRUE(WaitFor([&] { return a.elector->leading(); })) << "leads again once its lease is reachable";
  EXPECT_EQ(a.started, 2);
}

}  // namespace
}  // namespace star::kube
