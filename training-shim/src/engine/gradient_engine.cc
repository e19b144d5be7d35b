#include "star/shim/gradient_engine.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/mode_core.h"

namespace star::shim {
namespace {

// x *= scale over `part`; returns |part|^2 after it, in float lanes per block (vectorizes),
// blocks summed in double (as internal::MeanSquaredNorm).
double ScaleAndSquaredNorm(std::span<float> part, float scale) {
  constexpr size_t kBlock = 4096, kLanes = 8;
  double sq = 0;
  for (size_t start = 0; start < part.size(); start += kBlock) {
    const size_t end = std::min(part.size(), start + kBlock);
    float lanes[kLanes] = {};
    size_t i = start;
    for (; i + kLanes <= end; i += kLanes) {
      for (size_t l = 0; l < kLanes; ++l) {
        part[i + l] *= scale;
        lanes[l] += part[i + l] * part[i + l];
      }
    }
    for (; i < end; ++i) {
      part[i] *= scale;
      lanes[0] += part[i] * part[i];
    }
    for (float v : lanes) sq += v;
  }
  return sq;
}

}  // namespace

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

bool GradientEngine::parts_supported() const { return core_->PartsSupported(); }

StatusOr<StepStats> GradientEngine::ExchangePart(std::span<float> part, int64_t batch, bool last) {
  STAR_RETURN_IF_ERROR(core_->CheckUsable());
  if (!core_->PartsSupported()) {
    return Status::FailedPrecondition("ExchangePart: the gradient goes whole in " +
                                      std::string(api::ToString(core_->mode())) + " (use Exchange)");
  }
  if (part.empty()) return Status::InvalidArgument("part: must not be empty");
  if (batch < 1) return Status::InvalidArgument("batch: must be >= 1, got " + std::to_string(batch));
  const size_t end = part_offset_ + part.size();
  if (end > grad_size_ || (last && end != grad_size_)) {
    return Status::InvalidArgument("part: parts of one iteration cover " + std::to_string(end) +
                                   " floats" + (last ? " at the last" : " so far") +
                                   ", the gradient has " + std::to_string(grad_size_));
  }
  const bool first = part_offset_ == 0;
  if (first) {
    part_batch_ = batch;
    part_stats_ = StepStats{};
  }
  Status s = core_->ExchangePart(part, static_cast<float>(part_batch_), part_batch_, first, last,
                                 part_stats_);
  if (!s.ok()) {
    core_->Fail(s);
    return s;
  }
  part_stats_.update_grad_sq_norm += ScaleAndSquaredNorm(part, 1.0f / core_->part_totals()[0]);
  part_offset_ = last ? 0 : end;
  if (last) {
    part_stats_.updated = true;
    part_stats_.update_batch = static_cast<int64_t>(core_->part_totals()[0]);
    part_stats_.contributions = static_cast<int>(core_->part_totals()[1]);
  }
  part_stats_.iteration = core_->iteration();
  return part_stats_;
}

Status GradientEngine::Schedule(const api::Decision& decision) { return core_->Schedule(decision); }

Status GradientEngine::Finish(std::span<float> state) {
  STAR_RETURN_IF_ERROR(CheckState(state));
  Status s = core_->Finish(state);
  if (!s.ok()) core_->Fail(s);
  return s;
}

}  // namespace star::shim
