// kubectl reads the CRDs in crds/ exactly as the tests read them with yaml-cpp.
//
// Without an API server `kubectl create --dry-run=client` cannot run (it downloads the
// server's OpenAPI and discovery first), so this uses `kubectl label --local`, which
// parses the file with kubectl's own YAML reader and prints the object as JSON. Equality
// with LoadYamlAsJson's reading (plus the label) proves the YAML is well-formed for
// kubectl and that crd_agreement_test checks the schema kubectl would send.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "crd_model.h"

namespace star::crds {
namespace {

using nlohmann::json;

// Runs `command` with sh, returning its exit status and its stdout and stderr.
int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) output->append(buf.data(), n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HaveKubectl() {
  std::string ignored;
  return RunShell("command -v kubectl", &ignored) == 0;
}

class CrdKubectlTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CrdKubectlTest, KubectlReadsTheCrdAsTheTestsDo) {
  if (!HaveKubectl()) GTEST_SKIP() << "kubectl is not on PATH";
  const std::string file = std::string(STAR_CRDS_DIR) + "/" + GetParam();
  StatusOr<json> ours = LoadCrd(GetParam());
  ASSERT_TRUE(ours.ok()) << ours.status();

  // KUBECONFIG=/dev/null: --local never contacts a server; make sure none is configured.
  std::string out;
  const int rc = RunShell(
      "KUBECONFIG=/dev/null kubectl label --local -o json -f '" + file + "' star.dev/lint=ok",
      &out);
  ASSERT_EQ(rc, 0) << out;
  const json theirs = json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(theirs.is_discarded()) << "kubectl printed no JSON:\n" << out;

  json expected = *ours;
  expected["metadata"]["labels"]["star.dev/lint"] = "ok";
  EXPECT_EQ(theirs, expected) << "kubectl:\n"
                              << theirs.dump(2) << "\nyaml-cpp:\n"
                              << expected.dump(2);
}

INSTANTIATE_TEST_SUITE_P(Crds, CrdKubectlTest,
                         ::testing::Values("trainingjobs.star.dev.yaml",
                                           "nodeallocations.star.dev.yaml"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

}  // namespace
}  // namespace star::crds
