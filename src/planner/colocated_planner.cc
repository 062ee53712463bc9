#include "planner/colocated_planner.h"

namespace libra::planner {

Result<std::unique_ptr<Planner>> ColocatedPlanner::Create(const recipe::OptionTable& options) {
  recipe::OptionReader reader(options);
  const std::vector<int> tps = ReadRolloutTps(reader);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Planner>(std::make_unique<ColocatedPlanner>(tps));
}

Result<Plan> ColocatedPlanner::Initial(const PlanContext& context) {
  LIBRA_RETURN_IF_ERROR(CheckRolloutTps(rollout_tps_, context.gpus_per_node));
  LIBRA_RETURN_IF_ERROR(CheckInstancesHold(context, rollout_tps_));
  LIBRA_ASSIGN_OR_RETURN(
      auto instances, PackInstances(context.gpus_per_node, 0, context.total_gpus(), rollout_tps_));
  LIBRA_ASSIGN_OR_RETURN(model::TrainLayout train_layout,
                         ChooseTrainLayout(context, context.total_gpus()));
  Plan plan;
  plan.layout.train_gpus = context.total_gpus();
  plan.layout.train = train_layout;
  plan.layout.instances = std::move(instances);
  plan.layout.colocated = true;
  plan.reason = "all GPUs roll out, then all train";
  return plan;
}

}  // namespace libra::planner
