// StaticPlanner ("static"): a fixed split, disaggregated. The first `train_gpus` GPUs train; the
// rest run rollout instances of TP `rollout_tp`. Never re-plans.
//
// Assumptions: the user knows a good split (the usual practice in verl / slime / AReaL recipes).
// Algorithm: 1. train on GPUs [0, train_gpus). 2. pack TP-`rollout_tp` instances on the remaining
// GPUs, node by node, never across a node boundary.
// Knobs: `train_gpus` (default: half the cluster, in whole nodes when there are several),
// `rollout_tp` (1, 2, 4 or 8, dividing gpus_per_node; default 1).
#pragma once

#include <optional>

#include "planner/planner.h"

namespace libra::planner {

inline constexpr std::string_view kStaticName = "static";

class StaticPlanner : public Planner {
 public:
  static Result<std::unique_ptr<Planner>> Create(const recipe::OptionTable& options);
  StaticPlanner(std::optional<int> train_gpus, int rollout_tp)
      : train_gpus_(train_gpus), rollout_tp_(rollout_tp) {}

  std::string_view Name() const override { return kStaticName; }
  Result<Plan> Initial(const PlanContext& context) override;

 private:
  std::optional<int> train_gpus_;
  int rollout_tp_;
};

}  // namespace libra::planner
