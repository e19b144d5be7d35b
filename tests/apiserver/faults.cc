#include "faults.h"

#include <algorithm>
#include <cctype>

namespace star::apiserver {

using nlohmann::json;

StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return Status::InvalidArgument("invalid duration \"" + text + "\" (examples: 500ms, 2s, 1m)");
  }
  const std::string unit = text.substr(used);
  double ms = 0;
  if (unit.empty() || unit == "ms") {
    ms = value;
  } else if (unit == "us") {
    ms = value / 1000;
  } else if (unit == "s") {
    ms = value * 1000;
  } else if (unit == "m") {
    ms = value * 60 * 1000;
  } else if (unit == "h") {
    ms = value * 3600 * 1000;
  } else {
    return Status::InvalidArgument("invalid duration \"" + text + "\": unknown unit \"" + unit + "\"");
  }
  if (value < 0) return Status::InvalidArgument("invalid duration \"" + text + "\": negative");
  return std::chrono::milliseconds(static_cast<long long>(ms + 0.5));
}

namespace {

Status SetField(FaultRule& r, const std::string& key, const json& v) {
  auto need = [&](bool ok, const char* what) {
    return ok ? Status::Ok()
              : Status::InvalidArgument("fault rule: \"" + key + "\" must be " + what + ", got " + v.dump());
  };
  if (key == "verb" || key == "resource" || key == "namespace" || key == "message") {
    STAR_RETURN_IF_ERROR(need(v.is_string(), "a string"));
    (key == "verb" ? r.verb : key == "resource" ? r.resource : key == "namespace" ? r.ns : r.message) =
        v.get<std::string>();
  } else if (key == "status") {
    STAR_RETURN_IF_ERROR(need(v.is_number_integer() && v.get<int>() >= 400 && v.get<int>() <= 599,
                              "an HTTP error code (400-599)"));
    r.status = v.get<int>();
  } else if (key == "count") {
    STAR_RETURN_IF_ERROR(need(v.is_number_integer() && v.get<std::int64_t>() >= 0, "a count >= 0"));
    r.count = v.get<std::int64_t>();
  } else if (key == "probability") {
    STAR_RETURN_IF_ERROR(need(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1, "in [0, 1]"));
    r.probability = v.get<double>();
  } else if (key == "seed") {
    STAR_RETURN_IF_ERROR(need(v.is_number_integer(), "an integer"));
    r.seed = v.get<std::uint64_t>();
  } else if (key == "latency" || key == "latencyMs") {
    if (v.is_number()) {
      STAR_RETURN_IF_ERROR(need(v.get<double>() >= 0, "a duration >= 0"));
      r.latency = std::chrono::milliseconds(static_cast<long long>(v.get<double>()));
    } else {
      STAR_RETURN_IF_ERROR(need(v.is_string(), "a duration (\"200ms\") or milliseconds"));
      STAR_ASSIGN_OR_RETURN(r.latency, ParseDuration(v.get<std::string>()));
    }
  } else if (key == "dropWatchAfter") {
    STAR_RETURN_IF_ERROR(need(v.is_number_integer() && v.get<int>() >= 0, "a count of events >= 0"));
    r.drop_watch_after = v.get<int>();
  } else {
    return Status::InvalidArgument("fault rule: unknown field \"" + key + "\"");
  }
  return Status::Ok();
}

bool Matches(const std::string& pattern, const std::string& value) { return pattern == "*" || pattern == value; }

}  // namespace

StatusOr<FaultRule> FaultRule::FromJson(const json& rule) {
  if (!rule.is_object()) return Status::InvalidArgument("fault rule: must be an object, got " + rule.dump());
  FaultRule r;
  for (const auto& [key, value] : rule.items()) STAR_RETURN_IF_ERROR(SetField(r, key, value));
  return r;
}

StatusOr<FaultRule> FaultRule::Parse(const std::string& spec) {
  json rule = json::object();
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string part = spec.substr(start, comma - start);
    start = comma + 1;
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("fault spec \"" + spec + "\": expected key=value, got \"" + part + "\"");
    }
    const std::string key = part.substr(0, eq), text = part.substr(eq + 1);
    if (key == "status" || key == "count" || key == "seed" || key == "dropWatchAfter" || key == "probability") {
      try {
        size_t used = 0;
        const double number = std::stod(text, &used);
        if (used != text.size()) throw std::invalid_argument(text);
        if (key == "probability") {
          rule[key] = number;
        } else {
          rule[key] = static_cast<std::int64_t>(number);
        }
      } catch (const std::exception&) {
        return Status::InvalidArgument("fault spec \"" + spec + "\": " + key + " must be a number, got \"" + text + "\"");
      }
    } else {
      rule[key] = text;
    }
  }
  auto r = FromJson(rule);
  if (!r.ok()) return Status::InvalidArgument("fault spec \"" + spec + "\": " + r.status().message());
  return r;
}

json FaultRule::ToJson() const {
  json j = {{"verb", verb}, {"resource", resource}, {"namespace", ns}};
  if (status) j["status"] = *status;
  if (!message.empty()) j["message"] = message;
  if (count) j["count"] = *count;
  if (probability) {
    j["probability"] = *probability;
    j["seed"] = seed;
  }
  if (latency.count() > 0) j["latencyMs"] = latency.count();
  if (drop_watch_after) j["dropWatchAfter"] = *drop_watch_after;
  return j;
}

void FaultInjector::Add(FaultRule rule) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t seed = rule.seed;
  entries_.push_back({std::move(rule), std::mt19937_64(seed)});
}

void FaultInjector::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
}

json FaultInjector::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  json rules = json::array();
  for (const auto& e : entries_) rules.push_back(e.rule.ToJson());
  return {{"rules", rules}};
}

FaultDecision FaultInjector::Decide(const std::string& verb, const std::string& resource,
                                    const std::string& subresource, const std::string& ns) {
  std::lock_guard<std::mutex> lock(mu_);
  FaultDecision d;
  const std::string full = subresource.empty() ? resource : resource + "/" + subresource;
  for (auto& e : entries_) {
    FaultRule& r = e.rule;
    if (!Matches(r.verb, verb) || !Matches(r.ns, ns)) continue;
    if (r.resource != "*" && r.resource != resource && r.resource != full) continue;
    // A watch-only rule does not fire for other verbs.
    if (r.drop_watch_after && !r.status && r.latency.count() == 0 && verb != "watch") continue;
    // A status rule is not consumed once another has decided the answer.
    if (r.status && d.status) continue;
    if (r.count && *r.count <= 0) continue;
    if (r.probability) {
      std::uniform_real_distribution<double> u(0.0, 1.0);
      if (u(e.rng) >= *r.probability) continue;
    }
    if (r.count) --*r.count;
    d.latency += r.latency;
    if (r.status) {
      d.status = r.status;
      d.message = r.message.empty()
                      ? "injected fault: " + verb + " " + full + " answered " + std::to_string(*r.status)
                      : r.message;
    }
    if (r.drop_watch_after && verb == "watch") {
      d.drop_watch_after = d.drop_watch_after ? std::min(*d.drop_watch_after, *r.drop_watch_after) : *r.drop_watch_after;
    }
  }
  if (d.status) ++counters_.errors;
  if (d.latency.count() > 0) ++counters_.delayed;
  if (d.drop_watch_after) ++counters_.dropped_watches;
  return d;
}

FaultInjector::Counters FaultInjector::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace star::apiserver
