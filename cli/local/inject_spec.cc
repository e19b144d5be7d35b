#include "local/inject_spec.h"

#include <charconv>
#include <cmath>
#include <map>
#include <set>

namespace star::local {

std::string_view ToString(InjectionKind k) {
  switch (k) {
    case InjectionKind::kCpu: return "cpu";
    case InjectionKind::kNeighbor: return "neighbor";
    case InjectionKind::kBandwidth: return "bandwidth";
    case InjectionKind::kDelay: return "delay";
  }
  return "?";
}

namespace {

// A whole-string finite decimal number ("1.5", "20"), or nullopt.
std::optional<double> Number(std::string_view s) {
  if (s.empty() || s.front() == '+' || s.front() == ' ') return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> Integer(std::string_view s) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Splits "12.5mbit" into ("12.5", "mbit").
std::pair<std::string_view, std::string_view> SplitUnit(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                          s[i] == '-' || s[i] == 'e' || s[i] == 'E')) {
    // 'e' only as an exponent: stop at a unit that starts with e (none of ours do).
    ++i;
  }
  return {s.substr(0, i), s.substr(i)};
}

}  // namespace

StatusOr<double> ParseDuration(std::string_view text) {
  auto [num, unit] = SplitUnit(text);
  auto v = Number(num);
  if (!v) return Status::InvalidArgument("not a duration: \"" + std::string(text) + "\" (e.g. 12s, 500ms, 2m)");
  if (unit.empty()) {
    return Status::InvalidArgument("\"" + std::string(text) + "\" needs a unit: s, ms, m or h");
  }
  double scale = 0;
  if (unit == "ms") scale = 1e-3;
  else if (unit == "s") scale = 1;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else return Status::InvalidArgument("\"" + std::string(text) + "\": unknown unit \"" + std::string(unit) + "\" (s, ms, m or h)");
  if (*v < 0) return Status::InvalidArgument("must be >= 0, got " + std::string(text));
  return *v * scale;
}

StatusOr<int64_t> ParseRate(std::string_view text) {
  auto [num, unit] = SplitUnit(text);
  auto v = Number(num);
  if (!v) return Status::InvalidArgument("not a rate: \"" + std::string(text) + "\" (e.g. 20mbit)");
  static const std::map<std::string_view, double> kUnits = {
      {"bit", 1},          {"kbit", 1e3},       {"mbit", 1e6},       {"gbit", 1e9},
      {"bps", 8},          {"kbps", 8e3},       {"mbps", 8e6},       {"gbps", 8e9}};
  if (unit.empty()) {
    return Status::InvalidArgument("\"" + std::string(text) + "\" needs a unit: bit, kbit, mbit, gbit, bps, kbps, mbps or gbps");
  }
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    return Status::InvalidArgument("\"" + std::string(text) + "\": unknown unit \"" + std::string(unit) +
                                   "\" (bit, kbit, mbit, gbit, bps, kbps, mbps, gbps)");
  }
  const double bps = *v * it->second;
  if (bps < 0 || bps > 1e15) return Status::InvalidArgument("out of range: " + std::string(text));
  return static_cast<int64_t>(std::llround(bps));
}

StatusOr<int64_t> ParseCpuQuantity(std::string_view text) {
  double cores = 0;
  if (!text.empty() && text.back() == 'm') {
    auto v = Number(text.substr(0, text.size() - 1));
    if (!v) return Status::InvalidArgument("invalid CPU quantity \"" + std::string(text) + "\"");
    cores = *v / 1000;
  } else {
    auto v = Number(text);
    if (!v) return Status::InvalidArgument("invalid CPU quantity \"" + std::string(text) + "\" (e.g. 500m or 0.5)");
    cores = *v;
  }
  const auto mc = static_cast<int64_t>(std::llround(cores * 1000));
  if (mc <= 0) return Status::InvalidArgument("CPU quantity must be > 0, got \"" + std::string(text) + "\"");
  return mc;
}

StatusOr<Injection> ParseInjection(std::string_view spec) {
  Injection in;
  in.text = std::string(spec);
  const std::string where = "--inject \"" + in.text + "\": ";
  auto bad = [&](const std::string& m) { return Status::InvalidArgument(where + m); };
  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view pair = spec.substr(pos, comma - pos);
    if (pair.empty()) return bad("empty key=value pair");
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return bad("\"" + std::string(pair) + "\": expected key=value");
    std::string key(pair.substr(0, eq));
    std::string value(pair.substr(eq + 1));
    static const std::set<std::string> kKeys = {"worker", "cpu", "neighbor", "guarantee", "bandwidth",
                                                 "delay", "start", "end"};
    if (!kKeys.count(key)) {
      return bad("unknown key \"" + key +
                 "\" (worker, cpu, neighbor, guarantee, bandwidth, delay, start, end)");
    }
    if (value.empty()) return bad(key + ": empty value");
    if (!kv.emplace(key, value).second) return bad(key + ": given twice");
    pos = comma + 1;
  }
  if (!kv.count("worker")) return bad("worker: required (worker=W, numbered from 0)");
  auto w = Integer(kv["worker"]);
  if (!w || *w < 0 || *w > 100000) return bad("worker: must be an integer >= 0, got " + kv["worker"]);
  in.worker = static_cast<int>(*w);
  std::vector<std::string> kinds;
  for (const char* k : {"cpu", "neighbor", "bandwidth", "delay"}) {
    if (kv.count(k)) kinds.push_back(k);
  }
  if (kinds.empty()) return bad("needs one of cpu, neighbor, bandwidth, delay");
  if (kinds.size() > 1) return bad(kinds[0] + " and " + kinds[1] + " are exclusive: one kind per --inject");
  const std::string& kind = kinds[0];
  const std::string& value = kv[kind];
  if (kind == "cpu") {
    in.kind = InjectionKind::kCpu;
    auto f = Number(value);
    if (!f || *f <= 0 || *f > 1) return bad("cpu: must be in (0, 1], got " + value);
    in.cpu_fraction = *f;
  } else if (kind == "neighbor") {
    in.kind = InjectionKind::kNeighbor;
    auto n = Integer(value);
    if (!n || *n < 1 || *n > 64) return bad("neighbor: must be an integer in [1, 64], got " + value);
    in.neighbor_threads = static_cast<int>(*n);
  } else if (kind == "bandwidth") {
    in.kind = InjectionKind::kBandwidth;
    auto r = ParseRate(value);
    if (!r.ok()) return bad("bandwidth: " + r.status().message());
    if (*r < 8000) return bad("bandwidth: must be >= 8kbit, got " + value);
    in.bandwidth_bps = *r;
  } else {
    in.kind = InjectionKind::kDelay;
    auto d = ParseDuration(value);
    if (!d.ok()) return bad("delay: " + d.status().message());
    if (*d <= 0 || *d > 10) return bad("delay: must be in (0s, 10s], got " + value);
    in.delay_seconds = *d;
  }
  if (kv.count("guarantee")) {
    if (in.kind != InjectionKind::kNeighbor) return bad("guarantee: only with neighbor");
    auto c = ParseCpuQuantity(kv["guarantee"]);
    if (!c.ok()) return bad("guarantee: " + c.status().message());
    in.neighbor_guarantee_cpus = static_cast<double>(*c) / 1000;
  }
  if (kv.count("start")) {
    auto s = ParseDuration(kv["start"]);
    if (!s.ok()) return bad("start: " + s.status().message());
    in.start_seconds = *s;
  }
  if (kv.count("end")) {
    auto e = ParseDuration(kv["end"]);
    if (!e.ok()) return bad("end: " + e.status().message());
    if (*e <= in.start_seconds) return bad("end: must be after start, got " + kv["end"]);
    in.end_seconds = *e;
  }
  return in;
}

Status ValidateInjections(const std::vector<Injection>& injections, int workers) {
  if (workers < 1) return Status::InvalidArgument("workers: must be >= 1");
  for (size_t i = 0; i < injections.size(); ++i) {
    const Injection& a = injections[i];
    if (a.worker >= workers) {
      return Status::InvalidArgument("--inject \"" + a.text + "\": worker: must be < " +
                                     std::to_string(workers) + " (the job's workers), got " +
                                     std::to_string(a.worker));
    }
    for (size_t j = 0; j < i; ++j) {
      const Injection& b = injections[j];
      if (a.worker != b.worker || a.kind != b.kind) continue;
      const double a_end = a.end_seconds.value_or(INFINITY);
      const double b_end = b.end_seconds.value_or(INFINITY);
      if (a.start_seconds < b_end && b.start_seconds < a_end) {
        return Status::InvalidArgument("--inject \"" + a.text + "\" and --inject \"" + b.text +
                                       "\": " + std::string(ToString(a.kind)) +
                                       " injections on worker " + std::to_string(a.worker) +
                                       " overlap in time");
      }
    }
  }
  return Status::Ok();
}

}  // namespace star::local
