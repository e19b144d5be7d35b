// Synthetic per-iteration timing traces for the detector's tests (test-only header).
#pragma once

#include <algorithm>
#include <cmath>
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
  // Per-worker noise sigma, for the workers it covers (others use `noise`).
  std::vector<double> worker_noise;
  // Each sample is, with this probability, a single-sample spike: both components
  // times spike_factor.
  double spike_probability = 0;
  double spike_factor = 1.3;
};

// Samples ordered by iteration, then worker.
inline std::vector<Sample> MakeTrace(const TraceSpec& spec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Lognormal noise of mean 1 and sigma s, as std::lognormal_distribution(-s^2/2, s)
  // draws it, from one normal stream shared by every worker.
  std::normal_distribution<double> normal(0, 1);
  auto noise = [&](double s) { return std::exp(s * normal(rng) + -s * s / 2); };
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(spec.iterations) * static_cast<size_t>(spec.workers));
  for (int64_t it = 0; it < spec.iterations; ++it) {
    for (int w = 0; w < spec.workers; ++w) {
      double c = spec.compute_seconds;
      double m = spec.comm_seconds;
      const double sigma = static_cast<size_t>(w) < spec.worker_noise.size()
                               ? spec.worker_noise[static_cast<size_t>(w)]
                               : spec.noise;
      if (sigma > 0) {
        c *= noise(sigma);
        m *= noise(sigma);
      }
      if (spec.spike_probability > 0 && uniform(rng) < spec.spike_probability) {
        c *= spec.spike_factor;
        m *= spec.spike_factor;
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

// Trace families of real clusters (detector_stability_test.cc, bench/detect-stability).
// Every worker gets the jitter of production traces: its own coefficient of variation,
// drawn from [2%, 8%] by `seed`, and 1% single-sample spikes of 1.3x. 10 workers, 300
// iterations.
inline TraceSpec RealJitter(uint64_t seed) {
  TraceSpec spec;
  spec.workers = 10;
  spec.iterations = 300;
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> cv(0.02, 0.08);
  for (int w = 0; w < spec.workers; ++w) spec.worker_noise.push_back(cv(rng));
  spec.spike_probability = 0.01;
  return spec;
}

// Two speed classes: workers [0, slow) `factor` times slower for the whole run.
inline TraceSpec Bimodal(int slow, double factor, uint64_t seed) {
  TraceSpec spec = RealJitter(seed);
  for (int w = 0; w < slow; ++w) spec.episodes.push_back(Episode{w, 0, spec.iterations, factor, factor});
  return spec;
}

// Persistent slow workers: worker 3 (and 6, when `two`) `factor` times slower from
// `start` to the end of the run.
inline TraceSpec Persistent(double factor, int64_t start, bool two, uint64_t seed) {
  TraceSpec spec = RealJitter(seed);
  spec.episodes.push_back(Episode{3, start, spec.iterations, factor, factor});
  if (two) spec.episodes.push_back(Episode{6, start, spec.iterations, factor, factor});
  return spec;
}

// A late second step: worker 2 `factor` times slower from the start, and `step` times
// slower again from iteration `at` to the end.
inline TraceSpec LateStep(double factor, double step, int64_t at, uint64_t seed) {
  TraceSpec spec = RealJitter(seed);
  spec.episodes.push_back(Episode{2, 0, spec.iterations, factor, factor});
  spec.episodes.push_back(Episode{2, at, spec.iterations, step, 1.0});
  return spec;
}

// A clean heterogeneous cohort: worker w `1 + (spread - 1) * w / 9` times slower (evenly
// spread from 1 to `spread`), or with `slow_class` > 0 the last `slow_class` workers
// `spread` times slower and the others not.
inline TraceSpec Heterogeneous(double spread, int slow_class, uint64_t seed) {
  TraceSpec spec = RealJitter(seed);
  for (int w = 0; w < spec.workers; ++w) {
    const double f = slow_class > 0 ? (w >= spec.workers - slow_class ? spread : 1.0)
                                    : 1 + (spread - 1) * w / (spec.workers - 1);
    spec.episodes.push_back(Episode{w, 0, spec.iterations, f, f});
  }
  return spec;
}

// Median of `v` (the mean of the middle two for an even count); -1 if empty. For the
// benchmarks' counters.
inline double MedianOrMinusOne(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Events per worker, by worker id (workers without events included, as 0).
inline std::vector<int> EventsPerWorker(const std::vector<Event>& events, int workers) {
  std::vector<int> out(static_cast<size_t>(workers), 0);
  for (const Event& e : events) {
    if (e.worker >= 0 && e.worker < workers) ++out[static_cast<size_t>(e.worker)];
  }
  return out;
}

}  // namespace star::detect::testing
