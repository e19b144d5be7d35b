#include <cmath>
#include <fstream>
#include <string>

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/version.h>

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

namespace {

// LibTorch 2.4 replaced the per-device autocast calls (is_cpu_enabled, set_enabled,
// get_autocast_gpu_dtype, ...) with calls taking the device type, and deprecated the old
// ones; these pick whichever the LibTorch being built against has.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
c10::DeviceType TypeOf(AmpDevice device) { return device == AmpDevice::kCpu ? at::kCPU : at::kCUDA; }
bool AutocastEnabled(AmpDevice d) { return at::autocast::is_autocast_enabled(TypeOf(d)); }
void SetAutocastEnabled(AmpDevice d, bool on) { at::autocast::set_autocast_enabled(TypeOf(d), on); }
at::ScalarType AutocastDtype(AmpDevice d) { return at::autocast::get_autocast_dtype(TypeOf(d)); }
void SetAutocastDtype(AmpDevice d, at::ScalarType t) { at::autocast::set_autocast_dtype(TypeOf(d), t); }
#else
bool AutocastEnabled(AmpDevice d) {
  return d == AmpDevice::kCpu ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
void SetAutocastEnabled(AmpDevice d, bool on) {
  d == AmpDevice::kCpu ? at::autocast::set_cpu_enabled(on) : at::autocast::set_enabled(on);
}
at::ScalarType AutocastDtype(AmpDevice d) {
  return d == AmpDevice::kCpu ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
}
void SetAutocastDtype(AmpDevice d, at::ScalarType t) {
  d == AmpDevice::kCpu ? at::autocast::set_autocast_cpu_dtype(t) : at::autocast::set_autocast_gpu_dtype(t);
}
#endif

}  // namespace

AmpSwitch::Scope::Scope(const AmpSwitch& amp) {
  if (!amp.enabled()) return;
  active_ = true;
  device_ = amp.options().device;
  prev_enabled_ = AutocastEnabled(device_);
  prev_dtype_ = static_cast<int8_t>(AutocastDtype(device_));
  SetAutocastEnabled(device_, true);
  SetAutocastDtype(device_, amp.options().dtype == AmpDtype::kBFloat16 ? at::kBFloat16 : at::kHalf);
  at::autocast::increment_nesting();
}

AmpSwitch::Scope::~Scope() {
  if (!active_) return;
  // Leaving the outermost autocast region drops the cached low-precision weight copies.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocastEnabled(device_, prev_enabled_);
  try {  // a destructor must not throw; the previous dtype was accepted before
    SetAutocastDtype(device_, static_cast<at::ScalarType>(prev_dtype_));
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
