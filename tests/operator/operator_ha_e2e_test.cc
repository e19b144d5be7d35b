// star-operator in high availability, end to end: replicas of the real binary with
// --leader-elect against the real Kubernetes control plane (their coordination.k8s.io Lease
// star-operator in the test's namespace), driven with the real kubectl; and its /metrics,
// /healthz and /readyz endpoint, read over HTTP.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "e2e_util.h"
#include "star/test_support/http.h"
// After gtest: cpprest defines a macro U that breaks gtest's templates.
#include <cpprest/http_client.h>

namespace star::op {
namespace {

using nlohmann::json;
using test_support::ProcessResult;
using e2e::Eventually;
using e2e::FreePort;
using test_support::Get;
using test_support::HttpReply;
using e2e::ReadFile;
using namespace std::chrono_literals;

// The sample value of the first line of Prometheus text that starts with `series` and a
// space (e.g. `star_operator_reconcile_total{result="success"}`).
std::optional<double> Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) {
      try {
        return std::stod(line.substr(series.size() + 1));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

// One star-operator replica: its process, identity, stderr log and probe endpoint.
struct Replica {
  e2e::OperatorProcess process;
  std::string identity;
  std::string log;
  std::string probes;  // "http://127.0.0.1:PORT"

  int Readyz() { return Get(probes, "/readyz").status; }
};

class OperatorHaTest : public e2e::ClusterTest {
 protected:
  void TearDown() override {
    for (Replica* r : {&a_, &b_}) r->process.Stop();
    ClusterTest::TearDown();
  }

  // Starts `r` with short lease timings and its probe endpoint on a free port; true once it
  // serves the endpoint. A port taken meanwhile by someone else is retried with another.
  bool Start(Replica& r, const std::string& identity, bool leader_elect = true) {
    r.identity = identity;
    r.log = dir_.path() + "/" + identity + ".log";
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::string listen = "127.0.0.1:" + std::to_string(FreePort());
      std::vector<std::string> argv = {STAR_OPERATOR_BINARY, "--kubeconfig", kubeconfig_, "--report-listen",
                                       "127.0.0.1:0", "--metrics-listen", listen, "--status-interval", "200ms",
                                       "--restart-backoff", "100ms", "--namespace", ns_};
      if (leader_elect) {
        for (const char* a : {"--leader-elect", "--identity", identity.c_str(), "--lease-duration", "2s",
                              "--renew-period", "1s", "--retry-period", "200ms"}) {
          argv.emplace_back(a);
        }
      }
      if (!r.process.Start(argv, r.log)) return false;
      std::optional<std::string> url = r.process.WaitForLine("metrics ", 60s);
      if (url && *url == "http://" + listen) {
        r.probes = *url;
        return true;
      }
      r.process.Kill();
    }
    return false;
  }

  json Lease() { return GetJson({"get", "lease", "star-operator"}); }
  std::string Holder() {
    json lease = Lease();
    if (!lease.is_object() || !lease.contains("spec")) return "";
    return lease["spec"].value("holderIdentity", "");
  }

  std::string Logs() { return "--- " + a_.identity + ":\n" + ReadFile(a_.log) + "--- " + b_.identity + ":\n" + ReadFile(b_.log); }

  // name -> uid of the job's pods.
  std::map<std::string, std::string> PodUids(const std::string& job) {
    std::map<std::string, std::string> out;
    for (const json& p : Pods(job)) out[p["metadata"]["name"].get<std::string>()] = p["metadata"]["uid"].get<std::string>();
    return out;
  }

  Replica a_, b_;
};

TEST_F(OperatorHaTest, OneOfTwoReplicasLeadsAndTheStandbyTakesOverAKilledLeaderWithoutDuplicatePods) {
  ASSERT_TRUE(Start(a_, "op-a")) << Logs();
  ASSERT_TRUE(Start(b_, "op-b")) << Logs();

  // Exactly one holds the lease, says it is ready and is ready on /readyz.
  ASSERT_TRUE(Eventually([&] { return !Holder().empty(); })) << Logs();
  const std::string holder = Holder();
  ASSERT_TRUE(holder == a_.identity || holder == b_.identity) << holder;
  Replica& leader = holder == a_.identity ? a_ : b_;
  Replica& standby = holder == a_.identity ? b_ : a_;
  ASSERT_TRUE(leader.process.WaitForLine("ready", 30s).has_value()) << Logs();
  EXPECT_TRUE(Eventually([&] { return leader.Readyz() == 200; })) << Logs();
  EXPECT_EQ(Lease()["spec"].value("leaseTransitions", -1), 0);

  // The standby serves (/healthz) but is not ready, and says why.
  EXPECT_EQ(Get(standby.probes, "/healthz").status, 200);
  const HttpReply not_ready = Get(standby.probes, "/readyz");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_NE(not_ready.body.find("not leading"), std::string::npos) << not_ready.body;

  // The leader reconciles.
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("ha1", 3)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ha1").size() == 3; })) << Logs();
  const std::map<std::string, std::string> first = PodUids("ha1");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_FALSE(standby.process.WaitForLine("ready", 0ms).has_value()) << "the standby started reconciling";
  EXPECT_EQ(standby.Readyz(), 503);
  EXPECT_EQ(Holder(), leader.identity);

  // kill -9: the lease is not released; the standby takes it once it has expired.
  leader.process.Kill();
  ASSERT_TRUE(standby.process.WaitForLine("ready", 30s).has_value()) << Logs();
  EXPECT_EQ(Holder(), standby.identity);
  EXPECT_EQ(Lease()["spec"].value("leaseTransitions", -1), 1);
  EXPECT_TRUE(Eventually([&] { return standby.Readyz() == 200; })) << Logs();

  // The new leader drives the first job (only a leader writes status) and a new one.
  for (const auto& [pod, uid] : first) SetPodPhase(pod, "Running");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "ha1"})["status"].value("phase", "") == "Running"; }))
      << Logs();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("ha2", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ha2").size() == 2; })) << Logs();
  EXPECT_EQ(PodUids("ha1"), first) << "the first job's pods were recreated or duplicated";
  EXPECT_EQ(PodUids("ha2").size(), 2u);
}

TEST_F(OperatorHaTest, ALeaderStoppedBySigtermExitsZeroAndReleasesTheLease) {
  ASSERT_TRUE(Start(a_, "op-a")) << Logs();
  ASSERT_TRUE(a_.process.WaitForLine("ready", 30s).has_value()) << Logs();
  ASSERT_EQ(Holder(), a_.identity);

  const int status = a_.process.Stop();
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << "\n" << Logs();
  EXPECT_EQ(WEXITSTATUS(status), 0) << Logs();
  EXPECT_EQ(Holder(), "") << "released: holderIdentity empty";

  // A free lease is taken at once: the next replica leads.
  ASSERT_TRUE(Start(b_, "op-b")) << Logs();
  ASSERT_TRUE(b_.process.WaitForLine("ready", 30s).has_value()) << Logs();
  EXPECT_EQ(Holder(), b_.identity);
}

TEST_F(OperatorHaTest, ALeaderThatSeesAnotherHolderExitsOne) {
  ASSERT_TRUE(Start(a_, "op-a")) << Logs();
  ASSERT_TRUE(a_.process.WaitForLine("ready", 30s).has_value()) << Logs();
  json patch = {{"spec", {{"holderIdentity", "someone-else"}}}};
  ProcessResult r = Kubectl({"patch", "lease", "star-operator", "--type=merge", "-p", patch.dump()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::optional<int> status = a_.process.WaitExit(30s);
  ASSERT_TRUE(status.has_value()) << Logs();
  ASSERT_TRUE(WIFEXITED(*status)) << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  EXPECT_NE(ReadFile(a_.log).find("lost the leader lease"), std::string::npos) << Logs();
  EXPECT_EQ(Holder(), "someone-else") << "a leader that lost the lease does not release it";
}

TEST_F(OperatorHaTest, MetricsCountReconcilesAndTheProbesAnswer) {
  ASSERT_TRUE(Start(a_, "op-a", /*leader_elect=*/false)) << Logs();
  ASSERT_TRUE(a_.process.WaitForLine("ready", 30s).has_value()) << Logs();
  EXPECT_EQ(Get(a_.probes, "/healthz").status, 200);
  EXPECT_TRUE(Eventually([&] { return a_.Readyz() == 200; })) << Logs();
  EXPECT_EQ(Get(a_.probes, "/nowhere").status, 404);

  // Before any job: the result series exist, at zero.
  HttpReply m = Get(a_.probes, "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u) << m.content_type;
  EXPECT_NE(m.body.find("# TYPE star_operator_reconcile_total counter"), std::string::npos) << m.body;
  EXPECT_EQ(Sample(m.body, "star_operator_reconcile_total{result=\"error\"}"), 0.0) << m.body;

  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("mx", 2)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("mx").size() == 2; })) << Logs();
  for (const json& p : Pods("mx")) SetPodPhase(p["metadata"]["name"].get<std::string>(), "Running");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "mx"})["status"].value("phase", "") == "Running"; }))
      << Logs();

  // Every reconcile is counted under one result and timed once.
  double total = 0, count = 0;
  ASSERT_TRUE(Eventually([&] {
    m = Get(a_.probes, "/metrics");
    total = 0;
    for (const char* result : {"success", "requeue", "error"}) {
      total += Sample(m.body, std::string("star_operator_reconcile_total{result=\"") + result + "\"}").value_or(-1);
    }
    count = Sample(m.body, "star_operator_reconcile_duration_seconds_count").value_or(-1);
    return total > 0 && Sample(m.body, "star_operator_reconcile_total{result=\"success\"}").value_or(0) > 0;
  })) << m.body;
  EXPECT_EQ(count, total) << m.body;
  EXPECT_NE(m.body.find("# TYPE star_operator_reconcile_duration_seconds histogram"), std::string::npos) << m.body;

  const std::string promtool = STAR_PROMTOOL;
  if (!promtool.empty()) {
    ProcessResult check = test_support::RunProcess({promtool, "check", "metrics"}, m.body, 60s);
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err << m.body;
  }
}

}  // namespace
}  // namespace star::op
