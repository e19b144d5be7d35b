// Informer: list, then watch from the list's resourceVersion, re-listing after errors.
#include "star/kube/informer.h"

#include <algorithm>

namespace star::kube {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The wait after an error: `initial` (at least 1 ms), doubling up to `max` (at least
// `initial`); Reset after a success.
class Backoff {
 public:
  Backoff(milliseconds initial, milliseconds max)
      : initial_(std::max(initial, milliseconds(1))), max_(std::max(max, initial_)), next_(initial_) {}
  milliseconds Next() {
    const milliseconds d = next_;
    next_ = std::min(next_ * 2, max_);
    return d;
  }
  void Reset() { next_ = initial_; }

 private:
  milliseconds initial_, max_, next_;
};

std::string MetaString(const json& object, const char* field) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto value = meta->find(field);
  return value != meta->end() && value->is_string() ? value->get<std::string>() : "";
}

}  // namespace

std::string KeyOf(const json& object) {
  const std::string ns = MetaString(object, "namespace");
  const std::string name = MetaString(object, "name");
  return ns.empty() ? name : ns + "/" + name;
}

Informer::Informer(Client* client, ResourceRef resource, InformerOptions options, Handler handler)
    : client_(client), resource_(std::move(resource)), options_(std::move(options)), handler_(std::move(handler)) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return synced_ || stop_; });
  return synced_;
}

bool Informer::synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

std::optional<json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  out.reserve(cache_.size());
  for (const auto& [key, object] : cache_) out.push_back(object);
  return out;
}

int Informer::lists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lists_;
}

json Informer::Prepared(json object) const {
  // List items come without apiVersion and kind from a real API server; watch events with.
  if (object.is_object()) {
    if (!object.contains("apiVersion")) {
      object["apiVersion"] = resource_.group.empty() ? resource_.version : resource_.group + "/" + resource_.version;
    }
    if (!object.contains("kind") && !resource_.kind.empty()) object["kind"] = resource_.kind;
  }
  if (options_.transform) options_.transform(&object);
  return object;
}

void Informer::Notify(const std::string& type, const json& object) {
  if (!handler_) return;
  // A handler that throws must neither end this thread nor replay the watch.
  try {
    handler_(type, object);
  } catch (const std::exception&) {
  }
}

void Informer::ReportList(const Status& outcome) {
  if (!options_.on_list) return;
  try {
    options_.on_list(outcome);
  } catch (const std::exception&) {
  }
}

bool Informer::Sleep(milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_.load(); });
}

Status Informer::ListInto(std::map<std::string, json>* next, std::string* rv) {
  ListOptions options{options_.label_selector, options_.field_selector, std::max<int64_t>(options_.page_size, 0), ""};
  do {
    StatusOr<json> page = client_->List(resource_, options_.ns, options);
    if (stop_) return Status::Aborted("informer stopped");
    if (!page.ok()) return page.status();
    // Every page is of the first one's snapshot: its resourceVersion is the list's.
    *rv = MetaString(*page, "resourceVersion");
    options.continue_token = MetaString(*page, "continue");
    for (json& item : (*page)["items"]) {
      json object;
      try {
        object = Prepared(std::move(item));
      } catch (const std::exception& e) {
        return Status::Internal(std::string("informer transform: ") + e.what());
      }
      std::string key = KeyOf(object);
      (*next)[std::move(key)] = std::move(object);
    }
  } while (options.limit > 0 && !options.continue_token.empty());
  return Status::Ok();
}

Status Informer::Relist(std::string* rv) {
  std::map<std::string, json> next;
  const Status listed = ListInto(&next, rv);
  if (stop_) return Status::Aborted("informer stopped");
  if (!listed.ok()) {
    ReportList(listed);
    return listed;
  }
  // The difference to the cache. Added and modified objects are named by key and handed
  // to the handler from the cache (only this thread writes it), deleted ones moved out of
  // the old cache: no list-sized copy.
  std::vector<std::pair<const char*, std::string>> changed;
  Events deleted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, object] : next) {
      auto old = cache_.find(key);
      if (old == cache_.end()) {
        changed.emplace_back("ADDED", key);
      } else if (MetaString(old->second, "resourceVersion") != MetaString(object, "resourceVersion")) {
        changed.emplace_back("MODIFIED", key);
      }
    }
    for (auto& [key, object] : cache_) {
      if (next.count(key) == 0) deleted.emplace_back("DELETED", std::move(object));
    }
    cache_ = std::move(next);
    ++lists_;
    synced_ = true;
  }
  cv_.notify_all();
  for (const auto& [type, key] : changed) Notify(type, cache_.at(key));
  for (const auto& [type, object] : deleted) Notify(type, object);
  ReportList(Status());
  return Status();
}

std::optional<WatchOptions> Informer::NextWatch(const std::string& rv, Clock::time_point last_list) const {
  WatchOptions watch;
  watch.label_selector = options_.label_selector;
  watch.field_selector = options_.field_selector;
  watch.resource_version = rv;
  watch.allow_bookmarks = true;
  watch.timeout = std::max(options_.watch_timeout, std::chrono::seconds(1));
  if (options_.resync.count() > 0) {
    const auto left = options_.resync - (Clock::now() - last_list);
    if (left <= Clock::duration::zero()) return std::nullopt;
    watch.timeout = std::clamp(std::chrono::ceil<std::chrono::seconds>(left), std::chrono::seconds(1), watch.timeout);
  }
  return watch;
}

Status Informer::WatchFrom(const WatchOptions& options, std::string* rv, bool* changed) {
  return client_->Watch(
      resource_, options_.ns, options,
      [&](const WatchEvent& e) {
        const std::string event_rv = MetaString(e.object, "resourceVersion");
        if (e.type == "BOOKMARK") {
          if (!event_rv.empty()) *rv = event_rv;
          return !stop_;
        }
        if (e.type != "ADDED" && e.type != "MODIFIED" && e.type != "DELETED") return !stop_;
        json object;
        try {
          object = Prepared(e.object);
        } catch (const std::exception&) {
          return false;  // the watch ends here: a re-list follows (Run)
        }
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (e.type == "DELETED") {
            cache_.erase(KeyOf(object));
          } else {
            cache_[KeyOf(object)] = object;
          }
        }
        if (!event_rv.empty()) *rv = event_rv;
        *changed = true;
        Notify(e.type, object);
        return !stop_;
      },
      &stop_);
}

void Informer::Run() {
  Backoff backoff(options_.relist_backoff, options_.max_relist_backoff);
  bool need_list = true;
  std::string rv;
  Clock::time_point last_list;
  while (!stop_) {
    if (need_list) {
      const Status listed = Relist(&rv);
      if (stop_) return;
      if (!listed.ok()) {
        if (!Sleep(backoff.Next())) return;
        continue;
      }
      last_list = Clock::now();
      need_list = false;
    }
    const std::optional<WatchOptions> watch = NextWatch(rv, last_list);
    if (!watch) {  // a resync is due
      need_list = true;
      continue;
    }
    const auto started = Clock::now();
    bool changed = false;
    const Status watched = WatchFrom(*watch, &rv, &changed);
    if (stop_) return;
    if (!watched.ok()) {  // 410 Gone or another error: re-list after the backoff
      need_list = true;
      if (!Sleep(backoff.Next())) return;
      continue;
    }
    // The server ended the stream. At its timeout: watch again from rv. Earlier (a dropped
    // connection, a restarting server): re-list, so nothing missed stays missed.
    const bool full = Clock::now() - started >= watch->timeout - std::chrono::seconds(1);
    if (full || changed) backoff.Reset();
    if (!full) {
      need_list = true;
      if (!changed && !Sleep(backoff.Next())) return;
    }
    if (options_.resync.count() > 0 && Clock::now() - last_list >= options_.resync) need_list = true;
  }
}

}  // namespace star::kube
