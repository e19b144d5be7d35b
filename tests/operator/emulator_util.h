// The API emulator as the end-to-end tests' API server: run in-process, so that a test can
// inject faults (slow responses, server errors, throttling, dropped watches), which the
// real API server cannot do. Only the fault-injection tests still use it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "server.h"
#include "test_process.h"

namespace star::op::e2e {

// The API emulator (with the CRDs of STAR_CRDS_DIR) and kubectl (STAR_KUBECTL) against it,
// in a temporary directory. Pods do not run in the emulator: SetPodPhase plays kubelet.
class EmulatorTest : public KubectlTest {
 protected:
  void SetUp() override {
    apiserver::ApiServerOptions o = ServerOptions();
    o.crds_dir = STAR_CRDS_DIR;
    server_ = std::make_unique<apiserver::ApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    kubectl_ = STAR_KUBECTL;
    kubeconfig_ = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(server_->WriteKubeconfig(kubeconfig_).ok());
  }
  void TearDown() override { server_->Stop(); }

  // The emulator's options (plain HTTP, no authentication).
  virtual apiserver::ApiServerOptions ServerOptions() { return {}; }

  void SetPodPhase(const std::string& pod, const std::string& phase, const std::string& node = "") override {
    nlohmann::json patch = {{"status", {{"phase", phase}, {"podIP", "10.0.0.1"}}}};
    apiserver::testing::ProcessResult r =
        Kubectl({"patch", "pod", pod, "--subresource=status", "--type=merge", "-p", patch.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (!node.empty()) {
      // Binding: the emulator has no scheduler; spec.nodeName is set like a binding would.
      r = Kubectl({"patch", "pod", pod, "--type=merge", "-p", nlohmann::json{{"spec", {{"nodeName", node}}}}.dump()});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }

  std::unique_ptr<apiserver::ApiServer> server_;
};

#ifdef STAR_OPERATOR_BINARY
// EmulatorTest with star-operator against the emulator.
using EmulatorOperatorTest = OperatorTestOn<EmulatorTest>;
#endif

}  // namespace star::op::e2e
