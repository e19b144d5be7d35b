// The picture of a `star local` run, drawn by gnuplot (pngcairo).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::local {

// Two stacked panels sharing the time axis (seconds since the job started):
//   1. per-worker iteration time (compute + communication) from report["samples"], one
//      line per worker, with the timeline's events (injections, stragglers, mode, AMP,
//      batches, reallocation) as labelled vertical lines;
//   2. test accuracy from report["accuracy_curve"], the target as a horizontal line and
//      the time to accuracy (report["tta_seconds"], when not null) as a vertical one.
// `data_dir` holds the data files the script reads.
std::string PlotScript(const nlohmann::json& report, const std::string& data_dir,
                       const std::string& png_path);

// Writes the data files and the script into a temporary directory (removed afterwards)
// and runs gnuplot (no shell). FailedPrecondition "--plot: gnuplot not found (install
// gnuplot-nox)" when it is not on PATH; Internal with gnuplot's stderr when it fails.
Status WritePlot(const nlohmann::json& report, const std::string& png_path);

}  // namespace star::local
