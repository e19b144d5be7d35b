#include "star/core/api/decision.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "star/core/api/json_reader.h"

namespace star::api {

using nlohmann::json;

namespace {

Status Invalid(const std::string& path, const std::string& reason) {
  return Status::InvalidArgument(path + ": " + reason);
}

std::string AtLeastMsg(int64_t min, int64_t got) {
  return "must be >= " + std::to_string(min) + ", got " + std::to_string(got);
}

Status CheckGroups(const Decision& d, const std::string& path) {
  const std::string groups = JoinPath(path, "groups");
  if (d.mode == SyncMode::kGroups && d.groups.empty()) {
    return Invalid(groups, "must not be empty when mode is groups");
  }
  std::set<int> ranks;
  for (const auto& w : d.workers) ranks.insert(w.worker);
  std::map<int, std::string> seen;  // rank -> path of its first appearance
  for (size_t g = 0; g < d.groups.size(); ++g) {
    const std::string gp = IndexPath(groups, g);
    if (d.groups[g].empty()) return Invalid(gp, "must not be empty");
    for (size_t i = 0; i < d.groups[g].size(); ++i) {
      const int r = d.groups[g][i];
      const std::string at = IndexPath(gp, i);
      if (r < 0) return Invalid(at, AtLeastMsg(0, r));
      if (!d.workers.empty() && ranks.count(r) == 0) {
        return Invalid(at, "worker " + std::to_string(r) + " is not in workers");
      }
      auto [it, inserted] = seen.emplace(r, at);
      if (!inserted) return Invalid(at, "duplicate of " + it->second);
    }
  }
  if (!d.groups.empty() && !d.workers.empty()) {
    for (int r : ranks) {
      if (seen.count(r) == 0) {
        return Invalid(groups,
                       "must cover every worker, worker " + std::to_string(r) + " is in no group");
      }
    }
  }
  return Status::Ok();
}

Status CheckWarmup(const Decision& d, const std::string& path) {
  const std::string warmup = JoinPath(path, "warmup");
  for (size_t i = 0; i < d.warmup.size(); ++i) {
    const std::string at = IndexPath(warmup, i);
    if (d.warmup[i] < 1) return Invalid(at, AtLeastMsg(1, d.warmup[i]));
    if (i > 0 && d.warmup[i] > d.warmup[i - 1]) {
      return Invalid(at, "must be <= " + IndexPath(warmup, i - 1) + " (" + std::to_string(d.warmup[i - 1]) +
                             "): a stage deeper than the one before it waits for activations never sent, got " +
                             std::to_string(d.warmup[i]));
    }
  }
  const double p = d.predicted_iteration_seconds;
  if (d.warmup.empty() && p != 0) {
    return Invalid(JoinPath(path, "predicted_iteration_seconds"), "only with warmup");
  }
  if (!(p >= 0) || p > std::numeric_limits<double>::max()) {
    return Invalid(JoinPath(path, "predicted_iteration_seconds"), "must be a finite number >= 0, got " + FormatNumber(p));
  }
  const int links = std::max(0, static_cast<int>(d.warmup.size()) - 1);
  if (d.slow_link != -1 && (d.slow_link < 0 || d.slow_link >= links)) {
    return Invalid(JoinPath(path, "slow_link"),
                   links == 0 ? "must be -1 without a warmup, got " + std::to_string(d.slow_link)
                              : "must be -1 or in [0, " + std::to_string(links) + "), got " +
                                    std::to_string(d.slow_link));
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const Decision& d, const std::string& path) {
  if (d.epoch < 0) return Invalid(JoinPath(path, "epoch"), AtLeastMsg(0, d.epoch));
  if (d.apply_at_iteration < 0) {
    return Invalid(JoinPath(path, "apply_at_iteration"), AtLeastMsg(0, d.apply_at_iteration));
  }
  if (d.k < 1) return Invalid(JoinPath(path, "k"), AtLeastMsg(1, d.k));
  const std::string workers = JoinPath(path, "workers");
  std::map<int, size_t> index_of;
  for (size_t i = 0; i < d.workers.size(); ++i) {
    const WorkerSetting& w = d.workers[i];
    const std::string at = IndexPath(workers, i);
    if (w.worker < 0) return Invalid(at + ".worker", AtLeastMsg(0, w.worker));
    if (w.batch < 1) return Invalid(at + ".batch", AtLeastMsg(1, w.batch));
    auto [it, inserted] = index_of.emplace(w.worker, i);
    if (!inserted) return Invalid(at + ".worker", "duplicate of " + IndexPath(workers, it->second));
  }
  if (!d.workers.empty() && static_cast<size_t>(d.k) > d.workers.size()) {
    return Invalid(JoinPath(path, "k"), "must be <= the number of workers (" +
                                            std::to_string(d.workers.size()) + "), got " +
                                            std::to_string(d.k));
  }
  STAR_RETURN_IF_ERROR(CheckWarmup(d, path));
  return CheckGroups(d, path);
}

json ToJson(const Decision& d) {
  json workers = json::array();
  for (const auto& w : d.workers) {
    workers.push_back({{"worker", w.worker}, {"amp", w.amp}, {"batch", w.batch}});
  }
  json j = {{"epoch", d.epoch},         {"apply_at_iteration", d.apply_at_iteration},
            {"mode", ToString(d.mode)}, {"k", d.k},
            {"groups", d.groups},       {"workers", std::move(workers)}};
  if (!d.warmup.empty()) {
    j["warmup"] = d.warmup;
    j["predicted_iteration_seconds"] = d.predicted_iteration_seconds;
  }
  if (d.slow_link >= 0) j["slow_link"] = d.slow_link;
  return j;
}

StatusOr<Decision> DecisionFromJson(const json& j, const std::string& path) {
  Decision d;
  ObjectReader rd(j, path);
  std::string mode;
  rd.Int("epoch", &d.epoch)
      .Int("apply_at_iteration", &d.apply_at_iteration)
      .Enum("mode", &mode, {"ssgd", "fixed_k", "groups", "asgd"})
      .Int("k", &d.k);
  if (rd.ok()) d.mode = *ParseSyncMode(mode);

  if (const json* g = rd.Get("groups"); rd.ok() && g != nullptr) {
    if (!g->is_array()) {
      rd.Fail("groups", "must be an array, got " + JsonTypeName(*g));
    } else {
      for (size_t i = 0; i < g->size() && rd.ok(); ++i) {
        auto group = IntListFromJson((*g)[i], IndexPath(rd.FieldPath("groups"), i));
        rd.Merge(group.status());
        if (group.ok()) d.groups.push_back(*std::move(group));
      }
    }
  }

  if (const json* w = rd.Get("workers"); rd.ok() && w != nullptr) {
    if (!w->is_array()) {
      rd.Fail("workers", "must be an array, got " + JsonTypeName(*w));
    } else {
      for (size_t i = 0; i < w->size() && rd.ok(); ++i) {
        WorkerSetting s;
        ObjectReader wr((*w)[i], IndexPath(rd.FieldPath("workers"), i));
        wr.Int("worker", &s.worker)
            .Bool("amp", &s.amp, Need::kOptional)
            .Int("batch", &s.batch)
            .RejectUnknown({"worker", "amp", "batch"});
        rd.Merge(wr.status());
        d.workers.push_back(s);
      }
    }
  }
  if (rd.ok() && rd.Has("warmup")) {
    auto warmup = IntListFromJson(*rd.Get("warmup"), rd.FieldPath("warmup"));
    rd.Merge(warmup.status());
    if (warmup.ok()) d.warmup = *std::move(warmup);
  }
  rd.Number("predicted_iteration_seconds", &d.predicted_iteration_seconds, Need::kOptional)
      .Int("slow_link", &d.slow_link, Need::kOptional);
  rd.RejectUnknown({"epoch", "apply_at_iteration", "mode", "k", "groups", "workers", "warmup",
                    "predicted_iteration_seconds", "slow_link"});
  if (rd.ok()) rd.Merge(Validate(d, path));
  if (!rd.ok()) return rd.status();
  return d;
}

bool SameSynchronization(const Decision& a, const Decision& b) {
  if (a.mode != b.mode) return false;
  switch (a.mode) {
    case SyncMode::kFixedK:
      return a.k == b.k && a.groups == b.groups;
    case SyncMode::kGroups:
      return a.groups == b.groups;
    case SyncMode::kSsgd:
    case SyncMode::kAsgd:
      break;
  }
  return true;
}

}  // namespace star::api
