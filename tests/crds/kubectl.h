// Running kubectl against the cluster that KUBECONFIG names (the k8s_cluster ctest
// fixture's), for the CRD tests: one command at a time or many at once, and namespaces
// that are deleted when the test ends.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace star::crds {

struct KubectlResult {
  int exit_code = -1;  // -1 when kubectl could not be started or was killed
  std::string out;     // stdout
  std::string err;     // stderr
};

// $STAR_KUBECTL, or "kubectl" (looked up on PATH) when it is unset.
std::string KubectlPath();
// True when KUBECONFIG is set and names a readable file.
bool HaveCluster();

// Runs kubectl with `args`, `input` on its stdin when set (else /dev/null). Blocks until
// it exits. Thread-safe.
KubectlResult Kubectl(const std::vector<std::string>& args,
                      const std::optional<std::string>& input = std::nullopt);

struct KubectlCall {
  std::vector<std::string> args;
  std::optional<std::string> input;
};
// Runs every call, `parallel` at a time; result i belongs to call i.
std::vector<KubectlResult> KubectlAll(const std::vector<KubectlCall>& calls, size_t parallel);

// A namespace of the test's own, named `<prefix>-<pid>-<n>`; created by the constructor
// (ok() says whether that worked), deleted without waiting by the destructor.
class TestNamespace {
 public:
  explicit TestNamespace(const std::string& prefix);
  ~TestNamespace();
  TestNamespace(const TestNamespace&) = delete;
  TestNamespace& operator=(const TestNamespace&) = delete;

  const std::string& name() const { return name_; }
  bool ok() const { return created_.exit_code == 0; }
  // What `kubectl create namespace` printed.
  const KubectlResult& created() const { return created_; }

 private:
  std::string name_;
  KubectlResult created_;
};

// A name no other process (and no other call in this one) gets: `<prefix>-<pid>-<n>`.
std::string UniqueName(const std::string& prefix);

}  // namespace star::crds
