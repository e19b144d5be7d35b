// AMP adapter: switches mixed precision on or off per iteration (the Decision's per-worker
// `amp` flag), and a dynamic loss scaler for fp16.
//
// CPU: bf16 autocast (fast on AMX / AVX512-BF16). CUDA: fp16 autocast with the
// DynamicLossScaler below, or bf16. Only the forward pass runs under autocast; the loss is
// computed in float32 and parameters and gradients stay float32 for the optimizer.
#pragma once

#include <cstdint>
#include <span>

#include "star/core/status.h"
#include "star/shim/cpu_features.h"

namespace star::shim {

enum class AmpDevice { kCpu, kCuda };
enum class AmpDtype { kBFloat16, kFloat16 };

struct AmpOptions {
  AmpDevice device = AmpDevice::kCpu;  // default: CPU
  AmpDtype dtype = AmpDtype::kBFloat16;  // default: bf16 (fp16 on CPU is rejected)
};

// CpuHasNativeBf16() (cpu_features.h) is what `--amp auto` uses until the Decision
// drives the switch.

// Per-iteration on/off switch. Not thread-safe: one training thread owns it.
class AmpSwitch {
 public:
  // InvalidArgument for fp16 on CPU; Unavailable for CUDA when LibTorch has no CUDA.
  [[nodiscard]] static StatusOr<AmpSwitch> Create(AmpOptions options, bool enabled);

  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  const AmpOptions& options() const { return options_; }
  // fp16 needs loss scaling (DynamicLossScaler); bf16 does not.
  bool needs_loss_scaling() const { return enabled_ && options_.dtype == AmpDtype::kFloat16; }

  // RAII scope for the forward pass. While alive and the switch was on at construction,
  // autocast is enabled for the switch's device with its dtype; on destruction the
  // previous autocast state (enabled flag, dtype) is restored and the cast cache cleared.
  // When the switch is off it changes nothing. Must be destroyed on the thread that made
  // it (autocast state is thread-local). Not copyable or movable.
  class Scope {
   public:
    explicit Scope(const AmpSwitch& amp);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool active_ = false;
    AmpDevice device_ = AmpDevice::kCpu;
    bool prev_enabled_ = false;
    int8_t prev_dtype_ = 0;  // at::ScalarType of the previous autocast dtype
  };

 private:
  AmpSwitch(AmpOptions options, bool enabled) : options_(options), enabled_(enabled) {}

  AmpOptions options_;
  bool enabled_;
};

// Dynamic loss scaling for fp16 (as torch.cuda.amp.GradScaler): multiply the loss by
// scale() before backward, then Unscale() the flat gradient. If it holds an inf/NaN the
// step must be skipped and the scale is halved; after `growth_interval` good steps in a
// row it doubles. Pure arithmetic on float buffers; not thread-safe.
class DynamicLossScaler {
 public:
  struct Options {
    double initial_scale = 65536.0;  // default 2^16
    double growth_factor = 2.0;      // default 2
    double backoff_factor = 0.5;     // default 0.5
    int64_t growth_interval = 2000;  // default 2000 good steps
  };
  DynamicLossScaler() : DynamicLossScaler(Options()) {}
  explicit DynamicLossScaler(Options options) : options_(options), scale_(options.initial_scale) {}

  double scale() const { return scale_; }
  // Divides `grad` by scale() in place and updates the scale. Returns false (skip this
  // optimizer step; `grad` is then unusable) when any element is inf or NaN.
  bool UnscaleAndUpdate(std::span<float> grad);

 private:
  Options options_;
  double scale_;
  int64_t good_steps_ = 0;
};

}  // namespace star::shim
