#include "planner/static_planner.h"

#include "common/strings.h"

namespace libra::planner {

Result<std::unique_ptr<Planner>> StaticPlanner::Create(const recipe::OptionTable& options) {
  recipe::OptionReader reader(options);
  std::optional<int> train_gpus;
  if (reader.Has("train_gpus"))
    train_gpus = static_cast<int>(reader.Int("train_gpus", 1, 1, 1 << 20));
  const std::vector<int> tps = ReadRolloutTps(reader);
  const bool lend = reader.Bool("lend_idle_trainer", false);
  // Read (and so written into a resolved recipe) only where it applies.
  double reclaim_at = 1.0;
  if (lend || reader.Has("reclaim_at")) reclaim_at = reader.Double("reclaim_at", 1.0, 1e-6, 1.0);
  if (!lend && reader.Has("reclaim_at")) {
    reader.Error("reclaim_at", "applies only with lend_idle_trainer = true");
  }
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Planner>(
      std::make_unique<StaticPlanner>(train_gpus, tps, lend, reclaim_at));
}

Result<Plan> StaticPlanner::Initial(const PlanContext& context) {
  gpus_per_node_ = context.gpus_per_node;
  const int total = context.total_gpus();
  if (total < 2) {
    return Status::Unschedulable(
        "a static split needs at least 2 GPUs (one to train, one to "
        "roll out); use the colocated planner");
  }
  int train = 0;
  if (train_gpus_) {
    train = *train_gpus_;
  } else if (context.nodes > 1) {
    train = (context.nodes / 2) * context.gpus_per_node;
  } else {
    train = total / 2;
  }
  if (train >= total) {
    return Status::Unschedulable(
        StrFormat("train_gpus = %d leaves no GPU for rollout (the cluster has %d)", train, total));
  }
  LIBRA_RETURN_IF_ERROR(CheckRolloutTps(rollout_tps_, context.gpus_per_node));
  LIBRA_RETURN_IF_ERROR(CheckInstancesHold(context, rollout_tps_));
  LIBRA_ASSIGN_OR_RETURN(auto instances,
                         PackInstances(context.gpus_per_node, 0, total - train, rollout_tps_));
  LIBRA_ASSIGN_OR_RETURN(model::TrainLayout train_layout, ChooseTrainLayout(context, train));
  Plan plan;
  plan.layout.train_gpus = train;
  plan.layout.train = train_layout;
  plan.layout.instances = std::move(instances);
  plan.reason = train_gpus_ ? "fixed split from the recipe" : "default split: half the cluster";
  return plan;
}

std::optional<backend::Layout> StaticPlanner::IdleTrainerLayout(
    const backend::Layout& current) const {
  if (!lend_idle_trainer_ || current.instances.empty()) return std::nullopt;
  return LendTrainerGpus(current, gpus_per_node_, current.instances.back().tp);
}

}  // namespace libra::planner
