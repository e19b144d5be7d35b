// Test support for the kube tests: the real cluster (star/test_support/kube_cluster.h)
// and setting an environment variable for a scope.
#pragma once

#include <stdlib.h>

#include <memory>
#include <optional>
#include <string>

#include "star/kube/informer.h"
#include "star/test_support/kube_cluster.h"
#include "star/test_support/temp_dir.h"

namespace star::kube::testing {

using ClusterTest = star::test_support::KubeClusterTest;
using star::test_support::Namespaces;
using star::test_support::ServiceAccounts;
using star::test_support::TempDir;
using star::test_support::WaitFor;

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

// A test of an Informer (informer_, stopped after the test) through star-faultproxy, from
// the start: the informer keeps the client it was given.
class InformerClusterTest : public ClusterTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClusterTest::SetUp());
    if (!IsSkipped()) UseFaultProxy();
  }
  void TearDown() override {
    if (informer_) informer_->Stop();
    informer_.reset();
    ClusterTest::TearDown();
  }

  std::unique_ptr<Informer> informer_;
};

}  // namespace star::kube::testing
