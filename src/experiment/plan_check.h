// Plan check: how close a planner's predictions are to what its plan does. The plan is simulated
// as planned (held for the whole run, no online moves), and each phase of the pipeline is
// measured over the steady state, to set beside the planner's predicted phases (`libra plan
// --check`, docs/planner.md "Checking a plan").
//
// Measured, over the steps after the pipeline has filled (synchronous: from step 1; asynchronous
// with staleness s: from step s + 1), like for like with the planner's steady-state prediction:
//  * step: the mean time between consecutive step ends (a period, not one batch's latency);
//  * train and sync: the mean train step and weight sync (the last step, which never syncs, left
//    out of the sync mean);
//  * rollout: synchronous, the mean batch makespan (first turn to last trajectory); asynchronous,
//    the rollout side's time per step when it never waits for the trainer, which a second run of
//    the same plan measures with training, weight syncs and a time-shared layout's role switches
//    made free (the step period of that run).
#pragma once

#include "experiment/runner.h"
#include "planner/planner.h"
#include "recipe/recipe.h"

namespace libra::experiment {

struct MeasuredPlan {
  planner::PhaseTimes phases;
  /// Steps simulated; the steady-state window is [first_steady_step, steps).
  int steps = 0;
  int first_steady_step = 0;
  /// The workload drifts and was simulated without its drift (the plan is made for the startup
  /// profile; following the drift is re-planning's job, which a held plan does not do).
  bool drift_held = false;
};

/// Steps a measured plan runs at least: a rollout side that thrashes its KV cache settles slowly
/// (swe-long's rollout alone measures 13,693 s a period over 20 steps, 15,256 over 40).
inline constexpr int kMinMeasuredSteps = 40;

/// Simulates `plan` for `system` of `recipe` (the recipe's steps but at least kMinMeasuredSteps,
/// its seed, workload without its drift, and router) on the backend `parts` builds, and
/// measures its phases. `lender`, when given,
/// is the planner that made the plan: it decides what the trainer's GPUs do while the trainer
/// waits. `rollout_alone` false skips the second run (the asynchronous rollout phase is then the
/// mean batch makespan). Errors: the run failed (the message says why).
Result<MeasuredPlan> MeasurePlan(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                                 const planner::Plan& plan, const planner::Planner* lender,
                                 const Components& parts, bool rollout_alone = true);

}  // namespace libra::experiment
