// LibraRefPlanner ("libra-ref"): the authors' global resource planner (reference_planner.h)
// behind the Planner interface, so that a run can use it as their code does: the reference cost
// model built for the recipe's GPU and model, their exhaustive optimizer over the startup profile
// for the initial plan (their preflight: the candidate is authoritative), and after every step
// their trigger, their one-step gain gate against a fixed reconfiguration cost, and their plan.
//
// Assumptions: theirs (libra-reference.md §3): the rollout history is prompt and generated
// lengths only (tool outputs excluded); the objective is max(one training iteration, one rollout
// makespan over the history window). Its plans are applied through the same elastic pool as
// every planner's (non-blocking drain), where the authors' executor pauses and drains.
// Knobs (`[system.planner_options]`): plan_interval (10), warmup_steps (1), min_history_size (8),
// min_gain_ratio (0.05), reconfiguration_cost_s (15), allowed_rollout_tp ([1, 2, 4, 8]),
// rollout_node_tp_pattern ([]), online_replanning (true).
#pragma once

#include <memory>
#include <optional>

#include "model/reference_model.h"
#include "planner/planner.h"
#include "planner/reference_planner.h"

namespace libra::planner {

inline constexpr std::string_view kLibraRefPlannerName = "libra-ref";

class LibraRefPlanner : public Planner {
 public:
  static Result<std::unique_ptr<Planner>> Create(const recipe::OptionTable& options);
  explicit LibraRefPlanner(ReferencePlannerConfig config) : config_(std::move(config)) {}

  std::string_view Name() const override { return kLibraRefPlannerName; }
  Result<Plan> Initial(const PlanContext& context) override;
  std::optional<PlanDecision> OnStep(const StepObservation& observation) override;

 private:
  ReferenceRunConfig RunConfig(const backend::Layout& layout) const;

  ReferencePlannerConfig config_;
  PlanContext context_;
  std::unique_ptr<model::ReferenceCostModel> model_;
  std::unique_ptr<ReferencePlanner> planner_;
};

/// The reference's view of trajectories: prompt and generated tokens, tool outputs excluded.
std::vector<model::RequestInfo> ReferenceRequests(std::span<const TrajectorySize> trajectories);

}  // namespace libra::planner
