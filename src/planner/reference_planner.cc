#include "planner/reference_planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "common/check.h"

namespace libra::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// generate_rollout_configs keeps this many layouts.
constexpr size_t kMaxRolloutConfigs = 500;

// The reference's default TP and PP sizes: the powers of two up to 8 that fit `n_total_gpus`.
std::vector<int> DefaultParallelSizes(int n_total_gpus) {
  std::vector<int> sizes;
  for (int size : {1, 2, 4, 8}) {
    if (size <= n_total_gpus) sizes.push_back(size);
  }
  return sizes;
}

std::vector<int> OrDefault(std::span<const int> values, std::vector<int> fallback) {
  return values.empty() ? fallback : std::vector<int>(values.begin(), values.end());
}

// int(np.mean(prompt + gen)), 1024 without requests: the single length the training model sees.
int64_t MeanTotalLength(std::span<const model::RequestInfo> requests) {
  if (requests.empty()) return 1024;
  int64_t total = 0;
  for (const model::RequestInfo& r : requests) total += r.total();
  return static_cast<int64_t>(static_cast<double>(total) / static_cast<double>(requests.size()));
}

bool Heterogeneous(const std::vector<int>& tp_list) {
  return std::set<int>(tp_list.begin(), tp_list.end()).size() > 1;
}

std::string ListString(std::span<const int> values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << "]";
  return out.str();
}

// A configuration list must hold sizes >= 1: the reference divides by them (or recurses on 0).
Status CheckPositive(const char* field, std::span<const int> values) {
  for (int v : values) {
    if (v < 1) {
      return Status::InvalidArgument(std::string("reference planner: ") + field +
                                     " entries must be >= 1, got " + ListString(values));
    }
  }
  return Status();
}

// The cleaned history entry, or nullopt when both lengths are <= 0 (_extract_requests).
std::optional<model::RequestInfo> CleanRequest(const model::RequestInfo& r) {
  if (r.prompt <= 0 && r.gen <= 0) return std::nullopt;
  return model::RequestInfo{std::max<int64_t>(1, r.prompt), std::max<int64_t>(1, r.gen)};
}

template <typename T>
void KeepNewest(std::vector<T>& values, size_t limit) {
  if (values.size() > limit) {
    values.erase(values.begin(), values.end() - static_cast<std::ptrdiff_t>(limit));
  }
}

}  // namespace

// ---- Search space ------------------------------------------------------------------------------

std::vector<model::ReferenceTrainConfig> GenerateReferenceTrainingConfigs(
    int n_total_gpus, std::span<const int> allowed_tp, std::span<const int> allowed_pp,
    std::span<const int> micro_batch_sizes) {
  const std::vector<int> tps = OrDefault(allowed_tp, DefaultParallelSizes(n_total_gpus));
  const std::vector<int> pps = OrDefault(allowed_pp, DefaultParallelSizes(n_total_gpus));
  const std::vector<int> micros = OrDefault(micro_batch_sizes, {1, 2, 4, 8});
  std::vector<model::ReferenceTrainConfig> configs;
  for (int tp : tps) {
    for (int pp : pps) {
      LIBRA_CHECK(tp >= 1 && pp >= 1) << "tp " << tp << " pp " << pp;
      if (tp * pp > n_total_gpus) continue;
      // Reference behaviour: every dp, so configurations that leave GPUs for rollout exist.
      const int max_dp = n_total_gpus / (tp * pp);
      for (int dp = 1; dp <= max_dp; ++dp) {
        for (int b_micro : micros) {
          LIBRA_CHECK(b_micro >= 1) << "b_micro " << b_micro;
          model::ReferenceTrainConfig config;
          config.tp = tp;
          config.pp = pp;
          config.dp = dp;
          config.b_micro = b_micro;
          configs.push_back(config);
        }
      }
    }
  }
  return configs;
}

std::vector<model::ReferenceTrainConfig> ReferenceTrainingCandidates(
    const ReferenceSearchOptions& options) {
  std::vector<model::ReferenceTrainConfig> generated =
      GenerateReferenceTrainingConfigs(options.n_total_gpus, options.allowed_train_tp,
                                       options.allowed_train_pp, options.micro_batch_sizes);
  const int cp = std::max(1, options.train_cp_size);
  const int granularity = std::max(1, options.allocation_granularity_gpus);
  const int min_train = std::max(1, options.min_train_gpus);
  const int min_rollout = std::max(1, options.min_rollout_gpus);
  std::vector<model::ReferenceTrainConfig> candidates;
  for (model::ReferenceTrainConfig config : generated) {
    config.cp = cp;
    const int gpus = config.gpus();
    if (gpus < min_train || gpus % granularity != 0) continue;
    if (options.n_total_gpus - gpus < min_rollout) continue;
    if (options.fixed_train_gpus > 0 && gpus != options.fixed_train_gpus) continue;
    candidates.push_back(config);
  }
  return candidates;
}

std::vector<std::vector<int>> GenerateReferenceRolloutConfigs(int n_gpus,
                                                              std::span<const int> allowed_tp,
                                                              int max_instances) {
  std::vector<std::vector<int>> results;
  if (n_gpus <= 0) return results;
  std::vector<int> sizes;
  for (int tp : OrDefault(allowed_tp, {1, 2, 4, 8})) {
    LIBRA_CHECK(tp >= 1) << "rollout tp " << tp;
    if (tp <= n_gpus) sizes.push_back(tp);
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<int>());
  if (sizes.empty()) return results;

  // Depth first, parts non-increasing, larger parts first. The reference enumerates every
  // partition and keeps the first 500; stopping at 500 keeps the same ones.
  std::vector<int> current;
  std::function<void(int, int)> partition = [&](int remaining, int max_part) {
    if (results.size() >= kMaxRolloutConfigs) return;
    if (remaining == 0) {
      results.push_back(current);
      return;
    }
    if (static_cast<int>(current.size()) >= max_instances) return;
    for (int tp : sizes) {
      if (tp > remaining || tp > max_part) continue;
      current.push_back(tp);
      partition(remaining - tp, tp);
      current.pop_back();
    }
  };
  partition(n_gpus, sizes.front());
  return results;
}

std::vector<std::vector<int>> ReferenceRolloutCandidates(int rollout_gpus,
                                                         const ReferenceSearchOptions& options) {
  std::vector<std::vector<int>> candidates;
  const std::vector<int>& pattern = options.rollout_node_tp_pattern;
  if (!pattern.empty()) {
    const int pattern_gpus = std::accumulate(pattern.begin(), pattern.end(), 0);
    LIBRA_CHECK(pattern_gpus >= 1) << "rollout_node_tp_pattern " << ListString(pattern);
    // The deployment template is a complete layout: repeated, not enumerated.
    if (rollout_gpus % pattern_gpus == 0) {
      std::vector<int> repeated;
      for (int i = 0; i < rollout_gpus / pattern_gpus; ++i) {
        repeated.insert(repeated.end(), pattern.begin(), pattern.end());
      }
      candidates.push_back(std::move(repeated));
    }
  } else {
    candidates = GenerateReferenceRolloutConfigs(rollout_gpus, options.allowed_rollout_tp,
                                                 options.max_rollout_instances);
  }
  if (options.require_heterogeneous_rollout_tp) {
    std::erase_if(candidates, [](const std::vector<int>& c) { return !Heterogeneous(c); });
  }
  return candidates;
}

// ---- The optimizer -----------------------------------------------------------------------------

ReferenceOptimization OptimizeReference(const model::ReferenceCostModel& model,
                                        std::span<const model::RequestInfo> requests,
                                        const ReferenceSearchOptions& options) {
  const int64_t L = MeanTotalLength(requests);
  const int64_t B = options.global_batch;
  const int64_t group = std::max(1, options.dp_batch_group_size);
  ReferenceOptimization result;
  double best_global = kInf;
  for (const model::ReferenceTrainConfig& tc : ReferenceTrainingCandidates(options)) {
    ++result.explored;
    // A plan must be loadable: whole micro-batches and whole GRPO groups on every DP replica.
    if (B % std::max(1, tc.dp * tc.b_micro) != 0) continue;
    if ((B / tc.dp) % group != 0) continue;
    if (model.TrainOom(tc, L)) {
      ++result.pruned_oom;
      continue;
    }
    const double t_train = model.TrainIterationTime(tc, B, L).seconds;
    if (t_train >= best_global) {
      ++result.pruned_early_stop;
      continue;
    }
    const int rollout_gpus = options.n_total_gpus - tc.gpus();
    if (rollout_gpus <= 0) continue;

    double best_rollout = kInf;
    const std::vector<int>* best_layout = nullptr;
    const std::vector<std::vector<int>> layouts = ReferenceRolloutCandidates(rollout_gpus, options);
    for (const std::vector<int>& layout : layouts) {
      const double t_rollout = model.EvaluateRollout(layout, requests).makespan;
      if (t_rollout < best_rollout) {
        best_rollout = t_rollout;
        best_layout = &layout;
      }
    }
    if (best_layout == nullptr) continue;

    // Reference behaviour: one training iteration against one makespan over the whole history.
    const double t_global = std::max(t_train, best_rollout);
    if (options.verbose) {
      result.evaluated.push_back({tc, *best_layout, t_train, best_rollout, t_global});
    }
    if (t_global < best_global) {
      best_global = t_global;
      result.train = tc;
      result.rollout_tp_list = *best_layout;
      result.t_train = t_train;
      result.t_rollout = best_rollout;
    }
  }
  result.t_global = best_global;
  return result;
}

ReferenceRolloutChoice OptimizeReferenceRolloutOnly(const model::ReferenceCostModel& model,
                                                    int rollout_gpus,
                                                    std::span<const model::RequestInfo> requests,
                                                    const ReferenceSearchOptions& options) {
  std::vector<std::vector<int>> layouts = GenerateReferenceRolloutConfigs(
      rollout_gpus, options.allowed_rollout_tp, options.max_rollout_instances);
  if (options.require_heterogeneous_rollout_tp) {
    std::erase_if(layouts, [](const std::vector<int>& c) { return !Heterogeneous(c); });
  }
  ReferenceRolloutChoice choice;
  for (const std::vector<int>& layout : layouts) {
    const double makespan = model.EvaluateRollout(layout, requests).makespan;
    if (makespan < choice.makespan) {
      choice.makespan = makespan;
      choice.rollout_tp_list = layout;
    }
  }
  return choice;
}

// ---- Runtime metrics ---------------------------------------------------------------------------

double ReferenceRuntimeMetrics::rollout_train_ratio() const {
  return rollout_time_s / std::max(train_time_s, 1e-6);
}

ReferenceRuntimeMetrics ReferenceRuntimeMetricsFrom(int64_t step,
                                                    const ReferenceDispatcherMetrics& dispatcher,
                                                    const ReferenceStepStats& step_stats) {
  const int64_t queue_items =
      dispatcher.pending_inputs + dispatcher.runner_input_queue + dispatcher.runner_output_queue;
  const int64_t queue_cap =
      std::max<int64_t>(1, dispatcher.runner_max_queue_size + dispatcher.staleness_pending_limit);
  int64_t max_concurrent = std::max<int64_t>(1, step_stats.max_concurrent_rollouts);
  if (max_concurrent <= 1) {
    max_concurrent =
        std::max<int64_t>(1, dispatcher.staleness_running + dispatcher.staleness_capacity);
  }
  ReferenceRuntimeMetrics metrics;
  metrics.step = step;
  metrics.queue_pressure = static_cast<double>(queue_items) / static_cast<double>(queue_cap);
  metrics.active_rollout_pressure =
      static_cast<double>(dispatcher.staleness_running) / static_cast<double>(max_concurrent);
  metrics.accepted_rollouts = dispatcher.staleness_accepted;
  metrics.rejected_rollouts = dispatcher.staleness_rejected;
  metrics.rollout_time_s = step_stats.rollout_time_s;
  metrics.train_time_s = step_stats.train_time_s;
  metrics.step_time_s = step_stats.step_time_s;
  metrics.dispatcher = dispatcher;
  metrics.step_stats = step_stats;
  return metrics;
}

// ---- Plans, signals, decisions -----------------------------------------------------------------

int ReferencePlan::rollout_gpus() const {
  return std::accumulate(rollout_tp_list.begin(), rollout_tp_list.end(), 0);
}

std::string ReferencePlan::ToString() const {
  std::ostringstream out;
  out << "train tp" << train.tp << " pp" << train.pp << " cp" << train.cp << " dp" << train.dp
      << " mb" << train.b_micro << " (" << train_gpus() << " GPUs) + rollout "
      << ListString(rollout_tp_list) << " (" << rollout_gpus() << " GPUs): t_train " << t_train
      << " t_rollout " << t_rollout << " t_global " << t_global << " [" << NameOf(source) << "]";
  return out.str();
}

bool SameReferencePlan(const ReferencePlan& a, const ReferencePlan& b) {
  std::vector<int> a_tps = a.rollout_tp_list;
  std::vector<int> b_tps = b.rollout_tp_list;
  std::sort(a_tps.begin(), a_tps.end());
  std::sort(b_tps.begin(), b_tps.end());
  return a.train.tp == b.train.tp && a.train.pp == b.train.pp && a.train.dp == b.train.dp &&
         a.train.cp == b.train.cp && a.train.b_micro == b.train.b_micro && a_tps == b_tps;
}

ReferenceSearchOptions ReferenceSearchFor(const ReferencePlannerConfig& config,
                                          const ReferenceRunConfig& run) {
  ReferenceSearchOptions options;
  options.n_total_gpus = config.n_total_gpus;
  options.global_batch = run.batch_size;
  options.allowed_train_tp = config.allowed_train_tp;
  options.allowed_train_pp = config.allowed_train_pp;
  options.micro_batch_sizes = config.micro_batch_sizes;
  options.fixed_train_gpus =
      config.initial_allocation_strategy == ReferenceInitialAllocation::kConfigured
          ? config.fixed_train_gpus
          : 0;
  options.allocation_granularity_gpus = config.allocation_granularity_gpus;
  options.min_train_gpus = config.min_train_gpus;
  options.min_rollout_gpus = config.min_rollout_gpus;
  options.rollout_node_tp_pattern = config.rollout_node_tp_pattern;
  options.train_cp_size = std::max(1, run.train_cp);
  options.dp_batch_group_size = std::max(1, run.n_samples);
  options.allowed_rollout_tp = config.allowed_rollout_tp;
  options.require_heterogeneous_rollout_tp = config.require_heterogeneous_rollout_tp;
  options.verbose = config.verbose;
  return options;
}

ReferencePlan ReferenceCurrentPlan(const model::ReferenceCostModel& model, int n_total_gpus,
                                   const ReferenceRunConfig& run,
                                   std::span<const model::RequestInfo> requests) {
  ReferencePlan plan;
  plan.train.tp = run.train_tp;
  plan.train.pp = run.train_pp;
  plan.train.dp = run.train_dp;
  plan.train.cp = run.train_cp;
  plan.train.b_micro = run.micro_batch_size;
  plan.rollout_tp_list = run.rollout_tp_list;
  if (plan.rollout_tp_list.empty()) {
    const int tp = std::max(1, run.vllm_tp_size);
    plan.rollout_tp_list.assign(std::max(1, run.rollout_gpus / tp), tp);
  }
  // Reference behaviour: the plan in force is timed without a memory check.
  plan.t_train =
      model.TrainIterationTime(plan.train, run.batch_size, MeanTotalLength(requests)).seconds;
  plan.t_rollout = model.EvaluateRollout(plan.rollout_tp_list, requests).makespan;
  plan.t_global = std::max(plan.t_train, plan.t_rollout);
  plan.n_total_gpus = n_total_gpus;
  plan.max_concurrent_rollouts = run.max_concurrent_rollouts;
  plan.source = ReferencePlanSource::kCurrent;
  return plan;
}

ReferenceTransition EvaluateReferenceTransition(const ReferencePlannerConfig& config,
                                                const ReferencePlan& current,
                                                const ReferencePlan& candidate,
                                                bool forced_candidate, bool elastic_adjust) {
  ReferenceTransition t;
  t.raw_gain_s = current.t_global - candidate.t_global;
  // Reference behaviour: a flat cost in seconds against a one-iteration gain, not amortised. An
  // infinite current plan gives an infinite raw gain and a NaN ratio, which never passes.
  t.net_gain_s = t.raw_gain_s - config.reconfiguration_cost_s;
  t.gain_ratio = t.raw_gain_s / std::max(current.t_global, 1e-6);
  t.same_plan = SameReferencePlan(current, candidate);
  const bool force_runtime = config.force_runtime_reconfigure;
  t.resource_change = (!t.same_plan || force_runtime) &&
                      (forced_candidate || force_runtime ||
                       (t.net_gain_s > 0.0 && t.gain_ratio >= config.min_gain_ratio));
  t.should_reconfigure = t.resource_change || elastic_adjust;
  if (elastic_adjust) {
    t.reason = ReferenceReason::kElasticHybridAdjustment;
  } else if (t.should_reconfigure && forced_candidate) {
    t.reason = ReferenceReason::kForcedReconfigure;
  } else if (t.should_reconfigure && force_runtime) {
    t.reason = ReferenceReason::kForcedRuntimeReconfigure;
  } else if (t.should_reconfigure) {
    t.reason = ReferenceReason::kReconfigure;
  } else if (t.same_plan) {
    t.reason = ReferenceReason::kSamePlan;
  } else {
    t.reason = ReferenceReason::kGainBelowThreshold;
  }
  return t;
}

Result<std::optional<ReferenceElasticSignal>> BuildReferenceElasticSignal(
    const ReferencePlannerConfig& config, int64_t step, const ReferenceRunConfig& run,
    const ReferencePlan& current, const ReferencePlan& candidate,
    const ReferenceRuntimeMetrics* metrics) {
  if (!config.elastic_hybrid_planning_enabled) return std::optional<ReferenceElasticSignal>();

  int replica_size = config.elastic_hybrid_replica_size_gpus;
  const int topology_width =
      std::max(1, run.train_tp) * std::max(1, run.train_pp) * std::max(1, run.train_cp);
  if (replica_size > 0 && replica_size != topology_width) {
    return Status::InvalidArgument(
        "reference planner: elastic_hybrid_replica_size_gpus must equal one complete DP replica "
        "(" +
        std::to_string(topology_width) + "); got " + std::to_string(replica_size));
  }
  if (replica_size <= 0) replica_size = topology_width;
  const int min_rollout_gpus = std::max(0, config.elastic_hybrid_min_rollout_gpus);
  // Reference behaviour: lendable capacity comes from the configured rollout GPUs, whatever the
  // candidate plans.
  const int capacity = std::max(0, (run.rollout_gpus - min_rollout_gpus) / replica_size);

  ReferenceStepStats stats;
  if (metrics != nullptr) stats = metrics->step_stats;
  const int active = static_cast<int>(std::max<int64_t>(0, stats.active_hybrid_replicas));
  // A replica still joining already holds rollout capacity: it counts as allocated, so that a
  // release can cancel it.
  const int joining = static_cast<int>(std::max<int64_t>(
      {stats.joining_hybrid_replicas, stats.pending_hybrid_replica_joins, int64_t{0}}));
  const int current_replicas = active + joining;

  // Python's `candidate.t or current.t`: the current plan's time when the candidate's is 0.
  const double model_train = candidate.t_train != 0 ? candidate.t_train : current.t_train;
  const double model_rollout = candidate.t_rollout != 0 ? candidate.t_rollout : current.t_rollout;
  const double train_time =
      metrics != nullptr && metrics->train_time_s > 0 ? metrics->train_time_s : model_train;
  const double rollout_time =
      metrics != nullptr && metrics->rollout_time_s > 0 ? metrics->rollout_time_s : model_rollout;
  const double ratio = train_time / std::max(rollout_time, 1e-6);
  const double pressure = metrics != nullptr
                              ? std::max(metrics->queue_pressure, metrics->active_rollout_pressure)
                              : 0.0;
  const int planned_extra = std::max(0, (candidate.train_gpus() - run.train_gpus) / replica_size);

  ReferenceElasticSignal signal;
  int desired;
  if (capacity <= 0) {
    desired = 0;
    signal.reason = ReferenceElasticReason::kNoCompleteReplicaCapacity;
  } else if (pressure >= config.elastic_hybrid_max_rollout_pressure) {
    desired = 0;
    signal.reason = ReferenceElasticReason::kProtectRolloutCapacity;
  } else if (planned_extra > 0) {
    desired = std::min(capacity, planned_extra);
    signal.reason = ReferenceElasticReason::kCandidateRequestsMoreTrainingCapacity;
  } else if (ratio >= config.elastic_hybrid_borrow_train_rollout_ratio) {
    desired = capacity;
    signal.reason = ReferenceElasticReason::kTrainingBottleneck;
  } else if (ratio <= config.elastic_hybrid_release_train_rollout_ratio) {
    desired = 0;
    signal.reason = ReferenceElasticReason::kRolloutBottleneck;
  } else {
    desired = current_replicas;
    signal.reason = ReferenceElasticReason::kHysteresisHold;
  }
  signal.step = step;
  signal.desired_replicas = desired;
  signal.current_replicas = current_replicas;
  signal.capacity_replicas = capacity;
  signal.action = desired > current_replicas   ? ReferenceElasticAction::kJoin
                  : desired < current_replicas ? ReferenceElasticAction::kRelease
                                               : ReferenceElasticAction::kHold;
  signal.train_rollout_ratio = ratio;
  signal.rollout_pressure = pressure;
  signal.ttl_steps = config.elastic_hybrid_signal_ttl_steps;
  signal.active_replicas = active;
  signal.joining_replicas = joining;
  signal.replica_size_gpus = replica_size;
  return std::optional<ReferenceElasticSignal>(signal);
}

// ---- The planner -------------------------------------------------------------------------------

Result<std::unique_ptr<ReferencePlanner>> ReferencePlanner::Create(
    const model::ReferenceCostModel& model, ReferencePlannerConfig config) {
  // The reference's constructor raises each knob to its minimum.
  ReferencePlannerConfig& c = config;
  c.plan_interval = std::max(1, c.plan_interval);
  c.warmup_steps = std::max(0, c.warmup_steps);
  c.min_history_size = std::max(1, c.min_history_size);
  c.min_gain_ratio = std::max(0.0, c.min_gain_ratio);
  c.reconfiguration_cost_s = std::max(0.0, c.reconfiguration_cost_s);
  c.max_history_size = std::max(1, c.max_history_size);
  if (c.allowed_rollout_tp.empty()) c.allowed_rollout_tp = {1, 2, 4, 8};
  c.allocation_granularity_gpus = std::max(1, c.allocation_granularity_gpus);
  c.min_train_gpus = std::max(1, c.min_train_gpus);
  c.min_rollout_gpus = std::max(1, c.min_rollout_gpus);
  c.replan_cooldown_steps = std::max(0, c.replan_cooldown_steps);
  c.queue_pressure_threshold = std::max(0.0, c.queue_pressure_threshold);
  c.active_rollout_pressure_threshold = std::max(0.0, c.active_rollout_pressure_threshold);
  c.rejected_rollout_delta_threshold = std::max(0, c.rejected_rollout_delta_threshold);
  c.rollout_train_imbalance_threshold = std::max(0.0, c.rollout_train_imbalance_threshold);
  c.elastic_hybrid_borrow_train_rollout_ratio =
      std::max(0.0, c.elastic_hybrid_borrow_train_rollout_ratio);
  c.elastic_hybrid_release_train_rollout_ratio =
      std::max(0.0, c.elastic_hybrid_release_train_rollout_ratio);
  c.elastic_hybrid_max_rollout_pressure = std::max(0.0, c.elastic_hybrid_max_rollout_pressure);
  c.elastic_hybrid_signal_ttl_steps = std::max(1, c.elastic_hybrid_signal_ttl_steps);

  LIBRA_RETURN_IF_ERROR(CheckPositive("allowed_rollout_tp", c.allowed_rollout_tp));
  LIBRA_RETURN_IF_ERROR(CheckPositive("allowed_train_tp", c.allowed_train_tp));
  LIBRA_RETURN_IF_ERROR(CheckPositive("allowed_train_pp", c.allowed_train_pp));
  LIBRA_RETURN_IF_ERROR(CheckPositive("micro_batch_sizes", c.micro_batch_sizes));
  LIBRA_RETURN_IF_ERROR(CheckPositive("rollout_node_tp_pattern", c.rollout_node_tp_pattern));
  LIBRA_RETURN_IF_ERROR(CheckPositive("force_rollout_tp_list", c.force_rollout_tp_list));
  if (c.force_train_gpus.has_value() && *c.force_train_gpus <= 0) {
    return Status::InvalidArgument("reference planner: force_train_gpus must be positive, got " +
                                   std::to_string(*c.force_train_gpus));
  }
  if (c.elastic_hybrid_release_train_rollout_ratio > c.elastic_hybrid_borrow_train_rollout_ratio) {
    std::ostringstream what;
    what << "reference planner: elastic hybrid release ratio cannot exceed borrow ratio "
         << "(elastic_hybrid_release_train_rollout_ratio "
         << c.elastic_hybrid_release_train_rollout_ratio
         << " > elastic_hybrid_borrow_train_rollout_ratio "
         << c.elastic_hybrid_borrow_train_rollout_ratio << ")";
    return Status::InvalidArgument(what.str());
  }
  return std::unique_ptr<ReferencePlanner>(new ReferencePlanner(model, std::move(config)));
}

ReferencePlanner::ReferencePlanner(const model::ReferenceCostModel& model,
                                   ReferencePlannerConfig config)
    : model_(model), config_(std::move(config)) {}

int ReferencePlanner::ObserveBatch(std::span<const model::RequestInfo> batch) {
  int added = 0;
  for (const model::RequestInfo& r : batch) {
    if (std::optional<model::RequestInfo> clean = CleanRequest(r)) {
      history_.push_back(*clean);
      ++added;
    }
  }
  KeepNewest(history_, static_cast<size_t>(config_.max_history_size));
  return added;
}

int ReferencePlanner::ReplaceHistory(std::span<const model::RequestInfo> history) {
  history_.clear();
  ObserveBatch(history);
  return static_cast<int>(history_.size());
}

const ReferenceRuntimeMetrics& ReferencePlanner::ObserveRuntime(
    int64_t step, const ReferenceDispatcherMetrics& dispatcher,
    const ReferenceStepStats& step_stats) {
  runtime_metrics_.push_back(ReferenceRuntimeMetricsFrom(step, dispatcher, step_stats));
  KeepNewest(runtime_metrics_, static_cast<size_t>(config_.max_history_size));
  return runtime_metrics_.back();
}

const ReferenceRuntimeMetrics* ReferencePlanner::latest_runtime_metrics() const {
  return runtime_metrics_.empty() ? nullptr : &runtime_metrics_.back();
}

ReferenceTrigger ReferencePlanner::Trigger(int64_t step,
                                           const ReferenceRuntimeMetrics* metrics) const {
  // Startup planning is the preflight's job: with online replanning off, nothing fires, not even
  // the interval.
  if (!config_.online_replanning) return ReferenceTrigger::kIntervalSkip;
  if (step - last_replan_step_ < config_.replan_cooldown_steps) return ReferenceTrigger::kCooldown;
  if (step % config_.plan_interval == 0) return ReferenceTrigger::kInterval;
  if (metrics == nullptr) return ReferenceTrigger::kIntervalSkip;
  if (metrics->queue_pressure >= config_.queue_pressure_threshold) {
    return ReferenceTrigger::kQueuePressure;
  }
  if (metrics->active_rollout_pressure >= config_.active_rollout_pressure_threshold) {
    return ReferenceTrigger::kActiveRolloutPressure;
  }
  if (metrics->rejected_rollouts - last_rejected_rollouts_ >=
      config_.rejected_rollout_delta_threshold) {
    return ReferenceTrigger::kRejectedRolloutDelta;
  }
  if (metrics->train_time_s > 0 &&
      metrics->rollout_train_ratio() >= config_.rollout_train_imbalance_threshold) {
    return ReferenceTrigger::kRolloutTrainImbalance;
  }
  return ReferenceTrigger::kIntervalSkip;
}

ReferenceDecision ReferencePlanner::Remember(ReferenceDecision decision) {
  last_decision_ = decision;
  return decision;
}

void ReferencePlanner::MarkRejectedTriggerObserved(ReferenceTrigger trigger,
                                                   const ReferenceRuntimeMetrics* metrics) {
  if (trigger == ReferenceTrigger::kRejectedRolloutDelta && metrics != nullptr) {
    last_rejected_rollouts_ = metrics->rejected_rollouts;
  }
}

Result<ReferenceDecision> ReferencePlanner::PlanIfNeeded(int64_t step,
                                                         const ReferenceRunConfig& run,
                                                         std::span<const model::RequestInfo> batch,
                                                         const ReferenceRuntimeMetrics* metrics) {
  ObserveBatch(batch);
  if (metrics == nullptr) metrics = latest_runtime_metrics();

  ReferenceDecision decision;
  decision.step = step;
  if (metrics != nullptr) decision.runtime_metrics = *metrics;
  if (step < config_.warmup_steps) {
    decision.reason = ReferenceReason::kWarmup;
    decision.trigger = ReferenceTrigger::kWarmup;
    decision.num_requests = static_cast<int>(history_.size());
    return Remember(std::move(decision));
  }

  decision.trigger = Trigger(step, metrics);
  decision.num_requests = static_cast<int>(history_.size());
  if (decision.trigger == ReferenceTrigger::kCooldown ||
      decision.trigger == ReferenceTrigger::kIntervalSkip) {
    decision.reason = decision.trigger == ReferenceTrigger::kCooldown
                          ? ReferenceReason::kCooldown
                          : ReferenceReason::kIntervalSkip;
    decision.current_plan = active_plan_;
    return Remember(std::move(decision));
  }
  if (static_cast<int>(history_.size()) < config_.min_history_size) {
    decision.reason = ReferenceReason::kInsufficientHistory;
    decision.current_plan = active_plan_;
    return Remember(std::move(decision));
  }

  if (run.train_tp < 1 || run.train_pp < 1 || run.train_dp < 1 || run.micro_batch_size < 1) {
    return Status::InvalidArgument(
        "reference planner: the run's training layout needs tp, pp, dp and micro_batch_size >= 1, "
        "got tp " +
        std::to_string(run.train_tp) + " pp " + std::to_string(run.train_pp) + " dp " +
        std::to_string(run.train_dp) + " micro_batch_size " + std::to_string(run.micro_batch_size));
  }
  ReferencePlan current = ReferenceCurrentPlan(model_, config_.n_total_gpus, run, history_);
  ReferenceOptimization optimization =
      OptimizeReference(model_, history_, ReferenceSearchFor(config_, run));
  if (!optimization.found()) {
    MarkRejectedTriggerObserved(decision.trigger, metrics);
    decision.reason = ReferenceReason::kNoFeasibleCandidate;
    decision.current_plan = std::move(current);
    decision.optimization = std::move(optimization);
    return Remember(std::move(decision));
  }
  return Decide(step, run, decision.trigger, metrics, std::move(current), std::move(optimization));
}

Result<std::optional<ReferencePlan>> ReferencePlanner::ForcedCandidate(
    const ReferenceRunConfig& run, const ReferencePlan& current) const {
  const int64_t B = run.batch_size;
  // GRP_FORCE_ROLLOUT_TP_LIST: must fill the rollout GPUs (those GRP_FORCE_TRAIN_GPUS leaves,
  // when it is set).
  const std::vector<int>& forced_tps = config_.force_rollout_tp_list;
  const int forced_tps_gpus = std::accumulate(forced_tps.begin(), forced_tps.end(), 0);
  if (!forced_tps.empty()) {
    int rollout_gpus = run.rollout_gpus != 0 ? run.rollout_gpus : forced_tps_gpus;
    if (config_.force_train_gpus.has_value()) {
      rollout_gpus = config_.n_total_gpus - *config_.force_train_gpus;
    }
    if (forced_tps_gpus != rollout_gpus) {
      return Status::InvalidArgument(
          "reference planner: force_rollout_tp_list must sum to rollout_gpus=" +
          std::to_string(rollout_gpus) + ", got " + ListString(forced_tps));
    }
  }
  // GRP_FORCE_TRAIN_GPUS: the current TP, PP, micro-batch and zero level, dp from the GPUs.
  std::optional<model::ReferenceTrainConfig> forced_train;
  if (config_.force_train_gpus.has_value()) {
    const int train_gpus = *config_.force_train_gpus;
    const int rollout_gpus = !forced_tps.empty() ? forced_tps_gpus : run.rollout_gpus;
    if (train_gpus + rollout_gpus > config_.n_total_gpus) {
      return Status::InvalidArgument(
          "reference planner: force_train_gpus plus rollout_gpus must fit n_total_gpus=" +
          std::to_string(config_.n_total_gpus) + ", got train=" + std::to_string(train_gpus) +
          " rollout=" + std::to_string(rollout_gpus));
    }
    model::ReferenceTrainConfig train = current.train;
    train.cp = std::max(1, run.train_cp);
    const int model_parallel = std::max(1, train.tp * train.pp * train.cp);
    if (train_gpus % model_parallel != 0) {
      return Status::InvalidArgument(
          "reference planner: force_train_gpus must be divisible by train TP*PP*CP=" +
          std::to_string(model_parallel) + ", got " + std::to_string(train_gpus));
    }
    train.dp = train_gpus / model_parallel;
    forced_train = train;
  }
  if (forced_tps.empty() && !forced_train.has_value()) return std::optional<ReferencePlan>();
  // Reference behaviour: forced training is timed without a memory check.
  const int64_t L = MeanTotalLength(history_);
  ReferencePlan forced;
  forced.train = forced_train.value_or(current.train);
  forced.t_train = forced_train.has_value() ? model_.TrainIterationTime(*forced_train, B, L).seconds
                                            : current.t_train;
  if (!forced_tps.empty()) {
    forced.rollout_tp_list = forced_tps;
    forced.t_rollout = model_.EvaluateRollout(forced_tps, history_).makespan;
    forced.source = forced_train.has_value() ? ReferencePlanSource::kForcedTrainAndRollout
                                             : ReferencePlanSource::kForcedRolloutTp;
  } else {
    forced.rollout_tp_list = current.rollout_tp_list;
    forced.t_rollout = current.t_rollout;
    forced.source = ReferencePlanSource::kForcedTrainGpus;
  }
  forced.t_global = std::max(forced.t_train, forced.t_rollout);
  forced.n_total_gpus = config_.n_total_gpus;
  forced.max_concurrent_rollouts = run.max_concurrent_rollouts;
  return std::optional<ReferencePlan>(std::move(forced));
}

Result<ReferenceDecision> ReferencePlanner::Decide(int64_t step, const ReferenceRunConfig& run,
                                                   ReferenceTrigger trigger,
                                                   const ReferenceRuntimeMetrics* metrics,
                                                   ReferencePlan current,
                                                   ReferenceOptimization optimization) {
  ReferencePlan candidate;
  candidate.train = *optimization.train;
  candidate.rollout_tp_list = optimization.rollout_tp_list;
  candidate.t_train = optimization.t_train;
  candidate.t_rollout = optimization.t_rollout;
  candidate.t_global = optimization.t_global;
  candidate.n_total_gpus = config_.n_total_gpus;
  candidate.max_concurrent_rollouts =
      std::max(run.batch_size, candidate.n_instances() * run.batch_size);
  candidate.source = ReferencePlanSource::kOptimizer;
  LIBRA_ASSIGN_OR_RETURN(std::optional<ReferencePlan> forced, ForcedCandidate(run, current));
  const bool forced_candidate = forced.has_value();
  if (forced_candidate) candidate = std::move(*forced);

  LIBRA_ASSIGN_OR_RETURN(
      std::optional<ReferenceElasticSignal> signal,
      BuildReferenceElasticSignal(config_, step, run, current, candidate, metrics));
  const bool elastic_adjust = signal.has_value() && signal->should_adjust();
  const ReferenceTransition transition =
      EvaluateReferenceTransition(config_, current, candidate, forced_candidate, elastic_adjust);
  candidate.expected_gain_s = transition.net_gain_s;
  candidate.expected_gain_ratio = transition.gain_ratio;
  candidate.reconfiguration_cost_s = config_.reconfiguration_cost_s;

  ReferenceDecision decision;
  decision.step = step;
  decision.should_reconfigure = transition.should_reconfigure;
  decision.reason = transition.reason;
  decision.trigger = trigger;
  decision.num_requests = static_cast<int>(history_.size());
  if (metrics != nullptr) decision.runtime_metrics = *metrics;
  decision.current_plan = current;
  decision.candidate_plan = candidate;
  decision.optimization = std::move(optimization);
  decision.raw_gain_s = transition.raw_gain_s;
  decision.net_gain_s = transition.net_gain_s;
  decision.gain_ratio = transition.gain_ratio;
  decision.elastic_signal = signal;

  if (transition.should_reconfigure) {
    active_plan_ = std::move(candidate);
    last_replan_step_ = step;
  } else if (!active_plan_.has_value()) {
    active_plan_ = std::move(current);
  }
  MarkRejectedTriggerObserved(trigger, metrics);
  return Remember(std::move(decision));
}

}  // namespace libra::planner
