// A request's options from its query parameters and, for deletes, its body: numbers are
// range-checked (no overflow, no negative counts) and wrongly typed fields refused, each
// with a message naming the parameter or field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "star/core/status.h"
#include "store.h"

namespace star::apiserver {

using QueryParams = std::map<std::string, std::string>;

// ?resourceVersion: nullopt when absent or empty, else its decimal digits as a number.
// InvalidArgument `invalid resource version "x"` for anything else (signs, spaces,
// letters, more than fits in 64 bits).
StatusOr<std::optional<std::uint64_t>> ResourceVersionParam(const QueryParams& query);

// A non-negative integer parameter (timeoutSeconds, limit, gracePeriodSeconds): nullopt
// when absent or empty; InvalidArgument naming it when not decimal digits or over
// `max`.
StatusOr<std::optional<std::int64_t>> CountParam(const QueryParams& query, const std::string& name,
                                                 std::int64_t max);

// The options of a delete: the body (JSON DeleteOptions, or protobuf when `media_type`
// is Kubernetes protobuf; may be empty), then the query (propagationPolicy,
// orphanDependents, dryRun=All, gracePeriodSeconds). InvalidArgument for a malformed
// body, a wrongly typed field or an unknown propagation policy; Unimplemented (415) for
// a protobuf body of another kind the decoder does not read.
StatusOr<DeleteOptions> ReadDeleteOptions(const std::string& media_type, const std::string& body,
                                          const QueryParams& query);

}  // namespace star::apiserver
