// Timestamps as the Kubernetes API writes them (metav1.Time: RFC 3339, UTC, to the second).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace star::kube {

// `t` as RFC 3339 in UTC, truncated to the second: "2025-01-31T12:00:00Z".
std::string Rfc3339(std::chrono::system_clock::time_point t);

// The wall clock now, as Rfc3339 writes it (lastTransitionTime, creationTimestamp, ...).
std::string NowRfc3339();

// Reads RFC 3339 ("2025-01-31T12:34:56Z", "...56.789+02:00"; fractions are dropped);
// nullopt when `text` is not such a timestamp.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text);

}  // namespace star::kube
