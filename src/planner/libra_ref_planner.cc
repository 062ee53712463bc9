#include "planner/libra_ref_planner.h"

#include <algorithm>

#include "common/strings.h"

namespace libra::planner {
namespace {

Result<backend::Layout> LayoutOf(const model::ReferenceTrainConfig& train,
                                 const std::vector<int>& rollout, int gpus_per_node) {
  return SplitLayout(model::TrainLayout{train.tp, train.pp, train.dp * train.cp, train.b_micro},
                     rollout, gpus_per_node);
}

}  // namespace

std::vector<model::RequestInfo> ReferenceRequests(std::span<const TrajectorySize> trajectories) {
  std::vector<model::RequestInfo> requests;
  requests.reserve(trajectories.size());
  for (const TrajectorySize& t : trajectories) {
    requests.push_back({t.prompt_tokens, t.generated_tokens});
  }
  return requests;
}

Result<std::unique_ptr<Planner>> LibraRefPlanner::Create(const recipe::OptionTable& options) {
  recipe::OptionReader r(options);
  ReferencePlannerConfig c;
  constexpr int64_t kMany = 1 << 20;
  auto sizes = [&r](const char* key) {
    std::vector<int> out;
    for (int64_t v : r.IntList(key, {}, 1, kMany)) out.push_back(static_cast<int>(v));
    return out;
  };
  // Their GlobalResourcePlannerConfig, key for key (libra-reference.md §3.6, §7.2).
  c.plan_interval = static_cast<int>(r.Int("plan_interval", c.plan_interval, 1, kMany));
  c.warmup_steps = static_cast<int>(r.Int("warmup_steps", c.warmup_steps, 0, kMany));
  c.min_history_size = static_cast<int>(r.Int("min_history_size", c.min_history_size, 1, kMany));
  c.max_history_size = static_cast<int>(r.Int("max_history_size", c.max_history_size, 1, kMany));
  c.min_gain_ratio = r.Double("min_gain_ratio", c.min_gain_ratio, 0);
  const bool cost_set = r.Has("reconfiguration_cost_s");
  if (cost_set) {
    c.reconfiguration_cost_s = r.Double("reconfiguration_cost_s", c.reconfiguration_cost_s, 0);
  }
  c.allowed_rollout_tp = ReadTpList(r, "allowed_rollout_tp", {1, 2, 4, 8}, /*allow_empty=*/true);
  c.rollout_node_tp_pattern = ReadTpList(r, "rollout_node_tp_pattern", {}, /*allow_empty=*/true);
  c.require_heterogeneous_rollout_tp =
      r.Bool("require_heterogeneous_rollout_tp", c.require_heterogeneous_rollout_tp);
  c.allowed_train_tp = sizes("allowed_train_tp");
  c.allowed_train_pp = sizes("allowed_train_pp");
  c.micro_batch_sizes = sizes("micro_batch_sizes");
  c.fixed_train_gpus = static_cast<int>(r.Int("fixed_train_gpus", c.fixed_train_gpus, 0, kMany));
  c.initial_allocation_strategy =
      r.String("initial_allocation_strategy", "grp", {"grp", "configured"}) == "configured"
          ? ReferenceInitialAllocation::kConfigured
          : ReferenceInitialAllocation::kGrp;
  c.allocation_granularity_gpus = static_cast<int>(
      r.Int("allocation_granularity_gpus", c.allocation_granularity_gpus, 1, kMany));
  c.min_train_gpus = static_cast<int>(r.Int("min_train_gpus", c.min_train_gpus, 1, kMany));
  c.min_rollout_gpus = static_cast<int>(r.Int("min_rollout_gpus", c.min_rollout_gpus, 1, kMany));
  c.online_replanning = r.Bool("online_replanning", c.online_replanning);
  c.replan_cooldown_steps =
      static_cast<int>(r.Int("runtime_replan_cooldown_steps", c.replan_cooldown_steps, 0, kMany));
  c.queue_pressure_threshold =
      r.Double("runtime_queue_pressure_threshold", c.queue_pressure_threshold, 0);
  c.active_rollout_pressure_threshold =
      r.Double("runtime_active_rollout_pressure_threshold", c.active_rollout_pressure_threshold, 0);
  c.rejected_rollout_delta_threshold = static_cast<int>(r.Int(
      "runtime_rejected_rollout_delta_threshold", c.rejected_rollout_delta_threshold, 0, kMany));
  c.rollout_train_imbalance_threshold =
      r.Double("runtime_rollout_train_imbalance_threshold", c.rollout_train_imbalance_threshold, 0);
  c.elastic_hybrid_planning_enabled =
      r.Bool("elastic_hybrid_planning_enabled", c.elastic_hybrid_planning_enabled);
  c.elastic_hybrid_replica_size_gpus = static_cast<int>(
      r.Int("elastic_hybrid_replica_size_gpus", c.elastic_hybrid_replica_size_gpus, 0, kMany));
  c.elastic_hybrid_min_rollout_gpus = static_cast<int>(
      r.Int("elastic_hybrid_min_rollout_gpus", c.elastic_hybrid_min_rollout_gpus, 0, kMany));
  c.elastic_hybrid_borrow_train_rollout_ratio = r.Double(
      "elastic_hybrid_borrow_train_rollout_ratio", c.elastic_hybrid_borrow_train_rollout_ratio, 0);
  c.elastic_hybrid_release_train_rollout_ratio =
      r.Double("elastic_hybrid_release_train_rollout_ratio",
               c.elastic_hybrid_release_train_rollout_ratio, 0);
  c.elastic_hybrid_max_rollout_pressure =
      r.Double("elastic_hybrid_max_rollout_pressure", c.elastic_hybrid_max_rollout_pressure, 0);
  c.elastic_hybrid_signal_ttl_steps = static_cast<int>(
      r.Int("elastic_hybrid_signal_ttl_steps", c.elastic_hybrid_signal_ttl_steps, 1, kMany));
  c.verbose = r.Bool("verbose", c.verbose);
  // Their GRP_FORCE_* environment overrides, as options.
  c.force_rollout_tp_list = sizes("force_rollout_tp_list");
  if (r.Has("force_train_gpus")) {
    c.force_train_gpus = static_cast<int>(r.Int("force_train_gpus", 1, 1, kMany));
  }
  c.force_runtime_reconfigure = r.Bool("force_runtime_reconfigure", c.force_runtime_reconfigure);
  LIBRA_RETURN_IF_ERROR(r.Finish());
  auto planner = std::make_unique<LibraRefPlanner>(std::move(c));
  planner->reconfiguration_cost_set_ = cost_set;
  return std::unique_ptr<Planner>(std::move(planner));
}

ReferenceRunConfig LibraRefPlanner::RunConfig(const backend::Layout& layout) const {
  ReferenceRunConfig run;
  run.train_gpus = layout.train_gpus;
  run.rollout_gpus = layout.rollout_gpus();
  run.train_tp = layout.train.tp;
  run.train_pp = layout.train.pp;
  run.train_dp = layout.train.dp;
  run.micro_batch_size = layout.train.micro_batch;
  run.batch_size = std::max(1, context_.batch_trajectories);
  run.n_samples = 1;
  run.max_concurrent_rollouts = run.batch_size;
  for (const backend::InstanceSpec& i : layout.instances) run.rollout_tp_list.push_back(i.tp);
  return run;
}

Result<Plan> LibraRefPlanner::Initial(const PlanContext& context) {
  context_ = context;
  if (context.cost == nullptr) {
    return Status::Unschedulable("libra-ref plans with a cost model, and there is none");
  }
  const model::CostModelContext mc{context.cost->gpu(), context.cost->arch(),
                                   context.gpus_per_node};
  // The recipe's libra-ref model, with its [cost_model] overrides; with another cost model, the
  // authors' model built for the same GPU and model.
  const auto* given = dynamic_cast<const model::ReferenceCostModel*>(context.cost);
  model_ = std::make_unique<model::ReferenceCostModel>(
      mc, given != nullptr ? given->params() : model::ReferenceParamsFrom(mc));
  if (!reconfiguration_cost_set_) {
    config_.reconfiguration_cost_s = model_->params().reconfiguration_cost_s;
  }
  config_.n_total_gpus = context.total_gpus();
  LIBRA_ASSIGN_OR_RETURN(planner_, ReferencePlanner::Create(*model_, config_));
  const std::vector<model::RequestInfo> history = ReferenceRequests(context.history);
  planner_->ReplaceHistory(history);
  // Their preflight with strategy "grp": the optimizer's best pair is authoritative.
  ReferenceRunConfig run;
  run.batch_size = std::max(1, context.batch_trajectories);
  run.n_samples = 1;
  const ReferenceOptimization best =
      OptimizeReference(*model_, planner_->history(), ReferenceSearchFor(planner_->config(), run));
  if (!best.found()) {
    return Status::Unschedulable(StrFormat(
        "libra-ref's optimizer found no feasible plan for %d GPUs (%d explored, %d out of "
        "memory)",
        context.total_gpus(), best.explored, best.pruned_oom));
  }
  Plan plan;
  LIBRA_ASSIGN_OR_RETURN(plan.layout,
                         LayoutOf(*best.train, best.rollout_tp_list, context.gpus_per_node));
  plan.predicted_step_s = best.t_global;
  plan.reason = StrFormat(
      "the authors' optimizer: max(T_train %.3f s, T_rollout %.3f s) over %zu requests; %d "
      "explored, %d out of memory, %d stopped early",
      best.t_train, best.t_rollout, planner_->history().size(), best.explored, best.pruned_oom,
      best.pruned_early_stop);
  return plan;
}

std::optional<PlanDecision> LibraRefPlanner::OnStep(const StepObservation& o) {
  if (!planner_) return std::nullopt;
  ReferenceDispatcherMetrics dispatcher;
  dispatcher.pending_inputs = o.waiting_turns;
  dispatcher.staleness_running = o.in_flight;
  dispatcher.staleness_rejected = o.rejected;
  ReferenceStepStats stats;
  stats.max_concurrent_rollouts = std::max(1, context_.batch_trajectories);
  stats.rollout_time_s = o.rollout_s;
  stats.train_time_s = o.train_s;
  stats.step_time_s = o.step_s;
  const ReferenceRuntimeMetrics& metrics = planner_->ObserveRuntime(o.step, dispatcher, stats);
  if (o.transition_in_flight) return std::nullopt;
  const std::vector<model::RequestInfo> batch = ReferenceRequests(o.trajectories);
  Result<ReferenceDecision> decided =
      planner_->PlanIfNeeded(o.step, RunConfig(o.layout), batch, &metrics);
  PlanDecision decision;
  if (!decided.ok()) {
    decision.trigger = "error";
    decision.reason = "the authors' planner failed: " + decided.status().message();
    return decision;
  }
  const ReferenceDecision& d = *decided;
  if (d.reason == ReferenceReason::kWarmup || d.reason == ReferenceReason::kCooldown ||
      d.reason == ReferenceReason::kIntervalSkip) {
    return std::nullopt;
  }
  decision.trigger = NameOf(d.trigger);
  decision.reason = NameOf(d.reason);
  if (d.current_plan) decision.current_step_s = d.current_plan->t_global;
  if (d.candidate_plan) {
    decision.candidate_step_s = d.candidate_plan->t_global;
    decision.gain_s = d.net_gain_s;
    decision.transition_s = config_.reconfiguration_cost_s;
    decision.reason += StrFormat(" (gain ratio %.3f, net gain %.3f s)", d.gain_ratio, d.net_gain_s);
  }
  if (d.should_reconfigure && d.candidate_plan) {
    auto layout = LayoutOf(d.candidate_plan->train, d.candidate_plan->rollout_tp_list,
                           context_.gpus_per_node);
    if (layout.ok() && !(*layout == o.layout)) {
      decision.layout = std::move(*layout);
    } else if (!layout.ok()) {
      decision.reason += "; not applied: " + layout.status().message();
    }
  }
  return decision;
}

}  // namespace libra::planner
