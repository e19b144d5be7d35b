// The emulator under hostile requests: wrongly typed fields (400 naming the field, never
// 500), deep nesting and huge bodies and strings (a clean 4xx, the server still
// answering), names and labels longer than Kubernetes allows (422), out-of-range fault
// rules and query parameters (400). Every refusal changes nothing: the store's
// resourceVersion stays where it was.
#include <gtest/gtest.h>

#include <cpprest/http_client.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api.h"
#include "faults.h"
#include "object_meta.h"
#include "patch.h"
#include "request_limits.h"
#include "server.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kWidgets = "/apis/test.star.dev/v1/namespaces/default/widgets";

json Pod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"app", "x"}}}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

// `value` with `path` ("/metadata/name") set to `v`.
json With(json value, const std::string& path, const json& v) {
  value[json::json_pointer(path)] = v;
  return value;
}

// Arrays nested `depth` deep around `inner`, as text.
std::string NestedArrays(int depth, const std::string& inner = "") {
  return std::string(static_cast<size_t>(depth), '[') + inner + std::string(static_cast<size_t>(depth), ']');
}

// A sink that keeps what a watch writes.
class Lines : public WatchSink {
 public:
  bool Write(const std::string& line) override {
    lines.push_back(line);
    return true;
  }
  void Close() override { closed = true; }
  std::vector<std::string> lines;
  bool closed = false;
};

// The Api in-process, without HTTP.
class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(api_.LoadCrds(STAR_APISERVER_TESTDATA "/crds").ok()); }

  struct Reply {
    int code = 0;
    json body;
    std::string message() const { return body.is_object() ? body.value("message", "") : ""; }
  };

  Reply Send(const std::string& method, const std::string& target, const std::string& body = "",
             const std::string& content_type = "application/json") {
    Request req;
    req.method = method;
    req.path = target.substr(0, target.find('?'));
    if (target.find('?') != std::string::npos) {
      std::string query = target.substr(target.find('?') + 1) + "&";
      for (size_t start = 0, amp; (amp = query.find('&', start)) != std::string::npos; start = amp + 1) {
        const std::string kv = query.substr(start, amp - start);
        if (kv.empty()) continue;
        const size_t eq = kv.find('=');
        req.query[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
      }
    }
    req.body = body;
    req.content_type = content_type;
    req.accept = "application/json";
    req.open_stream = [this] { return sink_ = std::make_shared<Lines>(); };
    const Response resp = api_.Handle(req);
    return {resp.code, json::parse(resp.body, nullptr, false)};
  }
  Reply Post(const std::string& path, const json& body) { return Send("POST", path, body.dump()); }

  // Expects a 400 BadRequest whose message names `field`, and nothing stored or changed.
  void ExpectBadRequest(const Reply& r, const std::string& field, const std::string& what) {
    EXPECT_EQ(r.code, 400) << what << ": " << r.body.dump();
    EXPECT_EQ(r.body.value("reason", ""), "BadRequest") << what;
    EXPECT_NE(r.message().find(field), std::string::npos) << what << ": the message names " << field << ": "
                                                          << r.message();
  }

  std::uint64_t rv() { return api_.store().resource_version(); }

  Api api_{ApiOptions{}};
  std::shared_ptr<Lines> sink_;
};

// ---- wrong types ----

struct TypeCase {
  std::string path;     // the collection
  json object;          // a valid object of its kind
  std::string pointer;  // the field made wrong
  json value;           // its wrong value
  std::string field;    // what the message names
};

std::vector<TypeCase> TypeCases() {
  const json cm = {{"metadata", {{"name", "c"}}}, {"data", {{"k", "v"}}}};
  const json secret = {{"metadata", {{"name", "s"}}}, {"data", {{"k", "dg=="}}}};
  const json svc = {{"metadata", {{"name", "s"}}}, {"spec", {{"ports", {{{"port", 80}}}}}}};
  const json ns = {{"metadata", {{"name", "n"}}}};
  const json node = {{"metadata", {{"name", "n"}}}};
  const json event = {{"metadata", {{"name", "e"}}}, {"involvedObject", {{"kind", "Pod"}}}};
  const json lease = {{"metadata", {{"name", "l"}}}, {"spec", {{"holderIdentity", "a"}}}};
  const std::string core = "/api/v1/namespaces/default/";
  return {
      {kPods, Pod("p"), "/metadata/name", 5, "metadata.name"},
      {kPods, Pod("p"), "/metadata/generateName", 5, "metadata.generateName"},
      {kPods, Pod("p"), "/metadata/namespace", true, "metadata.namespace"},
      {kPods, Pod("p"), "/metadata/labels", json::array(), "metadata.labels"},
      {kPods, Pod("p"), "/metadata/labels/app", 1, "metadata.labels[app]"},
      {kPods, Pod("p"), "/metadata/annotations", "x", "metadata.annotations"},
      {kPods, Pod("p"), "/metadata", "x", "Pod.metadata of type object"},
      {kPods, Pod("p"), "/metadata/resourceVersion", 3, "metadata.resourceVersion"},
      {kPods, Pod("p"), "/metadata/uid", 7, "metadata.uid"},
      {kPods, Pod("p"), "/metadata/finalizers", "x", "metadata.finalizers"},
      {kPods, Pod("p"), "/metadata/finalizers", json::array({7}), "metadata.finalizers[0]"},
      {kPods, Pod("p"), "/metadata/ownerReferences", json::object(), "metadata.ownerReferences"},
      {kPods, Pod("p"), "/metadata/ownerReferences", json::array({{{"uid", 5}}}), "metadata.ownerReferences[0].uid"},
      {kPods, Pod("p"), "/metadata/deletionTimestamp", 1, "metadata.deletionTimestamp"},
      {kPods, Pod("p"), "/metadata/generation", "1", "metadata.generation"},
      {kPods, Pod("p"), "/metadata/creationTimestamp", json::array(), "metadata.creationTimestamp"},
      {kPods, Pod("p"), "/apiVersion", 1, "Pod.apiVersion"},
      {kPods, Pod("p"), "/spec", "x", "Pod.spec"},
      {kPods, Pod("p"), "/spec/nodeName", 5, "spec.nodeName"},
      {kPods, Pod("p"), "/spec/containers", json::object(), "spec.containers"},
      {kPods, Pod("p"), "/spec/containers/0/ports", json::array({{{"containerPort", "80"}}}),
       "spec.containers[0].ports[0].containerPort"},
      {kPods, Pod("p"), "/status", json::array(), "Pod.status"},
      {kPods, Pod("p"), "/status/phase", 1, "status.phase"},
      {core + "configmaps", cm, "/data/k", 1, "data[k]"},
      {core + "configmaps", cm, "/data", "x", "ConfigMap.data"},
      {core + "configmaps", cm, "/binaryData", {{"b", "not base64!"}}, "binaryData[b]"},
      {core + "configmaps", cm, "/immutable", "yes", "immutable"},
      {core + "secrets", secret, "/data/k", "@@@", "data[k]"},
      {core + "secrets", secret, "/type", 5, "Secret.type"},
      {core + "services", svc, "/spec/ports/0/port", "80", "spec.ports[0].port"},
      {core + "services", svc, "/spec/selector", json::array(), "spec.selector"},
      {"/api/v1/namespaces", ns, "/spec", {{"finalizers", "kubernetes"}}, "spec.finalizers"},
      {"/api/v1/nodes", node, "/spec", {{"unschedulable", "true"}}, "spec.unschedulable"},
      {core + "events", event, "/involvedObject", "x", "Event.involvedObject"},
      {core + "events", event, "/count", "1", "Event.count"},
      {"/apis/coordination.k8s.io/v1/namespaces/default/leases", lease, "/spec/leaseDurationSeconds", 1.5,
       "spec.leaseDurationSeconds"},
      {"/apis/events.k8s.io/v1/namespaces/default/events", event, "/regarding", json::array(), "Event.regarding"},
      {kWidgets, {{"metadata", {{"name", "w"}}}, {"spec", {{"replicas", 1}}}}, "/metadata/name", 5, "metadata.name"},
      {kWidgets, {{"metadata", {{"name", "w"}}}, {"spec", {{"replicas", 1}}}}, "/metadata", "x", "metadata"},
  };
}

TEST_F(HardeningTest, WrongTypesInCreateAre400NamingTheFieldAndStoreNothing) {
  for (const TypeCase& c : TypeCases()) {
    const std::uint64_t before = rv();
    ExpectBadRequest(Post(c.path, With(c.object, c.pointer, c.value)), c.field, c.path + " " + c.pointer);
    EXPECT_EQ(rv(), before) << c.path << " " << c.pointer << ": nothing stored";
  }
  // The same objects with the right types are created.
  for (const TypeCase& c : TypeCases()) {
    const Reply r = Post(c.path, c.object);
    EXPECT_TRUE(r.code == 201 || r.code == 409) << c.path << ": " << r.body.dump();
  }
}

TEST_F(HardeningTest, WrongTypesInUpdatesPatchesAndStatusAre400AndChangeNothing) {
  ASSERT_EQ(Post(kPods, Pod("p")).code, 201);
  const json stored = Send("GET", kPods + "/p").body;
  const std::uint64_t before = rv();
  struct Case {
    std::string method, path, body, type, field;
  };
  const std::vector<Case> cases = {
      {"PUT", kPods + "/p", With(stored, "/metadata/labels", json::array()).dump(), "application/json",
       "metadata.labels"},
      {"PUT", kPods + "/p", With(stored, "/metadata/resourceVersion", 3).dump(), "application/json",
       "metadata.resourceVersion"},
      {"PUT", kPods + "/p", With(stored, "/spec/nodeName", json::object()).dump(), "application/json", "spec.nodeName"},
      {"PUT", kPods + "/p/status", With(stored, "/status/phase", 5).dump(), "application/json", "status.phase"},
      {"PATCH", kPods + "/p", R"({"spec":{"nodeName":5}})", "application/merge-patch+json", "spec.nodeName"},
      {"PATCH", kPods + "/p", R"({"metadata":"x"})", "application/merge-patch+json", "Pod.metadata"},
      {"PATCH", kPods + "/p/status", R"({"status":{"phase":[]}})", "application/merge-patch+json", "status.phase"},
      {"PATCH", kPods + "/p", R"([{"op":"replace","path":"/metadata/labels","value":[]}])",
       "application/json-patch+json", "metadata.labels"},
      {"PATCH", kPods + "/p", R"([{"op":"add","path":"/metadata/ownerReferences","value":{}}])",
       "application/json-patch+json", "metadata.ownerReferences"},
      {"PATCH", kPods + "/p", R"({"metadata":{"finalizers":"x"}})", "application/strategic-merge-patch+json",
       "metadata.finalizers"},
      {"PATCH", kPods + "/p", R"({"spec":{"containers":[{"name":"c","image":5}]}})",
       "application/strategic-merge-patch+json", "spec.containers[0].image"},
      {"PATCH", kPods + "/p", "metadata:\n  labels: 5\n", "application/apply-patch+yaml", "metadata.labels"},
      {"PATCH", kPods + "/q", "metadata:\n  labels: 5\n", "application/apply-patch+yaml", "metadata.labels"},
      {"PATCH", kPods + "/q", "metadata: x\n", "application/apply-patch+yaml", "Pod.metadata"},
      {"PUT", kPods + "/p", With(stored, "/metadata", "x").dump(), "application/json", "Pod.metadata"},
  };
  for (const Case& c : cases) {
    ExpectBadRequest(Send(c.method, c.path, c.body, c.type), c.field, c.method + " " + c.path + " " + c.body);
  }
  EXPECT_EQ(rv(), before) << "nothing changed";
  EXPECT_EQ(Send("GET", kPods + "/p").body, stored);
  EXPECT_EQ(Send("GET", kPods + "/q").code, 404);
}

TEST_F(HardeningTest, NullFieldsAreZeroValuesNotErrors) {
  json pod = Pod("p");
  pod["spec"]["nodeName"] = nullptr;
  pod["metadata"]["annotations"] = nullptr;
  const Reply created = Post(kPods, pod);
  ASSERT_EQ(created.code, 201) << created.body.dump();
  EXPECT_FALSE(created.body["spec"].contains("nodeName"));
  const Reply secret = Post("/api/v1/namespaces/default/secrets", {{"metadata", {{"name", "s"}}}, {"type", nullptr}});
  ASSERT_EQ(secret.code, 201) << secret.body.dump();
  EXPECT_EQ(secret.body["type"], "Opaque");
  const Reply spec = Send("PATCH", kPods + "/p", R"([{"op":"replace","path":"/spec","value":null}])",
                          "application/json-patch+json");
  EXPECT_EQ(spec.code, 200) << spec.body.dump();
  EXPECT_EQ(Send("GET", kPods, "", "").code, 200);
}

TEST_F(HardeningTest, WrongDeleteOptionsAre400NamingTheFieldAndDeleteNothing) {
  ASSERT_EQ(Post(kPods, Pod("p")).code, 201);
  const std::uint64_t before = rv();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"propagationPolicy":5})", "propagationPolicy"},
      {R"({"orphanDependents":"yes"})", "orphanDependents"},
      {R"({"preconditions":"x"})", "preconditions"},
      {R"({"preconditions":{"uid":1}})", "preconditions.uid"},
      {R"({"dryRun":"All"})", "dryRun"},
      {R"({"gracePeriodSeconds":"1"})", "gracePeriodSeconds"},
      {R"("x")", "DeleteOptions"},
      {NestedArrays(100000), "deeper than"},
  };
  for (const auto& [body, field] : cases) {
    ExpectBadRequest(Send("DELETE", kPods + "/p", body), field, "delete " + body.substr(0, 40));
    ExpectBadRequest(Send("DELETE", kPods, body), field, "deletecollection " + body.substr(0, 40));
    ExpectBadRequest(Send("DELETE", kPods + "?labelSelector=none%3Dx", body), field, "empty deletecollection");
  }
  ExpectBadRequest(Send("DELETE", kPods + "/p?gracePeriodSeconds=-1"), "gracePeriodSeconds", "query");
  EXPECT_EQ(rv(), before);
  EXPECT_EQ(Send("DELETE", kPods + "/p", R"({"propagationPolicy":"Background"})").code, 200);
}

// Every built-in kind with values of every JSON type in the fields the emulator reads:
// never a 500, and what was accepted still lists and prints as a Table.
TEST_F(HardeningTest, NoValueOfAnyTypeInAnyReadFieldIsAnInternalError) {
  const std::vector<json> values = {nullptr, 5, -1.5, true, "x", "", json::array(), json::array({1}),
                                    json::object(), {{"a", 1}}};
  const std::vector<std::pair<std::string, std::vector<std::string>>> kinds = {
      {kPods, {"/metadata/name", "/metadata/labels", "/metadata/ownerReferences", "/spec", "/spec/nodeName",
               "/spec/containers", "/status", "/status/phase", "/status/containerStatuses", "/metadata/finalizers"}},
      {"/api/v1/namespaces/default/secrets", {"/type", "/data", "/stringData", "/metadata/annotations"}},
      {"/api/v1/namespaces/default/services", {"/spec", "/spec/type", "/spec/clusterIP", "/spec/ports"}},
      {"/api/v1/namespaces/default/events", {"/involvedObject", "/lastTimestamp", "/type", "/count"}},
      {"/apis/coordination.k8s.io/v1/namespaces/default/leases", {"/spec", "/spec/holderIdentity"}},
      {kWidgets, {"/metadata/labels", "/spec", "/spec/replicas", "/status", "/spec/color"}},
  };
  int n = 0;
  for (const auto& [path, pointers] : kinds) {
    for (const auto& pointer : pointers) {
      for (const json& v : values) {
        const json object = With({{"metadata", {{"name", "o" + std::to_string(n++)}}}, {"spec", json::object()}},
                                 pointer, v);
        const Reply r = Post(path, object);
        EXPECT_LT(r.code, 500) << path << " " << object.dump() << ": " << r.body.dump();
        const Reply merged = Send("PATCH", path + "/o0", json({{"x", object}}).dump(), "application/merge-patch+json");
        EXPECT_LT(merged.code, 500) << merged.body.dump();
      }
    }
    Request table;
    table.method = "GET";
    table.path = path;
    table.accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
    EXPECT_EQ(api_.Handle(table).code, 200) << path;
  }
}

// ---- depth, size, long strings ----

TEST_F(HardeningTest, DeepJsonAndYamlBodiesAre400) {
  const std::uint64_t before = rv();
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {NestedArrays(100000), "application/json"},
      {objects, "application/json"},
      {NestedArrays(kMaxDepth + 1), "application/json"},
      {NestedArrays(100000), "application/yaml"},
      {NestedArrays(kMaxDepth + 1), "application/yaml"},
  };
  for (const auto& [body, type] : bodies) {
    const Reply r = Send("POST", kPods, body, type);
    EXPECT_EQ(r.code, 400) << type << " " << body.size() << ": " << r.body.dump().substr(0, 300);
    const Reply patch = Send("PATCH", kPods + "/p", body, type == "application/json" ? "application/merge-patch+json"
                                                                                     : "application/apply-patch+yaml");
    EXPECT_EQ(patch.code, 400) << patch.body.dump().substr(0, 300);
  }
  EXPECT_EQ(rv(), before);
  EXPECT_EQ(Send("GET", "/healthz").code, 200);
}

TEST_F(HardeningTest, NestingUpToTheLimitIsKeptAndPatchesCannotGoDeeper) {
  // {"spec": {"template": ...}} is 3 levels: the rest, arrays.
  const std::string body = R"({"metadata":{"name":"deep"},"spec":{"replicas":1,"template":{"a":)" +
                           NestedArrays(kMaxDepth - 3) + "}}}";
  const Reply created = Send("POST", kWidgets, body);
  ASSERT_EQ(created.code, 201) << created.body.dump().substr(0, 300);
  EXPECT_FALSE(DeeperThan(created.body));
  EXPECT_TRUE(DeeperThan(created.body, kMaxDepth - 1));
  const std::uint64_t before = rv();
  // The patch adds a value well under the limit, but at the innermost array: the result
  // is too deep.
  std::string innermost = "/spec/template/a";
  for (int i = 0; i < kMaxDepth - 4; ++i) innermost += "/0";
  const std::string patch = R"([{"op":"add","path":")" + innermost + R"(/-","value":)" + NestedArrays(10) + "}]";
  ExpectBadRequest(Send("PATCH", kWidgets + "/deep", patch, "application/json-patch+json"), "deeper than",
                   "json patch");
  EXPECT_EQ(rv(), before);
}

TEST_F(HardeningTest, YamlAliasBombsAndLongScalarsAreHandled) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'k'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [*" + static_cast<char>(c - 1);
    for (int i = 0; i < 9; ++i) bomb += std::string(", *") + static_cast<char>(c - 1);
    bomb += "]\n";
  }
  ExpectBadRequest(Send("POST", kPods, bomb, "application/yaml"), "excessive aliasing", "alias bomb");
  // A plain scalar of 200000 digits stays a string (matching it against the number
  // patterns would overflow the stack).
  const std::string digits(200000, '7');
  const Reply cm = Send("POST", "/api/v1/namespaces/default/configmaps",
                        "metadata:\n  name: digits\ndata:\n  k: " + digits + "\n", "application/yaml");
  ASSERT_EQ(cm.code, 201) << cm.body.dump().substr(0, 300);
  EXPECT_EQ(cm.body["data"]["k"], digits);
}

TEST_F(HardeningTest, LongStringsAgainstSchemaPatternsAre422NotACrash) {
  const std::uint64_t before = rv();
  const Reply r = Post(kWidgets, {{"metadata", {{"name", "w"}}}, {"spec", {{"replicas", 1}, {"color", std::string(200000, 'a')}}}});
  EXPECT_EQ(r.code, 422) << r.body.dump().substr(0, 300);
  EXPECT_NE(r.message().find("spec.color"), std::string::npos);
  EXPECT_EQ(rv(), before);
  // A pattern nested too deeply for std::regex to compile is not checked.
  json crd = json::parse(R"({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.test.star.dev"},
    "spec": {"group": "test.star.dev", "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
      "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
          "s": {"type": "string"}, "n": {"type": 5}}}}}}}]}})");
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["s"]["pattern"] =
      std::string(100000, '(') + "a" + std::string(100000, ')');
  ASSERT_EQ(Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).code, 201);
  const Reply gizmo = Post("/apis/test.star.dev/v1/namespaces/default/gizmos",
                           {{"metadata", {{"name", "g"}}}, {"spec", {{"s", "b"}, {"n", "x"}}}});
  EXPECT_EQ(gizmo.code, 201) << gizmo.body.dump().substr(0, 300);
}

TEST_F(HardeningTest, JsonPatchesThatGrowWithoutBoundAre413) {
  ASSERT_EQ(Post(kWidgets, {{"metadata", {{"name", "w"}}}, {"spec", {{"replicas", 1}, {"template", {{"a", std::string(1000, 'x')}}}}}}).code, 201);
  const std::uint64_t before = rv();
  json doubling = json::array();
  for (int i = 0; i < 20; ++i) {
    doubling.push_back({{"op", "copy"}, {"from", "/spec/template"}, {"path", "/spec/template/t" + std::to_string(i)}});
  }
  Reply r = Send("PATCH", kWidgets + "/w", doubling.dump(), "application/json-patch+json");
  EXPECT_EQ(r.code, 413) << r.message();
  json many = json::array();
  for (size_t i = 0; i <= kMaxJsonPatchOperations; ++i) many.push_back({{"op", "test"}, {"path", "/kind"}, {"value", "Widget"}});
  r = Send("PATCH", kWidgets + "/w", many.dump(), "application/json-patch+json");
  EXPECT_EQ(r.code, 413) << r.message();
  EXPECT_EQ(r.body["reason"], "RequestEntityTooLarge");
  EXPECT_EQ(rv(), before);
}

TEST_F(HardeningTest, BodiesOver3MiBAre413) {
  const std::uint64_t before = rv();
  json cm = {{"metadata", {{"name", "big"}}}, {"data", {{"k", std::string(kMaxBodyBytes, 'x')}}}};
  const Reply r = Post("/api/v1/namespaces/default/configmaps", cm);
  EXPECT_EQ(r.code, 413);
  EXPECT_EQ(r.body["reason"], "RequestEntityTooLarge");
  EXPECT_EQ(r.message(), "Request entity too large: limit is 3145728");
  EXPECT_EQ(rv(), before);
}

TEST_F(HardeningTest, DeepProtobufBodiesAreRefusedCleanly) {
  // A ConfigMap whose metadata holds an unknown field nested 100000 messages deep.
  auto varint = [](std::string& out, size_t v) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  };
  auto field = [&](int number, const std::string& bytes) {
    std::string out;
    varint(out, static_cast<size_t>(number << 3 | 2));
    varint(out, bytes.size());
    return out + bytes;
  };
  std::string nested;
  for (int i = 0; i < 100000; ++i) nested = field(99, nested);
  const std::string type_meta = field(1, "v1") + field(2, "ConfigMap");
  const std::string raw = field(1, field(1, "pb") + nested);
  const std::string body = std::string("k8s\0", 4) + field(1, type_meta) + field(2, raw);
  const Reply r = Send("POST", "/api/v1/namespaces/default/configmaps", body, "application/vnd.kubernetes.protobuf");
  EXPECT_LT(r.code, 500) << r.body.dump().substr(0, 300);
  EXPECT_EQ(Send("GET", "/healthz").code, 200);
}

// ---- names and labels ----

TEST_F(HardeningTest, NamesAndLabelsLongerThanKubernetesAllowsAre422) {
  const std::string label63(63, 'a');
  const std::string name253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(name253.size(), 253u);
  struct Case {
    std::string path;
    json object;
    std::string field, why;
  };
  const std::vector<Case> cases = {
      {kPods, With(Pod("x"), "/metadata/name", name253 + "c"), "metadata.name", "no more than 253"},
      {"/api/v1/namespaces", {{"metadata", {{"name", std::string(64, 'n')}}}}, "metadata.name", "no more than 63"},
      {"/api/v1/namespaces/default/services", {{"metadata", {{"name", "1abc"}}}}, "metadata.name", "DNS-1035"},
      {kPods, With(Pod("x"), "/metadata/labels/app", std::string(64, 'v')), "metadata.labels", "no more than 63"},
      {kPods, With(Pod("x"), "/metadata/labels/app", "a b"), "metadata.labels", "a valid label"},
      {kPods, With(Pod("x"), "/metadata/labels", {{std::string(64, 'k'), "v"}}), "metadata.labels", "name part"},
      {kPods, With(Pod("x"), "/metadata/labels", {{"Bad_Prefix/k", "v"}}), "metadata.labels", "prefix part"},
      {kPods, With(Pod("x"), "/metadata/annotations", {{"a", std::string(kMaxAnnotationsBytes, 'v')}}),
       "metadata.annotations", "at most 262144 bytes"},
      {kPods, {{"metadata", {{"generateName", "Bad_"}}}}, "metadata.generateName", "RFC 1123 subdomain"},
      {kWidgets, {{"metadata", {{"name", std::string(300, 'w')}}}, {"spec", {{"replicas", 1}}}}, "metadata.name",
       "no more than 253"},
  };
  for (const Case& c : cases) {
    const std::uint64_t before = rv();
    const Reply r = Post(c.path, c.object);
    EXPECT_EQ(r.code, 422) << c.field << " " << c.why << ": " << r.body.dump().substr(0, 300);
    EXPECT_EQ(r.body.value("reason", ""), "Invalid");
    EXPECT_NE(r.message().find(c.field), std::string::npos) << r.message().substr(0, 300);
    EXPECT_NE(r.message().find(c.why), std::string::npos) << r.message().substr(0, 300);
    EXPECT_EQ(rv(), before);
  }
  // At the limits: accepted; a long generateName is cut so that the name stays a label.
  EXPECT_EQ(Post(kPods, With(Pod("x"), "/metadata/name", name253)).code, 201);
  EXPECT_EQ(Post(kPods, With(Pod("y"), "/metadata/labels", {{"example.com/" + label63, label63}})).code, 201);
  EXPECT_EQ(Post("/api/v1/namespaces", {{"metadata", {{"name", label63}}}}).code, 201);
  json generated = Pod("");
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = std::string(100, 'g');
  const Reply g = Post(kPods, generated);
  ASSERT_EQ(g.code, 201) << g.body.dump().substr(0, 300);
  EXPECT_EQ(g.body["metadata"]["name"].get<std::string>().size(), kGenerateNamePrefix + 5);
}

// ---- fault rules ----

TEST_F(HardeningTest, OutOfRangeFaultRulesAre400NamingTheFieldAndKeepTheRules) {
  ASSERT_EQ(Post("/emulator/faults", {{"rules", {{{"verb", "get"}, {"status", 503}, {"count", 1}}}}}).code, 200);
  const json rules = Send("GET", "/emulator/faults").body;
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"status", 200}}, "status"},         {{{"status", 600}}, "status"},
      {{{"status", 399}}, "status"},         {{{"status", "500"}}, "status"},
      {{{"status", 500.5}}, "status"},       {{{"status", 4294967796LL}}, "status"},
      {{{"count", -1}}, "count"},            {{{"count", 1.5}}, "count"},
      {{{"count", 18446744073709551615ULL}}, "count"},
      {{{"probability", 1.5}}, "probability"}, {{{"probability", -0.1}}, "probability"},
      {{{"probability", "0.5"}}, "probability"}, {{{"seed", -1}}, "seed"},
      {{{"seed", 1.5}}, "seed"},             {{{"latency", -5}}, "latency"},
      {{{"latency", "2h"}}, "latency"},      {{{"latency", "-1s"}}, "latency"},
      {{{"latency", "abc"}}, "latency"},     {{{"latency", 1e300}}, "latency"},
      {{{"latency", 3600001}}, "latency"},   {{{"latency", json::array()}}, "latency"},
      {{{"dropWatchAfter", -1}}, "dropWatchAfter"}, {{{"dropWatchAfter", 2147483648LL}}, "dropWatchAfter"},
      {{{"dropWatchAfter", "3"}}, "dropWatchAfter"}, {{{"verb", 5}}, "verb"},
  };
  for (const auto& [rule, field] : bad) {
    for (const char* method : {"POST", "PUT"}) {
      const Reply r = Send(method, "/emulator/faults", json({{"rules", {{{"verb", "get"}, {"count", 1}}, rule}}}).dump());
      ExpectBadRequest(r, "\"" + field + "\"", std::string(method) + " " + rule.dump());
      EXPECT_EQ(Send("GET", "/emulator/faults").body, rules) << "the rules stay";
    }
  }
  for (const json& rule : {json{{"status", 400}}, json{{"status", 599}}, json{{"count", 0}}, json{{"probability", 0}},
                           json{{"probability", 1}}, json{{"seed", 18446744073709551615ULL}}, json{{"latency", "1h"}},
                           json{{"latency", 0}}, json{{"dropWatchAfter", 0}}}) {
    EXPECT_TRUE(FaultRule::FromJson(rule).ok()) << rule.dump();
  }
}

TEST(FaultSpec, OutOfRangeNumbersAreRefusedNamingTheKey) {
  for (const std::string spec :
       {"status=4294967796", "status=5e2", "status=abc", "count=1e30", "count=-1", "seed=-1", "seed=1.5",
        "probability=nan", "probability=2", "latency=1e308h", "latency=nan", "latency=inf", "latency=2h",
        "dropWatchAfter=99999999999", "dropWatchAfter=-1", "count=99999999999999999999"}) {
    const auto r = FaultRule::Parse(spec);
    ASSERT_FALSE(r.ok()) << spec;
    const std::string key = spec.substr(0, spec.find('='));
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  const auto ok = FaultRule::Parse("status=599,count=0,seed=18446744073709551615,latency=1h,dropWatchAfter=0");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->seed, 18446744073709551615ULL);
  for (const std::string text : {"1e400", "inf", "nan", "-1ms", "9999999h", "1e20"}) {
    EXPECT_FALSE(ParseDuration(text).ok()) << text;
  }
  EXPECT_EQ(*ParseDuration("8760h"), kMaxDuration);
}

TEST_F(HardeningTest, DropWatchAfterZeroEndsTheWatchBeforeAnyEvent) {
  ASSERT_EQ(Post(kPods, Pod("p")).code, 201);
  ASSERT_EQ(Post("/emulator/faults", {{"rules", {{{"verb", "watch"}, {"dropWatchAfter", 0}}}}}).code, 200);
  Send("GET", kPods + "?watch=1");
  ASSERT_NE(sink_, nullptr);
  EXPECT_TRUE(sink_->closed);
  EXPECT_TRUE(sink_->lines.empty());
}

// ---- query parameters ----

TEST_F(HardeningTest, NumericQueryParametersAreRangeChecked) {
  struct Case {
    std::string query, name;
  };
  for (const Case& c : {Case{"?watch=1&resourceVersion=-1", "resource version"},
                        Case{"?watch=1&resourceVersion=1a", "resource version"},
                        Case{"?watch=1&resourceVersion=99999999999999999999999", "resource version"},
                        Case{"?watch=1&resourceVersion=+5", "resource version"},
                        Case{"?watch=1&timeoutSeconds=-5", "timeoutSeconds"},
                        Case{"?watch=1&timeoutSeconds=1e3", "timeoutSeconds"},
                        Case{"?watch=1&timeoutSeconds=9999999999999999999999", "timeoutSeconds"},
                        Case{"?limit=-1", "limit"}, Case{"?limit=x", "limit"},
                        Case{"?resourceVersion=abc", "resource version"}}) {
    ExpectBadRequest(Send("GET", kPods + c.query), c.name, c.query);
  }
  EXPECT_EQ(Send("GET", kPods + "?limit=500&resourceVersion=0").code, 200);
  Send("GET", kPods + "?watch=1&timeoutSeconds=0&resourceVersion=18446744073709551615");
  ASSERT_NE(sink_, nullptr);
}

// ---- over HTTP: the server survives ----

TEST(HardeningOverHttp, TheServerAnswersAfterDeepAndHugeBodies) {
  ApiServerOptions options;
  options.crds_dir = STAR_APISERVER_TESTDATA "/crds";
  ApiServer server(options);
  ASSERT_TRUE(server.Start().ok());
  web::http::client::http_client client{web::uri(server.url())};
  auto post = [&](const std::string& body, const std::string& type) {
    web::http::http_request req(web::http::methods::POST);
    req.set_request_uri(web::uri(kPods));
    req.set_body(std::vector<unsigned char>(body.begin(), body.end()));
    req.headers().set_content_type(type);
    return client.request(req).get().status_code();
  };
  EXPECT_EQ(post(NestedArrays(100000), "application/json"), 400);
  EXPECT_EQ(post(NestedArrays(100000), "application/yaml"), 400);
  EXPECT_EQ(post(std::string(kMaxBodyBytes + 1, ' '), "application/json"), 413);
  EXPECT_EQ(post(json(With(Pod("p"), "/metadata/name", 5)).dump(), "application/json"), 400);
  EXPECT_EQ(client.request(web::http::methods::GET, "/healthz").get().status_code(), 200);
}

}  // namespace
}  // namespace star::apiserver
