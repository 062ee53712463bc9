// Reference planner: the Libra authors' global resource planner, reproduced exactly, flaws
// included, so that our planner (grp_planner.h) can be cross-checked against theirs.
//
// Source: NetX-lab/Libra @ c51bf84, infra/cost_model/optimizer.py (generate_training_configs,
// generate_rollout_configs, TwoLevelNestedOptimizer) and infra/cost_model/
// global_resource_planner.py (GlobalResourcePlanner: observe_runtime, plan_if_needed,
// _planning_trigger, the transition-cost check, the GRP_FORCE_* overrides and
// _build_elastic_hybrid_signal); described in shared/reference/libra-reference.md §3.1 and
// §3.4-§3.7. Every time comes from model::ReferenceCostModel (reference_model.h): training
// candidates are pruned by TrainOom and timed by TrainIterationTime, rollout layouts are timed by
// EvaluateRollout; nothing here re-derives a formula.
//
// What it must not do: improve on the reference, or read the environment, a clock or a file. The
// reference's environment overrides (GRP_FORCE_ROLLOUT_TP_LIST, GRP_FORCE_TRAIN_GPUS,
// GRP_FORCE_RUNTIME_RECONFIGURE) are fields of ReferencePlannerConfig. Reference behaviour kept as
// it is (marked so in the implementation):
//   * the objective is max(one training iteration, one rollout makespan over the whole history
//     window), and the transition cost in seconds is compared with that one-iteration gain, not
//     amortised over the remaining steps;
//   * the current plan's training time is never checked for OOM (the optimizer's candidates are);
//   * when the current plan is infinite (its rollout is OOM or empty), a finite candidate has an
//     infinite raw gain and a NaN gain ratio, so it is refused as "gain_below_threshold";
//   * the rollout search keeps only the first 500 partitions, largest parts first, so on a large
//     rollout pool the layouts of many small instances are never evaluated;
//   * the elastic signal sizes its capacity from the configured rollout GPUs, not the candidate's.
// Not reproduced: the external simulator backends (Sailor, Vidur), apply_plan_to_config (§3.8),
// the deprecated elastic_hybrid_max_workers, and the log lines.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/enum_names.h"
#include "common/status.h"
#include "model/reference_model.h"

namespace libra::planner {

// ---- Search space (optimizer.py) ---------------------------------------------------------------

/// What the optimizer searches, under the names of TwoLevelNestedOptimizer and its optimize()
/// arguments. REQUIRES of the functions below: every listed TP, PP, micro-batch size and pattern
/// entry >= 1 (ReferencePlanner::Create checks its configuration).
struct ReferenceSearchOptions {
  /// GPUs to split between training and rollout (n_total_gpus). Default: 8.
  int n_total_gpus = 8;
  /// Sequences per training step (B_global, the run's batch_size). Default: 32.
  int64_t global_batch = 32;
  /// Training TP and PP sizes to try, in this order; empty = the powers of two up to 8 that are
  /// at most n_total_gpus (allowed_train_tp, allowed_train_pp). Default: empty.
  std::vector<int> allowed_train_tp;
  std::vector<int> allowed_train_pp;
  /// Micro-batch sizes to try, in this order; empty = {1, 2, 4, 8} (micro_batch_sizes).
  /// Default: empty.
  std::vector<int> micro_batch_sizes;
  /// When > 0, only training configurations of exactly this many GPUs (fixed_train_gpus).
  /// Default: 0.
  int fixed_train_gpus = 0;
  /// Training GPUs must be a multiple of this (allocation_granularity_gpus; at least 1).
  /// Default: 1.
  int allocation_granularity_gpus = 1;
  /// At least this many training GPUs, and this many left for rollout (min_train_gpus,
  /// min_rollout_gpus; at least 1). Default: 1 and 1.
  int min_train_gpus = 1;
  int min_rollout_gpus = 1;
  /// When non-empty, the only rollout layout is this per-node TP pattern repeated to fill the
  /// rollout GPUs, none when they are not a multiple of its sum (rollout_node_tp_pattern).
  /// Default: empty.
  std::vector<int> rollout_node_tp_pattern;
  /// The cp of every training configuration (train_cp_size; at least 1). It only counts GPUs.
  /// Default: 1.
  int train_cp_size = 1;
  /// Every DP replica's share of the batch must hold whole groups of this many samples
  /// (dp_batch_group_size, the run's n_samples; at least 1). Default: 1.
  int dp_batch_group_size = 1;
  /// Rollout TP sizes; empty = {1, 2, 4, 8} (allowed_rollout_tp). Default: empty.
  std::vector<int> allowed_rollout_tp;
  /// Most instances in one rollout layout (max_rollout_instances). Default: 32.
  int max_rollout_instances = 32;
  /// Keep only rollout layouts with at least two distinct TP sizes
  /// (require_heterogeneous_rollout_tp). Default: false.
  bool require_heterogeneous_rollout_tp = false;
  /// Record every training configuration's best pair in ReferenceOptimization::evaluated
  /// (verbose). Default: false.
  bool verbose = false;
};

/// generate_training_configs: for each TP, then each PP (in list order) with tp * pp <=
/// n_total_gpus, every dp = 1 .. n_total_gpus / (tp * pp), then every micro-batch size; cp 1,
/// zero_level 2. Configurations that leave no GPU for rollout are included. Empty lists take the
/// defaults of ReferenceSearchOptions.
std::vector<model::ReferenceTrainConfig> GenerateReferenceTrainingConfigs(
    int n_total_gpus, std::span<const int> allowed_tp = {}, std::span<const int> allowed_pp = {},
    std::span<const int> micro_batch_sizes = {});

/// The optimizer's training candidates: GenerateReferenceTrainingConfigs with cp =
/// train_cp_size, keeping those with gpus() >= min_train_gpus, gpus() a multiple of
/// allocation_granularity_gpus, n_total_gpus - gpus() >= min_rollout_gpus and, when
/// fixed_train_gpus > 0, gpus() == fixed_train_gpus. Generation order is kept.
std::vector<model::ReferenceTrainConfig> ReferenceTrainingCandidates(
    const ReferenceSearchOptions& options);

/// generate_rollout_configs: the partitions of `n_gpus` into the allowed TP sizes (empty = {1,
/// 2, 4, 8}; duplicates are not removed, as in the reference), parts non-increasing, enumerated
/// depth first with larger parts first, at most `max_instances` parts, truncated to the first
/// 500. None when n_gpus <= 0. E.g. 8 GPUs over {1, 2, 4, 8}: [8], [4,4], [4,2,2], [4,2,1,1], ...,
/// [1 x 8].
std::vector<std::vector<int>> GenerateReferenceRolloutConfigs(int n_gpus,
                                                              std::span<const int> allowed_tp = {},
                                                              int max_instances = 32);

/// The optimizer's rollout candidates for `rollout_gpus`: the node pattern repeated when there is
/// one, else GenerateReferenceRolloutConfigs; then, when require_heterogeneous_rollout_tp, only
/// those with at least two distinct TP sizes.
std::vector<std::vector<int>> ReferenceRolloutCandidates(int rollout_gpus,
                                                         const ReferenceSearchOptions& options);

// ---- The optimizer (TwoLevelNestedOptimizer) ---------------------------------------------------

/// One training configuration with its best rollout layout (an all_evaluated entry).
struct ReferenceEvaluatedPair {
  model::ReferenceTrainConfig train;
  std::vector<int> rollout_tp_list;
  double t_train = 0;
  double t_rollout = 0;
  double t_global = 0;

  bool operator==(const ReferenceEvaluatedPair&) const = default;
};

/// What the optimizer found (OptimizationResult).
struct ReferenceOptimization {
  /// The best pair; nullopt and empty when nothing is feasible.
  std::optional<model::ReferenceTrainConfig> train;
  std::vector<int> rollout_tp_list;
  /// Its times; +inf when nothing is feasible.
  double t_train = std::numeric_limits<double>::infinity();
  double t_rollout = std::numeric_limits<double>::infinity();
  double t_global = std::numeric_limits<double>::infinity();
  /// Training candidates looked at (batch-divisibility skips included), pruned for training
  /// memory, and pruned because their training time alone was no better than the incumbent.
  int explored = 0;
  int pruned_oom = 0;
  int pruned_early_stop = 0;
  /// With verbose: every candidate that reached a finite rollout layout, in search order.
  std::vector<ReferenceEvaluatedPair> evaluated;

  bool found() const { return train.has_value(); }
  bool operator==(const ReferenceOptimization&) const = default;
};

/// TwoLevelNestedOptimizer.optimize. L = int(mean total length of `requests`) (1024 when there
/// are none). For each training candidate in order: explored++; skip when global_batch is not a
/// multiple of dp * b_micro, or global_batch / dp not a multiple of dp_batch_group_size; a
/// training OOM (model.TrainOom) -> pruned_oom++; T_train = TrainIterationTime; T_train >= the
/// best global so far -> pruned_early_stop++; else every rollout candidate for the remaining GPUs
/// is evaluated (EvaluateRollout) and the first strictly smallest makespan is kept; none finite ->
/// skipped; global = max(T_train, that makespan), and a strictly smaller global replaces the
/// incumbent (the first wins ties).
ReferenceOptimization OptimizeReference(const model::ReferenceCostModel& model,
                                        std::span<const model::RequestInfo> requests,
                                        const ReferenceSearchOptions& options);

/// The best rollout layout alone (optimize_rollout_only).
struct ReferenceRolloutChoice {
  /// Empty when no layout has a finite makespan.
  std::vector<int> rollout_tp_list;
  double makespan = std::numeric_limits<double>::infinity();

  bool operator==(const ReferenceRolloutChoice&) const = default;
};

/// TwoLevelNestedOptimizer.optimize_rollout_only: the partitions of `rollout_gpus`
/// (GenerateReferenceRolloutConfigs; the node pattern is not used), the heterogeneous filter, and
/// the first strictly smallest makespan.
ReferenceRolloutChoice OptimizeReferenceRolloutOnly(const model::ReferenceCostModel& model,
                                                    int rollout_gpus,
                                                    std::span<const model::RequestInfo> requests,
                                                    const ReferenceSearchOptions& options);

// ---- Runtime metrics (observe_runtime) ---------------------------------------------------------

/// The dispatcher counters the reference reads (missing keys are 0).
struct ReferenceDispatcherMetrics {
  int64_t pending_inputs = 0;
  int64_t runner_input_queue = 0;
  int64_t runner_output_queue = 0;
  int64_t runner_max_queue_size = 0;
  int64_t staleness_pending_limit = 0;
  int64_t staleness_running = 0;
  int64_t staleness_capacity = 0;
  int64_t staleness_accepted = 0;
  int64_t staleness_rejected = 0;

  bool operator==(const ReferenceDispatcherMetrics&) const = default;
};

/// The step statistics the reference reads (missing keys are 0). The elastic counts are whole
/// DP replicas; the reference also accepts them under their legacy "*_workers" keys
/// (active_hybrid_workers, joining_hybrid_workers, pending_hybrid_joins), which map onto these.
struct ReferenceStepStats {
  int64_t max_concurrent_rollouts = 0;
  double rollout_time_s = 0;
  double train_time_s = 0;
  double step_time_s = 0;
  int64_t active_hybrid_replicas = 0;
  int64_t joining_hybrid_replicas = 0;
  int64_t pending_hybrid_replica_joins = 0;

  bool operator==(const ReferenceStepStats&) const = default;
};

/// Online pressure signals (RuntimeResourceMetrics), with the raw inputs they came from.
struct ReferenceRuntimeMetrics {
  int64_t step = 0;
  /// (pending_inputs + runner_input_queue + runner_output_queue) /
  /// max(1, runner_max_queue_size + staleness_pending_limit).
  double queue_pressure = 0;
  /// staleness_running / max_concurrent, where max_concurrent is the step's
  /// max_concurrent_rollouts, or max(1, staleness_running + staleness_capacity) when that is <= 1.
  double active_rollout_pressure = 0;
  int64_t accepted_rollouts = 0;
  int64_t rejected_rollouts = 0;
  double rollout_time_s = 0;
  double train_time_s = 0;
  double step_time_s = 0;
  ReferenceDispatcherMetrics dispatcher;
  ReferenceStepStats step_stats;

  /// rollout_time_s / max(train_time_s, 1e-6).
  double rollout_train_ratio() const;
  bool operator==(const ReferenceRuntimeMetrics&) const = default;
};

/// observe_runtime's computation, without the list it appends to.
ReferenceRuntimeMetrics ReferenceRuntimeMetricsFrom(int64_t step,
                                                    const ReferenceDispatcherMetrics& dispatcher,
                                                    const ReferenceStepStats& step_stats);

// ---- Plans, signals, decisions -----------------------------------------------------------------

/// What the planner reads from the run's configuration (AsyncRLConfig) at each call: the layout
/// in force and the batch. Defaults are the reference's (train_dp resolved as train_gpus /
/// (tp * pp)).
struct ReferenceRunConfig {
  int train_gpus = 4;
  int rollout_gpus = 4;
  /// Training layout (train_tp_size, train_pp_size, train_dp_size, train_cp_size,
  /// micro_batch_size). REQUIRES of a plan: tp, pp, dp, micro_batch_size >= 1.
  int train_tp = 1;
  int train_pp = 1;
  int train_dp = 4;
  int train_cp = 1;
  int micro_batch_size = 4;
  /// Sequences per step (batch_size) and samples per prompt (n_samples, the GRPO group).
  int64_t batch_size = 32;
  int n_samples = 4;
  int64_t max_concurrent_rollouts = 64;
  /// The configured rollout instances' TP sizes (heterogeneous_rollout.instances); when empty,
  /// max(1, rollout_gpus / vllm_tp_size) instances of vllm_tp_size.
  std::vector<int> rollout_tp_list;
  int vllm_tp_size = 1;

  bool operator==(const ReferenceRunConfig&) const = default;
};

enum class ReferencePlanSource {
  kCurrent,                // the configuration in force
  kOptimizer,              // the optimizer's best pair
  kForcedTrainAndRollout,  // force_train_gpus and force_rollout_tp_list
  kForcedRolloutTp,        // force_rollout_tp_list
  kForcedTrainGpus,        // force_train_gpus
};

/// "current", "optimizer", "forced_runtime_train_and_rollout", "forced_runtime_rollout_tp",
/// "forced_runtime_train_gpus".
constexpr std::array<EnumName<ReferencePlanSource>, 5> EnumTable(ReferencePlanSource) {
  return {{{ReferencePlanSource::kCurrent, "current"},
           {ReferencePlanSource::kOptimizer, "optimizer"},
           {ReferencePlanSource::kForcedTrainAndRollout, "forced_runtime_train_and_rollout"},
           {ReferencePlanSource::kForcedRolloutTp, "forced_runtime_rollout_tp"},
           {ReferencePlanSource::kForcedTrainGpus, "forced_runtime_train_gpus"}}};
}

/// A cross-stage plan and its evaluation (GlobalResourcePlan).
struct ReferencePlan {
  model::ReferenceTrainConfig train;
  std::vector<int> rollout_tp_list;
  double t_train = 0;
  double t_rollout = 0;
  /// max(t_train, t_rollout).
  double t_global = 0;
  int n_total_gpus = 0;
  int64_t max_concurrent_rollouts = 0;
  /// Set on a candidate by the transition check: net gain, gain ratio, and the cost charged.
  double expected_gain_s = 0;
  double expected_gain_ratio = 0;
  double reconfiguration_cost_s = 0;
  ReferencePlanSource source = ReferencePlanSource::kCurrent;

  int train_gpus() const { return train.gpus(); }
  int rollout_gpus() const;
  int n_instances() const { return static_cast<int>(rollout_tp_list.size()); }
  /// "train tp8 pp1 cp1 dp1 mb1 (8 GPUs) + rollout [1,1,2,4] (8 GPUs): t_train .. t_rollout ..".
  std::string ToString() const;
  bool operator==(const ReferencePlan&) const = default;
};

/// _same_plan: equal tp, pp, dp, cp and b_micro, and equal rollout TP multisets (sorted lists).
/// zero_level is not compared.
bool SameReferencePlan(const ReferencePlan& a, const ReferencePlan& b);

/// Why the planner looked, or did not (the reference's trigger strings).
enum class ReferenceTrigger {
  kWarmup,                 // step < warmup_steps
  kCooldown,               // step - last_replan_step < replan_cooldown_steps
  kInterval,               // step % plan_interval == 0
  kIntervalSkip,           // nothing fired (or online replanning is off)
  kQueuePressure,          // queue_pressure >= queue_pressure_threshold
  kActiveRolloutPressure,  // active_rollout_pressure >= active_rollout_pressure_threshold
  kRejectedRolloutDelta,   // rejected - last rejected >= rejected_rollout_delta_threshold
  kRolloutTrainImbalance,  // train time > 0 and rollout / train >= the imbalance threshold
};

/// "warmup", "cooldown", "interval", "interval_skip", "queue_pressure", "active_rollout_pressure",
/// "rejected_rollout_delta", "rollout_train_imbalance".
constexpr std::array<EnumName<ReferenceTrigger>, 8> EnumTable(ReferenceTrigger) {
  return {{{ReferenceTrigger::kWarmup, "warmup"},
           {ReferenceTrigger::kCooldown, "cooldown"},
           {ReferenceTrigger::kInterval, "interval"},
           {ReferenceTrigger::kIntervalSkip, "interval_skip"},
           {ReferenceTrigger::kQueuePressure, "queue_pressure"},
           {ReferenceTrigger::kActiveRolloutPressure, "active_rollout_pressure"},
           {ReferenceTrigger::kRejectedRolloutDelta, "rejected_rollout_delta"},
           {ReferenceTrigger::kRolloutTrainImbalance, "rollout_train_imbalance"}}};
}

/// What the decision says (the reference's reason strings).
enum class ReferenceReason {
  kWarmup,
  kCooldown,
  kIntervalSkip,
  kInsufficientHistory,
  kNoFeasibleCandidate,
  kElasticHybridAdjustment,
  kForcedReconfigure,
  kForcedRuntimeReconfigure,
  kReconfigure,
  kSamePlan,
  kGainBelowThreshold,
};

/// "warmup", "cooldown", "interval_skip", "insufficient_history", "no_feasible_candidate",
/// "elastic_hybrid_adjustment", "forced_reconfigure", "forced_runtime_reconfigure", "reconfigure",
/// "same_plan", "gain_below_threshold".
constexpr std::array<EnumName<ReferenceReason>, 11> EnumTable(ReferenceReason) {
  return {{{ReferenceReason::kWarmup, "warmup"},
           {ReferenceReason::kCooldown, "cooldown"},
           {ReferenceReason::kIntervalSkip, "interval_skip"},
           {ReferenceReason::kInsufficientHistory, "insufficient_history"},
           {ReferenceReason::kNoFeasibleCandidate, "no_feasible_candidate"},
           {ReferenceReason::kElasticHybridAdjustment, "elastic_hybrid_adjustment"},
           {ReferenceReason::kForcedReconfigure, "forced_reconfigure"},
           {ReferenceReason::kForcedRuntimeReconfigure, "forced_runtime_reconfigure"},
           {ReferenceReason::kReconfigure, "reconfigure"},
           {ReferenceReason::kSamePlan, "same_plan"},
           {ReferenceReason::kGainBelowThreshold, "gain_below_threshold"}}};
}

enum class ReferenceElasticAction { kJoin, kRelease, kHold };

/// "join", "release", "hold".
constexpr std::array<EnumName<ReferenceElasticAction>, 3> EnumTable(ReferenceElasticAction) {
  return {{{ReferenceElasticAction::kJoin, "join"},
           {ReferenceElasticAction::kRelease, "release"},
           {ReferenceElasticAction::kHold, "hold"}}};
}

/// Why the elastic signal wants the replicas it wants, in the order the reference tests them.
enum class ReferenceElasticReason {
  kNoCompleteReplicaCapacity,              // capacity <= 0 -> 0
  kProtectRolloutCapacity,                 // rollout pressure >= max pressure -> 0
  kCandidateRequestsMoreTrainingCapacity,  // planned extra > 0 -> min(capacity, planned extra)
  kTrainingBottleneck,                     // train / rollout >= borrow ratio -> capacity
  kRolloutBottleneck,                      // train / rollout <= release ratio -> 0
  kHysteresisHold,                         // otherwise -> current
};

/// "no_complete_replica_capacity", "protect_rollout_capacity",
/// "candidate_requests_more_training_capacity", "training_bottleneck", "rollout_bottleneck",
/// "hysteresis_hold".
constexpr std::array<EnumName<ReferenceElasticReason>, 6> EnumTable(ReferenceElasticReason) {
  return {{{ReferenceElasticReason::kNoCompleteReplicaCapacity, "no_complete_replica_capacity"},
           {ReferenceElasticReason::kProtectRolloutCapacity, "protect_rollout_capacity"},
           {ReferenceElasticReason::kCandidateRequestsMoreTrainingCapacity,
            "candidate_requests_more_training_capacity"},
           {ReferenceElasticReason::kTrainingBottleneck, "training_bottleneck"},
           {ReferenceElasticReason::kRolloutBottleneck, "rollout_bottleneck"},
           {ReferenceElasticReason::kHysteresisHold, "hysteresis_hold"}}};
}

/// The planner's command to the elastic hybrid pool (ElasticHybridSignal). Counts are complete
/// DP replicas of replica_size_gpus GPUs (the reference's wire names say "workers").
struct ReferenceElasticSignal {
  int64_t step = 0;
  int desired_replicas = 0;   // desired_workers
  int current_replicas = 0;   // current_workers: active + joining
  int capacity_replicas = 0;  // max_workers: what the rollout GPUs can lend now
  ReferenceElasticAction action = ReferenceElasticAction::kHold;
  ReferenceElasticReason reason = ReferenceElasticReason::kHysteresisHold;
  double train_rollout_ratio = 0;
  double rollout_pressure = 0;
  int ttl_steps = 20;
  int active_replicas = 0;
  /// max(joining, pending joins): replicas still joining count as allocated, so that a release
  /// can cancel them.
  int joining_replicas = 0;
  int replica_size_gpus = 1;

  int64_t expires_step() const { return step + ttl_steps; }
  bool should_adjust() const { return desired_replicas != current_replicas; }
  bool operator==(const ReferenceElasticSignal&) const = default;
};

/// One plan_if_needed call's outcome (PlannerDecision), with the transition numbers.
struct ReferenceDecision {
  int64_t step = 0;
  bool should_reconfigure = false;
  ReferenceReason reason = ReferenceReason::kIntervalSkip;
  ReferenceTrigger trigger = ReferenceTrigger::kIntervalSkip;
  /// History entries when deciding.
  int num_requests = 0;
  std::optional<ReferenceRuntimeMetrics> runtime_metrics;
  /// The plan in force: for cooldown, interval_skip and insufficient_history the planner's active
  /// plan (if any); once the planner evaluates, the configuration's plan. None for warmup.
  std::optional<ReferencePlan> current_plan;
  /// Set once the optimizer found a feasible pair (replaced by a forced plan when forced).
  std::optional<ReferencePlan> candidate_plan;
  std::optional<ReferenceOptimization> optimization;
  /// current.t_global - candidate.t_global; that minus reconfiguration_cost_s; the raw gain over
  /// max(current.t_global, 1e-6). 0 when there is no candidate.
  double raw_gain_s = 0;
  double net_gain_s = 0;
  double gain_ratio = 0;
  /// Set when elastic_hybrid_planning_enabled and a candidate was evaluated.
  std::optional<ReferenceElasticSignal> elastic_signal;

  bool operator==(const ReferenceDecision&) const = default;
};

enum class ReferenceInitialAllocation {
  kGrp,         // the planner decides the split: fixed_train_gpus is ignored
  kConfigured,  // fixed_train_gpus is honoured
};

/// GlobalResourcePlannerConfig, the fields the planner reads, with their defaults (§3.6, §7.2).
/// ReferencePlanner::Create raises values below a field's minimum to it, as the reference does.
struct ReferencePlannerConfig {
  /// GPUs to split (n_total_gpus, or train_gpus + rollout_gpus). Default: 8.
  int n_total_gpus = 8;
  /// Look every this many steps (at least 1). Default: 10.
  int plan_interval = 10;
  /// No decision before this step (at least 0). Default: 1.
  int warmup_steps = 1;
  /// History entries needed to plan (at least 1). Default: 8.
  int min_history_size = 8;
  /// A candidate must gain at least this fraction of the current T_global (at least 0).
  /// Default: 0.05.
  double min_gain_ratio = 0.05;
  /// Seconds a change costs, subtracted from the raw gain (at least 0). Default: 15.
  double reconfiguration_cost_s = 15.0;
  /// History entries and runtime metrics kept, newest last (at least 1). Default: 4096.
  int max_history_size = 4096;
  /// Rollout TP sizes the optimizer may use; empty = {1, 2, 4, 8}. Default: {1, 2, 4, 8}.
  std::vector<int> allowed_rollout_tp = {1, 2, 4, 8};
  /// See ReferenceSearchOptions. Defaults: empty, false, empty, empty, empty.
  std::vector<int> rollout_node_tp_pattern;
  bool require_heterogeneous_rollout_tp = false;
  std::vector<int> allowed_train_tp;
  std::vector<int> allowed_train_pp;
  std::vector<int> micro_batch_sizes;
  /// Honoured only with kConfigured. Default: 0.
  int fixed_train_gpus = 0;
  /// Default: kGrp.
  ReferenceInitialAllocation initial_allocation_strategy = ReferenceInitialAllocation::kGrp;
  /// See ReferenceSearchOptions (each at least 1). Defaults: 1, 1, 1.
  int allocation_granularity_gpus = 1;
  int min_train_gpus = 1;
  int min_rollout_gpus = 1;
  /// Whether the planner looks at all after startup (runtime_online_replanning); when false
  /// every call is interval_skip. Default: true.
  bool online_replanning = true;
  /// Steps after a change before the next look (runtime_replan_cooldown_steps; at least 0).
  /// Default: 1.
  int replan_cooldown_steps = 1;
  /// Trigger thresholds (runtime_*_threshold; at least 0). Defaults: 0.75, 0.85, 8, 1.25.
  double queue_pressure_threshold = 0.75;
  double active_rollout_pressure_threshold = 0.85;
  int rejected_rollout_delta_threshold = 8;
  double rollout_train_imbalance_threshold = 1.25;
  /// Emit the elastic hybrid signal (elastic_hybrid_planning_enabled). Default: false.
  bool elastic_hybrid_planning_enabled = false;
  /// GPUs of one lendable replica; 0 = train tp * pp * cp, and any other value must equal that
  /// (elastic_hybrid_replica_size_gpus). Default: 0.
  int elastic_hybrid_replica_size_gpus = 0;
  /// Rollout GPUs never lent (elastic_hybrid_min_rollout_gpus; at least 0). Default: 0.
  int elastic_hybrid_min_rollout_gpus = 0;
  /// Borrow all capacity when train / rollout time >= this, release all when <= the release
  /// ratio; release must not exceed borrow (at least 0 each). Defaults: 1.15, 0.90.
  double elastic_hybrid_borrow_train_rollout_ratio = 1.15;
  double elastic_hybrid_release_train_rollout_ratio = 0.90;
  /// Lend nothing while max(queue, active) pressure >= this (at least 0). Default: 0.80.
  double elastic_hybrid_max_rollout_pressure = 0.80;
  /// Steps a signal stays valid (at least 1). Default: 20.
  int elastic_hybrid_signal_ttl_steps = 20;
  /// Record every evaluated pair in the optimization. Default: false.
  bool verbose = false;
  /// GRP_FORCE_ROLLOUT_TP_LIST: when non-empty, replaces the candidate's rollout layout; must
  /// sum to n_total_gpus - force_train_gpus when that is set, else to the run's rollout_gpus
  /// (when non-zero). Default: empty.
  std::vector<int> force_rollout_tp_list;
  /// GRP_FORCE_TRAIN_GPUS: replaces the candidate's training with the current TP, PP, micro-batch
  /// and zero level, cp = the run's train_cp, dp = gpus / (tp * pp * cp), which must divide.
  /// Default: unset.
  std::optional<int> force_train_gpus;
  /// GRP_FORCE_RUNTIME_RECONFIGURE=1: change even to the same plan, whatever the gain.
  /// Default: false.
  bool force_runtime_reconfigure = false;
};

/// The search the planner runs for `run` (optimize()'s arguments in plan_if_needed):
/// fixed_train_gpus only with kConfigured, group size = n_samples, cp = train_cp.
ReferenceSearchOptions ReferenceSearchFor(const ReferencePlannerConfig& config,
                                          const ReferenceRunConfig& run);

/// _build_current_plan: the run's training layout (zero_level 2) and rollout instances, timed
/// over `requests` with TrainIterationTime (not checked for OOM) and EvaluateRollout.
/// max_concurrent_rollouts is the run's. REQUIRES: train tp, pp, dp, micro_batch_size >= 1.
ReferencePlan ReferenceCurrentPlan(const model::ReferenceCostModel& model, int n_total_gpus,
                                   const ReferenceRunConfig& run,
                                   std::span<const model::RequestInfo> requests);

/// The transition-cost check of plan_if_needed.
struct ReferenceTransition {
  double raw_gain_s = 0;
  double net_gain_s = 0;
  double gain_ratio = 0;
  bool same_plan = false;
  /// (plan differs or force_runtime_reconfigure) and (forced candidate or
  /// force_runtime_reconfigure or (net gain > 0 and gain ratio >= min_gain_ratio)).
  bool resource_change = false;
  /// resource_change or the elastic signal wants a change.
  bool should_reconfigure = false;
  /// elastic_hybrid_adjustment > forced_reconfigure > forced_runtime_reconfigure > reconfigure >
  /// same_plan > gain_below_threshold.
  ReferenceReason reason = ReferenceReason::kGainBelowThreshold;
};

ReferenceTransition EvaluateReferenceTransition(const ReferencePlannerConfig& config,
                                                const ReferencePlan& current,
                                                const ReferencePlan& candidate,
                                                bool forced_candidate, bool elastic_adjust);

/// _build_elastic_hybrid_signal: nullopt unless elastic_hybrid_planning_enabled. Capacity =
/// max(0, (run.rollout_gpus - min rollout GPUs) / replica size); current = active + max(joining,
/// pending) from the metrics' step stats; the train/rollout ratio from the metrics' times when
/// positive, else the candidate's model times (the current plan's when the candidate's are 0);
/// pressure = max(queue, active pressure) (0 without metrics); planned extra = max(0,
/// (candidate train GPUs - run.train_gpus) / replica size); then the first of the
/// ReferenceElasticReason rules. kInvalidArgument when elastic_hybrid_replica_size_gpus > 0 is not
/// the run's train tp * pp * cp.
Result<std::optional<ReferenceElasticSignal>> BuildReferenceElasticSignal(
    const ReferencePlannerConfig& config, int64_t step, const ReferenceRunConfig& run,
    const ReferencePlan& current, const ReferencePlan& candidate,
    const ReferenceRuntimeMetrics* metrics);

// ---- The planner (GlobalResourcePlanner) -------------------------------------------------------

/// The authors' periodic planner, minimising max(T_train, T_rollout) over the length history.
///
/// Assumptions: the history (prompt and generated lengths of recent requests) predicts the next
/// rollout; one training iteration and one rollout makespan over that history are comparable.
///
/// PlanIfNeeded(step, run, batch, metrics):
///  1. `batch` joins the history (ObserveBatch); without `metrics`, the latest observed ones.
///  2. step < warmup_steps -> "warmup".
///  3. Trigger(): online replanning off -> interval_skip; within the cooldown -> cooldown;
///     step % plan_interval == 0 -> interval; no metrics -> interval_skip; else the first of
///     queue pressure, active rollout pressure, rejected delta, rollout/train imbalance, or
///     interval_skip. cooldown and interval_skip decide nothing (current plan = the active plan).
///  4. Fewer than min_history_size entries -> "insufficient_history".
///  5. The current plan (ReferenceCurrentPlan) and the optimizer's best (OptimizeReference over
///     ReferenceSearchFor); none feasible -> "no_feasible_candidate". The candidate's
///     max_concurrent_rollouts = max(B, instances * B).
///  6. Forced overrides replace the candidate: force_rollout_tp_list (timed with EvaluateRollout;
///     training = the forced one if any, else the current plan's) and/or force_train_gpus (timed
///     with TrainIterationTime, not checked for OOM); their max_concurrent_rollouts is the run's.
///  7. EvaluateReferenceTransition with the elastic signal (BuildReferenceElasticSignal).
///  8. On a change the candidate becomes the active plan and last_replan_step = step; else the
///     current plan becomes the active plan if there is none.
/// After an evaluation (steps 5-8) triggered by the rejected delta, last_rejected_rollouts takes
/// the metrics' count, so the same rejections do not trigger again.
/// Tie-breaks: the optimizer's (first training candidate and first rollout layout win).
/// Knobs: ReferencePlannerConfig. Not thread-safe; a service, not copyable.
class ReferencePlanner {
 public:
  /// A planner over `model`, which must outlive it. kInvalidArgument when a TP, PP, micro-batch,
  /// pattern or forced TP entry is below 1, force_train_gpus is set below 1, or the elastic
  /// release ratio exceeds the borrow ratio (after raising values to their minimums).
  static Result<std::unique_ptr<ReferencePlanner>> Create(const model::ReferenceCostModel& model,
                                                          ReferencePlannerConfig config);

  ReferencePlanner(const ReferencePlanner&) = delete;
  ReferencePlanner& operator=(const ReferencePlanner&) = delete;

  /// The configuration in force (minimums applied).
  const ReferencePlannerConfig& config() const { return config_; }

  /// Appends the requests to the history, dropping those with both lengths <= 0 and raising each
  /// length to at least 1; only the newest max_history_size are kept. Returns how many joined.
  int ObserveBatch(std::span<const model::RequestInfo> batch);
  /// Replaces the history with `history` (same cleaning; the newest max_history_size kept).
  /// Returns the new history's size.
  int ReplaceHistory(std::span<const model::RequestInfo> history);
  /// Records ReferenceRuntimeMetricsFrom(...) (the newest max_history_size kept) and returns it.
  const ReferenceRuntimeMetrics& ObserveRuntime(int64_t step,
                                                const ReferenceDispatcherMetrics& dispatcher,
                                                const ReferenceStepStats& step_stats);
  /// _planning_trigger for `step` (never kWarmup: PlanIfNeeded checks the warmup first).
  ReferenceTrigger Trigger(int64_t step, const ReferenceRuntimeMetrics* metrics) const;

  /// See the class comment. kInvalidArgument, with nothing decided (the batch is still in the
  /// history), when the run's training layout has a size below 1 where the models divide by it,
  /// a forced override does not fit the GPUs, or the elastic replica size is wrong.
  Result<ReferenceDecision> PlanIfNeeded(int64_t step, const ReferenceRunConfig& run,
                                         std::span<const model::RequestInfo> batch = {},
                                         const ReferenceRuntimeMetrics* metrics = nullptr);

  const std::vector<model::RequestInfo>& history() const { return history_; }
  const std::optional<ReferencePlan>& active_plan() const { return active_plan_; }
  const std::optional<ReferenceDecision>& last_decision() const { return last_decision_; }
  /// The newest ObserveRuntime result; nullptr before the first.
  const ReferenceRuntimeMetrics* latest_runtime_metrics() const;
  /// Initially -1e9.
  int64_t last_replan_step() const { return last_replan_step_; }
  int64_t last_rejected_rollouts() const { return last_rejected_rollouts_; }

 private:
  ReferencePlanner(const model::ReferenceCostModel& model, ReferencePlannerConfig config);

  // The decision after a candidate was found: forced overrides, transition, state.
  Result<ReferenceDecision> Decide(int64_t step, const ReferenceRunConfig& run,
                                   ReferenceTrigger trigger, const ReferenceRuntimeMetrics* metrics,
                                   ReferencePlan current, ReferenceOptimization optimization);
  // The candidate the GRP_FORCE_* overrides make (force_rollout_tp_list, force_train_gpus), or
  // nullopt when none is set; an error when they do not fit the cluster.
  Result<std::optional<ReferencePlan>> ForcedCandidate(const ReferenceRunConfig& run,
                                                       const ReferencePlan& current) const;
  // Records `decision` as the last one and returns it (_remember).
  ReferenceDecision Remember(ReferenceDecision decision);
  void MarkRejectedTriggerObserved(ReferenceTrigger trigger,
                                   const ReferenceRuntimeMetrics* metrics);

  const model::ReferenceCostModel& model_;
  ReferencePlannerConfig config_;
  std::vector<model::RequestInfo> history_;
  std::vector<ReferenceRuntimeMetrics> runtime_metrics_;
  std::optional<ReferencePlan> active_plan_;
  std::optional<ReferenceDecision> last_decision_;
  int64_t last_replan_step_ = -1000000000;
  int64_t last_rejected_rollouts_ = 0;
};

}  // namespace libra::planner
