// --policy: its names and what it does to a job's spec (declared in runtime.h).
#include "local/runtime.h"

namespace star::local {

std::string_view ToString(Policy p) {
  switch (p) {
    case Policy::kAuto: return "auto";
    case Policy::kSsgd: return "ssgd";
    case Policy::kAsgd: return "asgd";
    case Policy::kFixedK: return "fixed-k";
    case Policy::kGroups: return "groups";
    case Policy::kAmp: return "amp";
    case Policy::kBoa: return "boa";
  }
  return "?";
}

StatusOr<Policy> ParsePolicy(std::string_view text) {
  for (Policy p : {Policy::kAuto, Policy::kSsgd, Policy::kAsgd, Policy::kFixedK, Policy::kGroups,
                   Policy::kAmp, Policy::kBoa}) {
    if (text == ToString(p)) return p;
  }
  return Status::InvalidArgument(
      "--policy: must be one of auto, ssgd, asgd, fixed-k, groups, amp, boa; got \"" +
      std::string(text) + "\"");
}

api::TrainingJobSpec ApplyPolicy(api::TrainingJobSpec spec, Policy policy) {
  auto& m = spec.mitigation;
  auto only = [&](api::SyncPolicy sync, bool amp, bool boa) {
    spec.synchronization.policy = sync;
    m.amp.enabled = amp;
    m.batch_adaptation.enabled = boa;
    m.resource_reallocation.enabled = false;
  };
  switch (policy) {
    case Policy::kAuto: spec.synchronization.policy = api::SyncPolicy::kAuto; break;
    case Policy::kSsgd: only(api::SyncPolicy::kSsgd, false, false); break;
    case Policy::kAsgd: only(api::SyncPolicy::kAsgd, false, false); break;
    case Policy::kFixedK: only(api::SyncPolicy::kFixedK, false, false); break;
    case Policy::kGroups: only(api::SyncPolicy::kGroups, false, false); break;
    case Policy::kAmp: only(api::SyncPolicy::kSsgd, true, false); break;
    case Policy::kBoa: only(api::SyncPolicy::kSsgd, false, true); break;
  }
  if (policy == Policy::kAsgd && spec.architecture == api::Architecture::kAllReduce) {
    spec.architecture = api::Architecture::kParameterServer;
    api::ReplicaSpec servers;
    servers.replicas = 1;  // no template: local mode gives it a small CPU share
    spec.parameter_servers = servers;
  }
  return spec;
}

Policy PolicyOf(const api::TrainingJobSpec& spec) {
  switch (spec.synchronization.policy) {
    case api::SyncPolicy::kAuto: return Policy::kAuto;
    case api::SyncPolicy::kSsgd: return Policy::kSsgd;
    case api::SyncPolicy::kAsgd: return Policy::kAsgd;
    case api::SyncPolicy::kFixedK: return Policy::kFixedK;
    case api::SyncPolicy::kGroups: return Policy::kGroups;
  }
  return Policy::kAuto;
}

}  // namespace star::local
