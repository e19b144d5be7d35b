// Test support for the kube tests: the API emulator in-process with the CRDs, a client to
// it, a temporary directory, and waiting on a condition with a deadline.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "apiserver/server.h"
#include "star/kube/client.h"
#include "star/test_support/temp_dir.h"

namespace star::kube::testing {

using namespace std::chrono_literals;

// Polls `condition` until it holds or `timeout` passes; true if it held.
inline bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

using TempDir = star::test_support::TempDir;

// Sets (or unsets, with nullptr) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The emulator with the project's CRDs and a client to it.
class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override { StartEmulator({}); }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  // Fast retries: tests of the retry policy set their own.
  virtual ClientOptions Options() {
    ClientOptions o;
    o.server = server_->url();
    o.token = "t";
    o.initial_backoff = 10ms;
    o.max_retries = 3;
    return o;
  }

  void StartEmulator(apiserver::ApiServerOptions options) {
    client_.reset();
    server_.reset();
    options.crds_dir = STAR_CRDS_DIR;
    server_ = std::make_unique<apiserver::ApiServer>(std::move(options));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    auto client = Client::Create(Options());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  void AddFault(const std::string& spec) {
    auto rule = apiserver::FaultRule::Parse(spec);
    ASSERT_TRUE(rule.ok()) << rule.status();
    server_->api().faults().Add(*rule);
  }

  int ActiveWatches() { return server_->api().Stats()["activeWatches"].get<int>(); }

  static nlohmann::json Pod(const std::string& name, const std::string& ns = "default") {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "star"}}}}},
            {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  }

  static nlohmann::json Job(const std::string& name, int replicas = 2) {
    return {{"apiVersion", "star.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"architecture", "AllReduce"},
              {"workers",
               {{"replicas", replicas},
                {"template", {{"spec", {{"containers", {{{"name", "trainer"}, {"image", "star/fmnist"}}}}}}}}}},
              {"training", {{"globalBatchSize", 256}, {"targetAccuracy", 0.85}}}}}};
  }

  std::unique_ptr<apiserver::ApiServer> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace star::kube::testing
