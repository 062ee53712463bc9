#include "planner/colocated_planner.h"

#include "common/strings.h"

namespace libra::planner {

Result<std::unique_ptr<Planner>> ColocatedPlanner::Create(const recipe::OptionTable& options) {
  recipe::OptionReader reader(options);
  const int tp = static_cast<int>(reader.Int("rollout_tp", 1));
  if (tp != 1 && tp != 2 && tp != 4 && tp != 8) {
    reader.Error("rollout_tp", StrFormat("must be 1, 2, 4 or 8 (got %d)", tp));
  }
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Planner>(std::make_unique<ColocatedPlanner>(tp));
}

Result<Plan> ColocatedPlanner::Initial(const PlanContext& context) {
  if (rollout_tp_ > context.gpus_per_node || context.gpus_per_node % rollout_tp_ != 0) {
    return Status::Unschedulable(StrFormat("rollout_tp = %d does not divide gpus_per_node = %d",
                                           rollout_tp_, context.gpus_per_node));
  }
  LIBRA_ASSIGN_OR_RETURN(
      auto instances, PackInstances(context.gpus_per_node, 0, context.total_gpus(), rollout_tp_));
  Plan plan;
  plan.layout.train_gpus = context.total_gpus();
  plan.layout.instances = std::move(instances);
  plan.layout.colocated = true;
  plan.reason = "all GPUs roll out, then all train";
  return plan;
}

}  // namespace libra::planner
