// Reading iteration traces: CSV with columns iteration,worker,compute_seconds,
// communication_seconds (the `star detect --trace` contract).
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "star/core/detect/detector.h"
#include "star/core/status.h"

namespace star::cli {

// Parses a whole trace before anything is acted on, so a bad row changes nothing.
// A first line whose first field is not a number is a header: it must name the four
// columns (in any order; other columns are ignored). Without a header the first four
// columns are taken in contract order. Blank lines and lines starting with '#' are
// skipped. Errors name the source, line and column:
//   "trace.csv:7: compute_seconds: must be a non-negative number, got \"abc\"".
// Per worker, iterations must not decrease.
StatusOr<std::vector<detect::Sample>> ParseTraceCsv(std::istream& in, const std::string& source);

}  // namespace star::cli
