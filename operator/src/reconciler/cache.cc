#include "star/operator/reconciler/cache.h"

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

}  // namespace

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
