// ColocatedPlanner ("colocated"): every GPU rolls out, then every GPU trains (verl's hybrid
// engine). Rollout pauses while the trainer runs; with a staleness bound above 0 the rollouts of
// later steps fill the instances left idle by a step's stragglers (SortedRL-style).
//
// Assumptions: switching the GPUs between roles is cheap next to a step.
// Algorithm: train on all GPUs; pack TP-`rollout_tp` instances on all GPUs.
// Knobs: `rollout_tp` (1, 2, 4 or 8, dividing gpus_per_node; default 1) or `rollout_tps`, a
// pattern of TP sizes each node repeats.
#pragma once

#include <vector>

#include "planner/planner.h"

namespace libra::planner {

inline constexpr std::string_view kColocatedName = "colocated";

class ColocatedPlanner : public Planner {
 public:
  static Result<std::unique_ptr<Planner>> Create(const recipe::OptionTable& options);
  explicit ColocatedPlanner(std::vector<int> rollout_tps) : rollout_tps_(std::move(rollout_tps)) {}

  std::string_view Name() const override { return kColocatedName; }
  Result<Plan> Initial(const PlanContext& context) override;

 private:
  std::vector<int> rollout_tps_;
};

}  // namespace libra::planner
