// K8sSource: this node's NodeAllocation through a kube::Informer, read by the agent's loop.
#include "star/agent/k8s_source.h"

#include <functional>
#include <utility>

#include "star/kube/time.h"

namespace star::agent {
namespace {

const api::Condition* FindCondition(const api::NodeAllocationStatus& s, const std::string& type) {
  for (const api::Condition& c : s.conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

// A condition whose lastTransitionTime is kept from `previous` while its status holds.
api::Condition MakeCondition(const api::NodeAllocationStatus& previous, const StatusInputs& in,
                             std::string type, std::string status, std::string reason,
                             std::string message) {
  api::Condition c;
  c.type = std::move(type);
  c.status = std::move(status);
  c.reason = std::move(reason);
  c.message = std::move(message);
  c.observed_generation = in.generation;
  const api::Condition* before = FindCondition(previous, c.type);
  c.last_transition_time =
      before && before->status == c.status && !before->last_transition_time.empty()
          ? before->last_transition_time
          : in.now;
  return c;
}

std::string FailedPods(const ReconcileResult& r) {
  std::string s;
  for (const PodResult& p : r.pods) {
    if (p.status.ok()) continue;
    const std::string who = p.namespace_.empty() ? p.uid : p.namespace_ + "/" + p.name;
    s += (s.empty() ? "" : "; ") + who + ": " + p.status.message();
  }
  return s;
}

// The pods whose shaping was skipped and why, at most ~4 KiB of it (a condition message
// holds 32 KiB).
std::string SkippedNetworks(const ReconcileResult& r) {
  constexpr size_t kMaxMessage = 4096;
  std::string s;
  int more = 0;
  for (const PodResult& p : r.pods) {
    if (p.network_skipped.ok()) continue;
    const std::string who = p.namespace_.empty() ? p.uid : p.namespace_ + "/" + p.name;
    const std::string item = who + ": " + p.network_skipped.message();
    if (s.size() + item.size() > kMaxMessage) {
      ++more;
      continue;
    }
    s += (s.empty() ? "" : "; ") + item;
  }
  if (more > 0) s += "; and " + std::to_string(more) + " more pod(s)";
  return s;
}

int64_t Generation(const nlohmann::json& object) {
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return 0;
  const auto g = meta->find("generation");
  return g != meta->end() && g->is_number_integer() ? g->get<int64_t>() : 0;
}

std::string StringAt(const nlohmann::json& object, const char* field) {
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  const auto v = meta->find(field);
  return v != meta->end() && v->is_string() ? v->get<std::string>() : "";
}

kube::InformerOptions InformerOptionsFor(const std::string& node, const K8sSourceOptions& o,
                                         std::function<void(const Status&)> on_list) {
  kube::InformerOptions informer;
  informer.field_selector = "metadata.name=" + node;
  informer.watch_timeout = o.watch_timeout;
  informer.relist_backoff = o.initial_backoff;
  informer.max_relist_backoff = o.max_backoff;
  informer.on_list = std::move(on_list);
  return informer;
}

}  // namespace

api::NodeAllocationStatus BuildStatus(const StatusInputs& in,
                                      const api::NodeAllocationStatus& previous) {
  api::NodeAllocationStatus s;
  s.observed_generation = previous.observed_generation;
  s.applied = previous.applied;
  s.usage = previous.usage;
  s.headroom = previous.headroom;

  const bool valid = in.decode_error.ok();
  api::Condition valid_c =
      valid ? MakeCondition(previous, in, "Valid", "True", "Valid", "")
            : MakeCondition(previous, in, "Valid", "False", "InvalidSpec",
                            in.decode_error.message());

  api::Condition applied_c;
  std::optional<api::Condition> net_c;  // from the last reconcile; kept while none ran
  if (const api::Condition* before = FindCondition(previous, "NetworkShaped")) net_c = *before;
  if (!in.have_desired) {
    applied_c = MakeCondition(previous, in, "Applied", "False", "NoValidSpec",
                              "no valid spec has been seen");
  } else if (in.result == nullptr) {
    applied_c = MakeCondition(previous, in, "Applied", "Unknown", "NotReconciled",
                              "not reconciled yet");
  } else if (!in.result->ok()) {
    applied_c = MakeCondition(previous, in, "Applied", "False", "Refused",
                              "generation " + std::to_string(in.desired_generation) +
                                  " refused: " + in.result->status().message());
  } else {
    const ReconcileResult& r = **in.result;
    s.observed_generation = in.desired_generation;
    s.applied.clear();
    for (const PodResult& p : r.pods) {
      if (!p.in_allocation || p.action == PodAction::kFailed) continue;
      // A pod whose interface was not found has its CPU in force, not its bandwidth.
      s.applied.push_back({p.namespace_, p.name, p.uid, p.cpu,
                           p.network_skipped.ok() ? p.network : api::NetworkAllocation{}});
    }
    const std::string skipped = SkippedNetworks(r);
    net_c = skipped.empty()
                ? MakeCondition(previous, in, "NetworkShaped", "True", "InterfacesFound",
                                "every pod to be shaped has its interface")
                : MakeCondition(previous, in, "NetworkShaped", "False", "InterfaceNotFound",
                                skipped);
    const std::string failed = FailedPods(r);
    applied_c = failed.empty()
                    ? MakeCondition(previous, in, "Applied", "True", "Applied",
                                    "generation " + std::to_string(in.desired_generation) +
                                        ": " + std::to_string(s.applied.size()) +
                                        " pod(s) applied")
                    : MakeCondition(previous, in, "Applied", "False", "PodsFailed", failed);
  }

  api::Condition ready_c;
  if (!valid) {
    ready_c = MakeCondition(previous, in, "Ready", "False", valid_c.reason, valid_c.message);
  } else if (applied_c.status != "True") {
    ready_c = MakeCondition(previous, in, "Ready", "False", applied_c.reason, applied_c.message);
  } else {
    ready_c = MakeCondition(previous, in, "Ready", "True", "Ready", "");
  }
  s.conditions = {std::move(ready_c), std::move(valid_c), std::move(applied_c)};
  if (net_c) s.conditions.push_back(std::move(*net_c));
  return s;
}

K8sSource::K8sSource(kube::Client& client, std::string node, K8sSourceOptions options)
    : client_(client),
      node_(std::move(node)),
      informer_(&client, kube::NodeAllocations(),
                InformerOptionsFor(node_, options, [this](const Status& s) { OnList(s); }),
                [this](const std::string&, const nlohmann::json&) { OnEvent(); }) {}

K8sSource::~K8sSource() { Stop(); }

void K8sSource::Start() { informer_.Start(); }

void K8sSource::Stop() { informer_.Stop(); }

bool K8sSource::WaitForSync(std::chrono::milliseconds timeout) {
  // Not the informer's: Poll must find the list's outcome once this returns.
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

bool K8sSource::WaitForUpdate(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return version_ != seen_version_; });
}

void K8sSource::OnEvent() {
  {
    std::lock_guard lock(mu_);
    ++version_;
  }
  cv_.notify_all();
}

void K8sSource::OnList(const Status& outcome) {
  const Status error = outcome.WithPrefix("listing nodeallocation " + node_);  // OK stays OK
  {
    std::lock_guard lock(mu_);
    // A repeated error is no news; a successful list always is (it may say "absent").
    if (!error.ok() && list_error_ == error) return;
    list_error_ = error;
    synced_ = synced_ || error.ok();
    ++version_;
  }
  cv_.notify_all();
}

StatusOr<bool> K8sSource::Poll() {
  Status list_error;
  {
    std::lock_guard lock(mu_);
    if (version_ == seen_version_) {
      if (!seen_status_.ok()) return seen_status_;
      return false;
    }
    seen_version_ = version_;
    list_error = list_error_;
  }
  StatusOr<bool> result = Take(list_error);
  seen_status_ = result.status();
  return result;
}

StatusOr<bool> K8sSource::Take(const Status& list_error) {
  if (!informer_.synced()) {  // nothing known yet
    if (!list_error.ok()) return list_error;
    return false;
  }
  std::optional<nlohmann::json> object = informer_.Get(node_);
  StatusOr<bool> changed = object ? TakePresent(std::move(*object)) : TakeAbsent();
  if (!changed.ok()) return changed;
  if (!list_error.ok()) return list_error;
  return changed;
}

bool K8sSource::TakeAbsent() {
  current_.reset();
  object_uid_.clear();
  written_.reset();
  decode_error_ = Status();
  const bool changed = !released_ || desired_.has_value();
  desired_.reset();
  released_ = true;
  return changed;
}

StatusOr<bool> K8sSource::TakePresent(nlohmann::json object) {
  const std::string uid = StringAt(object, "uid");
  if (uid != object_uid_) written_.reset();  // another object of the same name
  object_uid_ = uid;
  auto d = DesiredStateFromJson(object, node_);
  current_ = std::move(object);
  decode_error_ = d.status();
  if (!d.ok()) return decode_error_.WithPrefix("nodeallocation " + node_);
  // Status writes (ours included) and other metadata do not make a new desired state.
  const bool changed = !desired_ || released_ || desired_->allocation.spec != d->allocation.spec ||
                       desired_->allocation.generation != d->allocation.generation ||
                       desired_->interfaces != d->interfaces;
  desired_ = std::move(d).value();
  released_ = false;
  return changed;
}

Status K8sSource::ReportStatus(const StatusOr<ReconcileResult>* result) {
  if (!current_) return Status();
  api::NodeAllocationStatus previous;
  if (written_) {
    previous = *written_;
  } else if (const auto st = current_->find("status"); st != current_->end()) {
    // The status already there (a previous agent's): its transition times are kept, and
    // it is not rewritten when it already says the same.
    auto decoded = api::NodeAllocationStatusFromJson(*st);
    if (decoded.ok()) previous = std::move(decoded).value();
    written_ = previous;
  }
  StatusInputs in;
  in.generation = Generation(*current_);
  in.decode_error = decode_error_;
  in.have_desired = desired_.has_value();
  in.desired_generation = desired_ ? desired_->allocation.generation : 0;
  in.result = result;
  in.now = kube::NowRfc3339();
  api::NodeAllocationStatus status = BuildStatus(in, previous);
  if (written_ && *written_ == status) return Status();

  nlohmann::json body = api::ToJson(status);
  body.erase("usage");     // not sampled by the agent (yet): leave whatever is there
  body.erase("headroom");  // ReportHeadroom's
  auto patched = client_.MergePatch(kube::NodeAllocations(), "", node_,
                                    nlohmann::json{{"status", std::move(body)}},
                                    /*status=*/true);
  if (!patched.ok()) return patched.status().WithPrefix("nodeallocation " + node_ + " status");
  written_ = std::move(status);
  ++status_writes_;
  return Status();
}

Status K8sSource::ReportHeadroom(const api::NodeHeadroom& headroom) {
  if (!current_) return Status();
  auto patched = client_.MergePatch(kube::NodeAllocations(), "", node_,
                                    nlohmann::json{{"status", {{"headroom", api::ToJson(headroom)}}}},
                                    /*status=*/true);
  // Deleted since the watch last said: nothing to write to.
  if (!patched.ok() && patched.status().code() == StatusCode::kNotFound) return Status();
  if (!patched.ok()) {
    return patched.status().WithPrefix("nodeallocation " + node_ + " status.headroom");
  }
  if (written_) written_->headroom = headroom;
  ++headroom_writes_;
  return Status();
}

}  // namespace star::agent
