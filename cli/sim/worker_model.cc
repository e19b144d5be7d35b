#include "sim/worker_model.h"

#include <cmath>
#include <numbers>

namespace star::sim {
namespace {

// splitmix64: a bijective 64-bit mixer; good enough to turn counters into uniform bits.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1) from 53 random bits.
double Uniform(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

bool Active(const Episode& e, double t) { return t >= e.start && (!e.end || t < *e.end); }

}  // namespace

WorkerModel::WorkerModel(const Scenario& s)
    : seconds_per_sample_(s.compute_seconds_per_sample),
      communication_seconds_(s.communication_seconds),
      jitter_(s.jitter),
      amp_speedup_(s.amp_speedup),
      seed_(s.seed),
      episodes_(static_cast<size_t>(s.workers)) {
  for (const Episode& e : s.episodes) episodes_[static_cast<size_t>(e.worker)].push_back(e);
}

double WorkerModel::Jitter(int worker, int64_t step, uint64_t component) const {
  if (jitter_ == 0) return 1;
  uint64_t h = Mix(seed_ ^ Mix(static_cast<uint64_t>(worker) * 4 + component));
  h = Mix(h ^ static_cast<uint64_t>(step));
  // Box-Muller on two independent uniforms from one stream.
  const double u1 = Uniform(h), u2 = Uniform(Mix(h));
  const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  // Log-normal with mean 1 and standard deviation about jitter_ (exact for small jitter).
  return std::exp(jitter_ * z - jitter_ * jitter_ / 2);
}

double WorkerModel::CpuFraction(int worker, double t) const {
  double f = 1;
  for (const Episode& e : episodes_[static_cast<size_t>(worker)]) {
    if (e.cpu && Active(e, t)) f *= *e.cpu;
  }
  return f;
}

double WorkerModel::BandwidthFraction(int worker, double t) const {
  double f = 1;
  for (const Episode& e : episodes_[static_cast<size_t>(worker)]) {
    if (e.bandwidth && Active(e, t)) f *= *e.bandwidth;
  }
  return f;
}

double WorkerModel::Compute(int worker, int64_t step, double start, int64_t batch, bool amp,
                            const Overhead& overhead) const {
  const double speed = CpuFraction(worker, start) * (amp ? amp_speedup_ : 1);
  return static_cast<double>(batch) * seconds_per_sample_ / speed * overhead.cpu *
         Jitter(worker, step, 0);
}

double WorkerModel::Communication(int worker, int64_t step, double start,
                                  const Overhead& overhead) const {
  return communication_seconds_ / BandwidthFraction(worker, start) * overhead.bandwidth *
         Jitter(worker, step, 1);
}

}  // namespace star::sim
