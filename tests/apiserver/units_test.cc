// The emulator's parts without a server: selectors, JSONPath, patches, fault rules,
// durations, YAML, CRD types, version priority, tables.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "faults.h"
#include "jsonpath.h"
#include "patch.h"
#include "resources.h"
#include "selector.h"
#include "table.h"
#include "yaml_json.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

json Labelled(json labels) { return {{"metadata", {{"name", "x"}, {"labels", labels}}}}; }

bool Selects(const std::string& selector, const json& labels) {
  auto s = LabelSelector::Parse(selector);
  EXPECT_TRUE(s.ok()) << selector << ": " << s.status();
  return s.ok() && s->MatchesObject(Labelled(labels));
}

TEST(LabelSelectorTest, EveryOperator) {
  const json labels = {{"app", "web"}, {"tier", "front"}};
  EXPECT_TRUE(Selects("", labels));
  EXPECT_TRUE(Selects("app=web", labels));
  EXPECT_TRUE(Selects("app==web", labels));
  EXPECT_FALSE(Selects("app!=web", labels));
  EXPECT_TRUE(Selects("app!=db", labels));
  EXPECT_TRUE(Selects("app in (db, web)", labels));
  EXPECT_FALSE(Selects("app notin (db,web)", labels));
  EXPECT_TRUE(Selects("tier", labels));
  EXPECT_FALSE(Selects("!tier", labels));
  EXPECT_TRUE(Selects("!missing", labels));
  EXPECT_TRUE(Selects("app=web,tier in (front),!missing", labels));
  EXPECT_FALSE(Selects("app=web,tier=back", labels));
  EXPECT_TRUE(Selects("missing!=x", labels)) << "!= holds when the label is absent";
  EXPECT_TRUE(Selects("missing notin (x)", labels));
  EXPECT_FALSE(Selects("missing in (x)", labels));
  EXPECT_TRUE(Selects("!app", json()));
}

TEST(LabelSelectorTest, MalformedSelectorsAreRefused) {
  for (const char* bad : {"app in ()", "app in (a", "app=(x)", "a b", "app>3", "=x"}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

TEST(FieldSelectorTest, DottedPathsEqualityAndEscapes) {
  const json event = {{"metadata", {{"name", "e1"}, {"namespace", "ns"}}},
                      {"involvedObject", {{"kind", "Widget"}, {"name", "a,b"}}},
                      {"count", 3}};
  auto s = FieldSelector::Parse("metadata.name=e1,involvedObject.kind==Widget");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches(event));
  s = FieldSelector::Parse("metadata.namespace!=ns");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Matches(event));
  s = FieldSelector::Parse(R"(involvedObject.name=a\,b,count=3,spec.missing=)");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches(event));
  EXPECT_FALSE(FieldSelector::Parse("nooperator").ok());
}

TEST(JsonPathTest, TheSubsetOfPrinterColumns) {
  const json obj = json::parse(R"({"status": {"phase": "Running", "conditions": [
      {"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}],
      "stragglers": [{"worker": 1}, {"worker": 3}]}, "spec": {"workers": {"replicas": 4}},
      "metadata": {"labels": {"a.b/c": "v"}}})");
  auto one = [&](const char* path) {
    auto r = EvalJsonPath(obj, path);
    EXPECT_TRUE(r.ok()) << path;
    return r.ok() && !r->empty() ? r->front() : json();
  };
  EXPECT_EQ(one(".status.phase"), "Running");
  EXPECT_EQ(one("{.spec.workers.replicas}"), 4);
  EXPECT_EQ(one(".status.conditions[?(@.type==\"Ready\")].status"), "True");
  EXPECT_EQ(one(".status.conditions[-1].type"), "Synced");
  EXPECT_EQ(one(".metadata.labels['a.b/c']"), "v");
  EXPECT_TRUE(one(".status.missing").is_null());
  auto all = EvalJsonPath(obj, ".status.stragglers[*].worker");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<json>{1, 3}));
  EXPECT_FALSE(EvalJsonPath(obj, ".status.conditions[?(@.type>1)]").ok());
}

TEST(PatchTest, MergePatchMergesObjectsAndNullDeletes) {
  const json target = {{"spec", {{"a", 1}, {"b", {1, 2}}}}, {"keep", true}};
  const json out = ApplyMergePatch(target, {{"spec", {{"a", nullptr}, {"b", {3}}, {"c", "x"}}}});
  EXPECT_EQ(out, json({{"spec", {{"b", {3}}, {"c", "x"}}}, {"keep", true}}));
}

TEST(PatchTest, JsonPatchAppliesOrFailsNamingTheOperation) {
  const json target = {{"spec", {{"a", 1}}}};
  auto out = ApplyJsonPatch(target, json::parse(R"([{"op":"replace","path":"/spec/a","value":2},
                                                     {"op":"add","path":"/spec/b","value":3}])"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, json({{"spec", {{"a", 2}, {"b", 3}}}}));
  EXPECT_FALSE(ApplyJsonPatch(target, json::parse(R"([{"op":"test","path":"/spec/a","value":9}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(target, json::parse(R"([{"op":"remove","path":"/nope"}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(target, json::object()).ok());
}

TEST(PatchTest, StrategicMergePatchMergesListsByKeyAndHonoursDirectives) {
  const json pod = json::parse(R"({"metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
      "spec": {"containers": [{"name": "main", "image": "v1", "env": [{"name": "A", "value": "1"}]},
                              {"name": "side", "image": "s1"}],
               "tolerations": [{"key": "k1"}]}})");
  const json patch = json::parse(R"({"metadata": {"finalizers": ["b", "a"]},
      "$setElementOrder/containers": [{"name": "main"}, {"name": "side"}],
      "spec": {"containers": [{"name": "main", "image": "v2", "env": [{"name": "B", "value": "2"}]},
                              {"name": "side", "$patch": "delete"}],
               "tolerations": [{"key": "k2"}]}})");
  auto out = ApplyStrategicMergePatch(pod, patch);
  ASSERT_TRUE(out.ok());
  const json& containers = (*out)["spec"]["containers"];
  ASSERT_EQ(containers.size(), 1u);
  EXPECT_EQ(containers[0]["image"], "v2");
  EXPECT_EQ(containers[0]["env"].size(), 2u) << "env merges by name";
  EXPECT_EQ((*out)["spec"]["tolerations"], json::parse(R"([{"key": "k2"}])")) << "no merge key: replaced";
  EXPECT_EQ((*out)["metadata"]["finalizers"], json({"a", "b"})) << "finalizers merge as a set";
  EXPECT_EQ((*out)["metadata"]["labels"]["x"], "1");
  EXPECT_FALSE(out->contains("$setElementOrder/containers"));

  auto replaced = ApplyStrategicMergePatch(pod, json::parse(R"({"spec": {"$patch": "replace", "x": 1}})"));
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ((*replaced)["spec"], json({{"x", 1}}));
}

TEST(FaultRuleTest, CompactSpecAndJsonForms) {
  auto r = FaultRule::Parse("verb=create,resource=pods,status=500,count=2");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->verb, "create");
  EXPECT_EQ(r->resource, "pods");
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->count, 2);
  r = FaultRule::Parse("latency=250ms,verb=get");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->latency, std::chrono::milliseconds(250));
  EXPECT_FALSE(FaultRule::Parse("verb=create,status=abc").ok());
  EXPECT_FALSE(FaultRule::Parse("verb").ok());
  EXPECT_FALSE(FaultRule::Parse("colour=red").ok());
  EXPECT_FALSE(FaultRule::FromJson({{"status", 200}}).ok()) << "only error codes";
  EXPECT_FALSE(FaultRule::FromJson({{"probability", 2}}).ok());
}

TEST(FaultInjectorTest, CountedRulesFireForTheNextNMatchingRequests) {
  FaultInjector f;
  f.Add(*FaultRule::Parse("verb=create,resource=pods,status=500,count=2"));
  f.Add(*FaultRule::Parse("verb=*,resource=*,status=429,count=1"));
  EXPECT_EQ(f.Decide("get", "widgets", "", "default").status, 429) << "the catch-all fires first for a get";
  EXPECT_EQ(f.Decide("create", "pods", "", "default").status, 500);
  EXPECT_EQ(f.Decide("create", "pods", "status", "default").status, 500) << "pods matches pods/status";
  EXPECT_FALSE(f.Decide("create", "pods", "", "default").status.has_value()) << "both rules are used up";
  EXPECT_EQ(f.counters().errors, 3u);
}

TEST(FaultInjectorTest, ProbabilityIsReproducibleFromTheSeed) {
  auto run = [] {
    FaultInjector f;
    f.Add(*FaultRule::Parse("verb=list,status=503,probability=0.5,seed=42"));
    std::vector<bool> fired;
    for (int i = 0; i < 64; ++i) fired.push_back(f.Decide("list", "pods", "", "").status.has_value());
    return fired;
  };
  const auto a = run();
  EXPECT_EQ(a, run());
  const auto hits = std::count(a.begin(), a.end(), true);
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, 64);
}

TEST(FaultInjectorTest, DropWatchAfterAppliesToWatchesOnly) {
  FaultInjector f;
  f.Add(*FaultRule::FromJson({{"dropWatchAfter", 3}}));
  EXPECT_FALSE(f.Decide("list", "pods", "", "").drop_watch_after.has_value());
  EXPECT_EQ(f.Decide("watch", "pods", "", "").drop_watch_after, 3);
  EXPECT_FALSE(f.Decide("watch", "pods", "", "").status.has_value());
}

TEST(ParseDurationTest, Units) {
  EXPECT_EQ(*ParseDuration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(*ParseDuration("2s"), std::chrono::milliseconds(2000));
  EXPECT_EQ(*ParseDuration("1.5m"), std::chrono::milliseconds(90000));
  EXPECT_EQ(*ParseDuration("40"), std::chrono::milliseconds(40));
  EXPECT_FALSE(ParseDuration("fast").ok());
  EXPECT_FALSE(ParseDuration("3d").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
}

TEST(YamlTest, ACommaOutsideFlowCollectionsIsRefusedInsteadOfHanging) {
  for (const char* text : {"[a], n", "kind: Pod\n, a\n"}) {
    auto docs = ParseYamlDocuments(text);
    ASSERT_FALSE(docs.ok()) << text;
    EXPECT_EQ(docs.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(docs.status().message().rfind("yaml:", 0), 0u) << docs.status();
  }
}

TEST(YamlTest, ScalarsResolveLikeTheCoreSchema) {
  auto doc = ParseYamlDocument("a: 1\nb: 1.5\nc: true\nd: ~\ne: '1'\nf: hello\ng: [x, 2]\nh: \"true\"\n");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(*doc, json::parse(R"({"a":1,"b":1.5,"c":true,"d":null,"e":"1","f":"hello","g":["x",2],"h":"true"})"));
  auto docs = ParseYamlDocuments("---\na: 1\n---\n---\nb: 2\n");
  ASSERT_TRUE(docs.ok());
  EXPECT_EQ(docs->size(), 2u);
  EXPECT_FALSE(ParseYamlDocument("a: [1, 2\n").ok());
  const json config = {{"k", "v"}, {"list", {{{"n", 1}}}}};
  EXPECT_EQ(*ParseYamlDocument(ToYaml(config)), config);
}

TEST(ResourcesTest, VersionPriorityOrdersLikeKubernetes) {
  std::vector<std::string> v = {"v1alpha1", "v2beta1", "foo", "v1", "v1beta2", "v2", "v1beta1", "v10"};
  std::sort(v.begin(), v.end(), VersionPriorityLess);
  EXPECT_EQ(v, (std::vector<std::string>{"v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"}));
}

TEST(ResourcesTest, CrdBecomesAServedType) {
  const json crd = json::parse(R"({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
      "metadata": {"name": "gadgets.example.com"},
      "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "gadgets", "kind": "Gadget",
               "shortNames": ["gd"]},
               "versions": [{"name": "v1beta1", "served": true, "storage": false},
                            {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                             "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                            {"name": "v0", "served": false, "storage": false}]}})");
  auto t = TypeFromCrd(crd);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->singular, "gadget");
  EXPECT_EQ(t->list_kind, "GadgetList");
  EXPECT_FALSE(t->namespaced);
  EXPECT_EQ(t->versions.size(), 2u) << "v0 is not served";
  EXPECT_EQ(t->StorageVersion().name, "v1");
  EXPECT_TRUE(t->HasStatus());
  EXPECT_EQ(t->QualifiedKind(), "Gadget.example.com");

  json bad = crd;
  bad["metadata"]["name"] = "wrong";
  bad["spec"]["versions"][1]["storage"] = false;
  const auto errors = ValidateCrd(bad);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "metadata.name");
  EXPECT_EQ(errors[1].field, "spec.versions");
  EXPECT_FALSE(TypeFromCrd(bad).ok());
}

TEST(TableTest, PrinterColumnsBecomeCells) {
  ResourceType t;
  t.group = "test.star.dev";
  t.plural = "widgets";
  t.kind = "Widget";
  VersionSpec v;
  v.name = "v1";
  v.columns = {PrinterColumn{"Phase", "string", "", "", ".status.phase", 0},
               PrinterColumn{"Replicas", "integer", "", "", ".spec.replicas", 0},
               PrinterColumn{"Mode", "string", "", "", ".spec.mode", 1}};
  t.versions.push_back(v);
  const json obj = {{"metadata", {{"name", "a"}, {"creationTimestamp", "2020-01-01T00:00:00Z"}}},
                    {"spec", {{"replicas", 3}}},
                    {"status", {{"phase", "Running"}}}};
  TableOptions options;
  json table = ToTable(t, "v1", {obj}, "7", options);
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  ASSERT_EQ(table["columnDefinitions"].size(), 4u);
  EXPECT_EQ(table["columnDefinitions"][0]["name"], "Name");
  EXPECT_EQ(table["columnDefinitions"][3]["priority"], 1);
  EXPECT_EQ(table["rows"][0]["cells"], json({"a", "Running", 3, nullptr}));
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  options.include_object = "None";
  EXPECT_FALSE(ToTable(t, "v1", {obj}, "7", options)["rows"][0].contains("object"));

  t.versions[0].columns.clear();
  table = ToTable(t, "v1", {obj}, "7", TableOptions{});
  ASSERT_EQ(table["columnDefinitions"].size(), 2u) << "no printer columns: NAME and AGE";
  EXPECT_EQ(table["columnDefinitions"][1]["name"], "Age");
  EXPECT_NE(table["rows"][0]["cells"][1].get<std::string>().find('y'), std::string::npos) << "years old";
}

TEST(TableTest, HumanAgeRoundsLikeKubectl) {
  EXPECT_EQ(HumanAge("not a time"), "<unknown>");
  EXPECT_EQ(HumanAge("2999-01-01T00:00:00Z"), "<invalid>");
}

}  // namespace
}  // namespace star::apiserver
