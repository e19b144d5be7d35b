#include "local/inject_spec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "star/core/api/json_reader.h"

namespace star::local {

std::string_view ToString(InjectionKind k) {
  switch (k) {
    case InjectionKind::kCpu: return "cpu";
    case InjectionKind::kNeighbor: return "neighbor";
    case InjectionKind::kBandwidth: return "bandwidth";
    case InjectionKind::kDelay: return "delay";
    case InjectionKind::kBwNeighbor: return "bwneighbor";
  }
  return "?";
}

namespace {

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// "1gbit", "250mbit", "12500bit": the largest tc unit that divides the rate.
std::string Rate(int64_t bps) {
  for (const auto& [unit, scale] : {std::pair{"gbit", int64_t{1000000000}},
                                    std::pair{"mbit", int64_t{1000000}}, std::pair{"kbit", int64_t{1000}}}) {
    if (bps >= scale && bps % scale == 0) return std::to_string(bps / scale) + unit;
  }
  return std::to_string(bps) + "bit";
}

// "5s", "0.25s", "1e+06s".
std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", s);
  return buf;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The whole of `s` as a finite decimal number ("1.5", "-2", "1e3"); no '+', hex, inf or nan.
std::optional<double> Number(std::string_view s) {
  if (s.empty() || s.front() == '+') return std::nullopt;
  double v = 0;
  const auto [ptr, ec] =
      std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// The whole of `s` as a decimal integer ("12", "-1").
std::optional<int64_t> Integer(std::string_view s) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Splits "12.5mbit" into ("12.5", "mbit") and "1e3bit" into ("1e3", "bit"): the number is
// the longest prefix of digits, '.', signs and exponents ('e' followed by a digit or a
// signed digit; no unit starts like that).
std::pair<std::string_view, std::string_view> SplitUnit(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (IsDigit(c) || c == '.' || c == '-' || c == '+') {
      ++i;
    } else if ((c == 'e' || c == 'E') && i > 0 &&
               ((i + 1 < s.size() && IsDigit(s[i + 1])) ||
                (i + 2 < s.size() && (s[i + 1] == '-' || s[i + 1] == '+') && IsDigit(s[i + 2])))) {
      ++i;
    } else {
      break;
    }
  }
  return {s.substr(0, i), s.substr(i)};
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// SPEC keys, in the order error messages list them.
enum Key {
  kWorker, kCpu, kNeighbor, kBandwidth, kDelay, kBwNeighbor, kStart, kEnd, kGuarantee, kLink,
  kPeer, kNumKeys
};
constexpr std::array<std::string_view, kNumKeys> kKeyNames = {
    "worker", "cpu",   "neighbor", "bandwidth", "delay", "bwneighbor",
    "start",  "end",   "guarantee", "link",     "peer"};

std::optional<Key> KeyOf(std::string_view name) {
  for (int k = 0; k < kNumKeys; ++k) {
    if (kKeyNames[static_cast<size_t>(k)] == name) return static_cast<Key>(k);
  }
  return std::nullopt;
}

bool IsKind(Key k) {
  return k == kCpu || k == kNeighbor || k == kBandwidth || k == kDelay || k == kBwNeighbor;
}

}  // namespace

StatusOr<double> ParseDuration(std::string_view text) {
  const auto [num, unit] = SplitUnit(text);
  const std::optional<double> v = Number(num);
  if (!v) return Status::InvalidArgument("must be a duration like 12s, 500ms or 2m, got " + Quoted(text));
  if (unit.empty()) return Status::InvalidArgument("needs a unit: s, ms, m or h; got " + Quoted(text));
  double scale = 0;
  if (unit == "ms") {
    scale = 1e-3;
  } else if (unit == "s") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else {
    return Status::InvalidArgument("unknown unit " + Quoted(unit) + " in " + Quoted(text) +
                                   " (use s, ms, m or h)");
  }
  if (*v < 0) return Status::InvalidArgument("must be >= 0, got " + Quoted(text));
  const double seconds = *v * scale;
  if (!std::isfinite(seconds)) return Status::InvalidArgument("out of range: " + Quoted(text));
  return seconds;
}

StatusOr<int64_t> ParseRate(std::string_view text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"bit", 1},   {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12},
      {"bps", 8},   {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}, {"tbps", 8e12}};
  constexpr double kMaxBps = 1e15;
  const auto [num, unit] = SplitUnit(text);
  const std::optional<double> v = Number(num);
  if (!v) return Status::InvalidArgument("must be a rate like 20mbit or 500kbit, got " + Quoted(text));
  if (unit.empty()) {
    return Status::InvalidArgument("needs a unit: bit, kbit, mbit, gbit, bps, kbps, mbps or gbps; got " +
                                   Quoted(text));
  }
  const std::string lower = Lower(unit);
  double scale = 0;
  for (const auto& [name, s] : kUnits) {
    if (lower == name) scale = s;
  }
  if (scale == 0) {
    return Status::InvalidArgument("unknown unit " + Quoted(unit) + " in " + Quoted(text) +
                                   " (use bit, kbit, mbit, gbit, bps, kbps, mbps or gbps)");
  }
  if (*v < 0) return Status::InvalidArgument("must be >= 0, got " + Quoted(text));
  const double bps = *v * scale;
  if (!(bps <= kMaxBps)) return Status::InvalidArgument("must be at most 1000tbit, got " + Quoted(text));
  return static_cast<int64_t>(std::llround(bps));
}

StatusOr<int64_t> ParseCpuQuantity(std::string_view text) {
  constexpr double kMaxMillicores = 1e12;
  const bool milli = !text.empty() && text.back() == 'm';
  const std::optional<double> v = Number(milli ? text.substr(0, text.size() - 1) : text);
  if (!v) {
    return Status::InvalidArgument("must be a CPU quantity like 500m, 0.5 or 2, got " + Quoted(text));
  }
  const double millicores = milli ? *v : *v * 1000;
  if (!(millicores <= kMaxMillicores)) return Status::InvalidArgument("out of range: " + Quoted(text));
  const int64_t rounded = std::llround(millicores);
  if (rounded <= 0) return Status::InvalidArgument("must be > 0 (at least 1m), got " + Quoted(text));
  return rounded;
}

namespace {

// Builds the InvalidArgument for one --inject SPEC: "--inject "SPEC": KEY: REASON".
struct SpecError {
  std::string where;  // "--inject "SPEC": "
  Status operator()(std::string_view key, const std::string& reason) const {
    return Status::InvalidArgument(where + (key.empty() ? "" : std::string(key) + ": ") + reason);
  }
};

// A SPEC's values by key; `kinds` keeps the kind keys in the order given.
struct SpecPairs {
  std::array<std::optional<std::string>, kNumKeys> value;
  std::vector<Key> kinds;
  const std::optional<std::string>& Get(Key k) const { return value[static_cast<size_t>(k)]; }
};

std::string KeyName(Key k) { return std::string(kKeyNames[static_cast<size_t>(k)]); }

// Splits a non-empty SPEC into key=value pairs, checking the keys.
Status SplitPairs(std::string_view spec, const SpecError& bad, SpecPairs& pairs) {
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view pair = Trim(spec.substr(pos, comma - pos));
    pos = comma + 1;
    if (pair.empty()) return bad("", "empty key=value pair (a stray ',')");
    const size_t eq = pair.find('=');
    const std::string_view name = Trim(pair.substr(0, eq));
    if (eq == std::string_view::npos) return bad(name, "missing '=' (expected key=value)");
    if (name.empty()) return bad("", Quoted(pair) + ": missing key (expected key=value)");
    const std::optional<Key> key = KeyOf(name);
    if (!key) {
      return bad(name, "unknown key (known: worker, cpu, neighbor, bandwidth, delay, bwneighbor, "
                       "start, end, guarantee, link, peer)");
    }
    auto& slot = pairs.value[static_cast<size_t>(*key)];
    if (slot) return bad(name, "given twice");
    const std::string_view v = Trim(pair.substr(eq + 1));
    if (v.empty()) return bad(name, "missing value");
    slot = std::string(v);
    if (IsKind(*key)) pairs.kinds.push_back(*key);
  }
  return Status::Ok();
}

// The worker number `text` of key `key` (worker or peer).
StatusOr<int> ParseWorkerNumber(std::string_view key, const std::string& text, const SpecError& bad) {
  const std::optional<int64_t> w = Integer(text);
  if (!w) return bad(key, "must be an integer >= 0, got " + text);
  if (*w < 0) return bad(key, "must be >= 0, got " + text);
  if (*w > std::numeric_limits<int>::max()) return bad(key, "out of range, got " + text);
  return static_cast<int>(*w);
}

// Sets in.worker from the required worker=W.
Status ParseWorker(const SpecPairs& pairs, const SpecError& bad, Injection& in) {
  const std::optional<std::string>& worker = pairs.Get(kWorker);
  if (!worker) return bad("worker", "required (workers are numbered from 0)");
  STAR_ASSIGN_OR_RETURN(in.worker, ParseWorkerNumber("worker", *worker, bad));
  return Status::Ok();
}

// Sets in.kind and its amount from the kind key `kind` and its value `text`.
Status ParseKind(Key kind, const std::string& text, const SpecError& bad, Injection& in) {
  switch (kind) {
    case kCpu: {
      in.kind = InjectionKind::kCpu;
      const std::optional<double> f = Number(text);
      if (!f || *f <= 0 || *f > 1) return bad("cpu", "must be in (0, 1], got " + text);
      in.cpu_fraction = *f;
      break;
    }
    case kNeighbor: {
      in.kind = InjectionKind::kNeighbor;
      const std::optional<int64_t> n = Integer(text);
      if (!n || *n < 1 || *n > 64) return bad("neighbor", "must be an integer in [1, 64], got " + text);
      in.neighbor_threads = static_cast<int>(*n);
      break;
    }
    case kBandwidth: {
      in.kind = InjectionKind::kBandwidth;
      StatusOr<int64_t> r = ParseRate(text);
      if (!r.ok()) return bad("bandwidth", r.status().message());
      if (*r < 8000) return bad("bandwidth", "must be >= 8000bit (8kbit), got " + text);
      in.bandwidth_bps = *r;
      break;
    }
    case kBwNeighbor: {
      in.kind = InjectionKind::kBwNeighbor;
      StatusOr<int64_t> r = ParseRate(text);
      if (!r.ok()) return bad("bwneighbor", r.status().message());
      if (*r < 8000) return bad("bwneighbor", "must be >= 8000bit (8kbit), got " + text);
      in.bwneighbor_bps = *r;
      break;
    }
    default: {
      in.kind = InjectionKind::kDelay;
      StatusOr<double> d = ParseDuration(text);
      if (!d.ok()) return bad("delay", d.status().message());
      if (*d <= 0 || *d > 10) return bad("delay", "must be in (0, 10] seconds, got " + text);
      in.delay_seconds = *d;
      break;
    }
  }
  return Status::Ok();
}

// Sets the optional guarantee: CPUs with neighbor, a rate with bwneighbor (at most it).
Status ParseGuarantee(const std::string& g, const SpecError& bad, Injection& in) {
  if (in.kind == InjectionKind::kNeighbor) {
    StatusOr<int64_t> mc = ParseCpuQuantity(g);
    if (!mc.ok()) return bad("guarantee", mc.status().message());
    in.neighbor_guarantee_cpus = static_cast<double>(*mc) / 1000;
    return Status::Ok();
  }
  if (in.kind != InjectionKind::kBwNeighbor) {
    return bad("guarantee", "only allowed with neighbor or bwneighbor");
  }
  StatusOr<int64_t> r = ParseRate(g);
  if (!r.ok()) return bad("guarantee", r.status().message());
  if (*r > in.bwneighbor_bps) {
    return bad("guarantee", "must be at most the bwneighbor rate (" + Rate(in.bwneighbor_bps) +
                                "), got " + g);
  }
  in.bwneighbor_guarantee_bps = *r;
  return Status::Ok();
}

// Sets the uplink's rate (bwneighbor only): the neighbor's rate must fit in it.
Status ParseLink(const std::optional<std::string>& link, const SpecError& bad, Injection& in) {
  if (link && in.kind != InjectionKind::kBwNeighbor) return bad("link", "only allowed with bwneighbor");
  if (in.kind != InjectionKind::kBwNeighbor) return Status::Ok();
  if (link) {
    StatusOr<int64_t> r = ParseRate(*link);
    if (!r.ok()) return bad("link", r.status().message());
    if (*r < 16000) return bad("link", "must be >= 16000bit (16kbit), got " + *link);
    in.link_bps = *r;
  }
  if (in.bwneighbor_bps >= in.link_bps) {
    return bad("bwneighbor", "must be below the link's rate (" + Rate(in.link_bps) +
                                 (link ? "" : ", the default; link=RATE sets it") + "), got " +
                                 Rate(in.bwneighbor_bps));
  }
  return Status::Ok();
}

// Sets the optional peer (bandwidth or delay): another worker; a bandwidth must fit in
// the default uplink (ValidateInjections checks it against a bwneighbor's link).
Status ParsePeer(const std::optional<std::string>& peer, const SpecError& bad, Injection& in) {
  if (!peer) return Status::Ok();
  if (in.kind != InjectionKind::kBandwidth && in.kind != InjectionKind::kDelay) {
    return bad("peer", "only with bandwidth or delay");
  }
  STAR_ASSIGN_OR_RETURN(const int p, ParseWorkerNumber("peer", *peer, bad));
  if (p == in.worker) {
    return bad("peer", "must be another worker than " + std::to_string(in.worker) + ", got " + *peer);
  }
  if (in.kind == InjectionKind::kBandwidth && in.bandwidth_bps >= kDefaultLinkBps) {
    return bad("bandwidth", "must be below the workers' uplink rate (" + Rate(kDefaultLinkBps) +
                                ") with peer, got " + Rate(in.bandwidth_bps));
  }
  in.peer = p;
  return Status::Ok();
}

// Sets the optional link, peer, guarantee, start and end, once in.kind is known.
Status ParseOptions(const SpecPairs& pairs, const SpecError& bad, Injection& in) {
  STAR_RETURN_IF_ERROR(ParseLink(pairs.Get(kLink), bad, in));
  STAR_RETURN_IF_ERROR(ParsePeer(pairs.Get(kPeer), bad, in));
  if (const auto& g = pairs.Get(kGuarantee)) STAR_RETURN_IF_ERROR(ParseGuarantee(*g, bad, in));
  if (const auto& s = pairs.Get(kStart)) {
    StatusOr<double> t = ParseDuration(*s);
    if (!t.ok()) return bad("start", t.status().message());
    in.start_seconds = *t;
  }
  if (const auto& e = pairs.Get(kEnd)) {
    StatusOr<double> t = ParseDuration(*e);
    if (!t.ok()) return bad("end", t.status().message());
    if (*t <= in.start_seconds) {
      return bad("end", "must be > start (" + Seconds(in.start_seconds) + "), got " + *e);
    }
    in.end_seconds = *t;
  }
  if (in.kind == InjectionKind::kDelay && in.peer && (in.start_seconds > 0 || in.end_seconds)) {
    return bad(in.end_seconds ? "end" : "start",
               "a delay with peer lasts the whole run (the stages take it at launch)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Injection> ParseInjection(std::string_view spec) {
  Injection in;
  in.text = std::string(spec);
  const SpecError bad{"--inject " + Quoted(spec) + ": "};
  if (Trim(spec).empty()) {
    return bad("", "is empty; expected worker=W and one of cpu=F, neighbor=N, bandwidth=RATE, "
                   "delay=D, bwneighbor=RATE");
  }
  SpecPairs pairs;
  STAR_RETURN_IF_ERROR(SplitPairs(spec, bad, pairs));
  STAR_RETURN_IF_ERROR(ParseWorker(pairs, bad, in));
  if (pairs.kinds.empty()) return bad("", "needs one of cpu, neighbor, bandwidth, delay, bwneighbor");
  if (pairs.kinds.size() > 1) {
    return bad("", KeyName(pairs.kinds[0]) + " and " + KeyName(pairs.kinds[1]) + " are exclusive");
  }
  STAR_RETURN_IF_ERROR(ParseKind(pairs.kinds[0], *pairs.Get(pairs.kinds[0]), bad, in));
  STAR_RETURN_IF_ERROR(ParseOptions(pairs, bad, in));
  return in;
}

namespace {

// Two injections of these kinds cannot be on one worker at once.
bool Exclusive(InjectionKind a, InjectionKind b) {
  auto shapes_slot_side = [](InjectionKind k) {
    return k == InjectionKind::kDelay || k == InjectionKind::kBwNeighbor;
  };
  return a == b || (shapes_slot_side(a) && shapes_slot_side(b));
}

std::string KindsOf(InjectionKind a, InjectionKind b) {
  return a == b ? std::string(ToString(a))
                : std::string(ToString(b)) + " and " + std::string(ToString(a));
}

bool ShapesLink(InjectionKind k) {
  return k == InjectionKind::kBandwidth || k == InjectionKind::kDelay || k == InjectionKind::kBwNeighbor;
}

// Why two injections cannot be active at once: "both <what> from .. to .. (<why>)".
struct Clash {
  std::string what;
  std::string why;
};

// The clash of injections b and a on a worker of both, if any. A peer link takes the
// uplinks of both its workers.
std::optional<Clash> ClashOf(const Injection& b, const Injection& a) {
  const auto in_stages = [](const Injection& i) { return i.kind == InjectionKind::kDelay && i.peer; };
  if (in_stages(a) || in_stages(b)) {  // in the stages' transport: only one per link
    const auto ends = [](const Injection& i) { return std::minmax(i.worker, *i.peer); };
    if (!in_stages(a) || !in_stages(b) || ends(a) != ends(b)) return std::nullopt;
    return Clash{"delay the link between workers " + std::to_string(a.worker) + " and " + std::to_string(*a.peer),
                 "one delay per link"};
  }
  if (a.peer || b.peer) {
    if (!ShapesLink(a.kind) || !ShapesLink(b.kind)) return std::nullopt;
    for (const int w : {b.worker, b.peer.value_or(b.worker)}) {
      if (w == a.worker || (a.peer && w == *a.peer)) {
        return Clash{"shape worker " + std::to_string(w) + "'s link",
                     "a bandwidth with a peer holds both workers' uplinks"};
      }
    }
    return std::nullopt;
  }
  if (a.worker != b.worker || !Exclusive(a.kind, b.kind)) return std::nullopt;
  return Clash{"inject " + KindsOf(a.kind, b.kind) + " on worker " + std::to_string(a.worker),
               a.kind == b.kind ? "one injection of a kind per worker at a time"
                                : "both shape the worker's side of its link"};
}

// InvalidArgument naming both specs when b (given first) and a clash while both are active.
Status CheckOverlap(const Injection& b, const Injection& a) {
  const std::optional<Clash> clash = ClashOf(b, a);
  if (!clash) return Status::Ok();
  constexpr double kForever = std::numeric_limits<double>::infinity();
  const double a_end = a.end_seconds.value_or(kForever);
  const double b_end = b.end_seconds.value_or(kForever);
  if (a.start_seconds >= b_end || b.start_seconds >= a_end) return Status::Ok();
  const double from = std::max(a.start_seconds, b.start_seconds);
  const double to = std::min(a_end, b_end);
  return Status::InvalidArgument("--inject " + Quoted(b.text) + " and --inject " + Quoted(a.text) +
                                 " overlap: both " + clash->what + " from " + Seconds(from) + " to " +
                                 (std::isinf(to) ? std::string("the job's end") : Seconds(to)) + " (" +
                                 clash->why + ")");
}

// Every bwneighbor has the first one's link (the workers' uplink rate), and every peer's
// bandwidth is below it.
Status CheckLinks(const std::vector<Injection>& injections) {
  const auto first_bw = std::find_if(injections.begin(), injections.end(), [](const Injection& in) {
    return in.kind == InjectionKind::kBwNeighbor;
  });
  if (first_bw == injections.end()) return Status::Ok();
  for (const Injection& a : injections) {
    if (a.kind == InjectionKind::kBwNeighbor && a.link_bps != first_bw->link_bps) {
      return Status::InvalidArgument("--inject " + Quoted(a.text) + ": link: must be the same for "
                                     "every bwneighbor (" + Rate(first_bw->link_bps) + " in --inject " +
                                     Quoted(first_bw->text) + "), got " + Rate(a.link_bps));
    }
    if (a.peer && a.bandwidth_bps >= first_bw->link_bps) {
      return Status::InvalidArgument("--inject " + Quoted(a.text) + ": bandwidth: must be below the "
                                     "workers' uplink rate (" + Rate(first_bw->link_bps) +
                                     ", the link of --inject " + Quoted(first_bw->text) + "), got " +
                                     Rate(a.bandwidth_bps));
    }
  }
  return Status::Ok();
}

// Worker `w` of key `key` in `in` is one of the job's `workers`.
Status CheckWorker(const Injection& in, std::string_view key, int w, int workers) {
  if (w >= 0 && w < workers) return Status::Ok();
  return Status::InvalidArgument("--inject " + Quoted(in.text) + ": " + std::string(key) +
                                 ": must be < " + std::to_string(workers) +
                                 " (the job's workers), got " + std::to_string(w));
}

}  // namespace

Status ValidateInjections(const std::vector<Injection>& injections, int workers) {
  if (workers < 1) return Status::InvalidArgument("workers: must be >= 1, got " + std::to_string(workers));
  STAR_RETURN_IF_ERROR(CheckLinks(injections));
  for (size_t i = 0; i < injections.size(); ++i) {
    const Injection& a = injections[i];
    STAR_RETURN_IF_ERROR(CheckWorker(a, "worker", a.worker, workers));
    if (a.peer) STAR_RETURN_IF_ERROR(CheckWorker(a, "peer", *a.peer, workers));
    for (size_t j = 0; j < i; ++j) STAR_RETURN_IF_ERROR(CheckOverlap(injections[j], a));
  }
  return Status::Ok();
}

Status ValidateLinkDelays(const std::vector<Injection>& injections, int stages) {
  for (const Injection& in : injections) {
    if (in.kind != InjectionKind::kDelay || !in.peer) continue;
    const int low = std::min(in.worker, *in.peer), high = std::max(in.worker, *in.peer);
    if (stages > 1 && high == low + 1 && low % stages != stages - 1) continue;
    return Status::InvalidArgument(
        "--inject " + Quoted(in.text) + ": peer: " +
        (stages > 1 ? "worker " + std::to_string(*in.peer) + " is not a neighbouring stage of worker " +
                          std::to_string(in.worker) + " (" + std::to_string(stages) + " stages)"
                    : std::string("a delay with peer is on a pipeline link; the job has one stage")));
  }
  return Status::Ok();
}

std::string LinkDelayEnv(const std::vector<Injection>& injections, int w) {
  std::string out;
  for (const Injection& in : injections) {
    if (in.kind != InjectionKind::kDelay || !in.peer || (in.worker != w && *in.peer != w)) continue;
    const int other = in.worker == w ? *in.peer : in.worker;
    out += (out.empty() ? "" : ",") + std::to_string(other) + ":" + api::FormatNumber(in.delay_seconds);
  }
  return out;
}

}  // namespace star::local
