// Small helpers of the operator's reconcilers: wall-clock time, report tokens, which
// errors a retry may cure, and the log line. (Shared versions are coming in star::kube
// and core; these fold into them then.)
#pragma once

#include <string>

#include "star/core/status.h"

namespace star::op {

// Now in UTC as RFC 3339 with whole seconds ("2024-05-01T12:00:00Z").
std::string NowRfc3339();
// 32 random hex digits (a job's report token).
std::string RandomToken();
// Whether a reconcile that failed with `s` should be retried with backoff: Unavailable,
// DeadlineExceeded, Aborted, AlreadyExists (races), Internal, OutOfRange.
bool Transient(const Status& s);
// Writes "star-operator: <line>" to stderr.
void Log(const std::string& line);

}  // namespace star::op
