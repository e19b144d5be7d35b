#include "star/core/converge/updates_factor.h"

#include <cassert>
#include <cmath>

namespace star::converge {

double UpdatesFactor(double batch, double noise_scale) {
  assert(std::isfinite(batch) && batch > 0);
  assert(std::isfinite(noise_scale) && noise_scale >= 0);
  return 1.0 + noise_scale / batch;
}

}  // namespace star::converge
