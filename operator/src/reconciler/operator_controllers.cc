#include "star/operator/reconciler/operator_controllers.h"

namespace star::op {

OperatorControllers::OperatorControllers(Manager* manager, LoopOptions loop, LearnedModel learned)
    : registry(std::move(loop), std::move(learned)),
      records(manager->client(), &registry),
      events(manager->client()),
      nodes(manager) {}

StatusOr<std::unique_ptr<OperatorControllers>> AddOperatorControllers(Manager* manager,
                                                                      OperatorControllerOptions options) {
  if (manager == nullptr) return Status::InvalidArgument("manager: required");
  if (options.status_interval.count() <= 0) return Status::InvalidArgument("status_interval: must be > 0 ms");
  if (options.job.max_restarts < 0) {
    return Status::InvalidArgument("max_restarts: must be >= 0, got " + std::to_string(options.job.max_restarts));
  }
  auto c = std::make_unique<OperatorControllers>(manager, std::move(options.loop), std::move(options.learned));
  STAR_ASSIGN_OR_RETURN(c->endpoint,
                        ReportEndpoint::Create(std::move(options.report), &c->registry, &c->records, manager->metrics()));
  manager->AddRunnable(c->endpoint.get());
  c->status_writer =
      std::make_unique<StatusWriter>(manager, &c->registry, &c->records, &c->events, options.status_interval);
  manager->AddRunnable(c->status_writer.get());
  c->registry.SetUrgentListener([writer = c->status_writer.get()] { writer->Nudge(); });
  STAR_ASSIGN_OR_RETURN(c->jobs, TrainingJobReconciler::Create(manager, options.job,
                                                               {&c->registry, &c->records, &c->events, &c->nodes,
                                                                c->endpoint.get()}));
  return c;
}

}  // namespace star::op
