// Small helpers of the operator's reconcilers: which API errors a retry may cure, and
// the log line. (Wall-clock time is kube::NowRfc3339, report tokens report::RandomToken.)
#pragma once

#include <string>

#include "star/core/status.h"

namespace star::op {

// Whether a reconcile that failed with `s` should be retried with backoff rather than
// taken as final: core's IsTransient (Unavailable, DeadlineExceeded, Aborted) and three
// codes that the Kubernetes API returns for passing states: AlreadyExists (a create that
// raced another writer or ran on a stale cache: the next pass re-reads and finds the
// object), Internal (an answer that was not the JSON asked for, as an API server or proxy
// gives while restarting) and OutOfRange (HTTP 410, a resource version compacted away:
// re-reading from a list cures it). A pod create refused with any other code fails the
// job for good.
bool RetryableApiError(const Status& s);
// Writes "star-operator: <line>" to stderr.
void Log(const std::string& line);

}  // namespace star::op
