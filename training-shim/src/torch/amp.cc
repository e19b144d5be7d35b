#include <cmath>
#include <fstream>
#include <string>

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include "star/shim/torch_amp.h"

namespace star::shim {

StatusOr<AmpSwitch> AmpSwitch::Create(AmpOptions options, bool enabled) {
  if (options.device == AmpDevice::kCpu && options.dtype == AmpDtype::kFloat16) {
    return Status::InvalidArgument("amp: fp16 autocast is not supported on CPU; use bf16");
  }
  if (options.device == AmpDevice::kCuda && !torch::cuda::is_available()) {
    return Status::Unavailable("amp: CUDA requested but LibTorch has no usable CUDA device");
  }
  return AmpSwitch(options, enabled);
}

AmpSwitch::Scope::Scope(const AmpSwitch& amp) {
  if (!amp.enabled()) return;
  active_ = true;
  device_ = amp.options().device;
  at::ScalarType dtype = amp.options().dtype == AmpDtype::kBFloat16 ? at::kBFloat16 : at::kHalf;
  if (device_ == AmpDevice::kCpu) {
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = static_cast<int8_t>(at::autocast::get_autocast_cpu_dtype());
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = static_cast<int8_t>(at::autocast::get_autocast_gpu_dtype());
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
  at::autocast::increment_nesting();
}

AmpSwitch::Scope::~Scope() {
  if (!active_) return;
  // Leaving the outermost autocast region drops the cached low-precision weight copies.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  auto dtype = static_cast<at::ScalarType>(prev_dtype_);
  if (device_ == AmpDevice::kCpu) {
    at::autocast::set_cpu_enabled(prev_enabled_);
  } else {
    at::autocast::set_enabled(prev_enabled_);
  }
  try {  // a destructor must not throw; the previous dtype was accepted before
    if (device_ == AmpDevice::kCpu) {
      at::autocast::set_autocast_cpu_dtype(dtype);
    } else {
      at::autocast::set_autocast_gpu_dtype(dtype);
    }
  } catch (const c10::Error&) {
  }
}

bool DynamicLossScaler::UnscaleAndUpdate(std::span<float> grad) {
  const float inv = static_cast<float>(1.0 / scale_);
  bool finite = true;
  for (float& g : grad) {
    if (!std::isfinite(g)) {
      finite = false;
      break;
    }
    g *= inv;
  }
  if (!finite) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
  return true;
}

}  // namespace star::shim
