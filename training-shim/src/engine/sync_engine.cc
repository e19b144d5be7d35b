#include "star/shim/sync_engine.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/mode_core.h"

namespace star::shim {

SyncEngine::SyncEngine(std::unique_ptr<internal::ModeCore> core, std::vector<float> params,
                       SgdOptions optimizer)
    : core_(std::move(core)),
      params_(std::move(params)),
      velocity_(params_.size(), 0.0f),
      optimizer_(optimizer) {}

SyncEngine::~SyncEngine() = default;

int64_t SyncEngine::iteration() const { return core_->iteration(); }
api::SyncMode SyncEngine::mode() const { return core_->mode(); }
int SyncEngine::rank() const { return core_->rank(); }
int SyncEngine::size() const { return core_->size(); }
bool SyncEngine::is_child() const { return core_->is_child(); }

StatusOr<std::unique_ptr<SyncEngine>> SyncEngine::Create(std::unique_ptr<Collective> world,
                                                         std::vector<float> initial_params,
                                                         SgdOptions optimizer,
                                                         EngineOptions options) {
  if (world == nullptr) return Status::InvalidArgument("world: must not be null");
  if (initial_params.empty()) return Status::InvalidArgument("initial_params: must not be empty");
  if (!(optimizer.lr > 0)) {
    return Status::InvalidArgument("optimizer.lr: must be > 0, got " + std::to_string(optimizer.lr));
  }
  if (!(optimizer.momentum >= 0 && optimizer.momentum < 1)) {
    return Status::InvalidArgument("optimizer.momentum: must be in [0, 1), got " +
                                   std::to_string(optimizer.momentum));
  }
  if (!(optimizer.weight_decay >= 0)) {
    return Status::InvalidArgument("optimizer.weight_decay: must be >= 0, got " +
                                   std::to_string(optimizer.weight_decay));
  }
  if (options.timeout.count() <= 0) {
    return Status::InvalidArgument("options.timeout: must be > 0");
  }
  Collective* w = world.get();
  STAR_RETURN_IF_ERROR(w->Broadcast(initial_params.data(), initial_params.size(), 0)
                           .WithPrefix("sync engine: broadcasting initial parameters"));
  const size_t p = initial_params.size();
  STAR_ASSIGN_OR_RETURN(auto core, internal::ModeCore::Create(std::move(world), p, p, options));
  return std::unique_ptr<SyncEngine>(
      new SyncEngine(std::move(core), std::move(initial_params), optimizer));
}

Status SyncEngine::Schedule(const api::Decision& d) { return core_->Schedule(d); }

Status SyncEngine::Finish() {
  STAR_RETURN_IF_ERROR(core_->CheckUsable());
  Status s = core_->Finish(params_);
  if (!s.ok()) core_->Fail(s);
  return s;
}

StatusOr<StepStats> SyncEngine::Step(std::span<const float> local_grad_sum, int64_t local_batch) {
  STAR_RETURN_IF_ERROR(core_->CheckUsable());
  if (local_grad_sum.size() != params_.size()) {
    return Status::InvalidArgument("local_grad_sum: size " + std::to_string(local_grad_sum.size()) +
                                   ", expected " + std::to_string(params_.size()));
  }
  if (local_batch < 1) {
    return Status::InvalidArgument("local_batch: must be >= 1, got " + std::to_string(local_batch));
  }
  StatusOr<StepStats> result = StepImpl(local_grad_sum, local_batch);
  if (!result.ok()) core_->Fail(result.status());
  return result;
}

StatusOr<StepStats> SyncEngine::StepImpl(std::span<const float> grad, int64_t batch) {
  StepStats stats;
  // A switch resets the momentum buffers (every worker's are equal after it).
  bool switched = false;
  STAR_RETURN_IF_ERROR(core_->ApplyDue(params_, stats, &switched));
  if (switched) std::fill(velocity_.begin(), velocity_.end(), 0.0f);
  STAR_RETURN_IF_ERROR(core_->Exchange(grad, 1.0f, batch, stats));
  if (!core_->is_child()) Update(core_->sum(), stats);
  switched = false;
  STAR_RETURN_IF_ERROR(core_->Publish(params_, stats, &switched));
  if (switched) std::fill(velocity_.begin(), velocity_.end(), 0.0f);
  stats.iteration = core_->iteration();
  return stats;
}

void SyncEngine::Update(const std::vector<float>& buf, StepStats& stats) {
  const size_t p = params_.size();
  const float batch = buf[p];
  stats.updated = true;
  stats.update_batch = static_cast<int64_t>(batch);
  stats.contributions = static_cast<int>(buf[p + 1]);
  const float inv_batch = 1.0f / batch;
  stats.update_grad_sq_norm = internal::MeanSquaredNorm(buf, p);
  const float lr = optimizer_.lr, wd = optimizer_.weight_decay, mu = optimizer_.momentum;
  if (mu > 0) {
    for (size_t i = 0; i < p; ++i) {
      velocity_[i] = mu * velocity_[i] + (buf[i] * inv_batch + wd * params_[i]);
      params_[i] -= lr * velocity_[i];
    }
  } else {
    for (size_t i = 0; i < p; ++i) params_[i] -= lr * (buf[i] * inv_batch + wd * params_[i]);
  }
}

}  // namespace star::shim
