#include "star/core/api/node_allocation.h"

#include "star/core/api/json_reader.h"

namespace star::api {

using nlohmann::json;

namespace {

constexpr std::string_view kKind = "NodeAllocation";

json CpuToJson(const CpuAllocation& c) {
  return {{"quotaMillicores", c.quota_millicores}, {"weight", c.weight}};
}

json NetworkToJson(const NetworkAllocation& n) {
  return {{"egressBitsPerSecond", n.egress_bits_per_second},
          {"ingressBitsPerSecond", n.ingress_bits_per_second},
          {"priority", n.priority}};
}

// Reads the optional object `key` of `parent` into *cpu (types only).
void ReadCpu(ObjectReader& parent, std::string_view key, CpuAllocation* cpu) {
  const json* f = parent.Get(key);
  if (!parent.ok() || f == nullptr) return;
  ObjectReader rd(*f, parent.FieldPath(key));
  rd.Int("quotaMillicores", &cpu->quota_millicores, Need::kOptional)
      .Int("weight", &cpu->weight, Need::kOptional)
      .RejectUnknown({"quotaMillicores", "weight"});
  parent.Merge(rd.status());
}

void ReadNetwork(ObjectReader& parent, std::string_view key, NetworkAllocation* net) {
  const json* f = parent.Get(key);
  if (!parent.ok() || f == nullptr) return;
  ObjectReader rd(*f, parent.FieldPath(key));
  rd.Int("egressBitsPerSecond", &net->egress_bits_per_second, Need::kOptional)
      .Int("ingressBitsPerSecond", &net->ingress_bits_per_second, Need::kOptional)
      .Int("priority", &net->priority, Need::kOptional)
      .RejectUnknown({"egressBitsPerSecond", "ingressBitsPerSecond", "priority"});
  parent.Merge(rd.status());
}

Status Range(const std::string& path, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo) {
    return Status::InvalidArgument(path + ": must be >= " + std::to_string(lo) + ", got " +
                                   std::to_string(v));
  }
  if (v > hi) {
    return Status::InvalidArgument(path + ": must be <= " + std::to_string(hi) + ", got " +
                                   std::to_string(v));
  }
  return Status::Ok();
}

// Field rules shared by spec.pods[] and status.applied[].
Status CheckPod(const std::string& path, const std::string& ns, const std::string& name,
                const std::string& uid, const CpuAllocation& cpu, const NetworkAllocation& net) {
  constexpr int64_t kMax = kMaxBitsPerSecond;
  STAR_RETURN_IF_ERROR(CheckDns1123Label(ns, JoinPath(path, "namespace")));
  STAR_RETURN_IF_ERROR(CheckDns1123Subdomain(name, JoinPath(path, "name")));
  if (uid.empty()) return Status::InvalidArgument(JoinPath(path, "uid") + ": must not be empty");
  if (uid.size() > kMaxUidLength) {
    return Status::InvalidArgument(JoinPath(path, "uid") + ": must be at most " +
                                   std::to_string(kMaxUidLength) + " characters, got " +
                                   std::to_string(uid.size()));
  }
  STAR_RETURN_IF_ERROR(Range(JoinPath(path, "cpu.quotaMillicores"), cpu.quota_millicores, 0,
                             kMaxQuotaMillicores));
  STAR_RETURN_IF_ERROR(Range(JoinPath(path, "cpu.weight"), cpu.weight, 1, 10000));
  STAR_RETURN_IF_ERROR(
      Range(JoinPath(path, "network.egressBitsPerSecond"), net.egress_bits_per_second, 0, kMax));
  STAR_RETURN_IF_ERROR(
      Range(JoinPath(path, "network.ingressBitsPerSecond"), net.ingress_bits_per_second, 0, kMax));
  return Range(JoinPath(path, "network.priority"), net.priority, 0, 7);
}

StatusOr<PodAllocation> PodFromJson(const json& j, const std::string& path) {
  PodAllocation p;
  ObjectReader rd(j, path);
  rd.String("namespace", &p.namespace_).String("name", &p.name).String("uid", &p.uid);
  ReadCpu(rd, "cpu", &p.cpu);
  ReadNetwork(rd, "network", &p.network);
  rd.Bool("guaranteed", &p.guaranteed, Need::kOptional)
      .RejectUnknown({"namespace", "name", "uid", "cpu", "network", "guaranteed"});
  if (!rd.ok()) return rd.status();
  return p;
}

StatusOr<AppliedPod> AppliedFromJson(const json& j, const std::string& path) {
  AppliedPod p;
  ObjectReader rd(j, path);
  rd.String("namespace", &p.namespace_).String("name", &p.name).String("uid", &p.uid);
  ReadCpu(rd, "cpu", &p.cpu);
  ReadNetwork(rd, "network", &p.network);
  rd.RejectUnknown({"namespace", "name", "uid", "cpu", "network"});
  if (rd.ok()) rd.Merge(CheckPod(path, p.namespace_, p.name, p.uid, p.cpu, p.network));
  if (!rd.ok()) return rd.status();
  return p;
}

bool StatusIsEmpty(const NodeAllocationStatus& s) {
  return s.observed_generation == 0 && s.applied.empty() && s.conditions.empty() &&
         !s.usage.has_value() && !s.headroom.has_value();
}

}  // namespace

json ToJson(const NodeAllocationSpec& s) {
  json pods = json::array();
  for (const auto& p : s.pods) {
    pods.push_back({{"namespace", p.namespace_},
                    {"name", p.name},
                    {"uid", p.uid},
                    {"cpu", CpuToJson(p.cpu)},
                    {"network", NetworkToJson(p.network)},
                    {"guaranteed", p.guaranteed}});
  }
  return {{"pods", std::move(pods)}};
}

Status Validate(const NodeAllocationSpec& s, const std::string& path) {
  const std::string pods = JoinPath(path, "pods");
  if (s.pods.size() > kMaxNodePods) {
    return Status::InvalidArgument(pods + ": must have at most " + std::to_string(kMaxNodePods) +
                                   " items, got " + std::to_string(s.pods.size()));
  }
  for (size_t i = 0; i < s.pods.size(); ++i) {
    const PodAllocation& p = s.pods[i];
    const std::string at = IndexPath(pods, i);
    STAR_RETURN_IF_ERROR(CheckPod(at, p.namespace_, p.name, p.uid, p.cpu, p.network));
    for (size_t k = 0; k < i; ++k) {
      if (s.pods[k].uid == p.uid) {
        return Status::InvalidArgument(at + ".uid: duplicate of " + IndexPath(pods, k));
      }
    }
  }
  return Status::Ok();
}

StatusOr<NodeAllocationSpec> NodeAllocationSpecFromJson(const json& j, const std::string& path) {
  NodeAllocationSpec s;
  ObjectReader rd(j, path);
  rd.MaxItems("pods", kMaxNodePods);
  ReadArray(rd, "pods", &s.pods, PodFromJson);
  rd.RejectUnknown({"pods"});
  if (rd.ok()) rd.Merge(Validate(s, path));
  if (!rd.ok()) return rd.status();
  return s;
}

json ToJson(const NodeAllocationStatus& s) {
  json applied = json::array();
  for (const auto& p : s.applied) {
    applied.push_back({{"namespace", p.namespace_},
                       {"name", p.name},
                       {"uid", p.uid},
                       {"cpu", CpuToJson(p.cpu)},
                       {"network", NetworkToJson(p.network)}});
  }
  json conditions = json::array();
  for (const auto& c : s.conditions) conditions.push_back(ToJson(c));
  json j = {{"observedGeneration", s.observed_generation},
            {"applied", std::move(applied)},
            {"conditions", std::move(conditions)}};
  if (s.usage) {
    j["usage"] = {{"cpuMillicores", s.usage->cpu_millicores},
                  {"egressBitsPerSecond", s.usage->egress_bits_per_second},
                  {"ingressBitsPerSecond", s.usage->ingress_bits_per_second}};
  }
  if (s.headroom) j["headroom"] = ToJson(*s.headroom);
  return j;
}

StatusOr<NodeAllocationStatus> NodeAllocationStatusFromJson(const json& j,
                                                            const std::string& path) {
  NodeAllocationStatus s;
  ObjectReader rd(j, path);
  rd.Int("observedGeneration", &s.observed_generation, Need::kOptional)
      .AtLeast("observedGeneration", static_cast<double>(s.observed_generation), 0)
      .AtMost("observedGeneration", static_cast<double>(s.observed_generation), kMaxJsonInteger);
  rd.MaxItems("applied", kMaxNodePods);
  ReadArray(rd, "applied", &s.applied, AppliedFromJson);
  ReadConditions(rd, "conditions", &s.conditions);
  if (const json* u = rd.Get("usage"); rd.ok() && u != nullptr) {
    NodeUsage usage;
    ObjectReader ur(*u, rd.FieldPath("usage"));
    ur.Number("cpuMillicores", &usage.cpu_millicores, Need::kOptional)
        .AtLeast("cpuMillicores", usage.cpu_millicores, 0)
        .AtMost("cpuMillicores", usage.cpu_millicores, kMaxJsonInteger)
        .Number("egressBitsPerSecond", &usage.egress_bits_per_second, Need::kOptional)
        .AtLeast("egressBitsPerSecond", usage.egress_bits_per_second, 0)
        .AtMost("egressBitsPerSecond", usage.egress_bits_per_second, kMaxJsonInteger)
        .Number("ingressBitsPerSecond", &usage.ingress_bits_per_second, Need::kOptional)
        .AtLeast("ingressBitsPerSecond", usage.ingress_bits_per_second, 0)
        .AtMost("ingressBitsPerSecond", usage.ingress_bits_per_second, kMaxJsonInteger)
        .RejectUnknown({"cpuMillicores", "egressBitsPerSecond", "ingressBitsPerSecond"});
    rd.Merge(ur.status());
    if (ur.ok()) s.usage = usage;
  }
  if (const json* h = rd.Get("headroom"); rd.ok() && h != nullptr) {
    auto headroom = NodeHeadroomFromJson(*h, rd.FieldPath("headroom"));
    if (headroom.ok()) s.headroom = std::move(headroom).value();
    rd.Merge(headroom.status());
  }
  rd.RejectUnknown({"observedGeneration", "applied", "conditions", "usage", "headroom"});
  if (!rd.ok()) return rd.status();
  return s;
}

json ToJson(const NodeAllocation& a) {
  json meta = {{"name", a.name}};
  if (a.generation != 0) meta["generation"] = a.generation;
  if (!a.resource_version.empty()) meta["resourceVersion"] = a.resource_version;
  json j = {{"apiVersion", kApiVersion},
            {"kind", kKind},
            {"metadata", std::move(meta)},
            {"spec", ToJson(a.spec)}};
  if (!StatusIsEmpty(a.status)) j["status"] = ToJson(a.status);
  return j;
}

StatusOr<NodeAllocation> NodeAllocationFromJson(const json& j) {
  NodeAllocation a;
  ObjectReader rd(j, "");
  rd.Merge(CheckTypeMeta(j, kKind));
  if (rd.ok() && !rd.Has("metadata")) rd.Fail("metadata", "required field is missing");
  if (rd.ok()) {
    auto meta = ObjectMetaFromJson(*rd.Get("metadata"), /*namespaced=*/false);
    rd.Merge(meta.status());
    if (meta.ok()) {
      a.name = meta->name;
      a.generation = meta->generation;
      a.resource_version = meta->resource_version;
    }
  }
  if (rd.ok() && !rd.Has("spec")) rd.Fail("spec", "required field is missing");
  if (rd.ok()) {
    auto spec = NodeAllocationSpecFromJson(*rd.Get("spec"), "spec");
    rd.Merge(spec.status());
    if (spec.ok()) a.spec = *std::move(spec);
  }
  if (const json* st = rd.Get("status"); rd.ok() && st != nullptr) {
    auto status = NodeAllocationStatusFromJson(*st, "status");
    rd.Merge(status.status());
    if (status.ok()) a.status = *std::move(status);
  }
  rd.RejectUnknown({"apiVersion", "kind", "metadata", "spec", "status"});
  if (!rd.ok()) return rd.status();
  return a;
}

}  // namespace star::api
