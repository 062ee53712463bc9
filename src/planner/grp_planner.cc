#include "planner/grp_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/strings.h"
#include "planner/elastic_pool.h"

namespace libra::planner {
namespace {

/// Candidates a plan lists beside its choice (`libra plan`'s table).
constexpr size_t kShownCandidates = 5;
/// What a plan's reason adds with stream batches (StreamPredictions).
constexpr const char* kStreamNote =
    "; stream batches predicted by replaying whole groups, layouts ranked as for ordered batches";

std::vector<int> RolloutTps(const backend::Layout& layout) {
  std::vector<int> tps;
  for (const backend::InstanceSpec& i : layout.instances) tps.push_back(i.tp);
  return tps;
}

/// The mean final context of `samples` (a span or the history's deque: not copied).
template <typename Samples>
double MeanTotal(const Samples& samples) {
  if (samples.empty()) return 0;
  double total = 0;
  for (const RequestSample& s : samples) total += static_cast<double>(s.total());
  return total / static_cast<double>(samples.size());
}

PlanCandidate Describe(const CandidatePlan& c, int gpus_per_node) {
  PlanCandidate out;
  auto layout = LayoutOf(c, gpus_per_node);
  out.layout = layout.ok() ? layout->ToString() : "?";
  out.rollout_s = c.rollout_s;
  out.train_s = c.train_s;
  out.sync_s = c.sync_s;
  out.step_s = c.step_s;
  return out;
}

Result<std::unique_ptr<Planner>> CreateWith(const recipe::OptionTable& table, bool online,
                                            std::string_view name) {
  recipe::OptionReader r(table);
  GrpOptions o;
  o.online = online;
  o.mode = r.String("search", "tree-dp", {"tree-dp", "exhaustive"}) == "exhaustive"
               ? SearchMode::kExhaustive
               : SearchMode::kTreeDp;
  if (online) {
    o.interval = static_cast<int>(r.Int("interval", o.interval, 0, 1 << 20));
    o.warmup = static_cast<int>(r.Int("warmup", o.warmup, 0, 1 << 20));
    o.cooldown = static_cast<int>(r.Int("cooldown", o.cooldown, 0, 1 << 20));
    o.imbalance = r.Double("imbalance", o.imbalance, 1);
    o.queue_pressure = r.Double("queue_pressure", o.queue_pressure, 0);
    o.rejected_delta = static_cast<int>(r.Int("rejected_delta", o.rejected_delta, 1, 1 << 30));
    o.drift = r.Double("drift", o.drift, 0);
    o.min_gain = r.Double("min_gain", o.min_gain, 0, 1);
    o.max_replica_moves =
        static_cast<int>(r.Int("max_replica_moves", o.max_replica_moves, 0, 1 << 10));
    o.reshard = r.Bool("reshard", o.reshard);
    o.calibrate = r.Bool("calibrate", o.calibrate);
    o.history = static_cast<int>(r.Int("history", o.history, 1, 1 << 20));
  }
  o.rollout_tps = ReadTpList(r, "rollout_tps", o.rollout_tps, /*allow_empty=*/false);
  o.rollout_pattern = ReadTpList(r, "rollout_pattern", {}, /*allow_empty=*/true);
  o.homogeneous = r.Bool("homogeneous", o.homogeneous);
  o.time_shared = r.Bool("time_shared", o.time_shared);
  o.hybrid = r.Bool("hybrid", o.hybrid);
  if (o.homogeneous && !o.rollout_pattern.empty()) {
    r.Error("homogeneous", "cannot be combined with rollout_pattern (the pattern fixes the sizes)");
  }
  o.min_train_gpus = static_cast<int>(r.Int("min_train_gpus", o.min_train_gpus, 1, 1 << 20));
  o.max_train_gpus = static_cast<int>(r.Int("max_train_gpus", o.max_train_gpus, 0, 1 << 20));
  o.min_rollout_gpus = static_cast<int>(r.Int("min_rollout_gpus", o.min_rollout_gpus, 1, 1 << 20));
  o.granularity = static_cast<int>(r.Int("granularity", o.granularity, 1, 1 << 20));
  if (r.Has("train_gpus")) o.train_gpus = static_cast<int>(r.Int("train_gpus", 1, 1, 1 << 20));
  o.max_requests = static_cast<int>(r.Int("max_requests", o.max_requests, 1, kMaxSampleRequests));
  LIBRA_RETURN_IF_ERROR(r.Finish());
  return std::unique_ptr<Planner>(std::make_unique<GrpPlanner>(std::move(o), name));
}

}  // namespace

Result<backend::Layout> LayoutOf(const CandidatePlan& plan, int gpus_per_node) {
  LIBRA_ASSIGN_OR_RETURN(backend::Layout layout,
                         SplitLayout(plan.train, plan.rollout_tps, gpus_per_node));
  layout.colocated = plan.colocated;
  return layout;
}

Result<std::unique_ptr<Planner>> GrpPlanner::Create(const recipe::OptionTable& options) {
  return CreateWith(options, true, kGrpName);
}

Result<std::unique_ptr<Planner>> GrpPlanner::CreateNoEhp(const recipe::OptionTable& options) {
  return CreateWith(options, false, kNoEhpName);
}

GrpPlanner::GrpPlanner(GrpOptions options, std::string_view name)
    : options_(std::move(options)), name_(name) {}

SearchSpace GrpPlanner::Space(bool online, const model::TrainLayout* current) const {
  SearchSpace space;
  space.nodes = context_.nodes;
  space.gpus_per_node = context_.gpus_per_node;
  space.rollout_tps = homogeneous_tp_ ? std::vector<int>{*homogeneous_tp_} : options_.rollout_tps;
  space.node_pattern = options_.rollout_pattern;
  space.min_train_gpus = options_.min_train_gpus;
  space.max_train_gpus = options_.max_train_gpus;
  space.min_rollout_gpus = options_.min_rollout_gpus;
  space.granularity = options_.granularity;
  space.fixed_train_gpus = options_.train_gpus;
  space.max_num_seqs = context_.max_num_seqs;
  space.max_requests = options_.max_requests;
  space.time_shared = options_.time_shared && !online;
  space.hybrid = options_.hybrid && !online;
  if (online && current != nullptr && !options_.reshard) {
    // Moves in whole replicas of the training layout in force.
    space.train_tps = {current->tp};
    space.train_pps = {current->pp};
    space.micro_batches = {current->micro_batch};
    space.granularity = std::lcm(space.granularity, current->tp * current->pp);
  }
  return space;
}

PipelineShape GrpPlanner::Shape() const {
  PipelineShape shape;
  shape.batch_trajectories = std::max(1, context_.batch_trajectories);
  shape.staleness = context_.staleness;
  shape.sync_path = context_.sync_path;
  shape.sync_interval = std::max(1, context_.sync_interval);
  shape.max_sequence_tokens = context_.max_sequence_tokens;
  shape.kv_policy = context_.kv_policy;
  shape.returns = context_.returns;
  shape.tool_latencies = tool_latencies_.Sorted();  // sorted once per change
  shape.group_size = context_.group_size;
  if (options_.calibrate) {
    shape.rollout_scale = rollout_cal_.factor();
    shape.train_scale = train_cal_.factor();
  }
  return shape;
}

std::vector<RequestSample> GrpPlanner::History() const {
  return std::vector<RequestSample>(history_.begin(), history_.end());
}

std::optional<CandidatePlan> GrpPlanner::Predict(const backend::Layout& layout,
                                                 std::span<const RequestSample> history,
                                                 std::optional<bool> lend_trainer, bool credit_pace,
                                                 bool stream) const {
  PipelineShape shape = Shape();
  shape.credit_pace = credit_pace;
  if (stream) shape.stream_groups = stream_groups_;
  auto plan = EvaluatePlan(*context_.cost, Space(false, nullptr), shape, history, layout.train,
                           RolloutTps(layout), layout.colocated,
                           lend_trainer.value_or(lend_trainer_) && !layout.colocated);
  if (!plan.ok()) return std::nullopt;
  return *plan;
}

Result<SearchResult> GrpPlanner::SearchNow() const {
  return Search(*context_.cost, Space(false, nullptr), Shape(), History(), options_.mode);
}

std::optional<CandidatePlan> GrpPlanner::Predict(const backend::Layout& layout,
                                                 std::optional<bool> lend_trainer) const {
  return Predict(layout, History(), lend_trainer);
}

void GrpPlanner::StreamPredictions(std::span<const RequestSample> history,
                                   SearchResult& result) const {
  auto again = [&](CandidatePlan& plan) {
    const Result<backend::Layout> layout = LayoutOf(plan, context_.gpus_per_node);
    if (!layout.ok()) return;
    if (std::optional<CandidatePlan> predicted =
            Predict(*layout, history, plan.lend_trainer, /*credit_pace=*/true, /*stream=*/true)) {
      plan = std::move(*predicted);
    }
  };
  if (result.best) again(*result.best);
  for (size_t i = 0; i < result.top.size() && i < kShownCandidates; ++i) again(result.top[i]);
}

double GrpPlanner::TransitionSeconds(const backend::Layout& from, const backend::Layout& to,
                                     std::span<const RequestSample> history) const {
  const model::CostModel& cost = *context_.cost;
  const std::vector<bool> kept = KeptInstances(from, to);
  double switch_s = 0;
  int leaving = 0;
  for (size_t i = 0; i < from.instances.size(); ++i) {
    if (kept[i]) continue;
    ++leaving;
    switch_s = std::max(switch_s, cost.RoleSwitchTime({model::SwitchDirection::kRolloutToTrain,
                                                       from.instances[i].tp, to.train}));
  }
  for (size_t i = 0; i < to.instances.size(); ++i) {
    if (i < kept.size() && kept[i]) continue;
    switch_s = std::max(switch_s, cost.RoleSwitchTime({model::SwitchDirection::kTrainToRollout,
                                                       to.instances[i].tp, from.train}));
  }
  // The trajectories the leaving instances held are re-prefilled elsewhere, half-way through on
  // average, spread over the instances that stay.
  double reprefill_s = 0;
  if (leaving > 0 && !from.instances.empty()) {
    const double per_instance = static_cast<double>(context_.batch_trajectories) *
                                (context_.staleness > 0 ? 2.0 : 1.0) /
                                static_cast<double>(from.instances.size());
    const auto context = static_cast<int64_t>(MeanTotal(history) / 2);
    const int staying = std::max<int>(1, static_cast<int>(to.instances.size()) - leaving);
    reprefill_s =
        per_instance * leaving * cost.PrefillTime(1, std::max<int64_t>(1, context), 0) / staying;
  }
  return switch_s + reprefill_s;
}

std::vector<backend::Layout> GrpPlanner::ElasticMoves(const backend::Layout& current) const {
  std::vector<backend::Layout> moves;
  const int replica = current.train.tp * current.train.pp;
  const int gpn = context_.gpus_per_node;
  for (int k = 1; k <= options_.max_replica_moves; ++k) {
    const int gpus = k * replica;
    // Rollout -> training: the last instances leave; GPUs they free beyond the replicas come
    // back as TP1 instances.
    {
      backend::Layout next = current;
      int freed = 0;
      while (freed < gpus && !next.instances.empty()) {
        freed += next.instances.back().tp;
        next.instances.pop_back();
      }
      const int rollout = current.rollout_gpus() - gpus;
      // A homogeneous layout cannot take back the spare GPUs as TP1 instances.
      const bool uniform = !homogeneous_tp_ || freed == gpus;
      if (freed >= gpus && uniform && rollout >= options_.min_rollout_gpus && rollout > 0) {
        int gpu = next.rollout_gpus();
        for (int extra = freed - gpus; extra > 0; --extra, ++gpu) {
          backend::InstanceSpec spec;
          spec.id = InstanceId(static_cast<int64_t>(next.instances.size()));
          spec.tp = 1;
          spec.node = gpu / gpn;
          spec.first_gpu = gpu;
          next.instances.push_back(spec);
        }
        next.train_gpus += gpus;
        next.train.dp += k;
        if (!next.instances.empty()) moves.push_back(std::move(next));
      }
    }
    // Training -> rollout: new instances after the current ones, the largest TP that packs.
    if (current.train.dp - k >= 1 && current.train_gpus - gpus >= options_.min_train_gpus) {
      std::vector<int> tps =
          homogeneous_tp_ ? std::vector<int>{*homogeneous_tp_} : options_.rollout_tps;
      std::sort(tps.begin(), tps.end(), std::greater<>());
      for (int tp : tps) {
        auto added = PackInstances(gpn, current.rollout_gpus(), gpus, {tp});
        if (!added.ok()) continue;
        backend::Layout next = current;
        for (backend::InstanceSpec spec : *added) {
          spec.id = InstanceId(static_cast<int64_t>(next.instances.size()));
          next.instances.push_back(spec);
        }
        next.train_gpus -= gpus;
        next.train.dp -= k;
        moves.push_back(std::move(next));
        break;
      }
    }
  }
  return moves;
}

Result<Plan> GrpPlanner::Initial(const PlanContext& context) {
  context_ = context;
  if (context.cost == nullptr) {
    return Status::Unschedulable(std::string(name_) +
                                 " plans with a cost model, and there is none");
  }
  history_.clear();
  tool_latencies_.Clear();
  tool_latencies_.Add(context.tool_latencies_s);
  stream_groups_ = context.stream_batches && !context.group_profile.empty()
                       ? std::make_shared<const std::vector<TrajectorySize>>(context.group_profile)
                       : nullptr;
  for (const TrajectorySize& t : context.history) {
    history_.push_back(t);
    if (static_cast<int>(history_.size()) > options_.history) history_.pop_front();
  }
  if (history_.empty()) {
    return Status::Unschedulable(std::string(name_) +
                                 " needs a length history (the startup profile) to plan");
  }
  const std::vector<RequestSample> history = History();
  homogeneous_tp_.reset();
  // Homogeneous: one search per TP size, their budgets' bests ranked together as one search
  // ranks its own.
  std::vector<std::optional<int>> sizes = {std::nullopt};
  if (options_.homogeneous) sizes.assign(options_.rollout_tps.begin(), options_.rollout_tps.end());
  SearchResult result;
  for (const std::optional<int>& tp : sizes) {
    homogeneous_tp_ = tp;
    LIBRA_ASSIGN_OR_RETURN(SearchResult one, Search(*context.cost, Space(false, nullptr), Shape(),
                                                    history, options_.mode));
    if (sizes.size() == 1) {
      result = std::move(one);
      break;
    }
    SearchTrace& trace = result.trace;
    trace.budgets = one.trace.budgets;
    trace.train_nodes += one.trace.train_nodes;
    trace.dp_cells += one.trace.dp_cells;
    trace.segment_evaluations += one.trace.segment_evaluations;
    trace.segment_estimates += one.trace.segment_estimates;
    for (const auto& [why, count] : one.trace.pruned) trace.pruned[why] += count;
    trace.lines.push_back(StrFormat("rollout TP %d only:", *tp));
    trace.lines.insert(trace.lines.end(), one.trace.lines.begin(), one.trace.lines.end());
    result.top.insert(result.top.end(), one.top.begin(), one.top.end());
  }
  if (sizes.size() > 1) {
    RankPlans(result.top);
    if (!result.top.empty()) result.best = result.top.front();
  }
  homogeneous_tp_ = options_.homogeneous && result.best
                        ? std::optional<int>(result.best->rollout_tps.front())
                        : std::nullopt;
  if (!result.best) {
    return Status::Unschedulable(StrFormat("%s found no feasible plan for %d GPUs (%s)",
                                           std::string(name_).c_str(), context.total_gpus(),
                                           StrJoin(result.trace.lines, "; ").c_str()));
  }
  if (stream_groups_) StreamPredictions(history, result);
  Plan plan;
  LIBRA_ASSIGN_OR_RETURN(plan.layout, LayoutOf(*result.best, context.gpus_per_node));
  lend_trainer_ = result.best->lend_trainer;
  plan.predicted_step_s = result.best->step_s;
  plan.predicted = PhaseTimes{result.best->rollout_s, result.best->train_s, result.best->sync_s,
                              result.best->step_s};
  plan.reason = StrFormat(
      "%s search over %d training budgets: rollout %.1f s, train %.1f s, sync %.1f s per step%s",
      options_.mode == SearchMode::kTreeDp ? "Algorithm 1" : "exhaustive", result.trace.budgets,
      result.best->rollout_s, result.best->train_s, result.best->sync_s,
      stream_groups_ ? kStreamNote : "");
  for (size_t i = 0; i < result.top.size() && i < kShownCandidates; ++i) {
    plan.candidates.push_back(Describe(result.top[i], context.gpus_per_node));
  }
  plan.explain = result.trace.lines;
  std::vector<std::string> pruned;
  for (const auto& [why, count] : result.trace.pruned)
    pruned.push_back(StrFormat("%s %d", why.c_str(), count));
  plan.explain.push_back("pruned: " +
                         (pruned.empty() ? std::string("nothing") : StrJoin(pruned, ", ")));
  return plan;
}

std::optional<backend::Layout> GrpPlanner::IdleTrainerLayout(const backend::Layout& current) const {
  if (!lend_trainer_) return std::nullopt;
  int tp = 1;
  for (const backend::InstanceSpec& i : current.instances) tp = std::max(tp, i.tp);
  return LendTrainerGpus(current, context_.gpus_per_node, tp);
}

bool GrpPlanner::Filled(const StepObservation& o) const {
  return recent_.size() >= 3 && o.step - 2 > context_.staleness;
}

double GrpPlanner::MeanRecent(double RecentStep::*field) const {
  double mean = 0;
  for (const RecentStep& r : recent_) mean += r.*field / static_cast<double>(recent_.size());
  return mean;
}

bool GrpPlanner::Imbalanced() const {
  // Asynchronous: over the last three steps the trainer waited for rollout for more than
  // (imbalance - 1) x its own work (one slow step is noise, not an imbalance).
  if (context_.staleness <= 0 || recent_.size() < 3) return false;
  double wait = 0;
  double work = 0;
  for (const RecentStep& r : recent_) {
    wait += r.wait_s;
    work += r.train_s + r.sync_s;
  }
  return wait > (options_.imbalance - 1) * work;
}

std::optional<std::string> GrpPlanner::Trigger(const StepObservation& o, bool imbalanced) {
  if (o.transition_in_flight) return std::nullopt;
  if (o.step < options_.warmup) return std::nullopt;
  if (o.step - last_change_step_ < options_.cooldown) return std::nullopt;
  if (options_.interval > 0 && (o.step + 1) % options_.interval == 0) return "interval";
  // An imbalance a decision has answered asks again only once it has cleared: asking at every
  // step it lasted re-ran the search on nearly the same inputs (76 times in 100 steps at 8,192
  // GPUs, never moving).
  if (imbalanced && !imbalance_answered_) return "imbalance";
  if (o.in_flight > 0 &&
      static_cast<double>(o.waiting_turns) / o.in_flight >= options_.queue_pressure) {
    return "queue_pressure";
  }
  // Rejections ask once per layout: stream batches reject groups at a steady rate (13-17% of
  // r2e-gym's and dapo-math's), and asking at every step re-ran the search 131 times in 200
  // steps of the drift recipe, never moving (the interval and drift triggers still look).
  if (!rejections_answered_ && o.rejected - last_rejected_ >= options_.rejected_delta) {
    last_rejected_ = o.rejected;
    return "rejected";
  }
  return std::nullopt;
}

std::optional<PlanDecision> GrpPlanner::OnStep(const StepObservation& o) {
  if (!options_.online || context_.cost == nullptr) return std::nullopt;
  if (o.step >= options_.warmup) recent_.push_back({o.step_s, o.wait_s, o.train_s, o.sync_s});
  while (recent_.size() > 3) recent_.pop_front();
  const std::span<const RequestSample> step = o.trajectories;
  Calibrate(o, step);
  const bool drifted = ObserveLengths(o);
  // Asynchronous: no look before the last three steps all came after the pipeline filled, so
  // that the layout in force has a steady measurement to be judged by (Decide).
  if (context_.staleness > 0 && !Filled(o)) return std::nullopt;
  const bool imbalanced = Imbalanced();
  if (!imbalanced) imbalance_answered_ = false;
  std::optional<std::string> trigger = Trigger(o, imbalanced);
  if (!trigger && drifted && !o.transition_in_flight &&
      o.step - last_change_step_ >= options_.cooldown) {
    trigger = "drift";
  }
  if (!trigger) return std::nullopt;
  PlanDecision decision = Decide(o, *trigger);
  // Keeping the layout under an imbalance answers it; a move asks afresh of the new layout.
  imbalance_answered_ = imbalanced && !decision.layout;
  if (decision.layout) {
    rejections_answered_ = false;
  } else if (decision.trigger == "rejected") {
    rejections_answered_ = true;
  }
  return decision;
}

void GrpPlanner::Calibrate(const StepObservation& o, std::span<const RequestSample> step) {
  // Against the layout in force, on this step's own trajectories; not during the warm-up (the
  // first step also fills the pipeline) nor while a transition is under way.
  if (!options_.calibrate || step.empty() || o.step < options_.warmup || o.transition_in_flight) {
    return;
  }
  PipelineShape raw = Shape();
  raw.rollout_scale = 1;
  raw.train_scale = 1;
  auto predicted =
      EvaluatePlan(*context_.cost, Space(false, nullptr), raw, step, o.layout.train,
                   RolloutTps(o.layout), o.layout.colocated, lend_trainer_ && !o.layout.colocated);
  if (!predicted.ok()) return;
  train_cal_.Observe(predicted->train_s, o.train_s);
  // Rollout alone is measured only when nothing overlaps it (synchronous), or when the trainer
  // waited for it over the last steps (rollout-bound); asynchronous step times alternate as
  // batches run ahead by up to `staleness` steps, so their mean is compared, and only once the
  // pipeline has filled: the first staleness + 1 batches all start at once and end close
  // together, so their steps say nothing about the steady state the model predicts.
  if (context_.staleness == 0) {
    rollout_cal_.Observe(predicted->rollout_s, o.rollout_s);
  } else if (Filled(o)) {
    const double mean_step = MeanRecent(&RecentStep::step_s);
    const double mean_wait = MeanRecent(&RecentStep::wait_s);
    // Rollout-bound, the step is the rollout side's period with the trainer's step in its
    // batches' cycle: compared with the model's step, not with its period of rollout alone
    // (which leaves that cycle out and would scale the rollout up for it).
    if (mean_wait > 0.01 * mean_step) rollout_cal_.Observe(predicted->step_s, mean_step);
  }
}

bool GrpPlanner::ObserveLengths(const StepObservation& o) {
  // What the rollout side generated, not only what was trained: a stream batch's rejected groups
  // are its longest, and a history of the trained ones alone saw a lighter workload than the
  // instances served (r2e-gym: 4,303 generated tokens a trained trajectory against the
  // workload's 5,123), so moves gave training GPUs that rollout then lacked (docs/planner.md,
  // "Stream batches").
  const std::span<const RequestSample> generated[] = {o.trajectories, o.rejected_trajectories};
  double total = 0;
  size_t count = 0;
  for (const std::span<const RequestSample> part : generated) {
    for (const RequestSample& s : part) total += static_cast<double>(s.total());
    count += part.size();
  }
  // Drift: this step's lengths against the history before it. A drift is a change point: the
  // lengths before it no longer describe the workload, so the history starts again from here.
  const double before = MeanTotal(history_);
  const bool drifted = o.step >= options_.warmup && before > 0 && count > 0 &&
                       std::abs(total / static_cast<double>(count) / before - 1) > options_.drift;
  if (drifted) history_.clear();
  tool_latencies_.Add(o.tool_latencies_s);
  // A step with more trajectories than the history holds leaves an evenly spaced sample of them,
  // trained and rejected alike: its last ones alone would be the rejected groups, its longest
  // (8,192 GPUs: 16,384 trained and about 3,700 rejected a step against 4,096 kept), and every
  // step then read as a drift from a workload twice as long as the one served.
  const auto capacity = static_cast<size_t>(options_.history);
  const size_t kept = std::min(count, capacity);
  const size_t trained = generated[0].size();
  for (size_t i = 0; i < kept; ++i) {
    const size_t at = count > capacity ? i * count / capacity : i;
    history_.push_back(at < trained ? generated[0][at] : generated[1][at - trained]);
    if (history_.size() > capacity) history_.pop_front();
  }
  return drifted;
}

PlanDecision GrpPlanner::Decide(const StepObservation& o, std::string trigger) {
  PlanDecision decision;
  decision.trigger = std::move(trigger);
  if (o.layout.colocated) {
    decision.reason = "time-shared: every GPU already rolls out and trains; kept";
    return decision;
  }
  std::vector<RequestSample> history = History();
  SortHistory(history);  // once for the current layout's prediction, the search and each move
  std::optional<CandidatePlan> current = Predict(o.layout, history);
  if (!current) {
    decision.reason = "the layout in force is infeasible for the cost model; kept";
    return decision;
  }
  // The layout in force is never predicted slower than it measured over its last three steps
  // (after the pipeline filled, all on this layout): a length history that moves an instance
  // across kPacedHeadroom would otherwise turn a layout that keeps up into a thrashing one.
  if (Filled(o) && o.step - 2 > last_change_step_ && !o.transition_in_flight) {
    current->step_s = std::min(current->step_s, MeanRecent(&RecentStep::step_s));
  }
  decision.current_step_s = current->step_s;
  decision.next_step_s = current->step_s;
  const int remaining = std::max(0, context_.steps - (o.step + 1));
  // A search that fails leaves the elastic moves; the decision says why.
  std::string searched;
  const std::optional<Move> best = BestMove(o.layout, *current, history, remaining, &searched);
  if (!best) {
    decision.reason = "no feasible candidate; kept" + searched;
    return decision;
  }
  decision.candidate_step_s = best->step_s;
  decision.transition_s = best->transition_s;
  decision.gain_s = best->gain_s;
  const double relative = (current->step_s - best->step_s) / current->step_s;
  if (best->gain_s <= 0 || relative < options_.min_gain) {
    decision.reason = StrFormat(
        "kept: the best candidate (%s) saves %.1f%% per step, %.1f s over %d steps net of a "
        "%.1f s transition%s",
        best->layout.ToString().c_str(), 100 * relative, best->gain_s, remaining,
        best->transition_s, searched.c_str());
    return decision;
  }
  decision.layout = best->layout;
  decision.next_step_s = best->step_s;
  decision.reason = StrFormat(
      "moved: %.1f%% faster per step (%.1f s -> %.1f s predicted), %.1f s saved over %d steps "
      "net of a %.1f s transition%s",
      100 * relative, current->step_s, best->step_s, best->gain_s, remaining, best->transition_s,
      searched.c_str());
  last_change_step_ = o.step;
  return decision;
}

std::optional<GrpPlanner::Move> GrpPlanner::BestMove(const backend::Layout& layout,
                                                     const CandidatePlan& current,
                                                     std::span<const RequestSample> history,
                                                     int remaining, std::string* note) const {
  std::vector<backend::Layout> candidates = ElasticMoves(layout);
  auto searched =
      Search(*context_.cost, Space(true, &layout.train), Shape(), history, options_.mode);
  if (!searched.ok()) {
    *note = StrFormat(" (the search failed: %s; elastic moves only)",
                      searched.status().message().c_str());
  } else if (searched->best) {
    auto plan = LayoutOf(*searched->best, context_.gpus_per_node);
    if (plan.ok() && !(*plan == layout)) candidates.push_back(std::move(*plan));
  }
  std::optional<Move> best;
  for (const backend::Layout& candidate : candidates) {
    // A move does not bet on the unsaturated regime at the trainer's pace (rollout_model.h).
    const std::optional<CandidatePlan> predicted = Predict(candidate, history, std::nullopt, false);
    if (!predicted) continue;
    const double transition = TransitionSeconds(layout, candidate, history);
    const double gain = (current.step_s - predicted->step_s) * remaining - transition;
    if (!best || gain > best->gain_s) best = Move{candidate, gain, predicted->step_s, transition};
  }
  return best;
}

}  // namespace libra::planner
