#include "faults.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

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
  if (!std::isfinite(value)) return Status::InvalidArgument("invalid duration \"" + text + "\": not a number");
  if (value < 0) return Status::InvalidArgument("invalid duration \"" + text + "\": negative");
  if (ms > static_cast<double>(kMaxDuration.count())) {
    return Status::InvalidArgument("invalid duration \"" + text + "\": longer than " +
                                   std::to_string(kMaxDuration.count() / 3600000) + "h");
  }
  return std::chrono::milliseconds(static_cast<long long>(ms + 0.5));
}

namespace {

// `v` as a 64-bit integer, nullopt unless an integer that fits.
std::optional<std::int64_t> Int64(const json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(v.get<std::uint64_t>());
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

bool InRange(const json& v, std::int64_t min, std::int64_t max) {
  const auto n = Int64(v);
  return n && *n >= min && *n <= max;
}

Status SetLatency(FaultRule& r, const json& v) {
  const std::string range = "a duration from 0 to " + std::to_string(kMaxFaultLatency.count() / 60000) + "m";
  std::chrono::milliseconds latency{0};
  if (v.is_number()) {
    const double ms = v.get<double>();
    if (!(ms >= 0 && ms <= static_cast<double>(kMaxFaultLatency.count()))) {
      return Status::InvalidArgument("fault rule: \"latency\" must be " + range + ", got " + v.dump());
    }
    latency = std::chrono::milliseconds(static_cast<long long>(ms));
  } else if (v.is_string()) {
    auto parsed = ParseDuration(v.get<std::string>());
    if (!parsed.ok()) return Status::InvalidArgument("fault rule: \"latency\": " + parsed.status().message());
    latency = *parsed;
  } else {
    return Status::InvalidArgument("fault rule: \"latency\" must be a duration (\"200ms\") or milliseconds, got " +
                                   v.dump());
  }
  if (latency > kMaxFaultLatency) {
    return Status::InvalidArgument("fault rule: \"latency\" must be " + range + ", got " + v.dump());
  }
  r.latency = latency;
  return Status::Ok();
}

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
    STAR_RETURN_IF_ERROR(need(InRange(v, 400, 599), "an HTTP error code, an integer from 400 to 599"));
    r.status = static_cast<int>(*Int64(v));
  } else if (key == "count") {
    STAR_RETURN_IF_ERROR(need(InRange(v, 0, INT64_MAX), "an integer >= 0"));
    r.count = *Int64(v);
  } else if (key == "probability") {
    STAR_RETURN_IF_ERROR(need(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1, "a number from 0 to 1"));
    r.probability = v.get<double>();
  } else if (key == "seed") {
    STAR_RETURN_IF_ERROR(need(v.is_number_unsigned() || InRange(v, 0, INT64_MAX), "an integer from 0 to 2^64-1"));
    r.seed = v.get<std::uint64_t>();
  } else if (key == "latency" || key == "latencyMs") {
    return SetLatency(r, v);
  } else if (key == "dropWatchAfter") {
    STAR_RETURN_IF_ERROR(need(InRange(v, 0, INT32_MAX), "a count of events, an integer from 0 to 2^31-1"));
    r.drop_watch_after = static_cast<int>(*Int64(v));
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
      // As JSON, so that the ranges and types are FromJson's: "5e2" is not an integer,
      // 99999999999999999999 does not fit.
      rule[key] = json::parse(text, nullptr, false);
      if (!rule[key].is_number()) {
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
