#include "protobuf.h"

#include <yaml-cpp/binary.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <utility>

namespace star::apiserver {

using nlohmann::json;

// ---------------------------------------------------------------------------------------
// The wire format.

StatusOr<std::uint64_t> WireReader::Varint(const char* what) {
  std::uint64_t value = 0;
  const size_t start = pos_;
  for (int i = 0; i < 10; ++i) {
    if (pos_ >= data_.size()) {
      pos_ = data_.size();
      return Status::InvalidArgument(std::string("truncated ") + what + " at byte " + std::to_string(start));
    }
    const auto byte = static_cast<unsigned char>(data_[pos_++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) return value;
  }
  pos_ = data_.size();
  return Status::InvalidArgument(std::string(what) + " at byte " + std::to_string(start) + " is longer than 10 bytes");
}

StatusOr<WireField> WireReader::Next() {
  const size_t start = pos_;
  auto tag = Varint("field tag");
  if (!tag.ok()) return tag.status();
  WireField f;
  const std::uint64_t number = *tag >> 3;
  if (number == 0 || number > 0x1fffffff) {
    pos_ = data_.size();
    return Status::InvalidArgument("invalid field number " + std::to_string(number) + " at byte " +
                                   std::to_string(start));
  }
  f.number = static_cast<int>(number);
  const int type = static_cast<int>(*tag & 7);
  auto fixed = [&](size_t n) -> Status {
    if (data_.size() - pos_ < n) {
      const size_t left = data_.size() - pos_;
      pos_ = data_.size();
      return Status::InvalidArgument("truncated " + std::to_string(n * 8) + "-bit field " + std::to_string(number) +
                                     " at byte " + std::to_string(start) + " (needs " + std::to_string(n) +
                                     " bytes, " + std::to_string(left) + " left)");
    }
    for (size_t i = 0; i < n; ++i) {
      f.varint |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    }
    pos_ += n;
    return Status::Ok();
  };
  switch (type) {
    case 0: {
      f.type = WireType::kVarint;
      auto v = Varint("varint");
      if (!v.ok()) return v.status();
      f.varint = *v;
      return f;
    }
    case 1: {
      f.type = WireType::kFixed64;
      Status s = fixed(8);
      if (!s.ok()) return s;
      return f;
    }
    case 5: {
      f.type = WireType::kFixed32;
      Status s = fixed(4);
      if (!s.ok()) return s;
      return f;
    }
    case 2: {
      f.type = WireType::kLengthDelimited;
      auto length = Varint("length");
      if (!length.ok()) return length.status();
      const size_t left = data_.size() - pos_;
      if (*length > left) {
        pos_ = data_.size();
        return Status::InvalidArgument("truncated length-delimited field " + std::to_string(number) + " at byte " +
                                       std::to_string(start) + " (needs " + std::to_string(*length) + " bytes, " +
                                       std::to_string(left) + " left)");
      }
      f.bytes = data_.substr(pos_, static_cast<size_t>(*length));
      pos_ += static_cast<size_t>(*length);
      return f;
    }
    default:
      pos_ = data_.size();
      return Status::InvalidArgument("unsupported wire type " + std::to_string(type) + " of field " +
                                     std::to_string(number) + " at byte " + std::to_string(start));
  }
}

namespace {

// ---------------------------------------------------------------------------------------
// What the messages hold: for each kind, its fields with their numbers, JSON names and
// how their values read. Fields not listed are skipped.

enum class Type {
  kString,
  kBytes,        // base64 in JSON
  kInt,          // int32 / int64 varint
  kBool,
  kMessage,
  kTime,         // meta/v1 Time {1 seconds, 2 nanos}: RFC 3339; empty message: null
  kMicroTime,    // meta/v1 MicroTime: RFC 3339 with microseconds
  kQuantity,     // resource.Quantity {1 string}: the string
  kIntOrString,  // intstr.IntOrString {1 type, 2 intVal, 3 strVal}: a number or a string
  kStringMap,    // map<string, string>
  kBytesMap,     // map<string, bytes>
  kQuantityMap,  // map<string, Quantity>
};

struct MessageSpec;
using SpecFn = const MessageSpec& (*)();

struct FieldSpec {
  int number = 0;
  const char* name = "";
  Type type = Type::kString;
  bool repeated = false;
  // The Go field is a pointer: a zero value on the wire is kept (false, 0, ""). Other
  // scalars are left out when zero, as their JSON tags' omitempty does.
  bool pointer = false;
  // The Go field is embedded: its fields belong to the enclosing JSON object.
  bool inlined = false;
  SpecFn message = nullptr;  // kMessage
};

struct MessageSpec {
  std::vector<FieldSpec> fields;
  const FieldSpec* Find(int number) const {
    for (const auto& f : fields) {
      if (f.number == number) return &f;
    }
    return nullptr;
  }
};

FieldSpec Field(int number, const char* name, Type type) {
  FieldSpec f;
  f.number = number;
  f.name = name;
  f.type = type;
  return f;
}
FieldSpec Str(int n, const char* name) { return Field(n, name, Type::kString); }
FieldSpec Int(int n, const char* name) { return Field(n, name, Type::kInt); }
FieldSpec Bool(int n, const char* name) { return Field(n, name, Type::kBool); }
FieldSpec Time(int n, const char* name) { return Field(n, name, Type::kTime); }
FieldSpec MicroTime(int n, const char* name) { return Field(n, name, Type::kMicroTime); }
FieldSpec Quantity(int n, const char* name) { return Field(n, name, Type::kQuantity); }
FieldSpec IntOrString(int n, const char* name) { return Field(n, name, Type::kIntOrString); }
FieldSpec StrMap(int n, const char* name) { return Field(n, name, Type::kStringMap); }
FieldSpec BytesMap(int n, const char* name) { return Field(n, name, Type::kBytesMap); }
FieldSpec QuantityMap(int n, const char* name) { return Field(n, name, Type::kQuantityMap); }
FieldSpec Strs(int n, const char* name) {
  FieldSpec f = Str(n, name);
  f.repeated = true;
  return f;
}
FieldSpec Msg(int n, const char* name, SpecFn message) {
  FieldSpec f = Field(n, name, Type::kMessage);
  f.message = message;
  return f;
}
FieldSpec Msgs(int n, const char* name, SpecFn message) {
  FieldSpec f = Msg(n, name, message);
  f.repeated = true;
  return f;
}
FieldSpec Inline(int n, SpecFn message) {
  FieldSpec f = Msg(n, "", message);
  f.inlined = true;
  return f;
}
FieldSpec Ptr(FieldSpec f) {
  f.pointer = true;
  return f;
}

// meta/v1

const MessageSpec& OwnerReference() {
  static const MessageSpec m{{Str(1, "kind"), Str(3, "name"), Str(4, "uid"), Str(5, "apiVersion"),
                              Ptr(Bool(6, "controller")), Ptr(Bool(7, "blockOwnerDeletion"))}};
  return m;
}

const MessageSpec& ObjectMeta() {
  static const MessageSpec m{{Str(1, "name"), Str(2, "generateName"), Str(3, "namespace"), Str(4, "selfLink"),
                              Str(5, "uid"), Str(6, "resourceVersion"), Int(7, "generation"),
                              Time(8, "creationTimestamp"), Time(9, "deletionTimestamp"),
                              Ptr(Int(10, "deletionGracePeriodSeconds")), StrMap(11, "labels"),
                              StrMap(12, "annotations"), Msgs(13, "ownerReferences", OwnerReference),
                              Strs(14, "finalizers")}};
  return m;
}

const MessageSpec& Condition() {
  static const MessageSpec m{{Str(1, "type"), Str(2, "status"), Int(3, "observedGeneration"),
                              Time(4, "lastTransitionTime"), Str(5, "reason"), Str(6, "message")}};
  return m;
}

const MessageSpec& Preconditions() {
  static const MessageSpec m{{Ptr(Str(1, "uid")), Ptr(Str(2, "resourceVersion"))}};
  return m;
}

const MessageSpec& DeleteOptions() {
  static const MessageSpec m{{Ptr(Int(1, "gracePeriodSeconds")), Msg(2, "preconditions", Preconditions),
                              Ptr(Bool(3, "orphanDependents")), Ptr(Str(4, "propagationPolicy")),
                              Strs(5, "dryRun")}};
  return m;
}

// core/v1: Namespace, ConfigMap, Secret

const MessageSpec& NamespaceSpec() {
  static const MessageSpec m{{Strs(1, "finalizers")}};
  return m;
}

const MessageSpec& NamespaceCondition() {
  static const MessageSpec m{{Str(1, "type"), Str(2, "status"), Time(4, "lastTransitionTime"), Str(5, "reason"),
                              Str(6, "message")}};
  return m;
}

const MessageSpec& NamespaceStatus() {
  static const MessageSpec m{{Str(1, "phase"), Msgs(2, "conditions", NamespaceCondition)}};
  return m;
}

const MessageSpec& Namespace() {
  static const MessageSpec m{
      {Msg(1, "metadata", ObjectMeta), Msg(2, "spec", NamespaceSpec), Msg(3, "status", NamespaceStatus)}};
  return m;
}

const MessageSpec& ConfigMap() {
  static const MessageSpec m{{Msg(1, "metadata", ObjectMeta), StrMap(2, "data"), BytesMap(3, "binaryData"),
                              Ptr(Bool(4, "immutable"))}};
  return m;
}

const MessageSpec& Secret() {
  static const MessageSpec m{{Msg(1, "metadata", ObjectMeta), BytesMap(2, "data"), Str(3, "type"),
                              StrMap(4, "stringData"), Ptr(Bool(5, "immutable"))}};
  return m;
}

// core/v1: Service

const MessageSpec& ServicePort() {
  static const MessageSpec m{{Str(1, "name"), Str(2, "protocol"), Int(3, "port"), IntOrString(4, "targetPort"),
                              Int(5, "nodePort"), Ptr(Str(6, "appProtocol"))}};
  return m;
}

const MessageSpec& ServiceSpec() {
  static const MessageSpec m{
      {Msgs(1, "ports", ServicePort), StrMap(2, "selector"), Str(3, "clusterIP"), Str(4, "type"),
       Strs(5, "externalIPs"), Str(7, "sessionAffinity"), Str(8, "loadBalancerIP"),
       Strs(9, "loadBalancerSourceRanges"), Str(10, "externalName"), Str(11, "externalTrafficPolicy"),
       Int(12, "healthCheckNodePort"), Bool(13, "publishNotReadyAddresses"), Ptr(Str(17, "ipFamilyPolicy")),
       Strs(18, "clusterIPs"), Strs(19, "ipFamilies"), Ptr(Bool(20, "allocateLoadBalancerNodePorts")),
       Ptr(Str(21, "loadBalancerClass")), Ptr(Str(22, "internalTrafficPolicy"))}};
  return m;
}

const MessageSpec& LoadBalancerIngress() {
  static const MessageSpec m{{Str(1, "ip"), Str(2, "hostname")}};
  return m;
}

const MessageSpec& LoadBalancerStatus() {
  static const MessageSpec m{{Msgs(1, "ingress", LoadBalancerIngress)}};
  return m;
}

const MessageSpec& ServiceStatus() {
  static const MessageSpec m{{Msg(1, "loadBalancer", LoadBalancerStatus), Msgs(2, "conditions", Condition)}};
  return m;
}

const MessageSpec& Service() {
  static const MessageSpec m{
      {Msg(1, "metadata", ObjectMeta), Msg(2, "spec", ServiceSpec), Msg(3, "status", ServiceStatus)}};
  return m;
}

// core/v1: Pod

const MessageSpec& LocalObjectReference() {
  static const MessageSpec m{{Str(1, "name")}};
  return m;
}

const MessageSpec& KeySelector() {  // ConfigMapKeySelector and SecretKeySelector
  static const MessageSpec m{{Inline(1, LocalObjectReference), Str(2, "key"), Ptr(Bool(3, "optional"))}};
  return m;
}

const MessageSpec& ObjectFieldSelector() {
  static const MessageSpec m{{Str(1, "apiVersion"), Str(2, "fieldPath")}};
  return m;
}

const MessageSpec& ResourceFieldSelector() {
  static const MessageSpec m{{Str(1, "containerName"), Str(2, "resource"), Quantity(3, "divisor")}};
  return m;
}

const MessageSpec& EnvVarSource() {
  static const MessageSpec m{{Msg(1, "fieldRef", ObjectFieldSelector), Msg(2, "resourceFieldRef", ResourceFieldSelector),
                              Msg(3, "configMapKeyRef", KeySelector), Msg(4, "secretKeyRef", KeySelector)}};
  return m;
}

const MessageSpec& EnvVar() {
  static const MessageSpec m{{Str(1, "name"), Str(2, "value"), Msg(3, "valueFrom", EnvVarSource)}};
  return m;
}

const MessageSpec& EnvSource() {  // ConfigMapEnvSource and SecretEnvSource
  static const MessageSpec m{{Inline(1, LocalObjectReference), Ptr(Bool(2, "optional"))}};
  return m;
}

const MessageSpec& EnvFromSource() {
  static const MessageSpec m{{Str(1, "prefix"), Msg(2, "configMapRef", EnvSource), Msg(3, "secretRef", EnvSource)}};
  return m;
}

const MessageSpec& ContainerPort() {
  static const MessageSpec m{
      {Str(1, "name"), Int(2, "hostPort"), Int(3, "containerPort"), Str(4, "protocol"), Str(5, "hostIP")}};
  return m;
}

const MessageSpec& ResourceRequirements() {
  static const MessageSpec m{{QuantityMap(1, "limits"), QuantityMap(2, "requests")}};
  return m;
}

const MessageSpec& VolumeMount() {
  static const MessageSpec m{{Str(1, "name"), Bool(2, "readOnly"), Str(3, "mountPath"), Str(4, "subPath"),
                              Ptr(Str(5, "mountPropagation")), Str(6, "subPathExpr")}};
  return m;
}

const MessageSpec& ExecAction() {
  static const MessageSpec m{{Strs(1, "command")}};
  return m;
}

const MessageSpec& HttpHeader() {
  static const MessageSpec m{{Str(1, "name"), Str(2, "value")}};
  return m;
}

const MessageSpec& HttpGetAction() {
  static const MessageSpec m{{Str(1, "path"), IntOrString(2, "port"), Str(3, "host"), Str(4, "scheme"),
                              Msgs(5, "httpHeaders", HttpHeader)}};
  return m;
}

const MessageSpec& TcpSocketAction() {
  static const MessageSpec m{{IntOrString(1, "port"), Str(2, "host")}};
  return m;
}

const MessageSpec& GrpcAction() {
  static const MessageSpec m{{Int(1, "port"), Ptr(Str(2, "service"))}};
  return m;
}

const MessageSpec& ProbeHandler() {
  static const MessageSpec m{{Msg(1, "exec", ExecAction), Msg(2, "httpGet", HttpGetAction),
                              Msg(3, "tcpSocket", TcpSocketAction), Msg(4, "grpc", GrpcAction)}};
  return m;
}

const MessageSpec& Probe() {
  static const MessageSpec m{{Inline(1, ProbeHandler), Int(2, "initialDelaySeconds"), Int(3, "timeoutSeconds"),
                              Int(4, "periodSeconds"), Int(5, "successThreshold"), Int(6, "failureThreshold"),
                              Ptr(Int(7, "terminationGracePeriodSeconds"))}};
  return m;
}

const MessageSpec& Container() {
  static const MessageSpec m{
      {Str(1, "name"), Str(2, "image"), Strs(3, "command"), Strs(4, "args"), Str(5, "workingDir"),
       Msgs(6, "ports", ContainerPort), Msgs(7, "env", EnvVar), Msg(8, "resources", ResourceRequirements),
       Msgs(9, "volumeMounts", VolumeMount), Msg(10, "livenessProbe", Probe), Msg(11, "readinessProbe", Probe),
       Str(13, "terminationMessagePath"), Str(14, "imagePullPolicy"), Bool(16, "stdin"), Bool(17, "stdinOnce"),
       Bool(18, "tty"), Msgs(19, "envFrom", EnvFromSource), Str(20, "terminationMessagePolicy"),
       Msg(22, "startupProbe", Probe), Ptr(Str(24, "restartPolicy"))}};
  return m;
}

const MessageSpec& KeyToPath() {
  static const MessageSpec m{{Str(1, "key"), Str(2, "path"), Ptr(Int(3, "mode"))}};
  return m;
}

const MessageSpec& HostPathVolumeSource() {
  static const MessageSpec m{{Str(1, "path"), Ptr(Str(2, "type"))}};
  return m;
}

const MessageSpec& EmptyDirVolumeSource() {
  static const MessageSpec m{{Str(1, "medium"), Ptr(Quantity(2, "sizeLimit"))}};
  return m;
}

const MessageSpec& SecretVolumeSource() {
  static const MessageSpec m{{Str(1, "secretName"), Msgs(2, "items", KeyToPath), Ptr(Int(3, "defaultMode")),
                              Ptr(Bool(4, "optional"))}};
  return m;
}

const MessageSpec& ConfigMapVolumeSource() {
  static const MessageSpec m{{Inline(1, LocalObjectReference), Msgs(2, "items", KeyToPath),
                              Ptr(Int(3, "defaultMode")), Ptr(Bool(4, "optional"))}};
  return m;
}

const MessageSpec& PersistentVolumeClaimVolumeSource() {
  static const MessageSpec m{{Str(1, "claimName"), Bool(2, "readOnly")}};
  return m;
}

const MessageSpec& VolumeSource() {
  static const MessageSpec m{{Msg(1, "hostPath", HostPathVolumeSource), Msg(2, "emptyDir", EmptyDirVolumeSource),
                              Msg(6, "secret", SecretVolumeSource),
                              Msg(10, "persistentVolumeClaim", PersistentVolumeClaimVolumeSource),
                              Msg(19, "configMap", ConfigMapVolumeSource)}};
  return m;
}

const MessageSpec& Volume() {
  static const MessageSpec m{{Str(1, "name"), Inline(2, VolumeSource)}};
  return m;
}

const MessageSpec& Toleration() {
  static const MessageSpec m{{Str(1, "key"), Str(2, "operator"), Str(3, "value"), Str(4, "effect"),
                              Ptr(Int(5, "tolerationSeconds"))}};
  return m;
}

const MessageSpec& PodSpec() {
  static const MessageSpec m{
      {Msgs(1, "volumes", Volume), Msgs(2, "containers", Container), Str(3, "restartPolicy"),
       Ptr(Int(4, "terminationGracePeriodSeconds")), Ptr(Int(5, "activeDeadlineSeconds")), Str(6, "dnsPolicy"),
       StrMap(7, "nodeSelector"), Str(8, "serviceAccountName"), Str(9, "serviceAccount"), Str(10, "nodeName"),
       Bool(11, "hostNetwork"), Bool(12, "hostPID"), Bool(13, "hostIPC"),
       Msgs(15, "imagePullSecrets", LocalObjectReference), Str(16, "hostname"), Str(17, "subdomain"),
       Str(19, "schedulerName"), Msgs(20, "initContainers", Container),
       Ptr(Bool(21, "automountServiceAccountToken")), Msgs(22, "tolerations", Toleration),
       Str(24, "priorityClassName"), Ptr(Int(25, "priority")), Ptr(Bool(27, "shareProcessNamespace")),
       Ptr(Str(29, "runtimeClassName")), Ptr(Bool(30, "enableServiceLinks")), Ptr(Str(31, "preemptionPolicy"))}};
  return m;
}

const MessageSpec& PodCondition() {
  static const MessageSpec m{{Str(1, "type"), Str(2, "status"), Time(3, "lastProbeTime"),
                              Time(4, "lastTransitionTime"), Str(5, "reason"), Str(6, "message")}};
  return m;
}

const MessageSpec& PodIp() {
  static const MessageSpec m{{Str(1, "ip")}};
  return m;
}

const MessageSpec& PodStatus() {
  static const MessageSpec m{{Str(1, "phase"), Msgs(2, "conditions", PodCondition), Str(3, "message"),
                              Str(4, "reason"), Str(5, "hostIP"), Str(6, "podIP"), Time(7, "startTime"),
                              Str(9, "qosClass"), Str(11, "nominatedNodeName"), Msgs(12, "podIPs", PodIp)}};
  return m;
}

const MessageSpec& Pod() {
  static const MessageSpec m{
      {Msg(1, "metadata", ObjectMeta), Msg(2, "spec", PodSpec), Msg(3, "status", PodStatus)}};
  return m;
}

// core/v1: Event

const MessageSpec& ObjectReference() {
  static const MessageSpec m{{Str(1, "kind"), Str(2, "namespace"), Str(3, "name"), Str(4, "uid"),
                              Str(5, "apiVersion"), Str(6, "resourceVersion"), Str(7, "fieldPath")}};
  return m;
}

const MessageSpec& EventSource() {
  static const MessageSpec m{{Str(1, "component"), Str(2, "host")}};
  return m;
}

const MessageSpec& EventSeries() {
  static const MessageSpec m{{Int(1, "count"), MicroTime(2, "lastObservedTime")}};
  return m;
}

const MessageSpec& Event() {
  static const MessageSpec m{
      {Msg(1, "metadata", ObjectMeta), Msg(2, "involvedObject", ObjectReference), Str(3, "reason"),
       Str(4, "message"), Msg(5, "source", EventSource), Time(6, "firstTimestamp"), Time(7, "lastTimestamp"),
       Int(8, "count"), Str(9, "type"), MicroTime(10, "eventTime"), Msg(11, "series", EventSeries),
       Str(12, "action"), Msg(13, "related", ObjectReference), Str(14, "reportingComponent"),
       Str(15, "reportingInstance")}};
  return m;
}

// coordination.k8s.io/v1: Lease

const MessageSpec& LeaseSpec() {
  static const MessageSpec m{{Ptr(Str(1, "holderIdentity")), Ptr(Int(2, "leaseDurationSeconds")),
                              MicroTime(3, "acquireTime"), MicroTime(4, "renewTime"),
                              Ptr(Int(5, "leaseTransitions")), Ptr(Str(6, "strategy")),
                              Ptr(Str(7, "preferredHolder"))}};
  return m;
}

const MessageSpec& Lease() {
  static const MessageSpec m{{Msg(1, "metadata", ObjectMeta), Msg(2, "spec", LeaseSpec)}};
  return m;
}

// apiVersion/kind -> the object's message.
const std::map<std::string, SpecFn>& Kinds() {
  static const std::map<std::string, SpecFn> kinds = {
      {"v1/Namespace", Namespace}, {"v1/ConfigMap", ConfigMap}, {"v1/Secret", Secret},
      {"v1/Service", Service},     {"v1/Pod", Pod},             {"v1/Event", Event},
      {"coordination.k8s.io/v1/Lease", Lease},
  };
  return kinds;
}

// ---------------------------------------------------------------------------------------
// Decoding.

const char* WireTypeName(WireType t) {
  switch (t) {
    case WireType::kVarint:
      return "varint";
    case WireType::kFixed64:
      return "64-bit";
    case WireType::kLengthDelimited:
      return "length-delimited";
    case WireType::kFixed32:
      return "32-bit";
  }
  return "unknown";
}

Status Malformed(const std::string& path, const std::string& problem) {
  return Status::InvalidArgument(path.empty() ? problem : path + ": " + problem);
}

std::string Join(const std::string& path, const std::string& name) {
  if (path.empty()) return name;
  if (name.empty()) return path;
  return path + "." + name;
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

StatusOr<std::string> Text(std::string_view bytes, const std::string& path) {
  if (!ValidUtf8(bytes)) return Malformed(path, "a string that is not valid UTF-8");
  return std::string(bytes);
}

std::string Base64(std::string_view bytes) {
  return YAML::EncodeBase64(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

// seconds/nanos since the epoch as RFC 3339 in UTC, with `micros` six fraction digits.
StatusOr<std::string> FormatTime(std::string_view message, bool micros, const std::string& path) {
  std::int64_t seconds = 0, nanos = 0;
  WireReader r(message);
  while (!r.done()) {
    auto f = r.Next();
    if (!f.ok()) return Malformed(path, f.status().message());
    if (f->number != 1 && f->number != 2) continue;
    if (f->type != WireType::kVarint) {
      return Malformed(path, std::string("field ") + std::to_string(f->number) + " is " + WireTypeName(f->type) +
                                 ", expected varint");
    }
    (f->number == 1 ? seconds : nanos) = static_cast<std::int64_t>(f->varint);
  }
  // 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z, as meta/v1 Time allows.
  if (seconds < -62135596800LL || seconds > 253402300799LL) {
    return Malformed(path, "a time outside years 1 to 9999 (" + std::to_string(seconds) + " s)");
  }
  if (nanos < 0 || nanos > 999999999) return Malformed(path, "nanos out of range (" + std::to_string(nanos) + ")");
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  if (micros) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(nanos / 1000));
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return std::string(buf);
}

// resource.Quantity {1 string}.
StatusOr<std::string> QuantityText(std::string_view message, const std::string& path) {
  std::string text;
  WireReader r(message);
  while (!r.done()) {
    auto f = r.Next();
    if (!f.ok()) return Malformed(path, f.status().message());
    if (f->number != 1) continue;
    if (f->type != WireType::kLengthDelimited) {
      return Malformed(path, std::string("field 1 is ") + WireTypeName(f->type) + ", expected length-delimited");
    }
    auto s = Text(f->bytes, path);
    if (!s.ok()) return s.status();
    text = std::move(*s);
  }
  return text;
}

// intstr.IntOrString {1 type (0 int, 1 string), 2 intVal, 3 strVal}: a JSON number or string.
StatusOr<json> IntOrStringValue(std::string_view message, const std::string& path) {
  std::int64_t type = 0, int_val = 0;
  std::string str_val;
  WireReader r(message);
  while (!r.done()) {
    auto f = r.Next();
    if (!f.ok()) return Malformed(path, f.status().message());
    if (f->number == 1 || f->number == 2) {
      if (f->type != WireType::kVarint) {
        return Malformed(path, std::string("field ") + std::to_string(f->number) + " is " + WireTypeName(f->type) +
                                   ", expected varint");
      }
      (f->number == 1 ? type : int_val) = static_cast<std::int64_t>(f->varint);
    } else if (f->number == 3) {
      if (f->type != WireType::kLengthDelimited) {
        return Malformed(path, std::string("field 3 is ") + WireTypeName(f->type) + ", expected length-delimited");
      }
      auto s = Text(f->bytes, path);
      if (!s.ok()) return s.status();
      str_val = std::move(*s);
    }
  }
  if (type == 1) return json(str_val);
  if (type != 0) return Malformed(path, "IntOrString type " + std::to_string(type) + " (expected 0 or 1)");
  return json(static_cast<std::int32_t>(int_val));
}

Status DecodeMessage(std::string_view data, const MessageSpec& spec, json& out, const std::string& path);

// One map entry {1 key, 2 value} into out[key].
Status DecodeMapEntry(std::string_view data, Type type, json& out, const std::string& path) {
  std::string key;
  json value = type == Type::kQuantityMap ? json("0") : json("");
  WireReader r(data);
  while (!r.done()) {
    auto f = r.Next();
    if (!f.ok()) return Malformed(path, f.status().message());
    if (f->number != 1 && f->number != 2) continue;
    if (f->type != WireType::kLengthDelimited) {
      return Malformed(path, std::string("map entry field ") + std::to_string(f->number) + " is " +
                                 WireTypeName(f->type) + ", expected length-delimited");
    }
    if (f->number == 1) {
      auto s = Text(f->bytes, path + " (key)");
      if (!s.ok()) return s.status();
      key = std::move(*s);
      continue;
    }
    const std::string value_path = path + "[" + json(key).dump() + "]";
    if (type == Type::kStringMap) {
      auto s = Text(f->bytes, value_path);
      if (!s.ok()) return s.status();
      value = std::move(*s);
    } else if (type == Type::kBytesMap) {
      value = Base64(f->bytes);
    } else {
      auto q = QuantityText(f->bytes, value_path);
      if (!q.ok()) return q.status();
      value = std::move(*q);
    }
  }
  out[key] = std::move(value);
  return Status::Ok();
}

bool IsVarintType(Type t) { return t == Type::kInt || t == Type::kBool; }

Status DecodeField(const WireField& w, const FieldSpec& spec, json& out, const std::string& path) {
  const WireType expected = IsVarintType(spec.type) ? WireType::kVarint : WireType::kLengthDelimited;
  const std::string here = Join(path, spec.name);
  if (w.type != expected) {
    return Malformed(here.empty() ? "field " + std::to_string(w.number) : here,
                     std::string("wire type ") + WireTypeName(w.type) + ", expected " + WireTypeName(expected));
  }
  // Where a repeated field's element goes, with its index in error messages.
  std::string element_path = here;
  json* array = nullptr;
  if (spec.repeated) {
    array = &out[spec.name];
    if (!array->is_array()) *array = json::array();
    element_path += "[" + std::to_string(array->size()) + "]";
  }
  auto put = [&](json value, bool zero) {
    if (array != nullptr) {
      array->push_back(std::move(value));
    } else if (zero && !spec.pointer) {
      out.erase(spec.name);  // the last occurrence wins, zero included
    } else {
      out[spec.name] = std::move(value);
    }
  };
  switch (spec.type) {
    case Type::kString: {
      auto s = Text(w.bytes, element_path);
      if (!s.ok()) return s.status();
      const bool zero = s->empty();
      put(std::move(*s), zero);
      return Status::Ok();
    }
    case Type::kBytes:
      put(Base64(w.bytes), w.bytes.empty());
      return Status::Ok();
    case Type::kInt: {
      const auto v = static_cast<std::int64_t>(w.varint);
      put(v, v == 0);
      return Status::Ok();
    }
    case Type::kBool:
      put(w.varint != 0, w.varint == 0);
      return Status::Ok();
    case Type::kTime:
    case Type::kMicroTime: {
      if (w.bytes.empty()) {  // the zero time: null, left out
        if (array == nullptr) out.erase(spec.name);
        return Status::Ok();
      }
      auto t = FormatTime(w.bytes, spec.type == Type::kMicroTime, element_path);
      if (!t.ok()) return t.status();
      put(std::move(*t), false);
      return Status::Ok();
    }
    case Type::kQuantity: {
      auto q = QuantityText(w.bytes, element_path);
      if (!q.ok()) return q.status();
      put(q->empty() ? json("0") : json(std::move(*q)), false);
      return Status::Ok();
    }
    case Type::kIntOrString: {
      auto v = IntOrStringValue(w.bytes, element_path);
      if (!v.ok()) return v.status();
      const bool zero = (v->is_number() && *v == 0) || (v->is_string() && v->get<std::string>().empty());
      put(std::move(*v), zero);
      return Status::Ok();
    }
    case Type::kStringMap:
    case Type::kBytesMap:
    case Type::kQuantityMap: {
      json& map = out[spec.name];
      if (!map.is_object()) map = json::object();
      return DecodeMapEntry(w.bytes, spec.type, map, here);
    }
    case Type::kMessage: {
      if (spec.inlined) return DecodeMessage(w.bytes, spec.message(), out, path);
      if (array != nullptr) {
        json element = json::object();
        Status s = DecodeMessage(w.bytes, spec.message(), element, element_path);
        if (!s.ok()) return s;
        array->push_back(std::move(element));
        return Status::Ok();
      }
      json& object = out[spec.name];  // a repeated occurrence merges, as protobuf does
      if (!object.is_object()) object = json::object();
      return DecodeMessage(w.bytes, spec.message(), object, here);
    }
  }
  return Status::Ok();
}

Status DecodeMessage(std::string_view data, const MessageSpec& spec, json& out, const std::string& path) {
  WireReader r(data);
  while (!r.done()) {
    auto f = r.Next();
    if (!f.ok()) return Malformed(path, f.status().message());
    const FieldSpec* field = spec.Find(f->number);
    if (field == nullptr) continue;  // a field this emulator does not read
    Status s = DecodeField(*f, *field, out, path);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

std::string KindList() {
  std::string out;
  for (const auto& k : ProtobufKinds()) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

std::vector<std::string> ProtobufKinds() {
  std::vector<std::string> out;
  for (const auto& [key, spec] : Kinds()) out.push_back(key);
  out.push_back("DeleteOptions");
  return out;
}

StatusOr<json> DecodeKubernetesProtobuf(std::string_view body) {
  static constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, kMagic.size()) != kMagic) {
    return Status::InvalidArgument(
        "the protobuf body does not start with the 4-byte prefix \"k8s\\x00\" of Kubernetes' encoding");
  }
  // runtime.Unknown {1 typeMeta, 2 raw, 3 contentEncoding, 4 contentType}.
  std::string api_version, kind, content_encoding;
  std::string_view raw;
  WireReader envelope(body.substr(kMagic.size()));
  while (!envelope.done()) {
    auto f = envelope.Next();
    if (!f.ok()) return Malformed("runtime.Unknown", f.status().message());
    if (f->number < 1 || f->number > 4) continue;
    if (f->type != WireType::kLengthDelimited) {
      return Malformed("runtime.Unknown", "field " + std::to_string(f->number) + " is " + WireTypeName(f->type) +
                                              ", expected length-delimited");
    }
    if (f->number == 2) {
      raw = f->bytes;
    } else if (f->number == 3) {
      content_encoding = std::string(f->bytes);
    } else if (f->number == 1) {
      WireReader type_meta(f->bytes);
      while (!type_meta.done()) {
        auto t = type_meta.Next();
        if (!t.ok()) return Malformed("runtime.Unknown typeMeta", t.status().message());
        if (t->number != 1 && t->number != 2) continue;
        const std::string name = t->number == 1 ? "apiVersion" : "kind";
        if (t->type != WireType::kLengthDelimited) {
          return Malformed("runtime.Unknown typeMeta." + name,
                           std::string("wire type ") + WireTypeName(t->type) + ", expected length-delimited");
        }
        auto s = Text(t->bytes, "runtime.Unknown typeMeta." + name);
        if (!s.ok()) return s.status();
        (t->number == 1 ? api_version : kind) = std::move(*s);
      }
    }
  }
  if (kind.empty()) return Status::InvalidArgument("the protobuf body names no kind (runtime.Unknown typeMeta.kind)");
  if (!content_encoding.empty()) {
    return Status::Unimplemented("the protobuf body of kind " + kind + " has contentEncoding \"" + content_encoding +
                                 "\", which this server does not read; send it as JSON or YAML");
  }
  SpecFn spec = nullptr;
  if (kind == "DeleteOptions") {
    spec = DeleteOptions;
  } else {
    auto it = Kinds().find(api_version + "/" + kind);
    if (it != Kinds().end()) spec = it->second;
  }
  if (spec == nullptr) {
    return Status::Unimplemented("the body of the request was protobuf of kind " + kind + " (apiVersion \"" +
                                 api_version + "\"), which this server reads only as JSON or YAML (protobuf is read "
                                 "for " + KindList() + ")");
  }
  json object = {{"apiVersion", api_version}, {"kind", kind}};
  Status s = DecodeMessage(raw, spec(), object, kind);
  if (!s.ok()) return s;
  return object;
}

}  // namespace star::apiserver
