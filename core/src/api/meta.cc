#include "star/core/api/meta.h"

#include <cstddef>
#include <tuple>

namespace star::api {

using nlohmann::json;

namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses exactly `n` digits at s[*pos] into *out and advances *pos.
bool Digits(std::string_view s, size_t* pos, size_t n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (!IsDigit(c)) return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, char a, char b = '\0') {
  if (*pos >= s.size()) return false;
  char c = s[*pos];
  if (c != a && (b == '\0' || c != b)) return false;
  ++*pos;
  return true;
}

// Reads an optional object of string -> string at `key`.
void ReadStringMap(ObjectReader& rd, std::string_view key,
                   std::map<std::string, std::string>* out) {
  if (!rd.ok()) return;
  const json* f = rd.Get(key);
  if (f == nullptr) return;
  if (!f->is_object()) {
    rd.Fail(key, "must be an object, got " + JsonTypeName(*f));
    return;
  }
  std::map<std::string, std::string> m;
  for (auto it = f->begin(); it != f->end(); ++it) {
    if (!it->is_string()) {
      rd.Fail(std::string(key) + "." + it.key(), "must be a string, got " + JsonTypeName(*it));
      return;
    }
    m.emplace(it.key(), it->get<std::string>());
  }
  *out = std::move(m);
}

}  // namespace

bool IsDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (!IsDns1123Label(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsRfc3339(std::string_view s) {
  size_t p = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Digits(s, &p, 4, &year) || !Expect(s, &p, '-') || !Digits(s, &p, 2, &month) ||
      !Expect(s, &p, '-') || !Digits(s, &p, 2, &day) || !Expect(s, &p, 'T', 't') ||
      !Digits(s, &p, 2, &hour) || !Expect(s, &p, ':') || !Digits(s, &p, 2, &minute) ||
      !Expect(s, &p, ':') || !Digits(s, &p, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  if (p < s.size() && s[p] == '.') {
    ++p;
    size_t digits = 0;
    while (p < s.size() && IsDigit(s[p])) {
      ++p;
      ++digits;
    }
    if (digits == 0) return false;
  }
  if (p < s.size() && (s[p] == 'Z' || s[p] == 'z')) return p + 1 == s.size();
  int oh = 0, om = 0;
  if (!Expect(s, &p, '+', '-') || !Digits(s, &p, 2, &oh) || !Expect(s, &p, ':') ||
      !Digits(s, &p, 2, &om)) {
    return false;
  }
  return p == s.size() && oh <= 23 && om <= 59;
}

Status CheckDns1123Label(std::string_view s, const std::string& path) {
  if (IsDns1123Label(s)) return Status::Ok();
  return Status::InvalidArgument(
      path +
      ": must be a DNS-1123 label (at most 63 lowercase letters, digits or '-', starting and "
      "ending with a letter or digit), got \"" +
      std::string(s) + "\"");
}

Status CheckDns1123Subdomain(std::string_view s, const std::string& path) {
  if (IsDns1123Subdomain(s)) return Status::Ok();
  return Status::InvalidArgument(
      path +
      ": must be a DNS-1123 subdomain (at most 253 characters of dot-separated DNS-1123 "
      "labels), got \"" +
      std::string(s) + "\"");
}

json ToJson(const ObjectMeta& m, bool namespaced) {
  json j = {{"name", m.name}};
  if (namespaced) j["namespace"] = m.namespace_;
  if (!m.uid.empty()) j["uid"] = m.uid;
  if (m.generation != 0) j["generation"] = m.generation;
  if (!m.resource_version.empty()) j["resourceVersion"] = m.resource_version;
  if (!m.labels.empty()) j["labels"] = m.labels;
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  return j;
}

StatusOr<ObjectMeta> ObjectMetaFromJson(const json& j, bool namespaced, const std::string& path) {
  ObjectMeta m;
  ObjectReader rd(j, path);
  rd.String("name", &m.name);
  if (namespaced) rd.String("namespace", &m.namespace_, Need::kOptional);
  rd.String("uid", &m.uid, Need::kOptional)
      .Int("generation", &m.generation, Need::kOptional)
      .AtLeast("generation", static_cast<double>(m.generation), 0)
      .String("resourceVersion", &m.resource_version, Need::kOptional);
  ReadStringMap(rd, "labels", &m.labels);
  ReadStringMap(rd, "annotations", &m.annotations);
  if (rd.ok()) {
    rd.Merge(namespaced ? CheckDns1123Label(m.name, rd.FieldPath("name"))
                        : CheckDns1123Subdomain(m.name, rd.FieldPath("name")));
  }
  if (rd.ok() && namespaced) rd.Merge(CheckDns1123Label(m.namespace_, rd.FieldPath("namespace")));
  if (!rd.ok()) return rd.status();
  return m;
}

Status CheckTypeMeta(const json& j, std::string_view kind) {
  ObjectReader rd(j, "");
  for (auto [key, want] : {std::pair<std::string_view, std::string_view>{"apiVersion", kApiVersion},
                           std::pair<std::string_view, std::string_view>{"kind", kind}}) {
    std::string got;
    const bool present = rd.Has(key);
    rd.String(key, &got, Need::kOptional);
    if (rd.ok() && present && got != want) {
      rd.Fail(key, "must be \"" + std::string(want) + "\", got \"" + got + "\"");
    }
  }
  return rd.status();
}

json ToJson(const Condition& c) {
  json j = {{"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}};
  if (!c.last_transition_time.empty()) j["lastTransitionTime"] = c.last_transition_time;
  j["observedGeneration"] = c.observed_generation;
  return j;
}

StatusOr<Condition> ConditionFromJson(const json& j, const std::string& path) {
  Condition c;
  ObjectReader rd(j, path);
  rd.String("type", &c.type)
      .Enum("status", &c.status, {"True", "False", "Unknown"})
      .String("reason", &c.reason, Need::kOptional)
      .String("message", &c.message, Need::kOptional)
      .String("lastTransitionTime", &c.last_transition_time, Need::kOptional)
      .Int("observedGeneration", &c.observed_generation, Need::kOptional)
      .AtLeast("observedGeneration", static_cast<double>(c.observed_generation), 0)
      .AtMost("observedGeneration", static_cast<double>(c.observed_generation), kMaxJsonInteger)
      .RejectUnknown(
          {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"});
  if (rd.ok() && c.type.empty()) rd.Fail("type", "must not be empty");
  for (auto [key, value, max] : {std::tuple{"type", &c.type, kMaxConditionTypeLength},
                                 std::tuple{"reason", &c.reason, kMaxConditionReasonLength},
                                 std::tuple{"message", &c.message, kMaxConditionMessageLength}}) {
    if (rd.ok() && value->size() > max) {
      rd.Fail(key, "must be at most " + std::to_string(max) + " characters, got " +
                       std::to_string(value->size()));
    }
  }
  if (rd.ok() && rd.Has("lastTransitionTime") && !IsRfc3339(c.last_transition_time)) {
    rd.Fail("lastTransitionTime",
            "must be an RFC 3339 date-time, got \"" + c.last_transition_time + "\"");
  }
  if (!rd.ok()) return rd.status();
  return c;
}

void ReadConditions(ObjectReader& rd, std::string_view key, std::vector<Condition>* out) {
  if (!rd.ok()) return;
  const json* f = rd.Get(key);
  if (f == nullptr) return;
  if (!f->is_array()) {
    rd.Fail(key, "must be an array, got " + JsonTypeName(*f));
    return;
  }
  if (!rd.MaxItems(key, kMaxConditions).ok()) return;
  const std::string base = rd.FieldPath(key);
  std::vector<Condition> conds;
  for (size_t i = 0; i < f->size(); ++i) {
    auto c = ConditionFromJson((*f)[i], IndexPath(base, i));
    if (!c.ok()) {
      rd.Merge(c.status());
      return;
    }
    for (size_t k = 0; k < conds.size(); ++k) {
      if (conds[k].type == c->type) {
        rd.Merge(Status::InvalidArgument(IndexPath(base, i) + ".type: duplicate of " +
                                         IndexPath(base, k)));
        return;
      }
    }
    conds.push_back(*std::move(c));
  }
  *out = std::move(conds);
}

}  // namespace star::api
