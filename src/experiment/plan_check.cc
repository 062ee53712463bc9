#include "experiment/plan_check.h"

#include <algorithm>

#include "planner/fixed_planner.h"
#include "sched/router.h"

namespace libra::experiment {
namespace {

/// The recipe's cost model with training, weight syncs and (for a time-shared layout) role
/// switches free: the rollout side of a run on it never waits for the trainer. Memory verdicts
/// stay, so a plan that does not fit still fails.
class FreeTrainingCost : public model::CostModel {
 public:
  FreeTrainingCost(const model::CostModel& inner, bool free_switches)
      : inner_(inner), free_switches_(free_switches) {}
  std::string_view Name() const override { return inner_.Name(); }
  const model::GpuSpec& gpu() const override { return inner_.gpu(); }
  const model::ModelArch& arch() const override { return inner_.arch(); }
  int64_t KvCapacityTokens(int tp) const override { return inner_.KvCapacityTokens(tp); }
  double IterationTime(int tp, const model::IterationLoad& load) const override {
    return inner_.IterationTime(tp, load);
  }
  double PrefillTime(int tp, int64_t tokens, int64_t prior) const override {
    return inner_.PrefillTime(tp, tokens, prior);
  }
  double DecodeSpanTime(int tp, int64_t sequences, int64_t context,
                        int64_t iterations) const override {
    return inner_.DecodeSpanTime(tp, sequences, context, iterations);
  }
  double DecodeGpuSecondsLowerBound(int64_t context, int64_t max_batch) const override {
    return inner_.DecodeGpuSecondsLowerBound(context, max_batch);
  }
  double PrefillGpuSecondsLowerBound() const override {
    return inner_.PrefillGpuSecondsLowerBound();
  }
  double TrainGpuSecondsLowerBound(int64_t tokens,
                                   const model::TrainPasses& passes) const override {
    return inner_.TrainGpuSecondsLowerBound(tokens, passes);
  }
  model::TrainEstimate TrainStep(const model::TrainLayout& layout, const model::TrainPasses& passes,
                                 std::span<const int64_t> tokens) const override {
    model::TrainEstimate e = inner_.TrainStep(layout, passes, tokens);
    e.step_s = e.compute_s = e.tp_comm_s = e.pp_bubble_s = e.dp_comm_s = e.optimizer_s = 0;
    return e;
  }
  double WeightSyncTime(const model::SyncRequest& /*request*/) const override { return 0; }
  double RoleSwitchTime(const model::SwitchRequest& request) const override {
    return free_switches_ ? 0 : inner_.RoleSwitchTime(request);
  }

 private:
  const model::CostModel& inner_;
  bool free_switches_;
};

class StepRecorder : public Recorder {
 public:
  Status RecordStep(const records::StepBatch& batch) override {
    steps.push_back(batch.step);
    return Status();
  }
  bool KeepsTurns() const override { return false; }
  std::vector<records::StepRecord> steps;
};

/// Runs the plan on `cost` and returns its step records.
Result<std::vector<records::StepRecord>> Simulate(
    const recipe::Recipe& recipe, const recipe::SystemSpec& system, const planner::Plan& plan,
    const planner::Planner* lender, const workload::Workload& workload,
    const model::CostModel& cost, const Components& parts) {
  LIBRA_ASSIGN_OR_RETURN(auto router, parts.routers->Create(system.router, system.router_options,
                                                            RouterDepsFor(&cost)));
  planner::FixedPlanner fixed(plan, lender);
  LIBRA_ASSIGN_OR_RETURN(auto backend,
                         parts.make_backend(recipe, workload, cost, BackendContext{}));
  CoordinatorConfig config;
  config.steps = recipe.steps;
  config.prompts_per_step = recipe.rl.prompts_per_step;
  config.group_size = recipe.rl.group_size;
  config.staleness = recipe.StalenessFor(system);
  config.stream_batches = recipe.BatchingFor(system) == recipe::Batching::kStream;
  config.partial_rollout = recipe.PartialRolloutFor(system);
  config.sync_interval = recipe.rl.sync_interval;
  config.plan = MakePlanContext(recipe, system, &cost);
  StepRecorder recorder;
  Coordinator coordinator(config, workload, *router, fixed, *backend, recorder);
  LIBRA_RETURN_IF_ERROR(coordinator.Run({}, {}).status());
  return std::move(recorder.steps);
}

/// Mean time between step ends over [first, steps.size()).
double Period(const std::vector<records::StepRecord>& steps, int first) {
  const double before = first > 0 ? steps[static_cast<size_t>(first - 1)].end_s : 0.0;
  return (steps.back().end_s - before) / static_cast<double>(steps.size() - first);
}

}  // namespace

Result<MeasuredPlan> MeasurePlan(const recipe::Recipe& as_written, const recipe::SystemSpec& system,
                                 const planner::Plan& plan, const planner::Planner* lender,
                                 const Components& parts, bool rollout_alone) {
  // The plan is made for the startup profile: a drifting workload is measured as it starts.
  recipe::Recipe recipe = as_written;
  recipe.steps = std::max(recipe.steps, kMinMeasuredSteps);
  bool drift_held = false;
  for (recipe::OptionEntry& entry : recipe.workload.options.entries) {
    if (entry.key == "drift" && entry.value.kind == recipe::OptionValue::Kind::kString &&
        entry.value.string_value != "none") {
      entry.value.string_value = "none";
      drift_held = true;
    }
  }
  LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(recipe.workload, recipe.seed));
  LIBRA_ASSIGN_OR_RETURN(auto cost, model::MakeCostModel(recipe));
  LIBRA_ASSIGN_OR_RETURN(const std::vector<records::StepRecord> steps,
                         Simulate(recipe, system, plan, lender, *workload, *cost, parts));
  if (steps.empty()) return Status::Internal("the simulated plan recorded no step");
  const int staleness = recipe.StalenessFor(system);
  const int n = static_cast<int>(steps.size());
  MeasuredPlan out;
  out.steps = n;
  out.drift_held = drift_held;
  out.first_steady_step = std::clamp(staleness > 0 ? staleness + 1 : 1, 0, n - 1);
  const int first = out.first_steady_step;
  out.phases.step_s = Period(steps, first);
  double rollout = 0;
  double train = 0;
  double sync = 0;
  for (int k = first; k < n; ++k) {
    rollout += steps[static_cast<size_t>(k)].rollout_s;
    train += steps[static_cast<size_t>(k)].train_s;
    if (k + 1 < n || n - first == 1) sync += steps[static_cast<size_t>(k)].sync_s;
  }
  out.phases.rollout_s = rollout / (n - first);
  out.phases.train_s = train / (n - first);
  out.phases.sync_s = sync / std::max(1, n - first - 1);
  if (staleness > 0 && rollout_alone) {
    const FreeTrainingCost free(*cost, plan.layout.colocated);
    LIBRA_ASSIGN_OR_RETURN(const std::vector<records::StepRecord> alone,
                           Simulate(recipe, system, plan, lender, *workload, free, parts));
    out.phases.rollout_s = Period(alone, std::min(first, static_cast<int>(alone.size()) - 1));
  }
  return out;
}

}  // namespace libra::experiment
