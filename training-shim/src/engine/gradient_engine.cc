#include "star/shim/gradient_engine.h"

#include <string>
#include <utility>

#include "engine/mode_core.h"

namespace star::shim {

GradientEngine::GradientEngine(std::unique_ptr<internal::ModeCore> core, size_t state_size,
                               size_t grad_size)
    : core_(std::move(core)), state_size_(state_size), grad_size_(grad_size) {}

GradientEngine::~GradientEngine() = default;

int64_t GradientEngine::iteration() const { return core_->iteration(); }
api::SyncMode GradientEngine::mode() const { return core_->mode(); }
int GradientEngine::rank() const { return core_->rank(); }
int GradientEngine::size() const { return core_->size(); }
bool GradientEngine::is_child() const { return core_->is_child(); }
bool GradientEngine::state_needed() const { return core_->StateNeeded(); }

StatusOr<std::unique_ptr<GradientEngine>> GradientEngine::Create(std::unique_ptr<Collective> world,
                                                                 std::span<float> state,
                                                                 size_t grad_size,
                                                                 EngineOptions options) {
  if (world == nullptr) return Status::InvalidArgument("world: must not be null");
  if (state.empty()) return Status::InvalidArgument("state: must not be empty");
  if (grad_size == 0 || grad_size > state.size()) {
    return Status::InvalidArgument("grad_size: must be in [1, " + std::to_string(state.size()) +
                                   "] (the state's size), got " + std::to_string(grad_size));
  }
  STAR_ASSIGN_OR_RETURN(auto core,
                        internal::ModeCore::Create(std::move(world), state.size(), grad_size, options));
  STAR_RETURN_IF_ERROR(core->BroadcastState(state));
  return std::unique_ptr<GradientEngine>(new GradientEngine(std::move(core), state.size(), grad_size));
}

Status GradientEngine::CheckState(std::span<const float> state) const {
  STAR_RETURN_IF_ERROR(core_->CheckUsable());
  if (state.size() != state_size_) {
    return Status::InvalidArgument("state: size " + std::to_string(state.size()) + ", expected " +
                                   std::to_string(state_size_));
  }
  return Status::Ok();
}

StatusOr<BeginStats> GradientEngine::BeginIteration(std::span<float> state) {
  STAR_RETURN_IF_ERROR(CheckState(state));
  StepStats stats;
  bool switched = false;
  Status s = core_->Publish(state, stats, &switched);
  if (s.ok()) s = core_->ApplyDue(state, stats, &switched);
  if (!s.ok()) {
    core_->Fail(s);
    return s;
  }
  BeginStats out;
  out.iteration = core_->iteration();
  out.switched = switched;
  out.wait_seconds = stats.wait_seconds;
  out.communication_seconds = stats.communication_seconds;
  out.switch_seconds = stats.switch_seconds;
  return out;
}

StatusOr<StepStats> GradientEngine::Exchange(std::span<const float> grad, int64_t batch,
                                             std::span<float> out) {
  STAR_RETURN_IF_ERROR(core_->CheckUsable());
  if (grad.size() != grad_size_ || out.size() != grad_size_) {
    return Status::InvalidArgument("grad: size " + std::to_string(grad.size()) + " (out " +
                                   std::to_string(out.size()) + "), expected " +
                                   std::to_string(grad_size_));
  }
  if (batch < 1) return Status::InvalidArgument("batch: must be >= 1, got " + std::to_string(batch));
  StepStats stats;
  if (Status s = core_->Exchange(grad, static_cast<float>(batch), batch, stats); !s.ok()) {
    core_->Fail(s);
    return s;
  }
  const std::vector<float>& sum = core_->sum();
  const size_t g = grad_size_;
  if (!core_->is_child()) {
    stats.updated = true;
    stats.update_batch = static_cast<int64_t>(sum[g]);
    stats.contributions = static_cast<int>(sum[g + 1]);
    stats.update_grad_sq_norm = internal::MeanSquaredNorm(sum, g);
  }
  const float inv = 1.0f / sum[g];
  for (size_t i = 0; i < g; ++i) out[i] = sum[i] * inv;
  stats.iteration = core_->iteration();
  return stats;
}

Status GradientEngine::Schedule(const api::Decision& decision) { return core_->Schedule(decision); }

Status GradientEngine::Finish(std::span<float> state) {
  STAR_RETURN_IF_ERROR(CheckState(state));
  Status s = core_->Finish(state);
  if (!s.ok()) core_->Fail(s);
  return s;
}

}  // namespace star::shim
