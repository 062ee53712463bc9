#include "planner/heddle_planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "common/strings.h"
#include "model/partition.h"
#include "planner/elastic_pool.h"

namespace libra::planner {
namespace {

std::string MixName(const std::vector<int>& tps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < tps.size();) {
    size_t j = i;
    while (j < tps.size() && tps[j] == tps[i]) ++j;
    parts.push_back(StrFormat("tp%dx%zu", tps[i], j - i));
    i = j;
  }
  return StrJoin(parts, " ");
}

}  // namespace

Result<std::unique_ptr<Planner>> HeddlePlanner::Create(const recipe::OptionTable& options) {
  recipe::OptionReader reader(options);
  HeddlePlannerOptions o;
  if (reader.Has("train_gpus"))
    o.train_gpus = static_cast<int>(reader.Int("train_gpus", 1, 1, 1 << 20));
  o.tp_degrees = ReadTpList(reader, "tp_degrees", o.tp_degrees, /*allow_empty=*/false);
  if (reader.Has("max_tp")) {
    o.max_tp = static_cast<int>(reader.Int("max_tp", 8, 1, 1 << 20));
    if (*o.max_tp < *std::min_element(o.tp_degrees.begin(), o.tp_degrees.end())) {
      reader.Error("max_tp", StrFormat("%d is below every TP degree of tp_degrees", *o.max_tp));
    }
  }
  o.retune_steps = static_cast<int>(reader.Int("retune_steps", o.retune_steps, 0, 1 << 20));
  o.min_gain = reader.Double("min_gain", o.min_gain, 0, 1);
  o.history = static_cast<int>(reader.Int("history", o.history, 1, 1 << 20));
  o.max_units = static_cast<int>(reader.Int("max_units", o.max_units, 2, 4096));
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Planner>(std::make_unique<HeddlePlanner>(std::move(o)));
}

HeddlePlanner::HeddlePlanner(HeddlePlannerOptions options) : options_(std::move(options)) {
  std::vector<int>& tps = options_.tp_degrees;
  std::sort(tps.begin(), tps.end(), std::greater<>());
  tps.erase(std::unique(tps.begin(), tps.end()), tps.end());
  if (options_.max_tp) std::erase_if(tps, [&](int tp) { return tp > *options_.max_tp; });
}

std::vector<double> HeddlePlanner::Profile() const {
  const int n = std::max(1, context_.batch_trajectories * (context_.staleness + 1));
  std::vector<double> sorted;
  for (const TrajectorySize& t : history_) {
    sorted.push_back(static_cast<double>(t.generated_tokens));
  }
  std::vector<double> lengths;
  if (sorted.empty()) {
    lengths.assign(static_cast<size_t>(n), static_cast<double>(context_.typical_sequence_tokens));
    return lengths;
  }
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (int i = 0; i < n; ++i) {  // the (i + 0.5) / n quantiles, longest first
    const auto at = static_cast<size_t>((i + 0.5) / n * static_cast<double>(sorted.size()));
    lengths.push_back(sorted[std::min(at, sorted.size() - 1)]);
  }
  return lengths;
}

int64_t HeddlePlanner::ProfileContext() const {
  if (history_.empty()) return std::max<int64_t>(1, context_.typical_sequence_tokens / 2);
  double sum = 0;
  for (const TrajectorySize& t : history_) {
    sum += static_cast<double>(t.prompt_tokens) +
           static_cast<double>(t.generated_tokens + t.tool_tokens) / 2;
  }
  return std::max<int64_t>(1, std::llround(sum / static_cast<double>(history_.size())));
}

double HeddlePlanner::Makespan(std::vector<int> tps, const std::vector<double>& lengths,
                               int64_t context_tokens) const {
  const model::GroupStepModel steps(*context_.cost, context_tokens, context_.max_num_seqs);
  return Makespan(std::move(tps), lengths, steps, options_.max_units);
}

double HeddlePlanner::Makespan(std::vector<int> tps, const std::vector<double>& lengths,
                               const model::GroupStepModel& steps, int max_units) {
  std::sort(tps.begin(), tps.end(), std::greater<>());
  for (int tp : tps) {
    if (steps.Fit(tp) <= 0) return std::numeric_limits<double>::infinity();
  }
  return model::PresortedPartition(
             lengths, tps.size(),
             [&](size_t j, int64_t count) { return steps.StepSeconds(tps[j], count); }, max_units)
      .makespan;
}

std::vector<TpMix> HeddlePlanner::RankMixes(int gpus, const std::vector<double>& lengths,
                                            int64_t context_tokens) const {
  // Degrees that fit a node and hold one of the longest sequences.
  std::vector<int> degrees;
  for (int tp : options_.tp_degrees) {
    if (tp <= context_.gpus_per_node && context_.gpus_per_node % tp == 0 &&
        context_.cost->KvCapacityTokens(tp) >= context_.max_sequence_tokens) {
      degrees.push_back(tp);
    }
  }
  const model::GroupStepModel steps(*context_.cost, context_tokens, context_.max_num_seqs);
  std::vector<TpMix> mixes;
  std::vector<int> tps;
  std::function<void(size_t, int)> enumerate = [&](size_t d, int left) {
    if (left == 0) {
      if (PackSizes(context_.gpus_per_node, tps).ok()) {
        mixes.push_back(TpMix{tps, Makespan(tps, lengths, steps, options_.max_units)});
      }
      return;
    }
    if (d == degrees.size()) return;
    const int tp = degrees[d];
    const size_t before = tps.size();
    for (int count = left / tp; count >= 0; --count) {  // more of the larger TP first
      tps.resize(before);
      tps.insert(tps.end(), static_cast<size_t>(count), tp);
      enumerate(d + 1, left - count * tp);
    }
    tps.resize(before);
  };
  enumerate(0, gpus);
  std::erase_if(mixes, [](const TpMix& m) { return !std::isfinite(m.makespan_s); });
  std::stable_sort(mixes.begin(), mixes.end(),
                   [](const TpMix& a, const TpMix& b) { return a.makespan_s < b.makespan_s; });
  return mixes;
}

Result<Plan> HeddlePlanner::Initial(const PlanContext& context) {
  context_ = context;
  if (context.cost == nullptr) {
    return Status::InvalidArgument("the heddle planner needs a cost model to size its instances");
  }
  history_.assign(context.history.begin(), context.history.end());
  while (static_cast<int>(history_.size()) > options_.history) history_.pop_front();
  const int total = context.total_gpus();
  if (total < 2) {
    return Status::Unschedulable(
        "the heddle planner splits training and rollout: it needs at least 2 GPUs");
  }
  int train = 0;
  if (options_.train_gpus) {
    train = *options_.train_gpus;
  } else {
    train = context.nodes > 1 ? (context.nodes / 2) * context.gpus_per_node : total / 2;
  }
  if (train >= total) {
    return Status::Unschedulable(
        StrFormat("train_gpus = %d leaves no GPU for rollout (the cluster has %d)", train, total));
  }
  LIBRA_ASSIGN_OR_RETURN(model::TrainLayout train_layout, ChooseTrainLayout(context, train));
  const std::vector<double> lengths = Profile();
  const int64_t sequence_context = ProfileContext();
  const std::vector<TpMix> mixes = RankMixes(total - train, lengths, sequence_context);
  if (mixes.empty()) {
    return Status::Unschedulable(StrFormat(
        "no mix of rollout TP degrees fills %d GPUs in nodes of %d with room for a %lld-token "
        "sequence",
        total - train, context.gpus_per_node, static_cast<long long>(context.max_sequence_tokens)));
  }
  Plan plan;
  LIBRA_ASSIGN_OR_RETURN(plan.layout,
                         SplitLayout(train_layout, mixes.front().tps, context.gpus_per_node));
  plan.reason = StrFormat(
      "%s: predicted rollout makespan %.1f s for %zu trajectories, the least of %zu TP mixes "
      "(%s split)",
      MixName(mixes.front().tps).c_str(), mixes.front().makespan_s, lengths.size(), mixes.size(),
      options_.train_gpus ? "recipe's" : "default");
  for (size_t i = 0; i < mixes.size() && i < 5; ++i) {
    plan.explain.push_back(
        StrFormat("%s: %.1f s", MixName(mixes[i].tps).c_str(), mixes[i].makespan_s));
  }
  plan.explain.push_back(
      StrFormat("%zu mixes scored exhaustively on the group model", mixes.size()));
  return plan;
}

std::optional<PlanDecision> HeddlePlanner::OnStep(const StepObservation& observation) {
  for (const TrajectorySize& t : observation.trajectories) history_.push_back(t);
  while (static_cast<int>(history_.size()) > options_.history) history_.pop_front();
  if (options_.retune_steps == 0 || (observation.step + 1) % options_.retune_steps != 0) {
    return std::nullopt;
  }
  PlanDecision decision;
  decision.trigger = "retune";
  const backend::Layout& current = observation.layout;
  if (observation.transition_in_flight || current.colocated || current.instances.empty()) {
    decision.reason = "a transition is under way; kept";
    return decision;
  }
  std::vector<int> now;
  for (const backend::InstanceSpec& i : current.instances) now.push_back(i.tp);
  std::sort(now.begin(), now.end(), std::greater<>());
  const std::vector<double> lengths = Profile();
  const int64_t sequence_context = ProfileContext();
  const double current_s = Makespan(now, lengths, sequence_context);
  const std::vector<TpMix> mixes = RankMixes(current.rollout_gpus(), lengths, sequence_context);
  decision.current_step_s = current_s;
  if (mixes.empty()) {
    decision.reason = "no feasible TP mix; kept";
    return decision;
  }
  const TpMix& best = mixes.front();
  decision.candidate_step_s = best.makespan_s;
  if (best.tps == now || !(best.makespan_s < current_s)) {
    decision.reason = StrFormat("kept: %s is the best mix (predicted makespan %.1f s)",
                                MixName(now).c_str(), current_s);
    return decision;
  }
  auto target = SplitLayout(current.train, best.tps, context_.gpus_per_node);
  if (!target.ok()) {
    decision.reason = "kept: " + target.status().message();
    return decision;
  }
  // New instances load weights at their TP before serving (the simulator charges the same).
  const std::vector<bool> kept = KeptInstances(current, *target);
  double transition = 0;
  for (size_t i = 0; i < target->instances.size(); ++i) {
    if (i < kept.size() && kept[i]) continue;
    transition = std::max(transition,
                          context_.cost->RoleSwitchTime({model::SwitchDirection::kTrainToRollout,
                                                         target->instances[i].tp, current.train}));
  }
  const int remaining = std::max(0, context_.steps - observation.step - 1);
  const double gain = (current_s - best.makespan_s) * remaining - transition;
  const double relative = (current_s - best.makespan_s) / current_s;
  decision.transition_s = transition;
  decision.gain_s = gain;
  if (gain <= 0 || relative < options_.min_gain) {
    decision.reason = StrFormat(
        "kept: %s would cut the predicted makespan by %.1f%%, %.1f s over %d steps net of a "
        "%.1f s transition",
        MixName(best.tps).c_str(), 100 * relative, gain, remaining, transition);
    return decision;
  }
  decision.layout = *target;
  decision.reason = StrFormat(
      "moved: %s -> %s, predicted makespan %.1f s -> %.1f s, %.1f s saved over %d steps net of a "
      "%.1f s transition",
      MixName(now).c_str(), MixName(best.tps).c_str(), current_s, best.makespan_s, gain, remaining,
      transition);
  return decision;
}

}  // namespace libra::planner
