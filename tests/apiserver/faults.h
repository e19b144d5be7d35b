// Fault injection for the operator's convergence tests: error answers, added latency and
// dropped watch streams for chosen verbs and resources.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::apiserver {

// The longest duration ParseDuration reads (a year).
inline constexpr std::chrono::milliseconds kMaxDuration{365LL * 24 * 3600 * 1000};
// The longest latency a fault rule may add.
inline constexpr std::chrono::milliseconds kMaxFaultLatency{3600 * 1000};

// "12s", "500ms", "2m", "1h", "250us"; a bare number is milliseconds. InvalidArgument for
// other text, a negative or non-finite number, or more than kMaxDuration.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text);

// One rule. A request matches when verb, resource and namespace match; a matching rule
// fires for the next `count` matching requests, or with `probability` (drawn from its own
// generator seeded with `seed`), or always when neither is set. A firing rule adds its
// latency, answers with its status (the first firing rule with a status wins; later
// status rules are not consumed) and, for watches, closes the stream after
// drop_watch_after events.
struct FaultRule {
  std::string verb = "*";       // get | list | watch | create | update | patch | delete |
                                // deletecollection | *
  std::string resource = "*";   // plural ("pods" also matches "pods/status"), "pods/status", *
  std::string ns = "*";         // namespace, or *
  std::optional<int> status;    // HTTP code: 429, 500, 503, 410, 409, ...
  std::string message;          // the Status message ("" = a default naming the rule)
  std::optional<std::int64_t> count;  // remaining firings
  std::optional<double> probability;
  std::uint64_t seed = 1;
  std::chrono::milliseconds latency{0};
  std::optional<int> drop_watch_after;

  // The JSON form of POST /emulator/faults: {"verb":"create","resource":"pods",
  // "namespace":"ns","status":500,"message":"...","count":2,"probability":0.5,"seed":7,
  // "latency":"200ms" (or milliseconds as a number),"dropWatchAfter":3}. Unknown fields,
  // wrong types and numbers out of range are InvalidArgument naming the field: status
  // 400..599, count 0..2^63-1, probability 0..1, seed 0..2^64-1, latency 0..1h,
  // dropWatchAfter 0..2^31-1 (0: the watch ends before its first event).
  static StatusOr<FaultRule> FromJson(const nlohmann::json& rule);
  // The compact command-line form: "verb=create,resource=pods,status=500,count=2"
  // (same keys; latency as a duration).
  static StatusOr<FaultRule> Parse(const std::string& spec);
  nlohmann::json ToJson() const;
};

// What the rules decided for one request.
struct FaultDecision {
  std::optional<int> status;
  std::string message;
  std::chrono::milliseconds latency{0};
  std::optional<int> drop_watch_after;
};

// Thread-safe set of rules in the order they were added.
class FaultInjector {
 public:
  void Add(FaultRule rule);
  void Clear();
  nlohmann::json ToJson() const;  // {"rules":[...]} with the remaining counts

  FaultDecision Decide(const std::string& verb, const std::string& resource,
                       const std::string& subresource, const std::string& ns);

  struct Counters {
    std::uint64_t errors = 0, delayed = 0, dropped_watches = 0;
  };
  Counters counters() const;

 private:
  struct Entry {
    FaultRule rule;
    std::mt19937_64 rng;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  Counters counters_;
};

}  // namespace star::apiserver
