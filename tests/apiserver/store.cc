#include "store.h"

#include <random>

#include "object_meta.h"

namespace star::apiserver {

using nlohmann::json;

namespace {

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng;
}

std::string NewUid() {
  static const char* kHex = "0123456789abcdef";
  std::uniform_int_distribution<int> nibble(0, 15);
  std::string uid;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) uid += '-';
    int v = nibble(Rng());
    if (i == 12) v = 4;                // version 4
    if (i == 16) v = 8 | (v & 3);      // RFC 4122 variant
    uid += kHex[v];
  }
  return uid;
}

std::string RandomSuffix() {
  static const std::string kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string s;
  for (int i = 0; i < 5; ++i) s += kAlphabet[pick(Rng())];
  return s;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool HasFinalizers(const json& object) {
  const auto& meta = object["metadata"];
  return meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty();
}

// Whether anything generation counts changed: everything but metadata (and status, when
// the kind has a status subresource).
bool SpecChanged(json a, json b, bool has_status) {
  a.erase("metadata");
  b.erase("metadata");
  if (has_status) {
    a.erase("status");
    b.erase("status");
  }
  return a != b;
}

}  // namespace

std::string ObjectKey(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::string Meta(const json& object, const char* field) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(field);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

Store::Store(Options options) : options_(options) {}

Store::~Store() { CloseWatches(); }

void Store::StoreLocked(const std::string& group_resource, const std::string& key, json object) {
  by_uid_[Meta(object, "uid")] = {group_resource, key};
  objects_[group_resource][key] = std::move(object);
}

ApiResult Store::Create(const ResourceType& type, json object, bool dry_run) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!object.is_object()) return BadRequest("the object must be a JSON object");
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (!type.namespaced) meta.erase("namespace");
  const std::string ns = type.namespaced ? Meta(object, "namespace") : "";
  const std::string gr = type.GroupResource();
  Objects& objects = objects_[gr];
  std::string name = Meta(object, "name");
  if (name.empty()) {
    // As the API server does, a long prefix is cut so that the name stays under 64.
    const std::string prefix = Meta(object, "generateName").substr(0, kGenerateNamePrefix);
    if (prefix.empty()) {
      return Invalid(type.group, type.kind, "",
                     {{"metadata.name", "FieldValueRequired", "Required value: name or generateName is required"}});
    }
    for (int attempt = 0; attempt < 100 && name.empty(); ++attempt) {
      const std::string candidate = prefix + RandomSuffix();
      if (objects.count(ObjectKey(ns, candidate)) == 0) name = candidate;
    }
    if (name.empty()) return AlreadyExists(type.group, type.plural, prefix);
    meta["name"] = name;
  }
  const std::string key = ObjectKey(ns, name);
  if (objects.count(key) != 0) return AlreadyExists(type.group, type.plural, name);
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = NowRfc3339();
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("resourceVersion");
  if (type.tracks_generation) meta["generation"] = 1;
  if (dry_run) return {201, object};
  meta["resourceVersion"] = std::to_string(++rv_);
  StoreLocked(gr, key, object);
  EmitLocked("ADDED", gr, object, nullptr);
  return {201, object};
}

ApiResult Store::Get(const ResourceType& type, const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto group = objects_.find(type.GroupResource());
  if (group != objects_.end()) {
    auto it = group->second.find(ObjectKey(type.namespaced ? ns : "", name));
    if (it != group->second.end()) return {200, it->second};
  }
  return NotFound(type.group, type.plural, name);
}

Store::ListResult Store::List(const ResourceType& type, const std::string& ns, const LabelSelector& labels,
                              const FieldSelector& fields) const {
  std::lock_guard<std::mutex> lock(mu_);
  ListResult result;
  result.resource_version = rv_;
  auto group = objects_.find(type.GroupResource());
  if (group == objects_.end()) return result;
  for (const auto& [key, object] : group->second) {
    if (!ns.empty() && Meta(object, "namespace") != ns) continue;
    if (!labels.MatchesObject(object) || !fields.Matches(object)) continue;
    result.items.push_back(object);
  }
  return result;
}

ApiResult Store::Update(const ResourceType& type, const std::string& ns, const std::string& name,
                        const Mutation& mutate, bool dry_run) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string gr = type.GroupResource();
  const std::string key = ObjectKey(type.namespaced ? ns : "", name);
  Objects& objects = objects_[gr];
  auto it = objects.find(key);
  if (it == objects.end()) return NotFound(type.group, type.plural, name);
  const json current = it->second;
  ApiResult r = mutate(current);
  if (!r.ok()) return r;
  json next = std::move(r.body);
  if (!next.is_object()) return BadRequest("the object must be a JSON object");
  json& meta = next["metadata"];
  if (!meta.is_object()) meta = json::object();
  const json& current_meta = current["metadata"];
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                            "deletionGracePeriodSeconds"}) {
    if (current_meta.contains(field)) {
      meta[field] = current_meta[field];
    } else {
      meta.erase(field);
    }
  }
  const std::string requested = Meta(next, "resourceVersion");
  if (!requested.empty() && requested != Meta(current, "resourceVersion")) {
    return Conflict(type.group, type.plural, name, kObjectModified);
  }
  meta["resourceVersion"] = current_meta["resourceVersion"];
  if (type.tracks_generation) {
    std::int64_t generation = current_meta.value("generation", std::int64_t{1});
    if (SpecChanged(current, next, type.HasStatus())) ++generation;
    meta["generation"] = generation;
  } else if (current_meta.contains("generation")) {
    meta["generation"] = current_meta["generation"];
  } else {
    meta.erase("generation");
  }
  if (next == current) return {200, current};
  if (dry_run) return {200, next};
  meta["resourceVersion"] = std::to_string(++rv_);
  it->second = next;
  EmitLocked("MODIFIED", gr, next, current);
  if (next["metadata"].contains("deletionTimestamp") && !HasFinalizers(next)) {
    ApiResult removed = DeleteLocked(gr, key, "Background");
    removed.code = 200;
    return removed;
  }
  return {200, next};
}

ApiResult Store::Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                        const DeleteOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string gr = type.GroupResource();
  const std::string key = ObjectKey(type.namespaced ? ns : "", name);
  auto group = objects_.find(gr);
  if (group == objects_.end() || group->second.count(key) == 0) return NotFound(type.group, type.plural, name);
  const json& object = group->second[key];
  if (options.precondition_uid && *options.precondition_uid != Meta(object, "uid")) {
    return Conflict(type.group, type.plural, name,
                    "Precondition failed: UID in precondition: " + *options.precondition_uid +
                        ", UID in object meta: " + Meta(object, "uid"));
  }
  if (options.precondition_resource_version &&
      *options.precondition_resource_version != Meta(object, "resourceVersion")) {
    return Conflict(type.group, type.plural, name,
                    "Precondition failed: ResourceVersion in precondition: " +
                        *options.precondition_resource_version +
                        ", ResourceVersion in object meta: " + Meta(object, "resourceVersion"));
  }
  if (options.dry_run) return {200, object};
  return DeleteLocked(gr, key, options.propagation);
}

ApiResult Store::DeleteLocked(const std::string& group_resource, const std::string& key,
                              const std::string& propagation) {
  Objects& objects = objects_[group_resource];
  auto it = objects.find(key);
  json object = it->second;
  if (HasFinalizers(object)) {
    if (!object["metadata"].contains("deletionTimestamp")) {
      const json old = object;
      object["metadata"]["deletionTimestamp"] = NowRfc3339();
      object["metadata"]["deletionGracePeriodSeconds"] = 0;
      object["metadata"]["resourceVersion"] = std::to_string(++rv_);
      it->second = object;
      EmitLocked("MODIFIED", group_resource, object, old);
    }
    return {202, object};
  }
  const std::string uid = Meta(object, "uid");
  objects.erase(it);
  by_uid_.erase(uid);
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  EmitLocked("DELETED", group_resource, object, nullptr);
  CascadeLocked(uid, propagation);
  return {200, object};
}

void Store::CascadeLocked(const std::string& owner_uid, const std::string& propagation) {
  if (owner_uid.empty()) return;
  std::vector<std::pair<std::string, std::string>> dependents;
  for (const auto& [gr, objects] : objects_) {
    for (const auto& [key, object] : objects) {
      const auto& refs = object["metadata"].value("ownerReferences", json::array());
      for (const auto& ref : refs) {
        if (ref.is_object() && ref.value("uid", "") == owner_uid) {
          dependents.emplace_back(gr, key);
          break;
        }
      }
    }
  }
  for (const auto& [gr, key] : dependents) {
    Objects& objects = objects_[gr];
    auto it = objects.find(key);
    if (it == objects.end()) continue;  // removed by an earlier cascade
    json remaining = json::array();
    bool other_live_owner = false;
    for (const auto& ref : it->second["metadata"]["ownerReferences"]) {
      if (ref.is_object() && ref.value("uid", "") == owner_uid) continue;
      remaining.push_back(ref);
      if (ref.is_object() && by_uid_.count(ref.value("uid", "")) != 0) other_live_owner = true;
    }
    if (propagation == "Orphan" || other_live_owner) {
      const json old = it->second;
      json& meta = it->second["metadata"];
      if (remaining.empty()) {
        meta.erase("ownerReferences");
      } else {
        meta["ownerReferences"] = remaining;
      }
      meta["resourceVersion"] = std::to_string(++rv_);
      EmitLocked("MODIFIED", gr, it->second, old);
    } else {
      DeleteLocked(gr, key, "Background");
    }
  }
}

void Store::RemoveAll(const ResourceType& type) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string gr = type.GroupResource();
  auto group = objects_.find(gr);
  if (group != objects_.end()) {
    std::vector<std::string> keys;
    for (const auto& [key, object] : group->second) keys.push_back(key);
    for (const auto& key : keys) {
      auto it = group->second.find(key);
      if (it == group->second.end()) continue;
      json object = it->second;
      const std::string uid = Meta(object, "uid");
      group->second.erase(it);
      by_uid_.erase(uid);
      object["metadata"]["resourceVersion"] = std::to_string(++rv_);
      EmitLocked("DELETED", gr, object, nullptr);
      CascadeLocked(uid, "Background");
    }
  }
  for (auto& w : watchers_) {
    if (w->group_resource == gr) CloseLocked(*w);
  }
}

void Store::DeleteNamespaceContents(const std::string& ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> victims;
  for (const auto& [gr, objects] : objects_) {
    for (const auto& [key, object] : objects) {
      if (Meta(object, "namespace") == ns && !ns.empty()) victims.emplace_back(gr, key);
    }
  }
  for (const auto& [gr, key] : victims) {
    if (objects_[gr].count(key) != 0) DeleteLocked(gr, key, "Background");
  }
}

void Store::EmitLocked(const char* type, const std::string& group_resource, const json& object, const json& old) {
  history_.push_back(Event{rv_, type, group_resource, object, old});
  while (history_.size() > options_.history_limit) {
    compacted_through_ = history_.front().rv;
    history_.pop_front();
  }
  const Event& e = history_.back();
  for (auto& w : watchers_) {
    if (!w->closed && w->group_resource == group_resource) DeliverLocked(*w, e);
  }
}

void Store::DeliverLocked(Watcher& w, const Event& e) {
  const WatchOptions& o = w.options;
  if (!o.ns.empty() && Meta(e.object, "namespace") != o.ns) return;
  auto matches = [&](const json& object) { return o.labels.MatchesObject(object) && o.fields.Matches(object); };
  const bool now = matches(e.object);
  std::string type = e.type;
  if (type == "MODIFIED") {
    const bool before = !e.old.is_null() && matches(e.old);
    if (!before && !now) return;
    if (!before) type = "ADDED";
    if (!now) type = "DELETED";
  } else if (!now) {
    return;
  }
  SendLocked(w, type, e.object, true);
}

void Store::SendLocked(Watcher& w, const std::string& type, const json& object, bool counts) {
  if (w.closed) return;
  json presented;
  try {
    presented = w.options.present ? w.options.present(object) : object;
  } catch (const std::exception&) {
    // An object this watch cannot present (e.g. a Table cell of a malformed pod) ends
    // this watch only: the change is stored and the other watchers still get it.
    CloseLocked(w);
    return;
  }
  const json event = {{"type", type}, {"object", std::move(presented)}};
  if (!w.sink->Write(Dump(event) + "\n")) {
    CloseLocked(w);
    return;
  }
  if (counts) {
    ++w.sent;
    if (w.options.drop_after && w.sent >= *w.options.drop_after) CloseLocked(w);
  }
}

void Store::CloseLocked(Watcher& w) {
  if (w.closed) return;
  w.closed = true;
  w.sink->Close();
}

void Store::Watch(const ResourceType& type, WatchOptions options, std::shared_ptr<WatchSink> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  auto w = std::make_shared<Watcher>();
  w->group_resource = type.GroupResource();
  w->options = std::move(options);
  w->sink = std::move(sink);
  w->last_bookmark = std::chrono::steady_clock::now();
  const WatchOptions& o = w->options;
  if (o.drop_after && *o.drop_after <= 0) {  // fault injection: dropped before any event
    w->sink->Close();
    return;
  }
  if (o.resource_version && *o.resource_version > 0) {
    if (*o.resource_version < compacted_through_) {
      const json event = {{"type", "ERROR"},
                          {"object", TooOldResourceVersion(*o.resource_version, compacted_through_).body}};
      w->sink->Write(Dump(event) + "\n");
      w->sink->Close();
      return;
    }
    for (const auto& e : history_) {
      if (e.rv > *o.resource_version && e.group_resource == w->group_resource) DeliverLocked(*w, e);
    }
  } else if (o.send_initial_events.value_or(true)) {
    auto group = objects_.find(w->group_resource);
    if (group != objects_.end()) {
      for (const auto& [key, object] : group->second) {
        if (!o.ns.empty() && Meta(object, "namespace") != o.ns) continue;
        if (!o.labels.MatchesObject(object) || !o.fields.Matches(object)) continue;
        SendLocked(*w, "ADDED", object, true);
      }
    }
    if (o.send_initial_events.value_or(false) && !w->closed) {
      const json event = {
          {"type", "BOOKMARK"},
          {"object",
           {{"kind", o.kind},
            {"apiVersion", o.api_version},
            {"metadata",
             {{"resourceVersion", std::to_string(rv_)},
              {"annotations", {{"k8s.io/initial-events-end", "true"}}}}}}}};
      if (!w->sink->Write(Dump(event) + "\n")) CloseLocked(*w);
    }
  }
  if (!w->closed) watchers_.push_back(std::move(w));
}

void Store::Tick(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = **it;
    if (!w.closed && now >= w.options.deadline) CloseLocked(w);
    if (!w.closed && w.options.bookmarks && now - w.last_bookmark >= options_.bookmark_interval) {
      const json event = {{"type", "BOOKMARK"},
                          {"object",
                           {{"kind", w.options.kind},
                            {"apiVersion", w.options.api_version},
                            {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}};
      if (!w.sink->Write(Dump(event) + "\n")) CloseLocked(w);
      w.last_bookmark = now;
    }
    if (w.closed) {
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
}

void Store::CloseWatches() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& w : watchers_) CloseLocked(*w);
  watchers_.clear();
}

size_t Store::active_watches() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& w : watchers_) n += w->closed ? 0 : 1;
  return n;
}

std::uint64_t Store::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

}  // namespace star::apiserver
