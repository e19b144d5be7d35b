#include "star/shim/synchronizer.h"

#include <numeric>
#include <string>
#include <utility>

#include "star/shim/parameter_server.h"
#include "star/shim/world.h"

namespace star::shim {
namespace {

// Adapts one engine (SyncEngine or PsWorker) to the interface; owns the store server the
// engine's communicator came through, if this process hosts it.
template <typename Engine>
class SynchronizerOf final : public Synchronizer {
 public:
  SynchronizerOf(std::unique_ptr<Engine> engine, std::unique_ptr<StoreServer> store_server)
      : store_server_(std::move(store_server)), engine_(std::move(engine)) {}

  StatusOr<StepStats> Step(std::span<const float> grad_sum, int64_t local_batch) override {
    if (finished_) return Status::FailedPrecondition("synchronizer: Step after Finish");
    return engine_->Step(grad_sum, local_batch);
  }
  Status Schedule(const api::Decision& decision) override { return engine_->Schedule(decision); }
  Status Finish() override {
    if (finished_) return Status::Ok();
    finished_ = true;
    return engine_->Finish();
  }
  std::span<const float> params() const override { return engine_->params(); }
  int64_t iteration() const override { return engine_->iteration(); }
  api::SyncMode mode() const override { return engine_->mode(); }


 private:
  std::unique_ptr<StoreServer> store_server_;  // may be null; outlives the engine
  std::unique_ptr<Engine> engine_;
  bool finished_ = false;
};

Status CheckOptions(std::span<const float> initial, const SynchronizerOptions& o) {
  if (initial.empty()) return Status::InvalidArgument("initial_params: must not be empty");
  if (o.parameter_servers < 0) {
    return Status::InvalidArgument("parameter_servers: must be >= 0, got " +
                                   std::to_string(o.parameter_servers));
  }
  if (o.timeout.count() <= 0) {
    return Status::InvalidArgument("timeout: must be > 0 ms, got " + std::to_string(o.timeout.count()));
  }
  const size_t sum = std::accumulate(o.tensor_sizes.begin(), o.tensor_sizes.end(), size_t{0});
  if (!o.tensor_sizes.empty() && sum != initial.size()) {
    return Status::InvalidArgument("tensor_sizes: sum to " + std::to_string(sum) + ", expected " +
                                   std::to_string(initial.size()) + " parameters");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Synchronizer>> Make(std::unique_ptr<Collective> world,
                                             std::span<const float> initial_params,
                                             const SynchronizerOptions& options,
                                             std::unique_ptr<StoreServer> store_server) {
  STAR_RETURN_IF_ERROR(CheckOptions(initial_params, options));
  if (options.parameter_servers > 0) {
    std::vector<size_t> sizes = options.tensor_sizes;
    if (sizes.empty()) sizes.push_back(initial_params.size());
    STAR_ASSIGN_OR_RETURN(auto ps, PsWorker::Create(std::move(world), options.parameter_servers,
                                                    sizes, PsOptions{options.timeout}));
    return std::unique_ptr<Synchronizer>(
        new SynchronizerOf<PsWorker>(std::move(ps), std::move(store_server)));
  }
  EngineOptions engine_options{options.timeout, options.measure_wait};
  std::vector<float> params(initial_params.begin(), initial_params.end());
  STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), std::move(params),
                                                        options.optimizer, engine_options));
  return std::unique_ptr<Synchronizer>(
      new SynchronizerOf<SyncEngine>(std::move(engine), std::move(store_server)));
}

}  // namespace

StatusOr<std::unique_ptr<Synchronizer>> Synchronizer::Create(std::unique_ptr<Collective> world,
                                                             std::span<const float> initial_params,
                                                             SynchronizerOptions options) {
  return Make(std::move(world), initial_params, options, nullptr);
}

StatusOr<std::unique_ptr<Synchronizer>> Synchronizer::Connect(const WorkerConfig& config,
                                                              std::span<const float> initial_params,
                                                              SynchronizerOptions options) {
  STAR_RETURN_IF_ERROR(Validate(config));
  if (config.is_server()) {
    return Status::InvalidArgument("rank: " + std::to_string(config.rank) +
                                   " is a parameter server, not a worker");
  }
  options.parameter_servers = config.parameter_servers;
  options.timeout = config.timeout;
  STAR_ASSIGN_OR_RETURN(World world, ConnectWorld(config));
  return Make(std::move(world.collective), initial_params, options, std::move(world.store_server));
}

}  // namespace star::shim
