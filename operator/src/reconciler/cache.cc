#include "star/operator/reconciler/cache.h"

#include <initializer_list>

#include "star/core/api/pod_bandwidth.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {

namespace {

kube::ResourceRef ResourceOf(Kind kind) {
  switch (kind) {
    case Kind::kTrainingJob: return kube::TrainingJobs();
    case Kind::kPod: return kube::Pods();
    case Kind::kService: return kube::Services();
    case Kind::kNodeAllocation: return kube::NodeAllocations();
  }
  return kube::TrainingJobs();
}

using nlohmann::json;

// `from`'s members named in `keys` (those it has), moved into a new object.
json Pick(json& from, std::initializer_list<const char*> keys) {
  json out = json::object();
  if (!from.is_object()) return out;
  for (const char* k : keys) {
    auto it = from.find(k);
    if (it != from.end()) out[k] = std::move(*it);
  }
  return out;
}

json* Member(json* object, const char* key) {
  auto it = object->find(key);
  return it != object->end() && it->is_object() ? &*it : nullptr;
}

// The ownerReference of `meta` marked controller, or nullptr.
json* ControllerOf(json* meta) {
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return nullptr;
  for (json& r : *refs) {
    if (r.is_object() && r.value("controller", false)) return &r;
  }
  return nullptr;
}

void TrimPod(json* pod) {
  json out = Pick(*pod, {"apiVersion", "kind"});
  if (json* meta = Member(pod, "metadata")) {
    json m = Pick(*meta, {"name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp"});
    if (json* owner = ControllerOf(meta)) {
      m["ownerReferences"] = json::array({Pick(*owner, {"apiVersion", "kind", "name", "uid", "controller"})});
    }
    if (json* annotations = Member(meta, "annotations")) {
      json a = Pick(*annotations, {kPodTemplateHashAnnotation, api::kEgressBandwidthAnnotation,
                                   api::kIngressBandwidthAnnotation});
      if (!a.empty()) m["annotations"] = std::move(a);
    }
    out["metadata"] = std::move(m);
  }
  if (json* spec = Member(pod, "spec")) {
    json s = Pick(*spec, {"nodeName", "schedulingGates"});  // schedulingGates: Kueue admission (queueing.cc)
    auto containers = spec->find("containers");
    if (containers != spec->end() && containers->is_array()) {
      json cs = json::array();
      for (json& c : *containers) cs.push_back(c.is_object() ? Pick(c, {"name", "resources"}) : json::object());
      s["containers"] = std::move(cs);
    }
    out["spec"] = std::move(s);
  }
  if (json* status = Member(pod, "status")) out["status"] = Pick(*status, {"phase", "message"});
  *pod = std::move(out);
}

void TrimService(json* service) {
  json out = Pick(*service, {"apiVersion", "kind"});
  if (json* meta = Member(service, "metadata")) {
    out["metadata"] = Pick(*meta, {"name", "namespace", "uid", "resourceVersion", "labels"});
  }
  *service = std::move(out);
}

}  // namespace

void TrimForCache(Kind kind, json* object) {
  if (!object->is_object()) return;
  if (json* meta = Member(object, "metadata")) meta->erase("managedFields");
  switch (kind) {
    case Kind::kPod: return TrimPod(object);
    case Kind::kService: return TrimService(object);
    case Kind::kTrainingJob:
      if (json* meta = Member(object, "metadata")) {
        if (json* annotations = Member(meta, "annotations")) {
          annotations->erase("kubectl.kubernetes.io/last-applied-configuration");
        }
      }
      return;
    case Kind::kNodeAllocation: return;
  }
}

Cache::Cache(kube::Client* client, std::string ns) : client_(client), ns_(std::move(ns)) {
  for (Kind kind : {Kind::kTrainingJob, Kind::kPod, Kind::kNodeAllocation, Kind::kService}) {
    informers_[kind] = MakeInformer(kind);
  }
}

Cache::~Cache() { Stop(); }

void Cache::AddHandler(Kind kind, Handler handler) { handlers_[kind].push_back(std::move(handler)); }

void Cache::Dispatch(Kind kind, const std::string& type, const nlohmann::json& object) const {
  auto it = handlers_.find(kind);
  if (it == handlers_.end()) return;
  for (const Handler& h : it->second) h(type, object);
}

std::unique_ptr<kube::Informer> Cache::MakeInformer(Kind kind) {
  kube::InformerOptions options;
  if (kind != Kind::kNodeAllocation) options.ns = ns_;
  if (kind == Kind::kPod || kind == Kind::kService) options.label_selector = kJobLabel;
  options.transform = [kind](nlohmann::json* object) { TrimForCache(kind, object); };
  return std::make_unique<kube::Informer>(
      client_, ResourceOf(kind), options,
      [this, kind](const std::string& type, const nlohmann::json& obj) { Dispatch(kind, type, obj); });
}

Status Cache::Start(std::chrono::milliseconds sync_timeout) {
  for (Kind kind : {Kind::kPod, Kind::kNodeAllocation, Kind::kService}) informers_[kind]->Start();
  for (Kind kind : {Kind::kPod, Kind::kNodeAllocation, Kind::kService}) {
    if (!informers_[kind]->WaitForSync(sync_timeout)) {
      return Status::Unavailable("informers: no first list within the sync timeout");
    }
  }
  informers_[Kind::kTrainingJob]->Start();
  if (!informers_[Kind::kTrainingJob]->WaitForSync(sync_timeout)) {
    return Status::Unavailable("informers: no first list of trainingjobs within the sync timeout");
  }
  return Status::Ok();
}

void Cache::Stop() {
  for (Kind kind : {Kind::kTrainingJob, Kind::kPod, Kind::kNodeAllocation, Kind::kService}) {
    informers_.at(kind)->Stop();
  }
}

std::optional<nlohmann::json> Cache::Get(Kind kind, const std::string& key) const {
  return informers_.at(kind)->Get(key);
}

}  // namespace star::op
