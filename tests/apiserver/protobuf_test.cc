// Protobuf request bodies: the wire reader, each kind's decoding into JSON (on bodies built
// here byte by byte, and on bytes kubectl 1.32 sent), malformed bodies, and the API's
// answers to them (201, 400, 415) without HTTP.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api.h"
#include "protobuf.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

// --- A protobuf writer, enough to build bodies by hand.

std::string Varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Tag(int number, int wire_type) { return Varint((static_cast<std::uint64_t>(number) << 3) | wire_type); }
std::string Len(int number, const std::string& bytes) { return Tag(number, 2) + Varint(bytes.size()) + bytes; }
std::string Var(int number, std::uint64_t v) { return Tag(number, 0) + Varint(v); }
std::string Entry(int number, const std::string& key, const std::string& value) {
  return Len(number, Len(1, key) + Len(2, value));
}

// "k8s\0" + runtime.Unknown{typeMeta, raw, contentEncoding "", contentType ""}.
std::string Envelope(const std::string& api_version, const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + Len(1, Len(1, api_version) + Len(2, kind)) + Len(2, raw) + Len(3, "") +
         Len(4, "");
}

std::string Hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// What kubectl 1.32 sent for `create namespace foo`, `create secret generic s1
// --from-literal=a=b` and `create service clusterip svc1 --tcp=80:8080`.
const std::string kKubectlNamespace = Hex(
    "6b3873000a0f0a02763112094e616d657370616365121b0a130a03666f6f12001a0022002a0032003800420012001a020a001a002200");
const std::string kKubectlSecret = Hex(
    "6b3873000a0c0a0276311206536563726574121e0a120a02733112001a0022002a0032003800420012060a01611201621a001a002200");
const std::string kKubectlService = Hex(
    "6b3873000a0d0a027631120753657276696365126c0a210a047376633112001a0022002a003200380042005a0b0a0361707012047376"
    "633112430a1b0a0738302d38303830120354435018502207080010903f1a002800120b0a036170701204737663311a002209436c7573"
    "74657249503a00420052005a00600068001a020a001a002200");

json Decode(const std::string& body) {
  auto r = DecodeKubernetesProtobuf(body);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : json();
}

Status DecodeError(const std::string& body) {
  auto r = DecodeKubernetesProtobuf(body);
  EXPECT_FALSE(r.ok()) << "decoded: " << (r.ok() ? r->dump() : "");
  return r.ok() ? Status::Ok() : r.status();
}

// --- The wire reader.

TEST(WireReaderTest, ReadsEachWireTypeInOrder) {
  const std::string data = Var(1, 300) + Tag(2, 1) + std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8) +
                           Len(3, "abc") + Tag(4, 5) + std::string("\xff\x00\x00\x00", 4) + Var(536870911, 1);
  WireReader r(data);
  auto f = r.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->number, 1);
  EXPECT_EQ(f->type, WireType::kVarint);
  EXPECT_EQ(f->varint, 300u);
  f = r.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->type, WireType::kFixed64);
  EXPECT_EQ(f->varint, 0x0807060504030201u);
  f = r.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->type, WireType::kLengthDelimited);
  EXPECT_EQ(f->bytes, "abc");
  f = r.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->type, WireType::kFixed32);
  EXPECT_EQ(f->varint, 0xffu);
  f = r.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->number, 536870911) << "the largest field number";
  EXPECT_TRUE(r.done());
}

TEST(WireReaderTest, NegativeInt32IsTenBytesOfTwosComplement) {
  const std::string data = Var(1, static_cast<std::uint64_t>(std::int64_t{-5}));
  WireReader r(data);  // reads a view: `data` must outlive it
  auto f = r.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(static_cast<std::int64_t>(f->varint), -5);
}

TEST(WireReaderTest, MalformedInputIsAnErrorAndEndsTheReader) {
  struct Case {
    std::string data, message;
  };
  const Case cases[] = {
      {"\x08", "truncated varint at byte 1"},
      {"\x08\x80", "truncated varint"},
      {"\x80", "truncated field tag at byte 0"},
      {std::string("\x08") + std::string(10, '\xff') + "\x01", "longer than 10 bytes"},
      {"\x12\x05" "ab", "truncated length-delimited field 2 at byte 0 (needs 5 bytes, 2 left)"},
      {"\x12", "truncated length"},
      {"\x09\x01\x02", "truncated 64-bit field 1"},
      {"\x0d\x01", "truncated 32-bit field 1"},
      {"\x0b", "unsupported wire type 3 of field 1"},
      {"\x0c", "unsupported wire type 4"},
      {"\x0e", "unsupported wire type 6"},
      {std::string("\x00\x01", 2), "invalid field number 0"},
  };
  for (const auto& c : cases) {
    WireReader r(c.data);
    auto f = r.Next();
    ASSERT_FALSE(f.ok()) << "data " << json(c.data).dump(-1, ' ', false, json::error_handler_t::replace);
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(c.message), std::string::npos) << f.status() << " wants " << c.message;
    EXPECT_TRUE(r.done()) << c.message;
  }
}

// --- Kinds.

TEST(ProtobufDecodeTest, NamespaceAsKubectlSendsIt) {
  EXPECT_EQ(Decode(kKubectlNamespace),
            json::parse(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"foo"},"spec":{},
                            "status":{}})"));
}

TEST(ProtobufDecodeTest, NamespaceWithFinalizersLabelsAndOwner) {
  const std::string owner = Len(1, "Widget") + Len(3, "w") + Len(4, "u-1") + Len(5, "test.star.dev/v1") + Var(6, 1);
  const std::string meta = Len(1, "team-a") + Var(7, 3) + Entry(11, "app", "demo") + Entry(11, "tier", "web") +
                           Entry(12, "note", "") + Len(13, owner) + Len(14, "example.com/a") +
                           Len(14, "example.com/b") + Len(8, Var(1, 1700000000));
  const std::string raw = Len(1, meta) + Len(2, Len(1, "kubernetes")) + Len(3, Len(1, "Terminating"));
  EXPECT_EQ(Decode(Envelope("v1", "Namespace", raw)), json::parse(R"({
      "apiVersion":"v1","kind":"Namespace",
      "metadata":{"name":"team-a","generation":3,"labels":{"app":"demo","tier":"web"},"annotations":{"note":""},
                  "ownerReferences":[{"kind":"Widget","name":"w","uid":"u-1","apiVersion":"test.star.dev/v1",
                                      "controller":true}],
                  "finalizers":["example.com/a","example.com/b"],"creationTimestamp":"2023-11-14T22:13:20Z"},
      "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Terminating"}})"));
}

TEST(ProtobufDecodeTest, ConfigMapDataBinaryDataAndImmutable) {
  const std::string raw = Len(1, Len(1, "cm1") + Len(3, "default")) + Entry(2, "a", "b") + Entry(2, "c", "") +
                          Entry(3, "bin", std::string("\x00\xff\x10", 3)) + Var(4, 0);
  EXPECT_EQ(Decode(Envelope("v1", "ConfigMap", raw)), json::parse(R"({
      "apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1","namespace":"default"},
      "data":{"a":"b","c":""},"binaryData":{"bin":"AP8Q"},"immutable":false})"))
      << "immutable is a pointer in Go: an explicit false is kept";
}

TEST(ProtobufDecodeTest, SecretAsKubectlSendsItHasBase64Data) {
  EXPECT_EQ(Decode(kKubectlSecret), json::parse(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1"},
                                                    "data":{"a":"Yg=="}})"));
  const std::string raw = Len(1, Len(1, "tls")) + Entry(2, "tls.key", "k3y!") + Len(3, "kubernetes.io/tls") +
                          Entry(4, "plain", "text") + Var(5, 1);
  EXPECT_EQ(Decode(Envelope("v1", "Secret", raw)), json::parse(R"({
      "apiVersion":"v1","kind":"Secret","metadata":{"name":"tls"},"data":{"tls.key":"azN5IQ=="},
      "type":"kubernetes.io/tls","stringData":{"plain":"text"},"immutable":true})"));
}

TEST(ProtobufDecodeTest, ServiceAsKubectlSendsIt) {
  EXPECT_EQ(Decode(kKubectlService), json::parse(R"({
      "apiVersion":"v1","kind":"Service","metadata":{"name":"svc1","labels":{"app":"svc1"}},
      "spec":{"ports":[{"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080}],
              "selector":{"app":"svc1"},"type":"ClusterIP"},
      "status":{"loadBalancer":{}}})"));
  // A named target port, a node port, a headless cluster IP.
  const std::string port = Len(1, "http") + Var(3, 80) + Len(4, Var(1, 1) + Len(3, "web")) + Var(5, 30080);
  const std::string spec = Len(1, port) + Len(3, "None") + Len(4, "NodePort") + Len(18, "None");
  EXPECT_EQ(Decode(Envelope("v1", "Service", Len(1, Len(1, "s")) + Len(2, spec)))["spec"], json::parse(R"({
      "ports":[{"name":"http","port":80,"targetPort":"web","nodePort":30080}],"clusterIP":"None",
      "type":"NodePort","clusterIPs":["None"]})"));
}

TEST(ProtobufDecodeTest, PodSpecContainersVolumesAndStatus) {
  const std::string env_from_field = Len(3, Len(1, Len(1, "cfg")) + Len(2, "key"));  // configMapKeyRef
  const std::string container =
      Len(1, "main") + Len(2, "busybox:1.36") + Len(3, "sh") + Len(3, "-c") + Len(4, "sleep 1") +
      Len(6, Var(3, 8080) + Len(4, "TCP")) + Len(7, Len(1, "MODE") + Len(2, "fast")) +
      Len(7, Len(1, "FROM_CM") + Len(3, env_from_field)) +
      Len(8, Entry(1, "cpu", Len(1, "500m")) + Entry(2, "memory", Len(1, "64Mi"))) +
      Len(9, Len(1, "scratch") + Len(3, "/scratch") + Var(2, 1)) +
      Len(11, Len(1, Len(2, Len(1, "/healthz") + Len(2, Var(2, 8080)))) + Var(4, 5)) + Len(14, "IfNotPresent") +
      Var(16, 0);
  const std::string volumes = Len(1, Len(1, "scratch") + Len(2, Len(2, ""))) +
                              Len(1, Len(1, "cfg") + Len(2, Len(19, Len(1, Len(1, "cfg")) + Var(3, 420))));
  const std::string spec = volumes + Len(2, container) + Len(3, "Never") + Var(4, 0) + Entry(7, "disk", "ssd") +
                           Len(10, "node-1") + Var(11, 0) + Len(22, Len(1, "k") + Len(2, "Exists") + Len(4, "NoSchedule"));
  const std::string status = Len(1, "Running") + Len(2, Len(1, "Ready") + Len(2, "True")) + Len(6, "10.0.0.7") +
                             Len(12, Len(1, "10.0.0.7"));
  const json pod = Decode(Envelope("v1", "Pod", Len(1, Len(1, "p1")) + Len(2, spec) + Len(3, status)));
  EXPECT_EQ(pod["spec"], json::parse(R"({
      "volumes":[{"name":"scratch","emptyDir":{}},{"name":"cfg","configMap":{"name":"cfg","defaultMode":420}}],
      "containers":[{"name":"main","image":"busybox:1.36","command":["sh","-c"],"args":["sleep 1"],
                     "ports":[{"containerPort":8080,"protocol":"TCP"}],
                     "env":[{"name":"MODE","value":"fast"},
                            {"name":"FROM_CM","valueFrom":{"configMapKeyRef":{"name":"cfg","key":"key"}}}],
                     "resources":{"limits":{"cpu":"500m"},"requests":{"memory":"64Mi"}},
                     "volumeMounts":[{"name":"scratch","mountPath":"/scratch","readOnly":true}],
                     "readinessProbe":{"httpGet":{"path":"/healthz","port":8080},"periodSeconds":5},
                     "imagePullPolicy":"IfNotPresent"}],
      "restartPolicy":"Never","terminationGracePeriodSeconds":0,"nodeSelector":{"disk":"ssd"},"nodeName":"node-1",
      "tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}]})"))
      << pod.dump(2);
  EXPECT_EQ(pod["status"], json::parse(R"({"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
                                           "podIP":"10.0.0.7","podIPs":[{"ip":"10.0.0.7"}]})"));
}

TEST(ProtobufDecodeTest, EventTimesAndCount) {
  const std::string involved = Len(1, "Widget") + Len(2, "default") + Len(3, "alpha") + Len(5, "test.star.dev/v1");
  const std::string raw = Len(1, Len(1, "alpha.1") + Len(3, "default")) + Len(2, involved) + Len(3, "Tested") +
                          Len(4, "hello") + Len(5, Len(1, "star-operator")) + Len(6, Var(1, 1700000000)) +
                          Len(7, Var(1, 1700000060) + Var(2, 999)) + Var(8, 2) + Len(9, "Normal") +
                          Len(10, Var(1, 1700000000) + Var(2, 123456789)) + Len(14, "star.dev/operator");
  EXPECT_EQ(Decode(Envelope("v1", "Event", raw)), json::parse(R"({
      "apiVersion":"v1","kind":"Event","metadata":{"name":"alpha.1","namespace":"default"},
      "involvedObject":{"kind":"Widget","namespace":"default","name":"alpha","apiVersion":"test.star.dev/v1"},
      "reason":"Tested","message":"hello","source":{"component":"star-operator"},
      "firstTimestamp":"2023-11-14T22:13:20Z","lastTimestamp":"2023-11-14T22:14:20Z","count":2,"type":"Normal",
      "eventTime":"2023-11-14T22:13:20.123456Z","reportingComponent":"star.dev/operator"})"));
}

TEST(ProtobufDecodeTest, LeaseAndDeleteOptions) {
  const std::string spec = Len(1, "op-1") + Var(2, 15) + Len(4, Var(1, 1700000000) + Var(2, 5000)) + Var(5, 0);
  EXPECT_EQ(Decode(Envelope("coordination.k8s.io/v1", "Lease", Len(1, Len(1, "leader")) + Len(2, spec))),
            json::parse(R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"leader"},
                            "spec":{"holderIdentity":"op-1","leaseDurationSeconds":15,
                                    "renewTime":"2023-11-14T22:13:20.000005Z","leaseTransitions":0}})"));
  const std::string options = Var(1, 0) + Len(2, Len(1, "u-1")) + Len(4, "Foreground") + Len(5, "All");
  EXPECT_EQ(Decode(Envelope("v1", "DeleteOptions", options)),
            json::parse(R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0,
                            "preconditions":{"uid":"u-1"},"propagationPolicy":"Foreground","dryRun":["All"]})"));
}

TEST(ProtobufDecodeTest, UnknownFieldsOfEveryWireTypeAreSkipped) {
  const std::string unknown = Var(90, 7) + Tag(91, 1) + std::string(8, '\x01') + Tag(92, 5) + std::string(4, '\x02') +
                              Len(93, Len(1, "nested"));
  const std::string raw = Len(1, unknown + Len(1, "cm1") + unknown + Len(17, Len(1, "managed"))) + unknown +
                          Entry(2, "a", "b") + Len(2, Len(1, "k") + unknown + Len(2, "v"));
  std::string envelope = std::string("k8s\0", 4) + unknown + Len(1, Len(1, "v1") + Len(2, "ConfigMap") + unknown) +
                         Len(2, raw);
  EXPECT_EQ(Decode(envelope), json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"},
                                               "data":{"a":"b","k":"v"}})"));
}

TEST(ProtobufDecodeTest, EveryTruncationOfABodyIsAnErrorOrAPrefixNeverACrash) {
  const std::string body = Envelope("v1", "ConfigMap", Len(1, Len(1, "cm1") + Entry(11, "app", "x")) +
                                                           Entry(2, "a", "b"));
  int errors = 0;
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = DecodeKubernetesProtobuf(body.substr(0, n));
    if (!r.ok()) {
      ++errors;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << n << ": " << r.status();
    }
  }
  EXPECT_GT(errors, 0);
  // Cut inside the object: the envelope is whole, the object's last field is short.
  const std::string raw = Len(1, Len(1, "cm1")) + Entry(2, "a", "b");
  const Status inside = DecodeError(Envelope("v1", "ConfigMap", raw.substr(0, raw.size() - 1)));
  EXPECT_EQ(inside.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(inside.message().find("ConfigMap: truncated length-delimited field 2"), std::string::npos) << inside;
  // A map entry whose value claims more bytes than it has.
  const Status entry = DecodeError(Envelope("v1", "ConfigMap", Len(2, Len(1, "a") + Tag(2, 2) + Varint(10) + "xy")));
  EXPECT_NE(entry.message().find("ConfigMap.data: truncated length-delimited field 2"), std::string::npos) << entry;
}

TEST(ProtobufDecodeTest, MalformedBodiesNameTheProblem) {
  struct Case {
    std::string body, message;
    StatusCode code = StatusCode::kInvalidArgument;
  };
  const Case cases[] = {
      {"{\"kind\":\"ConfigMap\"}", "does not start with the 4-byte prefix"},
      {std::string("k8s\0", 4) + Len(2, ""), "names no kind"},
      {Envelope("v1", "ConfigMap", Len(1, Var(1, 5))), "ConfigMap.metadata.name: wire type varint, expected length-delimited"},
      {Envelope("v1", "ConfigMap", Var(2, 1)), "ConfigMap.data: wire type varint, expected length-delimited"},
      {Envelope("v1", "ConfigMap", Len(1, Len(1, "bad\xff"))), "ConfigMap.metadata.name: a string that is not valid UTF-8"},
      {Envelope("v1", "Namespace", Len(1, Len(8, Var(1, 1) + Var(2, 2000000000)))),
       "Namespace.metadata.creationTimestamp: nanos out of range"},
      {Envelope("v1", "Pod", Len(2, Len(2, Len(6, Var(3, 1) + Tag(4, 2) + Varint(4) + "TC")))),
       "Pod.spec.containers[0].ports[0]: truncated length-delimited field 4 at byte 2 (needs 4 bytes, 2 left)"},
      {Envelope("apps/v1", "Deployment", ""), "protobuf of kind Deployment (apiVersion \"apps/v1\"), which this server "
                                              "reads only as JSON or YAML",
       StatusCode::kUnimplemented},
      {Envelope("v2", "ConfigMap", ""), "kind ConfigMap (apiVersion \"v2\")", StatusCode::kUnimplemented},
      {std::string("k8s\0", 4) + Len(1, Len(1, "v1") + Len(2, "Secret")) + Len(3, "gzip"), "contentEncoding \"gzip\"",
       StatusCode::kUnimplemented},
  };
  for (const auto& c : cases) {
    const Status s = DecodeError(c.body);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s << "\nwants: " << c.message;
  }
}

TEST(ProtobufDecodeTest, KindsListed) {
  const auto kinds = ProtobufKinds();
  for (const char* k : {"v1/Namespace", "v1/ConfigMap", "v1/Secret", "v1/Service", "v1/Pod", "v1/Event",
                        "coordination.k8s.io/v1/Lease", "DeleteOptions"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
  }
}

// --- Through the API, without HTTP.

Response Send(Api& api, const std::string& method, const std::string& path, const std::string& body,
              const std::string& content_type = kProtobufMediaType) {
  Request req;
  req.method = method;
  req.path = path;
  req.accept = "application/vnd.kubernetes.protobuf,application/json";
  req.content_type = content_type;
  req.body = body;
  return api.Handle(req);
}

TEST(ProtobufApiTest, CreateGetAndDeleteWithProtobufBodies) {
  Api api(ApiOptions{});
  Response r = Send(api, "POST", "/api/v1/namespaces/default/secrets", kKubectlSecret);
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(r.content_type, "application/json") << "answers stay JSON";
  r = Send(api, "GET", "/api/v1/namespaces/default/secrets/s1", "", "");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["data"], json({{"a", "Yg=="}}));

  r = Send(api, "POST", "/api/v1/namespaces", kKubectlNamespace);
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(json::parse(r.body)["status"]["phase"], "Active");

  // DeleteOptions in protobuf: a dry run leaves the secret in place; a real one removes it.
  r = Send(api, "DELETE", "/api/v1/namespaces/default/secrets/s1", Envelope("v1", "DeleteOptions", Len(5, "All")));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Send(api, "GET", "/api/v1/namespaces/default/secrets/s1", "", "").code, 200);
  r = Send(api, "DELETE", "/api/v1/namespaces/default/secrets/s1",
           Envelope("v1", "DeleteOptions", Len(4, "Background")));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Send(api, "GET", "/api/v1/namespaces/default/secrets/s1", "", "").code, 404);
}

TEST(ProtobufApiTest, AKindWithoutADecoderIs415AndAMalformedBodyIs400) {
  Api api(ApiOptions{});
  Response r = Send(api, "POST", "/api/v1/nodes", Envelope("v1", "Node", Len(1, Len(1, "n1"))));
  EXPECT_EQ(r.code, 415) << r.body;
  json status = json::parse(r.body);
  EXPECT_EQ(status["reason"], "UnsupportedMediaType");
  EXPECT_NE(status["message"].get<std::string>().find("kind Node"), std::string::npos) << r.body;
  EXPECT_NE(status["message"].get<std::string>().find("only as JSON or YAML"), std::string::npos) << r.body;

  const std::string truncated = kKubectlNamespace.substr(0, kKubectlNamespace.size() - 10);
  r = Send(api, "POST", "/api/v1/namespaces", truncated);
  EXPECT_EQ(r.code, 400) << r.body;
  status = json::parse(r.body);
  EXPECT_EQ(status["reason"], "BadRequest");
  EXPECT_NE(status["message"].get<std::string>().find("truncated"), std::string::npos) << r.body;

  // The body's kind must match the resource it is sent to.
  r = Send(api, "POST", "/api/v1/namespaces/default/configmaps", kKubectlSecret);
  EXPECT_EQ(r.code, 400) << r.body;
  // CBOR stays unread.
  r = Send(api, "POST", "/api/v1/namespaces/default/configmaps", "\xa0", "application/cbor");
  EXPECT_EQ(r.code, 415) << r.body;
}

}  // namespace
}  // namespace star::apiserver
