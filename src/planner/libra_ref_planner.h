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
// Knobs (`[system.planner_options]`): every field of their GlobalResourcePlannerConfig that the
// planner reads, by their names (docs/planner.md lists them with defaults), and their GRP_FORCE_*
// environment overrides as force_rollout_tp_list, force_train_gpus, force_runtime_reconfigure.
// With `[cost_model] name = "libra-ref"` the planner plans on that model, overrides included
// (and takes its reconfiguration_cost_s unless the options set one).
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
  /// Whether the options set reconfiguration_cost_s (else the cost model's value is used).
  bool reconfiguration_cost_set_ = false;
  PlanContext context_;
  std::unique_ptr<model::ReferenceCostModel> model_;
  std::unique_ptr<ReferencePlanner> planner_;
};

/// The reference's view of trajectories: prompt and generated tokens, tool outputs excluded.
std::vector<model::RequestInfo> ReferenceRequests(std::span<const TrajectorySize> trajectories);

}  // namespace libra::planner
