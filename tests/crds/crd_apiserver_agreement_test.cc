// The C++ codecs and the real API server (with the CRDs of crds/ installed: the
// k8s_cluster fixture) agree on every document crd_model.h generates from the CRDs:
// both accept it or both refuse it, the server's error names the field the case is
// about, and the defaults the server fills in are the ones the C++ decoder applies.
//
// Every document goes through `kubectl --dry-run=server --validate=strict`, so the server
// runs its whole admission path (decoding with strict field validation, defaulting,
// pruning, schema, formats, list-map keys, the CEL rules) and stores nothing. Cases
// about status go to the status subresource of one object made for the purpose (a create
// drops status). Where the two sides deliberately differ the expectation says so: an
// unknown field is refused by strict field validation and by C++, but pruned by the
// server when field validation is off.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crd_fixtures.h"
#include "crd_model.h"
#include "kubectl.h"

namespace star::crds {
namespace {

using nlohmann::json;

// Parallel kubectl processes: enough to hide each one's start-up, few enough for a
// shared machine.
constexpr size_t kParallel = 4;

bool IsStatusCase(const Case& c) {
  return !c.field.empty() && !c.field[0].is_index && c.field[0].key == "status";
}

bool UnderMetadata(const Path& p) { return !p.empty() && !p[0].is_index && p[0].key == "metadata"; }

// The type meta and metadata cases that kubectl itself refuses before any request is
// sent (it cannot decode the object): refused, but the message need not name the field.
bool RefusedByKubectl(const Case& c) {
  if (c.expect != Expect::kInvalid) return false;
  for (const char* prefix : {"type apiVersion ", "type kind ", "type metadata "}) {
    if (c.name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

class CrdApiserverAgreementTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveCluster()) GTEST_SKIP() << "KUBECONFIG names no cluster (the k8s_cluster fixture)";
    kind_ = GetParam() == "TrainingJob" ? TrainingJobKind() : NodeAllocationKind();
    namespaced_ = GetParam() == "TrainingJob";
    StatusOr<json> crd = LoadCrd(kind_.model.crd_file);
    ASSERT_TRUE(crd.ok()) << crd.status();
    schema_ = OpenApiSchema(*crd);
    ASSERT_TRUE(schema_.is_object());
    if (namespaced_) {
      ns_.emplace("crd-agreement");
      ASSERT_TRUE(ns_->ok()) << ns_->created().err;
    }
    // Cluster-scoped names are shared with every other test: ours are unique.
    probe_name_ = namespaced_ ? "fmnist" : UniqueName("crd-agreement-probe");
    status_name_ = UniqueName("crd-agreement-status");

    // The object whose status subresource the status cases replace.
    json base = kind_.model.example;
    base.erase("status");
    Place(base, status_name_);
    const KubectlResult made = Kubectl(Args({"create", "-o", "json", "-f", "-"}), base.dump());
    ASSERT_EQ(made.exit_code, 0) << made.err;
    const json created = json::parse(made.out);
    status_rv_ = created["metadata"]["resourceVersion"].get<std::string>();
  }

  void TearDown() override {
    if (!namespaced_ && !status_name_.empty()) {
      Kubectl({"delete", "nodeallocation", status_name_, "--ignore-not-found", "--wait=false"});
    }
  }

  // `args` with the namespace flag when the kind is namespaced.
  std::vector<std::string> Args(std::vector<std::string> args) const {
    if (namespaced_) {
      args.push_back("-n");
      args.push_back(ns_->name());
    }
    return args;
  }

  // Gives `doc` the test's namespace and, unless the case is about it, `name`.
  void Place(json& doc, const std::string& name, const Path& field = {}) const {
    if (!doc.contains("metadata") || !doc["metadata"].is_object()) return;
    if (namespaced_) doc["metadata"]["namespace"] = ns_->name();
    if (!UnderMetadata(field)) doc["metadata"]["name"] = name;
  }

  // The kubectl call that asks the server about `c`; `strict` false turns field
  // validation off (unknown fields are pruned).
  KubectlCall CallFor(const Case& c, bool strict) const {
    json doc = c.doc;
    const std::string validate = strict ? "--validate=strict" : "--validate=false";
    if (IsStatusCase(c)) {
      Place(doc, status_name_, c.field);
      if (doc.contains("metadata") && doc["metadata"].is_object()) {
        doc["metadata"]["resourceVersion"] = status_rv_;
      }
      return {Args({"replace", "--subresource=status", "--dry-run=server", validate, "-o", "json",
                    "-f", "-"}),
              doc.dump()};
    }
    Place(doc, probe_name_, c.field);
    return {Args({"create", "--dry-run=server", validate, "-o", "json", "-f", "-"}), doc.dump()};
  }

  // What C++ makes of `doc`, restricted to the part the server's answer is about.
  json CppPart(const json& doc, bool status) const {
    const StatusOr<json> cpp = kind_.round_trip(doc);
    if (!cpp.ok()) return json("C++ refused: " + cpp.status().message());
    const char* part = status ? "status" : "spec";
    return cpp->contains(part) ? (*cpp)[part] : json();
  }

  void Check(const Case& c, const KubectlResult& strict, const KubectlResult* lax) {
    SCOPED_TRACE(c.name + " [" + std::string(ExpectName(c.expect)) + "]");
    const std::string field = ToString(c.field);
    const StatusOr<json> cpp = kind_.round_trip(c.doc);
    switch (c.expect) {
      case Expect::kValid: {
        ASSERT_TRUE(cpp.ok()) << cpp.status();
        ASSERT_EQ(strict.exit_code, 0) << "the server refused:\n" << strict.err << c.doc.dump();
        const json served = json::parse(strict.out, nullptr, /*allow_exceptions=*/false);
        ASSERT_TRUE(served.is_object()) << strict.out;
        // The server's defaults are the C++ decoder's.
        const bool status = IsStatusCase(c);
        EXPECT_EQ(CppPart(served, status), CppPart(c.doc, status)) << served.dump();
        if (c.written == Case::Written::kValue && !c.field.empty()) {
          const json* at = Find(served, c.field);
          ASSERT_NE(at, nullptr) << field << " missing from what the server returned";
          EXPECT_EQ(*at, c.written_value) << field;
        }
        return;
      }
      case Expect::kInvalid:
      case Expect::kCrossField: {
        EXPECT_FALSE(cpp.ok()) << "C++ accepted:\n" << c.doc.dump();
        ASSERT_NE(strict.exit_code, 0) << "the server accepted:\n" << c.doc.dump();
        if (!RefusedByKubectl(c)) {
          // A duplicate list-map key: the server names the element and shows the key
          // ("spec.pods[1]: Duplicate value: {\"uid\":...}"), C++ names the key's field.
          const bool duplicate = c.name.rfind("duplicate key ", 0) == 0;
          const std::string named =
              duplicate ? ToString(Path(c.field.begin(), c.field.end() - 1)) + ": Duplicate value"
                        : field;
          EXPECT_NE(strict.err.find(named), std::string::npos)
              << "the server's error does not name " << named << ":\n"
              << strict.err;
        }
        return;
      }
      case Expect::kPruned: {
        EXPECT_FALSE(cpp.ok()) << "C++ accepted an unknown field";
        ASSERT_NE(strict.exit_code, 0) << "strict field validation accepted:\n" << c.doc.dump();
        EXPECT_NE(strict.err.find(field), std::string::npos)
            << "the error does not name " << field << ":\n"
            << strict.err;
        ASSERT_NE(lax, nullptr);
        ASSERT_EQ(lax->exit_code, 0) << "refused without field validation:\n" << lax->err;
        const json served = json::parse(lax->out, nullptr, /*allow_exceptions=*/false);
        ASSERT_TRUE(served.is_object()) << lax->out;
        EXPECT_EQ(Find(served, c.field), nullptr) << field << " was not pruned";
        return;
      }
    }
  }

  Kind kind_;
  json schema_;
  bool namespaced_ = false;
  std::optional<TestNamespace> ns_;
  std::string probe_name_, status_name_, status_rv_;
};

TEST_P(CrdApiserverAgreementTest, ServerAndCppAgreeOnEveryGeneratedDocument) {
  std::vector<std::string> errors;
  const std::vector<Case> cases = GenerateCases(schema_, kind_.model, &errors);
  for (const std::string& e : errors) ADD_FAILURE() << e;

  std::vector<KubectlCall> calls;
  for (const Case& c : cases) calls.push_back(CallFor(c, /*strict=*/true));
  std::vector<size_t> lax_of(cases.size(), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].expect != Expect::kPruned) continue;
    lax_of[i] = calls.size();
    calls.push_back(CallFor(cases[i], /*strict=*/false));
  }
  const std::vector<KubectlResult> results = KubectlAll(calls, kParallel);

  int cross_field = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const KubectlResult* lax = lax_of[i] != 0 ? &results[lax_of[i]] : nullptr;
    Check(cases[i], results[i], lax);
    cross_field += cases[i].expect == Expect::kCrossField ? 1 : 0;
  }
  EXPECT_GT(cases.size(), 100u);
  EXPECT_EQ(cross_field, static_cast<int>(kind_.model.cross_field_violations.size()));
}

INSTANTIATE_TEST_SUITE_P(Kinds, CrdApiserverAgreementTest,
                         ::testing::Values("TrainingJob", "NodeAllocation"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace star::crds
