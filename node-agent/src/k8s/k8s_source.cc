#include "star/agent/k8s_source.h"

#include <time.h>

#include <algorithm>
#include <utility>

namespace star::agent {
namespace {

std::string NowRfc3339() {
  const time_t t = ::time(nullptr);
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  char buf[32];
  const size_t n = ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

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

}  // namespace

api::NodeAllocationStatus BuildStatus(const StatusInputs& in,
                                      const api::NodeAllocationStatus& previous) {
  api::NodeAllocationStatus s;
  s.observed_generation = previous.observed_generation;
  s.applied = previous.applied;
  s.usage = previous.usage;

  const bool valid = in.decode_error.ok();
  api::Condition valid_c =
      valid ? MakeCondition(previous, in, "Valid", "True", "Valid", "")
            : MakeCondition(previous, in, "Valid", "False", "InvalidSpec",
                            in.decode_error.message());

  api::Condition applied_c;
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
      s.applied.push_back({p.namespace_, p.name, p.uid, p.cpu, p.network});
    }
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
  return s;
}

K8sSource::K8sSource(kube::Client& client, std::string node, K8sSourceOptions options)
    : client_(client), node_(std::move(node)), options_(options) {}

K8sSource::~K8sSource() { Stop(); }

void K8sSource::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void K8sSource::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool K8sSource::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

bool K8sSource::WaitForUpdate(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return version_ != seen_version_; });
}

bool K8sSource::Sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_.load(); });
}

void K8sSource::SetObserved(Presence presence, nlohmann::json object) {
  {
    std::lock_guard lock(mu_);
    presence_ = presence;
    object_ = std::move(object);
    list_error_ = Status();
    synced_ = true;
    ++version_;
  }
  cv_.notify_all();
}

void K8sSource::SetListError(Status error) {
  {
    std::lock_guard lock(mu_);
    if (list_error_ == error) return;
    list_error_ = std::move(error);
    ++version_;
  }
  cv_.notify_all();
}

void K8sSource::Run() {
  const kube::ResourceRef resource = kube::NodeAllocations();
  const std::string selector = "metadata.name=" + node_;
  std::chrono::milliseconds backoff = options_.initial_backoff;
  const auto grow = [&] { backoff = std::min(backoff * 2, options_.max_backoff); };
  while (!stop_) {
    kube::ListOptions list_options;
    list_options.field_selector = selector;
    auto list = client_.List(resource, "", list_options);
    if (!list.ok()) {
      SetListError(list.status().WithPrefix("listing nodeallocation " + node_));
      if (!Sleep(backoff)) return;
      grow();
      continue;
    }
    nlohmann::json found;
    const auto items = list->find("items");
    if (items != list->end() && items->is_array()) {
      for (const nlohmann::json& item : *items) {
        if (StringAt(item, "name") == node_) found = item;
      }
    }
    const Presence presence = found.is_null() ? Presence::kAbsent : Presence::kPresent;
    SetObserved(presence, std::move(found));
    std::string rv = StringAt(*list, "resourceVersion");
    backoff = options_.initial_backoff;

    // Watch from rv until an error forces a re-list.
    while (!stop_) {
      kube::WatchOptions watch_options;
      watch_options.field_selector = selector;
      watch_options.resource_version = rv;
      watch_options.timeout = options_.watch_timeout;
      int events = 0;
      const Status s = client_.Watch(
          resource, "", watch_options,
          [&](const kube::WatchEvent& e) {
            ++events;
            const std::string event_rv = StringAt(e.object, "resourceVersion");
            if (!event_rv.empty()) rv = event_rv;
            if (e.type == "BOOKMARK" || StringAt(e.object, "name") != node_) return !stop_;
            if (e.type == "DELETED") {
              SetObserved(Presence::kAbsent, nlohmann::json());
            } else if (e.type == "ADDED" || e.type == "MODIFIED") {
              SetObserved(Presence::kPresent, e.object);
            }
            return !stop_.load();
          },
          &stop_);
      if (stop_) return;
      if (!s.ok()) {
        // 410 Gone: the history moved on; re-list at once. Anything else: back off first.
        if (s.code() != StatusCode::kOutOfRange) {
          SetListError(s.WithPrefix("watching nodeallocation " + node_));
          if (!Sleep(backoff)) return;
          grow();
        }
        break;
      }
      if (events == 0) {
        // The stream ended without a word (dropped, or a short server timeout): do not spin.
        if (!Sleep(backoff)) return;
        grow();
      } else {
        backoff = options_.initial_backoff;
      }
    }
  }
}

StatusOr<bool> K8sSource::Poll() {
  Presence presence;
  nlohmann::json object;
  Status list_error;
  {
    std::lock_guard lock(mu_);
    if (version_ == seen_version_) {
      if (!seen_status_.ok()) return seen_status_;
      return false;
    }
    seen_version_ = version_;
    presence = presence_;
    object = object_;
    list_error = list_error_;
  }
  auto result = [&]() -> StatusOr<bool> {
    if (presence == Presence::kUnknown) {
      if (!list_error.ok()) return list_error;
      return false;
    }
    if (presence == Presence::kAbsent) {
      current_.reset();
      object_uid_.clear();
      written_.reset();
      decode_error_ = Status();
      const bool changed = !released_ || desired_.has_value();
      desired_.reset();
      released_ = true;
      if (!list_error.ok()) return list_error;
      return changed;
    }
    const std::string uid = StringAt(object, "uid");
    if (uid != object_uid_) written_.reset();  // another object of the same name
    object_uid_ = uid;
    current_ = object;
    auto d = DesiredStateFromJson(object, node_);
    decode_error_ = d.status();
    bool changed = false;
    if (d.ok()) {
      // Status writes (ours included) and other metadata do not make a new desired state.
      changed = !desired_ || released_ || desired_->allocation.spec != d->allocation.spec ||
                desired_->allocation.generation != d->allocation.generation ||
                desired_->interfaces != d->interfaces;
      desired_ = std::move(d).value();
      released_ = false;
    }
    if (!decode_error_.ok()) return decode_error_.WithPrefix("nodeallocation " + node_);
    if (!list_error.ok()) return list_error;
    return changed;
  }();
  seen_status_ = result.status();
  return result;
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
  in.now = NowRfc3339();
  api::NodeAllocationStatus status = BuildStatus(in, previous);
  if (written_ && *written_ == status) return Status();

  nlohmann::json body = api::ToJson(status);
  body.erase("usage");  // not sampled by the agent (yet): leave whatever is there
  auto patched = client_.MergePatch(kube::NodeAllocations(), "", node_,
                                    nlohmann::json{{"status", std::move(body)}},
                                    /*status=*/true);
  if (!patched.ok()) return patched.status().WithPrefix("nodeallocation " + node_ + " status");
  written_ = std::move(status);
  ++status_writes_;
  return Status();
}

}  // namespace star::agent
