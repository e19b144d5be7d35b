// The CRDs in crds/ and the C++ codecs in core/src/api cannot drift apart.
//
// Every rule the openAPIV3Schema states is turned into documents (crd_model.h), and the
// C++ decoder must accept exactly the ones the schema accepts, name the offending
// field in its error, and write back what the schema says (the same property set, the
// same types, the schema's defaults for absent fields).
//
// One deliberate difference is pinned down rather than hidden: an unknown field is
// pruned silently by the API server but rejected by the C++ decoder ("<path>: unknown
// field"), so a typo in a manifest fails loudly in `star local` and in the operator.
// The CEL rules (x-kubernetes-validations) are not evaluated here (no API server); each
// must have a C++ check that names the same field, proved by one violating document.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "crd_fixtures.h"
#include "crd_model.h"
#include "star/core/api/meta.h"

namespace star::crds {
namespace {

using nlohmann::json;

struct KindFacts {
  std::string kind;
  std::string plural;
  std::string short_name;
  std::string scope;
};

const std::map<std::string, KindFacts>& Facts() {
  static const std::map<std::string, KindFacts> kFacts = {
      {"TrainingJob", {"TrainingJob", "trainingjobs", "tj", "Namespaced"}},
      {"NodeAllocation", {"NodeAllocation", "nodeallocations", "na", "Cluster"}},
  };
  return kFacts;
}

Kind KindNamed(const std::string& name) {
  return name == "TrainingJob" ? TrainingJobKind() : NodeAllocationKind();
}

bool UnderMetadata(const Path& p) {
  return p.size() > 1 && !p[0].is_index && p[0].key == "metadata";
}

// Paths (with [*] for indices) of every value in `v`, not descending into metadata
// (the API server's ObjectMeta) or into subtrees the schema keeps verbatim.
void CollectPaths(const json& v, const json& schema, const Path& path, std::set<std::string>* out) {
  if (PreservesUnknown(schema) && !schema.contains("properties")) return;
  if (path.size() == 1 && path[0].key == "metadata") return;
  if (v.is_object()) {
    for (const auto& [key, sub] : v.items()) {
      const Path child = Child(path, key);
      out->insert(ToString(child, true));
      if (const json* s = SchemaAt(schema, {child.back()})) CollectPaths(sub, *s, child, out);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const Path item = Item(path, i);
      out->insert(ToString(item, true));
      if (const json* s = SchemaAt(schema, {item.back()})) CollectPaths(v[i], *s, item, out);
    }
  }
}

std::set<std::string> SchemaPaths(const json& schema) {
  std::set<std::string> out;
  for (const SchemaNode& n : Walk(schema)) {
    if (!UnderMetadata(n.path)) out.insert(ToString(n.path, true));
  }
  return out;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& e : s) out += (out.empty() ? "" : ", ") + e;
  return out.empty() ? "(none)" : out;
}

std::set<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& e : a) {
    if (b.count(e) == 0) out.insert(e);
  }
  return out;
}

class CrdAgreementTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kind_ = KindNamed(GetParam());
    StatusOr<json> crd = LoadCrd(kind_.model.crd_file);
    ASSERT_TRUE(crd.ok()) << crd.status();
    crd_ = *crd;
    schema_ = OpenApiSchema(crd_);
    ASSERT_TRUE(schema_.is_object()) << kind_.model.crd_file << ": no openAPIV3Schema";
  }

  // Runs one case through the C++ codec and checks the outcome it expects.
  void Check(const Case& c) {
    SCOPED_TRACE(c.name + " [" + std::string(ExpectName(c.expect)) + "]");
    StatusOr<json> out = kind_.round_trip(c.doc);
    if (c.expect == Expect::kValid) {
      ASSERT_TRUE(out.ok()) << out.status() << "\n" << c.doc.dump();
      const json* at = c.field.empty() ? &*out : Find(*out, c.field);
      if (c.written == Case::Written::kAbsent) {
        EXPECT_EQ(at, nullptr) << ToString(c.field) << " written as " << at->dump();
      } else if (c.written == Case::Written::kValue) {
        ASSERT_NE(at, nullptr) << ToString(c.field) << " not written";
        EXPECT_EQ(*at, c.written_value) << ToString(c.field);
      }
      return;
    }
    ASSERT_FALSE(out.ok()) << "accepted:\n" << c.doc.dump();
    const std::string message = out.status().message();
    const std::string field = ToString(c.field);
    EXPECT_EQ(message.rfind(field + ":", 0), 0u)
        << "error does not name " << field << ": " << message;
    if (!c.message_suffix.empty()) {
      EXPECT_TRUE(message.size() >= c.message_suffix.size() &&
                  message.compare(message.size() - c.message_suffix.size(), c.message_suffix.size(),
                                  c.message_suffix) == 0)
          << "error does not end with \"" << c.message_suffix << "\": " << message;
    }
  }

  std::vector<Case> Cases() {
    std::vector<std::string> errors;
    std::vector<Case> cases = GenerateCases(schema_, kind_.model, &errors);
    for (const std::string& e : errors) ADD_FAILURE() << e;
    return cases;
  }

  // Checks every generated case whose name starts with `prefix`; returns how many.
  int CheckAll(const std::string& prefix) {
    int n = 0;
    for (const Case& c : Cases()) {
      if (c.name.rfind(prefix, 0) != 0) continue;
      ++n;
      Check(c);
    }
    return n;
  }

  int CountNodes(const std::function<bool(const json&)>& pred) const {
    int n = 0;
    for (const SchemaNode& node : Walk(schema_)) n += pred(*node.schema) ? 1 : 0;
    return n;
  }

  Kind kind_;
  json crd_;
  json schema_;
};

TEST_P(CrdAgreementTest, CrdDescribesTheKind) {
  const KindFacts& f = Facts().at(GetParam());
  EXPECT_EQ(crd_.value("apiVersion", ""), "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd_.value("kind", ""), "CustomResourceDefinition");
  EXPECT_EQ(crd_["metadata"].value("name", ""), f.plural + ".star.dev");
  const json& spec = crd_["spec"];
  EXPECT_EQ(spec.value("group", ""), "star.dev");
  EXPECT_EQ(spec.value("scope", ""), f.scope);
  EXPECT_EQ(spec["names"].value("kind", ""), f.kind);
  EXPECT_EQ(spec["names"].value("plural", ""), f.plural);
  EXPECT_EQ(spec["names"].value("shortNames", json::array()), json::array({f.short_name}));
  EXPECT_EQ(spec["names"].value("categories", json::array()), json::array({"star"}));
  const json& version = CrdVersion(crd_);
  ASSERT_TRUE(version.is_object()) << "expected exactly one version";
  EXPECT_EQ("star.dev/" + version.value("name", ""), api::kApiVersion);
  EXPECT_TRUE(version.value("served", false));
  EXPECT_TRUE(version.value("storage", false));
  EXPECT_TRUE(version.contains(json::json_pointer("/subresources/status")));
}

TEST_P(CrdAgreementTest, CompleteExampleRoundTripsUnchanged) {
  StatusOr<json> out = kind_.round_trip(kind_.model.example);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, kind_.model.example) << out->dump(2);
}

TEST_P(CrdAgreementTest, SchemaPropertiesAreExactlyWhatToJsonWrites) {
  StatusOr<json> out = kind_.round_trip(kind_.model.example);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::set<std::string> schema = SchemaPaths(schema_);
  std::set<std::string> written, example;
  CollectPaths(*out, schema_, {}, &written);
  CollectPaths(kind_.model.example, schema_, {}, &example);
  EXPECT_EQ(Minus(written, schema), std::set<std::string>())
      << "ToJson writes fields the schema lacks: " << Join(Minus(written, schema));
  EXPECT_EQ(Minus(schema, written), std::set<std::string>())
      << "the schema declares fields ToJson never writes: " << Join(Minus(schema, written));
  EXPECT_EQ(Minus(schema, example), std::set<std::string>())
      << "the example leaves out: " << Join(Minus(schema, example));
}

TEST_P(CrdAgreementTest, ToJsonWritesTheSchemaTypes) {
  StatusOr<json> out = kind_.round_trip(kind_.model.example);
  ASSERT_TRUE(out.ok()) << out.status();
  int checked = 0;
  for (const SchemaNode& node : Walk(schema_)) {
    const json* v = Find(*out, node.path);
    if (v == nullptr || UnderMetadata(node.path)) continue;
    const std::string want = node.schema->value("type", "");
    const std::string got = OpenApiType(*v);
    EXPECT_TRUE(got == want || (want == "number" && got == "integer"))
        << ToString(node.path) << ": schema type " << want << ", ToJson wrote " << v->dump();
    // A fractional example value is what catches a number field C++ reads as an integer.
    const json* example = Find(kind_.model.example, node.path);
    if (want == "number") {
      EXPECT_TRUE(example != nullptr && OpenApiType(*example) == "number")
          << ToString(node.path) << ": the example's value must be fractional";
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST_P(CrdAgreementTest, EnumsAcceptExactlyTheirValues) {
  const int enums = CountNodes([](const json& s) { return s.contains("enum"); });
  EXPECT_GT(enums, 0);
  EXPECT_GT(CheckAll("enum "), enums * 2);
}

TEST_P(CrdAgreementTest, BoundsAcceptTheBoundAndRejectJustOutside) {
  const int bounds = CountNodes([](const json& s) { return s.contains("minimum"); }) +
                     CountNodes([](const json& s) { return s.contains("maximum"); });
  EXPECT_GT(bounds, 0);
  EXPECT_EQ(CheckAll("minimum ") + CheckAll("maximum "), bounds * 2);
  // Every integer has a maximum, so there are no unbounded ("wide integer") probes: the
  // int64 fields' maxima above 2^31 catch C++ reading one into 32 bits.
  EXPECT_EQ(CheckAll("wide integer "), 0);
}

TEST_P(CrdAgreementTest, StringLengthsPatternsAndFormatsAgree) {
  EXPECT_GT(CheckAll("minLength ") + CheckAll("maxLength "), 0);
  EXPECT_GT(CheckAll("pattern "), 0);
  EXPECT_GT(CheckAll("date-time "), 0);
}

TEST_P(CrdAgreementTest, WrongTypesAreRejectedNamingTheField) { EXPECT_GT(CheckAll("type "), 20); }

TEST_P(CrdAgreementTest, RequiredFieldsAreRequiredByCpp) {
  int required = 0;
  for (const SchemaNode& node : Walk(schema_)) required += node.required ? 1 : 0;
  EXPECT_GT(required, 1);
  EXPECT_EQ(CheckAll("required "), required);
}

TEST_P(CrdAgreementTest, OptionalFieldsTakeTheSchemaDefaultInCpp) {
  EXPECT_GT(CheckAll("optional "), 10);
}

TEST_P(CrdAgreementTest, UnknownFieldsArePrunedByTheServerButRejectedByCpp) {
  EXPECT_GT(CheckAll("unknown field "), 3);
}

TEST_P(CrdAgreementTest, ListMapKeysAreUniqueInCppToo) {
  EXPECT_GT(CheckAll("duplicate ") + CheckAll("distinct "), 0);
  for (const SchemaNode& node : Walk(schema_)) {
    const json& s = *node.schema;
    if (s.value("x-kubernetes-list-type", "") != "map") continue;
    // The API server requires list-map keys to be required or defaulted scalars.
    std::set<std::string> required;
    for (const json& r : s["items"].value("required", json::array())) required.insert(r);
    for (const json& key : s["x-kubernetes-list-map-keys"]) {
      const json& ks = s["items"]["properties"][key.get<std::string>()];
      EXPECT_TRUE(required.count(key.get<std::string>()) > 0 || ks.contains("default"))
          << ToString(node.path) << ": list-map key " << key << " neither required nor defaulted";
    }
  }
}

TEST_P(CrdAgreementTest, CrossFieldRulesHaveCppCounterparts) {
  std::multiset<std::string> cel, cpp;
  for (const SchemaNode& node : Walk(schema_)) {
    for (const json& rule : node.schema->value("x-kubernetes-validations", json::array())) {
      SCOPED_TRACE(ToString(node.path) + ": " + rule.value("rule", ""));
      EXPECT_FALSE(rule.value("message", "").empty());
      ASSERT_TRUE(rule.contains("fieldPath")) << "a rule must name the field C++ names";
      const Path field = ParsePath(rule["fieldPath"].get<std::string>());
      Path full = node.path;
      full.insert(full.end(), field.begin(), field.end());
      EXPECT_NE(SchemaAt(schema_, full), nullptr) << "fieldPath names no field";
      cel.insert(ToString(full));
    }
  }
  EXPECT_TRUE(schema_.value("x-kubernetes-validations", json::array()).empty())
      << "rules at the root are not covered here";
  for (const auto& [field, doc] : kind_.model.cross_field_violations) cpp.insert(field);
  EXPECT_EQ(cel, cpp) << "each CEL rule needs one violating document (crd_fixtures.cc)";
  EXPECT_EQ(CheckAll("cross-field rule on "), static_cast<int>(cpp.size()));
}

TEST_P(CrdAgreementTest, IntegerFieldsDeclareTheCppRange) {
  constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  for (const SchemaNode& node : Walk(schema_)) {
    const json& s = *node.schema;
    if (s.value("type", "") != "integer") continue;
    SCOPED_TRACE(ToString(node.path));
    const std::string format = s.value("format", "");
    ASSERT_TRUE(format == "int32" || format == "int64") << "format " << format;
    if (format == "int32") {
      // C++ reads these into an int: the schema must reject what does not fit.
      ASSERT_TRUE(s.contains("minimum") && s.contains("maximum"));
      EXPECT_GE(s["minimum"].get<int64_t>(), kMin32);
      EXPECT_LE(s["maximum"].get<int64_t>(), kMax32);
    }
  }
}

// What `kubectl explain` prints for each field (crd_kubectl_test checks it does).
TEST_P(CrdAgreementTest, EveryFieldHasADescription) {
  EXPECT_FALSE(schema_.value("description", "").empty()) << "the root";
  for (const SchemaNode& node : Walk(schema_)) {
    // The API server allows nothing on metadata itself but its name's rules.
    if (node.path.size() == 1 && node.path[0].key == "metadata") continue;
    EXPECT_FALSE(node.schema->value("description", "").empty()) << ToString(node.path);
  }
}

TEST_P(CrdAgreementTest, EveryCountAndQuantityHasAnUpperBound) {
  for (const SchemaNode& node : Walk(schema_)) {
    const std::string type = node.schema->value("type", "");
    if (type != "integer" && type != "number") continue;
    EXPECT_TRUE(node.schema->contains("maximum")) << ToString(node.path);
    EXPECT_TRUE(node.schema->contains("minimum")) << ToString(node.path);
  }
}

// A list without maxItems lets one object hold as many entries as etcd takes, each of
// which the operator or the agent decodes and keeps.
TEST_P(CrdAgreementTest, EveryListHasAMaximumLength) {
  for (const SchemaNode& node : Walk(schema_)) {
    if (node.schema->value("type", "") != "array") continue;
    EXPECT_TRUE(node.schema->contains("maxItems")) << ToString(node.path);
  }
}

TEST_P(CrdAgreementTest, ListLengthsAcceptTheBoundAndRejectOneMore) {
  const int lists = CountNodes([](const json& s) { return s.contains("maxItems"); });
  EXPECT_GT(lists, 0);
  EXPECT_EQ(CheckAll("maxItems "), lists * 2);
}

TEST_P(CrdAgreementTest, PrinterColumnsPointAtSchemaFields) {
  const json& columns = CrdVersion(crd_)["additionalPrinterColumns"];
  ASSERT_TRUE(columns.is_array());
  std::set<std::string> names;
  for (const json& col : columns) {
    const std::string name = col.value("name", "");
    const std::string type = col.value("type", "");
    const std::string path = col.value("jsonPath", "");
    SCOPED_TRACE(name + " " + path);
    names.insert(name);
    if (path == ".metadata.creationTimestamp") {
      EXPECT_EQ(type, "date");
      continue;
    }
    ASSERT_EQ(path.rfind('.', 0), 0u);
    // ".status.stragglers[*].worker" -> status.stragglers[0].worker
    std::string dotted = path.substr(1);
    for (size_t at; (at = dotted.find("[*]")) != std::string::npos;) dotted.replace(at, 3, "[0]");
    const json* s = SchemaAt(schema_, ParsePath(dotted));
    ASSERT_NE(s, nullptr) << "no such field in the schema";
    const std::string field_type = s->value("type", "");
    EXPECT_TRUE(field_type == type || (type == "number" && field_type == "integer"))
        << "column type " << type << ", field type " << field_type;
  }
  EXPECT_EQ(names.count("Age"), 1u);
  if (GetParam() == "TrainingJob") {
    for (const char* want : {"Phase", "Mode", "Workers", "Stragglers"}) {
      EXPECT_EQ(names.count(want), 1u) << want;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CrdAgreementTest,
                         ::testing::Values("TrainingJob", "NodeAllocation"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace star::crds
