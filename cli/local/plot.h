// The picture of a `star local` run: its report drawn into a PNG by gnuplot (pngcairo).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::local {

// The gnuplot script for `report` (the JSON object `star local --report` writes). Two
// stacked panels share the time axis (seconds since job start, 0 .. the report's
// wall_seconds or its last timestamp), under the title "<job> — policy <policy>":
//   1. per-worker iteration time (compute_seconds + communication_seconds) over time from
//      report["samples"], one line per worker, with the timeline's events (mode changes,
//      straggler/recovered, amp_on/amp_off, batches, inject/lift, reallocate) overlaid as
//      coloured vertical lines labelled with the event and its worker ("straggler w1",
//      "mode fixed_k");
//   2. test accuracy over time from report["accuracy_curve"] ([[t, accuracy], ...]), the
//      target_accuracy as a horizontal line and tta_seconds (when a number) as a vertical one.
// The script reads "<data_dir>/worker-<W>.dat" (one per worker in samples) and
// "<data_dir>/accuracy.dat" (two columns: t, value) and writes `png_path`. Missing or
// malformed fields are skipped (empty arrays still give a valid picture); never throws.
std::string PlotScript(const nlohmann::json& report, const std::string& data_dir,
                       const std::string& png_path);

// Writes the data files and the script into a fresh temporary directory (under $TMPDIR,
// removed afterwards) and runs gnuplot found on PATH with argv (no shell), waiting at most
// 60 s. Errors: FailedPrecondition "--plot: gnuplot not found (install gnuplot-nox)" when
// it is not on PATH; Internal "--plot: gnuplot failed (...): <its stderr>" when it fails
// (e.g. the PNG cannot be written); DeadlineExceeded when it runs past 60 s (killed);
// Internal when the temporary files cannot be written. Thread-compatible.
Status WritePlot(const nlohmann::json& report, const std::string& png_path);

}  // namespace star::local
