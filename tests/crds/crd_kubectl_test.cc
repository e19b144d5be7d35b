// kubectl and the real API server (the k8s_cluster fixture, which installed crds/) with
// the CRDs: what a user sees.
//   - kubectl reads the CRD files exactly as the tests read them with yaml-cpp;
//   - the server serves the schemas and CEL rules of crds/;
//   - `kubectl explain` lists and describes every field;
//   - an invalid TrainingJob is refused by `kubectl apply` and by `kubectl create
//     --validate=strict`, the error names the field, and nothing is left behind; a
//     misspelled field is refused by strict field validation;
//   - the examples are accepted and read back as C++ decodes them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crd_fixtures.h"
#include "crd_model.h"
#include "kubectl.h"

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
  return RunShell("command -v '" + KubectlPath() + "'", &ignored) == 0;
}

// Runs of whitespace as one space, trimmed: how `kubectl explain` rewraps text.
std::string Squeeze(const std::string& s) {
  std::istringstream in(s);
  std::string word, out;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

// ---- without a server ----

class CrdFileTest : public ::testing::TestWithParam<std::string> {};

// `kubectl label --local` parses the file with kubectl's own YAML reader and prints the
// object as JSON without contacting a server. Equality with LoadYamlAsJson's reading
// (plus the label) proves the YAML is well-formed for kubectl and that the other CRD
// tests check the schema kubectl sends.
TEST_P(CrdFileTest, KubectlReadsTheCrdAsTheTestsDo) {
  if (!HaveKubectl()) GTEST_SKIP() << KubectlPath() << " is not installed";
  const std::string file = std::string(STAR_CRDS_DIR) + "/" + GetParam();
  StatusOr<json> ours = LoadCrd(GetParam());
  ASSERT_TRUE(ours.ok()) << ours.status();

  std::string out;
  const int rc = RunShell("KUBECONFIG=/dev/null '" + KubectlPath() + "' label --local -o json -f '" +
                              file + "' star.dev/lint=ok",
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

INSTANTIATE_TEST_SUITE_P(Crds, CrdFileTest,
                         ::testing::Values("trainingjobs.star.dev.yaml",
                                           "nodeallocations.star.dev.yaml"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

// ---- on the cluster ----

class CrdClusterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveCluster()) GTEST_SKIP() << "KUBECONFIG names no cluster (the k8s_cluster fixture)";
    kind_ = GetParam() == "TrainingJob" ? TrainingJobKind() : NodeAllocationKind();
    StatusOr<json> crd = LoadCrd(kind_.model.crd_file);
    ASSERT_TRUE(crd.ok()) << crd.status();
    crd_ = *crd;
  }

  std::string Plural() const { return crd_["spec"]["names"]["plural"].get<std::string>(); }

  Kind kind_;
  json crd_;
};

TEST_P(CrdClusterTest, TheServerServesTheSchemaOfCrds) {
  const KubectlResult got = Kubectl({"get", "crd", crd_["metadata"]["name"], "-o", "json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  const json served = json::parse(got.out);
  const json& version = served["spec"]["versions"][0];
  EXPECT_EQ(version["schema"]["openAPIV3Schema"], OpenApiSchema(crd_))
      << "the cluster's CRD differs from crds/" << kind_.model.crd_file;
  EXPECT_EQ(version["additionalPrinterColumns"], CrdVersion(crd_)["additionalPrinterColumns"]);
  bool established = false;
  for (const json& c : served["status"].value("conditions", json::array())) {
    established |= c.value("type", "") == "Established" && c.value("status", "") == "True";
  }
  EXPECT_TRUE(established);
}

// `kubectl explain KIND --recursive` lists every field of the schema, and `kubectl
// explain KIND.FIELD` prints the CRD's description of each field the server does not own.
TEST_P(CrdClusterTest, ExplainListsAndDescribesEveryField) {
  const json& schema = OpenApiSchema(crd_);
  const KubectlResult tree = Kubectl({"explain", Plural(), "--recursive"});
  ASSERT_EQ(tree.exit_code, 0) << tree.err;

  std::vector<std::pair<std::string, std::string>> fields;  // explain path, description
  std::vector<KubectlCall> calls;
  for (const SchemaNode& node : Walk(schema)) {
    if (node.path.back().is_index) continue;
    // "spec.workers.replicas", "status.conditions.type": explain names no indices.
    std::string dotted;
    for (const PathStep& step : node.path) {
      if (!step.is_index) dotted += (dotted.empty() ? "" : ".") + step.key;
    }
    EXPECT_NE(tree.out.find(" " + node.path.back().key + "\t"), std::string::npos)
        << dotted << " missing from kubectl explain " << Plural() << " --recursive:\n"
        << tree.out;
    // The server describes apiVersion, kind and metadata (ObjectMeta) itself.
    if (node.server_owned) continue;
    fields.emplace_back(dotted, node.schema->value("description", ""));
    calls.push_back({{"explain", Plural() + "." + dotted}, std::nullopt});
  }
  ASSERT_GT(fields.size(), 10u);
  const std::vector<KubectlResult> explained = KubectlAll(calls, 4);
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& [path, description] = fields[i];
    SCOPED_TRACE(path);
    EXPECT_FALSE(description.empty()) << "no description in crds/" << kind_.model.crd_file;
    ASSERT_EQ(explained[i].exit_code, 0) << explained[i].err;
    EXPECT_NE(Squeeze(explained[i].out).find(Squeeze(description)), std::string::npos)
        << "kubectl explain " << Plural() << "." << path << " does not describe it:\n"
        << explained[i].out;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CrdClusterTest, ::testing::Values("TrainingJob", "NodeAllocation"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---- TrainingJobs through kubectl ----

class TrainingJobKubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveCluster()) GTEST_SKIP() << "KUBECONFIG names no cluster (the k8s_cluster fixture)";
    ns_.emplace("crd-kubectl");
    ASSERT_TRUE(ns_->ok()) << ns_->created().err;
  }

  // `doc` in the test's namespace, without status (the main resource ignores it).
  json Placed(json doc) const {
    doc["metadata"]["namespace"] = ns_->name();
    doc.erase("status");
    return doc;
  }

  KubectlResult Run(std::vector<std::string> args, const json& doc) const {
    args.insert(args.end(), {"-n", ns_->name(), "-f", "-"});
    return Kubectl(args, doc.dump());
  }

  // The names of the TrainingJobs in the namespace.
  std::string Jobs() const {
    const KubectlResult got = Kubectl({"get", "tj", "-n", ns_->name(), "-o", "name"});
    EXPECT_EQ(got.exit_code, 0) << got.err;
    return got.out;
  }

  std::optional<TestNamespace> ns_;
};

// What a user gets wrong: one document per cross-field rule on spec (status is the
// operator's, and a create drops it), and single-field mistakes.
std::vector<std::pair<std::string, json>> InvalidJobs() {
  std::vector<std::pair<std::string, json>> out;
  for (auto& [field, doc] : TrainingJobKind().model.cross_field_violations) {
    if (field.rfind("spec.", 0) == 0) out.emplace_back(field, std::move(doc));
  }
  const json example = TrainingJobKind().model.example;
  auto with = [&](const char* field, const char* pointer, json value) {
    json doc = example;
    doc[json::json_pointer(pointer)] = std::move(value);
    out.emplace_back(field, std::move(doc));
  };
  with("spec.workers.replicas", "/spec/workers/replicas", 0);
  with("spec.training.globalBatchSize", "/spec/training/globalBatchSize", int64_t{1} << 31);
  with("spec.training.targetAccuracy", "/spec/training/targetAccuracy", 1.5);
  with("spec.synchronization.policy", "/spec/synchronization/policy", "Fastest");
  with("spec.mitigation.detection.threshold", "/spec/mitigation/detection/threshold", 0);
  with("spec.mitigation.detection.window", "/spec/mitigation/detection/window", 2);
  with("spec.workers.replicas", "/spec/workers/replicas", "four");
  // Oversized: the operator would build this many pods in memory.
  with("spec.workers.replicas", "/spec/workers/replicas", 50000000);
  with("spec.parameterServers.replicas", "/spec/parameterServers/replicas", 50000000);
  with("spec.mitigation.detection.window", "/spec/mitigation/detection/window", 50000000);
  json no_training = example;
  no_training["spec"].erase("training");
  out.emplace_back("spec.training", std::move(no_training));
  return out;
}

TEST_F(TrainingJobKubectlTest, InvalidJobsAreRefusedNamingTheFieldAndLeaveNothingBehind) {
  const Kind kind = TrainingJobKind();
  for (const auto& [field, raw] : InvalidJobs()) {
    const json doc = Placed(raw);
    SCOPED_TRACE(field + ": " + doc["spec"].dump());
    EXPECT_FALSE(kind.round_trip(raw).ok()) << "C++ accepts it";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"apply"}, std::vector<std::string>{"create", "--validate=strict"}}) {
      const KubectlResult r = Run(args, doc);
      EXPECT_NE(r.exit_code, 0) << "kubectl " << args[0] << " accepted it";
      EXPECT_NE(r.err.find(field), std::string::npos)
          << "kubectl " << args[0] << "'s error does not name " << field << ":\n"
          << r.err;
      EXPECT_EQ(Jobs(), "") << "a refused " << args[0] << " left a TrainingJob behind";
    }
  }
}

TEST_F(TrainingJobKubectlTest, AMisspelledFieldIsRefusedByStrictFieldValidation) {
  json doc = Placed(TrainingJobKind().model.example);
  doc["spec"]["trainig"] = doc["spec"]["training"];
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"apply"}, std::vector<std::string>{"create", "--validate=strict"},
        std::vector<std::string>{"apply", "--server-side"}}) {
    SCOPED_TRACE(args[0] + (args.size() > 1 ? " " + args[1] : ""));
    const KubectlResult r = Run(args, doc);
    EXPECT_NE(r.exit_code, 0) << "accepted:\n" << r.out;
    EXPECT_NE(r.err.find("spec.trainig"), std::string::npos) << r.err;
    EXPECT_EQ(Jobs(), "");
  }
  EXPECT_FALSE(TrainingJobKind().round_trip(doc).ok());
}

// The fixture's complete example and the TrainingJobs of examples/: applied, read back,
// listed, and what comes back decodes in C++ as the manifest does.
TEST_F(TrainingJobKubectlTest, ValidJobsAreAcceptedAndReadBack) {
  const Kind kind = TrainingJobKind();
  std::vector<std::pair<std::string, json>> jobs = {{"the complete example", kind.model.example}};
  for (const char* file : {"fmnist-job.yaml", "pytorch/fmnist-job.yaml", "gpu/fmnist-gpu-job.yaml"}) {
    StatusOr<json> doc = LoadYamlAsJson(std::string(STAR_CRDS_DIR) + "/../examples/" + file);
    ASSERT_TRUE(doc.ok()) << doc.status();
    jobs.emplace_back(file, *doc);
  }
  for (const auto& [what, raw] : jobs) {
    SCOPED_TRACE(what);
    const json doc = Placed(raw);
    const std::string name = doc["metadata"]["name"];
    const KubectlResult applied = Run({"apply"}, doc);
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    const KubectlResult got = Kubectl({"get", "tj", name, "-n", ns_->name(), "-o", "json"});
    ASSERT_EQ(got.exit_code, 0) << got.err;
    const json served = json::parse(got.out);
    const StatusOr<json> ours = kind.round_trip(doc);
    const StatusOr<json> theirs = kind.round_trip(served);
    ASSERT_TRUE(ours.ok()) << ours.status();
    ASSERT_TRUE(theirs.ok()) << theirs.status() << "\n" << served.dump(2);
    EXPECT_EQ((*theirs)["spec"], (*ours)["spec"]);
    const KubectlResult table = Kubectl({"get", "tj", name, "-n", ns_->name()});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("WORKERS"), std::string::npos) << table.out;
  }
  const KubectlResult deleted = Kubectl({"delete", "tj", "--all", "-n", ns_->name(), "--wait"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(Jobs(), "");
}

TEST(NodeAllocationKubectlTest, TheExampleIsAcceptedAndReadBack) {
  if (!HaveCluster()) GTEST_SKIP() << "KUBECONFIG names no cluster (the k8s_cluster fixture)";
  const Kind kind = NodeAllocationKind();
  json doc = kind.model.example;
  doc.erase("status");
  const std::string name = UniqueName("crd-kubectl-node");
  doc["metadata"]["name"] = name;
  const KubectlResult applied = Kubectl({"apply", "-f", "-"}, doc.dump());
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  const KubectlResult got = Kubectl({"get", "na", name, "-o", "json"});
  Kubectl({"delete", "na", name, "--wait=false"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  const StatusOr<json> ours = kind.round_trip(doc);
  const StatusOr<json> theirs = kind.round_trip(json::parse(got.out));
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ((*theirs)["spec"], (*ours)["spec"]);
}

// A quota the agent would overflow (quota x CFS period) and a list longer than a node
// holds pods are refused by the server, naming the field.
TEST(NodeAllocationKubectlTest, OversizedAllocationsAreRefused) {
  if (!HaveCluster()) GTEST_SKIP() << "KUBECONFIG names no cluster (the k8s_cluster fixture)";
  const Kind kind = NodeAllocationKind();
  json example = kind.model.example;
  example.erase("status");
  example["metadata"]["name"] = UniqueName("crd-kubectl-oversized");
  json quota = example;
  quota["spec"]["pods"][0]["cpu"]["quotaMillicores"] = int64_t{9007199254740991};
  json pods = example;
  json& list = pods["spec"]["pods"];
  const json first = list[0];
  list = json::array();
  for (int i = 0; i <= 1024; ++i) {
    json p = first;
    p["uid"] = "uid-" + std::to_string(i);
    list.push_back(std::move(p));
  }
  for (const auto& [field, doc] : {std::pair{std::string("quotaMillicores"), quota},
                                   std::pair{std::string("spec.pods"), pods}}) {
    SCOPED_TRACE(field);
    EXPECT_FALSE(kind.round_trip(doc).ok()) << "C++ accepts it";
    const KubectlResult r = Kubectl({"create", "-f", "-"}, doc.dump());
    EXPECT_NE(r.exit_code, 0) << "accepted";
    EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
    const KubectlResult got = Kubectl({"get", "na", doc["metadata"]["name"], "--ignore-not-found"});
    EXPECT_EQ(got.out, "") << "a refused create left it behind";
  }
}

}  // namespace
}  // namespace star::crds
