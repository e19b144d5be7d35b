// Synthetic per-iteration timing traces for the detector's tests (test-only header).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "star/core/detect/detector.h"

namespace star::detect::testing {

// Worker `worker` is slowed in iterations [start, end): its compute and communication
// times are multiplied by the factors.
struct Episode {
  int worker = 0;
  int64_t start = 0;
  int64_t end = 0;
  double compute_factor = 1;
  double comm_factor = 1;
};

struct TraceSpec {
  int workers = 8;
  int64_t iterations = 200;
  double compute_seconds = 0.080;
  double comm_seconds = 0.020;
  // Sigma of the multiplicative lognormal noise (mean 1) on each component; 0 = none.
  double noise = 0.05;
  std::vector<Episode> episodes;
  // Report every `report_every` iterations (worker w reports at iterations congruent
  // to w mod report_every), the way a shim that batches reports would.
  int report_every = 1;
};

// Samples ordered by iteration, then worker.
inline std::vector<Sample> MakeTrace(const TraceSpec& spec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(-spec.noise * spec.noise / 2, spec.noise);
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(spec.iterations) * static_cast<size_t>(spec.workers));
  for (int64_t it = 0; it < spec.iterations; ++it) {
    for (int w = 0; w < spec.workers; ++w) {
      double c = spec.compute_seconds;
      double m = spec.comm_seconds;
      if (spec.noise > 0) {
        c *= noise(rng);
        m *= noise(rng);
      }
      for (const Episode& e : spec.episodes) {
        if (e.worker == w && it >= e.start && it < e.end) {
          c *= e.compute_factor;
          m *= e.comm_factor;
        }
      }
      if (it % spec.report_every == w % spec.report_every) out.push_back(Sample{it, w, c, m});
    }
  }
  return out;
}

inline std::vector<Event> RunDetector(const DetectorOptions& options,
                                      const std::vector<Sample>& trace) {
  Detector detector(options);
  std::vector<Event> events;
  for (const Sample& s : trace) detector.Observe(s, &events);
  detector.Flush(&events);
  return events;
}

// The events as JSON lines, for failure messages.
inline std::string Describe(const std::vector<Event>& events) {
  std::string s;
  for (const Event& e : events) s += ToJsonLine(e) + "\n";
  return s.empty() ? "(no events)" : s;
}

// The events of the default trace (seed `seed`) in which worker 3's compute is slowed
// by `factor` in iterations [60, 140).
inline std::vector<Event> RunStepEpisode(const DetectorOptions& options, double factor,
                                         uint64_t seed) {
  TraceSpec spec;
  spec.episodes = {Episode{3, 60, 140, factor, 1.0}};
  return RunDetector(options, MakeTrace(spec, seed));
}

}  // namespace star::detect::testing
